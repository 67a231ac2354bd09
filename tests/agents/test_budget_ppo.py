"""agents.budget_ppo: the policy's mapping to the task's own action equals the wrapper's, the shaping potential's closed
points, the settings refused at the door, and (slow) a short run of each batched trainer that `otagym train`/`evaluate`
and SB3 play."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import otagym  # noqa: F401
from agents.budget_ppo import SPEND_TASKS, BudgetPPOSettings, FairShareValue, env_actions, train_budget_ppo
from otagym.env import OTAPrivacyVectorEnv
from otagym.schemes.receive_scaling.actions import spend_action
from otagym.tasks import BENCHMARK_TRAINING_SEEDS, TASKS
from otagym.wrappers import RelativeSpendVector, relative_spend

TASK = "otagym/ReceiveScalingCMDP-v1"
T = TASKS[TASK].max_episode_steps


def test_spend_tasks_are_the_suites_spend_tasks():
    assert SPEND_TASKS == ("otagym/ReceiveScalingCMDP-v1", "otagym/ReceiveScalingCMDPGaussMarkov-v0",
                           "otagym/ReceiveScalingCMDPBlock-v0")


def test_policy_mapping_from_the_observation_equals_the_wrappers_ledger():
    """What a shipped model plays on the raw task (budget left and rounds left read from the float32 observation)
    is what the wrapper it trained through plays (its exact ledger), round by round, for random relative actions."""
    n, rng = 8, np.random.default_rng(3)
    native = OTAPrivacyVectorEnv(n, **TASKS[TASK].kwargs, autoreset_mode=AutoresetMode.SAME_STEP)
    env = RelativeSpendVector(native, floor=0.5)
    obs, _ = env.reset(seed=5)
    for _ in range(T):
        relative = rng.uniform(-1, 1, n)
        ledger = spend_action(relative_spend(relative, env.ledger.budget_left, env.ledger.rounds_left, floor=0.5),
                              1.0)
        # the observation's float32 budget_left x T is within ~3e-5 of B: where a cap binds, the actions within 1e-5
        np.testing.assert_allclose(env_actions(relative, obs, T, floor=0.5)[:, 0], ledger, atol=1e-5)
        obs, *_ = env.step(relative[:, None])


def test_fair_share_value_is_zero_at_equal_alloc_and_falls_as_the_budget_runs_dry():
    value = FairShareValue(TASK, BENCHMARK_TRAINING_SEEDS[:4], np.array([0.01, 0.16]))
    # g(1; nu) is EqualAlloc's round: the reward is the leakage saved over it, 0 exactly
    assert value.per_round(np.array([1.0, 1.0]), np.array([0.01, 0.16])) == pytest.approx([0.0, 0.0], abs=1e-12)
    env = gym.make(TASK)
    obs, _ = env.reset(seed=0, options={"nu": 0.16})
    reference = env.unwrapped.core.log10_nu_ref
    assert value(obs[None], reference)[0] == pytest.approx(0.0, abs=1e-6)  # the float32 observation
    g = value.per_round(np.array([0.0, 0.1, 0.5, 1.0, 3.0]), np.full(5, 0.16))
    assert np.all(np.diff(g) > 0)  # spending more each round leaks less
    # mid-episode: after 100 rounds at 2 nu, B = 300 over k = 400 rounds left, F = 0.75 nu: Phi = 400 g(0.75; 0.16)
    for _ in range(100):
        obs, *_ = env.step(np.full(1, spend_action(2.0, 1.0), dtype=np.float32))
    expected = 400 * value.per_round(np.array([0.75]), np.array([0.16]))[0]
    assert value(obs[None], reference)[0] == pytest.approx(expected, rel=1e-4)


def test_a_fresh_models_predict_is_env_actions_of_its_relative_mean():
    """The SB3 model's ``predict`` (deterministic) is :func:`env_actions` of its policy's mean relative action."""
    import torch

    from agents.budget_ppo import new_model

    model = new_model(TASK, BudgetPPOSettings(), 0)
    env = gym.make(TASK)
    obs, _ = env.reset(seed=2)
    for _ in range(37):
        obs, *_ = env.step(env.action_space.sample())
    batch = np.stack([obs, obs * 0.9])
    with torch.no_grad():
        mean = model.policy.get_distribution(torch.as_tensor(batch)).get_actions(deterministic=True).numpy()
    expected = env_actions(mean, batch, T, floor=model.policy.floor)
    np.testing.assert_allclose(model.predict(batch, deterministic=True)[0], expected, rtol=1e-6)


@pytest.mark.parametrize("field,value,match", [("num_envs", 0, "num_envs"), ("minibatches", 3, "minibatches"),
                                               ("gae_lambda", 1.5, "gae_lambda"), ("learning_rate", 0.0,
                                                                                   "learning_rate"),
                                               ("reward_gamma", 0.99, "shaping adds Phi")])
def test_settings_refuse_bad_values_naming_them(field, value, match):
    with pytest.raises(ValueError, match=match):
        BudgetPPOSettings(**{field: value})


def test_trainer_refuses_a_task_without_the_spend_action(tmp_path):
    with pytest.raises(ValueError, match="spend tasks"):
        train_budget_ppo("otagym/ReceiveScalingCMDPLogX-v0", tmp_path / "run")


@pytest.mark.slow
@pytest.mark.parametrize("algo,steps", [("budget_ppo", 2), ("budget_apg", 2 * 64 * T)])
def test_a_short_run_trains_ships_and_plays_on_the_raw_task(algo, steps, tmp_path):
    """One iteration (a rollout; budget_apg: two gradient steps) through `otagym train`; the model is an SB3 PPO zip
    that `otagym evaluate` scores on the task, and that SB3's own ``predict`` plays in the env made with its
    ``run.json``'s ``env_kwargs`` (budget_ppo: the task's own; budget_apg: its budget-mode price action), feasible on
    every episode (neither action can break the limit)."""
    run = tmp_path / "run"
    cli = [sys.executable, "-m", "otagym.cli"]
    done = subprocess.run(cli + ["train", "--algo", algo, "--task", TASK, "--steps", str(steps), "--run-dir",
                                 str(run), "--no-progress"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    meta = json.loads((run / "run.json").read_text())
    assert meta["algo"] == algo and meta["selected"]["steps"] == meta["total_timesteps"] >= steps
    again = subprocess.run(cli + ["train", "--algo", algo, "--task", TASK, "--run-dir", str(run),
                                  "--resume"], capture_output=True, text=True, check=False)
    assert again.returncode == 2 and "--resume" in again.stderr
    out = tmp_path / "e.json"
    scored = subprocess.run(cli + ["evaluate", TASK, str(run / "model.zip"), "--seeds", "4", "--out", str(out)],
                            capture_output=True, text=True, check=False)
    assert scored.returncode == 0, scored.stderr
    assert "cost" in json.dumps(json.loads(out.read_text()))
    from stable_baselines3 import PPO

    model = PPO.load(run / "model.zip", device="cpu")
    env = gym.make(TASK, **meta["env_kwargs"])
    obs, _ = env.reset(seed=1)
    total, done = 0.0, False
    while not done:
        obs, _, terminated, truncated, info = env.step(model.predict(obs, deterministic=True)[0])
        total += info["cost"]
        done = terminated or truncated
    assert total <= T * (1 + 1e-6)
