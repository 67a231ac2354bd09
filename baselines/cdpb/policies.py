"""CDPB planning and policies (model B: Kim, Seo & Choi, *Privacy-Enhanced Over-the-Air Federated Learning via
Client-Driven Power Balancing*, arXiv:2410.05907, §IV-V): the two-stage optimiser and the paper's baselines.

The planner sees the channel distribution only and works with the expected per-round terms of
:func:`otagym.schemes.cdpb.formulas.expected_round_terms` -- the same formulas the environment evaluates on realised
channels: B(rho) = 4 M^2 G / E[K_t] + E[sigma_q^2] / (E[K_t]^2 rho) and eps_1(rho), the worst client's RDP per round, so
that G(rho, tau) = lambda_1 6 B(rho) / tau + lambda_2 tau eps_1(rho) (24). ``docs/cdpb.md`` derives and discusses each
step.

* Stage I (Lemmas 1-2): T = {tau_gamma,min, ..., tau_eps,max} with tau_gamma,min = ceil(6 B(rho_gamma) / gamma-bar)
  (27) and tau_eps,max = floor(eps-bar / eps_1(rho_eps)), the resolution of (31), whose printed right-hand side
  contains tau itself: eps = tau eps_1 is linear in tau, so eps <= eps-bar holds exactly up to that floor.
* Stage II (Theorem 3, Algorithms 2-3): rho_tau = argmin_rho G(rho, tau) for each tau in T, then the best pair.

Policies follow the protocol of :mod:`baselines.receive_scaling.core` with the env's ``action_type="rho"``;
:meth:`configure` gives the scenario a policy runs on (its horizon tau and, for the CSI-based baselines,
``csi_feedback``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otagym.schemes.cdpb import Accounting, CDPBScenario, expected_num_reliable, expected_round_terms, utility

__all__ = ["CDPBPlan", "StageOne", "rho_gamma_lemma1", "rho_theorem3", "minimize_weighted", "stage_one", "two_stage",
           "CDPB", "StageTwo", "largest_private_rho", "GammaBased", "MaxRho", "HminBased", "ISBased", "NoiseFree",
           "CDPB_POLICIES"]

#: Points of the geometric rho grid that brackets every 1-D minimum before the bisection of Algorithm 2 refines it.
GRID_POINTS = 2049
#: The grid spans [GRID_FLOOR * rho_max, rho_max].
GRID_FLOOR = 1e-6
#: Bisection steps of Algorithm 2 (N_max): the bracket is two grid cells (<= 1.4% of rho), so 50 halvings reach 1e-15.
BISECTION_STEPS = 50
#: Stage II enumerates T when it has at most this many elements (Algorithm 3); otherwise only the tau that are
#: optimal for some grid rho (plus neighbours), which contain the optimum of the integer problem.
MAX_ENUMERATED = 4096


def _grid(s: CDPBScenario) -> NDArray:
    return s.rho_max * np.geomspace(GRID_FLOOR, 1.0, GRID_POINTS)


def minimize_weighted(s: CDPBScenario, conv_weight: ArrayLike, priv_weight: ArrayLike, *,
                      accounting: Accounting | None = None) -> NDArray:
    """argmin over rho in (0, P/W^2] of conv_weight B(rho) + priv_weight eps_1(rho), batched over the weights.

    A geometric grid brackets the minimum; Algorithm 2 (bisection on the sign of the derivative, here a central
    difference) refines it inside the bracket. A minimum at rho_max (constraint (25e) active) is returned as rho_max.
    """
    wc = np.atleast_1d(np.asarray(conv_weight, dtype=float))
    wp = np.atleast_1d(np.asarray(priv_weight, dtype=float))
    wc, wp = np.broadcast_arrays(wc, wp)
    grid = _grid(s)
    term, eps1 = expected_round_terms(s, grid, accounting=accounting)
    i = np.argmin(wc[:, None] * term + wp[:, None] * eps1, axis=1)
    lo = grid[np.maximum(i - 1, 0)]
    hi = grid[np.minimum(i + 1, grid.size - 1)]

    def slope(rho: NDArray) -> NDArray:
        h = 1e-7 * rho
        t_hi, e_hi = expected_round_terms(s, rho + h, accounting=accounting)
        t_lo, e_lo = expected_round_terms(s, rho - h, accounting=accounting)
        return (wc * (t_hi - t_lo) + wp * (e_hi - e_lo)) / (2 * h)

    for _ in range(BISECTION_STEPS):  # Algorithm 2
        mid = 0.5 * (lo + hi)
        up = slope(mid) > 0
        hi = np.where(up, mid, hi)
        lo = np.where(up, lo, mid)
    rho = 0.5 * (lo + hi)
    return np.where(i == grid.size - 1, s.rho_max, rho).reshape(np.broadcast(conv_weight, priv_weight).shape)


def rho_gamma_lemma1(s: CDPBScenario) -> float:
    """rho_gamma of Lemma 1: eq. (28) for CDPB-n, eq. (29) for CDPB-i (identical sigma_k^2, sigma_z^2 ignored).

    (29) is the exact minimiser of B(rho) for idle clients. (28) is the stationary point of B after e^x ~ 1 + x
    (x = rho W^2 / (2 P sigma^2)); we write a_n = 4 M^2 G / W^2 - 1, which is the paper's 4 M^2 G - W^2 when W = 1
    (the printed a_n mixes units). Clipped to rho_max.
    """
    if np.ndim(s.channel_scale) != 0:
        raise ValueError("rho_gamma_lemma1 needs identical channel_scale for all clients (Lemma 1's assumption)")
    if not s.artificial_noise or s.strategy == "mixed":
        raise ValueError("Lemma 1 covers strategy 'noisy' or 'idle' with artificial noise; use minimize_weighted")
    w2, a = s.grad_bound**2, 4.0 * s.smoothness**2 * s.grad_second_moment / s.grad_bound**2
    p_sigma = s.power_max_w * float(s.channel_scale)
    if s.strategy == "noisy":
        rho = p_sigma * (math.sqrt(4 * (a - 1) + 9) - 1) / (w2 * (a - 1 + 2))
    else:
        rho = p_sigma * (math.sqrt(4 * a + 1) - 1) / (a * w2)
    return min(rho, s.rho_max)


def rho_theorem3(s: CDPBScenario, num_rounds: ArrayLike, *, iterations: int = 100) -> NDArray:
    """rho_tau of Theorem 3 (33) as printed, for CDPB-i: (2 P sigma^2 / W^2) sqrt(a / (W^2 (alpha - 1) / (2 P sigma^2)
    + b - 1)), a = lambda_1 / (lambda_2 tau^2 K_t W^2), b = 4 lambda_1 M^2 G / (lambda_2 tau^2 K_t).

    K_t depends on rho, so (33) is a fixed point; we iterate K_t = E[K_t] at rho, starting from rho_max. The formula
    is the minimiser of a linearised surrogate of G, not of G itself (``docs/cdpb.md``); it is kept for
    reproduction. Returns nan where the radicand is not positive (the formula has no solution there). Clipped to
    rho_max.
    """
    if np.ndim(s.channel_scale) != 0 or s.strategy != "idle":
        raise ValueError("Theorem 3 is stated for CDPB-i with identical channel_scale")
    tau = np.asarray(num_rounds, dtype=float)
    w2, ps = s.grad_bound**2, s.power_max_w * float(s.channel_scale)
    lam = s.lambda_convergence / s.lambda_privacy
    rho = np.full(tau.shape, s.rho_max)
    for _ in range(iterations):
        k_t = expected_num_reliable(s, rho)
        a = lam / (tau**2 * k_t * w2)
        b = 4.0 * lam * s.smoothness**2 * s.grad_second_moment / (tau**2 * k_t)
        den = w2 * (s.rdp_order - 1) / (2 * ps) + b - 1
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = np.minimum(2 * ps / w2 * np.sqrt(np.where(den > 0, a / den, np.nan)), s.rho_max)
    return rho


@dataclass(frozen=True)
class StageOne:
    """Stage I of §IV-A: the feasible horizons T = {tau_gamma_min, ..., tau_epsilon_max}."""

    rho_gamma: float
    tau_gamma_min: int
    rho_epsilon: float
    tau_epsilon_max: int

    @property
    def feasible(self) -> bool:
        return self.tau_gamma_min <= self.tau_epsilon_max


def stage_one(s: CDPBScenario, *, accounting: Accounting | None = None) -> StageOne:
    """Lemma 1 (rho_gamma by (28)/(29) where they apply, else the exact minimiser of B) and Lemma 2 resolved;
    tau_epsilon_max is capped at ``max_rounds``.

    rho_eps minimises eps_1 numerically; the paper's claim that it is P/W^2 holds for the Theorem-1 accounting at
    the preset but not in general (with the SGM accounting eps_1 grows with rho: less signal is more private).
    """
    try:
        rho_g = rho_gamma_lemma1(s)
    except ValueError:
        rho_g = float(minimize_weighted(s, 1.0, 0.0, accounting=accounting))
    term, _ = expected_round_terms(s, rho_g, accounting=accounting)
    tau_g = max(1, math.ceil(6.0 * float(term) / s.gamma_max))  # (27)
    rho_e = float(minimize_weighted(s, 0.0, 1.0, accounting=accounting))
    _, eps1 = expected_round_terms(s, rho_e, accounting=accounting)
    tau_e = math.floor(s.epsilon_max / float(eps1)) if eps1 > 0 else s.max_rounds  # (31) resolved
    return StageOne(rho_g, tau_g, rho_e, int(min(tau_e, s.max_rounds)))


@dataclass(frozen=True)
class CDPBPlan:
    """The result of Algorithm 3: (rho_opt, tau_opt), G there, and the Stage-II curve G(rho_tau, tau) over ``taus``."""

    rho: float
    num_rounds: int
    utility: float
    gamma: float
    epsilon: float
    stage_one: StageOne
    taus: NDArray
    rhos: NDArray
    utilities: NDArray

    @property
    def feasible(self) -> bool:
        return self.stage_one.feasible


def two_stage(s: CDPBScenario, *, accounting: Accounting | None = None, theorem3: bool = False) -> CDPBPlan:
    """Algorithm 3: Stage I, then rho_tau for every tau in T and the pair with the least G(rho, tau).

    ``theorem3=True`` (CDPB-i only) takes rho_tau from the printed closed form (33) instead of the exact minimiser
    (Algorithm 2's bisection on dG/drho, which we use for every strategy). When T is empty (the thresholds cannot
    both hold) the plan is infeasible and uses tau = tau_gamma,min.
    """
    one = stage_one(s, accounting=accounting)
    lo, hi = one.tau_gamma_min, max(one.tau_gamma_min, one.tau_epsilon_max)
    if hi - lo + 1 <= MAX_ENUMERATED:
        taus = np.arange(lo, hi + 1)
    else:  # tau*(rho) = sqrt(6 lambda_1 B / (lambda_2 eps_1)) minimises G over tau at fixed rho
        term, eps1 = expected_round_terms(s, _grid(s), accounting=accounting)
        with np.errstate(divide="ignore"):
            star = np.sqrt(6 * s.lambda_convergence * term / (s.lambda_privacy * eps1))
        cand = np.floor(star[np.isfinite(star)])[:, None] + np.arange(-1, 3)
        taus = np.unique(np.clip(cand, lo, hi).astype(np.int64))
    if theorem3:
        rhos = rho_theorem3(s, taus)
    else:
        rhos = minimize_weighted(s, 6.0 * s.lambda_convergence / taus, s.lambda_privacy * taus,
                                 accounting=accounting)
    g = utility(s, rhos, taus, accounting=accounting)
    best = int(np.nanargmin(g))
    term, eps1 = expected_round_terms(s, rhos[best], accounting=accounting)
    return CDPBPlan(rho=float(rhos[best]), num_rounds=int(taus[best]), utility=float(g[best]),
                    gamma=float(6.0 * term / taus[best]), epsilon=float(eps1 * taus[best]), stage_one=one,
                    taus=taus, rhos=rhos, utilities=g)


# --- policies ----------------------------------------------------------------------------------------------------
class _FixedRho:
    """A policy that plays one rho from the channel distribution (no CSI): CDPB, gamma-bar based, noise-free."""

    rho: float
    num_rounds: int
    name = "fixed"

    def configure(self, s: CDPBScenario) -> CDPBScenario:
        """The scenario this policy runs on (its planned horizon); call before ``reset``."""
        self._plan(s)
        self._planned_for = s.replace(num_rounds=1)
        return s.replace(num_rounds=self.num_rounds)

    def _plan(self, s: CDPBScenario) -> None:
        raise NotImplementedError

    def reset(self, scenario: CDPBScenario, seed: int | None = None, **_: Any) -> None:
        key = scenario.replace(num_rounds=1)  # the plan does not depend on the episode length
        if getattr(self, "_planned_for", None) != key:  # configure() has usually planned this scenario already
            self._plan(scenario)
            self._planned_for = key

    def act(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        return np.full(np.shape(observation)[:-1] + (1,), self.rho)


class CDPB(_FixedRho):
    """The proposed scheme: (rho_opt, tau_opt) of Algorithm 3 for the scenario's strategy (n / i / mixed).

    Args:
        accounting: the eps the planner trades against gamma (default: the scenario's).
        theorem3: use the printed Theorem 3 (33) in Stage II (CDPB-i only).
    """

    name = "cdpb"

    def __init__(self, accounting: Accounting | None = None, theorem3: bool = False) -> None:
        self.accounting = accounting
        self.theorem3 = theorem3

    def _plan(self, s: CDPBScenario) -> None:
        self.plan = two_stage(s, accounting=self.accounting, theorem3=self.theorem3)
        self.rho, self.num_rounds = self.plan.rho, self.plan.num_rounds


class StageTwo(_FixedRho):
    """The planner when the horizon is given: rho_tau = argmin_rho G(rho, tau) (Stage II, Algorithm 2) at the
    episode's own tau (the scenario's ``num_rounds``) instead of Algorithm 3's tau_opt, subject to the privacy
    threshold (25c) at that tau, tau eps_1(rho) <= eps-bar. The CDPB benchmark task's analytic reference (its episodes
    have a fixed T).

    Where the unconstrained minimiser breaks (25c), the constrained one is the largest rho that meets it,
    :func:`largest_private_rho` (G is unimodal in rho and eps_1 increases with it).

    Args:
        accounting: the eps the planner trades against gamma (default: the scenario's).
    """

    name = "stage_two"

    def __init__(self, accounting: Accounting | None = None) -> None:
        self.accounting = accounting

    def _plan(self, s: CDPBScenario) -> None:
        tau = s.num_rounds
        rho = float(minimize_weighted(s, 6.0 * s.lambda_convergence / tau, s.lambda_privacy * tau,
                                      accounting=self.accounting))
        self.rho = min(rho, largest_private_rho(s, tau, accounting=self.accounting))
        self.num_rounds = tau

    def reset(self, scenario: CDPBScenario, seed: int | None = None, **_: Any) -> None:
        if getattr(self, "_planned_for", None) != scenario:  # the plan depends on tau
            self._plan(scenario)
            self._planned_for = scenario


def largest_private_rho(s: CDPBScenario, num_rounds: int, *, accounting: Accounting | None = None) -> float:
    """The largest rho in (0, P/W^2] with num_rounds eps_1(rho) <= eps-bar (25c), eps_1 the expected worst client's
    RDP per round: P/W^2 if it meets the threshold, else the root of num_rounds eps_1(rho) = eps-bar, bracketed on the
    planner's grid and bisected to 1e-15 relative.

    Raises ValueError where eps_1 does not increase with rho on the grid (then (25c) is not an upper bound on rho;
    the SGM accounting of the presets increases: less signal is more private) or where no rho meets the threshold.
    """
    grid = _grid(s)
    _, eps1 = expected_round_terms(s, grid, accounting=accounting)
    if np.any(np.diff(eps1) < 0):
        raise ValueError("largest_private_rho needs eps_1 increasing in rho (the SGM accounting); "
                         f"got accounting={accounting or s.accounting!r}")
    spent = num_rounds * eps1
    if spent[-1] <= s.epsilon_max:
        return float(s.rho_max)
    if spent[0] > s.epsilon_max:
        raise ValueError(f"epsilon_max = {s.epsilon_max:g} is below num_rounds eps_1 at the least rho "
                         f"{grid[0]:.3g} ({spent[0]:.3g}): no rho meets (25c)")
    i = int(np.searchsorted(spent, s.epsilon_max, side="right"))  # spent[i - 1] <= eps-bar < spent[i]
    lo, hi = float(grid[i - 1]), float(grid[i])
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if num_rounds * float(expected_round_terms(s, mid, accounting=accounting)[1]) <= s.epsilon_max:
            lo = mid
        else:
            hi = mid
    return lo


class MaxRho(_FixedRho):
    """rho = P/W^2 every round (the largest feasible rho (25e): a client is reliable when its gain is at least W^2/P
    = 1 at the preset): the simplest policy, the 0 of the CDPB task's score."""

    name = "max_rho"

    def _plan(self, s: CDPBScenario) -> None:
        self.rho, self.num_rounds = s.rho_max, s.num_rounds


class GammaBased(_FixedRho):
    """gamma-bar based (§V): meets the convergence threshold fastest and ignores privacy: rho_gamma, tau_gamma,min."""

    name = "gamma_based"

    def _plan(self, s: CDPBScenario) -> None:
        one = stage_one(s)
        self.rho, self.num_rounds = one.rho_gamma, one.tau_gamma_min


class NoiseFree(CDPB):
    """Noise-free (§V): CDPB planned and run with sigma_r^2 = 0 (receiver noise only)."""

    name = "noise_free"

    def configure(self, s: CDPBScenario) -> CDPBScenario:
        return super().configure(s.replace(artificial_noise=False))


class HminBased:
    """h_min based (§V; [9] of the CDPB paper, Liu & Simeone, "privacy for free"): with CSI every round,
    rho_t = P h_min,t / W^2 so that every client transmits.

    Runs with ``csi_feedback=True`` (the server knows who transmits, so no amplification by participation) over the
    horizon given to :meth:`configure` (default: the scenario's ``num_rounds``).
    """

    name = "hmin_based"

    def __init__(self, num_rounds: int | None = None) -> None:
        self.num_rounds = num_rounds

    def configure(self, s: CDPBScenario) -> CDPBScenario:
        return s.replace(csi_feedback=True, num_rounds=self.num_rounds or s.num_rounds)

    def reset(self, scenario: CDPBScenario, seed: int | None = None, **_: Any) -> None:
        if not scenario.csi_feedback:
            raise ValueError(f"{type(self).__name__} needs csi_feedback=True (use configure())")
        self.scenario = scenario

    def _weakest(self, info: dict[str, Any]) -> NDArray:
        return np.min(info["next_channel_gain"], axis=-1)

    def act(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        s = self.scenario
        rho = np.minimum(s.power_max_w * self._weakest(info) / s.grad_bound**2, s.rho_max)
        return np.asarray(rho)[..., None]


class ISBased(HminBased):
    """Independent-sampling based (§V; [8] of the CDPB paper, Mohamed, Chang & Tandon, "Privacy amplification for
    federated learning via user sampling and wireless aggregation"): clients take part with probability ``sampling``
    regardless of their channel; via CSI feedback the server knows the sampled set and picks
    rho_t = P min_{sampled} h / W^2, so every sampled client transmits and its participation is known (no
    amplification)."""

    name = "is_based"

    def __init__(self, sampling: float = 0.5, num_rounds: int | None = None) -> None:
        super().__init__(num_rounds)
        self.sampling = sampling

    def configure(self, s: CDPBScenario) -> CDPBScenario:
        return super().configure(s).replace(client_sampling=self.sampling)

    def _weakest(self, info: dict[str, Any]) -> NDArray:
        h = np.where(info["next_sampled"], info["next_channel_gain"], np.inf)
        return np.min(h, axis=-1)  # nobody sampled: inf, so act() plays rho_max


#: name -> (policy factory, scenario overrides) used by ``otagym compare --scheme cdpb``.
CDPB_POLICIES: dict[str, Any] = {
    "CDPB-n": (CDPB, {"strategy": "noisy"}),
    "CDPB-i": (CDPB, {"strategy": "idle"}),
    "CDPB-mixed": (CDPB, {"strategy": "mixed"}),
    "gamma-based": (GammaBased, {"strategy": "idle"}),
    "hmin-based": (HminBased, {"strategy": "idle"}),
    "IS-based": (ISBased, {"strategy": "idle"}),
    "noise-free": (NoiseFree, {"strategy": "idle"}),
}
