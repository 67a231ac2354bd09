"""RDP of the Sampled Gaussian Mechanism at fractional orders: certified upper bounds on the series of Mironov,
Talwar & Zhang, and the chord between integer orders where those are loose.

Sources
-------
* SGM RDP for fractional orders: Mironov, Talwar, Zhang (2019), Section 3.3, the series of Opacus
  (``opacus.accountants.analysis.rdp._compute_log_a_frac``) rearranged to sum A - 1, its alternating tail summed by
  Cohen, Rodriguez Villegas & Zagier (2000), every rounding and truncation error bounded: an upper bound on the exact
  RDP, every order and (q, sigma) on shared passes over the terms; the chord between integer orders (log A is convex
  in the order) where that bound is loose.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray
from scipy import special

from otagym.accounting.curve import _log_a_int
from otagym.accounting.integer import _log_weights, _triangular
from otagym.accounting.rounding import _SMALLEST, _U

#: Terms of the fractional series in the first pass; each further pass takes twice as many, up to _FRAC_CHUNK_MAX.
#: The schedule is the same for every entry, so an entry's value does not depend on the batch around it.
_FRAC_CHUNK = 16
_FRAC_CHUNK_MAX = 256
#: Elements per sub-batch of the fractional series (times the number of fractional orders: the entries of a pass).
_FRAC_SUB_BATCH = 128
#: Floor (nats below the running maximum) of the exponentials of the fractional series; see
#: :data:`~otagym.accounting.integer._FLOOR`. A floored term is off by at most e^-700 of that maximum, which the error
#: bound counts.
_FRAC_FLOOR = -700.0
#: The smallest normal float (the unit roundoff _U and the smallest float _SMALLEST: :mod:`otagym.accounting.rounding`).
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
#: computed values used at most 1/40 of the margin this gives.
_KU = 16 * _U
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


def _rdp_frac(q: NDArray, sigma: NDArray, u: NDArray, alphas: NDArray) -> NDArray:
    """Upper bounds on the RDP (nats) at fractional orders ``alphas`` of flat ``q`` in (0, 1) and finite ``sigma`` > 0
    (``u = 1/sigma^2``), shape (elements, orders): the series (:func:`_rdp_frac_upper`) in sub-batches of
    :data:`_FRAC_SUB_BATCH` elements where sigma lies in :data:`_SERIES_SIGMA`, the chord between integer orders
    (:func:`_chord_upper`) where smaller and that bound is looser than :data:`_FRAC_CHORD`, never above the Gaussian
    mechanism's alpha / (2 sigma^2)."""
    # RDP <= alpha / (2 sigma^2), its value at q = 1 (it is non-decreasing in q); within 2 sigma^2 |log q| /
    # (alpha - 1) of exact for small sigma, and all there is where sigma^2 over- or underflows
    gauss = np.nextafter(alphas / 2 / sigma[:, None] / sigma[:, None] * (1 + 4 * _U), np.inf)
    vals, rel = gauss.copy(), np.zeros_like(gauss)
    series = (sigma >= _SERIES_SIGMA[0]) & (sigma <= _SERIES_SIGMA[1])
    if series.any():
        vals[series], rel[series] = (np.concatenate(parts) for parts in zip(*(
            _rdp_frac_upper(q[series][s:s + _FRAC_SUB_BATCH], sigma[series][s:s + _FRAC_SUB_BATCH], alphas)
            for s in range(0, series.sum(), _FRAC_SUB_BATCH))))
    loose = ~(rel <= _FRAC_CHORD)  # NaN included
    for o in np.flatnonzero(loose.any(axis=0)):
        at = loose[:, o]
        vals[at, o] = np.fmin(vals[at, o], _chord_upper(q[at], u[at], alphas[o]))
    return np.fmin(vals, gauss)


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
    split = _split_point(q, sigma)
    head = np.ceil(alpha)  # the alternating tails start here
    end = head + _CRVZ_TERMS  # ... and the sums stop before here
    sums = _RunningSums.empty(q.size, alpha.size)
    log_c, d_c = np.zeros((2, alpha.size))  # log |C(alpha, i0)| and a bound on its error
    active = np.arange(sums.top.size)
    i0 = passes = 0
    while active.size:
        e, o = sums.element[active], sums.order[active]
        width = int(min(_FRAC_CHUNK << passes, _FRAC_CHUNK_MAX, end[o].max() - i0))  # the last pass: as far as needed
        i = np.arange(i0, i0 + width, dtype=float)
        orders, col = np.unique(o, return_inverse=True)
        lc, dlc = _binomial_logs(alpha[orders, None], i, orders, log_c, d_c)
        sign_c, weight, at_head, used = _tail_weights(i, head[orders, None], col)
        sides = _sides(split, sigma, alpha, _Pass(e, o, orders, col, i), lc, dlc, sign_c, used)
        _accumulate(sums, active, sides, split.minus_first[e], weight, at_head, used)
        done = end[o] <= i0 + width
        _finish(sums, active[done], end, alpha)
        active = active[~done]
        i0 += width
        passes += 1
    return sums.rdp.reshape(q.size, alpha.size), sums.rel.reshape(q.size, alpha.size)


class _SplitPoint(NamedTuple):
    """Where the series of :func:`_rdp_frac_upper` splits, per element: lambda = log(q/p) and z0 = sigma^2 log(p/q)
    + 1/2 (q L = p there), with bounds on their errors, log p, and which side takes the -1 (its binomial weights sum
    to one: the first where q <= 1/2)."""

    lam: NDArray
    d_lam: NDArray
    log_p: NDArray
    z0: NDArray
    dz0: NDArray
    minus_first: NDArray


def _split_point(q: NDArray, sigma: NDArray) -> _SplitPoint:
    """The :class:`_SplitPoint` of sampling rates ``q`` and noise multipliers ``sigma`` (elements)."""
    log_q, log_p = np.log(q), np.log1p(-q)
    middle = (q >= 0.25) & (q <= 0.75)  # lambda = log1p((2q - 1)/(1 - q)) there: 2q - 1 exact, no cancellation
    with np.errstate(divide="ignore"):
        lam = np.where(middle, np.log1p((2 * q - 1) / (1 - q)), log_q - log_p)
    d_lam = _KU * (np.abs(lam) + np.where(middle, 0.0, np.abs(log_q) + np.abs(log_p)))
    s2 = sigma * sigma
    z0 = s2 * -lam + 0.5
    dz0 = s2 * d_lam + _KU * (s2 * np.abs(lam) + np.abs(z0))
    return _SplitPoint(lam, d_lam, log_p, z0, dz0, q <= 0.5)


@dataclass
class _RunningSums:
    """The running sums of :func:`_rdp_frac_upper`, one entry per (element, order), element-major: the sum, its terms'
    error bounds, its rounding and the first magnitudes of the tails, all relative to e^``top``, the running maximum
    (nats) of the logs of the terms and their error bounds; and the results, NaN until an entry's last pass."""

    element: NDArray
    order: NDArray
    top: NDArray
    acc: NDArray
    err: NDArray
    rnd: NDArray
    first: NDArray
    rdp: NDArray
    rel: NDArray

    @classmethod
    def empty(cls, n_elements: int, n_orders: int) -> _RunningSums:
        """The sums of ``n_elements`` elements at ``n_orders`` orders before the first term."""
        element = np.repeat(np.arange(n_elements), n_orders)
        acc, err, rnd, first = np.zeros((4, element.size))
        rdp, rel = np.full((2, element.size), np.nan)
        return cls(element, np.tile(np.arange(n_orders), n_elements), np.full(element.size, -np.inf), acc, err, rnd,
                   first, rdp, rel)


def _binomial_logs(alpha: NDArray, i: NDArray, orders: NDArray, log_c: NDArray,
                   d_c: NDArray) -> tuple[NDArray, NDArray]:
    """log |C(alpha, i)| for this pass's indices ``i`` at the ``orders`` (``alpha``: their values, a column), and
    bounds on their errors, by the recurrence C(alpha, i+1) = C(alpha, i) (alpha - i) / (i + 1) from ``log_c`` and
    ``d_c`` (the first index's), which are moved on to the next pass's first index."""
    step = np.log(np.abs(alpha - i) / (i + 1))  # log |C(alpha, i+1) / C(alpha, i)|
    lc = np.cumsum(np.concatenate([log_c[orders, None], step[:, :-1]], axis=1), axis=1)
    dlc = d_c[orders, None] + np.concatenate(
        [np.zeros((orders.size, 1)), np.cumsum(_KU * (1 + np.abs(step[:, :-1]) + np.abs(lc[:, 1:])), axis=1)], axis=1)
    log_c[orders] = lc[:, -1] + step[:, -1]
    d_c[orders] = dlc[:, -1] + _KU * (1 + np.abs(step[:, -1]) + np.abs(log_c[orders]))
    return lc, dlc


def _tail_weights(i: NDArray, head: NDArray, col: NDArray) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """Per entry (``col``: its order's row of ``head``) and index ``i``: the coefficient's sign (alternating from the
    head on), the weight of the sum (1 before the head, then the CRVZ weights, 0 past them), whether i is the head,
    and whether i lies before the entry's end (its sums and bounds ignore what lies past)."""
    sign_c = np.where(i < head, 1.0, 1.0 - 2.0 * ((i - head) % 2))[col]
    weight = np.where(i < head, 1.0, _CRVZ_WEIGHTS[np.clip(i - head, 0, _CRVZ_TERMS - 1).astype(int)]
                      * (i < head + _CRVZ_TERMS))[col]
    return sign_c, weight, (i == head)[col], (i < head + _CRVZ_TERMS)[col]


class _Side(NamedTuple):
    """One side's terms of a pass (entries x indices): log |term|, its sign, a bound on that log's error, the log of
    the bound on e^y - 1's error (:func:`_frac_moments`), log |c| raised by its error, and the log of the bound on
    the series past the term."""

    ell: NDArray
    sign: NDArray
    d_ell: NDArray
    log_dm: NDArray
    ell_c: NDArray
    log_tail: NDArray


class _Pass(NamedTuple):
    """The entries a pass of :func:`_rdp_frac_upper` sums and where: each entry's element and order, the orders
    among them (``orders``, each entry's row in it ``col``), and the series' indices of the pass."""

    e: NDArray
    o: NDArray
    orders: NDArray
    col: NDArray
    i: NDArray


def _sides(split: _SplitPoint, sigma: NDArray, alpha: NDArray, entries: _Pass, lc: NDArray, dlc: NDArray,
           sign_c: NDArray, used: NDArray) -> list[_Side]:
    """The terms of both sides of the series (A0: t = i, integrated below z0; A1: t = alpha - i, above it) of the
    ``entries`` of a pass (elements ``e``, orders ``o``) at its indices ``i``, from the binomials' logs ``lc``
    (orders x indices, ``col`` each entry's row) and their errors ``dlc``."""
    e, o, orders, col, i = entries
    width = i.size
    elems, row = np.unique(e, return_inverse=True)
    a_o = alpha[orders, None]
    lam_e, d_tlam = split.lam[e, None], (split.d_lam + 2 * _KU * np.abs(split.lam))[e, None]  # per unit of |t|
    base = lc[col] + alpha[o, None] * split.log_p[e, None]
    d_base = dlc[col] + _KU * (np.abs(lc[col]) + alpha[o, None] * np.abs(split.log_p[e, None]) + np.abs(base))
    t1, t1_at = np.unique(a_o - i, return_inverse=True)
    exact = (i == 0) | ((2 * i >= a_o) & (i <= 2 * a_o))  # Sterbenz: alpha - i is exact
    t1_exact = np.zeros(t1.size, bool)
    t1_exact[t1_at.ravel()[exact.ravel()]] = True  # a t shared by several orders is one number: exact for all
    z0, dz0, minus_first = split.z0, split.dz0, split.minus_first
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
        sides.append(_Side(ell, sign_c * sign_m, dc + d_m, log_dm, ell_c, log_tail))
    return sides


def _side_terms(sides: list[_Side], minus_first: NDArray, scale: NDArray, at_head: NDArray,
                used: NDArray) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """Both sides' terms relative to e^``scale`` (per entry): their signed sums per index, their error bounds, the
    first magnitudes of the tails (at the head), and which entries' bounds are lost (a logarithm off by a nat)."""
    pairs = np.zeros(at_head.shape)
    errs = np.zeros(at_head.shape)
    heads = np.zeros(at_head.shape[0])
    lost = np.zeros(at_head.shape[0], bool)
    hit = np.flatnonzero(at_head.any(axis=1))
    for (ell, sgn, d_ell, log_dm, ell_c, log_tail), minus in zip(sides, (minus_first, ~minus_first)):
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
    return pairs, errs, heads, lost


def _accumulate(sums: _RunningSums, active: NDArray, sides: list[_Side], minus_first: NDArray, weight: NDArray,
                at_head: NDArray, used: NDArray) -> None:
    """Add a pass's terms (:func:`_sides`) to the running sums of the ``active`` entries, rescaled to the new
    running maximum, with their error bounds and rounding."""
    new_top = np.maximum(sums.top[active], np.max([np.maximum(s[0], s[3]).max(axis=1) for s in sides], axis=0))
    scale = np.where(np.isfinite(new_top), new_top, 0.0)
    carry = np.exp(sums.top[active] - scale)
    pairs, errs, heads, lost = _side_terms(sides, minus_first, scale, at_head, used)
    pairs *= weight
    partial = np.cumsum(pairs, axis=1)
    carried = sums.acc[active] * carry
    sums.acc[active] = partial[:, -1] + carried
    # rounding: u |result| per addition and product (sides, weights and their own rounding, running sums, carry)
    sums.rnd[active] = sums.rnd[active] * carry + _U * (3 * np.abs(pairs).sum(axis=1)
                                                        + (np.abs(partial) * used).sum(axis=1)
                                                        + np.abs(sums.acc[active]) + 2 * np.abs(carried))
    sums.err[active] = np.where(lost, np.inf, sums.err[active] * carry + (errs * weight).sum(axis=1))
    sums.first[active] = sums.first[active] * carry + heads
    sums.top[active] = new_top


def _finish(sums: _RunningSums, fin: NDArray, end: NDArray, alpha: NDArray) -> None:
    """The results of the entries ``fin``, whose sums are complete: the sum raised by its error bounds, and how far
    that lies above the sum itself (relative)."""
    a_fin = alpha[sums.order[fin]]
    n_terms = 2 * end[sums.order[fin]]  # the sums of positive bounds are themselves within n_terms u
    bound = ((sums.err[fin] + sums.rnd[fin] + sums.first[fin] * _CRVZ_ERROR + 4 * n_terms * np.exp(_FRAC_FLOOR))
             * (1 + (n_terms + 8) * 2 * _U))
    upper = sums.acc[fin] + bound
    sums.rdp[fin] = np.where(upper > 0, np.nextafter(_log1p_over(sums.top[fin], upper, a_fin) * (1 + 16 * _U), np.inf),
                             np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        sums.rel[fin] = np.where(sums.acc[fin] > 0,
                                 sums.rdp[fin] / _log1p_over(sums.top[fin], sums.acc[fin], a_fin) - 1, np.inf)
    sums.rel[fin[sums.rdp[fin] < _TINY]] = 0.0  # a bound below the normal floats: nothing to tighten


def _chord_upper(q: NDArray, u: NDArray, alpha: float) -> NDArray:
    """Upper bound on the RDP at a fractional order from the integer orders n = floor(alpha) and n + 1 (eq. 9).

    log A_alpha = (alpha - 1) RDP_alpha is convex in alpha (the cumulant generating function of the privacy loss) and
    log A_1 = 0, so it lies below its chord between n and n + 1 (for alpha < 2 this is RDP_2, the bound of monotonicity
    in the order). Each log A_n is an upper bound already (:func:`~otagym.accounting.curve._log_a_int`, element by
    element, so that the value does not depend on the batch).
    """
    n = float(np.floor(alpha))
    log_q, log_p = np.log(q), np.log1p(-q)

    def log_a(k: int) -> NDArray:
        return np.concatenate([_log_a_int(_log_weights(k, log_q[s:s + 256], log_p[s:s + 256]), _triangular(k, 1),
                                          u[s:s + 256]) for s in range(0, q.size, 256)])

    low = log_a(int(n)) if n >= 2 else 0.0
    chord = ((n + 1 - alpha) * low + (alpha - n) * log_a(int(n) + 1)) / (alpha - 1) * (1 + 16 * _U)
    return np.nextafter(chord + 4 * (n + 2) * _SMALLEST, np.inf)  # subnormal values are off by ulps, not by u

