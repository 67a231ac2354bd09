"""Receive scaling (model A: channel-inversion FedSGD with server receive scaling, the AdaScale paper: Kalarde et al.,
*Privacy Enhancement in Over-the-Air Federated Learning via Adaptive Receive Scaling*, §IV-V) -- the scenario: one
deployment as a frozen, validated dataclass, its presets and their getter.

Scenario presets follow §VII of the AdaScale paper (docs/environment/receive-scaling.md says where they deviate):

* ``paper-mnist``: M=10, P_max=23 dBm, sigma_n^2=-90 dBm, d_m ~ U[10, 200] m, B=60, n_m=6000, T=500, lambda=0.5,
  C=G=1.0, d=26,010 (the Tramer-Boneh CNN), alpha=3, delta=1e-5, nu in [0.01, 0.16].
* ``paper-cifar10``: as MNIST but n_m=5000, B=400, T=720, C=G=2.0, lambda=0.25, d=~500k (ResNet), nu in [0.01, 0.32].
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from otagym.channel import DISTANCE, FadingFields
from otagym.validation import POSITIVE, Integer, Many, Real, Text, arg, check_dataclass, from_preset

__all__ = ["ReceiveScalingScenario", "Scenario", "PRESETS", "get_scenario", "dbm_to_w", "w_to_dbm", "TASK_SETTINGS"]


def dbm_to_w(dbm: float) -> float:
    """Power in dBm -> watts."""
    return 10.0 ** ((dbm - 30.0) / 10.0)


def w_to_dbm(watts: float) -> float:
    """Power in watts -> dBm."""
    return 10.0 * math.log10(watts) + 30.0


def _per_device(name: str, value: Any, m: int) -> tuple:
    """The M values of a per-device field (checked by its spec: a scalar or a tuple), its length checked."""
    if not isinstance(value, tuple):
        return (value,) * m
    if len(value) != m:
        raise ValueError(f"Scenario.{name} must be a scalar or have num_devices={m} entries; got {len(value)}")
    return value


@dataclass(frozen=True)
class Scenario(FadingFields):
    """One OTA-FL deployment (model A). Per-device fields accept a scalar (same for all) or M values.

    Attributes:
        num_devices: M, number of devices (>= 1).
        power_max_w: P_max, per-device average transmit power limit in W (> 0).
        noise_power_w: sigma_n^2, receiver noise power in W (> 0).
        distance_min_m: device distances are drawn U[distance_min_m, distance_max_m] metres at every reset
            (COST-231 Hata path loss needs distances >= 1 m).
        distance_max_m: the upper end of that range (metres).
        distances_m: fixed device distances in metres; when set, no distances are drawn.
        batch_size: B_m, expected Poisson batch size per device (> 0, <= dataset_size).
        dataset_size: n_m, local dataset size per device (>= 1).
        model_dim: d, number of model parameters (>= 1).
        clip_norm: G (the paper's C), per-sample gradient clipping norm (> 0).
        num_rounds: T, rounds per episode (>= 1).
        learning_rate: lambda of eq. (12) (> 0); enters only the Theorem-1 conversion between nu and gamma.
        rdp_order: alpha, the integer RDP order of the objective (>= 2).
        delta: delta of the final (eps, delta)-DP report, in (0, 1).
        nu: convergence budget per round of eq. (28b) (> 0).
        nu_grid: the nu values the paper sweeps (used by ``otagym compare``).
        fading: ``"iid"`` (default, the paper's), ``"block"`` (constant for ``coherence_rounds``) or
            ``"gauss_markov"`` (first-order AR on the complex gain with ``correlation``).
        coherence_rounds: block length in rounds for ``fading="block"`` (>= 1; under another fading it has no
            effect and must keep its default, 1).
        correlation: AR(1) coefficient in [0, 1) of the complex gain for ``fading="gauss_markov"`` (under another
            fading it must keep its default, 0.0).
        name: label.
    """

    num_devices: int = arg(10, Integer(1, 10_000))
    power_max_w: float = arg(dbm_to_w(23.0), POSITIVE)
    noise_power_w: float = arg(dbm_to_w(-90.0), POSITIVE)
    distance_min_m: float = arg(10.0, DISTANCE)
    distance_max_m: float = arg(200.0, DISTANCE)
    distances_m: tuple[float, ...] | None = arg(None, Many(DISTANCE, optional=True))
    batch_size: float | tuple[float, ...] = arg(60.0, Many(POSITIVE, scalar=True))
    dataset_size: int | tuple[int, ...] = arg(6000, Many(Integer(1, 10**12), scalar=True))
    model_dim: int = arg(26_010, Integer(1, 10**12))
    clip_norm: float = arg(1.0, POSITIVE)
    num_rounds: int = arg(500, Integer(1, 10**6))
    learning_rate: float = arg(0.5, POSITIVE)
    rdp_order: int = arg(3, Integer(2, 1000))
    delta: float = arg(1e-5, Real(0.0, 1.0, low_open=True, high_open=True))
    nu: float = arg(0.04, POSITIVE)
    nu_grid: tuple[float, ...] = arg((0.01, 0.02, 0.04, 0.08, 0.16), Many(POSITIVE))
    name: str = arg("custom", Text())

    def __post_init__(self) -> None:
        check_dataclass(self)
        m = self.num_devices
        if self.distance_min_m > self.distance_max_m:
            raise ValueError(f"Scenario.distance_min_m must be <= distance_max_m; got "
                             f"{(self.distance_min_m, self.distance_max_m)}")
        if self.distances_m is not None:
            _per_device("distances_m", self.distances_m, m)
        batch = _per_device("batch_size", self.batch_size, m)
        data = _per_device("dataset_size", self.dataset_size, m)
        if not all(b <= n for b, n in zip(batch, data)):
            raise ValueError(f"Scenario.batch_size must be in (0, dataset_size] (q_m = B_m/n_m in (0, 1]); got "
                             f"batch_size={self.batch_size!r}, dataset_size={self.dataset_size!r}")

    # --- derived constants (numpy arrays, one entry per device) ---
    @property
    def batch_sizes(self) -> NDArray:
        """B_m, shape (M,)."""
        return np.broadcast_to(np.asarray(self.batch_size, dtype=float), (self.num_devices,)).copy()

    @property
    def sampling_rates(self) -> NDArray:
        """q_m = B_m / n_m, shape (M,)."""
        return self.batch_sizes / np.broadcast_to(np.asarray(self.dataset_size, dtype=float), (self.num_devices,))

    @property
    def batch_size_factor(self) -> NDArray:
        """k_m^2 = E[|B_mt|^2 / B_m^2] = 1 + (1 - q_m) / B_m under Poisson sampling (eq. (14)), shape (M,)."""
        return 1.0 + (1.0 - self.sampling_rates) / self.batch_sizes

    @property
    def x_max(self) -> float:
        """x_max = P_max d M^2 / G^2 (below eq. (23)), the largest feasible x_t = eta_t / h_min,t^2."""
        return self.power_max_w * self.model_dim * self.num_devices**2 / self.clip_norm**2

    def replace(self, **changes: Any) -> "Scenario":
        """A validated copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: The scenario under the registry's symmetric name (``CDPBScenario``, ``AnonymousScenario``). The class keeps its
#: documented name, ``otagym.Scenario`` (the default scheme's scenario), which its error messages name.
ReceiveScalingScenario = Scenario

PRESETS: dict[str, ReceiveScalingScenario] = {
    "paper-mnist": ReceiveScalingScenario(name="paper-mnist"),
    "paper-cifar10": ReceiveScalingScenario(
        name="paper-cifar10",
        batch_size=400.0,
        dataset_size=5000,
        num_rounds=720,
        clip_norm=2.0,
        learning_rate=0.25,
        model_dim=500_000,
        nu=0.04,
        nu_grid=(0.01, 0.02, 0.04, 0.08, 0.16, 0.32),
    ),
}


def get_scenario(name: str | ReceiveScalingScenario = "paper-mnist", /, **overrides: Any) -> ReceiveScalingScenario:
    """A preset by name (``paper-mnist``, ``paper-cifar10``) or a scenario, with validated field overrides."""
    return from_preset(ReceiveScalingScenario, PRESETS, name, overrides)


#: The settings every receive-scaling task shares: the paper's MNIST deployment (T = 500), budget mode (constraint
#: (28b) holds by construction), the price action, one policy for every nu in [0.01, 0.16] (drawn log-uniformly per
#: episode and observed), no all-order DP ledger (the RDP at alpha is always reported).
TASK_SETTINGS = {"scenario": "paper-mnist", "reward_mode": "budget", "action_type": "price",
                 "nu_range": (0.01, 0.16), "dp_orders": None}
