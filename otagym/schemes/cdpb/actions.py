"""CDPB's actions: what an action means, decoded once for the core and any policy.

The server broadcasts rho in (0, P/W^2] each round (the paper's eq. (7) threshold h_th = rho W^2 / P follows); an
action is either a normalised a in [-1, 1] or rho itself. :func:`action_to_rho` is the one decoder; the core
(:class:`otagym.schemes.cdpb.core.CDPBCore`) plays what it returns.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, get_args

import numpy as np
from gymnasium import spaces
from numpy.typing import ArrayLike, NDArray

from otagym.validation import action_array, bound, refuse_entries

__all__ = ["RhoActionType", "NORMALIZED", "RHO", "ACTION_TYPES", "RHO_FLOOR_RATIO", "action_to_rho", "action_space",
           "DeviceDecisions"]

RhoActionType = Literal["normalized", "rho"]
#: a in [-1, 1] -> rho = rho_max (r + (1 - r)(a + 1)/2), linear, r = ``rho_min_ratio``.
NORMALIZED: RhoActionType = "normalized"
#: rho in [0, P/W^2] directly (the closed action space), for analytic policies.
RHO: RhoActionType = "rho"
#: Every action type, in the order the env argument lists them.
ACTION_TYPES: tuple[RhoActionType, ...] = get_args(RhoActionType)

#: The smallest rho the environments play, over rho_max = P/W^2: the bottom of the normalised action's range (its
#: ``rho_min_ratio`` may go down to it) and the rho that a ``"rho"`` action below it (0 included) is played as. From it
#: up, every result stays finite over the whole scenario space (sigma_q^2 / (K_t^2 rho), the estimate's noise,
#: overflowed for rho <~ 1e-308); at it the threshold is h_th = 1e-12 and a reliable client sends its gradient at
#: 1e-12 / h of its power, the rest as noise, so a smaller rho would only make the estimate noisier still.
RHO_FLOOR_RATIO = 1e-12

def action_to_rho(action: ArrayLike, num_envs: int, *, action_type: RhoActionType, rho_max: float,
                  rho_min_ratio: float) -> NDArray:
    """rho for each of ``num_envs`` envs from the action, validated.

    ``"normalized"``: a in [-1, 1] -> rho = rho_max (r + (1 - r)(a + 1)/2) with r = ``rho_min_ratio``. ``"rho"``: any
    rho of the closed action space [0, P/W^2] (``rho_max``; up to 1e-9 above it, rounding in a policy, is played as
    P/W^2); below :data:`RHO_FLOOR_RATIO` P/W^2 it is played as that floor, where every result stays finite.
    """
    a = action_array(action, num_envs)
    if action_type == NORMALIZED:
        refuse_entries("action (normalized)", "lie in [-1, 1]", a, ~(np.abs(a) <= 1.0))
        r = rho_min_ratio
        return rho_max * (r + (1.0 - r) * 0.5 * (a + 1.0))
    refuse_entries("action (rho)", f"lie in [0, P/W^2 = {bound(rho_max)}] (a rho below {RHO_FLOOR_RATIO:g} "
                   "P/W^2 is played as that floor)", a, ~((a >= 0) & (a <= rho_max * (1 + 1e-9))))  # NaN too
    return np.clip(a, RHO_FLOOR_RATIO * rho_max, rho_max)


def action_space(action_type: RhoActionType, rho_max: float) -> spaces.Box:
    """The action space of one env: ``Box(-1, 1, (1,), float32)`` (normalised) or ``Box(0, P/W^2, (1,), float64)``."""
    if action_type == NORMALIZED:
        return spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
    return spaces.Box(0.0, rho_max, shape=(1,), dtype=np.float64)


class DeviceDecisions(NamedTuple):
    """What each device decides for itself in a round, beside the server's rho (each (N, K)); the paper's rule is
    ``threshold_scale`` 1, the strategy's noise portion and every device taking part.

    Attributes:
        threshold_scale: c_k >= 1, the device's own participation threshold c_k h_th over the paper's h_th (7): it
            sends its gradient when h_k >= c_k h_th (it can from h_th, where its power allows the channel inversion
            (4)) and acts as an unreliable client below.
        noise_portion: the probability that the device, unreliable this round, sends artificial noise (the portion of
            the paper's CDPB-mixed, per device); None = the scenario's (1 noisy, 0 idle, ``portion`` mixed).
        active: False for a device that has left (its privacy budget spent): it transmits nothing and leaks nothing.
    """

    threshold_scale: NDArray
    noise_portion: NDArray | None
    active: NDArray
