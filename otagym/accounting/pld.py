"""(eps, delta) of a device's rounds from their privacy loss distribution (PLD), composed by Google's
``dp_accounting`` (Meiser & Mohammadi 2018; Koskela, Jälkö & Honkela 2020; Doroshenko, Ghazi, Kamath, Kumar &
Manurangsi 2022, "Connect the dots"): the accountant the field reports ε with, beside the RDP ledger
(:mod:`otagym.accounting.ledger`), whose RDP -> (eps, delta) conversion (eq. (6)) costs 6-25% on these episodes.

Each round of a device is a Poisson-subsampled Gaussian mechanism, sampling rate q and noise multiplier sigma (its
noise std over its L2 sensitivity), the mechanism of every round of eq. (9); the rounds of an episode compose
heterogeneously (each its own sigma). Everything about the PLD is dp_accounting's: the discretised PLD of each round
(``from_gaussian_mechanism``, add-or-remove neighbours, pessimistic: its ε upper-bounds the exact one at every
discretisation), the composition (``compose``, ``self_compose``) and ε at δ (``get_epsilon_for_delta``).
What this module adds is speed, without giving up the upper bound:

* sigma is rounded *down* to a geometric grid of ratio ``1 + sigma_resolution`` (a smaller noise multiplier leaks
  more, so the composition of the rounded rounds is less private than the real one: its ε is an upper bound on it),
  so that the rounds of one grid value compose as one ``self_compose`` (:data:`SELF_COMPOSE_FROM`);
* each round's PLD is built once per (q, grid sigma, discretisation) in a process (:func:`_round_pld`, cached), so
  the envs of a vector env and the episodes that follow share them.

Measured on the paper's MNIST deployment (T = 500, the price action a = 0, q = 0.01, delta = 1e-5,
``benchmarks/bench_accounting.py``): the RDP ledger's eps is 2.348, this module's default 1.848 in 0.3 s (1.815 with
``value_discretization=1e-3, sigma_resolution=1e-3``; dp_accounting's own accountant on every round at 1e-3: 1.813,
in 21 s; Opacus's PRV accountant, upper bound: 1.822, in 32 s).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otagym.accounting.conversion import rdp_to_dp
from otagym.accounting.orders import DEFAULT_ORDERS, _validate_q_sigma
from otagym.accounting.sgm import rdp_sgm
from otagym.validation import Real

__all__ = ["ACCOUNTANTS", "pld_epsilon", "PLDLedger", "DISCRETIZATION_ROUNDS", "SIGMA_RESOLUTION", "MAX_SUPPORT",
           "HUGE_SIGMA"]

#: The accountants of an episode's end-of-episode (eps, delta): the RDP ledger, and this module's PLD beside it.
ACCOUNTANTS = ("rdp", "pld")

#: The default width of the privacy-loss grid of each round's PLD (dp_accounting's ``value_discretization_interval``)
#: is this over the number of rounds, at most 1e-2: each round's pessimistic rounding adds up over the composition,
#: so a long schedule needs a finer grid. Pessimistic at any width; on the paper's episode (T = 500: 1e-2, with
#: connect-the-dots) within 2% of 1e-3 at a fifth of the time; at T = 10,000 (5e-4) within 0.01% of 2e-4.
DISCRETIZATION_ROUNDS = 5.0
#: Default relative step of the grid sigma is rounded down to (0: every round's own sigma).
SIGMA_RESOLUTION = 3e-3
#: Rounds of one grid sigma compose as one ``self_compose`` from this many on; fewer as that many ``compose``s, which
#: dp_accounting does at a fraction of the cost (a self-composition's tail bounds take most of its time): 2.3x faster
#: on the paper's episodes, ε within 1e-9.
SELF_COMPOSE_FROM = 9
#: The most points the composed PLD may need, estimated as the composed privacy loss's mean plus ten standard
#: deviations (the mean bounded by the summed RDP at order 2, its variance by twice that) plus the widest round's
#: Gaussian tail (10 / sigma + 1 / (2 sigma^2)), over the discretisation. Beyond it (ε in the hundreds) ε is the RDP
#: ledger's instead, an upper bound too, where the PLD's arrays would take gigabytes.
MAX_SUPPORT = 2_000_000
#: The largest finite noise multiplier composed as it is (larger ones are rounded down to it, see pld_epsilon).
HUGE_SIGMA = 1e150
_DISCRETIZATION = Real(1e-6, 1.0)
_RESOLUTION = Real(0.0, 1.0, high_open=True)
_DELTA = Real(0.0, 1.0, low_open=True, high_open=True)


def _dp_accounting() -> Any:
    try:
        from dp_accounting.pld import privacy_loss_distribution
    except ImportError as err:  # pragma: no cover - the pld extra is part of .[all]
        raise ImportError("the PLD accountant needs dp_accounting: pip install \"otagym[pld]\" (or dp-accounting)") \
            from err
    return privacy_loss_distribution


@functools.lru_cache(maxsize=4096)
def _round_pld(q: float, sigma: float, value_discretization: float) -> Any:
    """dp_accounting's pessimistic PLD of one Poisson-subsampled Gaussian round (sensitivity 1)."""
    return _dp_accounting().from_gaussian_mechanism(
        standard_deviation=sigma, sensitivity=1.0, sampling_prob=q, value_discretization_interval=value_discretization,
        pessimistic_estimate=True, use_connect_dots=True)


def _grid_sigma(sigma: NDArray, resolution: float) -> NDArray:
    """``sigma`` rounded down to the geometric grid (1 + resolution)^k (``resolution`` 0: unchanged)."""
    if resolution == 0:
        return sigma
    step = math.log1p(resolution)
    return np.minimum(np.exp(np.floor(np.log(sigma) / step) * step), sigma)


def _support(q: NDArray, sigma: NDArray) -> float:
    """The width (nats) of the composed privacy loss worth discretising (see :data:`MAX_SUPPORT`)."""
    mean = float(rdp_sgm(q=q, noise_multiplier=sigma, orders=2).sum())
    widest = float(np.max(10.0 / sigma + 0.5 / sigma**2))
    return mean + 10.0 * math.sqrt(2.0 * mean) + widest


def _composed_epsilon(q: NDArray, sigma: NDArray, delta: float, value_discretization: float | None,
                      resolution: float) -> float:
    """ε of one element's rounds (flat ``q``, ``sigma`` of equal length, validated): the PLD's, or the RDP ledger's
    where that is smaller (both are upper bounds) or the PLD would be too large to discretise."""
    if np.any((sigma == 0) & (q > 0)):  # no noise: the round reveals its data
        return math.inf
    leaks = (q > 0) & np.isfinite(sigma)  # q = 0 or infinite noise: the round reveals nothing
    if not leaks.any():
        return 0.0
    q, sigma = q[leaks], sigma[leaks]
    rdp = float(rdp_to_dp(rdp_sgm(q=q, noise_multiplier=sigma, orders=DEFAULT_ORDERS).sum(axis=0), DEFAULT_ORDERS,
                          delta)[0])
    if value_discretization is None:
        value_discretization = min(1e-2, DISCRETIZATION_ROUNDS / len(q))
    if _support(q, sigma) / value_discretization > MAX_SUPPORT:
        return rdp
    groups, counts = np.unique(np.stack([q, _grid_sigma(sigma, resolution)]), axis=1, return_counts=True)
    parts = []
    for (rate, noise), count in zip(groups.T, counts):
        pld = _round_pld(float(rate), float(noise), value_discretization)
        parts += [pld.self_compose(int(count))] if count >= SELF_COMPOSE_FROM else [pld] * int(count)
    while len(parts) > 1:  # a balanced tree: each composition convolves supports of similar length
        parts = [parts[i].compose(parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return min(max(float(parts[0].get_epsilon_for_delta(delta)), 0.0), rdp)


def pld_epsilon(*, q: ArrayLike, noise_multiplier: ArrayLike, delta: float,
                value_discretization: float | None = None,
                sigma_resolution: float = SIGMA_RESOLUTION) -> NDArray:
    """ε at ``delta`` of the composition of a schedule of rounds, each a Poisson-subsampled Gaussian mechanism.

    Args:
        q: each round's sampling rate in [0, 1]; rounds on the first axis, broadcast against ``noise_multiplier``
            aligned on that axis (a scalar, rates per round (T,), or per round and element).
        noise_multiplier: each round's noise std over its L2 sensitivity (dimensionless), >= 0 (``inf``: the round
            reveals nothing; 0 with q > 0: ε = inf); shape (rounds, *batch): one schedule per batch element.
        delta: the δ of the (ε, δ) guarantee, in (0, 1).
        value_discretization: width of the privacy-loss grid of each round's PLD (dp_accounting's
            ``value_discretization_interval``), in nats; smaller is tighter and slower, every width is pessimistic.
            ``None``: :data:`DISCRETIZATION_ROUNDS` over the number of rounds, at most 1e-2.
        sigma_resolution: relative step of the grid each sigma is rounded down to before composing (0: none).

    Returns:
        ε (nats) of each batch element's composed rounds, shape ``batch`` (a float array of shape () for one
        schedule): an upper bound on the exact ε of the schedule (pessimistic discretisation, sigma rounded down),
        never above the RDP ledger's ε at :data:`DEFAULT_ORDERS` (both are upper bounds: the smaller is returned).
        A schedule whose PLD would need more than :data:`MAX_SUPPORT` points (ε in the hundreds) gets the RDP
        ledger's ε without a PLD.
    """
    for name, value in (("q", q), ("noise_multiplier", noise_multiplier)):
        if value is None:
            raise ValueError(f"{name} is required: a number or an array of them per round; got None")
    q_arr, sigma_arr = (np.asarray(v, dtype=float) for v in (q, noise_multiplier))
    _validate_q_sigma(q_arr, sigma_arr)
    # a finite sigma beyond HUGE_SIGMA is rounded down to it (more loss, still an upper bound): its 1/sigma^2 would
    # underflow and its grid's width overflow; the round's epsilon is below 1e-149 either way
    sigma_arr = np.where(np.isfinite(sigma_arr), np.minimum(sigma_arr, HUGE_SIGMA), sigma_arr)
    delta = _DELTA("delta", delta)
    if value_discretization is not None:
        value_discretization = _DISCRETIZATION("value_discretization", value_discretization)
    sigma_resolution = _RESOLUTION("sigma_resolution", sigma_resolution)
    q_arr, sigma_arr = np.atleast_1d(q_arr), np.atleast_1d(sigma_arr)
    ndim = max(q_arr.ndim, sigma_arr.ndim)  # aligned on the rounds' axis, the first: (T,) rates with (T, B) sigma
    q_b, s_b = np.broadcast_arrays(*(a.reshape(a.shape + (1,) * (ndim - a.ndim)) for a in (q_arr, sigma_arr)))
    if len(q_b) == 0:  # no rounds: nothing composed, nothing revealed
        return np.zeros(q_b.shape[1:])
    flat_q, flat_s = q_b.reshape(len(q_b), -1), s_b.reshape(len(s_b), -1)
    eps = [_composed_epsilon(flat_q[:, j], flat_s[:, j], delta, value_discretization, sigma_resolution)
           for j in range(flat_q.shape[1])]
    return np.array(eps).reshape(q_b.shape[1:])


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

    def epsilon(self, delta: float, rows: Sequence[int] | None = None) -> NDArray:
        """ε at ``delta`` of each element's rounds since its row's reset, shape ``batch`` (0 where none were
        played); ``rows``: only those rows (the others are 0)."""
        out = np.zeros(self.q.shape)
        if not self._rounds:
            return out
        sigma, rates = np.stack(self._rounds), np.stack(self._rates)
        for i in range(self.q.shape[0]) if rows is None else rows:
            start = self._start[i]
            if start < len(sigma):
                out[i] = pld_epsilon(q=rates[start:, i], noise_multiplier=sigma[start:, i], delta=delta,
                                     value_discretization=self.value_discretization,
                                     sigma_resolution=self.sigma_resolution)
        return out
