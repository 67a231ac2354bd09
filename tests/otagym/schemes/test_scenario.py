"""Scenario presets carry the paper's numbers; invalid values raise naming the field and the allowed range."""

import numpy as np
import pytest

from otagym.schemes.receive_scaling import Scenario, dbm_to_w, get_scenario


def test_paper_mnist_numbers():
    s = get_scenario("paper-mnist")
    assert (s.num_devices, s.num_rounds, s.model_dim, s.rdp_order, s.delta) == (10, 500, 26_010, 3, 1e-5)
    assert s.power_max_w == pytest.approx(0.19952623149688797)  # 23 dBm
    assert s.noise_power_w == pytest.approx(1e-12)  # -90 dBm
    assert (s.distance_min_m, s.distance_max_m, s.clip_norm, s.learning_rate) == (10.0, 200.0, 1.0, 0.5)
    np.testing.assert_allclose(s.sampling_rates, 0.01)
    np.testing.assert_allclose(s.batch_size_factor, 1 + 0.99 / 60)
    assert s.x_max == pytest.approx(dbm_to_w(23) * 26_010 * 100)
    assert s.nu_grid == (0.01, 0.02, 0.04, 0.08, 0.16)


def test_paper_cifar10_numbers():
    s = get_scenario("paper-cifar10")
    assert (s.num_rounds, s.clip_norm, s.learning_rate) == (720, 2.0, 0.25)
    np.testing.assert_allclose(s.sampling_rates, 400 / 5000)
    assert max(s.nu_grid) == 0.32


def test_heterogeneous_devices():
    s = get_scenario("paper-mnist", num_devices=3, batch_size=(10, 20, 30), dataset_size=(100, 1000, 3000),
                     distances_m=(20, 40, 60))
    np.testing.assert_allclose(s.sampling_rates, [0.1, 0.02, 0.01])
    assert s.distances_m == (20.0, 40.0, 60.0)


@pytest.mark.parametrize("field,value,match", [
    ("num_devices", 0, "num_devices"),
    ("noise_power_w", 0.0, "noise_power_w"),
    ("noise_power_w", -1e-12, "noise_power_w"),
    ("power_max_w", float("nan"), "power_max_w"),
    ("num_rounds", 0, "num_rounds"),
    ("rdp_order", 1, "rdp_order"),
    ("rdp_order", 2.5, "rdp_order"),
    ("batch_size", 7000.0, r"batch_size.*\(0, dataset_size\]"),
    ("batch_size", 0.0, "batch_size"),
    ("delta", 1.0, "delta"),
    ("nu", 0.0, "nu"),
    ("correlation", 1.0, "correlation"),
    ("fading", "rician", "fading"),
    ("distance_min_m", 0.5, "distance"),
])
def test_invalid_values_raise_with_field_and_range(field, value, match):
    with pytest.raises(ValueError, match=match):
        Scenario(**{field: value})


def test_unknown_override_and_preset_are_rejected():
    with pytest.raises(TypeError, match="unexpected keyword argument .not_a_field. .*Scenario field"):
        get_scenario("paper-mnist", not_a_field=1)
    with pytest.raises(ValueError, match="scenario must be one of"):
        get_scenario("paper-imagenet")
