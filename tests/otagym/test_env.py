"""OTAPrivacyEnv / OTAPrivacyVectorEnv: API checkers, determinism, single == vector on the same draws, and every
info entry against an independent computation (closed forms of the AdaScale paper, Opacus)."""

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from gymnasium.vector import AutoresetMode
from opacus.accountants.analysis import rdp as opacus_rdp
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import otagym
from otagym import ENV_ID, OTAPrivacyEnv, OTAPrivacyVectorEnv
from otagym.accounting import DEFAULT_ORDERS

SHORT = dict(num_rounds=40)


def test_registered_env_passes_gymnasium_and_sb3_checkers():
    env = gym.make(ENV_ID, **SHORT)
    gym_check_env(env.unwrapped, skip_render_check=True)
    sb3_check_env(gym.make(ENV_ID, **SHORT).unwrapped, warn=False)
    assert env.unwrapped.scenario.name == "paper-mnist"


def test_make_vec_with_vector_entry_point():
    venv = gym.make_vec(ENV_ID, num_envs=8, vectorization_mode="vector_entry_point", **SHORT)
    assert isinstance(venv.unwrapped, OTAPrivacyVectorEnv)
    obs, info = venv.reset(seed=0)
    assert obs.shape == (8, 36) and obs.dtype == np.float32
    obs, rew, term, trunc, info = venv.step(venv.action_space.sample())
    assert rew.shape == (8,) and info["rdp_round"].shape == (8, 10) and info["_rdp_round"].all()
    assert venv.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP


def test_gym_make_overrides_scenario_fields_and_rejects_unknown():
    env = gym.make(ENV_ID, num_rounds=7, nu=0.02, num_devices=3)
    s = env.unwrapped.scenario
    assert (s.num_rounds, s.nu, s.num_devices) == (7, 0.02, 3)
    assert env.observation_space.shape == (3 * 3 + 6,)
    # Python's error for an unknown keyword argument: SB3's make_vec_env and TorchRL's GymEnv retry on it.
    with pytest.raises(TypeError, match="unexpected keyword argument 'nnu'"):
        gym.make(ENV_ID, nnu=0.1)


def _rollout(env, seed, actions):
    obs, _ = env.reset(seed=seed)
    out = [obs]
    for a in actions:
        obs, r, term, trunc, info = env.step(a)
        out += [obs, r, info["x"], info["rdp_round"]]
    return out


@pytest.mark.parametrize("make,kwargs,named", [
    ("make", {"num_rounds": 100}, "num_rounds=100"),
    ("make", {"correlation": 0.5}, "correlation=0.5 (the task's: 0.9)"),
    ("make_vec", {"num_rounds": 100}, "num_rounds=100"),
    ("make_vec", {"nu_range": (0.02, 0.08)}, "nu_range=(0.02, 0.08) (the task's: (0.01, 0.16))"),
])
def test_a_task_id_made_with_other_settings_warns_that_it_is_no_longer_the_task(make, kwargs, named):
    """``gym.make(task_id, num_rounds=100)`` makes another env under the task's id: a UserWarning names each setting
    that changed; the task's own settings (a list for its tuple included), run options (render mode, the number
    of envs) and the action's semantics (the scheme's ``action_args``: a budget_apg model's price action on the
    constrained task) do not warn, nor does the generic id with any settings."""
    task_id = "otagym/ReceiveScalingGaussMarkov-v0"
    args = (task_id, 2) if make == "make_vec" else (task_id,)
    with pytest.warns(UserWarning, match="is no longer that task") as caught:
        getattr(gym, make)(*args, **kwargs)
    assert any(named in str(w.message) for w in caught), [str(w.message) for w in caught]
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*is no longer that task")
        gym.make(task_id)
        gym.make(task_id, nu_range=[0.01, 0.16], correlation=0.9, render_mode=None)
        gym.make_vec(task_id, 3)
        gym.make(ENV_ID, num_rounds=100)
        gym.make("otagym/ReceiveScalingCMDP-v1", reward_mode="budget", action_type="price", budget_floor=0.8)


def test_a_task_made_longer_or_shorter_is_told_its_cost_and_time_limits_are_still_the_tasks():
    """The task's time limit is a TimeLimit gym.make applies after the env is made (the env cannot see it): made with
    num_rounds=1000 the task still ends its episodes at round 500, and its cost limit is still 500 rounds'."""
    task_id = "otagym/ReceiveScalingCMDP-v1"
    with pytest.warns(UserWarning, match="is no longer that task") as caught:
        env = gym.make(task_id, num_rounds=1000)
    said = " ".join(str(w.message) for w in caught)
    assert "Its cost_limit is still the task's 500.0, the limit of 500 rounds: give cost_limit for episodes of 1000." \
        in said and "Its time limit is the task's, which ends every episode at round 500 of 1000, unless gym.make " \
        "was given max_episode_steps=1000." in said
    env.reset(seed=0)
    steps = 1
    while not any(env.step(np.zeros(1, np.float32))[2:4]):
        steps += 1
    assert steps == 500  # what the warning says
    with pytest.warns(UserWarning) as caught:
        gym.make(task_id, num_rounds=100, cost_limit=100.0, max_episode_steps=100)
    said = " ".join(str(w.message) for w in caught)
    assert "cost_limit=100.0 (the task's: 500.0)" in said and "Its " not in said
    with pytest.warns(UserWarning) as caught:  # the vector env takes the limit itself (and refuses a shorter one)
        envs = gym.make_vec(task_id, 2, vectorization_mode="vector_entry_point", num_rounds=1000, cost_limit=1000.0,
                            max_episode_steps=1000)
    assert "time limit" not in " ".join(str(w.message) for w in caught)
    envs.reset(seed=0)
    steps = 1
    while not envs.step(np.zeros((2, 1), np.float32))[2].any():
        steps += 1
    assert steps == 1000


def test_same_seed_same_trajectory_different_seed_differs():
    acts = np.random.default_rng(0).uniform(-1, 1, size=(40, 1)).astype(np.float32)
    a = _rollout(OTAPrivacyEnv(**SHORT), 5, acts)
    b = _rollout(OTAPrivacyEnv(**SHORT), 5, acts)
    c = _rollout(OTAPrivacyEnv(**SHORT), 6, acts)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0], c[0])
    va = _rollout(OTAPrivacyVectorEnv(4, **SHORT), 3, np.repeat(acts[:, None], 4, axis=1))
    vb = _rollout(OTAPrivacyVectorEnv(4, **SHORT), 3, np.repeat(acts[:, None], 4, axis=1))
    for x, y in zip(va, vb):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("mode", [{"reward_mode": "budget"}, {"action_type": "share"}, {"reward_mode": "cmdp"},
                                  {"reward_mode": "lagrangian", "reward_lambda": 0.2}])
def test_vector_env_equals_single_env_on_injected_draws(mode):
    """Inject one channel realisation per env into both envs; every output must agree.

    Agreement is to 1e-13 relative, not bitwise: numpy's SIMD exp/expm1/log1p round the vector body and the scalar
    tail of an array differently, so one element can differ by an ulp between batch sizes 1 and N.
    """
    n, big_t = 3, 25
    scen = dict(num_rounds=big_t, num_devices=4, batch_size=(30, 60, 60, 90), dataset_size=(3000, 6000, 3000, 6000))
    rng = np.random.default_rng(11)
    model = otagym.get_scenario("paper-mnist", **scen)
    from otagym.channel import ChannelModel
    distances, gains = ChannelModel.from_scenario(model).sample_trace(rng, big_t, batch_shape=(n,))
    actions = rng.uniform(-1, 1, size=(big_t, n, 1)).astype(np.float32)
    venv = OTAPrivacyVectorEnv(n, **mode, **scen, autoreset_mode=AutoresetMode.SAME_STEP)
    vobs, _ = venv.reset(seed=0, options={"distances_m": distances, "channel_gains": gains})
    singles = [OTAPrivacyEnv(**mode, **scen) for _ in range(n)]
    sobs = [e.reset(seed=99, options={"distances_m": distances[i], "channel_gains": gains[:, i]})[0]
            for i, e in enumerate(singles)]
    np.testing.assert_allclose(vobs, np.stack(sobs), rtol=1e-6)
    for t in range(big_t):
        vo, vr, vt, _, vi = venv.step(actions[t])
        for i, e in enumerate(singles):
            so, sr, st, _, si = e.step(actions[t, i])
            np.testing.assert_allclose(vi["final_obs"][i] if vt[i] else vo[i], so, rtol=1e-6)
            assert vr[i] == pytest.approx(sr, rel=1e-13) and vt[i] == st
            info_v = vi["final_info"] if vt[i] else vi
            # At a terminal step the channel keys differ by design: the vector env's describe the autoreset episode.
            after_reset = {"next_channel_gain", "next_h_min2", "mean_channel_gain", "distances_m"}
            keys = [k for k in si if not (vt[i] and k in after_reset)]
            assert set(keys) <= set(info_v)
            for key in keys:
                value = si[key]
                np.testing.assert_allclose(info_v[key][i], value, rtol=1e-13, atol=0, err_msg=key)


def test_info_matches_closed_forms_and_opacus():
    s = otagym.get_scenario("paper-mnist", num_rounds=30, num_devices=3, batch_size=(30, 60, 90),
                            dataset_size=(6000, 6000, 3000))
    env = OTAPrivacyEnv(s, reward_mode="cmdp")
    _, info0 = env.reset(seed=4)
    gains = info0["next_channel_gain"]
    k2 = 1 + (1 - s.sampling_rates) / s.batch_sizes
    h_min2 = np.min(gains / k2)
    assert info0["next_h_min2"] == pytest.approx(h_min2, rel=1e-15)
    x_max = s.power_max_w * s.model_dim * s.num_devices**2 / s.clip_norm**2
    _, _, _, _, info = env.step(np.array([0.6], np.float32))
    x = x_max * 1e-3 ** ((1 - float(np.float32(0.6))) / 2)
    assert info["x"] == pytest.approx(x, rel=1e-12)
    eta = x * h_min2
    assert info["receive_scaling"] == pytest.approx(eta, rel=1e-12)
    sigma = s.num_devices * s.batch_sizes * np.sqrt(s.noise_power_w) / (np.sqrt(2 * eta) * s.clip_norm)  # eq. (15)
    np.testing.assert_allclose(info["noise_multiplier"], sigma, rtol=1e-12)
    ref = [opacus_rdp.compute_rdp(q=q, noise_multiplier=sg, steps=1, orders=[3])[0]
           for q, sg in zip(s.sampling_rates, sigma)]
    np.testing.assert_allclose(info["rdp_round"], ref, rtol=1e-9)
    cost = s.model_dim * s.noise_power_w / h_min2 * (1 / x - 1 / x_max)  # eq. (28b)
    assert info["convergence_cost"] == pytest.approx(cost, rel=1e-12)
    power = eta * s.clip_norm**2 * k2 / (s.model_dim * s.num_devices**2 * gains)  # eq. (14)
    np.testing.assert_allclose(info["transmit_power_w"], power, rtol=1e-12)


def test_full_power_puts_the_weakest_device_exactly_at_p_max():
    env = OTAPrivacyEnv(num_rounds=50, reward_mode="cmdp")
    env.reset(seed=1)
    for _ in range(50):
        _, _, _, _, info = env.step(np.array([1.0], np.float32))
        p = info["transmit_power_w"]
        assert p.max() == pytest.approx(env.scenario.power_max_w, rel=1e-12)
        assert np.all(p <= env.scenario.power_max_w * (1 + 1e-12))


def test_episode_end_reports_dp_epsilon_equal_to_opacus_on_the_same_rounds():
    s = otagym.get_scenario("paper-mnist", num_rounds=60)
    env = OTAPrivacyEnv(s, reward_mode="cmdp")
    env.reset(seed=2)
    rng = np.random.default_rng(2)
    total = np.zeros(len(DEFAULT_ORDERS))
    rdp_alpha = 0.0
    for t in range(60):
        _, _, term, trunc, info = env.step(rng.uniform(0.2, 1.0, size=1).astype(np.float32))
        total += opacus_rdp.compute_rdp(q=0.01, noise_multiplier=info["noise_multiplier"][0], steps=1,
                                        orders=list(DEFAULT_ORDERS))
        rdp_alpha += info["rdp_round"][0]
        assert ("dp_epsilon" in info) == (t == 59) and not trunc
    assert term
    eps, order = opacus_rdp.get_privacy_spent(orders=list(DEFAULT_ORDERS), rdp=total, delta=1e-5)
    np.testing.assert_allclose(info["dp_epsilon"], eps, rtol=1e-9)
    assert info["dp_order"][0] == order
    np.testing.assert_allclose(info["rdp_cumulative"], rdp_alpha, rtol=1e-12)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.array([0.0], np.float32))


def test_rewards_follow_their_documented_formulas():
    """reward = -(L_t - L_t^EqualAlloc [+ lambda (c_t - nu)]) / H, L_t^EqualAlloc EqualAlloc's leakage on the round's
    channel and H = T (E[L_t under EqualAlloc] - E[L_t at the water level that spends nu on average]) of the episode,
    both expectations by Monte Carlo here (the level by bisection on the sample's mean cost)."""
    from scipy import optimize

    lam = 0.3
    for mode in ("budget", "cmdp", "lagrangian"):
        env = OTAPrivacyEnv(reward_mode=mode, reward_lambda=lam if mode == "lagrangian" else None, **SHORT)
        _, info0 = env.reset(seed=0)
        _, r, _, _, info = env.step(np.array([0.5], np.float32))
        leak, cost, nu, big_t = info["rdp_round"].sum(), info["convergence_cost"], env.scenario.nu, 40
        model = env.unwrapped.model
        mean_h = 1 / np.sum(model.k2 / info0["mean_channel_gain"])
        h = np.random.default_rng(0).exponential(mean_h, 200_000)
        cap = model.x_max * h
        log_level = optimize.brentq(
            lambda y: model.convergence_cost(np.minimum(np.exp(y), cap) / h, h).mean() - nu,
            np.log(cap.mean()) - 20, np.log(cap.max()))
        water = model.leakage(np.minimum(np.exp(log_level), cap), 1.0).mean()
        scale = big_t * (model.leakage(model.x_for_cost(nu, h), h).mean() - water)
        baseline = model.leakage(model.x_for_cost(nu, info["h_min2"]), info["h_min2"])
        expected = -(leak - baseline + (lam * (cost - nu) if mode == "lagrangian" else 0.0)) / scale
        assert r == pytest.approx(expected, rel=2e-2)
    assert info["cost"] == pytest.approx(cost / nu, rel=1e-15)
    with pytest.raises(ValueError, match="reward_lambda"):
        OTAPrivacyEnv(reward_mode="lagrangian")
    with pytest.raises(ValueError, match="reward_lambda"):
        OTAPrivacyEnv(reward_mode="budget", reward_lambda=0.1)
    with pytest.raises(ValueError, match="budget"):
        OTAPrivacyEnv(reward_mode="cmdp", action_type="price")
    with pytest.raises(ValueError, match="budget"):
        OTAPrivacyEnv(reward_mode="budget", action_type="x")


@pytest.mark.parametrize("action_type,bad", [("price", np.nan), ("share", -1.01),
                                             ("normalized", np.nan), ("normalized", np.inf), ("normalized", 1.5),
                                             ("x", -1.0), ("x", np.nan), ("x", 1e12), ("x", 1e-300), ("eta", -1e-9),
                                             ("eta", np.nan)])
def test_bad_actions_raise_a_clear_error(action_type, bad):
    env = OTAPrivacyEnv(action_type=action_type, **SHORT)  # price/share: budget mode; the others: cmdp
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action"):
        env.step(np.array([bad]))


def test_x_and_eta_actions_are_the_same_decision():
    ex = OTAPrivacyEnv(reward_mode="cmdp", action_type="x", **SHORT)
    ee = OTAPrivacyEnv(reward_mode="cmdp", action_type="eta", **SHORT)
    _, ix = ex.reset(seed=3)
    _, ie = ee.reset(seed=3)
    x = 0.37 * ex.model.x_max
    _, rx, _, _, ix = ex.step(np.array([x]))
    _, re, _, _, ie = ee.step(np.array([x * ie["next_h_min2"]]))
    assert rx == pytest.approx(re, rel=1e-12) and ix["x"] == pytest.approx(ie["x"], rel=1e-12)


@pytest.mark.parametrize("fading,kw", [("block", {"coherence_rounds": 10}), ("gauss_markov", {"correlation": 0.95})])
def test_correlated_fading_runs_in_both_envs(fading, kw):
    venv = OTAPrivacyVectorEnv(5, fading=fading, num_rounds=30, **kw)
    venv.reset(seed=0)
    for _ in range(30):
        obs, *_ = venv.step(np.zeros((5, 1), np.float32))
    assert np.isfinite(obs).all()


@pytest.mark.slow
def test_a_million_steps_produce_no_nan():
    venv = OTAPrivacyVectorEnv(2000, dp_orders=None, autoreset_mode=AutoresetMode.SAME_STEP)
    venv.reset(seed=7)
    rng = np.random.default_rng(7)
    for t in range(500):  # 2000 envs x 500 rounds = 10^6 steps, extremes included
        a = rng.uniform(-1, 1, size=(2000, 1))
        a[:100] = -1.0
        a[100:200] = 1.0
        obs, rew, term, _, info = venv.step(a)
        assert np.isfinite(obs).all() and np.isfinite(rew).all()
        assert np.isfinite(info["rdp_round"]).all() and np.isfinite(info["convergence_cost"]).all()
    assert term.all() and np.isfinite(info["final_info"]["rdp_cumulative"]).all()


def test_extreme_actions_keep_the_final_epsilon_finite():
    venv = OTAPrivacyVectorEnv(2, num_rounds=100, reward_mode="cmdp", autoreset_mode=AutoresetMode.SAME_STEP)
    venv.reset(seed=0)
    for _ in range(100):
        *_, info = venv.step(np.array([[1.0], [-1.0]]))
    eps = info["final_info"]["dp_epsilon"]
    assert np.all(np.isfinite(eps)) and eps[0, 0] > eps[1, 0]


def test_sb3_adapter_trains_ppo_and_reports_terminal_observations():
    from stable_baselines3 import PPO

    from otagym.wrappers.sb3 import OTAPrivacySB3VecEnv

    venv = OTAPrivacySB3VecEnv(4, num_rounds=16)
    venv.seed(0)
    obs = venv.reset()
    assert obs.shape == (4, 36)
    model = PPO("MlpPolicy", venv, n_steps=16, batch_size=32, n_epochs=1, seed=0, verbose=0)
    model.learn(total_timesteps=64)
    for _ in range(16):
        obs, rew, done, infos = venv.step(np.zeros((4, 1), np.float32))
    assert done.all() and all("terminal_observation" in i and "episode_dp_epsilon" in i for i in infos)
    assert infos[0]["terminal_observation"].shape == (36,)
