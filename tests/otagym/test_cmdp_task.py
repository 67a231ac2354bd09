"""The constrained receive-scaling task: the spend action c_t = nu (10^(1 + a) - 1) / 9, a random policy's cost
within an order of magnitude of the limit, the CMDP's online optimum (DualPrice) checked against an independent
integral, and its stored references with their costs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from scipy import integrate

import otagym  # noqa: F401 - registers the tasks
from baselines.benchmark import references, task_scores, task_scores_and_costs
from baselines.receive_scaling.references import BestConstant, DualPrice
from otagym.schemes.receive_scaling import ReceiveScalingModel, spend_cost
from otagym.tasks import TASKS, reference_scores, task_scenario
from test_tasks import plain_loop_scores

CMDP = "otagym/ReceiveScalingCMDP-v1"
EVALUATION_SEEDS = TASKS[CMDP].eval_seeds


def test_the_spend_action_spends_from_nothing_to_eleven_nu_and_zero_is_equal_alloc():
    env = gym.make(CMDP)
    _, info = env.reset(seed=2, options={"nu": 0.04})
    for a in (0.0, 1.0, -1.0, 0.3):
        _, reward, _, _, info = env.step(np.array([a], dtype=np.float32))
        share = (10 ** (1 + np.float64(np.float32(a))) - 1) / 9
        assert info["convergence_cost"] == pytest.approx(0.04 * share, rel=1e-12, abs=1e-300)
        assert info["cost"] == pytest.approx(share, rel=1e-12, abs=1e-300)
        assert (reward == 0.0) == (a == 0.0)  # EqualAlloc's leakage on the same channel is the reward's baseline
        assert (reward > 0) == (a > 0)  # spending more leaks less
    np.testing.assert_allclose(spend_cost([-1.0, 0.0, 1.0], 0.04), [0.0, 0.04, 0.44], rtol=1e-15)
    nus = np.random.default_rng(0).uniform(0.01, 0.16, 100_000)
    np.testing.assert_array_equal(spend_cost(0.0, nus), nus)  # exactly nu: an episode at a = 0 costs exactly T
    with pytest.raises(ValueError, match="action_type 'price' and 'share' go with reward_mode='budget'"):
        gym.make("otagym/OTAPrivacy-v0", reward_mode="budget", action_type="spend")


def test_a_plain_gymnasium_loop_scores_what_the_batched_evaluation_scores():
    """The spend action played by the env and by the references' ActionPolicy is the same decision."""
    seeds, nu, action = EVALUATION_SEEDS[:2], 0.16, 0.125
    make = (lambda nus: BestConstant(nu=nus, action=action, action_type="spend"))
    batched = task_scores(make, CMDP, seeds, nus=[nu])[str(nu)]
    np.testing.assert_allclose(plain_loop_scores(CMDP, nu, seeds, action), batched, rtol=0, atol=1e-8)


def test_dual_price_spends_nu_in_expectation_by_an_independent_integral():
    """DualPrice's price mu spends nu per round in expectation over h_min^2 ~ Exponential (the channel law of the
    placement): E[c] by scipy's quad of the Lagrangian minimiser's cost against the exponential density."""
    nu = 0.04
    scenario = task_scenario(CMDP, nu)
    model = ReceiveScalingModel(scenario)
    policy = DualPrice(nu=nu)
    policy.reset(scenario)
    env = gym.make(CMDP)
    _, info = env.reset(seed=5, options={"nu": nu})
    policy.act(None, info)
    mean = float(model.expected_h_min2(info["mean_channel_gain"]))
    price = float(policy.price)

    def spend(u: float) -> float:  # h = mean u, u ~ Exponential(1)
        return float(model.price_spend(0.0, mean * u, price, 1.0)) * np.exp(-u)

    expected, _ = integrate.quad(spend, 0.0, np.inf, limit=400, epsabs=0, epsrel=1e-10)
    assert expected == pytest.approx(nu, rel=1e-6)


def test_the_stored_references_and_their_costs():
    stored = reference_scores(CMDP)
    assert list(stored["scores"]) == list(references(CMDP)) == [
        "UniformRandom", "EqualAlloc", "BestConstant", "AdaScaleTrained", "OnlineOptimal", "DualPrice", "FullPower"]
    for nu in TASKS[CMDP].eval_nus:
        key = str(float(nu))
        means = {n: np.mean(v[key]) for n, v in stored["scores"].items()}
        costs = {n: np.asarray(v[key]) for n, v in stored["cost_ratios"].items()}
        assert means["EqualAlloc"] == means["BestConstant"] == 0.0
        for name in ("EqualAlloc", "BestConstant", "AdaScaleTrained", "OnlineOptimal"):  # meet nu everywhere
            assert costs[name].max() <= 1.0 + 1e-9, name
        assert costs["FullPower"].max() == 0.0  # x_max every round: nothing spent
        # a random spend costs (E[10^(1 + a)] - 1) / 9 = (99 / (2 ln 10) - 1) / 9 = 2.28 times the limit
        assert costs["UniformRandom"].mean() == pytest.approx((99 / (2 * np.log(10)) - 1) / 9, rel=0.02)
        # the expectation constraint is a relaxation: its optimum scores above the hard constraint's, in the mean
        assert abs(costs["DualPrice"].mean() - 1.0) < 0.02 and means["DualPrice"] > means["OnlineOptimal"]
    seeds, nu = EVALUATION_SEEDS[:2], 0.04
    spec = references(CMDP)["DualPrice"]
    scores, costs = task_scores_and_costs(lambda n: spec.build(n, None), CMDP, seeds, nus=[nu])
    np.testing.assert_allclose(scores[str(nu)], stored["scores"]["DualPrice"][str(nu)][:2], rtol=1e-9)
    np.testing.assert_allclose(costs[str(nu)], stored["cost_ratios"]["DualPrice"][str(nu)][:2], rtol=1e-9)


@pytest.mark.slow
def test_evaluate_reports_the_cost_on_the_constrained_task(tmp_path, capsys):
    from otagym.cli.commands import main

    out = tmp_path / "d.json"
    assert main(["evaluate", CMDP, "BestConstant", "--reps", "50", "--seeds", "2", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert ("nu = 0.04: episode cost / limit 1.0000 on average (max 1.0000); over the limit on 0 of 2 "
            "episodes") in text


@pytest.mark.parametrize("env_kwargs,task_id", [
    ({"reward_mode": "cmdp", "action_type": "spend", "nu_range": [0.01, 0.16]}, CMDP),
    ({"nu_range": [0.01, 0.16]}, "otagym/ReceiveScalingIID-v0"),
    ({"fading": "gauss_markov", "correlation": 0.9}, "otagym/ReceiveScalingGaussMarkov-v0"),
    ({"reward_mode": "cmdp", "nu_range": [0.01, 0.16]}, "otagym/ReceiveScalingCMDPLogX-v0"),  # the log-x action
    ({"scenario": "paper-cifar10", "nu_range": [0.5, 1.0]}, None)])  # no task has that deployment
def test_otagym_train_points_to_the_task_a_run_was_trained_on(env_kwargs, task_id, tmp_path):
    import json

    from otagym.cli.evaluate import task_trained_on

    (tmp_path / "run.json").write_text(json.dumps({"env_kwargs": env_kwargs}))
    assert task_trained_on(tmp_path / "model.zip") == task_id


def test_evaluate_refuses_a_model_trained_on_another_formulation(tmp_path, capsys):
    """A Lagrangian-reward model of the normalised x action played on the constrained task would score its actions
    as spends."""
    import json

    from otagym.cli.commands import main

    kwargs = {"nu_range": [0.01, 0.16], "reward_mode": "lagrangian", "action_type": "normalized"}
    (tmp_path / "run.json").write_text(json.dumps({"env_kwargs": kwargs}))
    (tmp_path / "model.zip").write_bytes(b"")
    from unittest import mock

    with mock.patch("agents.policy.load_model", return_value=object()):
        assert main(["evaluate", CMDP, str(tmp_path / "model.zip"), "--seeds", "2"]) == 2
    err = capsys.readouterr().err
    assert ("was trained on scenario, reward_mode, action_type = ('paper-mnist', 'lagrangian', 'normalized'), and "
            "otagym/ReceiveScalingCMDP-v1 is ('paper-mnist', 'cmdp', 'spend')") in err


def test_a_budget_mode_model_plays_the_constrained_task_in_budget_mode():
    """A budget-mode model (price action: agents.budget_apg's action="price") is played on the constrained task with
    its own action semantics, which meet the budget by construction; another scenario's is refused."""
    from baselines.benchmark import scheme_benchmark

    scheme = scheme_benchmark(TASKS[CMDP].scheme)
    price = {**TASKS[CMDP].kwargs, "reward_mode": "budget", "action_type": "price", "price_decades": 2.0}
    overrides = scheme.trained_overrides("m", price, CMDP)
    assert (overrides["reward_mode"], overrides["action_type"], overrides["price_decades"]) == ("budget", "price", 2.0)
    with pytest.raises(ValueError, match="was trained on scenario"):
        scheme.trained_overrides("m", {**price, "scenario": "paper-cifar10"}, CMDP)
