"""Privacy accounting: pure, array-first functions and a thin running ledger.

Everything here is batched: ``q`` and ``noise_multiplier`` broadcast against each other (any leading shape, e.g.
envs x devices), and ``orders`` adds a trailing axis when it is a sequence.

Sources
-------
* SGM RDP for integer orders: Lemma 1, eq. (9) of the AdaScale paper (seed 000), computed in log space, all orders
  at once from one shared set of exponentials per (q, sigma), terms that provably cannot matter skipped.
* SGM RDP for fractional orders: Mironov, Talwar, Zhang (2019), Section 3.3, the series of Opacus
  (``opacus.accountants.analysis.rdp._compute_log_a_frac``) with the same terms and stopping point, every order and
  (q, sigma) on one shared pass over the terms, summed in linear space (closer to the exact series than Opacus's
  term-by-term log-space sum where its alternating tail cancels).
* RDP -> (eps, delta)-DP: eq. (6) of the AdaScale paper (Balle et al. 2020, Thm. 21), minimised over orders.
* Gaussian privacy-loss tail bound ``R_dp(eps, delta)``: appendix of seed 004 (Liu-Simeone style).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

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

#: Terms past alpha after which the fractional series gives up. Near q = 1/2 its tail decays only polynomially,
#: ~i^-(alpha+1), and Opacus's loop (no cap) runs ~6e5 terms at alpha = 1.25 to reach e^-30; beyond 1e6 we bound.
_FRAC_EXTRA_TERMS = 1_000_000

_LOG_HALF = float(np.log(0.5))
_LOG_TWO = float(np.log(2.0))


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


def _log_binom(n: ArrayLike, k: ArrayLike) -> NDArray:
    """log C(n, k) for real n >= k >= 0 via log-gamma (exact to rounding, no overflow)."""
    n = np.asarray(n, dtype=float)
    k = np.asarray(k, dtype=float)
    return special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)


def _log_weights(alpha: int, log_q: NDArray, log_1mq: NDArray) -> NDArray:
    """log of the binomial weights C(alpha,k) q^k (1-q)^(alpha-k) for k = 2..alpha, k on a leading axis."""
    k = np.arange(2, alpha + 1, dtype=float).reshape((-1,) + (1,) * np.ndim(log_q))
    return _log_binom(alpha, k) + k * log_q + (alpha - k) * log_1mq


def _triangular(alpha: int, ndim: int) -> NDArray:
    """(k^2 - k) / 2 for k = 2..alpha, shaped to broadcast on a leading axis over ``ndim`` trailing axes."""
    k = np.arange(2, alpha + 1, dtype=float)
    return ((k * k - k) / 2).reshape((-1,) + (1,) * ndim)


def _log_a_int(log_w: NDArray, tri: NDArray, u: NDArray) -> NDArray:
    """log A_alpha of eq. (9) for an integer order, from ``u = 1/sigma^2 >= 0`` (``inf`` -> inf).

    Since the binomial weights sum to one, A = 1 + sum_{k>=2} w_k expm1(tri_k u) with tri_k = (k^2-k)/2, so
    log A = log1p(S) with S a sum of non-negative terms: no cancellation, full relative precision even when the
    RDP is 1e-15 (the plain log-sum-exp of eq. (9) loses it). k is the leading axis, so the reductions are fast.
    S is summed in linear space where every tri_k u <= 30 (no overflow possible), else in log space; the choice is
    made per element, so an element's value does not depend on the batch around it.
    """
    x = tri * u
    linear = x.max(axis=0, initial=0.0) <= 30.0  # x has every axis of the result (u's, after k)
    if linear.all():
        return np.log1p((np.exp(log_w) * np.expm1(x)).sum(axis=0))
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        terms = log_w + (x + np.log(-np.expm1(-x)))  # log expm1(x), stable for all x >= 0
        top = terms.max(axis=0)
        top = np.where(np.isfinite(top), top, 0.0)
        log_a = np.logaddexp(0.0, top + np.log(np.exp(terms - top).sum(axis=0)))
        if linear.any():
            log_a = np.where(linear, np.log1p((np.exp(log_w) * np.expm1(np.minimum(x, 30.0))).sum(axis=0)), log_a)
    return log_a


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


@lru_cache(maxsize=16)
def _integer_orders(orders: tuple[int, ...]) -> _IntegerOrders:
    """The tables of :class:`_IntegerOrders` for ascending distinct integer ``orders`` >= 2."""
    a = np.asarray(orders, dtype=float)
    k = np.arange(2, orders[-1] + 1, dtype=float)
    with np.errstate(invalid="ignore"):
        log_binom = np.where(k <= a[:, None], _log_binom(a[:, None], k), -np.inf)
    lb_k = np.stack([np.zeros(a.size, dtype=int), a.astype(int) - 2], axis=1)
    return _IntegerOrders(a, k, (k * k - k) / 2, log_binom, lb_k)


def _log_s_int(lam: NDArray, u: NDArray, io: _IntegerOrders) -> NDArray:
    """log S_alpha = log(A_alpha - 1) - alpha log(1-q) of eq. (9) at every integer order, for one sub-batch.

    With lambda = log(q/(1-q)), x_k = u (k^2-k)/2 and u = 1/sigma^2, and the k = 0, 1 terms of eq. (9) taken out
    (the binomial weights sum to one):  A_alpha = 1 + (1-q)^alpha S_alpha,  S_alpha = sum_{k=2}^{alpha} C(alpha,k)
    e^{g_k},  g_k = k lambda + x_k + log(1 - e^{-x_k}).  The g_k are shared by every order (one set per element, at
    most max(orders) - 1 exponentials), and no term of S is subtracted, so S keeps full relative precision even
    where the RDP is 1e-15.

    Terms that cannot matter are not computed: over the sub-batch, log C(alpha,k) + k lambda + x_k at (max lambda,
    max u) bounds a term from above, and the exact terms at k = 2 and k = alpha at (min lambda, min u) bound S_alpha
    from below (both increase with lambda and u); a term whose bound lies :data:`_PRUNE_NATS` below is dropped. For
    the noise of a training run most orders keep a handful of terms near k = alpha or near k = 2.

    Returns:
        log S, shape (orders, elements).
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
    g[low] += np.log(-np.expm1(-x[low]))
    pos = np.cumsum(keep.any(axis=0)) - 1  # row of g for each k
    out = np.empty((io.orders.size, lam.size))

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
            out[rows] = np.log(w @ v) + shift + c_max[rows, None]
        else:
            ks = np.flatnonzero(keep[start])
            terms = io.log_binom[start, ks, None] + g[pos[ks]]
            top = terms.max(axis=0)
            out[start] = top + np.log(np.exp(np.maximum(terms - top, _FLOOR)).sum(axis=0))
            stop = start + 1
        start = stop
    return out


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
    lam = np.log(q) - log_1mq
    perm, cuts = _sub_batches(lam, u)
    lam, u, log_1mq = lam[perm], u[perm], log_1mq[perm]
    by_order = np.empty((uniq.size, q.size))  # (orders, sorted elements): sub-batches are contiguous column blocks
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        log_s = _log_s_int(lam[lo:hi], u[lo:hi], io) + io.orders[:, None] * log_1mq[lo:hi]
        by_order[:, lo:hi] = np.where(log_s > 37.0, log_s, np.log1p(np.exp(np.minimum(log_s, 37.0))))  # log(1 + S)
    by_order /= (io.orders - 1)[:, None]
    out = np.empty((q.size, orders.size))
    out[perm] = by_order[inverse].T
    return out


#: Terms of the fractional series in the first pass; each further pass takes twice as many, up to _FRAC_CHUNK_MAX.
#: The schedule is the same for every entry, so an entry's value does not depend on the batch around it.
_FRAC_CHUNK = 16
_FRAC_CHUNK_MAX = 256
#: Elements per sub-batch of the fractional series (times the number of fractional orders: the entries of a pass).
_FRAC_SUB_BATCH = 128
#: Floor (nats below the running maximum) of the exponentials of the fractional series; see :data:`_FLOOR`.
_FRAC_FLOOR = -700.0


def _frac_coefficients(alpha: NDArray, i: NDArray) -> tuple[NDArray, NDArray]:
    """log |C(alpha, i)| and sign C(alpha, i), shape (orders, terms), for real alpha > 1 and integer i >= 0.

    ``binom`` where it is finite (Opacus's precision, which the alternating tail needs), log-gamma where it overflows
    (large orders); the sign is that of Gamma(alpha - i + 1).
    """
    a = alpha[:, None]
    with np.errstate(divide="ignore", over="ignore"):
        log_coef = np.log(np.abs(special.binom(a, i)))
    huge = ~np.isfinite(log_coef)
    if huge.any():
        log_coef[huge] = _log_binom(*(arr[huge] for arr in np.broadcast_arrays(a, i)))
    return log_coef, special.gammasgn(a - i + 1)


def _log_a_frac_batch(q: NDArray, sigma: NDArray, alpha: NDArray) -> NDArray:
    """log A_alpha at fractional orders (Mironov, Talwar, Zhang 2019, Sec. 3.3), shape (elements, orders).

    The series of Opacus's ``_compute_log_a_frac``: A = A0 + A1 with, for i = 0, 1, ... and j = alpha - i,
    A0 = sum_i C(alpha,i) q^i (1-q)^j e^{(i^2-i)/(2 sigma^2)} erfc((i - z0)/(sqrt2 sigma))/2,
    A1 = sum_i C(alpha,i) q^j (1-q)^i e^{(j^2-j)/(2 sigma^2)} erfc((z0 - j)/(sqrt2 sigma))/2,
    z0 = sigma^2 log(1/q - 1) + 1/2. Every (element, order) entry runs on the same i, in passes of 16, 32, ... terms;
    with lambda = log(q/(1-q)) a term is log C(alpha,i) + alpha log(1-q) + G(t), t = i in A0 and t = j in A1,
    G(t) = t lambda + (t^2-t)/(2 sigma^2) + log(erfc(-+(z0 - t)/(sqrt2 sigma))/2), computed once per element and
    distinct t (Opacus's grid: 258 distinct j for its 90 fractional orders x 16 terms). Each entry keeps exactly the
    terms of the sequential loop: it stops after the first i with both terms below e^-30 *and* i > alpha (Opacus
    stops at the first such pair, which for large sigma is already i = 0 and returns a negative RDP: q = 0.3,
    sigma = 50, alpha = 100.5 gave -0.36 where the neighbouring integer orders give 0.0018; past alpha the binomial
    bulk is summed and the terms only decay). The terms are summed in linear space relative to a running maximum. An entry
    whose partial sum goes negative (the alternating tail lost precision: q near the smallest float; Opacus raises)
    or that has not stopped ``_FRAC_EXTRA_TERMS`` terms past alpha gets NaN, which the caller bounds.
    """
    log_1mq = np.log1p(-q)
    lam = np.log(q) - log_1mq
    z0 = sigma**2 * np.log(1 / q - 1) + 0.5
    sqrt2_sigma = np.sqrt(2) * sigma
    two_s2 = 2 * sigma**2

    def g(e: NDArray, t: NDArray, side: float) -> NDArray:
        """G(t) at the elements ``e`` (rows) and the values ``t`` (columns); ``side`` is +1 in A0, -1 in A1."""
        ee = e[:, None]
        log_erfc = _LOG_TWO + special.log_ndtr(side * ((z0[ee] - t) / sqrt2_sigma[ee]) * 2**0.5)
        return t * lam[ee] + (t * t - t) / two_s2[ee] + (_LOG_HALF + log_erfc)

    n_o = alpha.size
    e_all = np.repeat(np.arange(q.size), n_o)  # entries: element-major
    o_all = np.tile(np.arange(n_o), q.size)
    top = np.full((2, e_all.size), -np.inf)  # running maximum of the included terms of A0, A1 (nats)
    acc = np.zeros((2, e_all.size))  # their sum / e^top
    result = np.full(e_all.size, np.nan)
    active = np.arange(e_all.size)
    i0 = passes = 0
    while active.size:
        width = min(_FRAC_CHUNK << passes, _FRAC_CHUNK_MAX)  # slow tails take longer strides
        i = np.arange(i0, i0 + width, dtype=float)
        e, o = e_all[active], o_all[active]
        elems, row = np.unique(e, return_inverse=True)
        orders, col = np.unique(o, return_inverse=True)
        log_coef, sign = _frac_coefficients(alpha[orders], i)
        t1, t1_at = np.unique(alpha[orders, None] - i, return_inverse=True)
        s = np.empty((2, active.size, width))
        base = log_coef[col] + alpha[o, None] * log_1mq[e, None]
        np.add(base, g(elems, i, 1.0)[row], out=s[0])
        np.add(base, g(elems, t1, -1.0)[row[:, None], t1_at.reshape(orders.size, width)[col]], out=s[1])
        al = alpha[o, None]
        stop = np.maximum(s[0], s[1]) < -30
        if i0 <= alpha.max():
            stop &= i > al
        slow = i > al + _FRAC_EXTRA_TERMS if i[-1] > alpha.min() + _FRAC_EXTRA_TERMS else np.zeros_like(stop)
        stop |= slow
        stopped = stop.any(axis=1)
        first = np.where(stopped, stop.argmax(axis=1), width - 1)  # the entry's last term in this pass
        include = np.arange(width) <= first[:, None]
        ok = ~slow[np.arange(active.size), first]
        new_top = np.maximum(top[:, active], s.max(axis=2, where=include, initial=-np.inf))
        scale = np.where(np.isfinite(new_top), new_top, 0.0)
        partial = s - scale[..., None]  # becomes the running sums, in place; read up to `first` only
        np.maximum(partial, _FRAC_FLOOR, out=partial)
        with np.errstate(over="ignore"):  # terms past `first` may exceed the scale: never read
            np.exp(partial, out=partial)
        partial *= sign[col]
        np.cumsum(partial, axis=2, out=partial)
        partial += (acc[:, active] * np.exp(top[:, active] - scale))[..., None]
        ok &= partial.min(axis=(0, 2), where=include, initial=0.0) >= 0  # the sequential sum went negative
        acc[:, active], top[:, active] = partial[:, np.arange(active.size), first], new_top
        done = stopped | ~ok
        fin = active[done]
        with np.errstate(divide="ignore"):
            log_a = np.logaddexp(top[0, fin] + np.log(acc[0, fin]), top[1, fin] + np.log(acc[1, fin]))
        result[fin] = np.where(ok[done], log_a, np.nan)
        active = active[~done]
        i0 += width
        passes += 1
    return result.reshape(q.size, n_o)


def rdp_sgm(*, q: ArrayLike, noise_multiplier: ArrayLike, orders: ArrayLike) -> NDArray:
    """RDP of one round of the Sampled Gaussian Mechanism, batched.

    Integer orders use eq. (9) (Lemma 1 of the AdaScale paper), all orders from one shared set of exponentials per
    element (:func:`_log_s_int`); fractional orders use the series of Mironov, Talwar & Zhang (2019) with Opacus's
    terms, every order and element on shared passes (:func:`_log_a_frac_batch`). Edge cases follow Opacus:
    ``q == 0`` -> 0; ``noise_multiplier == 0`` -> inf; ``q == 1`` -> alpha / (2 sigma^2); ``noise_multiplier == inf`` -> 0.

    Args:
        q: Poisson sampling rate(s) in [0, 1].
        noise_multiplier: noise std / L2 sensitivity (dimensionless), >= 0, ``inf`` allowed.
        orders: a scalar order (> 1) or a sequence of orders (adds a trailing axis to the result).

    Returns:
        RDP in nats, shape ``broadcast(q, noise_multiplier).shape (+ (len(orders),))``; never NaN: where the
        fractional series loses precision (its alternating tail, for q near the smallest float; Opacus raises) or
        does not converge within ``_FRAC_EXTRA_TERMS`` terms past alpha, the RDP at ceil(alpha) is returned, an
        upper bound since RDP is non-decreasing in the order.
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
    out[full_q] = orders_arr[None, :] * u[full_q, None] / 2
    # 1/sigma^2 overflowing to inf (sigma < ~1e-154) is "no privacy" too.
    overflow = generic & np.isinf(u)
    out[overflow] = np.inf
    generic &= ~overflow

    if generic.any():
        g_q, g_s, g_u = qf[generic], sf[generic], u[generic]
        is_int = orders_arr == np.round(orders_arr)
        if is_int.all():
            res = _rdp_int(g_q, g_u, orders_arr)
        else:
            res = np.empty((g_q.size, orders_arr.size))
            if is_int.any():
                res[:, is_int] = _rdp_int(g_q, g_u, orders_arr[is_int])
        frac_idx = np.flatnonzero(~is_int)
        if frac_idx.size:
            alphas = orders_arr[frac_idx]
            log_a = np.concatenate([_log_a_frac_batch(g_q[s:s + _FRAC_SUB_BATCH], g_s[s:s + _FRAC_SUB_BATCH], alphas)
                                    for s in range(0, g_q.size, _FRAC_SUB_BATCH)])
            vals = log_a / (alphas - 1)
            for o in np.flatnonzero(~np.isfinite(vals).all(axis=0)):  # RDP is non-decreasing in alpha: ceil(alpha)
                at = ~np.isfinite(vals[:, o])  # bounds it from above where the series failed
                vals[at, o] = _rdp_int(g_q[at], g_u[at], np.ceil(alphas[o:o + 1]))[:, 0]
            res[:, frac_idx] = vals
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


# --- Gaussian privacy-loss tail bound (seed 004) ---------------------------------------------------------------


def tail_bound_c_inverse(delta: ArrayLike) -> NDArray:
    """C^{-1}(1/delta) where C(x) = sqrt(pi) x exp(x^2) (seed 004), by Newton's method on log C, batched."""
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
    """R_dp(eps, delta) = (sqrt(eps + c^2) - c)^2 with c = C^{-1}(1/delta) (seed 004, last display).

    A sequence of Gaussian mechanisms whose per-round ratios r_t = sensitivity / noise std satisfy
    ``sum_t r_t^2 / 2 <= R_dp(eps, delta)`` is (eps, delta)-DP. The ``/2`` is the mean of the privacy loss
    (sum r_t^2 / 2) and follows from the appendix's definition q = (eps - sum r^2/2) / sqrt(2 sum r^2); SPEC §4 writes
    ``sum r_t^2 <= R_dp``, which is the same statement for the paper's sqrt(2)-scaled ratio and twice as conservative
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
    log1p-of-a-sum as :func:`rdp_sgm` (one implementation, :func:`_log_a_int`). Used by the environments
    (per-round leakage) and by the policies (objective and derivative of per-round problems such as eq. (30)).

    Args:
        q: sampling rates, shape ``(C,)`` (one per device class), in (0, 1].
        order: integer RDP order alpha >= 2.
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
        self._log_w = np.where((q_arr == 1)[None, :], np.where(k == self.order, 0.0, -np.inf), log_w)  # (K, C)
        self._tri = _triangular(self.order, 0)  # (K,)
        # the weight of k = 0, 1 (tri = 0): (1-q)^alpha + alpha q (1-q)^(alpha-1), without cancellation
        self._low_mass = (1.0 - q_arr) ** (self.order - 1) * (1.0 + (self.order - 1) * q_arr)

    def _shaped(self, u: NDArray) -> tuple[NDArray, NDArray]:
        extra = (1,) * (u.ndim - 1)
        return (self._log_w.reshape(self._log_w.shape[:1] + extra + self._log_w.shape[1:]),
                self._tri.reshape((-1,) + (1,) * u.ndim))

    def rdp(self, u: ArrayLike) -> NDArray:
        """RDP (nats) at ``u = 1/sigma^2 >= 0``; last axis = classes. ``u = inf`` (no noise) -> inf."""
        u_arr = np.asarray(u, dtype=float)
        log_w, tri = self._shaped(u_arr)
        return _log_a_int(log_w, tri, u_arr) / (self.order - 1)

    def _tri_moments(self, u: NDArray) -> tuple[NDArray, NDArray]:
        """E_w[tri] and E_w[tri^2] under the weights w_k e^{tri_k u} / A_alpha of eq. (9) (k = 0, 1 have tri = 0).

        One set of exponentials e_k = e^{log w_k + tri_k u - top} serves both and the normaliser: A e^-top =
        (1 - sum_{k>=2} w_k) e^-top + sum_k e_k, a sum of non-negative terms (no cancellation); top >= 0 is the
        largest exponent, so nothing overflows."""
        log_w, tri = self._shaped(u)
        terms = log_w + tri * u
        top = np.maximum(terms.max(axis=0), 0.0)
        e = np.exp(terms - top)
        te = tri * e
        norm = self._low_mass * np.exp(-top) + e.sum(axis=0)
        return te.sum(axis=0) / norm, (tri * te).sum(axis=0) / norm

    def slope_and_curvature(self, u: ArrayLike) -> tuple[NDArray, NDArray]:
        """First and second derivatives of the RDP in u (finite u): E[tri]/(alpha-1) and Var[tri]/(alpha-1)."""
        m1, m2 = self._tri_moments(np.asarray(u, dtype=float))
        return m1 / (self.order - 1), np.maximum(m2 - m1 * m1, 0.0) / (self.order - 1)

    def slope(self, u: ArrayLike) -> NDArray:
        """d RDP / d u at finite ``u`` (same shape): the tri-weighted mean of eq. (9)'s terms, over alpha - 1."""
        return self._tri_moments(np.asarray(u, dtype=float))[0] / (self.order - 1)


class RDPLedger:
    """Running RDP totals at a grid of orders, batched, composing a different noise multiplier every round.

    ``record`` is O(1): it writes the round's noise multipliers into a fixed, preallocated buffer of ``chunk``
    rounds; the buffer is folded into the totals (one vectorised :func:`rdp_sgm` call) when it fills or when
    ``rdp`` is read. Memory is O(batch x (orders + chunk)) whatever the number of rounds -- no history list.

    Args:
        q: sampling rates, shape ``batch_shape`` (e.g. ``(n_envs, n_classes)``), in [0, 1].
        orders: RDP orders (> 1) kept by the ledger.
        chunk: rounds buffered before folding.
    """

    def __init__(self, q: ArrayLike, orders: Sequence[float] = DEFAULT_ORDERS, chunk: int = 128) -> None:
        self.q = np.asarray(q, dtype=float)
        _validate_q_sigma(self.q, np.ones(()))
        self.orders = np.asarray(ORDERS("orders", orders), dtype=float)
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1; got {chunk}")
        self._totals = np.zeros(self.q.shape + (self.orders.size,))
        self._pending = np.full((chunk,) + self.q.shape, np.inf)  # inf noise == no leakage
        self._n = 0

    def record(self, noise_multiplier: ArrayLike) -> None:
        """Compose one round: ``noise_multiplier`` broadcastable to the ledger's batch shape."""
        if self._n == self._pending.shape[0]:
            self._flush()
        self._pending[self._n] = noise_multiplier
        self._n += 1

    def _flush(self) -> None:
        if self._n:
            pend = self._pending[: self._n]
            self._totals += rdp_sgm(q=self.q, noise_multiplier=pend, orders=self.orders).sum(axis=0)
            pend.fill(np.inf)
            self._n = 0

    @property
    def rdp(self) -> NDArray:
        """Total RDP (nats) per batch element and order, shape ``batch_shape + (len(orders),)``."""
        self._flush()
        return self._totals

    def epsilon(self, delta: float) -> tuple[NDArray, NDArray]:
        """(eps, best order) of the totals at ``delta`` via :func:`rdp_to_dp`."""
        return rdp_to_dp(self.rdp, self.orders, delta)

    def reset(self, mask: ArrayLike | None = None) -> None:
        """Zero the totals (and pending rounds) of the batch elements where ``mask`` is True (all if None)."""
        if mask is None:
            self._totals.fill(0.0)
            self._pending.fill(np.inf)
            self._n = 0
        else:
            m = np.asarray(mask, dtype=bool)
            self._totals[m] = 0.0
            self._pending[:, m] = np.inf
