"""benchmarks/unknown_deployment.py: the plug-in fair-share rule needs no channel statistics and keeps the budget."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.benchmark import play_episodes
from benchmarks.unknown_deployment import FairShareRule
from otagym.schemes.receive_scaling import get_scenario
from otagym.schemes.receive_scaling.observation import ObservationOffsets
from otagym.tasks import TUNING_SEEDS

TASK = "otagym/ReceiveScalingCMDP-v1"
LAYOUT = ObservationOffsets.of(10)


def _observations(channels: np.ndarray, progress: np.ndarray) -> np.ndarray:
    obs = np.zeros((channels.size, LAYOUT.size), dtype=np.float32)
    obs[:, LAYOUT.channel], obs[:, LAYOUT.progress], obs[:, LAYOUT.budget_left] = channels, progress, 1.0 - progress
    return obs


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-2.0, 1.0), min_size=3, max_size=3), st.floats(-3.0, 3.0), st.sampled_from([0.5, 1.0, 2.0]))
def test_the_plug_in_rule_is_blind_to_the_deployments_mean(channels, shift, exponent):
    """Shifting every observed log channel (another deployment's mean) leaves the plug-in's actions as they were."""
    np.testing.assert_allclose(_played(True, exponent, np.array(channels) + shift), _played(True, exponent, channels),
                               atol=2e-5)


def test_the_told_rule_reads_the_deployments_mean():
    """The same shift moves the told rule's actions: it spends more on a channel above the deployment's mean."""
    channels = np.array([-0.3, 0.0, 0.2])
    shifted, told = _played(False, 1.0, channels + 0.3), _played(False, 1.0, channels)
    assert (shifted > told + 0.05).all()


def _played(plug_in: bool, exponent: float, channels) -> np.ndarray:
    """The rule's actions on one episode's first rounds with these observed log channels, the budget untouched."""
    rule = FairShareRule(exponent, plug_in, num_rounds=500)
    rule.reset(get_scenario())
    return np.array([rule.act(_observations(np.array([c]), np.array([t / 500])), {})[0, 0]
                     for t, c in enumerate(channels)])


@pytest.mark.parametrize("plug_in", [False, True])
def test_the_rule_keeps_its_budget_and_without_the_channel_is_equal_allocation(plug_in):
    seeds = list(TUNING_SEEDS[:4])
    episodes = play_episodes(FairShareRule(1.0, plug_in, 500), TASK, seeds, nu=0.04)
    assert (episodes.cost_ratios <= 1 + 1e-6).all() and (episodes.cost_ratios > 0.99).all()
    assert (episodes.returns > 0).all()  # channel-aware spending leaks less than the equal allocation
    flat = play_episodes(FairShareRule(0.0, plug_in, 500), TASK, seeds, nu=0.04)
    np.testing.assert_allclose(flat.returns, 0.0, atol=1e-4)  # the reward is the leakage saved over EqualAlloc
    np.testing.assert_allclose(flat.cost_ratios, 1.0, atol=1e-5)
