"""Issue 9, classes 1-3: the examples of the issue, each closed by the general mechanism (``otagym.validation``)."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode

from otagym import OTAPrivacyEnv, OTAPrivacyVectorEnv
from otagym.schemes.cdpb import CDPBScenario, sum_of_others
from otagym.accounting import RDPLedger
from otagym.schemes.receive_scaling import Scenario, get_scenario


@pytest.mark.parametrize("field,value,error", [
    ("num_devices", float("nan"), ValueError), ("num_devices", None, TypeError), ("num_devices", "5", TypeError),
    ("num_devices", True, TypeError), ("num_devices", 5.5, ValueError), ("delta", "0.1", TypeError),
    ("distance_min_m", "5", TypeError), ("batch_size", "60", TypeError), ("name", 5, TypeError),
    ("fading", 3, TypeError), ("fading", "rician", ValueError), ("nu", 1e-300, ValueError),
    ("clip_norm", 1e31, ValueError), ("noise_power_w", 1e200, ValueError), ("distances_m", [1e9] * 10, ValueError),
])
def test_scenario_fields_refused_naming_field_allowed_and_value(field, value, error):
    with pytest.raises(error) as info:
        Scenario(**{field: value})
    msg = str(info.value)
    assert f"Scenario.{field} must be" in msg and f"got {value!r}"[:12] in msg


def test_numpy_scalars_are_numbers_and_integral_floats_integers():
    s = Scenario(nu=np.float32(0.04), num_devices=np.int64(4), num_rounds=1e2)
    assert s.nu == pytest.approx(0.04, rel=1e-7) and isinstance(s.nu, float)
    assert (s.num_devices, s.num_rounds) == (4, 100) and isinstance(s.num_rounds, int)


@pytest.mark.parametrize("field,value", [("artificial_noise", "False"), ("csi_feedback", 1), ("portion", True),
                                         ("strategy", 3)])
def test_cdpb_flags_and_choices_take_no_truthy_stand_ins(field, value):
    with pytest.raises(TypeError, match=f"CDPBScenario.{field} must be"):
        CDPBScenario(**{field: value})


def test_name_can_be_overridden_like_any_field():
    assert OTAPrivacyEnv(name="mine").scenario.name == "mine"
    assert get_scenario("paper-cifar10", name="x").num_rounds == 720


@pytest.mark.parametrize("kwargs,error,match", [
    ({"dp_orders": []}, ValueError, "dp_orders"), ({"dp_orders": 5}, TypeError, "dp_orders"),
    ({"x_min_ratio": "0.1"}, TypeError, "x_min_ratio"), ({"x_min_ratio": 1e-300}, ValueError, "x_min_ratio"),
    ({"price_decades": None}, TypeError, "price_decades"), ({"nu_range": 5}, TypeError, "nu_range"),
    ({"nu_range": (0.2, 0.1)}, ValueError, "nu_range"),
    ({"reward_mode": "lagrangian", "reward_lambda": "1"}, TypeError, "reward_lambda"),
    ({"action_type": 5}, TypeError, "action_type"), ({"scheme": 5}, TypeError, "scheme"),
])
def test_env_arguments_refused_at_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        OTAPrivacyEnv(**kwargs)


def test_num_envs_and_ledger_orders_checked_at_construction():
    with pytest.raises(TypeError, match="num_envs"):
        OTAPrivacyVectorEnv(True)
    with pytest.raises(ValueError, match="orders"):
        RDPLedger(q=[0.1], orders=[])


@pytest.mark.parametrize("action,error", [(np.zeros(3), ValueError), (np.array([0.1 + 1j]), TypeError),
                                          (np.array(["0.1"]), TypeError), (None, TypeError),
                                          (np.ma.masked_array([0.1], mask=[True]), TypeError)])
def test_single_env_actions_of_wrong_shape_or_kind(action, error):
    env = OTAPrivacyEnv(num_rounds=3)
    env.reset(seed=0)
    with pytest.raises(error, match="action"):
        env.step(action)


@pytest.mark.parametrize("shape", [(2, 2), (1, 4), (4, 1, 1), (3, 1)])
def test_vector_env_actions_must_have_one_entry_per_env(shape):
    env = OTAPrivacyVectorEnv(4, num_rounds=3)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(4, 1\) or \(4,\)"):
        env.step(np.zeros(shape))


def test_eta_action_space_passes_check_env_and_clips_at_the_power_limit():
    env = OTAPrivacyEnv(action_type="eta", num_rounds=5)
    check_env(env, skip_render_check=True)
    _, info = env.reset(seed=1)
    _, _, _, _, step = env.step(np.array([1.0]))  # far above x_max h_min^2
    assert step["x"] == env.model.x_max
    assert step["receive_scaling"] == pytest.approx(env.model.x_max * info["next_h_min2"], rel=1e-12)


def test_x_actions_below_the_floor_are_refused():
    env = OTAPrivacyEnv(action_type="x", num_rounds=3)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"action \(x\) must lie in"):
        env.step(np.array([1e-300]))


def test_autoreset_replays_a_trace_with_its_placement():
    env = OTAPrivacyVectorEnv(2, num_rounds=3, num_devices=4, autoreset_mode=AutoresetMode.SAME_STEP)
    _, info = env.reset(seed=0)
    gains = np.random.default_rng(0).exponential(size=(3, 2, 4)) * info["mean_channel_gain"]
    _, info = env.reset(seed=0, options={"channel_gains": gains, "distances_m": info["distances_m"]})
    placement = info["mean_channel_gain"]
    for _ in range(4):  # the episode ends after 3 steps, autoresets, and the 4th step replays round 0
        _, _, _, _, info = env.step(np.zeros(2))
    np.testing.assert_array_equal(info["mean_channel_gain"], placement)
    np.testing.assert_array_equal(info["channel_gain"], gains[0])


def test_cdpb_without_receiver_noise_refused_where_a_round_can_have_none():
    for k in (1, 2):
        with pytest.raises(ValueError, match="noise_power_w must be > 0 for the environment"):
            OTAPrivacyEnv(scheme="cdpb", num_clients=k, noise_power_w=0.0)
    env = OTAPrivacyEnv(scheme="cdpb", num_clients=2, noise_power_w=0.0, strategy="noisy", num_rounds=4)
    env.reset(seed=0)
    for _ in range(4):
        obs, reward, *_ = env.step(env.action_space.sample())
        assert np.isfinite(reward) and np.isfinite(obs).all()


def test_noise_of_the_others_has_no_cancellation():
    """One client whose received noise dwarfs sigma_z^2: total - own gave 0 (infinite RDP); the exclusive sums do
    not (found by the fuzz suite: num_clients=1, channel_scale=6.9e13)."""
    x = np.array([[1.4e14, 0.01], [3.0, 4.0]])
    np.testing.assert_array_equal(sum_of_others(x), [[0.01, 1.4e14], [4.0, 3.0]])
    env = OTAPrivacyEnv(scheme="cdpb", num_clients=1, channel_scale=6.9e13, num_rounds=2)
    env.reset(seed=0)
    for _ in range(2):
        _, reward, _, _, info = env.step(np.array([1.0], dtype=np.float32))
        assert np.isfinite(reward) and np.isfinite(info["rdp_round"]).all()


# --- issue: huge numbers, reset option shapes, x bound digits, settings without effect ------------------------------
@pytest.mark.parametrize("kwargs,name,allowed", [
    ({"num_devices": 10**400}, "Scenario.num_devices", "an integer in [1, 10000]"),
    ({"nu": 10**400}, "Scenario.nu", "a finite number in [1e-30, 1e+30]"),
    ({"nu": -10**400}, "Scenario.nu", "a finite number in [1e-30, 1e+30]"),
    ({"batch_size": (10**400,) * 10}, "Scenario.batch_size", "in [1e-30, 1e+30]"),
    ({"dataset_size": 10**400}, "Scenario.dataset_size", "an integer in [1, 1000000000000]"),
    ({"num_envs": 10**400}, "num_envs", "an integer in [1, 1000000]"),
    ({"x_min_ratio": 10**400}, "x_min_ratio", "a finite number in [1e-12, 1)"),
    ({"scheme": "cdpb", "channel_scale": 10**400}, "CDPBScenario.channel_scale", "in [1e-30, 1e+30]"),
    ({"scheme": "anonymous", "dataset_size": -10**400}, "AnonymousScenario.dataset_size", "an integer in [1, "),
])
def test_huge_python_numbers_are_refused_naming_the_argument_and_range(kwargs, name, allowed):
    """10**400 fits neither float64 nor int64: it raised a bare OverflowError."""
    with pytest.raises(ValueError) as info:
        OTAPrivacyVectorEnv(**kwargs) if "num_envs" in kwargs else OTAPrivacyEnv(**kwargs)
    msg = str(info.value)
    assert f"{name} must be" in msg and allowed in msg and "got " in msg, msg
    assert len(msg) < 400, msg  # the 401-digit value is abbreviated


@pytest.mark.parametrize("option,value,shape", [
    ("channel_gains", np.ones((4, 3, 3)), r"\(4, 3\); got shape \(4, 3, 3\)"),
    ("channel_gains", np.ones((4, 1, 3)), r"\(4, 3\); got shape \(4, 1, 3\)"),
    ("distances_m", np.ones((4, 3)), r"\(3,\); got shape \(4, 3\)"),
    ("distances_m", np.ones((1, 3)), r"\(3,\); got shape \(1, 3\)"),
    ("nu", np.ones(3), r"\(\); got shape \(3,\)"),
    ("nu", [0.04], r"\(\); got shape \(1,\)"),
    ("distances_m", np.array(["a"] * 3), r"of shape \(3,\); got"),
])
def test_single_env_reset_options_name_the_shape_the_single_env_accepts(option, value, shape):
    """The single env inserted the batch axis, then named the batched shape ("(4, 1, 3)"), which it refuses."""
    env = OTAPrivacyEnv(num_devices=3, num_rounds=4)
    with pytest.raises((TypeError, ValueError), match=f"reset option {option} must .*{shape}"):
        env.reset(seed=0, options={option: value})


def test_vector_env_reset_options_name_the_batched_shape():
    env = OTAPrivacyVectorEnv(2, num_devices=3, num_rounds=4)
    with pytest.raises(ValueError, match=r"reset option channel_gains must have shape \(4, 2, 3\); got shape \(4, 3\)"):
        env.reset(seed=0, options={"channel_gains": np.ones((4, 3))})
    with pytest.raises(ValueError, match=r"reset option nu must have shape \(\) or \(2,\); got shape \(3,\)"):
        env.reset(seed=0, options={"nu": np.ones(3)})


def test_x_action_error_prints_the_bound_and_the_value_in_full():
    """x_max (1 + 2e-9) read "x_max=518968; got [518967.72916134]": both rounded, the value looked in range."""
    env = OTAPrivacyEnv(action_type="x", num_rounds=3)
    env.reset(seed=0)
    x_max = env.model.x_max
    bad = x_max * (1 + 2e-9)
    with pytest.raises(ValueError) as info:
        env.step(np.array([bad]))
    msg = str(info.value)
    assert repr(float(x_max)) in msg and repr(float(bad)) in msg, msg


@pytest.mark.parametrize("make,setting,applies", [
    (lambda: Scenario(correlation=0.9), "Scenario.correlation", "fading='gauss_markov'"),
    (lambda: Scenario(coherence_rounds=10), "Scenario.coherence_rounds", "fading='block'"),
    (lambda: Scenario(fading="block", correlation=0.5), "Scenario.correlation", "fading='gauss_markov'"),
    (lambda: Scenario(fading="gauss_markov", coherence_rounds=3), "Scenario.coherence_rounds", "fading='block'"),
    (lambda: CDPBScenario(correlation=0.9), "CDPBScenario.correlation", "fading='gauss_markov'"),
    (lambda: CDPBScenario(portion=0.3), "CDPBScenario.portion", "strategy='mixed'"),
    (lambda: CDPBScenario(strategy="noisy", portion=1.0), "CDPBScenario.portion", "strategy='mixed'"),
    (lambda: OTAPrivacyEnv(eval_every=5), "eval_every", "fidelity='train'"),
    (lambda: OTAPrivacyEnv(dataset="mnist"), "dataset", "fidelity='train'"),
    (lambda: OTAPrivacyEnv(data_dir="/tmp"), "data_dir", "fidelity='train'"),
    (lambda: OTAPrivacyEnv(data_split="classes"), "data_split", "fidelity='train'"),
    (lambda: OTAPrivacyEnv(data_seed=3), "data_seed", "fidelity='train'"),
    (lambda: OTAPrivacyEnv(momentum=0.9), "momentum", "fidelity='train'"),
    (lambda: OTAPrivacyEnv(weight_decay=0.1), "weight_decay", "fidelity='train'"),
    (lambda: OTAPrivacyVectorEnv(2, scheme="cdpb", local_steps=3), "local_steps", "fidelity='train'"),
    (lambda: OTAPrivacyEnv(scheme="cdpb", local_learning_rate=0.5), "local_learning_rate", "fidelity='train'"),
    (lambda: OTAPrivacyEnv(scheme="cdpb", fidelity="analytic", data_seed=1), "data_seed", "fidelity='train'"),
])
def test_settings_without_effect_are_refused_naming_where_they_apply(make, setting, applies):
    with pytest.raises(ValueError) as info:
        make()
    msg = str(info.value)
    assert f"{setting} applies only with " in msg and applies in msg, msg


def test_settings_at_their_defaults_and_where_they_apply_are_accepted():
    assert Scenario(correlation=0.0, coherence_rounds=1).fading == "iid"
    assert Scenario(fading="gauss_markov", correlation=0.9).correlation == 0.9
    assert Scenario(fading="block", coherence_rounds=10).coherence_rounds == 10
    assert CDPBScenario(strategy="mixed", portion=0.3).portion == 0.3
    assert CDPBScenario(portion=0.5).strategy == "idle"
    OTAPrivacyEnv(eval_every=10, dataset="digits", data_dir=None, data_split="iid", data_seed=0, momentum=0.0)
    OTAPrivacyEnv(scheme="cdpb", local_steps=1, local_learning_rate=0.1)


@pytest.mark.parametrize("options", [[], (), [("nu", 0.04)], "nu"])
@pytest.mark.parametrize("vector", [False, True])
def test_reset_options_must_be_a_dict(options, vector):
    env = OTAPrivacyVectorEnv(2, num_rounds=3) if vector else OTAPrivacyEnv(num_rounds=3)
    with pytest.raises(TypeError, match=r"options must be a dict .*or None; got"):
        env.reset(seed=0, options=options)
    env.reset(seed=0, options={})
