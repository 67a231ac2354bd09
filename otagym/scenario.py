"""Scenario configuration: frozen, validated dataclasses with units in the field names, and the paper presets.

Presets follow §VII of the AdaScale paper (seed 000) and SPEC §2:

* ``paper-mnist``: M=10, P_max=23 dBm, sigma_n^2=-90 dBm, d_m ~ U[10, 200] m, B=60, n_m=6000, T=500, lambda=0.5,
  C=G=1.0, d=26,010 (the Tramer-Boneh CNN), alpha=3, delta=1e-5, nu in [0.01, 0.16].
* ``paper-cifar10``: as MNIST but n_m=5000, B=400, T=720, C=G=2.0, lambda=0.25, d=~500k (ResNet), nu in [0.01, 0.32].
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

__all__ = ["Scenario", "PRESETS", "get_scenario", "check_fields", "dbm_to_w", "w_to_dbm", "FadingModel"]

FadingModel = Literal["iid", "block", "gauss_markov"]


def dbm_to_w(dbm: float) -> float:
    """Power in dBm -> watts."""
    return 10.0 ** ((dbm - 30.0) / 10.0)


def w_to_dbm(watts: float) -> float:
    """Power in watts -> dBm."""
    return 10.0 * math.log10(watts) + 30.0


def _per_device(name: str, value: Any, m: int, kind: type) -> tuple[Any, tuple]:
    """(value as stored: a scalar stays a scalar so that num_devices can change, M values for validation)."""
    if np.ndim(value) == 0:
        return kind(value), (kind(value),) * m
    vals = tuple(kind(v) for v in value)
    if len(vals) != m:
        raise ValueError(f"{name} must be a scalar or have num_devices={m} entries; got {len(vals)}")
    return vals, vals


@dataclass(frozen=True)
class Scenario:
    """One OTA-FL deployment (model A of SPEC §2). Per-device fields accept a scalar (same for all) or M values.

    Attributes:
        num_devices: M, number of devices (>= 1).
        power_max_w: P_max, per-device average transmit power limit in W (> 0).
        noise_power_w: sigma_n^2, receiver noise power in W (> 0).
        distance_min_m, distance_max_m: device distances are drawn U[min, max] metres at every reset
            (COST-231 Hata path loss needs distances >= 1 m).
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
        coherence_rounds: block length in rounds for ``fading="block"`` (>= 1).
        correlation: AR(1) coefficient in [0, 1) of the complex gain for ``fading="gauss_markov"``.
        name: label.
    """

    num_devices: int = 10
    power_max_w: float = field(default_factory=lambda: dbm_to_w(23.0))
    noise_power_w: float = field(default_factory=lambda: dbm_to_w(-90.0))
    distance_min_m: float = 10.0
    distance_max_m: float = 200.0
    distances_m: tuple[float, ...] | None = None
    batch_size: float | tuple[float, ...] = 60.0
    dataset_size: int | tuple[int, ...] = 6000
    model_dim: int = 26_010
    clip_norm: float = 1.0
    num_rounds: int = 500
    learning_rate: float = 0.5
    rdp_order: int = 3
    delta: float = 1e-5
    nu: float = 0.04
    nu_grid: tuple[float, ...] = (0.01, 0.02, 0.04, 0.08, 0.16)
    fading: FadingModel = "iid"
    coherence_rounds: int = 1
    correlation: float = 0.0
    name: str = "custom"

    def __post_init__(self) -> None:
        def fail(fld: str, allowed: str, got: Any) -> None:
            raise ValueError(f"Scenario.{fld} must be {allowed}; got {got!r}")

        m = self.num_devices
        if int(m) != m or m < 1:
            fail("num_devices", "an integer >= 1", m)
        object.__setattr__(self, "num_devices", int(m))
        for fld in ("power_max_w", "noise_power_w", "clip_norm", "learning_rate", "nu"):
            v = getattr(self, fld)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                fail(fld, "a finite number > 0", v)
        if not (1.0 <= self.distance_min_m <= self.distance_max_m < math.inf):
            fail("distance_min_m/distance_max_m", "finite with 1 <= min <= max (metres)",
                 (self.distance_min_m, self.distance_max_m))
        if self.distances_m is not None:
            if np.ndim(self.distances_m) == 0:
                fail("distances_m", f"a sequence of num_devices={m} distances", self.distances_m)
            _, d = _per_device("distances_m", self.distances_m, m, float)
            if not all(1.0 <= x < math.inf for x in d):
                fail("distances_m", "finite values >= 1 m", d)
            object.__setattr__(self, "distances_m", d)
        stored_b, batch = _per_device("batch_size", self.batch_size, m, float)
        stored_n, data = _per_device("dataset_size", self.dataset_size, m, int)
        for b, n in zip(batch, data):
            if not (n >= 1):
                fail("dataset_size", "integers >= 1", data)
            if not (0 < b <= n):
                fail("batch_size", "in (0, dataset_size] so that q_m = B_m/n_m lies in (0, 1]", batch)
        object.__setattr__(self, "batch_size", stored_b)
        object.__setattr__(self, "dataset_size", stored_n)
        for fld, lo in (("model_dim", 1), ("num_rounds", 1), ("coherence_rounds", 1)):
            v = getattr(self, fld)
            if int(v) != v or v < lo:
                fail(fld, f"an integer >= {lo}", v)
            object.__setattr__(self, fld, int(v))
        if int(self.rdp_order) != self.rdp_order or self.rdp_order < 2:
            fail("rdp_order", "an integer >= 2 (the integer path of eq. (9))", self.rdp_order)
        object.__setattr__(self, "rdp_order", int(self.rdp_order))
        if not (0 < self.delta < 1):
            fail("delta", "in (0, 1)", self.delta)
        grid = tuple(float(v) for v in self.nu_grid)
        if not grid or not all(math.isfinite(v) and v > 0 for v in grid):
            fail("nu_grid", "a non-empty sequence of finite values > 0", self.nu_grid)
        object.__setattr__(self, "nu_grid", grid)
        if self.fading not in ("iid", "block", "gauss_markov"):
            fail("fading", "one of 'iid', 'block', 'gauss_markov'", self.fading)
        if not (0.0 <= self.correlation < 1.0):
            fail("correlation", "in [0, 1)", self.correlation)

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


PRESETS: dict[str, Scenario] = {
    "paper-mnist": Scenario(name="paper-mnist"),
    "paper-cifar10": Scenario(
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


def check_fields(cls: type, overrides: dict[str, Any]) -> None:
    """Raise ``TypeError`` (Python's error for an unknown keyword argument, which wrappers such as SB3's
    ``make_vec_env`` and TorchRL's ``GymEnv`` catch to retry without it) if ``overrides`` names a non-field of ``cls``."""
    fields = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(overrides) - set(fields))
    if unknown:
        raise TypeError("; ".join(f"got an unexpected keyword argument {k!r}" for k in unknown)
                        + f" (not an env argument nor a {cls.__name__} field; fields: {fields})")


def get_scenario(name: str | Scenario = "paper-mnist", **overrides: Any) -> Scenario:
    """A preset by name (``paper-mnist``, ``paper-cifar10``) or a Scenario, with validated field overrides."""
    if isinstance(name, Scenario):
        base = name
    else:
        if name not in PRESETS:
            raise ValueError(f"scenario must be one of {sorted(PRESETS)} or a Scenario; got {name!r}")
        base = PRESETS[name]
    check_fields(Scenario, overrides)
    return base.replace(**overrides) if overrides else base
