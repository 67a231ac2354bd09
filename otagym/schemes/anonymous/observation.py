"""Anonymous OTA's observation: its entries by name, in order, and the one function that writes them.

The observation holds public quantities only (the server hears sigma^2 in the received noise power, but must not
learn a(t) or b_t, §III). :data:`LAYOUT_VERSION` says which layout an observation has, and is bumped whenever an
entry is added, removed, reordered or rescaled (a model trained on another layout would read garbage).

=================  ==========================================================================================
entry              meaning
=================  ==========================================================================================
``round_fraction`` t / T
``log_sigma``      log10(sigma_t-1 / sigma_unit): the last noise multiplier at the nominal batch (0 before the
                   first round)
``log_rdp``        log10(1 + the nominal cumulative RDP at alpha): sum_s eps(sigma_s at the nominal batch), in
                   decades (the realised one depends on the b_t, which the server must not learn)
=================  ==========================================================================================

Clipped to [-10, 10] (:data:`OBS_BOUND`), which the normalised action's range never reaches on the preset.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

__all__ = ["LAYOUT_VERSION", "ENTRIES", "OBS_BOUND", "AnonymousObservation", "entry_names", "observation_space",
           "write_observation"]

#: The version of the layout below (bump it with any change of an entry's meaning, order or scale).
LAYOUT_VERSION = "anonymous/1"
#: The entries, in order.
ENTRIES: tuple[str, ...] = ("round_fraction", "log_sigma", "log_rdp")
#: Bounds of every observation entry (the observation space is ``Box(-OBS_BOUND, OBS_BOUND)``; values clipped).
OBS_BOUND = 10.0


class AnonymousObservation(NamedTuple):
    """The entries of N observations before clipping, each (N,) (see the module's table)."""

    round_fraction: NDArray
    log_sigma: NDArray
    log_rdp: NDArray


def entry_names(scenario: object = None) -> tuple[str, ...]:
    """The name of every observation entry, in order (the same for every scenario)."""
    return ENTRIES


def observation_space(scenario: object = None) -> spaces.Box:
    """``Box(-OBS_BOUND, OBS_BOUND, (3,), float32)``."""
    return spaces.Box(-OBS_BOUND, OBS_BOUND, shape=(len(ENTRIES),), dtype=np.float32)


def write_observation(obs: AnonymousObservation) -> NDArray:
    """The observations (N, 3) as float32, every entry clipped to [-OBS_BOUND, OBS_BOUND]."""
    return np.clip(np.stack(list(obs), axis=1), -OBS_BOUND, OBS_BOUND).astype(np.float32)
