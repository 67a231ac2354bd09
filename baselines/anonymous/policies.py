"""Analytic policies for the anonymous over-the-air scheme (model C: Hasırcıoğlu & Gündüz, *Private Wireless
Federated Learning with Anonymous Over-the-Air Computation*, ICASSP 2021): constant noise levels.

Policies follow the protocol of :mod:`baselines.receive_scaling.core` with the env's ``action_type="sigma"`` (sigma per
coordinate, gradient units). sigma is public (the server hears it in the received noise power), so these policies use
the scenario only, never the round's a(t) or b_t.

* :class:`ConstantSigma`: a given sigma every round.
* :class:`CalibratedSigma`: the constant sigma with which an episode meets a target (eps, delta) with a given
  confidence (:func:`calibrate_sigma`, bisection on log sigma through the SGM accountant of :mod:`otagym.accounting`).
* :class:`PaperSetting`: the setting of the paper's Fig. 1, sigma' = 1 at the expected batch.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from numpy.typing import NDArray

from otagym.schemes.anonymous import (Accounting, AnonymousScenario, noise_multiplier, round_rdp,
                                      sample_batches)
from otagym.accounting import DEFAULT_ORDERS, rdp_to_dp

__all__ = ["BatchEpisodes", "calibrate_sigma", "ConstantSigma", "CalibratedSigma", "PaperSetting"]

#: Simulated episodes of batch sizes over which a calibration takes its quantile of eps.
EPISODES = 64
#: Bisection steps on log sigma once a bracket of width log 4 is found: 20 halvings reach 1.3e-6 relative.
BISECTION_STEPS = 20
#: The range searched, in units of ``scenario.sigma_unit`` (noise multipliers at the nominal batch).
SIGMA_BRACKET = (1e-6, 1e6)


class BatchEpisodes:
    """Simulated episodes of batch sizes b_t (``episodes`` x T draws of
    :func:`~otagym.schemes.anonymous.formulas.sample_batches`), stored as the distinct sizes and how often each
    occurs per episode, so an evaluation computes each RDP once."""

    def __init__(self, s: AnonymousScenario, rng: np.random.Generator, episodes: int = EPISODES) -> None:
        batches = sample_batches(s, rng, (episodes, s.num_rounds))
        self.scenario = s
        self.sizes, inverse = np.unique(batches, return_inverse=True)
        self.counts = np.zeros((episodes, self.sizes.size))
        np.add.at(self.counts, (np.arange(episodes)[:, None], inverse.reshape(batches.shape)), 1.0)

    def epsilons(self, sigma: float, *, orders: NDArray, accounting: Accounting | None = None) -> NDArray:
        """eps at the scenario's delta (eq. (6) over ``orders``) of every simulated episode at a constant sigma."""
        s = self.scenario
        per_size = round_rdp(s, noise_multiplier(sigma, s.clip_norm, self.sizes), accounting=accounting,
                             orders=orders)
        return rdp_to_dp(self.counts @ per_size, orders, s.delta)[0]


def calibrate_sigma(s: AnonymousScenario, target_epsilon: float, *, confidence: float = 0.95,
                    accounting: Accounting | None = None, orders: Sequence[float] = DEFAULT_ORDERS,
                    episodes: int = EPISODES, seed: int = 0) -> float:
    """The least constant sigma (gradient units) with which a ``confidence`` share of episodes ends with
    eps <= ``target_epsilon`` at the scenario's delta, by bisection on log sigma.

    The accounting uses each round's realised b_t (Theorem 1), so an episode's eps is random and right-skewed: the
    rare rounds in which few devices transmit (small b_t, small sigma') dominate it. Its distribution is simulated
    with :class:`BatchEpisodes` (a generator seeded with ``seed``); every episode's eps falls as sigma grows, so the
    quantile does too. Raises ValueError when the target is not reached within ``SIGMA_BRACKET`` x sigma_unit.
    """
    if not target_epsilon > 0:
        raise ValueError(f"target_epsilon must be > 0; got {target_epsilon!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1); got {confidence!r}")
    sim = BatchEpisodes(s, np.random.default_rng(seed), episodes)
    orders = np.asarray(orders, dtype=float)

    def meets(log_sigma: float) -> bool:
        eps = sim.epsilons(math.exp(log_sigma), orders=orders, accounting=accounting)
        return bool(np.quantile(eps, confidence, method="inverted_cdf") <= target_epsilon)

    lo_end, hi_end = (math.log(r * s.sigma_unit) for r in SIGMA_BRACKET)
    step = math.log(4.0)
    lo = hi = math.log(s.sigma_unit)
    while not meets(hi):  # widen upwards until the target is met, downwards until it is not
        lo, hi = hi, hi + step
        if hi > hi_end:
            raise ValueError(f"target_epsilon must be reachable with sigma <= {SIGMA_BRACKET[1]:g} x sigma_unit; "
                             f"got {target_epsilon!r}")
    while meets(lo) and lo > lo_end:
        lo, hi = lo - step, lo
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if meets(mid) else (mid, hi)
    return math.exp(hi)


class ConstantSigma:
    """sigma (gradient units, per coordinate) every round."""

    name = "constant"

    def __init__(self, sigma: float) -> None:
        self.sigma = float(sigma)

    def reset(self, scenario: AnonymousScenario, seed: int | None = None, **_: Any) -> None:
        """Nothing to plan."""

    def act(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        return np.full(np.shape(observation)[:-1] + (1,), self.sigma)


class CalibratedSigma(ConstantSigma):
    """The constant sigma with which a ``confidence`` share of episodes meets ``target_epsilon`` at the scenario's
    delta (:func:`calibrate_sigma`; ``orders`` should be the env's ``dp_orders``); recalibrated when the scenario
    changes."""

    name = "calibrated"

    def __init__(self, target_epsilon: float, *, confidence: float = 0.95, accounting: Accounting | None = None,
                 orders: Sequence[float] = DEFAULT_ORDERS, episodes: int = EPISODES, seed: int = 0) -> None:
        self.target_epsilon = target_epsilon
        self._kwargs = {"confidence": confidence, "accounting": accounting, "orders": orders, "episodes": episodes,
                        "seed": seed}
        self._planned_for: AnonymousScenario | None = None

    def reset(self, scenario: AnonymousScenario, seed: int | None = None, **_: Any) -> None:
        if scenario != self._planned_for:
            self.sigma = calibrate_sigma(scenario, self.target_epsilon, **self._kwargs)
            self._planned_for = scenario


class PaperSetting(ConstantSigma):
    """Fig. 1's setting (Delta f = sigma = 1): sigma' = 1 at the expected batch, sigma = 2L / max(E[b_t], 1)."""

    name = "paper"

    def __init__(self) -> None:
        self.sigma = float("nan")

    def reset(self, scenario: AnonymousScenario, seed: int | None = None, **_: Any) -> None:
        self.sigma = scenario.sigma_unit
