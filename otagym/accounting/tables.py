"""Tabulated RDP curves: a large ledger's few multiply-adds per order and round.

Sources
-------
* A large ledger's rounds at integer orders: tables of eq. (9) per sampling rate and order, quintic Hermite
  interpolants in u = 1/sigma^2 raised by certified bounds on their error (below; docs/speed.md): upper bounds on
  eq. (9), within 1e-12 of it.

Method
------
A large ledger (integer orders, few distinct sampling rates, :data:`~otagym.accounting.ledger._TABLE_MIN_ELEMENTS`
elements or more) reads each round's RDP from one table per sampling rate q and order alpha instead of summing eq. (9).
f(u) = log A_alpha(u) = (alpha - 1) RDP, as a function of u = 1/sigma^2, is the cumulant generating function of T =
(k^2 - k)/2 under the binomial weights w_k of eq. (9): f(0) = 0, f is convex, and its derivatives are the cumulants of T
under the weights tilted by e^{T u}. The table spans [u_lo, u_hi] in coarse cells of _TABLE_COARSE nats of log u, each
cut into 2^j equal sub-cells in u per order. On a sub-cell of width h the value is the quintic Hermite interpolant p of
f, f', f'' at its ends, raised by a bound on |f - p| <= max|f^(6)| h^6 / 46080, with f^(6) = kappa_6 bounded over the
sub-cell from the tilted weights at its ends (:func:`~otagym.accounting.interpolation._kappa6_bound`), and by bounds on
the rounding of the nodes, the coefficients and the evaluation: an upper bound on f, above it by at most _TABLE_TOL of f
plus the rounding bounds (1e-15 to 1e-12 of f, the most where the terms of large k, whose weights' logs are the least
exact, carry f). Where T's weights form two clusters (the terms near k = alpha overtake those near k = alpha q: f turns
within ~1/alpha^2 of u), the two clusters' log-sums are interpolated apart and added at evaluation (log-add-exp). Below
u_lo the bound is the chord through the origin (f is convex, f(0) = 0), above u_hi it is t_alpha u + log w_alpha +
e^{-(alpha-1) u} (1 - w_alpha) / w_alpha; both lie within 1e-14 of f there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numba import njit, prange
from numpy.typing import NDArray

from otagym.accounting.interpolation import _cluster_node, _fill_coarse_cell
from otagym.accounting.rounding import _U
from otagym.jit import JIT_NO_ALLOC, parallel

#: Width (nats of log u) of the coarse cells, the first level of a table's index.
_TABLE_COARSE = 0.25
#: The bottom of a table: below it the chord through the origin is within this of f (relative).
_TABLE_CHORD = 1e-14
#: The top of a table: above it the terms the asymptote leaves out are below e^-this of f.
_TABLE_TAIL = 60.0
#: Most sub-cells of one coarse cell and order.
_TABLE_MAX_SUB = 2**16
#: Most distinct sampling rates in (0, 1) of a ledger that tabulates its curves.
_TABLE_MAX_RATES = 8


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
    [0, 1], each raised by its sub-cell's bound. ``chord`` (O,): f(u_lo) / u_lo, raised; ``asymptote`` (O, 2):
    t_alpha and log w_alpha (raised) of the bound above the top."""

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
