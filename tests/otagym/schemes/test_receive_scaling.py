"""The receive-scaling package: its documented names, its one action decoder and its observation layout."""

import warnings

import numpy as np
import pytest

import otagym
from otagym.schemes import receive_scaling as rs
from otagym.schemes.receive_scaling.actions import ACTION_CODES, ActionSettings, decode_actions
from otagym.schemes.receive_scaling.observation import ENTRIES, LAYOUT_VERSION, ObservationOffsets


def test_the_documented_scenario_and_the_symmetric_names_are_one_class_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert otagym.Scenario is rs.ReceiveScalingScenario is rs.Scenario


@pytest.mark.parametrize("action_type", ["price", "share", "normalized", "x", "eta", "spend"])
def test_the_env_decides_with_the_decoder(action_type):
    env = otagym.OTAPrivacyVectorEnv(4, action_type=action_type, num_rounds=6, dp_orders=None)
    env.reset(seed=2)
    core = env.core
    state = core.state
    low, high = float(env.single_action_space.low[0]), min(float(env.single_action_space.high[0]), 1.0)
    actions = np.linspace(max(low, high * 1e-3 if low > 0 else low), high, 4)
    settings = ActionSettings(ACTION_CODES[action_type], core.x_min_ratio, core.budget_multiplier_max,
                              core.price_decades, core.price_buffer_sd)
    x, cost = decode_actions(core.model, settings, actions, state.h_min2, nu=state.nu,
                             remaining=state.nu * core.num_rounds - state.cost_sum,
                             rounds_left=core.num_rounds - state.t, mean_h_min2=state.mean_h_min2)
    np.testing.assert_array_equal(np.stack(core.decide(actions)), np.stack([x, cost]))
    _, _, _, _, info = env.step(actions)
    np.testing.assert_array_equal(info["x"], x)
    np.testing.assert_array_equal(info["convergence_cost"], cost)


def test_the_layout_names_every_entry_in_order():
    layout = ObservationOffsets.of(10)
    assert layout._fields == tuple(name for name, _ in ENTRIES)
    assert layout.size == 36 and layout.num_devices == 10 and ObservationOffsets.of_size(36) == layout
    spans = list(layout.slices().values())
    assert spans[0].start == 0 and spans[-1].stop == 36
    assert all(a.stop == b.start for a, b in zip(spans, spans[1:]))
    with pytest.raises(ValueError, match="3M \\+ 6"):
        ObservationOffsets.of_size(10)
    env = otagym.OTAPrivacyEnv(num_devices=3, num_rounds=4)
    obs, _ = env.reset(seed=0)
    lay = env.core.layout
    assert obs.shape == (lay.size,) and obs[lay.progress] == 0.0 and obs[lay.budget_left] == 1.0
    assert obs[lay.block_phase] == 1.0


def test_a_model_of_another_observation_layout_is_refused_naming_it(tmp_path):
    from agents.policy import check_observation_layout

    check_observation_layout({}, tmp_path)  # no record: the current layout
    check_observation_layout({"observation_layout": LAYOUT_VERSION}, tmp_path)
    with pytest.raises(ValueError, match="observation layout 'receive_scaling/0'"):
        check_observation_layout({"observation_layout": "receive_scaling/0"}, tmp_path)


def test_the_scheme_declares_its_action_semantics_as_the_action_keys():
    """The registry's ``action_args`` (which ``gym.make`` of a task does not warn about) are the env arguments the
    actions module resolves as the action's semantics, no more and no fewer."""
    from otagym.schemes import get_scheme
    from otagym.schemes.receive_scaling.actions import ACTION_KEYS

    assert get_scheme("receive_scaling").action_args == frozenset(ACTION_KEYS)
