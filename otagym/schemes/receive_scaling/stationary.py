"""Receive scaling -- the channel law's integrals: the quadrature rules of the expectations over h_min^2 ~ Exponential
and the table of the stationary water level
(:meth:`~otagym.schemes.receive_scaling.model.ReceiveScalingModel.stationary_level`), built once at import."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special

#: Gauss-Laguerre nodes and weights for expectations over h_min^2 ~ Exponential (see
#: :meth:`ReceiveScalingModel.expected_equal_alloc_leakage`).
_LAGUERRE_NODES, _LAGUERRE_WEIGHTS = np.polynomial.laguerre.laggauss(48)
_LEGENDRE_NODES, _LEGENDRE_WEIGHTS = np.polynomial.legendre.leggauss(64)


def _quadrature(values: NDArray, weights: NDArray) -> NDArray:
    """sum_j values[..., j] weights[j], row by row: the same bits for a row whatever the rows beside it (a BLAS
    matrix-vector product sums a row differently in a batch of 7 than alone, which an env's round must not see)."""
    return (values * weights).sum(axis=-1)

#: Range of v = log theta of :meth:`ReceiveScalingModel.stationary_level` (theta: the water level over x_max E[h^2]).
_TAIL_V_MIN, _TAIL_V_MAX = float(np.log(1e-12)), float(np.log(700.0))


def _scaled_tail(theta: NDArray) -> NDArray:
    """r(theta) = 1/theta - e^theta E_1(theta) > 0 (= e^theta f(theta), see
    :meth:`ReceiveScalingModel.stationary_level`); above theta = 40, where the difference cancels, by its asymptotic
    series sum_k (-1)^(k+1) k! / theta^(k+1) (30 terms: relative error below 1e-14)."""
    theta = np.asarray(theta, dtype=float)
    small = np.minimum(theta, 40.0)
    direct = 1.0 / small - special.exp1(small) * np.exp(small)
    if not np.any(theta > 40.0):
        return direct
    big = np.maximum(theta, 40.0)
    series = np.zeros_like(big)
    term = 1.0 / big
    for k in range(1, 31):
        term = term * (k / big) * (-1.0 if k > 1 else 1.0)
        series = series + term
    return np.where(theta <= 40.0, direct, series)


def _scaled_tail_square(theta: NDArray) -> NDArray:
    """r2(theta) = e^theta int_theta^inf (1/theta - 1/e)^2 e^-e de = r (1 + 2/theta) - 1/theta^2 (r =
    :func:`_scaled_tail`), the second moment of :meth:`ReceiveScalingModel.stationary_level`'s spend; above theta = 40,
    where the difference cancels, by its series sum_{n>=3} (-1)^(n+1) (n-1)! (n-2) / theta^(n+1) (30 terms)."""
    theta = np.asarray(theta, dtype=float)
    small = np.minimum(theta, 40.0)
    direct = _scaled_tail(small) * (1.0 + 2.0 / small) - 1.0 / small**2
    if not np.any(theta > 40.0):
        return direct
    big = np.maximum(theta, 40.0)
    series = np.zeros_like(big)
    term = 1.0 / big**3  # (n - 1)! / theta^(n + 1) at n = 2
    for n in range(3, 33):
        term = term * (n - 1) / big
        series = series + (-1.0) ** (n + 1) * (n - 2) * term
    return np.where(theta <= 40.0, direct, series)


@dataclass(frozen=True)
class _TailTable:
    """log f(theta) and log(1 + cv^2)(theta) on a uniform grid of v = log theta, with their exact derivatives, for
    cubic Hermite interpolation (8192 nodes: relative error ~1e-13 in theta; no E_1 per call). f is the mean spend of
    :meth:`ReceiveScalingModel.stationary_level` in units of d sigma_n^2 / a, cv its coefficient of variation."""

    v: NDArray
    log_f: NDArray
    dlog_f: NDArray  # d log f / d v = -1 / (theta r)
    log_cv2: NDArray  # log(1 + cv^2) = theta + log r2 - 2 log r
    dlog_cv2: NDArray

    @classmethod
    def build(cls, nodes: int = 8192) -> "_TailTable":
        v = np.linspace(_TAIL_V_MIN, _TAIL_V_MAX, nodes)
        theta = np.exp(v)
        r, r2 = _scaled_tail(theta), _scaled_tail_square(theta)
        dr = r - 1.0 / theta**2  # r' (d/dtheta e^theta E_1 = e^theta E_1 - 1/theta)
        dr2 = dr * (1.0 + 2.0 / theta) - 2.0 * r / theta**2 + 2.0 / theta**3
        return cls(v, np.log(r) - theta, -1.0 / (theta * r), theta + np.log(r2) - 2.0 * np.log(r),
                   theta * (1.0 + dr2 / r2 - 2.0 * dr / r))


_TAIL = _TailTable.build()
