"""One round of the PLD accountant (:mod:`otagym.accounting.pld`): the privacy loss distribution of a
Poisson-subsampled Gaussian mechanism (sampling rate q, noise multiplier sigma; add-or-remove neighbours) as the
pessimistic connect-the-dots discretisation of Doroshenko, Ghazi, Kamath, Kumar & Manurangsi ("Connect the dots",
PETS 2022, Algorithm 1) on a grid of width d: its hockey-stick divergence delta(eps) in closed form on the whole grid
at once, the two pairs (remove, add) and their tails as Google's ``dp_accounting`` builds them
(``from_gaussian_mechanism(..., use_connect_dots=True)``, tested equal to 1e-10); and the moments of the per-round
loss that set the grid.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

__all__ = ["LossPMF", "round_pld", "loss_range", "loss_sd"]

#: Gauss-Hermite nodes and weights (probabilists'), for the per-round privacy loss's moments that set the grid.
_HERMITE = np.polynomial.hermite_e.hermegauss(64)


def _remove_loss(x: NDArray, q: ArrayLike, sigma: ArrayLike) -> NDArray:
    """The privacy loss at output x of the remove pair: upper (1 - q) N(0, s^2) + q N(-1, s^2), lower N(0, s^2)
    (elementwise; at q = 1 the plain Gaussian's, ln(1 - q) being -inf)."""
    with np.errstate(divide="ignore"):
        return np.logaddexp(np.log(q) + (-0.5 - np.asarray(x)) / np.square(sigma), np.log1p(-np.asarray(q)))


def _add_loss(x: NDArray, q: float, sigma: float) -> NDArray:
    """The privacy loss at x of the add pair: upper N(0, s^2), lower (1 - q) N(0, s^2) + q N(1, s^2)."""
    return -_remove_loss(-x, q, sigma)


def _log1p_expm1_over(e: NDArray, q: float) -> NDArray:
    """ln(1 + (e^e - 1) / q) (the loss before subsampling whose subsampled loss is e), for e > ln(1 - q), without
    overflow: e + ln(1 - (1 - q) e^-e) - ln q for e > 0 (dp_accounting's ``log_a_times_exp_b_plus_c``)."""
    out = np.empty_like(e)
    small = e <= 0
    out[small] = np.log1p(np.expm1(e[small]) / q)
    big = e[~small]
    out[~small] = big + np.log1p(-(1.0 - q) * np.exp(-big)) - math.log(q)
    return out


def _remove_delta(eps: NDArray, q: float, sigma: float) -> NDArray:
    """The eps-hockey-stick divergence of the remove pair (dp_accounting's ``get_delta_for_epsilon``), vectorised:
    the upper's mass where the loss is at least eps, less e^eps the lower's, at the inverse x of the loss."""
    out = np.empty_like(eps)
    flat = eps <= (math.log1p(-q) if q < 1.0 else -math.inf)  # the loss never falls below log(1 - q)
    out[flat] = -np.expm1(eps[flat])
    e = eps[~flat]
    x = -0.5 - (e if q == 1.0 else _log1p_expm1_over(e, q)) * sigma**2
    log_lower = special.log_ndtr(x / sigma)
    upper = special.ndtr((x + 1.0) / sigma)
    if q < 1.0:
        upper = (1.0 - q) * np.exp(log_lower) + q * upper
    out[~flat] = upper - np.exp(e + log_lower)
    return np.clip(out, 0.0, 1.0)


def _add_delta(eps: NDArray, q: float, sigma: float) -> NDArray:
    """The eps-hockey-stick divergence of the add pair, vectorised (0 from eps = -log(1 - q) on)."""
    out = np.zeros_like(eps)
    live = eps < -math.log1p(-q)
    e = eps[live]
    x = 0.5 + _log1p_expm1_over(-e, q) * sigma**2
    log_upper = special.log_ndtr(x / sigma)
    lower = np.logaddexp(math.log1p(-q) + log_upper, math.log(q) + special.log_ndtr((x - 1) / sigma))
    out[live] = np.exp(log_upper) - np.exp(e + lower)
    return np.clip(out, 0.0, 1.0)


def _connect_dots(deltas: NDArray, d: float) -> tuple[NDArray, float]:
    """Masses on a grid of width d and the mass at infinity whose hockey-stick divergence equals ``deltas`` at the
    grid's points and lies above it between them: "Connect the dots", Algorithm 1 (dp_accounting's
    ``create_pmf_pessimistic_connect_dots_fixed_gap``, without its dictionary)."""
    deltas = np.minimum.accumulate(deltas)
    if len(deltas) == 1:
        return np.array([1.0 - deltas[0]]), float(deltas[0])
    diffs = np.diff(deltas)
    probs = np.empty_like(deltas)
    shrink, scale = math.exp(-d), -math.expm1(-d)  # the paper's e^d and e^d - 1 over e^d: no overflow at a wide d
    probs[0] = 1.0 - deltas[0] + diffs[0] * shrink / scale
    probs[1:-1] = (diffs[1:] * shrink - diffs[:-1]) / scale
    probs[-1] = -diffs[-1] / scale
    return np.maximum(probs, 0.0), float(deltas[-1])


@dataclass(frozen=True)
class LossPMF:
    """A discrete privacy-loss distribution: mass ``probs[i]`` at loss ``(lower + i) d``, ``infinity_mass`` at +inf;
    the finite part's variance in grid steps."""

    lower: int
    probs: NDArray
    infinity_mass: float
    var: float

    @classmethod
    def of(cls, lower: int, probs: NDArray, infinity_mass: float) -> LossPMF:
        steps = np.arange(len(probs), dtype=float)
        mass = float(probs.sum())
        mean = float(steps @ probs) / mass if mass > 0 else 0.0
        return cls(lower, probs, infinity_mass, float(((steps - mean) ** 2) @ probs) / mass if mass > 0 else 0.0)

    @property
    def upper(self) -> int:
        return self.lower + len(self.probs) - 1


def _truncation_x(sigma: float, log_mass: float) -> float:
    """The output below which (and mirrored above which) the noise's mass goes to infinity (dp_accounting's tails)."""
    return sigma * float(special.ndtri(0.5 * math.exp(log_mass)))


@functools.lru_cache(maxsize=65536)
def loss_range(q: float, sigma: float, log_mass: float) -> tuple[float, float]:
    """The smallest and largest finite loss of a round's remove pair (the add pair's range is no wider)."""
    x = _truncation_x(sigma, log_mass)
    return float(_remove_loss(np.array(-x), q, sigma)), float(_remove_loss(np.array(x - 1.0), q, sigma))


@functools.lru_cache(maxsize=4096)
def round_pld(q: float, sigma: float, d: float, log_mass: float) -> tuple[LossPMF, LossPMF]:
    """The remove and add halves of one round's pessimistic connect-the-dots PLD on the grid of width d (one, twice,
    at q = 1): dp_accounting's ``from_gaussian_mechanism(sigma, sampling_prob=q, value_discretization_interval=d,
    log_mass_truncation_bound=log_mass)``."""
    x = _truncation_x(sigma, log_mass)
    halves = []
    for loss, delta, low, high in ((_remove_loss, _remove_delta, x - 1.0, -x), (_add_loss, _add_delta, x, 1.0 - x)):
        first = math.floor(float(loss(np.array(high), q, sigma)) / d)
        last = math.ceil(float(loss(np.array(low), q, sigma)) / d)
        probs, infinity = _connect_dots(delta(np.arange(first, last + 1) * d, q, sigma), d)
        halves.append(LossPMF.of(first, probs, infinity))
        if q == 1.0:  # the two pairs are one
            return halves[0], halves[0]
    return halves[0], halves[1]


def loss_sd(q: ArrayLike, sigma: ArrayLike) -> NDArray:
    """The standard deviation (nats) of one round's privacy loss under its remove pair's upper distribution,
    elementwise over q and sigma (broadcast)."""
    nodes, weights = _HERMITE
    q, sigma = (np.asarray(v, dtype=float)[..., None] for v in (q, sigma))
    x = sigma * nodes
    weights = weights / weights.sum()
    law = [(1.0 - q, _remove_loss(x, q, sigma)), (q, _remove_loss(x - 1.0, q, sigma))]  # the upper's two parts
    mean = sum(w * (loss @ weights)[..., None] for w, loss in law)
    return np.sqrt(np.maximum(sum(w[..., 0] * (((loss - mean) ** 2) @ weights) for w, loss in law), 0.0))
