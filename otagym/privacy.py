"""Privacy accounting: pure, array-first functions and a thin running ledger.

Everything here is batched: ``q`` and ``noise_multiplier`` broadcast against each other (any leading shape, e.g.
envs x devices), and ``orders`` adds a trailing axis when it is a sequence.

Sources
-------
* SGM RDP for integer orders: Lemma 1, eq. (9) of the AdaScale paper, computed in log space, all orders
  at once from one shared set of exponentials per (q, sigma), terms that provably cannot matter skipped; raised by a
  bound on its rounding error (5e-15 of it typically, ~1e-12 where the terms near k = alpha take over, up to 2e-11
  near q = 1), so it is an upper bound, as at fractional orders.
* SGM RDP for fractional orders: Mironov, Talwar, Zhang (2019), Section 3.3, the series of Opacus
  (``opacus.accountants.analysis.rdp._compute_log_a_frac``) rearranged to sum A - 1, its alternating tail summed by
  Cohen, Rodriguez Villegas & Zagier (2000), every rounding and truncation error bounded: an upper bound on the exact
  RDP, every order and (q, sigma) on shared passes over the terms; the chord between integer orders (log A is convex
  in the order) where that bound is loose.
* A large ledger's rounds at integer orders: tables of eq. (9) per sampling rate and order, quintic Hermite
  interpolants in u = 1/sigma^2 raised by certified bounds on their error (the section "Tabulated RDP curves" below;
  docs/speed.md): upper bounds on eq. (9), within 1e-12 of it.
* RDP -> (eps, delta)-DP: eq. (6) of the AdaScale paper (Balle et al. 2020, Thm. 21), minimised over orders.
* Gaussian privacy-loss tail bound ``R_dp(eps, delta)``: appendix of Liu & Simeone, *Privacy for Free: Wireless Federated Learning via Uncoded
  Transmission with Adaptive Power Control* (IEEE JSAC 2021).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np
from numba import njit, prange
from numpy.typing import ArrayLike, NDArray
from scipy import special

from otagym.jit import JIT, JIT_NO_ALLOC, parallel
from otagym.validation import Many, Real

__all__ = [
    "DEFAULT_ORDERS",
    "OPACUS_ORDERS",
    "SGMCurve",
    "RDPLedger",
    "rdp_sgm",
    "rdp_to_dp",
    "tail_bound_budget",
    "tail_bound_epsilon",
    "tail_bound_c_inverse",
]

#: Integer order grid of otagym's ledgers for the final (eps, delta) conversion, roughly geometric from 2 to 256
#: (one set of at most 255 exponentials per element and round serves all of them). Every order gives a valid bound;
#: a grid only gives up tightness where the SGM's RDP blows up between two grid orders. Measured against every integer
#: order 2..256 at q = 0.01: median loss 0.1%, worst 9% at T = 500 (18% at T = 100). Pass ``range(2, 257)`` for the
#: best integer order (18x the cost).
DEFAULT_ORDERS: tuple[int, ...] = (2, 3, 4, 5, 6, 8, 10, 13, 17, 22, 28, 36, 47, 61, 79, 103, 134, 174, 226, 256)
#: Opacus's default grid (``RDPAccountant.DEFAULT_ALPHAS``), fractional orders included.
OPACUS_ORDERS: tuple[float, ...] = tuple(1 + x / 10.0 for x in range(1, 100)) + tuple(float(a) for a in range(12, 64))


#: Spec of an ``orders`` argument: a non-empty sequence of orders in (1, 10000]; ``dp_orders`` may also be None.
ORDERS = Many(Real(1.0, 1e4, low_open=True))
DP_ORDERS = Many(ORDERS.element, optional=True)


def _validate_q_sigma(q: NDArray, sigma: NDArray) -> None:
    if np.any(~np.isfinite(q)) or np.any((q < 0) | (q > 1)):
        raise ValueError(f"q (sampling rate) must lie in [0, 1]; got {q[~((q >= 0) & (q <= 1))].ravel()[:3]}")
    if np.any(np.isnan(sigma)) or np.any(sigma < 0):
        raise ValueError(
            f"noise_multiplier must be >= 0 (inf allowed); got {sigma[~(sigma >= 0)].ravel()[:3]}"
        )


def _validate_orders(orders: NDArray) -> None:
    if np.any(~(orders > 1)) or np.any(np.isinf(orders)):
        raise ValueError(f"orders must be finite and > 1; got {orders[~((orders > 1) & np.isfinite(orders))][:3]}")


@lru_cache(maxsize=64)
def _log_binom(alpha: int) -> NDArray:
    """log C(alpha, k) for k = 0..alpha, each the logarithm of the exact integer (within 1 ulp; log-gammas would be
    off by ulps of log alpha!, 1e-12 at alpha = 256), read-only."""
    out, c = np.empty(alpha + 1), 1
    for k in range(alpha + 1):
        out[k] = math.log(c)
        c = c * (alpha - k) // (k + 1)
    out.flags.writeable = False
    return out


def _log_weights(alpha: int, log_q: NDArray, log_1mq: NDArray) -> NDArray:
    """log of the binomial weights C(alpha,k) q^k (1-q)^(alpha-k) for k = 2..alpha, k on a leading axis."""
    shape = (-1,) + (1,) * np.ndim(log_q)
    k = np.arange(2, alpha + 1, dtype=float).reshape(shape)
    return _log_binom(alpha)[2:].reshape(shape) + k * log_q + (alpha - k) * log_1mq


def _triangular(alpha: int, ndim: int) -> NDArray:
    """(k^2 - k) / 2 for k = 2..alpha, shaped to broadcast on a leading axis over ``ndim`` trailing axes."""
    k = np.arange(2, alpha + 1, dtype=float)
    return ((k * k - k) / 2).reshape((-1,) + (1,) * ndim)


#: The rounding model of the integer orders' upper bounds (:func:`_curve_log_a`, :func:`_log_s_int`): the unit
#: roundoff u, every elementary operation (numpy's and libm's exp, log, log1p, expm1 included) within 1 ulp (2u) of its
#: exact result.
_U = 2.0**-53
#: A term's log of eq. (9), k log q + (alpha-k) log(1-q) + x_k + log(1 - e^-x_k), per unit of the magnitudes it is
#: made of: log q and log(1-q) (2u each), their difference and its product by k (3u), x_k = tri_k u from
#: u = 1/sigma^2 (3u: two roundings and the product), the sums (u each).
_TERM_U = 6 * _U
_LOG2 = math.log(2.0)
#: The fractional series' rounding model, 16u per unit of magnitude of a computed quantity (see below).
_KU = 16 * _U
_SMALLEST = float(np.nextafter(0.0, 1.0))
#: Below this an integer order's bound gets what its subnormal numbers may have lost added (:func:`_floored`); above
#: it that is below the rounding bound, and is not computed (arithmetic on subnormal numbers costs ~100 cycles, which
#: a kernel on every step would pay).
_UNDERFLOW_ZONE = 1e-290
#: The error of one more rounded operation (a shift added back, a product, a logarithm), per unit of the magnitudes
#: it combines: 2 ulp.
_ROUND_U = 4 * _U


def _raise_log1p(log_a: Any, delta: Any) -> Any:
    """An upper bound on log1p(S) from ``log_a``, the computed log1p of an S whose log is within ``delta`` of exact
    (nats; S_exact <= S e^delta): log1p(S e^d) is below both log1p(S) + d and log1p(S) e^d (log1p is concave, zero at
    zero), and e^d - 1 <= d (1 + d) for d <= 1 (where d > 1, d is added instead); (1 + 8u) covers log1p's and this
    sum's roundings and the caller's division by alpha - 1. Plain arithmetic on floats or arrays, without a
    transcendental function: the compiled kernels (:func:`_curve_log_a`) and numpy (:func:`_rdp_int`) share it."""
    return (log_a + np.minimum(delta, log_a * delta * (1.0 + delta) + (delta > 1.0) * delta)) * (1.0 + 8.0 * _U)


_raise_log1p_jit = njit(inline="always", **JIT_NO_ALLOC)(_raise_log1p)


def _order_bound(alpha: Any) -> Any:
    """The part of an integer order's error bound on log S that depends on the order alone: log C(alpha, k) within
    1 ulp (2u) of its magnitude, at most alpha log 2 (:func:`_log_binom`); the products k log q + (alpha-k) log(1-q)
    within :data:`_TERM_U` of theirs beyond what the terms' shares count (at most alpha log 2 more); 2 _TERM_U for
    expm1 and log1p; alpha - 1 roundings of the sum."""
    return (_TERM_U + 2 * _U) * _LOG2 * alpha + 2 * _TERM_U + (alpha - 1.0) * _U


_order_bound_jit = njit(inline="always", **JIT_NO_ALLOC)(_order_bound)


@njit(**JIT_NO_ALLOC)
def _curve_log_a(u: float, log_w: NDArray, tri: NDArray) -> float:
    """An upper bound on log A_alpha of eq. (9) for an integer order at one ``u = 1/sigma^2 >= 0`` (``inf`` -> inf),
    from ``log_w`` (K,), the logs of the binomial weights C(alpha,k) q^k (1-q)^(alpha-k) of k = 2..alpha, and ``tri``
    (K,) = (k^2-k)/2: the computed value raised by a bound on its rounding error (5e-15 of it typically, ~1e-12
    where the terms near k = alpha take over).

    Since the binomial weights sum to one, A = 1 + sum_{k>=2} w_k expm1(tri_k u), so log A = log1p(S) with S a sum of
    non-negative terms: no cancellation, full relative precision even when the RDP is 1e-15 (the plain log-sum-exp of
    eq. (9) loses it). S is summed in linear space where every tri_k u <= 30 (no overflow possible), else in log space
    (terms log w_k + log expm1(x_k) relative to the largest); the choice depends on the element alone.

    Bound: log w_k = log C(alpha,k) + k log q + (alpha-k) log(1-q) is within :data:`_TERM_U` of its magnitudes,
    |log w_k| + 2 log C(alpha,k) <= |log w_k| + 2 alpha log 2 (:func:`_order_bound`); x_k = tri_k u from
    u = 1/sigma^2 within _TERM_U x_k, and expm1 and log(1 - e^-x) within _TERM_U (|log(1 - e^-x)| + 1); the terms'
    sum within K u, and the log space's shift and logarithm within :data:`_ROUND_U` of theirs. Terms are weighted by
    their share of S, so the bound is as tight as the terms that matter. :func:`_raise_log1p` raises the result, and
    :func:`_floored` adds what subnormal numbers lose near the smallest floats.
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
    """``log_a`` raised, where it is below :data:`_UNDERFLOW_ZONE`, by what n terms of S lose when their weights are
    subnormal (each within one smallest float, then multiplied by expm1(x_k) <= expm1(``x_max``) in linear space), and
    the last roundings of subnormal results (4 units)."""
    if log_a < _UNDERFLOW_ZONE:
        return log_a + (n * (1.0 + math.expm1(x_max)) + 4.0) * _SMALLEST
    return log_a


@njit(**JIT_NO_ALLOC)
def _curve_moments(u: float, log_w: NDArray, tri: NDArray, low_mass: float) -> tuple[float, float]:
    """E_w[tri] and E_w[tri^2] under the weights w_k e^{tri_k u} / A_alpha of eq. (9) at finite ``u`` (k = 0, 1 have
    tri = 0 and total weight ``low_mass``; ``log_w``, ``tri`` as :func:`_curve_log_a`).

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
    """:func:`_curve_log_a` of ``u[i]`` with the weights ``log_w[i]`` (rows: elements), into ``out``."""
    for i in range(u.size):
        out[i] = _curve_log_a(u[i], log_w[i], tri)
    return out


def _log_a_int(log_w: NDArray, tri: NDArray, u: NDArray) -> NDArray:
    """An upper bound on log A_alpha of eq. (9) (:func:`_curve_log_a`) for an integer order, element by element:
    ``log_w`` (K, n) the weights of each of the n elements of ``u`` (n,), ``tri`` (K,) or (K, 1)."""
    u = np.ascontiguousarray(u, dtype=float)
    return _log_a_rows(np.ascontiguousarray(np.asarray(log_w, dtype=float).T), np.ascontiguousarray(tri, dtype=float)
                       .reshape(-1), u, np.empty_like(u))


#: Terms provably below e^-(this) of a lower bound on S_alpha are skipped (e^-50 after 1e4 such terms).
_PRUNE_NATS = 60.0
#: Floor (nats below the largest term) of the exponentials summed: keeps them normal floats (denormals make exp ~100x
#: slower); a term that far down is < e^-700 of the sum, so flooring it changes nothing.
_FLOOR = -700.0
#: Beyond this x_k = u (k^2-k)/2 (nats), adding log(1 - e^-x_k) > -1e-16 to g_k changes the term e^{g_k} by less
#: than its rounding.
_EXACT_EXP_NATS = 37.0
#: Span (nats) within which consecutive orders share one shift per element in :func:`_log_s_int`, and the floor of
#: its factors (e^-340: even 255 terms that small are < e^-84 of a sum >= e^-250).
_SHARED_NATS = 250.0
_SHARED_LOG_FLOOR = -340.0
_SHARED_FLOOR = float(np.exp(_SHARED_LOG_FLOOR))
#: Sub-batches of the integer orders (:func:`_sub_batches`): at most this many elements, spanning at most these
#: widths in lambda = log(q/(1-q)) and log u (sigma within 2.5%) once they hold _MIN_SUB_BATCH elements.
_SUB_BATCH = 2048
_MIN_SUB_BATCH = 256
_SPAN_LAM = 0.5
_SPAN_LOG_U = 0.05


@dataclass(frozen=True)
class _IntegerOrders:
    """What the all-order evaluation of eq. (9) needs that depends on the integer orders only (cached per grid)."""

    orders: NDArray  # (n,) ascending distinct integer orders, float
    k: NDArray  # (K,) 2..max(orders)
    tri: NDArray  # (K,) (k^2 - k) / 2
    log_binom: NDArray  # (n, K) log C(alpha, k), -inf for k > alpha
    lb_k: NDArray  # (n, 2) indices of k = 2 and k = alpha: exact terms that bound S_alpha from below
    bound: NDArray  # (n,) the part of the error bound that depends on the order alone (:func:`_order_bound`)


@lru_cache(maxsize=16)
def _integer_orders(orders: tuple[int, ...]) -> _IntegerOrders:
    """The tables of :class:`_IntegerOrders` for ascending distinct integer ``orders`` >= 2."""
    a = np.asarray(orders, dtype=float)
    k = np.arange(2, orders[-1] + 1, dtype=float)
    log_binom = np.full((a.size, k.size), -np.inf)
    for i, alpha in enumerate(orders):
        log_binom[i, :alpha - 1] = _log_binom(alpha)[2:]
    lb_k = np.stack([np.zeros(a.size, dtype=int), a.astype(int) - 2], axis=1)
    return _IntegerOrders(a, k, (k * k - k) / 2, log_binom, lb_k, _order_bound(a))


def _log_s_int(lam: NDArray, lam_mag: NDArray, u: NDArray, io: _IntegerOrders) -> tuple[NDArray, NDArray]:
    """log S_alpha = log(A_alpha - 1) - alpha log(1-q) of eq. (9) at every integer order, for one sub-batch, and a
    bound on its rounding and truncation error.

    With lambda = log(q/(1-q)), x_k = u (k^2-k)/2 and u = 1/sigma^2, and the k = 0, 1 terms of eq. (9) taken out
    (the binomial weights sum to one):  A_alpha = 1 + (1-q)^alpha S_alpha,  S_alpha = sum_{k=2}^{alpha} C(alpha,k)
    e^{g_k},  g_k = k lambda + x_k + log(1 - e^{-x_k}).  The g_k are shared by every order (one set per element, at
    most max(orders) - 1 exponentials), and no term of S is subtracted, so S keeps full relative precision even
    where the RDP is 1e-15.

    Terms that cannot matter are not computed: over the sub-batch, log C(alpha,k) + k lambda + x_k at (max lambda,
    max u) bounds a term from above, and the exact terms at k = 2 and k = alpha at (min lambda, min u) bound S_alpha
    from below (both increase with lambda and u); a term whose bound lies :data:`_PRUNE_NATS` below is dropped. For
    the noise of a training run most orders keep a handful of terms near k = alpha or near k = 2.

    Error: log C(alpha, k) and the order's own roundings within :func:`_order_bound`, and the rest of each term's log
    within :data:`_TERM_U` of the magnitudes it is made of (``lam_mag`` = |log q| + |log(1-q)| per unit of k, x_k and
    log(1 - e^-x_k)), weighted by its share of the sum; the sum adds K u, the shift and the logarithm
    :data:`_ROUND_U` of theirs, and the skipped terms at most 2 K e^-60 of S.

    Returns:
        ``(log S, bound on |log S - exact|)``, each of shape (orders, elements).
    """
    lam_hi, u_hi, lam_lo, u_lo = lam.max(), u.max(), lam.min(), u.min()
    with np.errstate(divide="ignore"):
        x_lo = u_lo * io.tri[io.lb_k]
        lower = (io.log_binom[np.arange(io.orders.size)[:, None], io.lb_k] + io.k[io.lb_k] * lam_lo
                 + x_lo + np.log(-np.expm1(-x_lo))).max(axis=1)
    g_hi = io.k * lam_hi + io.tri * u_hi  # >= g_k of every element
    keep = np.isfinite(io.log_binom) & (io.log_binom + g_hi >= (lower - _PRUNE_NATS)[:, None])
    cols = np.flatnonzero(keep.any(axis=0))
    x = io.tri[cols, None] * u  # (kept k, m): every operation runs along contiguous rows of m elements
    g = io.k[cols, None] * lam + x
    low = io.tri[cols] * u_lo < _EXACT_EXP_NATS  # elsewhere log(1 - e^-x) is below rounding
    log_x = np.log(-np.expm1(-x[low]))
    g[low] += log_x
    mag = io.k[cols, None] * lam_mag + x + 1.0  # what each g_k is made of (+ 1: log(1 - e^-x_k) where not added)
    mag[low] += np.abs(log_x)
    pos = np.cumsum(keep.any(axis=0)) - 1  # row of g for each k
    out = np.empty((io.orders.size, lam.size))
    share = np.empty_like(out)  # the error of the terms (their magnitudes weighted by their share of S) and the sum

    # Consecutive orders whose terms all lie within _SHARED_NATS of one shift per element (max g over their k) and
    # one per order (max log C) are a single matrix product: the binomials C(alpha, k) / max_k C(alpha, k) times the
    # shared e^{g_k - shift}. Their sums are >= e^-250 in those units (the term that gave `lower` is kept), so factors
    # floored at e^-340 change nothing and every product stays a normal float. An order whose own terms span more
    # sums them in log space.
    c_max = io.log_binom.max(axis=1)
    low_end = (lower - c_max).tolist()
    reach = np.where(keep, g_hi, -np.inf).max(axis=1).tolist()
    start = 0
    while start < io.orders.size:
        stop, lo, hi = start, np.inf, -np.inf
        while stop < io.orders.size and min(lo, low_end[stop]) - max(hi, reach[stop]) >= -_SHARED_NATS:
            lo, hi = min(lo, low_end[stop]), max(hi, reach[stop])
            stop += 1
        if stop > start:
            rows = slice(start, stop)
            ks = np.flatnonzero(keep[rows].any(axis=0))
            terms = g[pos[ks]]
            shift = terms.max(axis=0)
            w = np.exp(io.log_binom[rows, ks] - c_max[rows, None])
            w[w < _SHARED_FLOOR] = 0.0
            v = np.exp(np.maximum(terms - shift, _SHARED_LOG_FLOOR))
            total = w @ v
            log_total = np.log(total)
            out[rows] = log_total + shift + c_max[rows, None]
            share[rows] = _TERM_U * (w @ (v * mag[pos[ks]])) / total + _ROUND_U * (
                np.abs(log_total) + 2 * np.abs(shift) + c_max[rows, None])
        else:
            ks = np.flatnonzero(keep[start])
            terms = io.log_binom[start, ks, None] + g[pos[ks]]
            top = terms.max(axis=0)
            e = np.exp(np.maximum(terms - top, _FLOOR))
            total = e.sum(axis=0)
            out[start] = top + np.log(total)
            share[start] = _TERM_U * (e * mag[pos[ks]]).sum(axis=0) / total + _ROUND_U * (
                np.abs(np.log(total)) + 2 * np.abs(top))
            stop = start + 1
        start = stop
    n_terms = (io.k[None, :] <= io.orders[:, None]).sum(axis=1)[:, None]
    delta = share + _ROUND_U * np.abs(out) + io.bound[:, None] + n_terms * 2 * math.exp(-_PRUNE_NATS)
    return out, delta


def _sub_batches(lam: NDArray, u: NDArray) -> tuple[NDArray, list[int]]:
    """An order of the elements and cuts into sub-batches of similar (lambda, u), for the bounds of :func:`_log_s_int`.

    Sorted by lambda (in bins of :data:`_SPAN_LAM` nats) and then u, a sub-batch ends where log u has grown by
    :data:`_SPAN_LOG_U` since its first element or it holds :data:`_SUB_BATCH` elements -- but not before it holds
    :data:`_MIN_SUB_BATCH` (scattered inputs: fewer, looser sub-batches beat many tiny ones).

    Returns:
        ``(perm, cuts)``: sub-batch b is ``perm[cuts[b]:cuts[b + 1]]``.
    """
    lam_bin = np.floor(lam / _SPAN_LAM)
    log_u = np.log(u)
    perm = np.argsort(lam_bin * 4096.0 + log_u)  # by bin, then log u (|log u| < 1420 for finite u > 0)
    bins, logs = lam_bin[perm], log_u[perm]
    cuts, n = [0], lam.size
    while cuts[-1] < n:
        start = cuts[-1]
        bin_end = int(np.searchsorted(bins, bins[start], side="right"))
        span_end = start + int(np.searchsorted(logs[start:bin_end], logs[start] + _SPAN_LOG_U, side="right"))
        cuts.append(min(n, start + _SUB_BATCH, max(span_end, start + _MIN_SUB_BATCH)))
    return perm, cuts


def _rdp_int(q: NDArray, u: NDArray, orders: NDArray) -> NDArray:
    """RDP (nats) of eq. (9) at integer ``orders`` for flat ``q`` in (0, 1) and finite ``u = 1/sigma^2 > 0``.

    Evaluated in sub-batches of similar (q, u) (:func:`_sub_batches`) by :func:`_log_s_int`;
    log A_alpha = log1p((1-q)^alpha S_alpha) in log form. Shape (elements, orders).
    """
    uniq, inverse = np.unique(orders, return_inverse=True)
    io = _integer_orders(tuple(int(a) for a in uniq))
    log_1mq = np.log1p(-q)
    log_q = np.log(q)
    lam = log_q - log_1mq
    lam_mag = np.abs(log_q) + np.abs(log_1mq)
    perm, cuts = _sub_batches(lam, u)
    lam, lam_mag, u, log_1mq = lam[perm], lam_mag[perm], u[perm], log_1mq[perm]
    by_order = np.empty((uniq.size, q.size))  # (orders, sorted elements): sub-batches are contiguous column blocks
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        log_s, delta = _log_s_int(lam[lo:hi], lam_mag[lo:hi], u[lo:hi], io)
        scaled = io.orders[:, None] * log_1mq[lo:hi]
        log_s += scaled
        delta += _ROUND_U * (np.abs(scaled) + np.abs(log_s))
        by_order[:, lo:hi] = _raise_log1p(np.logaddexp(0.0, log_s), delta)  # an upper bound on log(1 + S)
    by_order /= (io.orders - 1)[:, None]
    tiny = np.nonzero(by_order < _UNDERFLOW_ZONE)  # a value near or below the smallest floats: ulps of them lost
    by_order[tiny] += (io.orders[tiny[0]] + 3) * _SMALLEST
    out = np.empty((q.size, orders.size))
    out[perm] = by_order[inverse].T
    return out


#: Terms of the fractional series in the first pass; each further pass takes twice as many, up to _FRAC_CHUNK_MAX.
#: The schedule is the same for every entry, so an entry's value does not depend on the batch around it.
_FRAC_CHUNK = 16
_FRAC_CHUNK_MAX = 256
#: Elements per sub-batch of the fractional series (times the number of fractional orders: the entries of a pass).
_FRAC_SUB_BATCH = 128
#: Floor (nats below the running maximum) of the exponentials of the fractional series; see :data:`_FLOOR`. A floored
#: term is off by at most e^-700 of that maximum, which the error bound counts.
_FRAC_FLOOR = -700.0
#: The smallest normal float (the unit roundoff _U and the smallest float _SMALLEST are defined above).
_TINY = float(np.finfo(float).tiny)
#: Absolute error allowed for a log-CDF on top of _KU: where it is subnormal (a CDF within 1e-308 of 1), its error
#: is absolute.
_SUBNORMAL = 1e-300
#: Noise multipliers where the fractional series is summed; beyond, sigma^2 nears over- or underflow and the
#: Gaussian bound alpha / (2 sigma^2) is taken (within 1e-180 of exact below 1e-100).
_SERIES_SIGMA = (1e-100, 1e150)
#: Rounding model of the fractional series' error bound: a computed quantity of magnitude m (an exponent, a log-CDF, a
#: logarithm, a sum of them) is within _KU * m of its exact value, a ratio within 16 ulp (relative, so _KU in its log),
#: and each term's last exp, log and product within 12 ulp: numpy's and scipy's exp, log, log1p, expm1 and log_ndtr
#: are within a few ulp and no quantity passes through more than a few roundings. Against 50-digit mpmath, the
#: computed values used at most 1/40 of the margin this gives. (_KU is defined above, beside the integer orders'.)
#: Terms of the alternating tail summed with the weights of Cohen, Rodriguez Villegas & Zagier (2000, Algorithm 1),
#: which leave an error of at most the tail's first magnitude / d_n, d_n = ((3 + sqrt 8)^n + (3 - sqrt 8)^n) / 2.
_CRVZ_TERMS = 32


def _crvz_weights(n: int) -> tuple[NDArray, float]:
    """Weights of the n-term algorithm of Cohen, Rodriguez Villegas & Zagier on the signed terms, and 1/d_n.

    Their recurrence (b <- (k+n)(k-n) b / ((k+1/2)(k+1)), c <- b - c) in exact rationals, d_n an integer
    (d_{k+1} = 6 d_k - d_{k-1}); each weight is |c_k| / d_n in (0, 1], rounded once.
    """
    d_prev, d = 1, 3
    for _ in range(n - 1):
        d_prev, d = d, 6 * d - d_prev
    b, c, weights = Fraction(-1), Fraction(-d), []
    for k in range(n):
        c = b - c
        weights.append(float(abs(c) / d))
        b = b * (k + n) * (k - n) / (Fraction(2 * k + 1, 2) * (k + 1))
    return np.array(weights), 1.0 / d


_CRVZ_WEIGHTS, _CRVZ_ERROR = _crvz_weights(_CRVZ_TERMS)
#: Where the series' error bound exceeds this fraction of its value (heavy cancellation), the chord between the
#: neighbouring integer orders, a bound of its own, is computed too and the smaller bound kept.
_FRAC_CHORD = 2.0**-30


def _frac_moments(z0: NDArray, sigma: NDArray, dz0: NDArray, minus: NDArray, e: NDArray, t: NDArray,
                  t_exact: NDArray, side: float) -> tuple[NDArray, ...]:
    """What the terms of one side of the series need from the moments, elements ``e`` (rows) x exponents ``t``.

    ``y = x_t + log Phi(side (z0 - t) / sigma)``, ``x_t = t (t - 1) / (2 sigma^2)``: e^y is the integral of L^t over
    z < z0 (side +1) or z > z0 (side -1) under N(0, sigma^2), L = e^{(2z - 1) / (2 sigma^2)} the likelihood ratio of
    N(1, sigma^2) to N(0, sigma^2). A term is c e^y, or c (e^y - 1) on the rows where ``minus``. ``dz0`` bounds the
    error of z0 and ``t_exact`` says which t carry none (else |t| u). log Phi's slope at a is the inverse Mills ratio
    phi(a)/Phi(a): below |a| + 1 for a < -1 (Gordon's inequality), else computed (it falls with a, and its log moves
    by at most |a| + 2 per unit of a).

    Returns:
        Stacked: log |e^y| or log |e^y - 1|; its sign; a bound on that log's error, less the coefficient's (dy where
        the term is c e^y, plus the last rounding); log(e^{y + dy} dy), which bounds how far e^y - 1 may lie from its
        computed value, where the term is c (e^y - 1) (-inf elsewhere); log of a bound on e^y (+ 1 where ``minus``),
        the magnitude of the series past a term.
    """
    ee = e[:, None]
    m = minus[ee]
    a = side * (z0[ee] - t) / sigma[ee]
    log_phi = special.log_ndtr(a)
    x = t * (t - 1) / (2 * sigma[ee] ** 2)
    dt = np.where(t_exact, 0.0, _U * np.abs(t))
    d_a = (dz0[ee] + dt + _KU * np.abs(z0[ee] - t)) / sigma[ee] + _KU * np.abs(a)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        mills = np.where(a < -1, -a + d_a + 1, np.minimum(
            np.exp(np.minimum(-0.5 * a * a - 0.5 * np.log(2 * np.pi) - log_phi + d_a * (np.abs(a) + 2), 700.0))
            * (1 + 1e-6), np.maximum(-a, 0.0) + d_a + 2))  # the last: the slope is below max(-a, 0) + 2 anywhere
        y = x + log_phi
        dy = (_KU * (np.abs(x) + np.abs(log_phi) + np.abs(y)) + dt * np.abs(2 * t - 1) / sigma[ee] ** 2 + mills * d_a
              + _SUBNORMAL)
        log_m = np.where(m, np.where(y > 0, y + np.log(-np.expm1(-y)), np.log(-np.expm1(y))), y)  # log|e^y (- 1)|
        sign_m, log_dm = np.where(m, np.sign(y), 1.0), np.where(m, y + dy + np.log(dy), -np.inf)
        d_m = _KU * np.abs(np.where(np.isfinite(log_m), log_m, 0.0)) + 12 * _U + np.where(m, 0.0, dy)
        # t = 0, 1 (x = 0) on the -1 side: e^y - 1 = -Phi(-a) exactly, in log space (y itself can be subnormal)
        zero = np.flatnonzero((t == 0) | (t == 1))
        if zero.size:
            at = (np.flatnonzero(minus[e])[:, None], zero)
            a0 = a[at]
            log_m[at] = special.log_ndtr(-a0)
            sign_m[at], log_dm[at] = -1.0, -np.inf
            d_m[at] = _KU * np.abs(log_m[at]) + 12 * _U + (np.abs(a0) + d_a[at] + 2) * d_a[at]  # slope of log Phi(-a)
        return np.stack([log_m, sign_m, d_m, log_dm, np.where(m, np.logaddexp(y + dy, 0.0), y + dy)])


def _log1p_over(top: NDArray, scaled: NDArray, alpha: NDArray) -> NDArray:
    """log1p(D) / (alpha - 1) for D = e^top * scaled > 0, raised by the rounding of log(D) (its magnitude's _KU).

    Below D = e^-600, D / (alpha - 1) itself (log1p(D) <= D), so that D down to the smallest float survives."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_d = top + np.log(scaled)
        log_d += _KU * (np.abs(top) + np.abs(np.log(scaled)))
        log_a = np.where(log_d > 36, log_d + np.log1p(np.exp(-log_d)), np.log1p(np.exp(np.minimum(log_d, 36))))
        log_ratio = log_d - np.log(alpha - 1)
        return np.where(log_d < -600, np.exp(log_ratio + _KU * np.abs(log_ratio)), log_a / (alpha - 1))


def _rdp_frac_upper(q: NDArray, sigma: NDArray, alpha: NDArray) -> tuple[NDArray, NDArray]:
    """Upper bounds on the RDP at fractional orders (Mironov, Talwar, Zhang 2019, Sec. 3.3), (elements, orders).

    With p = 1 - q, lambda = log(q/p), z0 = sigma^2 log(p/q) + 1/2 (where q L = p) and x_t = t (t - 1) / (2 sigma^2),
    their series is A = A0 + A1 with A0 = sum_i C(alpha,i) p^(alpha-i) q^i e^{x_i} Phi((z0 - i)/sigma) (the binomial
    series of (p + qL)^alpha in qL/p < 1, integrated over z < z0) and A1 = sum_i C(alpha,i) p^i q^j e^{x_j}
    Phi((j - z0)/sigma), j = alpha - i (in p/(qL) < 1, over z > z0) -- Opacus's ``_compute_log_a_frac``. Here D = A - 1
    is summed, without the cancellation of A's leading terms against 1 that leaves log A no digits where the RDP is
    below ~1e-13: for q <= 1/2 the binomial weights of A0 sum to one, so 1 is taken out of A0 term by term,
    D = sum_i w_i (e^{y_i} - 1) + A1 with e^{y_i} = e^{x_i} Phi(...) and each e^y - 1 an expm1; for q > 1/2, out of A1.
    log|C(alpha,i)| comes from the recurrence C(alpha,i+1) = C(alpha,i) (alpha-i)/(i+1); the terms are summed in
    linear space relative to a running maximum.

    Tail: from i = ceil(alpha) on, each series alternates, and its magnitudes are moments of a positive measure on
    [0, 1] (|C(alpha,i)| = Gamma(i - alpha) / (|Gamma(-alpha)| i!) is a Beta moment, and x = qL/p, p/(qL) <= 1 on the
    half-lines), so the algorithm of Cohen, Rodriguez Villegas & Zagier (2000, Alg. 1 and Prop. 1) on its next
    :data:`_CRVZ_TERMS` terms leaves an error of at most its first magnitude / d_n, d_n > 5.8^n / 2. Opacus instead
    stops at the first term below e^-30, which where the tail decays like i^-(alpha+1) (q near 1/2) under-reports.

    Bound: each term's rounding error is bounded from the magnitudes of what it is made of (:data:`_KU`), the sum's
    by u |result| per addition; D is raised by those bounds and the tail's, and log1p(D)/(alpha - 1) rounded up once
    more. Where the raised D is not positive (never seen) the entry is NaN, for the caller to bound.

    Returns:
        ``(rdp, rel)``: the upper bounds, and how far they lie above the series' computed value, relative (the
        bounds' own looseness: ~1e-13 typically; inf where that value is not positive).
    """
    log_q, log_p = np.log(q), np.log1p(-q)
    middle = (q >= 0.25) & (q <= 0.75)  # lambda = log1p((2q - 1)/(1 - q)) there: 2q - 1 exact, no cancellation
    with np.errstate(divide="ignore"):
        lam = np.where(middle, np.log1p((2 * q - 1) / (1 - q)), log_q - log_p)
    d_lam = _KU * (np.abs(lam) + np.where(middle, 0.0, np.abs(log_q) + np.abs(log_p)))
    s2 = sigma * sigma
    z0 = s2 * -lam + 0.5
    dz0 = s2 * d_lam + _KU * (s2 * np.abs(lam) + np.abs(z0))
    minus_first = q <= 0.5  # the side whose binomial weights sum to one takes the -1

    n_o = alpha.size
    head = np.ceil(alpha)  # the alternating tails start here
    end = head + _CRVZ_TERMS  # ... and the sums stop before here
    e_all = np.repeat(np.arange(q.size), n_o)  # entries: element-major
    o_all = np.tile(np.arange(n_o), q.size)
    top = np.full(e_all.size, -np.inf)  # running maximum (nats) of the logs of the terms and their error bounds
    acc, err, rnd, first = np.zeros((4, e_all.size))  # / e^top: sum, term errors, rounding, first tail magnitudes
    log_c, d_c = np.zeros((2, n_o))  # log |C(alpha, i0)| and a bound on its error
    rdp, rel = np.full((2, e_all.size), np.nan)
    active = np.arange(e_all.size)
    i0 = passes = 0
    while active.size:
        e, o = e_all[active], o_all[active]
        width = int(min(_FRAC_CHUNK << passes, _FRAC_CHUNK_MAX, end[o].max() - i0))  # the last pass: as far as needed
        i = np.arange(i0, i0 + width, dtype=float)
        elems, row = np.unique(e, return_inverse=True)
        orders, col = np.unique(o, return_inverse=True)
        a_o, h = alpha[orders, None], head[orders, None]
        step = np.log(np.abs(a_o - i) / (i + 1))  # log |C(alpha, i+1) / C(alpha, i)|
        lc = np.cumsum(np.concatenate([log_c[orders, None], step[:, :-1]], axis=1), axis=1)
        dlc = d_c[orders, None] + np.concatenate(
            [np.zeros((orders.size, 1)), np.cumsum(_KU * (1 + np.abs(step[:, :-1]) + np.abs(lc[:, 1:])), axis=1)], axis=1)
        log_c[orders] = lc[:, -1] + step[:, -1]
        d_c[orders] = dlc[:, -1] + _KU * (1 + np.abs(step[:, -1]) + np.abs(log_c[orders]))
        sign_c = np.where(i < h, 1.0, 1.0 - 2.0 * ((i - h) % 2))[col]
        weight = np.where(i < h, 1.0, _CRVZ_WEIGHTS[np.clip(i - h, 0, _CRVZ_TERMS - 1).astype(int)]
                          * (i < h + _CRVZ_TERMS))[col]
        at_head = (i == h)[col]
        used = (i < h + _CRVZ_TERMS)[col]  # an entry's sums and bounds ignore what lies past its end

        lam_e, d_tlam = lam[e, None], (d_lam + 2 * _KU * np.abs(lam))[e, None]  # error of t lambda, per unit of |t|
        base = lc[col] + alpha[o, None] * log_p[e, None]
        d_base = dlc[col] + _KU * (np.abs(lc[col]) + alpha[o, None] * np.abs(log_p[e, None]) + np.abs(base))
        t1, t1_at = np.unique(a_o - i, return_inverse=True)
        exact = (i == 0) | ((2 * i >= a_o) & (i <= 2 * a_o))  # Sterbenz: alpha - i is exact
        t1_exact = np.zeros(t1.size, bool)
        t1_exact[t1_at.ravel()[exact.ravel()]] = True  # a t shared by several orders is one number: exact for all
        sides = []
        for t, parts, at in ((i, _frac_moments(z0, sigma, dz0, minus_first, elems, i, np.ones(width, bool), 1.0),
                              row[:, None] * width + np.arange(width)),
                             (alpha[o, None] - i, _frac_moments(z0, sigma, dz0, ~minus_first, elems, t1, t1_exact, -1.0),
                              row[:, None] * t1.size + t1_at.reshape(orders.size, width)[col])):
            log_m, sign_m, d_m, log_dm, log_tail = np.take(parts.reshape(5, -1), at, axis=1)
            ell_c = base + t * lam_e  # log |c|
            dc = d_base + np.abs(t) * d_tlam  # the error of ell_c
            ell = ell_c + log_m
            ell_c += dc
            log_dm += ell_c
            if not used.all():
                ell[~used] = log_dm[~used] = -np.inf
            sides.append((ell, sign_c * sign_m, dc + d_m, log_dm, ell_c, log_tail))

        new_top = np.maximum(top[active], np.max([np.maximum(s[0], s[3]).max(axis=1) for s in sides], axis=0))
        scale = np.where(np.isfinite(new_top), new_top, 0.0)
        carry = np.exp(top[active] - scale)
        pairs = np.zeros((active.size, width))
        errs = np.zeros((active.size, width))
        heads = np.zeros(active.size)
        lost = np.zeros(active.size, bool)
        hit = np.flatnonzero(at_head.any(axis=1))
        for (ell, sgn, d_ell, log_dm, ell_c, log_tail), minus in zip(sides, (minus_first[e], ~minus_first[e])):
            terms = np.exp(np.maximum(ell - scale[:, None], _FRAC_FLOOR))
            pairs += sgn * terms
            # |term error| <= |term| expm1(d_ell) (+ |c| e^{y+dy} dy on the -1 side) <= |term| d_ell (1 + m) for
            # d_ell <= m <= 1 (m: the row's largest); a row with m > 1 (a logarithm off by a nat) bounds nothing
            d_max = (d_ell if used.all() else np.where(used, d_ell, 0.0)).max(axis=1)
            lost |= d_max > 1
            errs += terms * d_ell * np.where(lost, 0.0, 1 + d_max)[:, None]
            rows = np.flatnonzero(minus)
            errs[rows] += np.exp(np.maximum(log_dm[rows] - scale[rows, None], _FRAC_FLOOR))
            at = (hit, at_head[hit].argmax(axis=1))
            with np.errstate(over="ignore"):  # a head far above every term: an infinite bound, for the fallbacks
                heads[hit] += np.exp(ell_c[at] + log_tail[at] - scale[hit])
        pairs *= weight
        sums = np.cumsum(pairs, axis=1)
        carried = acc[active] * carry
        acc[active] = sums[:, -1] + carried
        # rounding: u |result| per addition and product (sides, weights and their own rounding, running sums, carry)
        rnd[active] = rnd[active] * carry + _U * (3 * np.abs(pairs).sum(axis=1) + (np.abs(sums) * used).sum(axis=1)
                                                  + np.abs(acc[active]) + 2 * np.abs(carried))
        err[active] = np.where(lost, np.inf, err[active] * carry + (errs * weight).sum(axis=1))
        first[active] = first[active] * carry + heads
        top[active] = new_top

        done = end[o] <= i0 + width
        fin = active[done]
        n_terms = 2 * end[o_all[fin]]  # the sums of positive bounds are themselves within n_terms u
        bound = ((err[fin] + rnd[fin] + first[fin] * _CRVZ_ERROR + 4 * n_terms * np.exp(_FRAC_FLOOR))
                 * (1 + (n_terms + 8) * 2 * _U))
        upper = acc[fin] + bound
        rdp[fin] = np.where(upper > 0, np.nextafter(_log1p_over(top[fin], upper, alpha[o_all[fin]]) * (1 + 16 * _U),
                                                    np.inf), np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel[fin] = np.where(acc[fin] > 0, rdp[fin] / _log1p_over(top[fin], acc[fin], alpha[o_all[fin]]) - 1, np.inf)
        rel[fin[rdp[fin] < _TINY]] = 0.0  # a bound below the normal floats: nothing to tighten
        active = active[~done]
        i0 += width
        passes += 1
    return rdp.reshape(q.size, n_o), rel.reshape(q.size, n_o)


def _chord_upper(q: NDArray, u: NDArray, alpha: float) -> NDArray:
    """Upper bound on the RDP at a fractional order from the integer orders n = floor(alpha) and n + 1 (eq. 9).

    log A_alpha = (alpha - 1) RDP_alpha is convex in alpha (the cumulant generating function of the privacy loss) and
    log A_1 = 0, so it lies below its chord between n and n + 1 (for alpha < 2 this is RDP_2, the bound of
    monotonicity in the order). Each log A_n is an upper bound already (:func:`_log_a_int`, element by element, so
    that the value does not depend on the batch).
    """
    n = float(np.floor(alpha))
    log_q, log_p = np.log(q), np.log1p(-q)

    def log_a(k: int) -> NDArray:
        return np.concatenate([_log_a_int(_log_weights(k, log_q[s:s + 256], log_p[s:s + 256]), _triangular(k, 1),
                                          u[s:s + 256]) for s in range(0, q.size, 256)])

    low = log_a(int(n)) if n >= 2 else 0.0
    chord = ((n + 1 - alpha) * low + (alpha - n) * log_a(int(n) + 1)) / (alpha - 1) * (1 + 16 * _U)
    return np.nextafter(chord + 4 * (n + 2) * _SMALLEST, np.inf)  # subnormal values are off by ulps, not by u


def rdp_sgm(*, q: ArrayLike, noise_multiplier: ArrayLike, orders: ArrayLike) -> NDArray:
    """RDP of one round of the Sampled Gaussian Mechanism, batched.

    Integer orders use eq. (9) (Lemma 1 of the AdaScale paper), all orders from one shared set of exponentials per
    element (:func:`_log_s_int`), raised by a bound on its rounding error: an upper bound on the exact RDP, 5e-15
    above it typically, ~1e-12 where the terms near k = alpha take over, up to 2e-11 near q = 1 (where k lambda +
    alpha log(1-q) cancels). Fractional orders use the series of Mironov, Talwar & Zhang
    (2019, Sec. 3.3; Opacus's ``_compute_log_a_frac``) rearranged to sum A - 1, with its alternating tail summed by
    Cohen-Rodriguez Villegas-Zagier and every rounding and truncation error bounded (:func:`_rdp_frac_upper`): the
    value returned is an upper bound on the exact RDP, never below it -- typically 1e-13 above it, up to
    ~1e-13 sigma^2 / (alpha - 1) above where |q - 1/2| < ~1/sigma (float64 cancellation); where that bound is looser
    than 2^-30 the chord of (alpha - 1) RDP between the integer orders around alpha (it is convex in alpha,
    :func:`_chord_upper`) is taken if smaller. Values below the smallest float are rounded up to it.
    Edge cases follow Opacus: ``q == 0`` -> 0; ``noise_multiplier == 0`` -> inf; ``q == 1`` -> alpha / (2 sigma^2)
    (rounded up at fractional orders); ``noise_multiplier == inf`` -> 0.

    Args:
        q: Poisson sampling rate(s) in [0, 1].
        noise_multiplier: noise std / L2 sensitivity (dimensionless), >= 0, ``inf`` allowed.
        orders: a scalar order (> 1) or a sequence of orders (adds a trailing axis to the result).

    Returns:
        RDP in nats, shape ``broadcast(q, noise_multiplier).shape (+ (len(orders),))``; never NaN. An element's value
        does not depend on the other elements at fractional orders (at integer orders, its last bits can).
    """
    q_arr = np.asarray(q, dtype=float)
    sigma_arr = np.asarray(noise_multiplier, dtype=float)
    _validate_q_sigma(q_arr, sigma_arr)
    scalar_order = np.ndim(orders) == 0
    orders_arr = np.atleast_1d(np.asarray(orders, dtype=float))
    _validate_orders(orders_arr)
    q_b, s_b = np.broadcast_arrays(q_arr, sigma_arr)
    shape = q_b.shape
    qf, sf = q_b.reshape(-1), s_b.reshape(-1)
    out = np.zeros((qf.size, orders_arr.size))

    # Edge cases, in Opacus's order of precedence (zeros are already in `out`).
    zero_q = qf == 0
    inf_rdp = ~zero_q & (sf == 0)
    no_leak = ~zero_q & ~inf_rdp & np.isinf(sf)  # infinite noise: the output is independent of the data
    full_q = ~zero_q & ~inf_rdp & ~no_leak & (qf == 1)
    generic = ~(zero_q | inf_rdp | no_leak | full_q)
    out[inf_rdp] = np.inf
    with np.errstate(divide="ignore", over="ignore"):
        u = 1.0 / sf**2
    is_int = orders_arr == np.round(orders_arr)
    out[full_q] = orders_arr[None, :] * u[full_q, None] / 2
    out[np.ix_(full_q, ~is_int)] = np.nextafter(out[np.ix_(full_q, ~is_int)] * (1 + 4 * _U), np.inf)  # 3 roundings
    # 1/sigma^2 overflowing to inf (sigma < ~1e-154) is "no privacy" too.
    overflow = generic & np.isinf(u)
    out[overflow] = np.inf
    generic &= ~overflow

    if generic.any():
        g_q, g_s, g_u = qf[generic], sf[generic], u[generic]
        if is_int.all():
            res = _rdp_int(g_q, g_u, orders_arr)
        else:
            res = np.empty((g_q.size, orders_arr.size))
            if is_int.any():
                res[:, is_int] = _rdp_int(g_q, g_u, orders_arr[is_int])
        frac_idx = np.flatnonzero(~is_int)
        if frac_idx.size:
            alphas = orders_arr[frac_idx]
            # RDP <= alpha / (2 sigma^2), its value at q = 1 (it is non-decreasing in q); within 2 sigma^2 |log q| /
            # (alpha - 1) of exact for small sigma, and all there is where sigma^2 over- or underflows
            gauss = np.nextafter(alphas / 2 / g_s[:, None] / g_s[:, None] * (1 + 4 * _U), np.inf)
            vals, rel = gauss.copy(), np.zeros_like(gauss)
            series = (g_s >= _SERIES_SIGMA[0]) & (g_s <= _SERIES_SIGMA[1])
            if series.any():
                vals[series], rel[series] = (np.concatenate(parts) for parts in zip(*(
                    _rdp_frac_upper(g_q[series][s:s + _FRAC_SUB_BATCH], g_s[series][s:s + _FRAC_SUB_BATCH], alphas)
                    for s in range(0, series.sum(), _FRAC_SUB_BATCH))))
            loose = ~(rel <= _FRAC_CHORD)  # NaN included
            for o in np.flatnonzero(loose.any(axis=0)):
                at = loose[:, o]
                vals[at, o] = np.fmin(vals[at, o], _chord_upper(g_q[at], g_u[at], alphas[o]))
            res[:, frac_idx] = np.fmin(vals, gauss)
        np.maximum(res, 0.0, out=res)  # RDP >= 0; rounding can give -1e-17
        if generic.all():
            out = res
        else:
            out[generic] = res

    out = out.reshape(shape + (orders_arr.size,))
    return out[..., 0] if scalar_order else out


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


# --- Gaussian privacy-loss tail bound (Liu & Simeone) ---------------------------------------------------------------


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


# --- The per-round SGM leakage as a function of 1/sigma^2, for hot loops and optimisers ------------------------


class SGMCurve:
    """RDP of the SGM at one integer order, as a function of ``u = 1 / sigma^2``, for fixed sampling rates.

    The weights of eq. (9) depend only on (q, alpha) and are computed once; each evaluation is then the same
    log1p-of-a-sum as :func:`rdp_sgm`'s fallback for single orders (one compiled implementation,
    :func:`_curve_log_a`, which the environments' round kernels call too). Used by the environments (per-round
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
            out[i, c] = _curve_log_a(u[i, c], log_w[c], tri) / (order - 1)
    return out


@njit(**JIT_NO_ALLOC)
def _curve_derivatives(u: float, log_w: NDArray, tri: NDArray, low_mass: float, order: int) -> tuple[float, float]:
    """d RDP / du and d^2 RDP / du^2 of one class at finite ``u``: E[tri] / (alpha - 1) and Var[tri] / (alpha - 1)."""
    m1, m2 = _curve_moments(u, log_w, tri, low_mass)
    return m1 / (order - 1), max(m2 - m1 * m1, 0.0) / (order - 1)


@njit(**JIT_NO_ALLOC)
def _curve_slope_rows(u: NDArray, log_w: NDArray, tri: NDArray, low_mass: NDArray, order: int, slope: NDArray,
                      curvature: NDArray) -> tuple[NDArray, NDArray]:
    """:func:`_curve_derivatives` at ``u`` (n, C), into ``slope`` and ``curvature``."""
    for i in range(u.shape[0]):
        for c in range(u.shape[1]):
            slope[i, c], curvature[i, c] = _curve_derivatives(u[i, c], log_w[c], tri, low_mass[c], order)
    return slope, curvature


# --- Tabulated RDP curves: a large ledger's few multiply-adds per order and round --------------------------------
#
# A large ledger (integer orders, few distinct sampling rates, :data:`_TABLE_MIN_ELEMENTS` elements or more) reads each
# round's RDP from one table per sampling rate q and order alpha instead of summing eq. (9). f(u) = log A_alpha(u) =
# (alpha - 1) RDP, as a function of u = 1/sigma^2, is the cumulant generating function of T = (k^2 - k)/2 under the
# binomial weights w_k of eq. (9): f(0) = 0, f is convex, and its derivatives are the cumulants of T under the weights
# tilted by e^{T u}. The table spans [u_lo, u_hi] in coarse cells of _TABLE_COARSE nats of log u, each cut into 2^j equal
# sub-cells in u per order. On a sub-cell of width h the value is the quintic Hermite interpolant p of f, f', f'' at its
# ends, raised by a bound on |f - p| <= max|f^(6)| h^6 / 46080, with f^(6) = kappa_6 bounded over the sub-cell from the
# tilted weights at its ends (:func:`_kappa6_bound`), and by bounds on the rounding of the nodes, the coefficients and
# the evaluation: an upper bound on f, above it by at most _TABLE_TOL of f plus the rounding bounds (1e-15 to 1e-12 of f,
# the most where the terms of large k, whose weights' logs are the least exact, carry f). Where T's weights form
# two clusters (the terms near k = alpha overtake those near k = alpha q: f turns within ~1/alpha^2 of u), the two
# clusters' log-sums are interpolated apart and added at evaluation (log-add-exp). Below u_lo the bound is the chord
# through the origin (f is convex, f(0) = 0), above u_hi it is t_alpha u + log w_alpha + e^{-(alpha-1) u}
# (1 - w_alpha) / w_alpha; both lie within 1e-14 of f there.

#: Bound on the interpolation error of every sub-cell, relative to f at its left end (the smallest value on it).
_TABLE_TOL = 2e-13
#: Width (nats of log u) of the coarse cells, the first level of a table's index.
_TABLE_COARSE = 0.25
#: The bottom of a table: below it the chord through the origin is within this of f (relative).
_TABLE_CHORD = 1e-14
#: The top of a table: above it the terms the asymptote leaves out are below e^-this of f.
_TABLE_TAIL = 60.0
#: Terms below e^-this of their cluster's largest are left out of the moments (their mass is bounded and added).
_TABLE_PRUNE = 120.0
#: Most sub-cells of one coarse cell and order.
_TABLE_MAX_SUB = 2**16
#: A ledger tabulates its curves from this many elements (envs x device classes) on, if it has at most
#: _TABLE_MAX_RATES distinct sampling rates in (0, 1) and only integer orders; a smaller one sums eq. (9) until the
#: series has cost about what a table's build does (0.1-1 s per sampling rate, once per process), then tabulates too
#: (rent, then buy: never more than about twice the cheaper of the two). Measured at DEFAULT_ORDERS, the series costs
#: a round about (5 + elements) x 11 us, counted here as 5 + elements units up to _TABLE_AFTER: a single env's ledger
#: (one element per device class; 1 on the paper's presets) tabulates after 5,000 rounds (10 episodes of T = 500).
_TABLE_MIN_ELEMENTS = 512
_TABLE_AFTER = 30_000
_SERIES_ROUND_UNITS = 5
_TABLE_MAX_RATES = 8
#: Largest values on [0, 1] of the quintic Hermite basis functions of a first derivative (16/81) and of a second
#: (0.01728): how far errors in the nodes' derivatives move the interpolant.
_HERMITE_D1, _HERMITE_D2 = 16.0 / 81.0, 0.01728


@njit(**JIT)
def _cluster_log(u: float, log_w: NDArray, tri: NDArray, k0: int, k1: int, with_low: bool) -> float:
    """The log-sum of a cluster of eq. (9)'s terms at u: log sum_{k0 <= j < k1} w_j e^{t_j u} (``log_w``, ``tri`` as
    :func:`_curve_log_a`: j = k - 2), or with ``with_low`` (k0 = 0) also the k = 0, 1 terms: log(1 - W + S), S =
    sum_j w_j expm1(t_j u), W the weight of the terms from k1 on; all terms (k1 = K) give log A_alpha to full relative
    precision (:func:`_curve_log_a`)."""
    if not with_low:
        top = -math.inf
        for j in range(k0, k1):
            top = max(top, log_w[j] + tri[j] * u)
        s = 0.0
        for j in range(k0, k1):
            s += math.exp(log_w[j] + tri[j] * u - top)
        return top + math.log(s)
    log_a = _curve_log_a(u, log_w[:k1], tri[:k1])  # log1p(S)
    above = 0.0
    for j in range(k1, tri.size):
        above += math.exp(log_w[j])
    return log_a + math.log1p(-above * math.exp(-log_a))


@njit(**JIT)
def _cluster_node(u: float, log_w: NDArray, tri: NDArray, log_low: float, err_w: NDArray, k0: int, k1: int,
                  with_low: bool) -> tuple[float, float, float, float, float, float, float]:
    """A node of a tabulated curve: a cluster's log-sum F at u (:func:`_cluster_log`), its slope and curvature in u
    (mean m and variance of T under the cluster's tilted weights p_j = w_j e^{t_j u - log Z}, and T = 0 with weight
    e^{log_low - log Z} ``with_low``), bounds on the errors of the three, and log Z.

    Errors: each term's log is off by at most d_j = ``err_w`` (its weight's log) + 2 ulp of t_j u (T = 0's weight: 4
    ulp of its log), so F = log Z by their weighted mean sum_j p_j d_j, plus the rounding of its sums; in log1p form
    (``with_low``: 1 + sum_j w_j expm1(t_j u), the 1 exact) by sum_j p_j min(1, t_j u) err_w_j + 2 ulp of u m (as
    expm1(x) <= min(1, x) e^x); m by sum_j p_j min(t_j, |t_j - m|) (|d_j| + mean d) (T >= 0, and an error common to every
    term cancels); the variance likewise with (t_j - m)^2, plus 2 E|T - m| times m's error. The pruned terms (below
    e^-_TABLE_PRUNE of the largest) add their mass.
    """
    peak = -math.inf
    for j in range(k0, k1):
        peak = max(peak, log_w[j] + tri[j] * u)
    top = max(log_low, peak) if with_low else peak
    first, last = k1, k0
    for j in range(k0, k1):
        if log_w[j] + tri[j] * u > peak - _TABLE_PRUNE:
            first, last = min(first, j), j + 1
    z = math.exp(log_low - top) if with_low else 0.0
    for j in range(first, last):
        z += math.exp(log_w[j] + tri[j] * u - top)
    log_z = top + math.log(z)
    p_low = math.exp(log_low - log_z) if with_low else 0.0
    d_low = 4.0 * _U * abs(log_low)
    m, d_mean, d_f = 0.0, p_low * d_low, 0.0
    for j in range(first, last):
        p = math.exp(log_w[j] + tri[j] * u - log_z)
        m += p * tri[j]
        d_mean += p * (err_w[j] + 2.0 * _U * tri[j] * u)
        d_f += p * (min(1.0, tri[j] * u) * err_w[j] if with_low else err_w[j] + 2.0 * _U * tri[j] * u)
    var = p_low * m * m
    e_m_raw, e_m_cov = m * d_mean, p_low * m * (d_low + d_mean)
    e_var = p_low * m * m * (d_low + d_mean)
    for j in range(first, last):
        p = math.exp(log_w[j] + tri[j] * u - log_z)
        dt = tri[j] - m
        dj = err_w[j] + 2.0 * _U * tri[j] * u + d_mean
        var += p * dt * dt
        e_m_raw += p * tri[j] * dj
        e_m_cov += p * abs(dt) * dj
        e_var += p * dt * dt * dj
    f = _cluster_log(u, log_w, tri, k0, k1, with_low)
    terms = (k1 - k0 + 8) * _U
    t_top = tri[k1 - 1]
    pruned = (k1 - k0) * math.exp(peak - _TABLE_PRUNE - log_z)  # the pruned weight
    e_f = d_f + (2.0 * _U * u * m if with_low else 0.0) + terms * abs(f) + pruned * min(1.0, u * t_top)
    e_m = min(e_m_raw, e_m_cov) + terms * m + pruned * t_top
    e_var += 2.0 * math.sqrt(var) * e_m + terms * var + pruned * t_top * t_top
    return f, m, var, e_f, e_m, e_var, log_z


@njit(**JIT)
def _kappa6_bound(a: float, b: float, log_za: float, log_zb: float, m_a: float, m_b: float, log_w: NDArray,
                  tri: NDArray, log_low: float, k0: int, k1: int, with_low: bool) -> float:
    """A bound on max |F^(6)| = |kappa_6| over u in [a, b] for a cluster's log-sum F, from its tilted weights at both ends.

    A weight p_j(u) is log-concave in u (log p_j = log w_j + t_j u - F(u), F convex), so on [a, b] it lies below its
    tangents at both ends: below p_j(a) where t_j <= m_a = F'(a), below p_j(b) where t_j >= m_b, and below where the
    tangents meet in between. With c the middle of [m_a, m_b] (the mean m(u) lies there: F' increases), B_n the sum of
    those bounds times |t_j - c|^n bounds E_u|T - c|^n, and (E_u|T - m(u)|^n)^(1/n) <= B_n^(1/n) + (m_b - m_a)/2
    (Minkowski) bounds the central moments mu_n; |kappa_6| <= mu_6 + 15 mu_4 mu_2 + 10 mu_3^2 + 30 mu_2^3.
    """
    c = 0.5 * (m_a + m_b)
    shift = 0.5 * (m_b - m_a) * (1.0 + 1e-9) + 1e-12 * c
    h = b - a
    bn = np.zeros(7)
    if with_low:  # T = 0 <= m_a: its weight falls on [a, b]
        d = abs(c)
        pw = math.exp(log_low - log_za) * d * d
        for n in range(2, 7):
            bn[n] += pw
            pw *= d
    peak = -math.inf
    for j in range(k0, k1):
        peak = max(peak, max(log_w[j] + tri[j] * a - log_za, log_w[j] + tri[j] * b - log_zb))
    floor = peak - _TABLE_PRUNE
    pruned = 0.0
    for j in range(k0, k1):
        t = tri[j]
        la = log_w[j] + t * a - log_za
        lb = log_w[j] + t * b - log_zb
        if t <= m_a:
            lp = la
        elif t >= m_b:
            lp = lb
        else:
            lp = min(la + (t - m_a) * h, lb + (m_b - t) * h)
        if lp < floor:
            pruned += 1.0
            continue
        d = abs(t - c)
        pw = math.exp(lp) * d * d
        for n in range(2, 7):
            bn[n] += pw
            pw *= d
    span = max(tri[k1 - 1], c)  # |t - c| <= span for every term
    for n in range(2, 7):
        bn[n] += pruned * math.exp(floor) * span**n
    mom = np.zeros(7)
    for n in range(2, 7):
        mom[n] = (bn[n] ** (1.0 / n) + shift) ** n
    return (mom[6] + 15.0 * mom[4] * mom[2] + 10.0 * mom[3] ** 2 + 30.0 * mom[2] ** 3) * (1.0 + 1e-9)


@njit(**JIT)
def _valley(u: float, log_w: NDArray, tri: NDArray, log_low: float) -> int:
    """Where eq. (9)'s terms at u split into two clusters: the first j of the upper one, or 0 if they form one.

    In k, log w_k + t_k u is concave near both ends and convex between (where u exceeds ~4/alpha), so it has at most
    two peaks: walking down from k = alpha, up to the upper peak, down to the valley between, and up again if there is
    a lower peak (the k = 0, 1 terms, T = 0, count as one below k = 2)."""
    j = tri.size - 1
    while j > 0 and log_w[j - 1] + tri[j - 1] * u >= log_w[j] + tri[j] * u:
        j -= 1
    while j > 0 and log_w[j - 1] + tri[j - 1] * u <= log_w[j] + tri[j] * u:
        j -= 1
    if j == 0:
        return 1 if log_low > log_w[0] + tri[0] * u and tri.size > 1 else 0
    return j + 1


@njit(**JIT)
def _hermite_cluster(a: float, b: float, log_w: NDArray, tri: NDArray, log_low: float, err_w: NDArray, k0: int,
                     k1: int, with_low: bool, node_a: tuple, node_b: tuple, out: NDArray) -> tuple[float, float]:
    """The quintic Hermite interpolant in t = (u - a)/(b - a) of a cluster's log-sum on [a, b] from its nodes at the
    ends (:func:`_cluster_node`): its coefficients c_0..c_5 into ``out``, and the bounds on its interpolation error and on
    the rest (the nodes' errors, the coefficients' and the evaluation's rounding (:func:`_quintic`), and where the
    evaluation places u: the sub-cell's ends, u0 + j w, lie within 2 ulp of b, and t within 1 ulp of (u - u0) <= 0.29 u,
    so u within 3 ulp of b, times F'(b))."""
    fa, da, sa, efa, eda, esa, lza = node_a
    fb, db, sb, efb, edb, esb, lzb = node_b
    h = b - a
    interp = _kappa6_bound(a, b, lza, lzb, da, db, log_w, tri, log_low, k0, k1, with_low) * h**6 / 46080.0
    y0, y1, d0, d1, s0, s1 = fa, fb, h * da, h * db, h * h * sa, h * h * sb
    out[0], out[1], out[2] = y0, d0, 0.5 * s0
    out[3] = 10.0 * (y1 - y0) - 6.0 * d0 - 4.0 * d1 - 1.5 * s0 + 0.5 * s1
    out[4] = -15.0 * (y1 - y0) + 8.0 * d0 + 7.0 * d1 + 1.5 * s0 - s1
    out[5] = 6.0 * (y1 - y0) - 3.0 * d0 - 3.0 * d1 - 0.5 * s0 + 0.5 * s1
    nodes = max(efa, efb) + _HERMITE_D1 * h * (eda + edb) + _HERMITE_D2 * h * h * (esa + esb)
    size = 0.0
    for i in range(6):
        size += abs(out[i])
    return interp, nodes + 24.0 * _U * size + 3.0 * _U * b * db


@njit(**JIT)
def _fill_coarse_cell(u0: float, u1: float, n: int, log_w: NDArray, tri: NDArray, log_low: float, err_w: NDArray,
                      coef: NDArray, split: NDArray, at: int, row: int, check: bool) -> int:
    """The n sub-cells of the coarse cell [u0, u1] of one curve: one interpolant of f each, or, where its bound misses
    _TABLE_TOL and the terms form two clusters (:func:`_valley`), one per cluster. Each interpolant's bound is added to
    its constant coefficient (rounded up), so that Horner's value is the upper bound.

    With ``check``: 1 if every sub-cell meets _TABLE_TOL, else 0 (nothing written). Else writes ``split[at + j]`` (0 or
    1) and the coefficient rows from ``row`` on; returns the next free row."""
    k_n = tri.size
    nodes = []
    w = (u1 - u0) / n
    for j in range(n + 1):
        u = u1 if j == n else u0 + j * w
        nodes.append(_cluster_node(u, log_w, tri, log_low, err_w, 0, k_n, True))
    one, lower, upper = np.empty(6), np.empty(6), np.empty(6)
    a = u0
    for j in range(n):
        b = u1 if j == n - 1 else u0 + (j + 1) * w
        f_a = nodes[j][0]
        interp, rest = _hermite_cluster(a, b, log_w, tri, log_low, err_w, 0, k_n, True, nodes[j], nodes[j + 1], one)
        ks = 0
        if not interp <= _TABLE_TOL * f_a:
            ks = _valley(0.5 * (a + b), log_w, tri, log_low)
            if ks > 0:
                i_lo, r_lo = _hermite_cluster(a, b, log_w, tri, log_low, err_w, 0, ks, True,
                                              _cluster_node(a, log_w, tri, log_low, err_w, 0, ks, True),
                                              _cluster_node(b, log_w, tri, log_low, err_w, 0, ks, True), lower)
                i_hi, r_hi = _hermite_cluster(a, b, log_w, tri, log_low, err_w, ks, k_n, False,
                                              _cluster_node(a, log_w, tri, log_low, err_w, ks, k_n, False),
                                              _cluster_node(b, log_w, tri, log_low, err_w, ks, k_n, False), upper)
                interp = max(i_lo, i_hi)
                lower[0] = np.nextafter(lower[0] + (i_lo + r_lo) * (1.0 + 8.0 * _U), np.inf)
                upper[0] = np.nextafter(upper[0] + (i_hi + r_hi) * (1.0 + 8.0 * _U), np.inf)
        if check:
            if not interp <= _TABLE_TOL * f_a:
                return 0
        elif ks > 0:
            coef[row], coef[row + 1] = lower, upper
            split[at + j] = 1
            row += 2
        else:
            one[0] = np.nextafter(one[0] + (interp + rest) * (1.0 + 8.0 * _U), np.inf)
            coef[row] = one
            split[at + j] = 0
            row += 1
        a = b
    return 1 if check else row


def _table_weights(q: float, alpha: int) -> tuple[NDArray, NDArray, float, NDArray]:
    """log w_k (k = 2..alpha) of eq. (9) from exact binomials, t_k = (k^2 - k)/2, log of the k = 0, 1 weight
    (1-q)^(alpha-1) (1 + (alpha-1) q), and bounds on the logs' errors (their rounding, each within an ulp)."""
    k = np.arange(2, alpha + 1)
    log_q, log_p = math.log(q), math.log1p(-q)
    log_c = np.array([math.log(math.comb(alpha, int(i))) for i in k])
    log_w = log_c + k * log_q + (alpha - k) * log_p
    err_w = _U * (np.abs(log_c) + 1.5 * k * abs(log_q) + 1.5 * (alpha - k) * abs(log_p) + np.abs(log_w) + 2.0)
    return log_w, (k * k - k) / 2.0, (alpha - 1) * log_p + math.log1p((alpha - 1) * q), err_w


@dataclass(frozen=True)
class _CurveTable:
    """The tabulated curves of one sampling rate q in (0, 1) at a ledger's integer orders (see this section's comment):
    coarse cells of log u from ``v_lo``, with edges ``edges`` (C + 1,) in u; per coarse cell and order, ``n_sub`` (C, O)
    equal sub-cells from index ``start`` (C, O) of ``cell_rows``, which holds each sub-cell's first row of ``coef``
    times 2, plus 1 where it has two clusters (rows r and r + 1); ``coef`` (R, 6): Horner coefficients of f in t in
    [0, 1], each raised by its sub-cell's bound. ``chord`` (O,): f(u_lo) / u_lo, raised; ``asymptote`` (O, 2): t_alpha and
    log w_alpha (raised) of the bound above the top."""

    v_lo: float
    edges: NDArray
    n_sub: NDArray
    start: NDArray
    cell_rows: NDArray
    coef: NDArray
    chord: NDArray
    asymptote: NDArray


@lru_cache(maxsize=16)
def _curve_table(q: float, orders: tuple[int, ...]) -> _CurveTable | None:
    """The tables of f = log A_alpha at ``orders`` for sampling rate q in (0, 1) (0.1-1 s), or None if a curve would
    need more than _TABLE_MAX_SUB sub-cells in a coarse cell (the ledger then sums the series)."""
    specs = [_table_weights(q, a) for a in orders]
    v_lo, v_hi = math.inf, -math.inf
    for alpha, (log_w, tri, log_low, err_w) in zip(orders, specs):
        _, m0, var0, *_ = _cluster_node(0.0, log_w, tri, log_low, err_w, 0, tri.size, True)
        v_lo = min(v_lo, math.log(_TABLE_CHORD * m0 / var0))
        v_hi = max(v_hi, math.log((_TABLE_TAIL - log_w[-1]) / (alpha - 1)))
    cells = max(1, math.ceil((v_hi - v_lo) / _TABLE_COARSE))
    edges = np.exp(v_lo + _TABLE_COARSE * np.arange(cells + 1))
    n_sub = np.zeros((cells, len(orders)), dtype=np.int64)
    no_rows, no_split = np.empty((1, 6)), np.empty(1, dtype=np.int64)
    for o, (log_w, tri, log_low, err_w) in enumerate(specs):
        n = 1
        for c in range(cells):
            n = max(1, n // 4)  # a curve turns within a few coarse cells: start below the last cell's count
            while not _fill_coarse_cell(edges[c], edges[c + 1], n, log_w, tri, log_low, err_w, no_rows, no_split,
                                        0, 0, True):
                n *= 2
                if n > _TABLE_MAX_SUB:
                    return None
            n_sub[c, o] = n
    start = np.concatenate([[0], np.cumsum(n_sub.ravel())[:-1]]).reshape(n_sub.shape)
    split = np.empty(int(n_sub.sum()), dtype=np.int64)
    coef = np.empty((2 * split.size, 6))
    row = 0
    chord, asymptote = np.empty(len(orders)), np.empty((len(orders), 2))
    for o, (alpha, (log_w, tri, log_low, err_w)) in enumerate(zip(orders, specs)):
        for c in range(cells):
            row = _fill_coarse_cell(edges[c], edges[c + 1], n_sub[c, o], log_w, tri, log_low, err_w, coef, split,
                                    start[c, o], row, False)
        f, _, _, e_f, *_ = _cluster_node(edges[0], log_w, tri, log_low, err_w, 0, tri.size, True)
        chord[o] = (f + e_f) / edges[0] * (1.0 + 8.0 * _U)
        asymptote[o] = tri[-1], log_w[-1] + err_w[-1]
    # sub-cells were filled order by order, coarse cell by coarse cell: the rows follow that order, not ``start``'s
    first_row = np.empty(split.size, dtype=np.int64)
    by_fill = np.concatenate([np.arange(start[c, o], start[c, o] + n_sub[c, o])
                              for o in range(len(orders)) for c in range(cells)])
    first_row[by_fill] = np.concatenate([[0], np.cumsum(1 + split[by_fill])[:-1]])
    return _CurveTable(v_lo, edges, n_sub, start, 2 * first_row + split, coef[:row], chord, asymptote)


@dataclass(frozen=True)
class _LedgerTables:
    """The curve tables of a ledger's sampling rates, stacked for :func:`_table_element`: ``kind`` (G,) per distinct
    rate (0: q = 0, no leakage; 1: q = 1, alpha u / 2 exactly; 2: tabulated), ``group`` (E,) each element's rate, and
    the :class:`_CurveTable` arrays of every rate, concatenated (indices global), coarse cells padded to the most, with
    ``scale`` (G, C, O) = sub-cells per unit of u."""

    kind: NDArray
    group: NDArray
    v_lo: NDArray
    cells: NDArray
    edges: NDArray
    n_sub: NDArray
    scale: NDArray
    start: NDArray
    cell_rows: NDArray
    coef: NDArray
    chord: NDArray
    asymptote: NDArray
    orders: NDArray
    inv_scale: NDArray

    @staticmethod
    def possible(q: NDArray, orders: NDArray) -> bool:
        """Whether tables can serve a ledger over sampling rates ``q`` at ``orders``: integer orders >= 2 and at most
        :data:`_TABLE_MAX_RATES` distinct rates in (0, 1)."""
        rates = np.unique(q.ravel())
        return bool(np.count_nonzero((rates > 0) & (rates < 1)) <= _TABLE_MAX_RATES
                    and np.all(orders == np.round(orders)) and np.all(orders >= 2))

    @classmethod
    def build(cls, q: NDArray, orders: NDArray) -> _LedgerTables | None:
        """The tables of a ledger over sampling rates ``q`` (any shape) at ``orders`` (:meth:`possible` must hold),
        or None where a curve would need too many sub-cells (the series then serves it)."""
        rates, group = np.unique(q.ravel(), return_inverse=True)
        inner = rates[(rates > 0) & (rates < 1)]
        key = tuple(int(a) for a in orders)
        tables = [_curve_table(float(r), key) for r in inner]
        if any(t is None for t in tables):
            return None
        n_o, cells = orders.size, max([t.n_sub.shape[0] for t in tables], default=1)
        g = rates.size
        v_lo, n_cells = np.zeros(g), np.zeros(g, dtype=np.int64)
        edges = np.ones((g, cells + 1))
        n_sub, start = np.ones((g, cells, n_o), dtype=np.int64), np.zeros((g, cells, n_o), dtype=np.int64)
        scale = np.ones((g, cells, n_o))
        chord, asymptote = np.zeros((g, n_o)), np.zeros((g, n_o, 2))
        kind = np.where(rates == 0, 0, np.where(rates == 1, 1, 2))
        cells_at = rows_at = 0
        cell_rows, coefs = [np.zeros(1, dtype=np.int64)], [np.zeros((1, 6))]
        for i, table in zip(np.flatnonzero(kind == 2), tables):
            c = table.n_sub.shape[0]
            v_lo[i], n_cells[i], edges[i, :c + 1] = table.v_lo, c, table.edges
            n_sub[i, :c], start[i, :c] = table.n_sub, table.start + cells_at
            scale[i, :c] = table.n_sub / np.diff(table.edges)[:, None]
            chord[i], asymptote[i] = table.chord, table.asymptote
            cell_rows.append(table.cell_rows + 2 * rows_at)
            coefs.append(table.coef)
            cells_at += table.cell_rows.size
            rows_at += table.coef.shape[0]
        return cls(kind, group.reshape(-1), v_lo, n_cells, edges, n_sub, scale, start, np.concatenate(cell_rows[1:] or
                   cell_rows), np.concatenate(coefs[1:] or coefs), chord, asymptote, orders.astype(float),
                   1.0 / (orders - 1.0) * (1.0 + 4.0 * _U))

    def add(self, totals: NDArray, sigma: NDArray) -> bool:
        """Add one round's RDP at every order to ``totals`` (E, O) for the noise multipliers ``sigma`` (E,); False,
        with ``totals`` untouched, if a noise multiplier is negative, NaN or infinite."""
        kernel = _tables_add_parallel if parallel(sigma.size) else _tables_add_serial
        return kernel(totals, sigma, self.group, self.kind, self.v_lo, self.cells, self.edges, self.n_sub, self.scale,
                      self.start, self.cell_rows, self.coef, self.chord, self.asymptote, self.orders, self.inv_scale)




@njit(**JIT_NO_ALLOC)
def _quintic(coef: NDArray, row: int, t: float) -> float:
    """The quintic of row ``row`` of ``coef`` at t, by Estrin's scheme (depth 4: a quarter faster than Horner's;
    its rounding, ~8 ulp of sum |c_i|, lies within the 24 ulp each interpolant's bound adds)."""
    t2 = t * t
    return (coef[row, 0] + coef[row, 1] * t) + t2 * ((coef[row, 2] + coef[row, 3] * t)
                                                    + t2 * (coef[row, 4] + coef[row, 5] * t))


@njit(**JIT_NO_ALLOC)
def _table_element(e: int, totals: NDArray, sigma: NDArray, group: NDArray, kind: NDArray, v_lo: NDArray,
                   cells: NDArray, edges: NDArray, n_sub: NDArray, scale: NDArray, start: NDArray, cell_rows: NDArray,
                   coef: NDArray, chord: NDArray, asymptote: NDArray, orders: NDArray, inv_scale: NDArray) -> None:
    """Element e's round (noise multiplier sigma[e], rate group[e]) added to totals[e] at every order: RDP = f /
    (alpha - 1) from its rate's table (:class:`_CurveTable`), the chord below it, the asymptote above it; q = 0: 0;
    q = 1: alpha u / 2; sigma = 0: inf."""
    g = group[e]
    if kind[g] == 0:
        return
    s = sigma[e]
    if s == 0.0:
        for o in range(orders.size):
            totals[e, o] = math.inf
        return
    u = 1.0 / (s * s)
    if kind[g] == 1:
        for o in range(orders.size):
            totals[e, o] += orders[o] * u / 2.0
        return
    top = cells[g]
    if u <= edges[g, 0]:
        for o in range(orders.size):
            totals[e, o] += u * chord[g, o] * inv_scale[o]
        return
    if u >= edges[g, top]:
        for o in range(orders.size):
            t_a, log_w = asymptote[g, o, 0], asymptote[g, o, 1]
            lead = t_a * u
            f = lead + log_w + math.exp(-log_w - (orders[o] - 1.0) * u)
            totals[e, o] += (f + 4.0 * _U * (lead + abs(log_w))) * inv_scale[o]
        return
    c = min(max(int((math.log(u) - v_lo[g]) / _TABLE_COARSE), 0), top - 1)
    if u < edges[g, c] and c > 0:
        c -= 1
    elif u >= edges[g, c + 1] and c < top - 1:
        c += 1
    du = u - edges[g, c]
    for o in range(orders.size):
        x = du * scale[g, c, o]
        j = min(int(x), n_sub[g, c, o] - 1)
        t = min(x - j, 1.0)
        code = cell_rows[start[g, c, o] + j]
        f = _quintic(coef, code >> 1, t)
        if code & 1:
            f2 = _quintic(coef, (code >> 1) + 1, t)
            f = (max(f, f2) + math.log1p(math.exp(-abs(f - f2)))) * (1.0 + 4.0 * _U)
        totals[e, o] += f * inv_scale[o]


@njit(**JIT_NO_ALLOC)
def _valid_sigma(sigma: NDArray) -> bool:
    """Whether every noise multiplier is finite and >= 0 (False for NaN)."""
    for e in range(sigma.size):
        if not (0.0 <= sigma[e] < math.inf):
            return False
    return True


@njit(**JIT_NO_ALLOC)
def _tables_add_serial(totals, sigma, group, kind, v_lo, cells, edges, n_sub, scale, start, cell_rows, coef, chord,
                       asymptote, orders, inv_scale):
    """:func:`_table_element` for every element, one after another, if every noise multiplier is finite and >= 0
    (:func:`_valid_sigma`; else nothing and False)."""
    if not _valid_sigma(sigma):
        return False
    for e in range(sigma.size):
        _table_element(e, totals, sigma, group, kind, v_lo, cells, edges, n_sub, scale, start, cell_rows, coef, chord,
                       asymptote, orders, inv_scale)
    return True


@njit(parallel=True, **JIT_NO_ALLOC)
def _tables_add_parallel(totals, sigma, group, kind, v_lo, cells, edges, n_sub, scale, start, cell_rows, coef, chord,
                         asymptote, orders, inv_scale):
    """:func:`_tables_add_serial` over all cores."""
    if not _valid_sigma(sigma):
        return False
    for e in prange(sigma.size):
        _table_element(e, totals, sigma, group, kind, v_lo, cells, edges, n_sub, scale, start, cell_rows, coef, chord,
                       asymptote, orders, inv_scale)
    return True


#: Rounds per evaluation of the ledger (one :func:`rdp_sgm` call each), fewer where their evaluation would exceed
#: _LEDGER_EVAL_BYTES: the accounting evaluates its elements in sub-batches of similar noise, so a round's RDP can
#: differ in its last bits with the rounds evaluated beside it, and a ledger's results would depend on its buffering.
_LEDGER_BLOCK = 128
#: Memory budgets (bytes): one block's evaluation (~ 4 arrays of elements x orders), and the buffer of noise
#: multipliers beyond one block.
_LEDGER_EVAL_BYTES = 2**30
_LEDGER_BUFFER_BYTES = 2**26


def _ledger_sizes(batch: int, n_orders: int, chunk: int) -> tuple[int, int]:
    """``(block, capacity)`` of a ledger over ``batch`` elements: rounds per evaluation, and rounds buffered (``chunk``
    rounded up to whole blocks, within the budgets; at least one block, of at least one round)."""
    round_bytes = 8 * max(batch, 1)
    block = int(max(1, min(_LEDGER_BLOCK, _LEDGER_EVAL_BYTES // (round_bytes * (1 + 4 * n_orders)))))
    blocks = max(1, min(-(-chunk // block), _LEDGER_BUFFER_BYTES // (round_bytes * block)))
    return block, blocks * block


def _refuse_invalid_noise(sigma: NDArray) -> None:
    """ValueError naming the first few noise multipliers that are not finite and >= 0, if any."""
    bad = ~((sigma >= 0) & (sigma < np.inf))
    if bad.any():
        raise ValueError("noise_multiplier must be finite and >= 0 (noise std / L2 sensitivity, in [0, inf)); got "
                         f"{sigma[bad].ravel()[:3]}")


class RDPLedger:
    """Running RDP totals at a grid of orders, batched, composing a different noise multiplier every round.

    A ledger with integer orders and at most :data:`_TABLE_MAX_RATES` distinct sampling rates in (0, 1) adds each
    round at once from tables of the RDP curves (:class:`_CurveTable`, built once per sampling rate and order grid in a
    process, 0.1-1.5 s): a few multiply-adds per element and order, each value a certified upper bound on eq. (9),
    within 1e-12 of it for q in [1e-3, 0.9] (tested against mpmath). A large one (at least
    :data:`_TABLE_MIN_ELEMENTS` elements) does so from its first round; a smaller one sums the series until that has
    cost about a table's build (:data:`_TABLE_AFTER`), then tabulates. Any other
    ledger sums the series (:func:`rdp_sgm`):

    ``record`` is O(1): it writes the round's noise multipliers into a buffer, grown as rounds arrive up to ``chunk``
    rounds; buffered rounds are folded into the totals in blocks of :data:`_LEDGER_BLOCK` consecutive rounds (one
    vectorised :func:`rdp_sgm` call each; fewer where a block's evaluation would exceed :data:`_LEDGER_EVAL_BYTES`)
    when the buffer is full, and the rest when ``rdp`` is read or rows are reset. The blocks do not depend on
    ``chunk``, so neither do the results, to the bit. Memory: the totals, O(batch x orders), and the buffer,
    O(batch x min(rounds, chunk)) within :data:`_LEDGER_BUFFER_BYTES` (at least one block), whatever the number of
    rounds -- no history list (see :func:`_ledger_sizes`).

    Args:
        q: sampling rates, shape ``batch_shape`` (e.g. ``(n_envs, n_classes)``), in [0, 1].
        orders: RDP orders (> 1) kept by the ledger.
        chunk: rounds buffered before folding (at least one block); it changes when the work is done, not the results.
    """

    def __init__(self, q: ArrayLike, orders: Sequence[float] = DEFAULT_ORDERS, chunk: int = 128) -> None:
        self.q = np.asarray(q, dtype=float)
        _validate_q_sigma(self.q, np.ones(()))
        self.orders = np.asarray(ORDERS("orders", orders), dtype=float)
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1; got {chunk}")
        self._block, self._capacity = _ledger_sizes(self.q.size, self.orders.size, chunk)
        self._totals = np.zeros(self.q.shape + (self.orders.size,))
        self._by_element = self._totals.reshape(self.q.size, self.orders.size)  # a view: the totals change in place
        self._pending = np.empty((0,) + self.q.shape)  # grown on demand up to _capacity rounds (the series only)
        self._n = 0
        self._tables: _LedgerTables | None = None
        # units of series work left before the ledger tabulates (None: it never will)
        self._series_left: int | None = _TABLE_AFTER if _LedgerTables.possible(self.q, self.orders) else None
        if self._series_left is not None and self.q.size >= _TABLE_MIN_ELEMENTS:
            self._tabulate()

    def _tabulate(self) -> None:
        """Move to tables from the next round on (the buffered rounds are folded by the series first)."""
        self._fold()
        self._tables = _LedgerTables.build(self.q, self.orders)
        self._series_left = None

    def record(self, noise_multiplier: ArrayLike) -> None:
        """Compose one round: ``noise_multiplier`` (noise std / L2 sensitivity, finite and >= 0) broadcastable to the
        ledger's batch shape."""
        sigma = np.asarray(noise_multiplier, dtype=float)
        if self._series_left is not None:
            self._series_left -= _SERIES_ROUND_UNITS + self.q.size
            if self._series_left < 0:
                self._tabulate()
        if self._tables is not None:
            flat = (sigma if sigma.shape == self.q.shape else np.broadcast_to(sigma, self.q.shape)).reshape(-1)
            if not self._tables.add(self._by_element, flat):  # the kernel checks the noise multipliers first
                _refuse_invalid_noise(sigma)
            return
        _refuse_invalid_noise(sigma)
        if self._n == self._capacity:
            self._fold()
        if self._n == self._pending.shape[0]:
            grown = np.empty((min(self._capacity, max(1, 2 * self._n)),) + self.q.shape)
            grown[: self._n] = self._pending[: self._n]
            self._pending = grown
        self._pending[self._n] = sigma
        self._n += 1

    def _fold(self) -> None:
        """Fold the buffered rounds into the totals, block by block, in order (the capacity is whole blocks, so
        only a read or a reset folds a partial one, whatever ``chunk``)."""
        for start in range(0, self._n, self._block):
            block = self._pending[start:min(start + self._block, self._n)]
            self._totals += rdp_sgm(q=self.q, noise_multiplier=block, orders=self.orders).sum(axis=0)
        self._n = 0

    @property
    def rdp(self) -> NDArray:
        """Total RDP (nats) per batch element and order, shape ``batch_shape + (len(orders),)``."""
        self._fold()
        return self._totals

    def epsilon(self, delta: float) -> tuple[NDArray, NDArray]:
        """(eps, best order) of the totals at ``delta`` via :func:`rdp_to_dp`."""
        return rdp_to_dp(self.rdp, self.orders, delta)

    def reset(self, mask: ArrayLike | None = None) -> None:
        """Zero the totals of the batch elements where ``mask`` is True (all, and the pending rounds, if None).

        With a mask the pending rounds are folded first, as a read would: the other elements keep them."""
        if mask is None:
            self._totals.fill(0.0)
            self._n = 0
        else:
            self._fold()
            self._totals[np.asarray(mask, dtype=bool)] = 0.0
