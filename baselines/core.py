"""The policy protocol and the convex per-round solvers the analytic policies share (model A, AdaScale paper §V-VII).

All solvers are batched over envs (and rounds) and call :class:`otagym.receive_scaling.ReceiveScalingModel`, the
same formulas the environment uses. Notation: L(x) = sum_m rho_alpha(q_m, sigma_m(x)) is the round's leakage,
c(x) = K (1/x - 1/x_max) with K = d sigma_n^2 / h_min^2 the convergence surrogate (28b); L is convex and increasing in
x, c convex and decreasing (Prop. 1).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otagym.receive_scaling import ReceiveScalingModel
from otagym.scenario import Scenario

__all__ = ["Policy", "minimize_round", "cost_slope_of_leakage", "expected_h_min2", "BISECTION_STEPS"]

#: Bisection steps on log x: the bracket spans at most ~28 nats (x_max * 1e-12 .. x_max), so 56 steps reach 1e-15.
BISECTION_STEPS = 56
X_FLOOR_RATIO = 1e-12


@runtime_checkable
class Policy(Protocol):
    """A receive-scaling policy: returns x_t (the env's ``action_type="x"``) from public information only.

    ``reset`` receives the scenario and a seed; ``act`` the observation and the info of the previous ``reset``/
    ``step`` (``next_h_min2``, ``next_channel_gain``, ``mean_channel_gain``, ``convergence_cost``...). Both work for a
    single env (scalars) and batched over a vector env (arrays over envs). Offline policies may also take the channel
    realisation (``channel_gains``) in ``reset``; online policies ignore it.
    """

    def reset(self, scenario: Scenario, seed: int | None = None, **offline: Any) -> None: ...

    def act(self, observation: NDArray, info: dict[str, Any]) -> NDArray: ...


def _bisect_log_x(model: ReceiveScalingModel, derivative, shape: tuple[int, ...], x_floor: float) -> NDArray:
    """Root of an increasing derivative on [x_floor, x_max] by bisection on log x (clipped to the ends)."""
    lo = np.full(shape, np.log(x_floor))
    hi = np.full(shape, np.log(model.x_max))
    at_max = derivative(np.exp(hi)) <= 0
    at_floor = derivative(np.exp(lo)) >= 0
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        up = derivative(np.exp(mid)) > 0
        hi = np.where(up, mid, hi)
        lo = np.where(up, lo, mid)
    x = np.exp(0.5 * (lo + hi))
    return np.where(at_max, model.x_max, np.where(at_floor, x_floor, x))


def minimize_round(
    model: ReceiveScalingModel,
    h_min2: ArrayLike,
    *,
    leak_weight: ArrayLike,
    cost_weight: ArrayLike,
    quad_weight: ArrayLike = 0.0,
    x_floor_ratio: float = X_FLOOR_RATIO,
) -> NDArray:
    """argmin over x in [x_floor, x_max] of  a L(x) + b c(x) + (g/2) c(x)^2, batched (a, b, g broadcast with h).

    With (a, b, g) = (V, Q_t, 1) this is AdaScale's problem (30); (V, Q_t, 0) the naive drift-plus-penalty;
    (1, mu, 0) the Lagrangian of the offline problem (28). The objective is convex (Prop. 1), so its derivative
    a L'(x) - K/x^2 (b + g c(x)) is increasing and bisection on it is exact.
    """
    h = np.asarray(h_min2, dtype=float)
    shape = np.broadcast_shapes(h.shape, np.shape(leak_weight), np.shape(cost_weight), np.shape(quad_weight))
    h = np.broadcast_to(h, shape)
    a, b, g = (np.broadcast_to(np.asarray(v, dtype=float), shape) for v in (leak_weight, cost_weight, quad_weight))
    k = model.cost_scale / h

    def derivative(x: NDArray) -> NDArray:
        cost = k * (1.0 / x - 1.0 / model.x_max)
        return a * model.leakage_slope(x, h) - k / (x * x) * (b + g * cost)

    return _bisect_log_x(model, derivative, shape, x_floor_ratio * model.x_max)


def cost_slope_of_leakage(model: ReceiveScalingModel, x: ArrayLike, h_min2: ArrayLike) -> NDArray:
    """-dL/dc at x: the leakage saved per unit of convergence cost spent, L'(x) x^2 / K (>= 0).

    Uses x(c) = x_max / (1 + x_max c h^2/(d sigma_n^2)) (the inverse of c), whose derivative is -x^2 / K.
    """
    h = np.asarray(h_min2, dtype=float)
    x = np.asarray(x, dtype=float)
    return model.leakage_slope(x, h) * x * x * h / model.cost_scale


def expected_h_min2(model: ReceiveScalingModel, mean_channel_gain: ArrayLike) -> NDArray:
    """MMSE estimate E[h_min^2] under i.i.d. Rayleigh fading: h_min^2 = min_m |h_m|^2/k_m^2 is the minimum of
    independent exponentials with rates PL_m k_m^2, hence Exponential with rate sum_m PL_m k_m^2 (SPEC §2).

    (E[1/|h|^2] is infinite under Rayleigh fading, so the estimate is of |h|^2, not of its inverse.)
    """
    rates = model.k2 / np.asarray(mean_channel_gain, dtype=float)
    return 1.0 / rates.sum(axis=-1)
