"""Receive scaling -- the observation: one named layout of its entries (:data:`ENTRIES`, :class:`ObservationOffsets`),
versioned (:data:`LAYOUT_VERSION`), which the core writes (:func:`observe`, compiled) and readers such as
``agents.linear`` read by name.

The observation of M devices has 3M + 6 entries, each clipped to [-:data:`OBS_BOUND`, :data:`OBS_BOUND`], float32,
describing the round about to be played (docs/environment/receive-scaling.md#observation); s_m = |h_m|^2 x_max /
(k_m^2 d sigma_n^2) is device m's channel quality at full power:

==============  =======  ==================================================================================
name            width    value
==============  =======  ==================================================================================
fading          M        log10(|h_m,t|^2 / E|h_m|^2)
placement       M        log10(nu E[s_m])
channel         1        log10(h_min,t^2 / E[h_min^2])
progress        1        t / T
budget_left     1        R_t / (nu T)
fair_share      1        log1p(R_t / ((T - t) nu)): the fair share left per round, in units of nu
log_nu          1        log10 nu - log10 nu_ref (:func:`log10_nu_ref`)
rdp             M        log1p(cumulative RDP of each device at alpha)
block_phase     1        rounds left in the fading block (this one included) / its length (:func:`block_rounds`)
==============  =======  ==================================================================================
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from numba import njit
from numpy.typing import NDArray

from otagym.jit import JIT_NO_ALLOC

__all__ = ["OBS_BOUND", "LAYOUT_VERSION", "ENTRIES", "entry_names", "ObservationOffsets", "log10_nu_ref",
           "block_rounds", "ObservationConstants", "observe"]

#: Bounds of every observation entry (the observation space is ``Box(-OBS_BOUND, OBS_BOUND)``; values are clipped).
OBS_BOUND = 10.0
#: The version of the layout below: a model trained on observations of another layout is refused
#: (``agents.policy``), so change it whenever an entry's meaning, order or scale changes.
LAYOUT_VERSION = "receive_scaling/1"
#: The entries in order: their names and whether each has one value per device (else one value).
ENTRIES: tuple[tuple[str, bool], ...] = (
    ("fading", True), ("placement", True), ("channel", False), ("progress", False), ("budget_left", False),
    ("fair_share", False), ("log_nu", False), ("rdp", True), ("block_phase", False))


def entry_names(scenario: Any) -> tuple[str, ...]:
    """The name of every observation entry of ``scenario``, in order (a per-device entry's as ``name[m]``)."""
    m = scenario.num_devices
    return tuple(f"{name}[{k}]" if per_device else name for name, per_device in ENTRIES
                 for k in range(m if per_device else 1))


class ObservationOffsets(NamedTuple):
    """Where each entry of :data:`ENTRIES` starts in the observation of M devices (a per-device entry spans M
    indices from there); the compiled observation takes it as an argument."""

    fading: int
    placement: int
    channel: int
    progress: int
    budget_left: int
    fair_share: int
    log_nu: int
    rdp: int
    block_phase: int

    @classmethod
    def of(cls, num_devices: int) -> "ObservationOffsets":
        """The layout for ``num_devices`` = M devices."""
        starts, at = [], 0
        for _, per_device in ENTRIES:
            starts.append(at)
            at += num_devices if per_device else 1
        return cls(*starts)

    @classmethod
    def of_size(cls, size: int) -> "ObservationOffsets":
        """The layout of an observation of ``size`` = 3M + 6 entries (else ``ValueError``)."""
        if size < 9 or (size - 6) % 3:
            raise ValueError(f"observation width must be 3M + 6 with M >= 1 (a receive-scaling observation); got "
                             f"{size}")
        return cls.of((size - 6) // 3)

    @property
    def num_devices(self) -> int:
        """M."""
        return self.placement - self.fading

    @property
    def size(self) -> int:
        """The number of entries, 3M + 6."""
        return self.block_phase + 1

    def slices(self) -> dict[str, slice]:
        """Each entry's slice of the observation's last axis, by name, in order."""
        m = self.num_devices
        return {name: slice(start, start + (m if per_device else 1))
                for (name, per_device), start in zip(ENTRIES, self)}


def log10_nu_ref(nu_grid: Any, nu_range: Any = None) -> float:
    """Centre of the observed log10 nu: the geometric middle of the scenario's nu grid (or of ``nu_range``)."""
    grid = nu_grid if nu_range is None else nu_range
    return 0.5 * float(np.log10(min(grid)) + np.log10(max(grid)))


def block_rounds(scenario: Any) -> int:
    """Rounds per fading block (block fading's coherence; 1 otherwise): the ``block_phase`` entry's period."""
    return scenario.coherence_rounds if scenario.fading == "block" else 1


class ObservationConstants(NamedTuple):
    """What the observation of an env's episodes takes beside their state: constants of the env."""

    num_rounds: int  # T
    device_class: NDArray  # (M,) each device's class
    class_device: NDArray  # (C,) each class's first device
    log10_nu_ref: float  # the centre of the observed log10 nu (:func:`log10_nu_ref`)
    block_rounds: int  # the block_phase entry's period (:func:`block_rounds`)
    layout: ObservationOffsets  # where each entry starts


@njit(**JIT_NO_ALLOC)
def observe(state: Any, constants: ObservationConstants, out: NDArray) -> NDArray:
    """The observations (N, 3M + 6) of the N episodes of ``state`` (the core's
    :class:`~otagym.schemes.receive_scaling.kernel.EpisodeState`) into ``out`` (float32), laid out by
    ``constants.layout``: each entry computed in float64 and clipped to [-10, 10] (no float32 overflow), then rounded
    to float32."""
    gains, mean_gain, placement = state.gains, state.mean_gain, state.log10_placement
    h_min2, mean_h_min2, t, nu = state.h_min2, state.mean_h_min2, state.t, state.nu
    cost_sum, class_rdp_sum = state.cost_sum, state.class_rdp_sum
    big_t, device_class, class_device, log10_nu_ref, block_rounds, layout = constants
    m = mean_gain.shape[1]
    for i in range(out.shape[0]):
        budget = nu[i] * big_t
        left = budget - cost_sum[i]
        for c in range(class_device.size):  # each class's entry once, at its first device; then copied
            out[i, layout.rdp + class_device[c]] = _clip_obs(math.log1p(class_rdp_sum[i, c]))
        for j in range(m):
            out[i, layout.fading + j] = _clip_obs(math.log10(gains[i, j] / mean_gain[i, j]))
            out[i, layout.placement + j] = _clip_obs(placement[i, j])
            out[i, layout.rdp + j] = out[i, layout.rdp + class_device[device_class[j]]]
        out[i, layout.channel] = _clip_obs(math.log10(h_min2[i] / mean_h_min2[i]))
        out[i, layout.progress] = _clip_obs(t[i] / big_t)
        out[i, layout.budget_left] = _clip_obs(left / budget)
        out[i, layout.fair_share] = _clip_obs(math.log1p(max(left, 0.0) / (max(big_t - t[i], 1) * nu[i])))
        out[i, layout.log_nu] = _clip_obs(math.log10(nu[i]) - log10_nu_ref)
        out[i, layout.block_phase] = _clip_obs((block_rounds - t[i] % block_rounds) / block_rounds)
    return out


@njit(**JIT_NO_ALLOC)
def _clip_obs(value: float) -> float:
    """An observation entry clipped to [-OBS_BOUND, OBS_BOUND] (NaN stays NaN, as numpy.clip)."""
    return value if math.isnan(value) else min(max(value, -OBS_BOUND), OBS_BOUND)
