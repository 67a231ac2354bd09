"""The benchmark suite: its tasks, its three disjoint seed sets, the feasible score, the room between its floor and
its ceiling in the stored references, the tail statistic, the constrained search's objective and its shipped agents.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import otagym  # noqa: F401 - registers the tasks
from baselines.benchmark import aggregate, best_constant_action, cvar, iqm_of
from otagym.tasks import (BENCHMARK, BENCHMARK_EVALUATION_SEEDS, BENCHMARK_TRAINING_SEEDS,
                          BENCHMARK_VALIDATION_SEEDS, COST_TOLERANCE, EVALUATION_SEEDS, TASKS, feasible_score,
                          reference_scores)


def test_the_suite_has_four_constrained_tasks_on_128_frozen_realisations_and_disjoint_seed_sets():
    assert len(BENCHMARK) >= 4
    for task_id in BENCHMARK:
        task = TASKS[task_id]
        assert task.constrained and task.eval_seeds == BENCHMARK_EVALUATION_SEEDS
        spec = gym.spec(task_id)  # the cost limit travels with the task, as Safety-Gymnasium's does
        assert spec.kwargs == {**task.kwargs, "cost_limit": 500.0} and spec.max_episode_steps == 500
    assert len(BENCHMARK_EVALUATION_SEEDS) == 128 and len(BENCHMARK_VALIDATION_SEEDS) == 32
    from baselines.receive_scaling.references import TRAIN_SEEDS

    more_test = set(range(30_000, 30_128))  # crn_search's --more-test seeds of the formulation tasks
    sets = [set(BENCHMARK_EVALUATION_SEEDS), set(BENCHMARK_VALIDATION_SEEDS), set(BENCHMARK_TRAINING_SEEDS),
            set(EVALUATION_SEEDS), set(range(20_000, 20_016)), more_test]
    for i, a in enumerate(sets):
        for b in sets[i + 1:]:
            assert not a & b
    assert set(TRAIN_SEEDS) <= set(BENCHMARK_TRAINING_SEEDS)
    with pytest.raises(gym.error.DeprecatedEnv):  # the constrained task's v0 is superseded, as Gymnasium says
        gym.make("otagym/ReceiveScalingCMDP-v0")


def test_the_feasible_score_puts_an_overspending_episode_below_the_floor_by_100_a_unit_over():
    scores = np.array([50.0, 50.0, -20.0, 120.0, 80.0])
    costs = np.array([1.0, 1.0 + 2 * COST_TOLERANCE, 1.3, 1.01, 1.0 + COST_TOLERANCE / 2])
    floor = np.array([-7.0, -7.0, -900.0, -5e6, -3.0])
    np.testing.assert_allclose(feasible_score(scores, costs, floor),
                               [50.0, -7.0 - 200 * COST_TOLERANCE, -930.0, -5e6 - 1.0, 80.0], rtol=1e-12)
    runs = feasible_score(np.stack([scores, scores]), costs, floor)  # (runs, realisations): the floor per column
    np.testing.assert_array_equal(runs[0], runs[1])


@pytest.mark.parametrize("task_id", BENCHMARK)
@settings(max_examples=5, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0.01, 0.04, 0.16]))
def test_no_episode_scores_below_the_violation_floor_so_every_overspending_one_ranks_below_every_feasible_one(
        task_id, seed, nu):
    """The violation floor (FullPower: x_max every round, nothing spent) leaks the most on every realisation, so any
    policy's raw score there is at least its stored score, and the feasible score of an episode over the limit is
    below that of every feasible episode on its realisation. Random actions, uniform over the task's action range,
    each realisation's mix of overspending and feasible episodes."""
    from baselines.benchmark import task_scores_and_costs
    from baselines.receive_scaling.policies import ActionPolicy

    class Random(ActionPolicy):  # env actions uniform on [-1, u_k] (u_k uniform on [-1, 1], one per episode)
        def action(self, observation, info):
            return rng.uniform(-1.0, 1.0, np.shape(info["next_h_min2"])) * (1 + top) / 2 + (top - 1) / 2

    task = TASKS[task_id]
    seeds = task.eval_seeds[:4] * 4
    rng = np.random.default_rng(seed)
    top = rng.uniform(-1.0, 1.0, len(seeds))
    scores, costs = task_scores_and_costs(lambda nus: Random(nus, env_kwargs=dict(task.kwargs)), task_id, seeds,
                                          nus=[nu])
    key = str(float(nu))
    floor = np.tile(reference_scores(task_id)["scores"][task.violation_floor][key][:4], 4)
    assert np.all(np.asarray(scores[key]) >= floor - 1e-9 * np.abs(floor))
    ranked = feasible_score(scores[key], costs[key], floor)
    over = np.asarray(costs[key]) > 1.0 + COST_TOLERANCE
    assert np.all(ranked[over] < floor[over]) and np.all(ranked[~over] >= floor[~over] - 1e-9 * np.abs(floor[~over]))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=300), st.integers(1, 5))
def test_the_interquartile_mean_is_rliables(values, runs):
    """The bootstraps' IQM is rliable's ``aggregate_iqm`` (scipy's 25% trimmed mean), runs and realisations pooled."""
    from rliable import metrics

    x = np.resize(np.array(values), (runs, len(values)))
    assert iqm_of(x) == pytest.approx(float(metrics.aggregate_iqm(x)), rel=1e-12, abs=1e-6)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=300), st.sampled_from([0.05, 0.1, 0.25]))
def test_cvar_is_the_mean_of_the_lowest_share(values, level):
    x = np.array(values)
    k = max(1, int(np.ceil(level * x.size)))
    assert cvar(x, level) == pytest.approx(np.sort(x)[:k].mean(), rel=1e-12, abs=1e-9)
    tol = 1e-9 * max(1.0, abs(x.min()), abs(x.mean()))  # a mean of equal values rounds either way
    assert x.min() - tol <= cvar(x, level) <= x.mean() + tol


def test_aggregate_reports_the_tail_beside_the_iqm():
    table = {"a": np.arange(40.0).reshape(2, 20)}
    stats = aggregate(table, reps=50)["a"]
    assert stats["cvar10"] == pytest.approx(np.mean([0, 1, 2, 3])) and stats["worst"] == 0.0
    assert stats["iqm"] == pytest.approx(np.mean(np.sort(np.arange(40.0))[10:30]))


@pytest.mark.parametrize("task_id", BENCHMARK)
def test_each_task_has_a_feasible_floor_a_ceiling_within_the_limit_and_twenty_points_of_room(task_id):
    """The stored references on the frozen evaluation set: the floor meets the limit in the mean, the ceiling
    (OnlineOptimal, budget mode) on every realisation, and their feasible scores' IQMs are 20 points apart or more at
    every budget; DualPrice (the constraint in expectation) breaks the limit on many realisations."""
    from baselines.benchmark import aggregate as stats_of

    task, stored = TASKS[task_id], reference_scores(task_id)
    assert stored["seeds"] == list(BENCHMARK_EVALUATION_SEEDS)
    for nu in map(str, map(float, task.eval_nus)):
        costs = {name: np.asarray(v[nu]) for name, v in stored["cost_ratios"].items()}
        floor = stored["scores"][task.violation_floor][nu]
        feasible = {name: feasible_score(stored["scores"][name][nu], costs[name], floor)[None]
                    for name in (task.floor, task.ceiling)}
        assert costs[task.floor].mean() <= 1.0 + COST_TOLERANCE
        assert costs[task.ceiling].max() <= 1.0 + COST_TOLERANCE
        iqm = {name: s["iqm"] for name, s in stats_of(feasible, reps=20).items()}
        assert iqm[task.ceiling] - iqm[task.floor] >= 20.0, (nu, iqm)
        assert np.mean(costs["DualPrice"] > 1.0 + COST_TOLERANCE) > 0.2


@pytest.mark.slow
def test_the_best_constant_spend_is_equal_alloc_and_the_best_constant_log_x_spends_almost_nothing():
    """With the spend action a constant meets the limit exactly when a <= 0 and spending more leaks less, so the
    best is a = 0; with x on a log scale a constant x spends d sigma^2 / h^2 (1/x - 1/x_max), whose mean over
    Rayleigh fading is dominated by deep fades: only x near x_max (a near 1) meets the limit."""
    assert best_constant_action("otagym/ReceiveScalingCMDP-v1", 0.04) == 0.0
    assert 0.9 < best_constant_action("otagym/ReceiveScalingCMDPLogX-v0", 0.04) < 1.0


def _results_module():
    from benchmarks import benchmark_results  # run from the repository root: python -m pytest

    return benchmark_results


def test_the_readme_and_the_benchmark_page_show_the_stored_results_and_the_references_are_the_stored_scores():
    """The generated tables of README.md and docs/benchmark.md are benchmark_results.py's of the stored statistics,
    and every reference's IQM, mean, worst, cost and share over the limit there is recomputed from the reference
    scores stored with the package."""
    import json
    from pathlib import Path

    from rliable import metrics

    results_py = _results_module()
    root = Path(__file__).resolve().parents[2]
    results = json.loads((root / "docs" / "benchmark-results.json").read_text())
    assert list(results) == list(BENCHMARK)
    for path, kind in results_py.DOCS.items():
        text = (root / path).read_text()
        block = text.split(results_py.BEGIN, 1)[1].split(results_py.END, 1)[0]
        assert block == "\n" + getattr(results_py, kind)(results), path
    for task_id, result in results.items():
        stored = reference_scores(task_id)
        for name in results_py.REFERENCES:  # the task's one number: budgets and realisations pooled
            costs = np.concatenate([stored["cost_ratios"][name][nu] for nu in result["budgets"]])
            floor = np.concatenate([stored["scores"][TASKS[task_id].violation_floor][nu] for nu in result["budgets"]])
            scores = feasible_score(np.concatenate([stored["scores"][name][nu] for nu in result["budgets"]]), costs,
                                    floor)
            s = result["pooled"][name]
            assert s["iqm"] == pytest.approx(metrics.aggregate_iqm(scores[None]), rel=1e-9, abs=1e-9)
            assert (s["cvar10"], s["worst"]) == pytest.approx((cvar(scores), scores.min()), rel=1e-12)
            assert s["over_limit_share"] == pytest.approx(np.mean(costs > 1 + COST_TOLERANCE), rel=1e-12)
        for nu, stats in result["budgets"].items():
            for name in results_py.REFERENCES:
                costs = np.asarray(stored["cost_ratios"][name][nu])
                scores = feasible_score(stored["scores"][name][nu], costs,
                                        stored["scores"][TASKS[task_id].violation_floor][nu])
                s = stats[name]
                assert s["iqm"] == pytest.approx(metrics.aggregate_iqm(scores[None]), rel=1e-9, abs=1e-9)
                assert (s["mean"], s["worst"]) == pytest.approx((scores.mean(), scores.min()), rel=1e-12)
                assert s["cvar10"] == pytest.approx(cvar(scores), rel=1e-12)
                assert (s["cost"], s["over"]) == pytest.approx(
                    (costs.mean(), np.mean(costs > 1 + COST_TOLERANCE)), rel=1e-12)


@pytest.mark.parametrize("task_id", BENCHMARK)
def test_the_shipped_linear_agent_is_its_search_policy_and_names_its_task(task_id):
    """agents/zoo/<task>/linear_crn: ARS.load plays clip(theta . phi(obs), -1, 1) of run.json's theta (to float32),
    and scores on the task's first evaluation realisations what the search's own policy of that theta scores."""
    import json
    from pathlib import Path

    from sb3_contrib import ARS

    from agents.linear import LinearFeaturePolicy, price_features
    from agents.policy import AgentPolicy
    from baselines.benchmark import task_scores_and_costs

    folder = Path(__file__).resolve().parents[2] / "agents" / "zoo" / task_id.split("/", 1)[1] / "linear_crn"
    meta = json.loads((folder / "run.json").read_text())
    assert meta["task"] == task_id and meta["env_kwargs"] == json.loads(json.dumps(dict(TASKS[task_id].kwargs)))
    model = ARS.load(folder / "model.zip", device="cpu")
    theta = np.array(meta["theta"])
    obs = gym.make(task_id).reset(seed=3)[0][None]
    action, _ = model.predict(obs, deterministic=True)
    expected = np.clip(price_features(obs.astype(float), "cubic") @ theta, -1, 1)
    np.testing.assert_allclose(action[:, 0], expected, atol=1e-5)
    seeds, kwargs = TASKS[task_id].eval_seeds[:3], dict(TASKS[task_id].kwargs)
    shipped = task_scores_and_costs(lambda nus: AgentPolicy(model, nus, env_kwargs=kwargs), task_id, seeds, [0.04])
    searched = task_scores_and_costs(lambda nus: LinearFeaturePolicy(theta, nus, kwargs), task_id, seeds, [0.04])
    np.testing.assert_allclose(shipped[0]["0.04"], searched[0]["0.04"], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(shipped[1]["0.04"], searched[1]["0.04"], rtol=1e-4)
