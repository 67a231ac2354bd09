"""The CDPB and anonymous-OTA benchmark tasks: order-one observations, rewards in units of a reference, a cost whose
episode sum is T exactly at the constraint, realisations that replay, the references' stored scores, and the planner
checked against an independent minimiser."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import TimeAwareObservation
from scipy.optimize import minimize_scalar

import otagym  # noqa: F401 - registers the tasks
from baselines.benchmark import (ConstantAction, anchor_returns, best_constant_action, episode_returns,
                                 references, task_scores)
from baselines.cdpb.policies import StageTwo
from otagym.schemes.anonymous import get_anonymous_scenario
from otagym.schemes.cdpb import get_cdpb_scenario, utility
from otagym.env import OTAPrivacyEnv, OTAPrivacyVectorEnv
from otagym.tasks import EVALUATION_SEEDS, TASKS, reference_scores
from test_tasks import plain_loop_scores

CDPB, ANON = "otagym/CDPB-v1", "otagym/AnonymousOTA-v0"
BUDGET = {CDPB: 1.0, ANON: 8.0}


@pytest.mark.parametrize("task_id", [CDPB, ANON])
def test_the_task_is_registered_with_its_horizon_checked_and_vectorises(task_id):
    task = TASKS[task_id]
    env = gym.make(task_id)
    assert env.spec.max_episode_steps == task.max_episode_steps == env.unwrapped.scenario.num_rounds
    assert task.cost_limit == task.max_episode_steps and task.eval_nus == (BUDGET[task_id],)
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    check_env(env.unwrapped, skip_render_check=True)
    obs, _ = TimeAwareObservation(gym.make(task_id)).reset(seed=0)
    assert obs.shape == (env.observation_space.shape[0] + 1,)
    vec = gym.make_vec(task_id, num_envs=3)
    assert vec.unwrapped.scenario == env.unwrapped.scenario


@pytest.mark.parametrize("task_id", [CDPB, pytest.param(ANON, marks=pytest.mark.slow)])  # T = 1000: slow
def test_observations_stay_of_order_one_under_random_and_extreme_actions(task_id):
    """Every entry within [-10, 10] before clipping (the clip is never active), under uniform and +-1 actions."""
    task = TASKS[task_id]
    n = 64
    env = OTAPrivacyVectorEnv(n, **task.kwargs, autoreset_mode=AutoresetMode.SAME_STEP)
    rng = np.random.default_rng(0)
    for policy in ("uniform", "extreme"):
        obs, _ = env.reset(seed=1)
        for _ in range(task.max_episode_steps):
            a = rng.uniform(-1, 1, (n, 1)) if policy == "uniform" else rng.choice([-1.0, 1.0], (n, 1))
            obs, reward, term, _, info = env.step(a)
            for o in (obs, info["final_obs"] if term.any() else obs):
                assert np.all(np.abs(o) < 10.0)
            assert np.isfinite(reward).all()
        assert np.abs(info["final_obs"]).max() > 0.3  # the budget entries move


def test_cdpb_cost_sums_to_t_eps_over_eps_bar_and_the_reward_to_minus_g_over_its_scale():
    task = TASKS[CDPB]
    env = OTAPrivacyEnv(**task.kwargs)
    s = env.scenario
    env.reset(seed=3)
    cost = ret = 0.0
    for _ in range(s.num_rounds):
        _, r, _, _, info = env.step(np.array([0.3], dtype=np.float32))
        cost, ret = cost + info["cost"], ret + r
    eps = info["rdp_cumulative"].max()
    assert cost == pytest.approx(s.num_rounds * eps / s.epsilon_max, rel=1e-12)
    assert ret == pytest.approx(-(s.lambda_convergence * info["gamma"] + s.lambda_privacy * eps)
                                / task.kwargs["reward_scale"], rel=1e-12)
    # the scale is MaxRho's expected utility (24) over the task's tau, to 3 digits
    assert utility(s, s.rho_max, s.num_rounds) == pytest.approx(task.kwargs["reward_scale"], rel=2e-3)


@pytest.mark.slow
def test_anonymous_cost_is_the_share_of_the_rdp_budget_that_implies_the_target():
    task = TASKS[ANON]
    env = OTAPrivacyEnv(**task.kwargs)
    s = env.scenario
    env.reset(seed=3)
    cost = 0.0
    for _ in range(s.num_rounds):
        _, _, _, _, info = env.step(np.array([0.1], dtype=np.float32))
        cost += info["cost"]
    budget = 8.0 - np.log(1e5) / 7.0  # eps = E_alpha + log(1/delta) / (alpha - 1), alpha = 8 (Mironov 2017, Prop. 3)
    assert cost == pytest.approx(s.num_rounds * info["rdp_cumulative"] / budget, rel=1e-12)
    with pytest.raises(ValueError, match=r"target_epsilon must exceed log\(1/delta\) / \(alpha - 1\) = 1.64"):
        OTAPrivacyEnv(scheme="anonymous", target_epsilon=1.5)
    assert "cost" not in OTAPrivacyEnv(scheme="anonymous").reset(seed=0)[1]


def test_reward_scales_make_the_zero_anchor_return_about_minus_one():
    """Over the 32 evaluation realisations (the stored anchors' returns, which the test below recomputes in part)."""
    for task_id in (CDPB, ANON):
        zero, hundred = reference_scores(task_id)["anchor_returns"][str(BUDGET[task_id])]
        assert np.mean(zero) == pytest.approx(-1.0, abs=0.05)
        assert np.mean(hundred) > np.mean(zero)


@pytest.mark.slow
def test_a_replayed_realisation_plays_the_episode_it_was_recorded_from():
    """CDPB: the gains an episode reported; anonymous: who transmitted and the batches. Replayed under another seed,
    the same actions give the same rewards."""
    cdpb = OTAPrivacyEnv(**TASKS[CDPB].kwargs)
    cdpb.reset(seed=5)
    gains, rewards = [], []
    for t in range(100):
        gains.append(cdpb.core.state.gains[0].copy())
        rewards.append(cdpb.step(np.array([np.sin(t)], dtype=np.float32))[1])
    cdpb.reset(seed=99, options={"channel_gains": np.array(gains)})
    replayed = [cdpb.step(np.array([np.sin(t)], dtype=np.float32))[1] for t in range(100)]
    np.testing.assert_array_equal(replayed, rewards)

    anon = OTAPrivacyEnv(**TASKS[ANON].kwargs)
    anon.reset(seed=5)
    power, batch, rewards = [], [], []
    threshold = anon.core.threshold
    for t in range(1000):
        _, r, _, _, info = anon.step(np.array([np.cos(t)], dtype=np.float32))
        power.append(np.where(info["participating"], threshold, 0.0))
        batch.append(info["batch_size"])
        rewards.append(r)
    anon.reset(seed=99, options={"channel_gains": np.array(power), "batch_sizes": np.array(batch)})
    replayed = [anon.step(np.array([np.cos(t)], dtype=np.float32))[1] for t in range(1000)]
    np.testing.assert_array_equal(replayed, rewards)
    with pytest.raises(ValueError, match=r"batch_sizes must be whole numbers of at most a\(t\) n"):
        anon.reset(options={"channel_gains": np.array(power), "batch_sizes": np.array(batch) + 10_000})
    with pytest.raises(ValueError, match="batch_sizes needs channel_gains too"):
        anon.reset(options={"batch_sizes": np.array(batch)})


@pytest.mark.parametrize("task_id", [CDPB, pytest.param(ANON, marks=pytest.mark.slow)])  # T = 1000: slow
def test_a_plain_gymnasium_loop_scores_what_the_batched_evaluation_scores(task_id):
    seeds, nu, action = EVALUATION_SEEDS[:2], BUDGET[task_id], 0.125
    batched = task_scores(lambda nus: ConstantAction(action), task_id, seeds)[str(nu)]
    np.testing.assert_allclose(plain_loop_scores(task_id, nu, seeds, action), batched, rtol=0, atol=1e-8)


@pytest.mark.slow  # replays references: 11-25 s
@pytest.mark.parametrize("task_id", [CDPB, ANON])
def test_a_sample_of_the_stored_reference_scores_is_recomputed(task_id):
    stored = reference_scores(task_id)
    key = str(BUDGET[task_id])
    task = TASKS[task_id]
    assert stored["anchors"] == list(task.anchors) and list(stored["scores"]) == list(references(task_id))
    seeds = list(EVALUATION_SEEDS[:3])
    zero, hundred = anchor_returns(task_id, BUDGET[task_id], seeds)
    np.testing.assert_allclose(zero, np.array(stored["anchor_returns"][key][0])[:3], rtol=1e-12)
    np.testing.assert_allclose(hundred, np.array(stored["anchor_returns"][key][1])[:3], rtol=1e-12)
    name = list(stored["scores"])[-1]  # the analytic reference (the planner, the calibrated sigma)
    factory, overrides = references(task_id)[name]
    scores = task_scores(lambda nus: factory(), task_id, seeds, **overrides)[key]
    np.testing.assert_allclose(scores, stored["scores"][name][key][:3], rtol=1e-9)
    np.testing.assert_allclose(stored["scores"][task.anchors[0]][key], 0.0, atol=1e-9)
    np.testing.assert_allclose(stored["scores"][task.anchors[1]][key], 100.0, atol=1e-9)
    means = {n: np.mean(v[key]) for n, v in stored["scores"].items()}
    costs = {n: np.mean(v[key]) for n, v in stored["cost_ratios"].items()}
    assert means["UniformRandom"] < 0 and costs["BestConstant"] <= 1.0  # the 100 meets the constraint in the mean
    if task_id == CDPB:  # the planner is the online optimum up to its tuning, on the threshold; MaxRho breaks it
        assert 90 < means[name] < 110 and 0.95 < costs[name] < 1.05 and costs["MaxRho"] > 1.5
    else:  # CalibratedSigma meets (8, 1e-5) by its best order, not by the cost's alpha = 8: more reward, more cost
        assert means[name] > 100 and costs[name] > 1.0


def test_stage_two_is_the_constrained_minimiser_of_g():
    """CDPB's online optimum is about the best constant rho (i.i.d. rounds, no CSI, checked below); Stage II computes
    it at the task's tau from the closed forms. Stage II is scipy's bounded minimiser of G(rho, tau) where (25c) is
    slack (the paper's eps-bar = 100), and its bounded minimiser below the root of tau eps_1(rho) = eps-bar (brentq)
    where it binds (the task's eps-bar = 1)."""
    from scipy.optimize import brentq

    from otagym.schemes.cdpb import expected_round_terms

    for eps_bar, binds in ((100.0, False), (1.0, True)):
        s = get_cdpb_scenario("paper-cdpb", num_rounds=100, epsilon_max=eps_bar)
        plan = StageTwo()
        plan.reset(s)
        high = brentq(lambda r: 100 * float(expected_round_terms(s, r)[1]) - eps_bar, 1e-3, 1.0, xtol=1e-14) \
            if binds else 1.0
        found = minimize_scalar(lambda r: float(utility(s, r, 100)), bounds=(1e-3, high), method="bounded",
                                options={"xatol": 1e-12})
        assert plan.rho == pytest.approx(found.x, rel=1e-5)
        assert (plan.rho == pytest.approx(high, rel=1e-9)) == binds
    with pytest.raises(ValueError, match="epsilon_max = 1e-06 is below"):
        StageTwo().reset(get_cdpb_scenario("paper-cdpb", num_rounds=100, epsilon_max=1e-6))
    with pytest.raises(ValueError, match="needs eps_1 increasing in rho"):
        StageTwo(accounting="theorem1").reset(s)
    assert get_anonymous_scenario().num_rounds == TASKS[ANON].max_episode_steps


@pytest.mark.slow  # tunes the constant on the training realisations: 10 s
def test_the_best_constant_plays_about_the_planners_rho():
    plan = StageTwo()
    plan.reset(get_cdpb_scenario("paper-cdpb", num_rounds=100, epsilon_max=TASKS[CDPB].kwargs["epsilon_max"]))
    a = best_constant_action(CDPB)
    rho = 1e-3 + (1 - 1e-3) * (a + 1) / 2  # the task's linear action map
    assert rho == pytest.approx(plan.rho, rel=0.05)


def test_episode_returns_do_not_depend_on_the_batch_they_are_played_in():
    seeds = list(EVALUATION_SEEDS[:4])
    both = episode_returns(ConstantAction(0.2), CDPB, seeds)
    np.testing.assert_array_equal(episode_returns(ConstantAction(0.2), CDPB, seeds[2:]), both[2:])


def half_action(observation):
    """A ``module:function`` policy for ``otagym evaluate``: a = 0.125 in every env."""
    return np.full(len(observation), 0.125)


@pytest.mark.parametrize("task_id", [CDPB, pytest.param(ANON, marks=pytest.mark.slow)])  # T = 1000: slow
def test_evaluate_plays_the_tasks_references_and_a_callable(task_id, tmp_path):
    from otagym.cli.commands import main

    out = tmp_path / "e.json"
    key, seeds = str(BUDGET[task_id]), EVALUATION_SEEDS[:2]
    name = list(references(task_id))[-1]
    assert main(["evaluate", task_id, name, "--reps", "50", "--seeds", "2", "--out", str(out)]) == 0
    import json

    np.testing.assert_allclose(json.loads(out.read_text())["scores"][key],  # one run x two realisations
                               [reference_scores(task_id)["scores"][name][key][:2]], rtol=1e-9)
    assert main(["evaluate", task_id, "test_scheme_tasks:half_action", "--reps", "50", "--seeds", "2", "--out",
                 str(out), "--force"]) == 0  # replaces the first result
    expected = task_scores(lambda nus: ConstantAction(0.125), task_id, seeds)[key]
    np.testing.assert_allclose(json.loads(out.read_text())["scores"][key], [expected], rtol=1e-12)
    assert main(["evaluate", task_id, "EqualAlloc"]) == 2  # a receive-scaling policy is not one of this task's
