"""Certified quintic Hermite interpolants of eq. (9)'s log A_alpha in u = 1/sigma^2, the pieces of the tabulated
curves (:mod:`otagym.accounting.tables`, whose docstring gives the method): a cluster of eq. (9)'s terms, its value,
slope and curvature with bounds on their errors (the nodes), a bound on the sixth cumulant over a sub-cell, and a
coarse cell's sub-cells filled with interpolants raised by their bounds. Compiled (numba) so that a table builds in
0.1-1 s.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

from otagym.accounting.curve import curve_log_a
from otagym.accounting.rounding import _U
from otagym.jit import JIT

#: Bound on the interpolation error of every sub-cell, relative to f at its left end (the smallest value on it).
_TABLE_TOL = 2e-13
#: Terms below e^-this of their cluster's largest are left out of the moments (their mass is bounded and added).
_TABLE_PRUNE = 120.0
#: Largest values on [0, 1] of the quintic Hermite basis functions of a first derivative (16/81) and of a second
#: (0.01728): how far errors in the nodes' derivatives move the interpolant.
_HERMITE_D1, _HERMITE_D2 = 16.0 / 81.0, 0.01728


@njit(**JIT)
def _cluster_log(u: float, log_w: NDArray, tri: NDArray, k0: int, k1: int, with_low: bool) -> float:
    """The log-sum of a cluster of eq. (9)'s terms at u: log sum_{k0 <= j < k1} w_j e^{t_j u} (``log_w``, ``tri`` as
    :func:`~otagym.accounting.curve.curve_log_a`: j = k - 2), or with ``with_low`` (k0 = 0) also the k = 0, 1 terms:
    log(1 - W + S), S = sum_j w_j expm1(t_j u), W the weight of the terms from k1 on; all terms (k1 = K) give log
    A_alpha to full relative precision (:func:`~otagym.accounting.curve.curve_log_a`)."""
    if not with_low:
        top = -math.inf
        for j in range(k0, k1):
            top = max(top, log_w[j] + tri[j] * u)
        s = 0.0
        for j in range(k0, k1):
            s += math.exp(log_w[j] + tri[j] * u - top)
        return top + math.log(s)
    log_a = curve_log_a(u, log_w[:k1], tri[:k1])  # log1p(S)
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
    expm1(x) <= min(1, x) e^x); m by sum_j p_j min(t_j, |t_j - m|) (|d_j| + mean d) (T >= 0, and an error common to
    every term cancels); the variance likewise with (t_j - m)^2, plus 2 E|T - m| times m's error. The pruned terms
    (below e^-_TABLE_PRUNE of the largest) add their mass.
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
    """A bound on max |F^(6)| = |kappa_6| over u in [a, b] for a cluster's log-sum F, from its tilted weights at both
    ends.

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
    ends (:func:`_cluster_node`): its coefficients c_0..c_5 into ``out``, and the bounds on its interpolation error and
    on the rest (the nodes' errors, the coefficients' and the evaluation's rounding
    (:func:`~otagym.accounting.tables._quintic`), and where the evaluation places u: the sub-cell's ends, u0 + j w, lie
    within 2 ulp of b, and t within 1 ulp of (u - u0) <= 0.29 u, so u within 3 ulp of b, times F'(b))."""
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
