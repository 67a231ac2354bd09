"""The references of RL results (baselines.receive_scaling.references): the online optimum by dynamic programming
against a brute-force two-round optimum, its place between the online references and the offline optimum, budget mode's
rule for x-policies, and references tuned on the training channels only."""

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from scipy import integrate, optimize

from baselines.receive_scaling.compare import compare
from baselines.receive_scaling.evaluation import leakage_score, reference_leakage, run_policy, sample_realisations
from baselines.receive_scaling.policies import AdaScale, Budgeted
from baselines.receive_scaling.references import (TEST_SEEDS, TRAIN_SEEDS, VALIDATION_SEEDS, AdaScaleTrained,
                                                  BestConstant, OnlineOptimal, tune_on_training, tuned_constant_action)
from otagym.channel import mean_channel_gain
from otagym.schemes.receive_scaling import ReceiveScalingModel, get_scenario


def test_seed_ranges_are_disjoint():
    assert not set(TRAIN_SEEDS) & set(VALIDATION_SEEDS)
    assert not set(TRAIN_SEEDS) & set(TEST_SEEDS)
    assert not set(VALIDATION_SEEDS) & set(TEST_SEEDS)


@pytest.mark.parametrize("nu", [0.01, 0.04, 0.16])
@pytest.mark.parametrize("quantile", [0.2, 0.6, 0.95])
def test_two_round_online_optimum_matches_brute_force(nu, quantile):
    """T = 2: round 0 sees g_0 and minimises l(c, g_0) + E_g[l(B - c, g)] over c in [0, B] (the last round spends the
    rest), here by scipy quadrature over g ~ Exponential and a bounded scalar minimisation: the DP's choice must be as
    good to 1e-4 of the objective."""
    scen = get_scenario("paper-mnist", num_rounds=2, nu=nu, distances_m=(50.0,) * 5 + (150.0,) * 5)
    model = ReceiveScalingModel(scen)
    gains = mean_channel_gain(np.array(scen.distances_m))
    mean = float(model.expected_h_min2(gains))
    a, k = model.x_max * mean, model.cost_scale
    h0 = mean * -np.log1p(-quantile)

    def leak(c, g):
        return float(model.leakage(1.0 / (c / k + 1.0 / g), 1.0))

    def objective(c):
        future = integrate.quad(lambda e: leak(2 * nu - c, a * e) * np.exp(-e), 0, np.inf, limit=200,
                                epsrel=1e-10)[0]
        return leak(c, model.x_max * h0) + future

    best = optimize.minimize_scalar(objective, bounds=(0.0, 2 * nu), method="bounded",
                                    options={"xatol": 1e-12 * nu})
    policy = OnlineOptimal(nu=nu, grid=400, nodes=256)
    policy.reset(scen)
    x = policy.act(None, {"next_h_min2": np.array(h0), "mean_channel_gain": gains})
    c_dp = float(model.convergence_cost(x, h0))
    assert objective(c_dp) <= best.fun * (1 + 1e-4) + 1e-300, (c_dp, best.x)


@pytest.mark.slow
def test_online_optimum_lies_between_the_online_references_and_the_offline_optimum():
    """On held-out channels (T = 100): every realisation at most 100 (OfflineOptimal knows the future), and on average
    at least BestConstant and AdaScaleTrained (both tuned on the training channels)."""
    scen = get_scenario("paper-mnist", num_rounds=100, nu=0.04)
    seeds = TEST_SEEDS[:12]
    real = sample_realisations(scen, seeds)
    optimal = np.array([reference_leakage(scen, 0.04, s) for s in seeds])
    scores = {}
    for name, policy in (("online", OnlineOptimal(0.04)), ("constant", BestConstant(0.04)),
                         ("adascale", AdaScaleTrained(0.04))):
        result = run_policy(policy, scen, real, dp=False)
        np.testing.assert_allclose(result.cost_mean, 0.04, rtol=1e-9)  # budget mode: nu met exactly
        scores[name] = leakage_score(result.leakage, result.equal_alloc_leakage, optimal)
    assert np.all(scores["online"] <= 100.0 + 1e-6)
    assert scores["online"].mean() >= scores["constant"].mean()
    assert scores["online"].mean() >= scores["adascale"].mean()


def test_block_fading_online_optimum_spends_equally_within_a_block():
    scen = get_scenario("paper-mnist", num_rounds=30, fading="block", coherence_rounds=10)
    real = sample_realisations(scen, [5])
    from otagym.env import OTAPrivacyVectorEnv

    env = OTAPrivacyVectorEnv(1, scen, reward_mode="cmdp", action_type="x", dp_orders=None,
                              autoreset_mode=AutoresetMode.SAME_STEP)
    obs, info = env.reset(seed=0, options={"distances_m": real.distances_m, "channel_gains": real.channel_gains})
    policy = OnlineOptimal()
    policy.reset(scen)
    costs = []
    for _ in range(30):
        obs, _, term, _, info = env.step(policy.act(obs, info)[:, None])
        costs.append(float((info["final_info"] if term.any() else info)["convergence_cost"][0]))
    costs = np.array(costs).reshape(3, 10)
    # re-solved every round on the interpolated grid: equal to 1e-5
    np.testing.assert_allclose(costs, costs[:, :1].repeat(10, axis=1), rtol=1e-4, atol=1e-12)
    assert costs.sum() == pytest.approx(scen.nu * 30, rel=1e-9)


def test_budgeted_meets_nu_exactly_and_leaves_a_policy_that_already_does_unchanged():
    scen = get_scenario("paper-mnist", num_rounds=60, nu=0.04)
    real = sample_realisations(scen, [1, 2, 3])
    for V in (1e-3, 1.0, 1e3):  # under- and overspending AdaScale
        result = run_policy(Budgeted(AdaScale(V=V)), scen, real, dp=False)
        np.testing.assert_allclose(result.cost_mean, 0.04, rtol=1e-9)
    from baselines.receive_scaling.policies import EqualAlloc

    plain = run_policy(EqualAlloc(), scen, real, dp=False)
    budgeted = run_policy(Budgeted(EqualAlloc()), scen, real, dp=False)
    np.testing.assert_allclose(budgeted.leakage, plain.leakage, rtol=1e-12)


def test_best_constant_is_the_best_of_its_neighbours_on_the_training_channels():
    scen = get_scenario("paper-mnist", num_rounds=60, nu=0.04)
    a = tuned_constant_action(scen, 0.04)
    from baselines.receive_scaling.references import _Constant

    for other in (a - 0.05, a + 0.05, 0.0):
        _, score_other = tune_on_training(lambda v, n: _Constant(v, n), scen, 0.04, other, other, points=1, rounds=1)
        _, score_best = tune_on_training(lambda v, n: _Constant(v, n), scen, 0.04, a, a, points=1, rounds=1)
        assert score_best >= score_other - 1e-9


@pytest.mark.slow
def test_compare_runs_the_references_by_name():
    rows = compare("paper-mnist", (0.04,), (10_000,), ("OfflineOptimal", "BestConstant", "AdaScaleTrained",
                                                        "OnlineOptimal", "EqualAlloc"), progress=False, num_rounds=40)
    by = {r["policy"]: r for r in rows}
    assert by["OfflineOptimal"]["score"] == pytest.approx(100.0, abs=1e-9)
    for name in ("BestConstant", "AdaScaleTrained", "OnlineOptimal"):
        assert by[name]["matched"] and by[name]["cost_mean"] == pytest.approx(0.04, rel=1e-9)
        assert by[name]["score"] <= 100.0 + 1e-6


@pytest.mark.slow
def test_online_optimal_as_a_price_action_plays_the_programme_where_the_action_reaches_its_price():
    """OnlineOptimalAction turns the programme's price into the env's price action and back: the same leakage as
    OnlineOptimal to 1e-9 where the price lies within the action's decades (i.i.d. and Gauss-Markov fading here)."""
    from baselines.receive_scaling.references import OnlineOptimalAction

    for fading in ("iid", "gauss_markov"):
        scen = get_scenario("paper-mnist", num_rounds=80, fading=fading)
        real = sample_realisations(scen, [3, 4, 5])
        nu = np.array([0.01, 0.04, 0.16])
        x_policy = run_policy(OnlineOptimal(nu), scen, real, dp=False, nu=nu)
        action = run_policy(OnlineOptimalAction(nu), scen, real, dp=False, nu=nu)
        np.testing.assert_allclose(action.leakage, x_policy.leakage, rtol=1e-9)
        np.testing.assert_allclose(action.cost_mean, nu, rtol=1e-9)


def test_a_round_of_the_programme_per_env_is_the_round_of_each_env_alone():
    """online_optimal_round with one round index per env (an SB3 batch of envs at different rounds) decides for each
    env what it decides for that env alone; envs of the same nu and placement share one solved table."""
    from baselines.receive_scaling.references import online_optimal_round, solve_online_optimal

    scen = get_scenario("paper-mnist", num_rounds=40, fading="block", coherence_rounds=10)
    model = ReceiveScalingModel(scen)
    rng = np.random.default_rng(0)
    nu = np.array([0.01, 0.04, 0.04, 0.16])
    mean = np.array([2e-6, 3e-6, 3e-6, 2e-6])
    prices = solve_online_optimal(model, nu, mean, 40, block=10)
    assert prices.budget_grid.shape[0] == 3 and prices.row[1] == prices.row[2]
    t = np.array([0, 13, 27, 39])
    left = nu * 40 * rng.uniform(0.05, 1.0, 4)
    h = mean * rng.exponential(size=4)
    spend, price = online_optimal_round(model, prices, left, h, t)
    for i in range(4):
        alone = solve_online_optimal(model, nu[i:i + 1], mean[i:i + 1], 40, block=10)
        s_i, p_i = online_optimal_round(model, alone, left[i:i + 1], h[i:i + 1], int(t[i]))
        assert (spend[i], price[i]) == (s_i[0], p_i[0])
    assert spend[3] == left[3]  # the last round spends the rest
    assert np.all((spend >= 0) & (spend * (10 - t % 10) <= left * (1 + 1e-12)))


@pytest.mark.parametrize("block", [1, 7])
def test_a_round_of_the_programme_is_np_interp_on_its_grid(block):
    """The vectorised round against the rule written out env by env with np.interp: the post-decision budget A with
    A + c(lambda(A), g) = B on the grid, spend all below its first point, at budgets on, between, below and above
    the grid's points (block 7 leaves a short last stage)."""
    from baselines.receive_scaling.references import online_optimal_round, solve_online_optimal

    scen = get_scenario("paper-mnist", num_rounds=40)
    model = ReceiveScalingModel(scen)
    rng = np.random.default_rng(block)
    n = 64
    nu = rng.choice([0.01, 0.04, 0.16], n)
    mean = rng.choice([1e-6, 3e-6], n)
    prices = solve_online_optimal(model, nu, mean, 40, block=block)
    for t in range(0, 40, 3):
        h = mean * rng.exponential(size=n)
        left = nu * 40 * rng.choice([0.0, 1e-6, 0.3, 1.0, 2.0], n) * rng.uniform(0.5, 1.0, n)
        spend, _ = online_optimal_round(model, prices, left, h, t)
        stage = t // block
        rounds = min(block * (stage + 1), 40) - t
        for i in range(n):
            if stage + 1 >= prices.stage_start.size:
                expected = left[i] / rounds
            else:
                table = prices.log_level[stage + 1, prices.row[i]]
                end = prices.budget_grid[prices.row[i]] + rounds * model.cost_scale * np.maximum(
                    1.0 / np.exp(table) - 1.0 / (model.x_max * h[i]), 0.0)
                if left[i] <= end[0]:
                    expected = left[i] / rounds
                else:
                    level = np.exp(np.interp(np.log(left[i]), np.log(np.maximum(end, 1e-300)), table))
                    wanted = rounds * model.cost_scale * max(1.0 / level - 1.0 / (model.x_max * h[i]), 0.0)
                    expected = min(wanted, left[i]) / rounds
            assert spend[i] == pytest.approx(expected, rel=1e-12, abs=1e-300), (t, i)
