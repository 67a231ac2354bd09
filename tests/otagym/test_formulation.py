"""The RL formulation of problem (28): budget mode keeps (28b) by construction, the zero share action is EqualAlloc,
the return is EqualAlloc's objective (28a) minus the policy's over the expected headroom, the observation stays of
order one, nu can be sampled per episode."""

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from scipy import stats

from otagym import OTAPrivacyEnv, OTAPrivacyVectorEnv, get_scenario
from otagym.schemes.receive_scaling import OBS_BOUND
from otagym.schemes.receive_scaling import ACTION_CODES, ActionSettings, ReceiveScalingModel, budget_action_cost


def _episode(venv, actions_fn, seed=0, options=None):
    obs, info = venv.reset(seed=seed, options=options)
    total = np.zeros(venv.num_envs)
    big_t = venv.scenario.num_rounds
    for t in range(big_t):
        obs, r, term, _, info = venv.step(actions_fn(t, obs))
        total += r
    assert term.all()
    return total, info["final_info"], info


@pytest.mark.parametrize("action_type", ["price", "share"])
@pytest.mark.parametrize("policy", ["random", "plus_one", "minus_one", "alternating"])
def test_budget_mode_meets_the_constraint_with_equality_for_any_policy(policy, action_type):
    n, big_t = 64, 50
    rng = np.random.default_rng(1)
    acts = {
        "random": lambda t, o: rng.uniform(-1, 1, (n, 1)),
        "plus_one": lambda t, o: np.ones((n, 1)),
        "minus_one": lambda t, o: -np.ones((n, 1)),
        "alternating": lambda t, o: np.full((n, 1), (-1.0) ** t),
    }[policy]
    venv = OTAPrivacyVectorEnv(n, num_rounds=big_t, dp_orders=None, nu_range=(0.01, 0.16), action_type=action_type,
                               autoreset_mode=AutoresetMode.SAME_STEP)
    _, final, _ = _episode(venv, acts)
    np.testing.assert_allclose(final["convergence_cost_mean"], final["nu"], rtol=1e-12)
    assert np.all(final["convergence_cost"] >= 0)


@pytest.mark.parametrize("action_type", ["price", "share"])
def test_budget_floor_keeps_its_share_for_every_later_round(action_type):
    """With budget_floor f, every round of a budget action leaves at least f nu for each later round (the budget
    left after round t is >= f nu (T - t - 1)) and the episode still spends nu T; spend-hungry actions (the lowest
    price, the largest share) hit the floor, and without it they leave less (the floor binds)."""
    n, big_t, floor = 16, 60, 0.8
    hungry = np.full((n, 1), -1.0 if action_type == "price" else 1.0)
    left = {}
    for f in (0.0, floor):
        venv = OTAPrivacyVectorEnv(n, num_rounds=big_t, dp_orders=None, nu_range=(0.01, 0.16),
                                   action_type=action_type, budget_floor=f, autoreset_mode=AutoresetMode.SAME_STEP)
        venv.reset(seed=4)
        spent, lowest = np.zeros(n), np.inf
        for t in range(big_t):
            _, _, term, _, info = venv.step(hungry)
            spent += info["cost"]  # c_t / nu
            lowest = min(lowest, np.min((big_t - spent) - floor * (big_t - t - 1)))
        assert term.all()
        np.testing.assert_allclose(spent, big_t, rtol=1e-12)
        left[f] = lowest
    assert left[floor] >= -1e-9
    assert left[0.0] < -1.0  # without the floor they spend below it


def test_budget_floor_out_of_range_or_outside_budget_mode_is_refused():
    with pytest.raises(ValueError, match="budget_floor"):
        OTAPrivacyVectorEnv(2, budget_floor=1.5)
    with pytest.raises(ValueError, match="budget_floor is only used with reward_mode='budget'"):
        OTAPrivacyVectorEnv(2, budget_floor=0.5, reward_mode="cmdp")
    model = ReceiveScalingModel(get_scenario("paper-mnist"))
    settings = ActionSettings(ACTION_CODES["share"], 1e-3, 100.0, 2.0, 1.0, budget_floor=0.5)
    with pytest.raises(ValueError, match="nu must be given"):  # the floor is in units of nu
        budget_action_cost(model, settings, 0.0, 1e-9, 1.0, 10, mean_h_min2=1e-9)


def share_cost(a, remaining, rounds_left, multiplier_max):
    model = ReceiveScalingModel(get_scenario("paper-mnist"))
    settings = ActionSettings(ACTION_CODES["share"], 1e-3, multiplier_max, price_decades=2.0, price_buffer_sd=1.0)
    return budget_action_cost(model, settings, a, 1e-9, remaining, rounds_left, mean_h_min2=1e-9)


def test_share_cost_closed_form():
    # fair share R/(T - t) times 100^a, capped at R; the last round spends R
    assert share_cost(0.0, 2.0, 4, 100.0) == pytest.approx(0.5, rel=1e-15)
    assert share_cost(0.5, 2.0, 4, 100.0) == 2.0  # 10 x 0.5 = 5, capped at R = 2
    assert share_cost(-0.5, 2.0, 4, 100.0) == pytest.approx(0.05, rel=1e-14)
    assert share_cost(-1.0, 3.0, 1, 100.0) == 3.0
    assert share_cost(0.3, -1e-17, 5, 100.0) == 0.0


def test_zero_share_action_is_equal_alloc_and_earns_exactly_zero():
    """The reward is -(L_t - L_t^EqualAlloc) / H: EqualAlloc's own rounds earn 0, and the episode's EqualAlloc
    leakage in info is the sum of the baseline's per-round terms."""
    n, big_t = 8, 30
    venv = OTAPrivacyVectorEnv(n, num_rounds=big_t, dp_orders=None, action_type="share",
                               autoreset_mode=AutoresetMode.SAME_STEP)
    _, info = venv.reset(seed=3)
    model, nu = venv.model, venv.scenario.nu
    total = np.zeros(n)
    for _ in range(big_t):
        x_equal = model.x_for_cost(nu, info["next_h_min2"])  # EqualAlloc's rule (§VII)
        _, r, term, _, info = venv.step(np.zeros((n, 1)))
        step_info = info["final_info"] if term.any() else info
        np.testing.assert_allclose(step_info["x"], x_equal, rtol=1e-13)
        np.testing.assert_allclose(step_info["convergence_cost"], nu, rtol=1e-12)
        assert np.all(np.abs(r) <= 1e-12)
        total += r
    final = info["final_info"]
    np.testing.assert_allclose(final["leakage_total"], final["equal_alloc_leakage"], rtol=1e-12)
    np.testing.assert_allclose(final["rdp_cumulative"].sum(axis=-1), final["leakage_total"], rtol=1e-12)


def test_the_return_differs_between_policies_by_their_objectives_over_the_headroom():
    """The exogenous baseline does not depend on the actions, so on the same channels two policies' returns differ by
    exactly (sum L_2 - sum L_1) / H: the order of policies (and the optimum) is that of objective (28a)."""
    n, big_t = 6, 40
    rng = np.random.default_rng(0)
    returns, finals = [], []
    for policy in (lambda t, o: rng.uniform(-1, 1, (n, 1)), lambda t, o: np.full((n, 1), 0.3)):
        venv = OTAPrivacyVectorEnv(n, num_rounds=big_t, dp_orders=None, nu_range=(0.01, 0.16),
                                   autoreset_mode=AutoresetMode.SAME_STEP)
        venv.reset(seed=11)
        scale = venv.core.state.reward_scale.copy()  # the autoreset of the last step replaces it
        total, final, _ = _episode(venv, policy, seed=11)
        returns.append(total)
        finals.append(final)
    np.testing.assert_allclose(returns[0] - returns[1],
                               (finals[1]["leakage_total"] - finals[0]["leakage_total"]) / scale, rtol=1e-9)
    np.testing.assert_allclose(returns[0], (finals[0]["equal_alloc_leakage"] - finals[0]["leakage_total"]) / scale,
                               rtol=1e-9)


def test_reward_scale_is_the_expected_headroom_of_the_stationary_water_level():
    """H = T (E[L_EqualAlloc] - E[L at the stationary water level]) per round, both expectations over h_min^2 ~
    Exponential: checked against scipy quadrature of the same integrals (independent of the closed forms)."""
    from scipy import integrate, optimize

    venv = OTAPrivacyVectorEnv(3, num_rounds=50, dp_orders=None, nu_range=(0.01, 0.16),
                               autoreset_mode=AutoresetMode.SAME_STEP)
    _, info = venv.reset(seed=2)
    model = venv.model
    for i in range(3):
        nu, mean = float(info["nu"][i]), float(venv.core.state.mean_h_min2[i])
        a = model.x_max * mean

        def expect(f):
            return integrate.quad(lambda e: f(e) * np.exp(-e), 0, np.inf, limit=200, epsabs=0, epsrel=1e-11)[0]

        def spend(level):
            return expect(lambda e: model.cost_scale * max(1 / level - 1 / (a * e), 0.0) if e > 0 else 0.0)

        level = optimize.brentq(lambda y: np.log(spend(np.exp(y))) - np.log(nu), np.log(a) - 30, np.log(a) + 6,
                                xtol=1e-14)
        np.testing.assert_allclose(model.stationary_level(nu, mean), np.exp(level), rtol=1e-9)
        water = expect(lambda e: float(model.leakage(min(np.exp(level), a * e), 1.0)))
        equal = expect(lambda e: float(model.leakage(model.x_for_cost(nu, mean * e), mean * e)) if e > 0 else 0.0)
        # 48-node Gauss-Laguerre for EqualAlloc's term: 3e-5 of the headroom here
        np.testing.assert_allclose(venv.core.state.reward_scale[i], 50 * (equal - water), rtol=1e-4)


def test_stationary_water_level_pays_the_fair_share_on_average():
    """Monte Carlo over many i.i.d. rounds: playing min(eta_bar, x_max h^2) spends nu per round on average and leaks
    stationary_leakage per round (both within 4 standard errors)."""
    model = ReceiveScalingModel(get_scenario("paper-mnist"))
    rng = np.random.default_rng(0)
    mean = 1.3e-12
    for nu in (0.01, 0.04, 0.16):
        level = model.stationary_level(nu, mean)
        h = mean * rng.standard_exponential(400_000)
        eta = np.minimum(level, model.x_max * h)
        cost = model.convergence_cost(eta / h, h)
        leak = model.leakage(eta, 1.0)
        for sample, expected in ((cost, nu), (leak, model.stationary_leakage(level, mean))):
            assert abs(sample.mean() - expected) < 4 * sample.std() / np.sqrt(sample.size), \
                (nu, sample.mean(), expected)


@pytest.mark.parametrize("mode", ["budget", "cmdp"])
def test_observation_is_of_order_one_under_random_and_extreme_actions(mode):
    """10^5 steps each of uniform and of +-1 actions: every entry within [-10, 10] *before* clipping, except the
    budget-left entry of the cmdp mode, whose clipping at -10 (ten budgets overspent) is documented."""
    n, big_t = 200, 500
    m = 10
    rng = np.random.default_rng(0)
    venv = OTAPrivacyVectorEnv(n, dp_orders=None, reward_mode=mode, nu_range=(0.01, 0.16),
                               autoreset_mode=AutoresetMode.SAME_STEP)
    free = np.ones(3 * m + 6, dtype=bool)
    if mode == "cmdp":
        free[2 * m + 2] = False
    extremes = np.full(3 * m + 6, 0.0)
    for policy in ("uniform", "extreme"):
        obs, _ = venv.reset(seed=1)
        for t in range(big_t):  # 200 envs x 500 rounds = 10^5 steps
            a = rng.uniform(-1, 1, (n, 1)) if policy == "uniform" else rng.choice([-1.0, 1.0], (n, 1))
            obs, r, term, _, info = venv.step(a)
            for o in (obs, info["final_obs"] if term.any() else obs):
                assert np.all(np.abs(o) <= OBS_BOUND)
                assert np.all(np.abs(o[:, free]) < OBS_BOUND)  # clipping never active
                extremes = np.maximum(extremes, np.abs(o).max(axis=0))
            assert np.isfinite(r).all()
    assert extremes[2 * m + 5:3 * m + 5].max() > 1.0  # the cumulative-RDP entries move (log1p of RDP up to thousands)


def test_nu_is_sampled_log_uniformly_per_episode_observed_and_can_be_set():
    n = 2000
    venv = OTAPrivacyVectorEnv(n, num_rounds=5, dp_orders=None, nu_range=(0.01, 0.16),
                               autoreset_mode=AutoresetMode.SAME_STEP)
    obs, info = venv.reset(seed=0)
    u = (np.log(info["nu"]) - np.log(0.01)) / (np.log(0.16) - np.log(0.01))
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    np.testing.assert_allclose(obs[:, 2 * 10 + 4], np.log10(info["nu"]) - 0.5 * np.log10(0.01 * 0.16), atol=1e-6)
    _, info2 = venv.reset(seed=0)
    np.testing.assert_array_equal(info["nu"], info2["nu"])
    _, info3 = venv.reset(seed=0, options={"nu": 0.05})
    assert np.all(info3["nu"] == 0.05)
    env = OTAPrivacyEnv(num_rounds=5, nu_range=(0.02, 0.03))
    _, i1 = env.reset(seed=4)
    assert 0.02 <= i1["nu"] <= 0.03
    _, i2 = env.reset(seed=4, options={"nu": 0.07})
    assert i2["nu"] == 0.07
    with pytest.raises(ValueError, match="nu_range"):
        OTAPrivacyEnv(nu_range=(0.1, 0.01))
    with pytest.raises(ValueError, match="nu"):
        env.reset(options={"nu": -1.0})


def test_vector_env_takes_one_seed_per_env():
    venv = OTAPrivacyVectorEnv(3, num_rounds=5, dp_orders=None, autoreset_mode=AutoresetMode.SAME_STEP)
    a, _ = venv.reset(seed=[1, 2, 3])
    b, _ = venv.reset(seed=[1, 2, 3])
    c, _ = venv.reset(seed=[1, 2, 4])
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    with pytest.raises(ValueError, match="num_envs=3"):
        venv.reset(seed=[1, 2])


@pytest.mark.slow
def test_render_modes():
    env = OTAPrivacyEnv(num_rounds=5, render_mode="ansi")
    env.reset(seed=0)
    env.step(np.zeros(1, np.float32))
    assert "x=" in env.render() and "rdp=" in env.render()
    env = OTAPrivacyEnv(num_rounds=5, render_mode="rgb_array")
    env.reset(seed=0)
    for _ in range(5):
        env.step(np.zeros(1, np.float32))
    image = env.render()
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3 and image.std() > 0
    with pytest.raises(ValueError, match="render_mode"):
        OTAPrivacyEnv(render_mode="human")
    with pytest.raises(RuntimeError, match="reset"):
        OTAPrivacyEnv().step(np.zeros(1, np.float32))


def test_price_action_plays_the_minimiser_of_the_rounds_lagrangian():
    """x_t of a price action = argmin_x L_t(x) + mu_t c_t(x) by the policies' safeguarded Newton solver (itself checked
    against mpmath), mu_t = mu_ref 10^(2a) with mu_ref the price of the stationary water level that spends R / (k + b)
    on average, b = sqrt(k) cv the safety stock (one standard deviation of the k rounds' spend at the fair share R / k):
    the levels by bisection on the closed-form mean spend, cv by scipy quadrature of E[c^2], independently."""
    from scipy import integrate, optimize, special

    from otagym.schemes.receive_scaling import minimize_round

    env = OTAPrivacyEnv(num_rounds=40, dp_orders=None, num_devices=3, batch_size=(30, 60, 90),
                        dataset_size=(6000, 6000, 3000))
    _, info = env.reset(seed=2)
    model, nu = env.unwrapped.model, env.unwrapped.scenario.nu
    a_mean = model.x_max * model.expected_h_min2(info["mean_channel_gain"])
    k_scale = model.cost_scale / a_mean

    def theta_of(spend):  # E[c] at level a_mean * theta: (K / a_mean) (e^-theta / theta - E1(theta))
        return optimize.brentq(lambda th: k_scale * (np.exp(-th) / th - special.exp1(th)) - spend, 1e-9, 50,
                               xtol=1e-15, rtol=1e-14)

    spent = 0.0
    for t, a in enumerate(np.linspace(-1, 1, 9)):
        h = info["next_h_min2"]
        left, k = nu * 40 - spent, 40 - t
        th = theta_of(left / k)
        mean = k_scale * (np.exp(-th) / th - special.exp1(th))
        second = k_scale**2 * integrate.quad(lambda e: (1 / th - 1 / e) ** 2 * np.exp(-e), th, np.inf,
                                             epsrel=1e-12)[0]
        buffer = min(np.sqrt(k) * np.sqrt(second / mean**2 - 1), k)
        mu_ref = model.cost_slope_of_leakage(theta_of(left / (k + buffer)) * a_mean, 1.0)
        x_ref = minimize_round(model, h, leak_weight=1.0, cost_weight=mu_ref * 100.0 ** a)
        _, _, _, _, info = env.step(np.array([a], np.float32))
        spent += info["convergence_cost"]
        if spent < nu * 40 * (1 - 1e-9):  # the budget cap did not bind
            assert info["x"] == pytest.approx(x_ref, rel=1e-8), a


def test_block_position_is_observed():
    """Under block fading the last entry counts the rounds the channel still stays (over the block length); the gains
    change exactly when it returns to 1. Under i.i.d. fading it is 1."""
    venv = OTAPrivacyVectorEnv(2, num_rounds=25, dp_orders=None, fading="block", coherence_rounds=10)
    obs, info = venv.reset(seed=0)
    seen, gains = [], []
    for _ in range(24):
        seen.append(obs[:, -1].copy())
        gains.append(info["next_channel_gain"].copy())
        obs, _, _, _, info = venv.step(np.zeros((2, 1)))
    seen = np.array(seen)
    expected = np.array([(10 - t % 10) / 10 for t in range(24)])
    np.testing.assert_allclose(seen, np.repeat(expected[:, None], 2, axis=1), rtol=1e-6)
    changed = [not np.array_equal(gains[t], gains[t - 1]) for t in range(1, 24)]
    assert changed == [t % 10 == 0 for t in range(1, 24)]
    obs, _ = OTAPrivacyVectorEnv(2, num_rounds=5, dp_orders=None).reset(seed=0)
    assert np.all(obs[:, -1] == 1.0)
