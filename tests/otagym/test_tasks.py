"""The benchmark tasks: registered versioned ids with fixed settings, a frozen evaluation set any client can play,
stored reference scores that a recomputation reproduces, and ``otagym evaluate`` agreeing with ``otagym compare``."""

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.wrappers import TimeAwareObservation

import otagym  # noqa: F401 - registers the tasks
from baselines.benchmark import task_scores
from baselines.receive_scaling.benchmark import offline_returns
from baselines.receive_scaling.evaluation import sample_realisations
from baselines.receive_scaling.references import BestConstant, OnlineOptimal, UniformRandom
from otagym.cli.commands import main
from otagym.tasks import (EVALUATION_SEEDS, TASKS, evaluation_options, normalized_score, reference_scores,
                          task_scenario)

ROOT = Path(__file__).resolve().parents[2]
IID, BLOCK = "otagym/ReceiveScalingIID-v0", "otagym/ReceiveScalingBlock-v0"


def zero_action(observation):
    """A ``module:function`` policy for ``otagym evaluate``: the price action a = 0 for every env."""
    return np.zeros(len(observation))


RECEIVE_SCALING = sorted(t for t in TASKS if TASKS[t].scheme == "receive_scaling")


@pytest.mark.parametrize("task_id", RECEIVE_SCALING)
def test_every_receive_scaling_task_is_registered_with_its_settings_and_horizon(task_id):
    task = TASKS[task_id]
    env = gym.make(task_id)
    assert env.spec.max_episode_steps == task.max_episode_steps == env.unwrapped.scenario.num_rounds == 500
    assert env.unwrapped.scenario == task_scenario(task_id, env.unwrapped.scenario.nu)
    formulation = ("cmdp", task.kwargs["action_type"]) if task.constrained else ("budget", "price")
    assert (env.unwrapped.core.reward_mode, env.unwrapped.core.action_type) == formulation
    check_env(env.unwrapped, skip_render_check=True)
    obs, _ = TimeAwareObservation(gym.make(task_id)).reset(seed=0)  # needs max_episode_steps from the spec alone
    assert obs.shape == (env.observation_space.shape[0] + 1,)
    vec = gym.make_vec(task_id, num_envs=3)  # the native vector env, given the spec's max_episode_steps
    assert vec.unwrapped.scenario == env.unwrapped.scenario and vec.num_envs == 3
    with pytest.raises(ValueError, match=r"max_episode_steps must be an integer >= 500 \(and <= 2\*\*63 - 1\) or None"):
        gym.make_vec(task_id, num_envs=2, max_episode_steps=100)


def test_the_evaluation_set_is_the_realisations_of_its_seeds_and_bad_requests_are_named():
    scenario = task_scenario(BLOCK)
    real = sample_realisations(scenario, EVALUATION_SEEDS[3:5])
    for i, seed in enumerate(EVALUATION_SEEDS[3:5]):
        options = evaluation_options(BLOCK, 0.04, seed)
        np.testing.assert_array_equal(options["distances_m"], real.distances_m[i])
        np.testing.assert_array_equal(options["channel_gains"], real.channel_gains[:, i])
    with pytest.raises(ValueError, match=r"nu must be one of \(0.01, 0.04, 0.16\)"):
        evaluation_options(BLOCK, 0.05, EVALUATION_SEEDS[0])
    np.testing.assert_array_equal(evaluation_options(BLOCK, 0.04, 7)["channel_gains"],  # any seed's realisation
                                  sample_realisations(scenario, [7]).channel_gains[:, 0])
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        evaluation_options(BLOCK, 0.04, -1)
    with pytest.raises(ValueError, match="seed 7 is outside the frozen evaluation set 10000..10031 of "
                                         "otagym/ReceiveScalingBlock-v0.*baselines.benchmark.normalized_score"):
        normalized_score(BLOCK, 0.04, [EVALUATION_SEEDS[0], 7], [0.0, 0.0])
    with pytest.raises(ValueError, match="task must be one of"):
        evaluation_options("otagym/Nope-v0", 0.04, EVALUATION_SEEDS[0])


def plain_loop_scores(task_id: str, nu: float, seeds, action: float) -> np.ndarray:
    """The normalised scores of a constant action played as a plain Gymnasium user plays the evaluation set: one
    episode per realisation, reset with :func:`evaluation_options` (under an unrelated seed), rewards summed."""
    env = gym.make(task_id)
    returns = []
    for seed in seeds:
        env.reset(seed=123, options=evaluation_options(task_id, nu, seed))
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(np.array([action], dtype=np.float32))
            total, done = total + reward, terminated or truncated
        returns.append(total)
    return normalized_score(task_id, nu, seeds, returns)


def test_a_plain_gymnasium_loop_scores_what_the_batched_evaluation_scores():
    seeds, nu, action = EVALUATION_SEEDS[:3], 0.04, 0.125  # an action float32 holds exactly
    batched = task_scores(lambda nus: BestConstant(nu=nus, action=action), BLOCK, seeds, nus=[nu])[str(nu)]
    np.testing.assert_allclose(plain_loop_scores(BLOCK, nu, seeds, action), batched, rtol=0, atol=1e-8)


@pytest.mark.slow
def test_a_sample_of_the_stored_reference_scores_is_recomputed():
    stored = reference_scores(BLOCK)
    assert stored["seeds"] == list(EVALUATION_SEEDS) and stored["nus"] == [0.01, 0.04, 0.16]
    assert set(stored["scores"]) == {"UniformRandom", "EqualAlloc", "BestConstant", "AdaScaleTrained", "OnlineOptimal"}
    for per_nu in stored["scores"]["EqualAlloc"].values():
        np.testing.assert_allclose(per_nu, 0.0, atol=1e-9)  # 0 by definition of the score
    seeds, nu = EVALUATION_SEEDS[:2], 0.16
    index = [stored["seeds"].index(s) for s in seeds]
    assert stored["anchors"] == ["EqualAlloc", "OfflineOptimal"]
    zero, hundred = stored["anchor_returns"][str(nu)]
    np.testing.assert_allclose(offline_returns(BLOCK, nu, seeds), np.array(hundred)[index], rtol=1e-12)
    assert zero == [0.0] * len(EVALUATION_SEEDS)  # EqualAlloc's return in budget mode
    online = task_scores(lambda nus: OnlineOptimal(nu=nus), BLOCK, seeds, nus=[nu])[str(nu)]
    np.testing.assert_allclose(online, np.array(stored["scores"]["OnlineOptimal"][str(nu)])[index], rtol=1e-9)
    random = task_scores(lambda nus: UniformRandom(nu=nus), BLOCK, EVALUATION_SEEDS, nus=[nu])[str(nu)]
    np.testing.assert_allclose(random, stored["scores"]["UniformRandom"][str(nu)], rtol=1e-9)
    # the floor is below the references and the ceiling above them, realisation by realisation in the mean
    means = {name: np.mean(v[str(nu)]) for name, v in stored["scores"].items()}
    assert means["UniformRandom"] < means["BestConstant"] < means["OnlineOptimal"] < 100


@pytest.mark.slow
def test_evaluate_plays_an_analytic_policy_a_function_and_a_trained_agent_as_compare_does(tmp_path, capsys):
    out = tmp_path / "equal.json"
    assert main(["evaluate", IID, "EqualAlloc", "--reps", "50", "--seeds", "4", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["task"] == IID and np.shape(record["scores"]["0.04"]) == (1, 4)  # one run x four realisations
    np.testing.assert_allclose(record["scores"]["0.04"], 0.0, atol=1e-9)
    assert "EqualAlloc IQM [95% CI]" in capsys.readouterr().out

    quick = ["--reps", "50", "--seeds", "2", "--out", str(out), "--force"]  # each replaces the last
    assert main(["evaluate", IID, "test_tasks:zero_action", *quick]) == 0
    zero = json.loads(out.read_text())
    expected = task_scores(lambda nus: BestConstant(nu=nus, action=0.0), IID, EVALUATION_SEEDS[:2], nus=[0.01])
    assert zero["seeds"] == list(EVALUATION_SEEDS[:2])
    np.testing.assert_allclose(zero["scores"]["0.01"], [expected["0.01"]], rtol=1e-12)

    model = ROOT / "agents" / "zoo" / "iid" / "ppo" / "model.zip"
    pytest.importorskip("stable_baselines3")
    assert main(["evaluate", IID, str(model), *quick]) == 0
    record = json.loads(out.read_text())
    agent = record["scores"]["0.04"][0]  # the one run
    assert record["name"] == "ppo"  # model.zip is named by its folder: the zoo's models do not share a results file
    assert main(["compare", "--policies", f"PPO:{model}", "--nu", "0.04", "--seeds", "2", "--seed-start",
                 str(EVALUATION_SEEDS[0]), "--out", str(tmp_path / "cmp"), "--no-progress"]) == 0
    rows = json.loads((tmp_path / "cmp" / "compare.json").read_text())["rows"]
    # evaluate plays the realisations batched, compare one at a time: a network's forward pass over a batch rounds
    # differently in float32 (tests/otagym/cli/test_evaluate.py: within 1e-6 at every nu)
    np.testing.assert_allclose(rows[0]["score_seeds"], agent[:2], rtol=0, atol=1e-6)


@pytest.mark.parametrize("policy,message", [
    ("Nope", "policy must be an analytic policy"), ("test_tasks:missing", "cannot import missing"),
    (str(ROOT / "tests"), "expected one best_model.zip or one model .zip")])
def test_evaluate_names_a_policy_it_cannot_play(policy, message, capsys):
    assert main(["evaluate", IID, policy]) == 2
    err = capsys.readouterr().err
    assert err.startswith("otagym evaluate: error: ") and message in err and err.count("\n") == 1



def test_the_seed_sets_live_together_and_are_disjoint():
    """Every realisation set is defined in otagym.tasks: the references tune on the first training realisations of
    the suite, and no set shares a seed with another (the training sets aside, one inside the other)."""
    from otagym import tasks

    assert tasks.TUNING_SEEDS == tasks.BENCHMARK_TRAINING_SEEDS[:len(tasks.TUNING_SEEDS)]
    sets = [tasks.EVALUATION_SEEDS, tasks.FORMULATION_VALIDATION_SEEDS, tasks.BENCHMARK_EVALUATION_SEEDS,
            tasks.BENCHMARK_VALIDATION_SEEDS, tasks.BENCHMARK_TRAINING_SEEDS]
    assert sum(len(s) for s in sets) == len(set().union(*sets))
