"""benchmarks/imitation_ceiling.py: the behaviour-cloning targets are OnlineOptimal's spends as relative actions."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("stable_baselines3")

from benchmarks.imitation_ceiling import NOTHING, clone, relative_target, teacher_states  # noqa: E402
from otagym.schemes.receive_scaling.observation import ObservationOffsets  # noqa: E402
from otagym.tasks import BENCHMARK_TRAINING_SEEDS  # noqa: E402
from otagym.wrappers import fair_share, spend_multiplier  # noqa: E402

TASK = "otagym/ReceiveScalingCMDP-v1"


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-6, 11.0), st.floats(1e-3, 50.0))
def test_a_target_spends_what_the_teacher_spent(multiple, fair):
    target = relative_target(np.array([multiple * fair]), np.array([fair]))
    assert spend_multiplier(target)[0] * fair == pytest.approx(multiple * fair, rel=1e-9)
    assert relative_target(np.array([0.0]), np.array([fair]))[0] == NOTHING


@pytest.mark.slow
def test_the_recorded_episode_is_online_optimals_and_a_clone_learns_it(one_torch_thread):
    """One realisation at nu = 0.04: 499 states (the last round's spend is never read back), whose targets spend
    at most the limit (T = 500 in info["cost"]'s units) and nearly all of it, as OnlineOptimal does; a short fit
    lowers the loss from the untrained network's."""
    from agents.budget_ppo import BudgetPPOSettings, new_model

    states, actions = teacher_states(TASK, BENCHMARK_TRAINING_SEEDS[:1], np.array([0.04]))
    assert states.shape == (499, 36) and actions.shape == (499,)
    obs = states.numpy().astype(float)
    layout = ObservationOffsets.of_size(obs.shape[1])
    fair = fair_share(obs[:, layout.budget_left] * 500, np.rint(500 * (1 - obs[:, layout.progress])))
    spent = float(np.sum(fair * spend_multiplier(actions.numpy())))
    assert 0.9 * 500 < spent <= 500 * (1 + 1e-4)
    model = new_model(TASK, BudgetPPOSettings(), 0)
    before = clone(model, states, actions, 1)
    assert clone(model, states, actions, 300) < 0.2 * before
