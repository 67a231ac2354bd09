"""CDPB's observation: its entries by name, in order, and the one function that writes them.

A model trained on one layout reads the numbers of another as garbage without an error: :data:`LAYOUT_VERSION` says
which layout an observation has, and is bumped whenever an entry is added, removed, reordered or rescaled.

=====================  ==================================================================================
entry                  meaning
=====================  ==================================================================================
``round_fraction``     t / tau
``reliable_share``     K_t-1 / K, the last round's share of reliable clients (0 before the first round)
``log_noise_var``      log10(sigma_q,t-1^2 / (K P E[h])), the last round's received noise (0 before the first)
``log_convergence``    log10(1 + 6 sum_{s<t} B_s / (tau^2 gamma-bar)): the convergence error accumulated so far
                       over gamma-bar (gamma / gamma-bar at the end), in decades
``log_privacy``        log10(1 + max_k cumulative RDP / eps-bar): the privacy budget (25c) used, in decades
``log_channel_gain``   K entries, with ``csi_feedback`` only: log10(h_k,t / E[h_k]) of the round about to be played
``sampled``            K entries, with ``csi_feedback`` and client sampling < 1 only: whether each client is sampled
=====================  ==================================================================================

Every entry is clipped to [-10, 10] (:data:`OBS_BOUND`): the decades keep the ratios of order one (a ratio beyond
1e10 says only that a threshold is broken ten decades over), which no action of the normalised space reaches on the
preset.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from otagym.schemes.cdpb.scenario import CDPBScenario

__all__ = ["LAYOUT_VERSION", "ENTRIES", "CLIENT_ENTRIES", "OBS_BOUND", "CDPBObservation", "entry_names",
           "observation_space", "write_observation"]

#: The version of the layout below (bump it with any change of an entry's meaning, order or scale).
LAYOUT_VERSION = "cdpb/1"
#: The entries every observation has, in order.
ENTRIES: tuple[str, ...] = ("round_fraction", "reliable_share", "log_noise_var", "log_convergence", "log_privacy")
#: The per-client blocks that follow them where the scenario has them (K entries each), in order.
CLIENT_ENTRIES: tuple[str, ...] = ("log_channel_gain", "sampled")
#: Bounds of every CDPB observation entry (the observation space is ``Box(-OBS_BOUND, OBS_BOUND)``; values clipped).
OBS_BOUND = 10.0


class CDPBObservation(NamedTuple):
    """The entries of N observations before clipping, each (N,) or, for a per-client block, (N, K) or None where the
    scenario does not have it (see the module's table)."""

    round_fraction: NDArray
    reliable_share: NDArray
    log_noise_var: NDArray
    log_convergence: NDArray
    log_privacy: NDArray
    log_channel_gain: NDArray | None = None
    sampled: NDArray | None = None


def _blocks(s: CDPBScenario) -> tuple[str, ...]:
    """The per-client blocks the scenario's observation has."""
    return CLIENT_ENTRIES[:(1 + (s.client_sampling < 1.0)) if s.csi_feedback else 0]


def entry_names(s: CDPBScenario) -> tuple[str, ...]:
    """The name of every observation entry of scenario ``s``, in order (a block's entries as ``name[k]``)."""
    return ENTRIES + tuple(f"{name}[{k}]" for name in _blocks(s) for k in range(s.num_clients))


def observation_space(s: CDPBScenario) -> spaces.Box:
    """``Box(-OBS_BOUND, OBS_BOUND, (len(entry_names(s)),), float32)``."""
    return spaces.Box(-OBS_BOUND, OBS_BOUND, shape=(len(entry_names(s)),), dtype=np.float32)


def write_observation(obs: CDPBObservation) -> NDArray:
    """The observations (N, entries) as float32, every entry clipped to [-OBS_BOUND, OBS_BOUND]."""
    cols = [np.asarray(getattr(obs, name), dtype=float)[:, None] for name in ENTRIES]
    cols += [getattr(obs, name) for name in CLIENT_ENTRIES if getattr(obs, name) is not None]
    return np.clip(np.concatenate(cols, axis=1), -OBS_BOUND, OBS_BOUND).astype(np.float32)
