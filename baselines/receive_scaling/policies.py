"""Analytic receive-scaling policies for model A (§V and the benchmarks of §VII of Moradi Kalarde, Liang, Dong,
Eldemerdash Ahmed & Cheng, *Privacy Enhancement in Over-the-Air Federated Learning via Adaptive Receive Scaling*,
arXiv:2510.03860, the AdaScale paper).

Every policy returns x_t (use the env with ``action_type="x"``), works for one env (scalars) or batched over a vector
env (arrays over envs; hyperparameters may be arrays too), and uses only the scenario constants, the observation and
the info the env publishes (``next_h_min2``, ``mean_channel_gain``). :class:`OfflineOptimal` is the exception by
design: it is given the whole channel realisation at ``reset``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from baselines.receive_scaling.core import X_FLOOR_RATIO, minimize_round, solve_increasing
from otagym.accounting import tail_bound_budget
from otagym.schemes.receive_scaling import ReceiveScalingModel, Scenario
from otagym.schemes.receive_scaling.actions import (ACTION_CODES, ACTION_KEYS, BUDGET_ACTIONS, UNIT_ACTIONS,
                                                    ActionSettings, decode_actions)
from otagym.schemes.receive_scaling.actions import action_semantics as _action_semantics

__all__ = ["FullPower", "EqualAlloc", "AdaScale", "LyapunovDPP", "EstimFuture", "OfflineOptimal", "LiuSimeone",
           "LyapunovDPBudget", "ActionPolicy", "Budgeted", "ACTION_KEYS", "action_semantics"]


class _PolicyBase:
    """Shared bookkeeping: the model of the scenario, the round index and the convergence cost spent so far."""

    def __init__(self, nu: ArrayLike | None = None) -> None:
        self._nu = nu

    def reset(self, scenario: Scenario, seed: int | None = None, **offline: Any) -> None:
        self.scenario = scenario
        self.model = ReceiveScalingModel(scenario)
        self.nu = np.asarray(scenario.nu if self._nu is None else self._nu, dtype=float)
        if np.any(~(self.nu > 0)):
            raise ValueError(f"nu must be > 0; got {self.nu}")
        self.t = 0
        self.cost_sum: NDArray | float = 0.0

    def act(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        h = np.asarray(info["next_h_min2"], dtype=float)
        x = self._decide(h, info)
        self.cost_sum = self.cost_sum + self.model.convergence_cost(x, h)
        self.t += 1
        return x

    def _decide(self, h: NDArray, info: dict[str, Any]) -> NDArray:  # pragma: no cover - abstract
        raise NotImplementedError


class FullPower(_PolicyBase):
    """x_t = x_max every round: no convergence cost, the most leakage (a reference point, not matched to nu)."""

    def _decide(self, h: NDArray, info: dict[str, Any]) -> NDArray:
        return np.full(h.shape, self.model.x_max)


class EqualAlloc(_PolicyBase):
    """c_t(x_t) = nu every round: x_t = x_max / (1 + x_max nu h_min,t^2 / (d sigma_n^2)) (§VII, EqualAlloc)."""

    def _decide(self, h: NDArray, info: dict[str, Any]) -> NDArray:
        return self.model.x_for_cost(self.nu, h)


class _QueuePolicy(_PolicyBase):
    """Policies with the virtual queue of eq. (29): Q_{t+1} = max(Q_t + c_t(x_t) - nu, 0), Q_0 = 0."""

    def __init__(self, V: ArrayLike | None = None, nu: ArrayLike | None = None, c: float = 1.0,
                 beta: float = 1.5) -> None:
        super().__init__(nu)
        self._V, self.c, self.beta = V, c, beta

    def reset(self, scenario: Scenario, seed: int | None = None, **offline: Any) -> None:
        super().reset(scenario, seed)
        self.V = np.asarray(self.c * scenario.num_rounds**self.beta if self._V is None else self._V, dtype=float)
        if np.any(~(self.V > 0)):
            raise ValueError(f"V must be > 0; got {self.V}")
        self.queue: NDArray | float = 0.0
        self.queue_max: NDArray | float = 0.0

    def act(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        h = np.asarray(info["next_h_min2"], dtype=float)
        x = self._decide(h, info)
        cost = self.model.convergence_cost(x, h)
        self.queue = np.maximum(self.queue + cost - self.nu, 0.0)  # eq. (29)
        self.queue_max = np.maximum(self.queue_max, self.queue)
        self.cost_sum = self.cost_sum + cost
        self.t += 1
        return x


class AdaScale(_QueuePolicy):
    """AdaScale (Alg. 1): each round solve (30),

        min_x  V L_t(x) + Q_t c_t(x) + 1/2 c_t(x)^2  over 0 < x <= x_max,

    (convex for integer alpha, Prop. 1) by safeguarded Newton on its derivative
    (:func:`~otagym.schemes.receive_scaling.solver.minimize_round`), then update the queue by (29).

    The solver is warm-started at the previous round's receive scaling eta_{t-1} = x_{t-1} h_min,t-1^2 (x = eta /
    h_min,t^2): the leakage depends on eta alone (eq. (25)), so the minimiser in eta moves only with Q_t and the power
    limit, while x jumps with the fading. This saves a quarter of the solver's evaluations; the result is the same
    minimiser to ~1e-13.

    Args:
        V: the penalty weight; if None, V = c T^beta (Cor. 1: 1 < beta < 2 gives diminishing regret).
        nu: the convergence budget per round (default: the scenario's).
    """

    def reset(self, scenario: Scenario, seed: int | None = None, **offline: Any) -> None:
        super().reset(scenario, seed)
        self._eta: NDArray | None = None

    def _decide(self, h: NDArray, info: dict[str, Any]) -> NDArray:
        x = minimize_round(self.model, h, leak_weight=self.V, cost_weight=self.queue, quad_weight=1.0,
                           x_start=None if self._eta is None else self._eta / h)
        self._eta = x * h
        return x


class LyapunovDPP(_QueuePolicy):
    """Naive drift-plus-penalty on (28): min_x V L_t(x) + Q_t c_t(x), without AdaScale's 1/2 c^2 term (§V-B).

    With Q_t = 0 the minimiser runs to x -> 0 (here the floor ``x_floor_ratio * x_max``) and c_t explodes: the paper's
    point that standard Lyapunov optimisation fails when the constraint function is unbounded. Kept so users can see it.
    """

    def __init__(self, V: ArrayLike | None = None, nu: ArrayLike | None = None, c: float = 1.0, beta: float = 1.5,
                 x_floor_ratio: float = 1e-9) -> None:
        super().__init__(V, nu, c, beta)
        self.x_floor_ratio = x_floor_ratio

    def _decide(self, h: NDArray, info: dict[str, Any]) -> NDArray:
        return minimize_round(self.model, h, leak_weight=self.V, cost_weight=self.queue,
                              x_floor_ratio=self.x_floor_ratio)


class EstimFuture(_PolicyBase):
    """EstimFuture (§VII): each round, solve the convex problem (28) over the remaining rounds with the remaining
    budget B = nu T - sum_{tau<t} c_tau, replacing every unknown future h_min^2 by its MMSE estimate E[h_min^2]
    (closed form, :meth:`~otagym.schemes.receive_scaling.model.ReceiveScalingModel.expected_h_min2`).

    All estimated future rounds are identical, so by convexity they share the budget equally; the round's problem is
    then one-dimensional in the current round's cost z in [0, B]: min_z L_t(x(z)) + n L_hat(x_hat((B - z)/n)). Its
    optimum equalises the leakage saved per unit of cost, S = -dL/dc = L'(x) x^2 / K, now and in the estimated future:
    psi = log S_t(x_t) - log S_hat(x_hat) = 0, increasing in x_t on [x(B), x_max], solved by safeguarded Newton
    (:func:`~otagym.schemes.receive_scaling.solver.solve_increasing`; d log S / d log x = x L''/L' + 2, and
    d log x_hat / d log x_t = -x_hat K_t / (n K_hat x_t)).
    """

    def _decide(self, h: NDArray, info: dict[str, Any]) -> NDArray:
        model = self.model
        h_hat = model.expected_h_min2(info["mean_channel_gain"])
        budget = np.maximum(self.nu * self.scenario.num_rounds - self.cost_sum, 0.0) * np.ones(h.shape)
        n_future = self.scenario.num_rounds - self.t - 1
        if n_future == 0:
            return model.x_for_cost(budget, h)
        shape = np.broadcast_shapes(h.shape, np.shape(h_hat), budget.shape)
        h, h_hat, budget = (np.broadcast_to(v, shape).ravel() for v in (h, h_hat, budget))

        def log_ratio(x: NDArray, i: NDArray) -> tuple[NDArray, NDArray]:
            hi, hh = h[i], h_hat[i]
            k_now, k_hat = model.cost_scale / hi, model.cost_scale / hh
            x_hat = model.x_for_cost(np.maximum(budget[i] - model.convergence_cost(x, hi), 0.0) / n_future, hh)
            l1, l2 = model.leakage_slope_and_curvature(x, hi)
            m1, m2 = model.leakage_slope_and_curvature(x_hat, hh)
            psi = np.log(l1 * x * x / k_now) - np.log(m1 * x_hat * x_hat / k_hat)
            slope = x * l2 / l1 + 2.0 + (x_hat * m2 / m1 + 2.0) * x_hat * k_now / (n_future * k_hat * x)
            return psi, slope

        x = solve_increasing(log_ratio, h.size, model.x_for_cost(budget, h), model.x_max)
        return x.reshape(shape)


class OfflineOptimal(_PolicyBase):
    """Offline optimum of (28) with every channel known, through the Lagrangian dual: for a multiplier mu each round
    solves min_x L_t(x) + mu c_t(x), and mu is the one with (1/T) sum_t c_t = nu. A lower bound on the leakage of
    every online policy at the same nu.

    The round's minimiser is a receive scaling ``eta*(mu)`` that does not depend on the channel, capped by the power
    limit (:meth:`~otagym.schemes.receive_scaling.model.ReceiveScalingModel.price_receive_scaling`):
    ``eta_t = min(eta*, x_max
    h_min,t^2)``. So the dual search is one for a common water level eta, and it is solved exactly: bisection on
    log eta (the mean cost decreases in eta) finds which rounds sit at the power limit, and the closed form
    eta = d sigma_n^2 |S| / (nu T + d sigma_n^2 sum_{t in S} 1/(x_max h_t^2)) over the other rounds S gives eta;
    then mu = eta^2 L'(eta) / (d sigma_n^2). (Rounds at the floor x_floor, which no paper scenario reaches, are
    handled likewise.)

    ``reset(scenario, seed, channel_gains=...)`` takes the realisation |h|^2 as (T, M) or (T, N, M).
    """

    #: Bisection steps on log eta: the span (< 80 nats) halves to below the rounding of log eta.
    level_steps = 64

    def reset(self, scenario: Scenario, seed: int | None = None, **offline: Any) -> None:
        super().reset(scenario, seed)
        gains = offline.get("channel_gains")
        if gains is None:
            raise ValueError("OfflineOptimal needs the channel realisation: reset(..., channel_gains=(T, [N,] M))")
        gains = np.asarray(gains, dtype=float)
        if gains.shape[0] != scenario.num_rounds:
            raise ValueError(f"channel_gains must have num_rounds={scenario.num_rounds} rows; got {gains.shape[0]}")
        self.h_all = self.model.h_min2(gains)  # (T, ...)
        self.x_all, self.mu = self.solve(self.h_all, self.nu)

    def solve(self, h_all: NDArray, nu: ArrayLike) -> tuple[NDArray, NDArray]:
        """x (T, ...) and mu (...) with mean_t c_t(x_t) = nu (to rounding)."""
        model = self.model
        big_t = h_all.shape[0]
        # rounds last and contiguous: every sum over rounds runs along one row, the same whatever the batch
        h = np.ascontiguousarray(np.moveaxis(h_all, 0, -1))
        nu = np.broadcast_to(np.asarray(nu, dtype=float), h.shape[:-1])
        x_floor, x_max, k0 = X_FLOOR_RATIO * model.x_max, model.x_max, model.cost_scale
        floor_cost = model.convergence_cost(x_floor, h)  # c_t of a round at the floor

        def schedule(eta: NDArray) -> NDArray:
            return np.clip(eta[..., None] / h, x_floor, x_max)

        lo = np.log(x_floor * h.min(axis=-1))  # every round at the floor: the largest mean cost
        hi = np.log(x_max * h.max(axis=-1))  # every round at full power: cost 0
        for _ in range(self.level_steps):
            mid = 0.5 * (lo + hi)
            too_costly = model.convergence_cost(schedule(np.exp(mid)), h).mean(axis=-1) > nu  # raise eta
            lo = np.where(too_costly, mid, lo)
            hi = np.where(too_costly, hi, mid)
        eta = np.exp(0.5 * (lo + hi))
        interior = (x_floor * h < eta[..., None]) & (eta[..., None] < x_max * h)
        at_floor = eta[..., None] <= x_floor * h
        budget = nu * big_t - np.where(at_floor, floor_cost, 0.0).sum(axis=-1)
        n_interior = interior.sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            exact = k0 * n_interior / (budget + k0 * np.where(interior, 1.0 / (x_max * h), 0.0).sum(axis=-1))
        eta = np.where(n_interior > 0, exact, eta)
        return np.moveaxis(schedule(eta), -1, 0), model.cost_slope_of_leakage(eta, 1.0)

    def total_leakage(self) -> NDArray:
        """sum_t L_t of the solved schedule (objective (28a)), per realisation: the 100 of the normalised score."""
        return np.moveaxis(self.model.leakage(self.x_all, self.h_all), 0, -1).copy().sum(axis=-1)  # row by row

    def _decide(self, h: NDArray, info: dict[str, Any]) -> NDArray:
        return self.x_all[self.t]


class _DPBudget(_PolicyBase):
    """A DP budget eps_budget at delta through the Gaussian tail bound of Liu & Simeone
    (:func:`~otagym.accounting.tail_bound_budget`): sum_t r_t^2 / 2 <= R_dp(eps, delta), with r_t^2 = 1/sigma_m,t^2 =
    eta_t u_m (no subsampling credit, as in [20] and [23] of the AdaScale paper); the binding device has the largest
    u_m = 2 G^2 / (M^2 B_m^2 sigma_n^2). So the budget is one on sum_t eta_t <= 2 R_dp / u_max."""

    def __init__(self, epsilon_budget: ArrayLike, delta: float | None = None) -> None:
        super().__init__(None)
        self._eps, self._delta = epsilon_budget, delta

    def reset(self, scenario: Scenario, seed: int | None = None, **offline: Any) -> None:
        super().reset(scenario, seed)
        self.epsilon_budget = np.asarray(self._eps, dtype=float)
        delta = scenario.delta if self._delta is None else self._delta
        self.u_max = float(self.model.class_u_per_eta.max())
        self.r_dp = tail_bound_budget(self.epsilon_budget, delta)
        self.eta_budget = 2.0 * self.r_dp / self.u_max
        self.eta_sum: NDArray | float = 0.0

    def act(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        x = super().act(observation, info)
        self.eta_sum = self.eta_sum + x * np.asarray(info["next_h_min2"])
        return x


class LiuSimeone(_DPBudget):
    """The method of [20] of the AdaScale paper (Liu & Simeone, "privacy for free"): minimise sum_t c_t subject to
    the tail-bound DP budget, with MMSE estimates of future channels.

    Minimising sum_t K_t / x_t under sum_t eta_t <= E (eta_t = x_t h_t^2) gives, by the KKT conditions, the same
    eta in every round, clipped by the power limit eta_t <= x_max h_t^2. Online, the remaining budget E_rem is split
    between this round (``eta_t = min(eta*, x_max h_t^2)``) and n estimated future rounds
    (``min(eta*, x_max E[h^2])``).
    """

    def _decide(self, h: NDArray, info: dict[str, Any]) -> NDArray:
        model = self.model
        n = self.scenario.num_rounds - self.t - 1
        cap_now = model.x_max * h
        cap_future = model.x_max * model.expected_h_min2(info["mean_channel_gain"])
        remaining = np.maximum(self.eta_budget - self.eta_sum, 0.0) * np.ones(h.shape)
        # Solve min(e, a) + n min(e, b) = R for e (piecewise linear, increasing): three candidates.
        lo_cap = np.minimum(cap_now, cap_future)
        n_lo = np.where(cap_now <= cap_future, 1.0, float(n))  # how many share the lower cap
        n_hi = (1.0 + n) - n_lo
        e1 = remaining / (1.0 + n)
        e2 = (remaining - n_lo * lo_cap) / np.maximum(n_hi, 1e-300)
        eta_star = np.where(e1 <= lo_cap, e1, np.where(n_hi > 0, e2, np.inf))
        eta = np.minimum(eta_star, cap_now)
        return np.clip(eta / h, X_FLOOR_RATIO * model.x_max, model.x_max)


class LyapunovDPBudget(_DPBudget):
    """The method of [23] of the AdaScale paper (Shi, Yang & Wu: standard Lyapunov drift-plus-penalty on the DP
    budget): a virtual queue Z on the per-round tail-bound privacy loss eta_t u_max / 2 against R_dp / T,

        Z_{t+1} = max(Z_t + eta_t u_max / 2 - R_dp(eps_budget, delta) / T, 0),

    and each round min_x V c_t(x) + Z_t h_t^2 u_max x / 2, i.e. x_t = sqrt(2 V K_t / (Z_t h_t^2 u_max)) in
    [floor, x_max] (x_max while Z_t = 0).
    """

    def __init__(self, epsilon_budget: ArrayLike, V: ArrayLike = 1.0, delta: float | None = None) -> None:
        super().__init__(epsilon_budget, delta)
        self._V = V

    def reset(self, scenario: Scenario, seed: int | None = None, **offline: Any) -> None:
        super().reset(scenario, seed)
        self.V = np.asarray(self._V, dtype=float)
        self.queue: NDArray | float = 0.0
        self.per_round_budget = self.r_dp / scenario.num_rounds

    def _decide(self, h: NDArray, info: dict[str, Any]) -> NDArray:
        model = self.model
        k = model.cost_scale / h
        with np.errstate(divide="ignore"):
            x = np.sqrt(2.0 * self.V * k / (self.queue * h * self.u_max))
        x = np.clip(x, X_FLOOR_RATIO * model.x_max, model.x_max)
        self.queue = np.maximum(self.queue + x * h * self.u_max / 2.0 - self.per_round_budget, 0.0)
        return x


def action_semantics(scenario: Scenario, env_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """The :data:`ACTION_KEYS` as the env resolves them from ``env_kwargs`` (defaults and validation included,
    :func:`otagym.schemes.receive_scaling.actions.action_semantics`); {} for another scheme's scenario, whose actions a
    trained model plays in its own env."""
    if not isinstance(scenario, Scenario):
        return {}
    return _action_semantics(env_kwargs)


class ActionPolicy(_PolicyBase):
    """A policy that chooses the env's own action a in [-1, 1] (``price``, ``share``, ``normalized`` or ``spend``) and
    plays it as x_t through the env's own decoder (:func:`~otagym.schemes.receive_scaling.actions.decode_actions`, the
    compiled function the round calls), keeping the budget ledger
    R_t = nu T - sum c_tau as the env does. Subclasses implement :meth:`action` (observation and info -> a).

    Args:
        nu: the budget per round (array over envs allowed); default: the scenario's.
        action_type: ``"price"`` (the env's default), ``"share"``, ``"normalized"`` or ``"spend"``.
        price_decades: the env's argument of the same name.
        price_buffer_sd: the env's argument of the same name.
        budget_multiplier_max: the env's argument of the same name.
        x_min_ratio: the env's argument of the same name.
        env_kwargs: instead of the five above, the env keyword arguments the actions are meant for (a trained
            agent's ``run.json``, a task's settings), resolved with the env's defaults at ``reset``; the budget
            actions' ``budget_floor`` is read from them only.
    """

    def __init__(self, nu: ArrayLike | None = None, *, action_type: str = "price", price_decades: float = 2.0,
                 price_buffer_sd: float = 1.0, budget_multiplier_max: float = 100.0, x_min_ratio: float = 1e-3,
                 env_kwargs: dict[str, Any] | None = None) -> None:
        super().__init__(nu)
        self._semantics(action_type, price_decades, price_buffer_sd, budget_multiplier_max, x_min_ratio)
        self.env_kwargs = env_kwargs

    def _semantics(self, action_type: str, price_decades: float, price_buffer_sd: float,
                   budget_multiplier_max: float, x_min_ratio: float, budget_floor: float = 0.0) -> None:
        if action_type not in UNIT_ACTIONS:
            raise ValueError(f"action_type must be one of {UNIT_ACTIONS}; got {action_type!r}")
        self.action_type, self.price_decades = action_type, price_decades
        self.multiplier_max, self.x_min_ratio = budget_multiplier_max, x_min_ratio
        self.price_buffer_sd, self.budget_floor = price_buffer_sd, budget_floor

    def reset(self, scenario: Scenario, seed: int | None = None, **offline: Any) -> None:
        if self.env_kwargs is not None:
            kw = action_semantics(scenario, self.env_kwargs)
            self._semantics(kw["action_type"], kw["price_decades"], kw["price_buffer_sd"],
                            kw["budget_multiplier_max"], kw["x_min_ratio"], kw["budget_floor"])
        super().reset(scenario, seed, **offline)

    def action(self, observation: NDArray, info: dict[str, Any]) -> ArrayLike:  # pragma: no cover - abstract
        raise NotImplementedError

    def act(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        h = np.asarray(info["next_h_min2"], dtype=float)
        a = np.asarray(self.action(observation, info), dtype=float)
        a = np.clip(a.reshape(h.shape) if a.size == h.size else np.broadcast_to(a, h.shape), -1.0, 1.0)
        big_t = self.scenario.num_rounds
        budget = self.action_type in BUDGET_ACTIONS  # only the budget actions read the channel law
        mean = self.model.expected_h_min2(info["mean_channel_gain"]) if budget else 1.0
        settings = ActionSettings(ACTION_CODES[self.action_type], float(self.x_min_ratio), float(self.multiplier_max),
                                  float(self.price_decades), float(self.price_buffer_sd), float(self.budget_floor))
        x, cost = decode_actions(self.model, settings, a, h, nu=self.nu, remaining=self.nu * big_t - self.cost_sum,
                                 rounds_left=big_t - self.t, mean_h_min2=mean)
        self.cost_sum = self.cost_sum + cost
        self.t += 1
        return x


class Budgeted:
    """Plays an x-policy under budget mode's rule (the env's ``reward_mode="budget"``): each round's cost is capped at
    the budget left R_t = nu T - sum_{tau<t} c_tau and the last round spends all of R_t, so (1/T) sum_t c_t = nu on
    every realisation. The inner policy keeps its own state (AdaScale's queue follows the x it chose)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def reset(self, scenario: Scenario, seed: int | None = None, **offline: Any) -> None:
        self.inner.reset(scenario, seed, **offline)
        self.model, self.num_rounds = self.inner.model, scenario.num_rounds
        self.budget = self.inner.nu * scenario.num_rounds
        self.t, self.cost_sum = 0, 0.0

    def act(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        h = np.asarray(info["next_h_min2"], dtype=float)
        wanted = self.model.convergence_cost(self.inner.act(observation, info), h)
        left = np.maximum(self.budget - self.cost_sum, 0.0)
        cost = left if self.t == self.num_rounds - 1 else np.minimum(wanted, left)
        self.cost_sum = self.cost_sum + cost
        self.t += 1
        return self.model.x_for_cost(cost, h)
