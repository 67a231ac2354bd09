"""(eps, delta) of a device's rounds from their privacy loss distribution (PLD): the accountant the field reports ε
with, beside the RDP ledger (:mod:`otagym.accounting.ledger`), whose RDP -> (eps, delta) conversion (eq. (6)) costs
6-25% on these episodes (up to 66% on anonymous OTA's).

Each round of a device is a Poisson-subsampled Gaussian mechanism, sampling rate q and noise multiplier sigma (its
noise std over its L2 sensitivity), the mechanism of every round of eq. (9); the rounds of an episode compose
heterogeneously. Every step gives an upper bound on the exact ε:

1. **Groups.** q is rounded *up* and sigma *down* to a geometric grid of ratio ``1 + sigma_resolution`` (a larger rate
   or a smaller noise leaks more), so rounds of one grid cell are one group; the cost below grows with the number of
   groups, at most the number of rounds, and at most the grid's cells in the schedule's range (sigma in [0.5, 5] and
   one q: about 2,300 at the default resolution).
2. **One round's PLD** (add-or-remove neighbours) is Doroshenko, Ghazi, Kamath, Kumar & Manurangsi's pessimistic
   connect-the-dots discretisation ("Connect the dots", PETS 2022, Algorithm 1) of the hockey-stick divergence
   delta(eps) of the subsampled Gaussian pair on a grid of width ``value_discretization``, the two pairs (remove, add)
   and their tails as Google's ``dp_accounting`` builds them (``from_gaussian_mechanism(..., use_connect_dots=True)``,
   tested equal to 1e-10): its delta(eps) is evaluated on the whole grid at once in closed form, 10x faster
   than the library's loop over the grid (:mod:`otagym.accounting.loss_distribution`). Built once per process per
   (q, sigma, grid).
3. **The composition** of all rounds is one product of the groups' discrete Fourier transforms, each to the power of
   its group's size, on a window of L points: the circular convolution is the exact law of the summed loss modulo
   L, and the window's edges are Chernoff bounds (each group's moment generating function computed exactly from its
   discrete PLD) on the mass beyond them, which is added to the mass at infinity (pessimistic: every delta(eps) can
   only grow). With the noise's tails beyond each round's range, at most :data:`TAIL_SHARE` of delta in all. The
   schedules of a batch share their groups: each group's PLD, transform and moment generating function is computed
   once (:mod:`otagym.accounting.spectra`'s compiled kernels), and each schedule multiplies its groups' transforms
   (or, where the batch's schedules share most of their groups, takes the exponential of the transforms' logs
   weighted by its counts: one matrix product for the batch).
4. **ε at δ** is the smallest ε whose hockey-stick divergence is at most δ (``dp_accounting``'s
   ``get_epsilon_for_delta``, vectorised; tested equal); where the RDP ledger's ε at
   :data:`~otagym.accounting.DEFAULT_ORDERS` is smaller (both are upper bounds) it is returned instead, and
   :func:`pld_account` says so.

The grid is chosen from the schedule: :data:`DISCRETIZATION_SD` of the rounds' root-mean-square per-round privacy-loss
standard deviation (measured against dp_accounting at 1e-4: at most 0.5% above it on constant schedules of q in
0.001 ... 1, sigma in 0.5 ... 5, 10 ... 10,000 rounds), made coarser only where a round's PLD or the window would pass
:data:`MAX_POINTS` points, which :func:`pld_account` reports. Time and memory grow with the groups and the window,
not with the rounds: ``benchmarks/bench_accounting.py`` measures them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import fft as scipy_fft
from scipy import sparse

from otagym.accounting.conversion import rdp_to_dp
from otagym.accounting.loss_distribution import loss_range, loss_sd, round_pld
from otagym.accounting.orders import DEFAULT_ORDERS, _validate_q_sigma
from otagym.accounting.sgm import rdp_sgm
from otagym.accounting.spectra import BLOCK, log_mgfs, multiply_powers
from otagym.validation import Real

__all__ = [
    "DISCRETIZATION_SD",
    "HUGE_SIGMA",
    "MAX_POINTS",
    "SIGMA_RESOLUTION",
    "TAIL_SHARE",
    "PLDAccount",
    "PLDLedger",
    "pld_account",
    "pld_epsilon",
]

#: The default width of the privacy-loss grid, as a share of the rounds' root-mean-square per-round privacy-loss
#: standard deviation: every width is pessimistic, a finer one is tighter and slower. Measured against dp_accounting
#: at 1e-4 on constant schedules (q 0.001 ... 1, sigma 0.5 ... 5, 10 ... 10,000 rounds): at most 0.5% above it
#: (a twentieth: 0.3%); on random heterogeneous schedules 0.3% at either, the sigma grid's share.
DISCRETIZATION_SD = 0.1
#: Default relative step of the grid q is rounded up and sigma down to (0: every round's own).
SIGMA_RESOLUTION = 1e-3
#: The most points one round's PLD or the composition's window may take (a coarser grid is used beyond; 32 MiB).
MAX_POINTS = 1 << 22
#: The share of delta that the composition's window may add to the mass at infinity (its Chernoff bound).
TAIL_SHARE = 1e-3
#: The largest finite noise multiplier composed as it is (larger ones are rounded down to it, see pld_epsilon).
HUGE_SIGMA = 1e150
_DISCRETIZATION = Real(1e-9, 1.0)
_RESOLUTION = Real(0.0, 1.0, high_open=True)
_DELTA = Real(0.0, 1.0, low_open=True, high_open=True)
#: The lowest ln of a round's truncated mass: its noise quantile is still finite (at a delta below that, ε is the
#: RDP ledger's).
_LOWEST_LOG_MASS = -700.0
#: Rounds (or distinct pairs) handled at a time where memory would otherwise grow with them.
_CHUNK = 1 << 16
#: ln of a zero of a group's Fourier transform (finite, so that a zero count times it is 0).
_LOG_ZERO = -1e30
#: The most schedules or groups whose counts are multiplied at a time (a dense matrix of at most its square).
_DENSE = 1 << 12
#: A batch's products of transforms are taken directly (a multiplication a group of a row and a frequency) where its
#: rows have at most this many groups for each distinct one, else as the exponential of the logs' weighted sum (a
#: logarithm and an arctangent a distinct group and a frequency, 40x a multiplication, then a matrix product).
_DIRECT_SHARE = 32


class PLDAccount(NamedTuple):
    """What :func:`pld_account` found for each schedule (arrays of the batch's shape)."""

    #: ε (nats) at delta: the PLD's, or the RDP ledger's where that is smaller. Both are upper bounds.
    epsilon: NDArray
    #: True where the RDP ledger's ε was the smaller, so ``epsilon`` is it.
    from_rdp: NDArray
    #: The width (nats) of the privacy-loss grid used (0 where nothing was composed).
    discretization: NDArray


# -- the schedule ------------------------------------------------------------------------------------------------


def _distinct(q: NDArray, sigma: NDArray) -> tuple[NDArray, NDArray]:
    """The schedule's distinct (q, sigma) pairs, as complex numbers q + i sigma, and how many rounds each has;
    sorted a chunk of rounds at a time, so that memory does not grow with the rounds."""
    pairs, counts = [], []
    for first in range(0, len(q), _CHUNK):
        found = np.unique(q[first:first + _CHUNK] + 1j * sigma[first:first + _CHUNK], return_counts=True)
        pairs.append(found[0])
        counts.append(found[1])
    if len(pairs) == 1:
        return pairs[0], counts[0]
    merged, where = np.unique(np.concatenate(pairs), return_inverse=True)
    return merged, np.bincount(where, weights=np.concatenate(counts)).astype(np.int64)


def _rdp_epsilon(pairs: NDArray, counts: NDArray, delta: float) -> float:
    """The RDP ledger's ε at delta of the rounds (distinct pairs and their counts) at :data:`DEFAULT_ORDERS`."""
    return float(rdp_to_dp(_rdp_sums(pairs.real, pairs.imag, counts[None]), DEFAULT_ORDERS, delta)[0][0])


def _rdp_sums(q: NDArray, sigma: NDArray, counts: NDArray | sparse.csr_array) -> NDArray:
    """(elements, orders): each element's sum over the rounds of counts[element, j] rounds of (q[j], sigma[j]) of
    their RDP at :data:`DEFAULT_ORDERS`, a chunk of pairs at a time."""
    return sum(counts[:, first:first + _CHUNK] @ rdp_sgm(q=q[first:first + _CHUNK],
                                                          noise_multiplier=sigma[first:first + _CHUNK],
                                                          orders=DEFAULT_ORDERS)
               for first in range(0, len(q), _CHUNK))


def _groups(pairs: NDArray, counts: NDArray, resolution: float, leak_more: bool = True) -> tuple[NDArray, NDArray]:
    """The rounds' distinct (q, sigma) (columns of a (groups, 2) array) after q is rounded up and sigma down
    (``leak_more`` False: q down and sigma up) to the geometric grid of ratio ``1 + resolution`` (0: as they are),
    and how many rounds each has."""
    q, sigma = pairs.real, pairs.imag
    if resolution:
        step = math.log1p(resolution)
        up, down = (np.ceil, np.floor) if leak_more else (np.floor, np.ceil)
        near = (np.maximum, np.minimum) if leak_more else (np.minimum, np.maximum)
        q = np.minimum(near[0](np.exp(up(np.log(q) / step) * step), q), 1.0)
        sigma = near[1](np.exp(down(np.log(sigma) / step) * step), sigma)
    cells, where = np.unique(q + 1j * sigma, return_inverse=True)
    return np.column_stack((cells.real, cells.imag)), np.bincount(where, weights=counts).astype(np.int64)


def _union(items: list[tuple[NDArray, NDArray]]) -> tuple[NDArray, sparse.csr_array]:
    """The distinct keys (rows of a (keys, fields) array) of the elements' groups (each element: its keys as such
    rows and their counts), sorted, and the (elements x keys) matrix of the counts."""
    stacked = np.concatenate([element for element, _ in items])
    order = np.lexsort(stacked.T[::-1])  # by the first field, then the next (numpy's unique on rows is 10x slower)
    ordered = stacked[order]
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    columns = np.empty(len(order), dtype=np.int64)
    columns[order] = np.cumsum(first) - 1
    rows = np.repeat(np.arange(len(items)), [len(element) for element, _ in items])
    counts = np.concatenate([c for _, c in items]).astype(np.int64)
    return ordered[first], sparse.csr_array((counts, (rows, columns)), shape=(len(items), int(first.sum())))


def _log_mass(delta: float, rounds: int) -> float:
    """ln of the noise's mass each round's PLD puts at infinity (dp_accounting's ``log_mass_truncation_bound``, a
    whole number; its default is -50), so that the rounds' sum is at most a quarter of :data:`TAIL_SHARE` of delta:
    at delta = 1e-5 and 500 rounds, -26, where each round's PLD spans about half the losses it spans at -50."""
    wanted = math.log(TAIL_SHARE) + math.log(delta) - math.log(4.0 * rounds)
    return float(math.floor(max(wanted, _LOWEST_LOG_MASS)))


def _ladder(width: float, up: bool = False) -> float:
    """``width`` rounded down (``up``: up) to a power of 2^(1/4), so that schedules share their rounds' PLDs."""
    steps = 4.0 * math.log2(max(width, 1e-9))
    return 2.0 ** ((math.ceil(steps) if up else math.floor(steps)) / 4.0)


@dataclass(frozen=True)
class _Schedule:
    """One element's rounds: their distinct (q, sigma) as they are (complex q + i sigma) and how many rounds each
    has (the RDP ledger's ε), the groups after the grid's rounding ((groups, 2) rows of q, sigma) and their counts,
    and ln of each round's truncated mass."""

    pairs: NDArray
    pair_counts: NDArray
    groups: NDArray
    counts: NDArray
    log_mass: float

    @classmethod
    def of(cls, q: NDArray, sigma: NDArray, delta: float, resolution: float) -> _Schedule:
        # a sigma beyond HUGE_SIGMA is rounded down to it (more loss, still an upper bound): its 1/sigma^2 would
        # underflow; the round's epsilon is below 1e-149 either way
        pairs, pair_counts = _distinct(q, np.minimum(sigma, HUGE_SIGMA))
        groups, counts = _groups(pairs, pair_counts, resolution)
        return cls(pairs, pair_counts, groups, counts, _log_mass(delta, int(counts.sum())))


def _grid(schedules: list[_Schedule], value_discretization: float | None) -> float:
    """The width of one loss grid for every schedule of a batch, so that they share their rounds' PLDs: the finest
    any asks for (:data:`DISCRETIZATION_SD` of its rounds' root-mean-square per-round loss standard deviation) or
    ``value_discretization``, coarser only where one needs (a round's PLD, bounded by that of its schedule's
    largest q and smallest sigma, or the composition's window beyond :data:`MAX_POINTS` points)."""
    keys, counts = _union([(s.groups, s.counts) for s in schedules])
    var = counts @ loss_sd(keys[:, 0], keys[:, 1]) ** 2  # each schedule's summed per-round variance
    asks = value_discretization or _ladder(DISCRETIZATION_SD * math.sqrt(float(np.min(var / counts.sum(axis=1)))))
    widest = [np.subtract(*loss_range(float(s.groups[:, 0].max()), float(s.groups[:, 1].min()), s.log_mass)[::-1])
              for s in schedules]
    return max(asks, _ladder(float(np.max(np.maximum(widest, 16.0 * np.sqrt(var)))) / MAX_POINTS, up=True))


def _leaking(q: NDArray, sigma: NDArray) -> tuple[float | None, NDArray]:
    """ε where it needs no PLD (inf: a round without noise; 0: no round leaks), else None; and the leaking rounds."""
    if np.any((sigma == 0) & (q > 0)):  # no noise: the round reveals its data
        return math.inf, q
    leaks = (q > 0) & np.isfinite(sigma)  # q = 0 or infinite noise: the round reveals nothing
    return (None if leaks.any() else 0.0), leaks


class _Half:
    """One half (0 remove, 1 add) of the composition of a batch of schedules' rounds on one loss grid: the union
    of their groups' PLDs (:func:`~otagym.accounting.loss_distribution.round_pld`), each built once, and the
    (schedules x groups) matrix of their counts, so that the batch's moment generating functions and Fourier
    transforms are computed once a group."""

    def __init__(self, schedules: list[_Schedule], d: float, half: int) -> None:
        keys, self.counts = _union([(np.column_stack((s.groups, np.full(len(s.groups), s.log_mass))), s.counts)
                                    for s in schedules])
        self.members = [round_pld(q, s, d, log_mass)[half] for q, s, log_mass in keys.tolist()]
        sizes = np.array([len(m.probs) for m in self.members])
        self._first = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        self._probs = np.concatenate([m.probs for m in self.members])
        self._lowest = np.array([m.lower for m in self.members], dtype=np.int64)
        self._edges: dict[tuple[int, int], NDArray] = {}

    def _log_mgf(self, lam: float) -> NDArray:
        """Each group's ln sum_i probs[i] exp(lam (lower + i)), lam per grid step (either sign)."""
        out = np.empty(len(self._first))
        log_mgfs(self._probs, self._lowest, self._first, lam, out)
        return out

    def _edge_at(self, sign: int, power: int, log_tail: float) -> NDArray:
        """Each schedule's Chernoff edge (grid steps) at lambda = 2^power: sign (ln E[e^(sign lam S)] - log_tail)
        / lam, E[e^(sign lam S)] the product of its rounds' exact moment generating functions."""
        if (sign, power) not in self._edges:
            lam = 2.0**power
            self._edges[sign, power] = sign * (self.counts @ self._log_mgf(sign * lam) - log_tail) / lam
        return self._edges[sign, power]

    def _edge(self, row: int, sign: int, log_tail: float, base: int) -> float:
        """The edge (grid steps) beyond which Chernoff's inequality bounds schedule ``row``'s composed finite mass
        by e^log_tail: above the mean for sign +1, below it for -1. For any lambda > 0 the mass at or beyond its
        :meth:`_edge_at` is at most e^log_tail; the edge is minimised (sign +1) or maximised over lambda on a
        ladder of powers of 2 shared by the batch, from 2^base down while it improves, then up; 40 octaves at
        most."""
        best = self._edge_at(sign, base, log_tail)[row]
        for step in (-1, 1):
            power = base + step
            for _ in range(40):
                value = self._edge_at(sign, power, log_tail)[row]
                if not sign * value < sign * best:
                    break
                best, power = value, power + step
        return best

    def _window(self, rows: NDArray, length: int) -> NDArray:
        """(rows, length): the masses of each of ``rows``' composed finite loss from its lowest loss on, wrapped
        onto a circle of ``length`` grid steps: the inverse transform of the product of its groups' transforms
        (each from its lowest loss), each to the power of its count. A group's transform is computed once for all
        rows, :data:`MAX_POINTS` points at a time, and multiplied into each row's product
        (:func:`~otagym.accounting.spectra.multiply_powers`), or, where the rows have more than
        :data:`_DIRECT_SHARE` groups for each distinct one, taken as the exponential of the logs' sum weighted by the
        counts (one matrix product)."""
        counts = self.counts[rows]
        used = np.unique(counts.indices)
        direct = counts.nnz <= _DIRECT_SHARE * len(used)
        frequencies = length // 2 + 1
        if direct:
            product = np.ones((len(rows), frequencies), dtype=complex)
        else:
            total = np.zeros((len(rows), frequencies), dtype=complex)
        per = max(1, min(_DENSE, MAX_POINTS // length))
        for first in range(0, len(used), per):
            columns = used[first:first + per]
            spectra = scipy_fft.rfft(self._wrapped(columns, length), axis=1)
            weights = counts[:, columns]
            if direct:
                weights = sparse.csr_array(weights)
                multiply_powers(spectra, weights.indptr.astype(np.int64), weights.indices.astype(np.int64),
                                weights.data.astype(np.int64), product, np.empty(BLOCK, dtype=complex))
                continue
            weights = weights.toarray().astype(float)
            with np.errstate(divide="ignore"):
                log_size = np.maximum(np.log(np.abs(spectra)), _LOG_ZERO)
            total.real += weights @ log_size
            total.imag += weights @ np.arctan2(spectra.imag, spectra.real)
        return scipy_fft.irfft(product if direct else np.exp(total), length, axis=1)

    def _wrapped(self, columns: NDArray, length: int) -> NDArray:
        """(columns, length): the masses of each of the groups ``columns`` from its lowest loss on, wrapped onto a
        circle of ``length`` grid steps."""
        wrapped = np.zeros((len(columns), length))
        for masses, g in zip(wrapped, columns):
            probs = self.members[g].probs
            if len(probs) <= length:
                masses[:len(probs)] = probs
            else:
                masses += np.bincount(np.arange(len(probs)) % length, weights=probs, minlength=length)
        return wrapped

    def compose(self, tail: float) -> list[tuple[int, NDArray, float]]:
        """Each schedule's half of the composition of its rounds: (the first point in grid steps, the masses from
        it on, the mass at infinity). The masses are the product of the rounds' spectra on a window (of
        :func:`_window_lengths` points) whose edges are Chernoff bounds, each on a finite mass of at most half of ``tail`` beyond it,
        those bounds added to the mass at infinity; then the window's top, mass at most ``tail`` too, is moved
        there as well (pessimistic both), so that the search for ε starts near the answer."""
        lowest = self.counts @ np.array([m.lower for m in self.members], dtype=np.int64)
        highest = self.counts @ np.array([m.upper for m in self.members], dtype=np.int64)
        var = self.counts @ np.array([m.var for m in self.members])
        log_keep = self.counts @ np.log1p(-np.array([m.infinity_mass for m in self.members]))
        log_tail = math.log(tail / 2.0)
        # the walks start from the Gaussian optimum of the median variance: the batch's rows share their lambdas (a
        # subsampled round's heavy right tail puts the optimum far below the Gaussian one)
        base = round(math.log2(math.sqrt(-2.0 * log_tail / max(float(np.median(var)), 1.0))))
        starts, outside, widths = [], [], []
        for row in range(self.counts.shape[0]):
            low, high = int(lowest[row]), int(highest[row])
            below = np.clip(self._edge(row, -1, log_tail, base), low - 1, high + 1)
            above = np.clip(self._edge(row, 1, log_tail, base), low - 1, high + 1)
            start, stop = max(low, math.floor(below) + 1), min(high + 1, math.ceil(above))
            starts.append(start)
            outside.append((start > low) * tail / 2.0 + (stop <= high) * tail / 2.0)
            widths.append(max(stop - start, 1))
        found: list[tuple[int, NDArray, float]] = [(0, np.zeros(0), 0.0)] * len(starts)
        lengths_arr = _window_lengths(np.array(widths))
        for length in np.unique(lengths_arr):
            rows = np.flatnonzero(lengths_arr == length)
            per = max(1, min(_DENSE, MAX_POINTS // int(length)))
            for chunk in (rows[first:first + per] for first in range(0, len(rows), per)):
                for row, masses in zip(chunk, self._window(chunk, int(length))):
                    probs = np.maximum(np.roll(masses, -((starts[row] - int(lowest[row])) % int(length))), 0.0)
                    top = np.cumsum(probs[::-1])  # the window's top, mass at most tail, goes to infinity too:
                    cut = int(np.searchsorted(top, tail, side="right"))  # dp_accounting's epsilon walks down
                    cut_mass = float(top[cut - 1]) if cut else 0.0  # from the top, one point a step
                    probs = probs[:len(probs) - cut] if cut < len(probs) else probs[:1] * 0.0
                    infinity = -math.expm1(float(log_keep[row])) + outside[row] + cut_mass
                    found[row] = (starts[row], probs, min(infinity, 1.0))
        return found


def _window_lengths(widths: NDArray) -> NDArray:
    """Each row's window length (points, at least its width): rows whose widths lie within a factor 2 of a band's
    widest share one length, the smallest fast transform size (2^a 3^b 5^c, at least 64) at least that widest, so
    that a group's transform is computed once a band, and not up to twice what a power of two would need."""
    lengths = np.zeros(len(widths), dtype=np.int64)
    left = np.ones(len(widths), dtype=bool)
    while left.any():
        widest = int(widths[left].max())
        band = left & (2 * widths >= widest)
        lengths[band] = scipy_fft.next_fast_len(max(widest, 64), real=True)
        left &= ~band
    return lengths


def _epsilon_for_delta(lower: int, probs: NDArray, infinity_mass: float, d: float, delta: float) -> float:
    """The smallest ε >= 0 at which the hockey-stick divergence of a discrete PLD, infinity_mass + sum_i probs_i
    (1 - e^(ε - l_i))_+ with l_i = (lower + i) d, is at most delta: dp_accounting's ``get_epsilon_for_delta`` (a walk
    down from the top loss, here vectorised in log space; tested equal). Above the point l_k it is
    U - e^ε W, U and W the sums of probs_i and probs_i e^(-l_i) over the points above l_k: the answer solves
    U - e^ε W = delta on the highest point at or below its solution."""
    if infinity_mass > delta:
        return math.inf
    losses = (lower + np.arange(len(probs))) * d
    with np.errstate(divide="ignore"):
        log_terms = np.log(probs) - losses
    above = infinity_mass + np.append(np.cumsum(probs[::-1])[::-1][1:], 0.0)
    log_above = np.append(np.logaddexp.accumulate(log_terms[::-1])[::-1][1:], -np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        solution = np.log(above - delta) - log_above
    found = np.flatnonzero((above > delta) & np.isfinite(log_above) & (solution >= losses))
    if found.size:
        return max(float(solution[found[-1]]), 0.0)
    total, log_total = infinity_mass + float(probs.sum()), float(np.logaddexp.reduce(log_terms))
    return 0.0 if total <= math.exp(log_total) + delta else max(math.log(total - delta) - log_total, 0.0)


def _rdp_epsilons(schedules: list[_Schedule], delta: float, resolution: float, pld: NDArray) -> NDArray:
    """The RDP ledger's ε at delta of each schedule's rounds as they are where it may be below ``pld``; elsewhere a
    lower bound on it that is not (its rounds rounded to leak less: one RDP per group of the batch, not per
    round)."""
    keys, counts = _union([_groups(s.pairs, s.pair_counts, resolution, leak_more=False) for s in schedules])
    low = rdp_to_dp(_rdp_sums(keys[:, 0], keys[:, 1], counts), DEFAULT_ORDERS, delta)[0]
    return np.array([_rdp_epsilon(s.pairs, s.pair_counts, delta) if bound < p and resolution else bound
                     for s, bound, p in zip(schedules, low, pld)])


def _epsilons(schedules: list[_Schedule], d: float, delta: float,
              resolution: float) -> list[tuple[float, bool, float]]:
    """(ε, whether it is the RDP ledger's, d) of each schedule on the loss grid of width d."""
    tail = TAIL_SHARE * delta / 4.0  # for each half: the window's Chernoff bounds, and the top cut
    if not (math.isfinite(d) and tail / 2.0 > 0.0):  # a loss past floats, or a delta whose share underflows
        return [(_rdp_epsilon(s.pairs, s.pair_counts, delta), True, d) for s in schedules]
    pld = np.maximum(*(np.array([_epsilon_for_delta(*composed, d, delta)
                                 for composed in _Half(schedules, d, half).compose(tail)]) for half in (0, 1)))
    rdp = _rdp_epsilons(schedules, delta, resolution, pld)
    return [(float(r), True, d) if r < p else (float(p), False, d) for r, p in zip(rdp, pld)]


def _accounts(elements: list[tuple[NDArray, NDArray]], delta: float, value_discretization: float | None,
              resolution: float) -> list[tuple[float, bool, float]]:
    """(ε, whether it is the RDP ledger's, grid width) of each element's rounds (validated flat q and sigma), all on
    one grid (:func:`_grid`)."""
    found: list[tuple[float, bool, float] | _Schedule] = []
    for q, sigma in elements:
        epsilon, leaks = _leaking(q, sigma)
        found.append((epsilon, False, 0.0) if epsilon is not None else _Schedule.of(q[leaks], sigma[leaks], delta,
                                                                                   resolution))
    schedules = [f for f in found if isinstance(f, _Schedule)]
    if not schedules:
        return found  # type: ignore[return-value]
    accounted = iter(_epsilons(schedules, _grid(schedules, value_discretization), delta, resolution))
    return [next(accounted) if isinstance(f, _Schedule) else f for f in found]


def pld_account(*, q: ArrayLike, noise_multiplier: ArrayLike, delta: float,
                value_discretization: float | None = None,
                sigma_resolution: float = SIGMA_RESOLUTION) -> PLDAccount:
    """ε at ``delta`` of the composition of a schedule of rounds, each a Poisson-subsampled Gaussian mechanism, with
    where it came from and the grid it was computed on.

    Args:
        q: each round's sampling rate in [0, 1]; rounds on the first axis, broadcast against ``noise_multiplier``
            aligned on that axis (a scalar, rates per round (T,), or per round and element).
        noise_multiplier: each round's noise std over its L2 sensitivity (dimensionless), >= 0 (``inf``: the round
            reveals nothing; 0 with q > 0: ε = inf); shape (rounds, *batch): one schedule per batch element.
        delta: the δ of the (ε, δ) guarantee, in (0, 1).
        value_discretization: width (nats) of the privacy-loss grid (dp_accounting's
            ``value_discretization_interval``); smaller is tighter and slower, every width is pessimistic.
            ``None``: chosen from the schedule (:data:`DISCRETIZATION_SD`). Coarser where :data:`MAX_POINTS` needs.
        sigma_resolution: relative step of the grid q is rounded up and sigma down to before composing (0: none).

    Returns:
        :class:`PLDAccount` of arrays of shape ``batch`` (shape () for one schedule): ε (nats), an upper bound on
        the exact ε of the schedule, never above the RDP ledger's ε at :data:`DEFAULT_ORDERS` (both are upper
        bounds: the smaller is returned, and ``from_rdp`` says where that was the ledger's), and the grid's width.
    """
    for name, value in (("q", q), ("noise_multiplier", noise_multiplier)):
        if value is None:
            raise ValueError(f"{name} is required: a number or an array of them per round; got None")
    q_arr, sigma_arr = (np.asarray(v, dtype=float) for v in (q, noise_multiplier))
    _validate_q_sigma(q_arr, sigma_arr)
    delta = _DELTA("delta", delta)
    if value_discretization is not None:
        value_discretization = _DISCRETIZATION("value_discretization", value_discretization)
    sigma_resolution = _RESOLUTION("sigma_resolution", sigma_resolution)
    q_arr, sigma_arr = np.atleast_1d(q_arr), np.atleast_1d(sigma_arr)
    ndim = max(q_arr.ndim, sigma_arr.ndim)  # aligned on the rounds' axis, the first: (T,) rates with (T, B) sigma
    q_b, s_b = np.broadcast_arrays(*(a.reshape(a.shape + (1,) * (ndim - a.ndim)) for a in (q_arr, sigma_arr)))
    batch = q_b.shape[1:]
    if len(q_b) == 0:  # no rounds: nothing composed, nothing revealed
        return PLDAccount(np.zeros(batch), np.zeros(batch, dtype=bool), np.zeros(batch))
    flat_q, flat_s = q_b.reshape(len(q_b), -1), s_b.reshape(len(s_b), -1)
    found = _accounts([(flat_q[:, j], flat_s[:, j]) for j in range(flat_q.shape[1])], delta, value_discretization,
                      sigma_resolution)
    eps, from_rdp, grid = (np.array(column).reshape(batch) for column in zip(*found))
    return PLDAccount(eps.astype(float), from_rdp.astype(bool), grid.astype(float))


def pld_epsilon(*, q: ArrayLike, noise_multiplier: ArrayLike, delta: float,
                value_discretization: float | None = None,
                sigma_resolution: float = SIGMA_RESOLUTION) -> NDArray:
    """ε (nats) at ``delta`` of each schedule: :func:`pld_account`'s ``epsilon`` (same arguments)."""
    return pld_account(q=q, noise_multiplier=noise_multiplier, delta=delta, value_discretization=value_discretization,
                       sigma_resolution=sigma_resolution).epsilon


class PLDLedger:
    """The rounds of a batch of elements (e.g. envs x devices), kept to be composed by :func:`pld_epsilon` at the
    end of an episode: the same interface as :class:`~otagym.accounting.RDPLedger` (``record`` each round, ``epsilon``
    at the end, ``reset`` of some rows), so an env core keeps either.

    Args:
        q: each element's sampling rate, shape ``batch`` (rows on the first axis); a round may give its own
            (``record(..., q=...)``: a client's participation probability that changes with the round's decision).
        value_discretization, sigma_resolution: as :func:`pld_epsilon`'s.
    """

    def __init__(self, q: ArrayLike, *, value_discretization: float | None = None,
                 sigma_resolution: float = SIGMA_RESOLUTION) -> None:
        self.q = np.array(q, dtype=float)
        _validate_q_sigma(self.q, np.ones_like(self.q))
        self.value_discretization = (None if value_discretization is None
                                     else _DISCRETIZATION("value_discretization", value_discretization))
        self.sigma_resolution = _RESOLUTION("sigma_resolution", sigma_resolution)
        self._rounds: list[NDArray] = []  # each round's noise multipliers, shape batch
        self._rates: list[NDArray] = []  # each round's sampling rates, shape batch
        self._start = np.zeros(self.q.shape[:1], dtype=int)  # the first round of each row's current episode

    def record(self, noise_multiplier: ArrayLike, q: ArrayLike | None = None) -> None:
        """One round's noise multiplier of every element (shape ``batch``), and its sampling rates where they are
        not the ledger's ``q``."""
        self._rounds.append(np.array(np.broadcast_to(noise_multiplier, self.q.shape), dtype=float))
        self._rates.append(self.q if q is None else np.array(np.broadcast_to(q, self.q.shape), dtype=float))

    def reset(self, rows: ArrayLike | None = None) -> None:
        """Start a new episode in every row (``rows`` None) or in ``rows`` (a boolean mask or indices)."""
        self._start[slice(None) if rows is None else np.asarray(rows)] = len(self._rounds)
        drop = int(self._start.min())  # rounds no row's episode needs any more
        if drop:
            del self._rounds[:drop], self._rates[:drop]
            self._start -= drop

    def account(self, delta: float, rows: Sequence[int] | None = None) -> PLDAccount:
        """:func:`pld_account` of each element's rounds since its row's reset, arrays of shape ``batch`` (ε 0, not
        from the RDP ledger, grid 0 where none were played); ``rows``: only those rows (the others as unplayed). All
        on one grid."""
        out = PLDAccount(np.zeros(self.q.shape), np.zeros(self.q.shape, dtype=bool), np.zeros(self.q.shape))
        if not self._rounds:
            return out
        delta = _DELTA("delta", delta)
        sigma, rates = np.stack(self._rounds), np.stack(self._rates)
        _validate_q_sigma(rates, sigma)
        played = [i for i in (range(self.q.shape[0]) if rows is None else rows) if self._start[i] < len(sigma)]
        elements = [(i, element) for i in played for element in np.ndindex(self.q.shape[1:])]
        found = _accounts([(rates[self._start[i]:, i][(slice(None), *e)], sigma[self._start[i]:, i][(slice(None), *e)])
                           for i, e in elements], delta, self.value_discretization, self.sigma_resolution)
        for (i, element), account in zip(elements, found):
            for array, value in zip(out, account):
                array[(i, *element)] = value
        return out

    def epsilon(self, delta: float, rows: Sequence[int] | None = None) -> NDArray:
        """ε at ``delta`` of each element's rounds since its row's reset, shape ``batch`` (0 where none were
        played): :meth:`account`'s ``epsilon``."""
        return self.account(delta, rows).epsilon
