"""Eq. (9) at one integer order as a function of u = 1/sigma^2: the compiled upper bound on log A_alpha that the
environments' round kernels call (:func:`curve_log_a`), its derivatives in u (:func:`curve_derivatives`), and
:class:`SGMCurve`, which holds the weights of eq. (9) for fixed sampling rates (per-round leakage in the envs, objective
and derivative of per-round problems such as eq. (30) in the policies).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import ArrayLike, NDArray

from otagym.accounting.integer import _log_weights, _triangular
from otagym.accounting.rounding import (_ROUND_U, _SMALLEST, _TERM_U, _UNDERFLOW_ZONE, _order_bound_jit,
                                        _raise_log1p_jit)
from otagym.jit import JIT_NO_ALLOC

__all__ = ["SGMCurve", "curve_log_a", "curve_derivatives"]


@njit(**JIT_NO_ALLOC)
def curve_log_a(u: float, log_w: NDArray, tri: NDArray) -> float:
    """An upper bound on log A_alpha of eq. (9) for an integer order at one ``u = 1/sigma^2 >= 0`` (``inf`` -> inf),
    from ``log_w`` (K,), the logs of the binomial weights C(alpha,k) q^k (1-q)^(alpha-k) of k = 2..alpha, and ``tri``
    (K,) = (k^2-k)/2: the computed value raised by a bound on its rounding error (5e-15 of it typically, ~1e-12
    where the terms near k = alpha take over).

    Since the binomial weights sum to one, A = 1 + sum_{k>=2} w_k expm1(tri_k u), so log A = log1p(S) with S a sum of
    non-negative terms: no cancellation, full relative precision even when the RDP is 1e-15 (the plain log-sum-exp of
    eq. (9) loses it). S is summed in linear space where every tri_k u <= 30 (no overflow possible), else in log space
    (terms log w_k + log expm1(x_k) relative to the largest); the choice depends on the element alone.

    Bound: log w_k = log C(alpha,k) + k log q + (alpha-k) log(1-q) is within :data:`~otagym.accounting.rounding._TERM_U`
    of its magnitudes, |log w_k| + 2 log C(alpha,k) <= |log w_k| + 2 alpha log 2
    (:func:`~otagym.accounting.rounding._order_bound`); x_k = tri_k u from u = 1/sigma^2 within _TERM_U x_k, and expm1
    and log(1 - e^-x) within _TERM_U (|log(1 - e^-x)| + 1); the terms' sum within K u, and the log space's shift and
    logarithm within :data:`~otagym.accounting.rounding._ROUND_U` of theirs. Terms are weighted by their share of S, so
    the bound is as tight as the terms that matter. :func:`~otagym.accounting.rounding._raise_log1p` raises the result,
    and :func:`_floored` adds what subnormal numbers lose near the smallest floats.
    """
    n = tri.size
    base = _order_bound_jit(n + 1.0)
    linear = True
    for k in range(n):
        if tri[k] * u > 30.0:
            linear = False
    if linear:
        s = err = 0.0
        for k in range(n):
            if log_w[k] > -math.inf:  # a zero weight (q = 1: only k = alpha) adds nothing (0 x inf would be NaN)
                x = tri[k] * u
                term = math.exp(log_w[k]) * math.expm1(x)
                s += term
                err += term * (abs(log_w[k]) + x)
        if u == 0.0:
            return 0.0
        return _floored(_raise_log1p_jit(math.log1p(s), base + _TERM_U * err / s) if s > 0.0 else 0.0, n,
                        tri[n - 1] * u)
    top = -math.inf
    for k in range(n):
        if log_w[k] > -math.inf:  # a zero weight (q = 1: only k = alpha) adds nothing, even at u = inf
            x = tri[k] * u
            top = max(top, log_w[k] + (x + math.log(-math.expm1(-x))))  # log expm1(x), stable for all x >= 0
    if not math.isfinite(top):
        return top if top > 0 else 0.0
    s = err = 0.0
    for k in range(n):
        if log_w[k] > -math.inf:
            x = tri[k] * u
            log_x = math.log(-math.expm1(-x))
            term = math.exp(log_w[k] + (x + log_x) - top)
            s += term
            err += term * (abs(log_w[k]) + x + abs(log_x))
    y = top + math.log(s)
    delta = base + _TERM_U * err / s + _ROUND_U * (2.0 * abs(top) + abs(y))
    return _floored(_raise_log1p_jit(max(y, 0.0) + math.log1p(math.exp(-abs(y))), delta), n, 0.0)  # log(1 + e^y)


@njit(inline="always", **JIT_NO_ALLOC)
def _floored(log_a: float, n: int, x_max: float) -> float:
    """``log_a`` raised, where it is below :data:`~otagym.accounting.rounding._UNDERFLOW_ZONE`, by what n terms of S
    lose when their weights are subnormal (each within one smallest float, then multiplied by expm1(x_k) <=
    expm1(``x_max``) in linear space), and the last roundings of subnormal results (4 units)."""
    if log_a < _UNDERFLOW_ZONE:
        return log_a + (n * (1.0 + math.expm1(x_max)) + 4.0) * _SMALLEST
    return log_a


@njit(**JIT_NO_ALLOC)
def _curve_moments(u: float, log_w: NDArray, tri: NDArray, low_mass: float) -> tuple[float, float]:
    """E_w[tri] and E_w[tri^2] under the weights w_k e^{tri_k u} / A_alpha of eq. (9) at finite ``u`` (k = 0, 1 have
    tri = 0 and total weight ``low_mass``; ``log_w``, ``tri`` as :func:`curve_log_a`).

    One set of exponentials e_k = e^{log w_k + tri_k u - top} serves both and the normaliser: A e^-top =
    (1 - sum_{k>=2} w_k) e^-top + sum_k e_k, a sum of non-negative terms (no cancellation); top >= 0 is the largest
    exponent, so nothing overflows."""
    top = 0.0
    for k in range(tri.size):
        top = max(top, log_w[k] + tri[k] * u)
    total = m1 = m2 = 0.0
    for k in range(tri.size):
        e = math.exp(log_w[k] + tri[k] * u - top)
        total += e
        m1 += tri[k] * e
        m2 += tri[k] * (tri[k] * e)
    norm = low_mass * math.exp(-top) + total
    return m1 / norm, m2 / norm


@njit(**JIT_NO_ALLOC)
def _log_a_rows(log_w: NDArray, tri: NDArray, u: NDArray, out: NDArray) -> NDArray:
    """:func:`curve_log_a` of ``u[i]`` with the weights ``log_w[i]`` (rows: elements), into ``out``."""
    for i in range(u.size):
        out[i] = curve_log_a(u[i], log_w[i], tri)
    return out


def _log_a_int(log_w: NDArray, tri: NDArray, u: NDArray) -> NDArray:
    """An upper bound on log A_alpha of eq. (9) (:func:`curve_log_a`) for an integer order, element by element:
    ``log_w`` (K, n) the weights of each of the n elements of ``u`` (n,), ``tri`` (K,) or (K, 1)."""
    u = np.ascontiguousarray(u, dtype=float)
    return _log_a_rows(np.ascontiguousarray(np.asarray(log_w, dtype=float).T), np.ascontiguousarray(tri, dtype=float)
                       .reshape(-1), u, np.empty_like(u))


# --- The per-round SGM leakage as a function of 1/sigma^2, for hot loops and optimisers ------------------------

class SGMCurve:
    """RDP of the SGM at one integer order, as a function of ``u = 1 / sigma^2``, for fixed sampling rates.

    The weights of eq. (9) depend only on (q, alpha) and are computed once; each evaluation is then the same
    log1p-of-a-sum as :func:`~otagym.accounting.sgm.rdp_sgm`'s fallback for single orders (one compiled implementation,
    :func:`curve_log_a`, which the environments' round kernels call too). Used by the environments (per-round
    leakage) and by the policies (objective and derivative of per-round problems such as eq. (30)).

    Args:
        q: sampling rates, shape ``(C,)`` (one per device class), in (0, 1].
        order: integer RDP order alpha >= 2.

    Attributes:
        log_weights: (C, K) log C(alpha,k) q^k (1-q)^(alpha-k) for k = 2..alpha (-inf where q = 1 and k < alpha).
        tri: (K,) (k^2 - k) / 2 for k = 2..alpha.
        low_mass: (C,) the weight of k = 0, 1: (1-q)^alpha + alpha q (1-q)^(alpha-1).
    """

    def __init__(self, q: ArrayLike, order: int) -> None:
        q_arr = np.atleast_1d(np.asarray(q, dtype=float))
        if np.any(~((q_arr > 0) & (q_arr <= 1))):
            raise ValueError(f"q must lie in (0, 1] for SGMCurve; got {q_arr}")
        if int(order) != order or order < 2:
            raise ValueError(f"order must be an integer >= 2; got {order}")
        self.q = q_arr
        self.order = int(order)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_w = _log_weights(self.order, np.log(q_arr), np.log1p(-q_arr))
        k = np.arange(2, self.order + 1)[:, None]
        # q == 1: only k = alpha carries weight (0 * -inf would be NaN above).
        log_w = np.where((q_arr == 1)[None, :], np.where(k == self.order, 0.0, -np.inf), log_w)
        self.log_weights = np.ascontiguousarray(log_w.T)  # (C, K): one contiguous row per class
        self.tri = _triangular(self.order, 0)  # (K,)
        # the weight of k = 0, 1 (tri = 0): (1-q)^alpha + alpha q (1-q)^(alpha-1), without cancellation
        self.low_mass = (1.0 - q_arr) ** (self.order - 1) * (1.0 + (self.order - 1) * q_arr)

    def _rows(self, u: ArrayLike) -> tuple[NDArray, tuple[int, ...]]:
        """``u`` broadcast against the classes (last axis) as contiguous rows (n, C), and the result's shape."""
        u_arr = np.asarray(u, dtype=float)
        shape = np.broadcast_shapes(u_arr.shape, self.q.shape)
        return np.ascontiguousarray(np.broadcast_to(u_arr, shape)).reshape(-1, self.q.size), shape

    def rdp(self, u: ArrayLike) -> NDArray:
        """RDP (nats) at ``u = 1/sigma^2 >= 0``; last axis = classes. ``u = inf`` (no noise) -> inf."""
        rows, shape = self._rows(u)
        return _curve_rdp_rows(rows, self.log_weights, self.tri, self.order, np.empty_like(rows)).reshape(shape)

    def slope_and_curvature(self, u: ArrayLike) -> tuple[NDArray, NDArray]:
        """First and second derivatives of the RDP in u (finite u): E[tri]/(alpha-1) and Var[tri]/(alpha-1) under the
        weights w_k e^{tri_k u} / A_alpha of eq. (9) (:func:`_curve_moments`)."""
        rows, shape = self._rows(u)
        slope, curvature = _curve_slope_rows(rows, self.log_weights, self.tri, self.low_mass, self.order,
                                             np.empty_like(rows), np.empty_like(rows))
        return slope.reshape(shape), curvature.reshape(shape)

    def slope(self, u: ArrayLike) -> NDArray:
        """d RDP / d u at finite ``u`` (same shape): the tri-weighted mean of eq. (9)'s terms, over alpha - 1."""
        return self.slope_and_curvature(u)[0]


@njit(**JIT_NO_ALLOC)
def _curve_rdp_rows(u: NDArray, log_w: NDArray, tri: NDArray, order: int, out: NDArray) -> NDArray:
    """RDP at ``u`` (n, C) of the classes' weights ``log_w`` (C, K) (:meth:`SGMCurve.rdp`), into ``out``."""
    for i in range(u.shape[0]):
        for c in range(u.shape[1]):
            out[i, c] = curve_log_a(u[i, c], log_w[c], tri) / (order - 1)
    return out


@njit(**JIT_NO_ALLOC)
def curve_derivatives(u: float, log_w: NDArray, tri: NDArray, low_mass: float, order: int) -> tuple[float, float]:
    """d RDP / du and d^2 RDP / du^2 of one class at finite ``u``: E[tri] / (alpha - 1) and Var[tri] / (alpha - 1)."""
    m1, m2 = _curve_moments(u, log_w, tri, low_mass)
    return m1 / (order - 1), max(m2 - m1 * m1, 0.0) / (order - 1)


@njit(**JIT_NO_ALLOC)
def _curve_slope_rows(u: NDArray, log_w: NDArray, tri: NDArray, low_mass: NDArray, order: int, slope: NDArray,
                      curvature: NDArray) -> tuple[NDArray, NDArray]:
    """:func:`curve_derivatives` at ``u`` (n, C), into ``slope`` and ``curvature``."""
    for i in range(u.shape[0]):
        for c in range(u.shape[1]):
            slope[i, c], curvature[i, c] = curve_derivatives(u[i, c], log_w[c], tri, low_mass[c], order)
    return slope, curvature

