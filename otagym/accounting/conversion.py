"""RDP -> (eps, delta)-DP.

Sources
-------
* RDP -> (eps, delta)-DP: eq. (6) of the AdaScale paper (Balle et al. 2020, Thm. 21), minimised over orders.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otagym.accounting.orders import _validate_orders

__all__ = ["rdp_to_dp"]

def rdp_to_dp(rdp: ArrayLike, orders: ArrayLike, delta: float) -> tuple[NDArray, NDArray]:
    """(eps, delta)-DP from RDP curves via eq. (6) of the AdaScale paper, minimised over orders.

    ``eps(alpha) = rdp + log((alpha-1)/alpha) - (log delta + log alpha) / (alpha - 1)`` -- the same conversion as
    ``opacus.accountants.analysis.rdp.get_privacy_spent``.

    Args:
        rdp: RDP values (nats), orders on the last axis; ``inf`` allowed.
        orders: the orders (> 1), same length as the last axis of ``rdp``.
        delta: target delta in (0, 1).

    Returns:
        ``(epsilon, best_order)``, each of shape ``rdp.shape[:-1]``; epsilon is ``inf`` where every order is, and
        never below 0 (where eq. (6) is negative the bound is epsilon = 0; Opacus returns the negative value).
    """
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1); got {delta}")
    orders_arr = np.asarray(orders, dtype=float)
    _validate_orders(orders_arr)
    rdp_arr = np.asarray(rdp, dtype=float)
    if rdp_arr.shape[-1:] != orders_arr.shape:
        raise ValueError(f"rdp's last axis ({rdp_arr.shape[-1:]}) must match orders ({orders_arr.shape})")
    if np.any(~(rdp_arr >= 0)):
        raise ValueError(f"rdp must be >= 0 (inf allowed); got {rdp_arr[~(rdp_arr >= 0)].ravel()[:3]}")
    eps = rdp_arr - (np.log(delta) + np.log(orders_arr)) / (orders_arr - 1) + np.log((orders_arr - 1) / orders_arr)
    eps = np.maximum(eps, 0.0)  # eq. (6) can go below 0 for tiny RDP and large delta; every mechanism is (0, delta)-DP
    best = np.argmin(eps, axis=-1)
    epsilon = np.take_along_axis(eps, best[..., None], axis=-1)[..., 0]
    return epsilon, orders_arr[best]
