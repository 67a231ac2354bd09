"""benchmarks/rl_results.py's statistics: rliable's IQM and probability of improvement, wired as the report reads them
(the training and evaluation it drives are the tested `otagym train`, AgentPolicy and the references)."""


import numpy as np
import pytest

pytest.importorskip("rliable")
pytest.importorskip("stable_baselines3")

from benchmarks import rl_results  # noqa: E402 (run from the repository root: python -m pytest)


def test_iqm_and_probability_of_improvement_against_closed_forms():
    rng = np.random.default_rng(0)
    runs = rng.normal(size=(5, 32))
    table = {"agent": runs + 10.0, "ref": np.full((1, 32), 0.0), "worse": np.full((1, 32), -1.0)}
    out = rl_results.aggregate(table, "ref", reps=200, poi_reps=50)
    flat = np.sort((runs + 10.0).ravel())
    n = flat.size
    # IQM: the mean of the middle half (scipy's trim_mean at 25%, as rliable computes it)
    from scipy import stats

    assert out["agent"]["iqm"] == pytest.approx(stats.trim_mean(flat, 0.25), rel=1e-12)
    assert out["agent"]["iqm_ci"][0] <= out["agent"]["iqm"] <= out["agent"]["iqm_ci"][1]
    assert out["ref"]["iqm"] == 0.0 and out["ref"]["p_improve"] is None
    assert out["agent"]["p_improve"] == pytest.approx(1.0) and out["worse"]["p_improve"] == pytest.approx(0.0)
    assert n == 160
    state = np.random.get_state()[1].copy()
    assert rl_results.aggregate(table, "ref", reps=200, poi_reps=50) == out  # seeded resamples: the same table again
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # and numpy's global generator left as it was


def test_a_policy_of_one_run_gets_a_probability_of_improvement_with_a_real_interval():
    """rliable's bootstrap of the probability resamples runs only: with one run it gave a one-point CI. The paired
    realisation bootstrap gives about the binomial interval of the share of realisations won (one run each: the
    probability is that share, ties counted half)."""
    rng = np.random.default_rng(1)
    ref = rng.normal(size=(1, 64))
    agent = ref + rng.normal(0.3, 1.0, size=(1, 64))
    out = rl_results.aggregate({"agent": agent, "ref": ref}, "ref", reps=100, poi_reps=400)
    p = float(np.mean(agent > ref))
    assert out["agent"]["p_improve"] == pytest.approx(p)
    low, high = out["agent"]["p_improve_ci"]
    half = 1.96 * np.sqrt(p * (1 - p) / 64)
    assert low < p < high and 0.7 * half < (high - low) / 2 < 1.3 * half


def test_markdown_has_one_row_per_task_and_policy():
    summary = {"iqm": 1.0, "iqm_ci": [0.5, 1.5], "mean": 0.9, "worst": -3.25, "p_improve": 0.7,
               "p_improve_ci": [0.6, 0.8], "p_improve_floor": 0.45}
    results = {"iid": {str(nu): {"PPO": summary, "AdaScaleTrained": dict(summary, p_improve=None, p_improve_floor=None)}
                       for nu in rl_results.NUS}}
    text = rl_results.markdown(results, 5, 1.5)
    assert "1.5 min per run" in text
    rows = [line for line in text.splitlines() if line.startswith("| iid")]
    assert len(rows) == 4 and "1.00 [0.50, 1.50]" in rows[0] and "0.70" in rows[0] and "–" in rows[1]
    assert "0.90 (-3.2)" in rows[2] and "0.45" in rows[2] and "–" in rows[3]
