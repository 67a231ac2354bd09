"""RDP of the Sampled Gaussian Mechanism at integer orders: Lemma 1, eq. (9) of the AdaScale paper, in log space.

Sources
-------
* SGM RDP for integer orders: Lemma 1, eq. (9) of the AdaScale paper, computed in log space, all orders
  at once from one shared set of exponentials per (q, sigma), terms that provably cannot matter skipped; raised by a
  bound on its rounding error (5e-15 of it typically, ~1e-12 where the terms near k = alpha take over, up to 2e-11
  near q = 1), so it is an upper bound, as at fractional orders.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from otagym.accounting.rounding import (_ROUND_U, _SMALLEST, _TERM_U, _UNDERFLOW_ZONE, _order_bound,
                                        _raise_log1p)


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
    bound: NDArray  # (n,) the part of the error bound that depends on the order alone (rounding._order_bound)


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

    Error: log C(alpha, k) and the order's own roundings within :func:`~otagym.accounting.rounding._order_bound`, and
    the rest of each term's log within :data:`~otagym.accounting.rounding._TERM_U` of the magnitudes it is made of
    (``lam_mag`` = |log q| + |log(1-q)| per unit of k, x_k and log(1 - e^-x_k)), weighted by its share of the sum; the
    sum adds K u, the shift and the logarithm :data:`~otagym.accounting.rounding._ROUND_U` of theirs, and the skipped
    terms at most 2 K e^-60 of S.

    Returns:
        ``(log S, bound on |log S - exact|)``, each of shape (orders, elements).
    """
    terms = _kept_terms(lam, lam_mag, u, io)
    out = np.empty((io.orders.size, lam.size))
    share = np.empty_like(out)  # the error of the terms (their magnitudes weighted by their share of S) and the sum
    c_max = io.log_binom.max(axis=1)
    for start, stop in _shared_runs(io, terms, c_max):
        if stop > start:
            _sum_shared(slice(start, stop), io, terms, c_max, out, share)
        else:
            _sum_alone(start, io, terms, out, share)
    n_terms = (io.k[None, :] <= io.orders[:, None]).sum(axis=1)[:, None]
    delta = share + _ROUND_U * np.abs(out) + io.bound[:, None] + n_terms * 2 * math.exp(-_PRUNE_NATS)
    return out, delta


class _KeptTerms(NamedTuple):
    """The terms of eq. (9) that one sub-batch sums (:func:`_kept_terms`); K = max(orders) - 1 values of k."""

    keep: NDArray  # (orders, K) the k whose terms each order sums
    pos: NDArray  # (K,) the row of ``g`` and ``mag`` of each k
    g: NDArray  # (kept k, elements) g_k = k lambda + x_k + log(1 - e^-x_k)
    mag: NDArray  # (kept k, elements) the magnitudes g_k is made of (its rounding: _TERM_U of them)
    lower: NDArray  # (orders,) a lower bound on log S_alpha over the sub-batch
    g_hi: NDArray  # (K,) an upper bound on g_k over the sub-batch


def _kept_terms(lam: NDArray, lam_mag: NDArray, u: NDArray, io: _IntegerOrders) -> _KeptTerms:
    """The g_k of :func:`_log_s_int` for the k that can matter at some order, with their magnitudes; a term whose
    upper bound lies :data:`_PRUNE_NATS` below a lower bound on S_alpha is dropped from that order."""
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
    return _KeptTerms(keep, pos, g, mag, lower, g_hi)


def _shared_runs(io: _IntegerOrders, terms: _KeptTerms, c_max: NDArray) -> Iterator[tuple[int, int]]:
    """The orders in runs ``[start, stop)`` that :func:`_sum_shared` sums together, in order; ``stop == start``:
    order ``start`` alone (:func:`_sum_alone`).

    Consecutive orders whose terms all lie within _SHARED_NATS of one shift per element (max g over their k) and
    one per order (max log C, ``c_max``) are a single matrix product: the binomials C(alpha, k) / max_k C(alpha, k)
    times the shared e^{g_k - shift}. Their sums are >= e^-250 in those units (the term that gave ``lower`` is kept),
    so factors floored at e^-340 change nothing and every product stays a normal float. An order whose own terms span
    more sums them in log space."""
    low_end = (terms.lower - c_max).tolist()
    reach = np.where(terms.keep, terms.g_hi, -np.inf).max(axis=1).tolist()
    start = 0
    while start < io.orders.size:
        stop, lo, hi = start, np.inf, -np.inf
        while stop < io.orders.size and min(lo, low_end[stop]) - max(hi, reach[stop]) >= -_SHARED_NATS:
            lo, hi = min(lo, low_end[stop]), max(hi, reach[stop])
            stop += 1
        yield start, stop
        start = max(stop, start + 1)


def _sum_shared(rows: slice, io: _IntegerOrders, terms: _KeptTerms, c_max: NDArray, out: NDArray,
                share: NDArray) -> None:
    """log S and its error's share of the terms (:func:`_log_s_int`) at the orders ``rows``, as one matrix product
    (:func:`_shared_runs`), into ``out[rows]`` and ``share[rows]``."""
    ks = np.flatnonzero(terms.keep[rows].any(axis=0))
    g = terms.g[terms.pos[ks]]
    shift = g.max(axis=0)
    w = np.exp(io.log_binom[rows, ks] - c_max[rows, None])
    w[w < _SHARED_FLOOR] = 0.0
    v = np.exp(np.maximum(g - shift, _SHARED_LOG_FLOOR))
    total = w @ v
    log_total = np.log(total)
    out[rows] = log_total + shift + c_max[rows, None]
    share[rows] = _TERM_U * (w @ (v * terms.mag[terms.pos[ks]])) / total + _ROUND_U * (
        np.abs(log_total) + 2 * np.abs(shift) + c_max[rows, None])


def _sum_alone(order: int, io: _IntegerOrders, terms: _KeptTerms, out: NDArray, share: NDArray) -> None:
    """log S and its error's share of the terms (:func:`_log_s_int`) at the order of index ``order`` alone, in log
    space, into ``out[order]`` and ``share[order]``."""
    ks = np.flatnonzero(terms.keep[order])
    g = io.log_binom[order, ks, None] + terms.g[terms.pos[ks]]
    top = g.max(axis=0)
    e = np.exp(np.maximum(g - top, _FLOOR))
    total = e.sum(axis=0)
    out[order] = top + np.log(total)
    share[order] = _TERM_U * (e * terms.mag[terms.pos[ks]]).sum(axis=0) / total + _ROUND_U * (
        np.abs(np.log(total)) + 2 * np.abs(top))


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


