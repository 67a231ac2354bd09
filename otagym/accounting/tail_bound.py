"""The Gaussian privacy-loss tail bound ``R_dp(eps, delta)`` of Liu & Simeone, batched.

Sources
-------
* Gaussian privacy-loss tail bound ``R_dp(eps, delta)``: appendix of Liu & Simeone, *Privacy for Free: Wireless
  Federated Learning via Uncoded Transmission with Adaptive Power Control* (IEEE JSAC 2021).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["tail_bound_budget", "tail_bound_epsilon", "tail_bound_c_inverse"]


def tail_bound_c_inverse(delta: ArrayLike) -> NDArray:
    """C^{-1}(1/delta) where C(x) = sqrt(pi) x exp(x^2) (Liu & Simeone), by Newton's method on log C, batched."""
    d = np.asarray(delta, dtype=float)
    if np.any(~((d > 0) & (d < 1))):
        raise ValueError(f"delta must lie in (0, 1); got {d}")
    target = -np.log(d) - 0.5 * np.log(np.pi)  # solve log x + x^2 = target
    x = np.sqrt(np.maximum(target, 1.0))
    for _ in range(60):
        step = (np.log(x) + x * x - target) / (1.0 / x + 2.0 * x)
        x = np.maximum(x - step, x / 10)
    return x


def tail_bound_budget(epsilon: ArrayLike, delta: ArrayLike) -> NDArray:
    """R_dp(eps, delta) = (sqrt(eps + c^2) - c)^2 with c = C^{-1}(1/delta) (Liu & Simeone, the appendix's last display).

    A sequence of Gaussian mechanisms whose per-round ratios r_t = sensitivity / noise std satisfy
    ``sum_t r_t^2 / 2 <= R_dp(eps, delta)`` is (eps, delta)-DP. The ``/2`` is the mean of the privacy loss
    (sum r_t^2 / 2) and follows from the appendix's definition q = (eps - sum r^2/2) / sqrt(2 sum r^2); written as
    ``sum r_t^2 <= R_dp`` it is the same statement for the paper's sqrt(2)-scaled ratio and twice as conservative
    for the plain ratio. Here r is always the plain ratio.
    """
    eps = np.asarray(epsilon, dtype=float)
    if np.any(~(eps >= 0)):
        raise ValueError(f"epsilon must be >= 0; got {eps}")
    c = tail_bound_c_inverse(delta)
    return (np.sqrt(eps + c * c) - c) ** 2


def tail_bound_epsilon(sum_ratio_sq: ArrayLike, delta: ArrayLike) -> NDArray:
    """Inverse of :func:`tail_bound_budget`: the smallest eps with ``sum_ratio_sq / 2 <= R_dp(eps, delta)``.

    ``eps = S/2 + c sqrt(2 S)`` with S = sum_t r_t^2 (dimensionless) and c = C^{-1}(1/delta).
    """
    s = np.asarray(sum_ratio_sq, dtype=float)
    if np.any(~(s >= 0)):
        raise ValueError(f"sum_ratio_sq must be >= 0; got {s}")
    c = tail_bound_c_inverse(delta)
    return s / 2 + c * np.sqrt(2 * s)
