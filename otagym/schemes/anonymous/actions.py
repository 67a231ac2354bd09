"""Anonymous OTA's actions: what an action means, decoded once for the core and any policy.

The server sets the public noise level sigma (gradient units, per coordinate) each round; an action is either a
normalised a in [-1, 1] on a log scale of noise multipliers or sigma itself. :func:`action_to_sigma` is the one
decoder; the core (:class:`otagym.schemes.anonymous.core.AnonymousCore`) plays what it returns.
"""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np
from gymnasium import spaces
from numpy.typing import ArrayLike, NDArray

from otagym.schemes.anonymous.scenario import AnonymousScenario
from otagym.validation import POSITIVE, action_array, bound, refuse_entries

__all__ = ["SigmaActionType", "NORMALIZED", "SIGMA", "ACTION_TYPES", "sigma_range", "action_to_sigma", "action_space"]

SigmaActionType = Literal["normalized", "sigma"]
#: a in [-1, 1] -> sigma = s_lo (s_hi / s_lo)^((a + 1)/2), log-linear over :func:`sigma_range`.
NORMALIZED: SigmaActionType = "normalized"
#: sigma in gradient units directly (in [1e-30, 1e30] and the whole action space), for analytic policies.
SIGMA: SigmaActionType = "sigma"
#: Every action type, in the order the env argument lists them.
ACTION_TYPES: tuple[SigmaActionType, ...] = get_args(SigmaActionType)


def sigma_range(s: AnonymousScenario, noise_multiplier_range: tuple[float, float]) -> tuple[float, float]:
    """[s_lo, s_hi]: ``noise_multiplier_range`` (low, high) times ``s.sigma_unit`` = 2L / max(E[b_t], 1), so that the
    normalised action is a log noise multiplier at the expected batch (gradient units)."""
    low, high = noise_multiplier_range
    return (low * s.sigma_unit, high * s.sigma_unit)


def action_to_sigma(action: ArrayLike, num_envs: int, *, action_type: SigmaActionType,
                    sigma_range: tuple[float, float]) -> NDArray:
    """sigma (gradient units, per coordinate) for each of ``num_envs`` envs from the action, validated.

    ``"normalized"``: a in [-1, 1] -> sigma = s_lo (s_hi / s_lo)^((a + 1)/2) with [s_lo, s_hi] = ``sigma_range``.
    ``"sigma"``: any physical sigma, and the whole action space (whose ends follow the scenario's units: a tiny clip
    norm puts them below 1e-30).
    """
    a = action_array(action, num_envs)
    if action_type == NORMALIZED:
        refuse_entries("action (normalized)", "lie in [-1, 1]", a, ~(np.abs(a) <= 1.0))
        lo, hi = sigma_range
        return lo * (hi / lo) ** (0.5 * (a + 1.0))
    low, high = min(POSITIVE.low, sigma_range[0]), max(POSITIVE.high, sigma_range[1])
    refuse_entries("action (sigma)", f"lie in [{bound(low)}, {bound(high)}]", a, ~((a >= low) & (a <= high)))
    return a


def action_space(action_type: SigmaActionType, sigma_range: tuple[float, float]) -> spaces.Box:
    """The action space of one env: ``Box(-1, 1, (1,), float32)`` (normalised) or ``Box(s_lo, s_hi, (1,), float64)``."""
    if action_type == NORMALIZED:
        return spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
    return spaces.Box(*sigma_range, shape=(1,), dtype=np.float64)
