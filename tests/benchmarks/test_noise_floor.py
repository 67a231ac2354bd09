"""benchmarks/noise_floor.py: the split of EqualAlloc's noise multiplier into nu and the power limit's term equals the
closed form from the realisations' channels (eqs. (23)-(25), (28b))."""

from __future__ import annotations

import numpy as np
import pytest

from baselines.receive_scaling.evaluation import sample_realisations
from otagym import get_scenario
from otagym.schemes.receive_scaling import ReceiveScalingModel

from benchmarks import noise_floor as script  # noqa: E402 (run from the repository root: python -m pytest)


def test_the_power_limits_term_and_the_multiplier_are_the_closed_forms_of_the_channels():
    scenario = get_scenario("paper-mnist", num_rounds=12)
    rows = script.noise_rows(scenario, [0, 1])
    gains = sample_realisations(scenario, [0, 1]).channel_gains  # (T, N, M)
    power = scenario.model_dim * scenario.noise_power_w / (ReceiveScalingModel(scenario).h_min2(gains) * scenario.x_max)
    ratio = scenario.num_devices * scenario.batch_size / scenario.clip_norm
    energies = []
    for row in rows:
        sigma = ratio * np.sqrt((row["nu"] + power) / (2.0 * scenario.model_dim))  # eq. (25) at c_t = nu
        assert row["power_term"] == pytest.approx(power.mean(), rel=1e-6)
        assert row["sigma"] == pytest.approx(sigma.mean(), rel=1e-6)
        energies.append(np.mean(sigma**2))
    assert [r["energy_ratio"] for r in rows] == pytest.approx(np.array(energies) / energies[0], rel=1e-6)
    assert [r["nu"] for r in rows] == list(script.NUS)
