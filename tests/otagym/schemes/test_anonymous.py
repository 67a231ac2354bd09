"""Model C (anonymous over-the-air computation, seed 002): the accounting against independent computations (Opacus,
numerical integration), the noise the server receives, the paper's Fig. 1 claims, the env and the policies."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.utils.env_checker import check_env as gym_check_env
from opacus.accountants.analysis.rdp import compute_rdp
from scipy import integrate, special, stats
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from baselines import CalibratedSigma, ConstantSigma, PaperSetting, calibrate_sigma
from baselines.anonymous.policies import BatchEpisodes
from otagym import ENV_ID, OTAPrivacyEnv, OTAPrivacyVectorEnv
from otagym.schemes.anonymous import (advanced_composition, advanced_composition_curve, clip_gradients,
                                      composed_epsilon, device_level_rdp, gaussian_epsilon, get_anonymous_scenario,
                                      noise_multiplier, over_the_air, participation_from_threshold,
                                      per_device_noise_var, rdp_theorem1, received_noise_var, round_rdp,
                                      theorem1_conditions, threshold_for_participation)
from otagym.accounting import OPACUS_ORDERS, rdp_sgm, rdp_to_dp

DELTA = 1e-5


# --- Theorem 1 against the numerical SGM RDP -------------------------------------------------------------------
def test_theorem1_is_an_upper_bound_where_its_conditions_hold():
    """Where p q <= 1/5, sigma' >= 4, (3) and (4) hold ([22]'s reading, sigma' in (3)), 2 (pq)^2 alpha / sigma'^2 is
    above Opacus's RDP at every point of a grid (197 of 330 points qualify); it is loose by 3.8x or more there."""
    held, worst = 0, 0.0
    for rate in (1e-4, 1e-3, 0.01, 0.05, 0.1, 0.2):
        for z in (4.0, 5.0, 8.0, 16.0, 32.0):
            for order in (1.5, 2, 3, 4, 8, 16, 32, 64, 128, 256, 512):
                if not theorem1_conditions(order, rate, z):
                    continue
                ref = compute_rdp(q=rate, noise_multiplier=z, steps=1, orders=[order])[0]
                closed = float(rdp_theorem1(order, rate, z))
                assert closed >= ref, (rate, z, order, closed, ref)
                held, worst = held + 1, max(worst, ref / closed)
    assert held == 197 and worst < 0.27


@pytest.mark.parametrize("rate, z, order, below", [(1e-3, 1.0, 32, 1e5), (0.01, 1.0, 16, 900), (1e-3, 2.0, 128, 1e5),
                                                  (0.01, 3.9, 8, None), (0.5, 4.0, 8, None)])
def test_theorem1_outside_its_conditions(rate, z, order, below):
    """Outside its conditions the closed form is no bound at Fig. 1's sigma' = 1 (or 2): the SGM's RDP exceeds it
    ``below`` times. Some points that fail a condition (sigma' = 3.9; p q = 0.5 > 1/5) are still bounded."""
    assert not theorem1_conditions(order, rate, z)
    ref = compute_rdp(q=rate, noise_multiplier=z, steps=1, orders=[order])[0]
    closed = float(rdp_theorem1(order, rate, z))
    assert ref > below * closed if below else closed >= ref


def test_condition3_as_printed():
    """(3) as printed (noise std sigma, 2 log sigma^2) is stricter than [22]'s when sigma = sigma' (Delta f = 1, §V's
    setting), but with Delta f = 20 it admits alpha = 300 at p q = 1e-4, sigma' = 4, where the closed form is 3e5
    times below the RDP."""
    orders, rates, zs = np.arange(2, 400)[:, None, None], np.array([1e-3, 0.01, 0.1])[:, None], np.array([4.0, 8.0])
    printed = theorem1_conditions(orders, rates, zs, noise_std=zs)
    assert printed.any() and not (printed & ~theorem1_conditions(orders, rates, zs)).any()
    assert theorem1_conditions(300, 1e-4, 4.0, noise_std=80.0) and not theorem1_conditions(300, 1e-4, 4.0)
    ref = compute_rdp(q=1e-4, noise_multiplier=4.0, steps=1, orders=[300])[0]
    assert ref > 3e5 * float(rdp_theorem1(300, 1e-4, 4.0))


# --- accounting in gradient units and the device-level bound ---------------------------------------------------
def test_sampled_accounting_is_opacus_at_rate_pq_and_sigma_b_over_2l():
    s = get_anonymous_scenario(participation=0.3, sampling_rate=0.05, clip_norm=0.7)
    sigma, batch = 0.013, np.array([1, 37, 600, 0])
    ours = round_rdp(s, noise_multiplier(sigma, 0.7, batch), orders=[2, 5, 32, 2.5])
    for k, b in enumerate(batch[:3]):
        ref = compute_rdp(q=0.015, noise_multiplier=sigma * b / 1.4, steps=1, orders=[2, 5, 32, 2.5])
        np.testing.assert_allclose(ours[k], ref, rtol=1e-9)
    assert np.all(ours[3] == 0)  # an empty batch carries no data


@pytest.mark.parametrize("rate, shift, order", [(0.01, 0.5, 8), (0.1, 0.25, 16), (0.3, 1.0, 4), (0.5, 0.5, 2)])
def test_sensitivity_2l_over_b_covers_the_substitution_pairs(rate, shift, order):
    """Replacing an example of the averaged batch gives the pair (1-r) N(0) + r N(v) vs (1-r) N(0) + r N(-v),
    ||v|| = L/b_t (unit noise here): its RDP, by quadrature, lies below the add/remove SGM at sensitivity 2L/b_t
    (sigma' = sigma b_t/(2L)) and above the one at L/b_t, so the factor 2 of Delta f is needed and enough."""
    x = np.linspace(-60.0, 60.0, 240_001)
    def log_mix(m: float) -> np.ndarray:
        return np.logaddexp(math.log1p(-rate) + stats.norm.logpdf(x), math.log(rate) + stats.norm.logpdf(x, m))
    pair = special.logsumexp(order * log_mix(shift) + (1 - order) * log_mix(-shift) + math.log(x[1] - x[0]))
    pair /= order - 1
    assert float(rdp_sgm(q=rate, noise_multiplier=1 / shift, orders=order)) < pair
    assert pair < float(rdp_sgm(q=rate, noise_multiplier=1 / (2 * shift), orders=order))


def _mixture_moment(q: float, z: float, order: int) -> float:
    """E_Q[(P/Q)^alpha] for P = (1-q) N(0, z^2) + q N(1, z^2), Q = N(0, z^2), by quadrature."""
    def f(x: float) -> float:
        return math.exp(order * math.log1p(q * math.expm1((2 * x - 1) / (2 * z * z))) + stats.norm.logpdf(x, 0, z))
    return integrate.quad(f, -40 * z, 40 * z + order, limit=500, points=[0.0, order / z**2])[0]


@pytest.mark.parametrize("p, q, z, order", [(0.1, 0.1, 1.0, 8), (0.1, 0.1, 4.0, 2), (0.5, 0.02, 1.0, 8)])
def test_device_level_rdp_is_exact_for_one_device_and_exceeds_the_rate_pq(p, q, z, order):
    """With one device the server sees y = 0 when it does not transmit (channel noise ignored, §IV-C), so the round
    is (1-p) point mass + p SGM(q): its RDP, integrated numerically, equals the device-level value -- which is 7x
    to 1200x the paper's SGM at rate p q here. The rate p q (Corollary 1) is not a valid bound for N = 1."""
    exact = math.log((1 - p) + p * _mixture_moment(q, z, order)) / (order - 1)
    device = float(device_level_rdp(p, rdp_sgm(q=q, noise_multiplier=z, orders=order), order))
    np.testing.assert_allclose(device, exact, rtol=1e-7)
    assert device > 6.5 * float(rdp_sgm(q=p * q, noise_multiplier=z, orders=order))


def test_device_level_rdp_edges():
    eps_q = np.array([0.0, 1e-14, 3.0, 5e3, np.inf])
    out = device_level_rdp(0.2, eps_q, 4)
    assert out[0] == 0 and np.isinf(out[-1])
    np.testing.assert_allclose(out[1], 0.2 * 1e-14, rtol=1e-9)  # no precision lost for tiny RDP
    np.testing.assert_allclose(out[3], 5e3 + math.log(0.2) / 3, rtol=1e-12)  # no overflow for large RDP
    np.testing.assert_array_equal(device_level_rdp(1.0, eps_q, 4), eps_q)


# --- the noise at the server -------------------------------------------------------------------------------------
def test_total_noise_is_sigma2_for_any_number_of_participants_exactly():
    a = np.arange(0, 1001)
    np.testing.assert_allclose(received_noise_var(0.37, a[1:]), 0.37**2, rtol=1e-15)
    np.testing.assert_allclose(per_device_noise_var(0.37, a[1:]) * a[1:], 0.37**2, rtol=1e-15)
    assert received_noise_var(0.37, 0) == 0 and per_device_noise_var(0.37, 0) == 0


@pytest.mark.parametrize("participants", [1, 4, 12])
@pytest.mark.parametrize("csi_factor", [1.0, 0.4])
def test_total_noise_is_sigma2_for_any_number_of_participants_statistically(participants, csi_factor):
    """Over the air (1)-(2) with real vectors: k y - f has per-coordinate variance sigma^2 + k^2 N_0 whatever a(t)
    is and whatever CSI scaling k the server imposes (the devices' noise scales with their signal), and f is the
    average of the included clipped gradients. 40,000 coordinates: 4% is > 5 standard errors."""
    rng = np.random.default_rng(participants)
    n_dev, n, d, sigma, n0 = 12, 5, 4000, 0.3, 0.02
    grads = clip_gradients(rng.standard_normal((n_dev, n, d)) * 0.03, 1.0)
    part = np.arange(n_dev) < participants
    errors = []
    for _ in range(10):
        inc = rng.random((n_dev, n)) < 0.6
        inc[0, 0] = True
        y, f = over_the_air(grads, inc, part, sigma, rng.exponential(1.0, n_dev) + 0.05, rng,
                            csi_factor=csi_factor, channel_noise_var=n0)
        np.testing.assert_allclose(f, grads[inc & part[:, None]].mean(axis=0), atol=1e-15)
        errors.append(csi_factor * y - f)
    err = np.concatenate(errors)
    np.testing.assert_allclose(err.var(), sigma**2 + csi_factor**2 * n0, rtol=0.04)
    assert abs(err.mean()) < 5 * err.std() / math.sqrt(err.size)


def test_clipping_scales_down_only():
    g = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    np.testing.assert_allclose(clip_gradients(g, 1.0), [[0.6, 0.8], [0.3, 0.4], [0.0, 0.0]])


def test_participation_threshold_round_trip():
    p = np.array([1.0, 0.5, 0.1, 1e-6])
    np.testing.assert_allclose(participation_from_threshold(threshold_for_participation(p)), p, rtol=1e-14)
    assert threshold_for_participation(1.0) == 0


# --- Fig. 1 ----------------------------------------------------------------------------------------------------
def test_epsilon_falls_with_pq_as_fig1_says():
    """eps after T rounds at sigma' = 1 falls strictly as p q falls (1, 0.5, 0.1, 0.01); p q = 1 and 0.5 exceed 100
    at T = 1000 and p q = 0.01 stays below 3 (§V's text); the advanced composition is far above RDP for p q = 1."""
    rounds = np.array([1, 10, 100, 1000])
    eps = np.array([composed_epsilon(rounds, r, 1.0, delta=DELTA, orders=OPACUS_ORDERS) for r in (1, 0.5, 0.1, 0.01)])
    assert np.all(np.diff(eps, axis=0) < 0)
    assert eps[0, -1] > 100 and eps[1, -1] > 100 and eps[3, -1] < 3
    assert np.all(advanced_composition_curve(rounds, DELTA) > 50 * eps[0])


def test_composed_epsilon_matches_opacus_rdp_with_lemma2():
    rdp = compute_rdp(q=0.1, noise_multiplier=1.0, steps=100, orders=list(OPACUS_ORDERS))
    ref = min(r + math.log(1 / DELTA) / (a - 1) for r, a in zip(rdp, OPACUS_ORDERS))
    np.testing.assert_allclose(composed_epsilon(100, 0.1, 1.0, delta=DELTA, orders=OPACUS_ORDERS), ref, rtol=1e-9)


def test_advanced_composition_as_in_dwork_roth():
    e0 = math.sqrt(2 * math.log(1.25 / (0.5 * DELTA / 100)))
    assert float(gaussian_epsilon(1.0, 0.5 * DELTA / 100)) == pytest.approx(e0, rel=1e-14)
    manual = math.sqrt(200 * math.log(1 / (0.5 * DELTA))) * e0 + 100 * e0 * math.expm1(e0)
    assert float(advanced_composition(e0, 100, 0.5 * DELTA)) == pytest.approx(manual, rel=1e-14)
    assert float(advanced_composition_curve(100, DELTA)) <= manual  # the best split is no worse than the half


# --- environment -------------------------------------------------------------------------------------------------
SHORT = dict(scheme="anonymous", num_rounds=12)


@pytest.mark.parametrize("action_type", ["normalized", "sigma"])
def test_env_passes_both_checkers_and_vectorises(action_type):
    env = gym.make(ENV_ID, action_type=action_type, **SHORT)
    gym_check_env(env.unwrapped, skip_render_check=True)
    sb3_check_env(gym.make(ENV_ID, action_type=action_type, **SHORT).unwrapped, warn=False)
    venv = gym.make_vec(ENV_ID, num_envs=3, vectorization_mode="vector_entry_point", action_type=action_type, **SHORT,
                        autoreset_mode=AutoresetMode.SAME_STEP)
    obs, _ = venv.reset(seed=0)
    assert obs.shape == (3,) + env.observation_space.shape
    for t in range(13):  # one autoreset, at the 12th step
        obs, reward, terminated, _, info = venv.step(venv.action_space.sample())
        assert venv.observation_space.contains(obs) and np.isfinite(reward).all()
        assert terminated.all() == (t == 11) == ("final_info" in info)
        if t == 11:
            assert info["final_info"]["dp_epsilon"].shape == (3,) and np.all(obs[:, 0] == 0)


def _episode(seed: int, **kwargs):
    env = OTAPrivacyEnv(**{**SHORT, **kwargs})
    obs, _ = env.reset(seed=seed)
    trace = [obs]
    for a in np.linspace(-1, 1, 12):
        obs, r, terminated, truncated, info = env.step(np.array([a], np.float32))
        trace.append((obs, r, {k: np.copy(v) for k, v in info.items()}))
    assert terminated and not truncated
    return trace


def _same(x, y) -> bool:
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, tuple):
        return all(_same(a, b) for a, b in zip(x, y))
    return np.array_equal(x, y)


def test_same_seed_same_trajectory_and_return_is_minus_utility():
    one, two, other = _episode(7), _episode(7), _episode(8)
    assert all(_same(a, b) for a, b in zip(one, two))
    assert not all(_same(a, b) for a, b in zip(one, other))
    rewards = [step[1] for step in one[1:]]
    info = one[-1][2]
    np.testing.assert_allclose(sum(rewards), -info["utility"], rtol=1e-12)
    assert np.isfinite(info["dp_epsilon"]) and info["dp_epsilon"] > 0


def test_vector_env_of_one_is_the_single_env():
    venv = OTAPrivacyVectorEnv(1, **SHORT)
    vobs, _ = venv.reset(seed=3)
    env = OTAPrivacyEnv(**SHORT)
    obs, _ = env.reset(seed=3)
    np.testing.assert_array_equal(vobs[0], obs)
    for a in np.linspace(-1, 1, 11):
        vobs, vr, *_ = venv.step(np.array([[a]], np.float32))
        obs, r, *_ = env.step(np.array([a], np.float32))
        np.testing.assert_array_equal(vobs[0], obs)
        assert vr[0] == r


def test_env_rounds_follow_the_protocol_and_the_accounting_is_opacus():
    """Over 64 x 40 rounds: E[a(t)] = N p and E[b_t] = N p n q (within 4.5 standard errors); the noise at the server is
    sigma^2 whenever someone transmits; every round's RDP equals Opacus's at rate p q and sigma b_t / (2L), and the
    episode's eps is otagym.accounting.rdp_to_dp of their sums."""
    s = get_anonymous_scenario(num_devices=30, participation=0.3, sampling_rate=0.2, dataset_size=50, clip_norm=2.0,
                               num_rounds=40)
    venv = OTAPrivacyVectorEnv(64, s, scheme="anonymous", action_type="sigma", dp_orders=(2, 8, 32))
    venv.reset(seed=4)
    a, b, rdp = [], [], np.zeros((64, 3))
    for t in range(40):
        sigma = np.full((64, 1), 0.02 * (1 + t % 3))
        *_, info = venv.step(sigma)
        info = info.get("final_info", info)
        a.append(info["participants"])
        b.append(info["batch_size"])
        np.testing.assert_array_equal(info["participants"], info["participating"].sum(axis=1))
        np.testing.assert_allclose(info["received_noise_var"], np.where(info["participants"] > 0, sigma[:, 0]**2, 0))
        for k in range(0, 64, 16):
            ref = compute_rdp(q=0.06, noise_multiplier=sigma[k, 0] * b[-1][k] / 4.0, steps=1, orders=[2, 8, 32])
            np.testing.assert_allclose(info["rdp_round"][k], ref[1], rtol=1e-9)
            rdp[k] += ref
    for draws, mean in ((np.ravel(a), 30 * 0.3), (np.ravel(b), 30 * 0.3 * 50 * 0.2)):
        assert abs(draws.mean() - mean) < 4.5 * draws.std(ddof=1) / math.sqrt(draws.size), (draws.mean(), mean)
    np.testing.assert_allclose(info["dp_epsilon"][::16], rdp_to_dp(rdp[::16], [2, 8, 32], s.delta)[0], rtol=1e-9)


def test_channel_noise_enters_the_convergence_term_but_not_the_accounting():
    clean, noisy = _episode(5), _episode(5, channel_noise_var=0.5)
    for (_, _, c), (_, _, n) in zip(clean[1:], noisy[1:]):
        assert np.array_equal(c["rdp_round"], n["rdp_round"]) and np.array_equal(c["rdp_round_device"],
                                                                                 n["rdp_round_device"])
        np.testing.assert_allclose(n["convergence_term"] - c["convergence_term"], 26_010 * 0.5, rtol=1e-12)
    assert clean[-1][2]["dp_epsilon"] == noisy[-1][2]["dp_epsilon"]


def test_device_accounting_is_reported_and_can_drive_the_reward():
    sampled, device = _episode(2), _episode(2, accounting="device")
    for (_, _, s), (_, _, d) in zip(sampled[1:], device[1:]):
        assert np.all(s["rdp_round_device"] >= s["rdp_round_sampled"])
        assert d["rdp_round"] == d["rdp_round_device"] and s["rdp_round"] == s["rdp_round_sampled"]
    assert device[-1][2]["dp_epsilon"] > sampled[-1][2]["dp_epsilon"]


def test_normalized_action_spans_the_noise_multiplier_range():
    env = OTAPrivacyEnv(noise_multiplier_range=(0.5, 8.0), **SHORT)
    env.reset(seed=0)
    unit = env.scenario.sigma_unit
    for a, z in ((-1.0, 0.5), (0.0, 2.0), (1.0, 8.0)):
        *_, info = env.step(np.array([a], np.float32))
        np.testing.assert_allclose(info["sigma"], z * unit, rtol=1e-6)


def test_bad_input_names_the_parameter_and_its_range():
    for field, value, allowed in (("participation", 0.0, r"in \(0, 1\]"), ("sampling_rate", 1.5, r"in \(0, 1\]"),
                                  ("num_devices", 0, r"in \[1, 100000\]"), ("clip_norm", -1.0, "in \\[1e-30"),
                                  ("accounting", "pq", "'sampled', 'device'"), ("delta", 1.0, r"in \(0, 1\)")):
        with pytest.raises(ValueError, match=f"AnonymousScenario.{field} must be .*{allowed}"):
            OTAPrivacyEnv(scheme="anonymous", **{field: value})
    with pytest.raises(TypeError, match="AnonymousScenario.dataset_size must be an integer"):
        get_anonymous_scenario(dataset_size="600")
    with pytest.raises(ValueError, match=r"learning_rate must be <= 1/smoothness = 0.5"):
        get_anonymous_scenario(smoothness=2.0, learning_rate=0.6)
    with pytest.raises(ValueError, match=r"noise_multiplier_range must be \(low, high\) with low < high"):
        OTAPrivacyEnv(scheme="anonymous", noise_multiplier_range=(5.0, 1.0))
    with pytest.raises(TypeError, match="unexpected keyword argument 'nu'.*AnonymousScenario"):
        OTAPrivacyEnv(scheme="anonymous", nu=0.1)
    env = OTAPrivacyEnv(action_type="sigma", **SHORT)
    env.reset(seed=0)
    for sigma in (0.0, -1.0, np.nan, 1e31):
        with pytest.raises(ValueError, match=r"action \(sigma\) must lie in \[1e-30, 1e\+30\]"):
            env.step(np.array([sigma]))
    env = OTAPrivacyEnv(**SHORT)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"action \(normalized\) must lie in \[-1, 1\]"):
        env.step(np.array([1.5], np.float32))


# --- policies ----------------------------------------------------------------------------------------------------
ORDERS = (2, 3, 4, 6, 8, 12, 16, 24, 32)


def _final_epsilons(s, policy, episodes: int, seed: int) -> np.ndarray:
    venv = OTAPrivacyVectorEnv(episodes, s, scheme="anonymous", action_type="sigma", dp_orders=ORDERS,
                               autoreset_mode=AutoresetMode.SAME_STEP)
    obs, info = venv.reset(seed=seed)
    policy.reset(s, seed=seed)
    for _ in range(s.num_rounds):
        obs, _, terminated, _, info = venv.step(policy.act(obs, info))
    assert terminated.all()
    return info["final_info"]["dp_epsilon"]


def test_calibrated_sigma_meets_the_target_with_its_confidence():
    """The calibrated sigma is the least one whose simulated eps quantile meets the target; played in the env on
    fresh channels, the share of episodes within the target matches the confidence (binomial 3-sigma band)."""
    s = get_anonymous_scenario(num_rounds=100)
    for confidence in (0.5, 0.9):
        policy = CalibratedSigma(2.0, confidence=confidence, orders=ORDERS, episodes=48)
        policy.reset(s)
        sim = BatchEpisodes(s, np.random.default_rng(0), 48)
        quantile = [np.quantile(sim.epsilons(policy.sigma * f, orders=np.array(ORDERS)), confidence,
                                method="inverted_cdf") for f in (1.0, 1 - 1e-5)]
        assert quantile[0] <= 2.0 < quantile[1]
        share = np.mean(_final_epsilons(s, policy, 48, seed=11) <= 2.0)
        assert abs(share - confidence) <= 3 * math.sqrt(confidence * (1 - confidence) / 48) + 1e-9, share


def test_calibration_orders_and_errors():
    s = get_anonymous_scenario(num_rounds=50)
    sigmas = [calibrate_sigma(s, 2.0, confidence=c, orders=ORDERS, episodes=16) for c in (0.5, 0.95)]
    assert sigmas[0] < sigmas[1] < calibrate_sigma(s, 2.0, confidence=0.95, orders=ORDERS, episodes=16,
                                                   accounting="device")
    assert calibrate_sigma(s, 4.0, orders=ORDERS, episodes=16) < sigmas[1]
    with pytest.raises(ValueError, match="target_epsilon must be reachable"):
        calibrate_sigma(s, 1e-9, orders=ORDERS, episodes=4)
    with pytest.raises(ValueError, match="confidence must lie in"):
        calibrate_sigma(s, 2.0, confidence=1.0)


def test_paper_setting_and_constant_sigma():
    s = get_anonymous_scenario()
    paper = PaperSetting()
    paper.reset(s)
    assert float(noise_multiplier(paper.sigma, s.clip_norm, s.expected_batch)) == pytest.approx(1.0, rel=1e-14)
    np.testing.assert_array_equal(ConstantSigma(0.3).act(np.zeros((4, 3)), {}), np.full((4, 1), 0.3))
    eps = _final_epsilons(s.replace(num_rounds=30), paper, 4, seed=0)
    assert np.all(np.isfinite(eps) & (eps > 0))


def test_sigma_action_space_is_accepted_whatever_the_units():
    """Regression (found by the fuzz test): with clip_norm = 1e-30 the sigma action space lies below 1e-30, and its
    samples were refused as non-physical."""
    env = OTAPrivacyEnv(scheme="anonymous", clip_norm=1e-30, action_type="sigma", num_rounds=3)
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(3):
        _, reward, _, _, info = env.step(env.action_space.sample())
        assert np.isfinite(reward) and np.isfinite(info["rdp_round"]).all()
    env.reset(seed=1)
    with pytest.raises(ValueError, match="action \\(sigma\\) must lie in"):
        env.step(np.array([0.0]))
