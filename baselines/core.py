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

__all__ = ["Policy", "minimize_round", "cost_slope_of_leakage"]

#: Iteration cap of the safeguarded Newton solver: the bracket spans <= 28 nats of log x and is at least halved every
#: two iterations (rtsafe rule), so 120 iterations always reach 1e-13; typically it stops after ~10.
NEWTON_STEPS = 120
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


def _newton_log_x(model: ReceiveScalingModel, derivatives, shape: tuple[int, ...], x_floor: float) -> NDArray:
    """Root of an increasing derivative f'(x) on [x_floor, x_max], found in y = log x (Numerical Recipes' rtsafe).

    A Newton step y - f'/(x f'') is taken only if it stays inside the bracket (tightened every iteration by the sign
    of f') and is less than half the previous step; otherwise the midpoint. Plain Newton is not enough: near x -> 0,
    f' ~ -K^2/x^3 is a power law on which Newton advances 1/3 nat per step.
    """
    lo = np.full(shape, np.log(x_floor))
    hi = np.full(shape, np.log(model.x_max))
    at_max = derivatives(np.exp(hi))[0] <= 0
    at_floor = derivatives(np.exp(lo))[0] >= 0
    y = hi - 1.0
    step = hi - lo
    step_old = step.copy()
    for _ in range(NEWTON_STEPS):
        x = np.exp(y)
        d1, d2 = derivatives(x)
        up = d1 > 0
        hi = np.where(up, y, hi)
        lo = np.where(up, lo, y)
        slope = d2 * x  # d f' / d y
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = d1 / slope
        y_newton = y - newton
        use_newton = (y_newton > lo) & (y_newton < hi) & (np.abs(2.0 * newton) <= np.abs(step_old))
        step_old = step
        step = np.where(use_newton, newton, 0.5 * (hi - lo))
        y = np.where(use_newton, y_newton, 0.5 * (lo + hi))
        if np.max(np.abs(step), initial=0.0) < 1e-13:
            break
    return np.where(at_max, model.x_max, np.where(at_floor, x_floor, np.exp(y)))


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
    f' = a L'(x) - K/x^2 (b + g c(x)) is increasing; f'' = a L''(x) + 2K/x^3 (b + g c(x)) + g K^2/x^4.
    """
    h = np.asarray(h_min2, dtype=float)
    shape = np.broadcast_shapes(h.shape, np.shape(leak_weight), np.shape(cost_weight), np.shape(quad_weight))
    h = np.broadcast_to(h, shape)
    a, b, g = (np.broadcast_to(np.asarray(v, dtype=float), shape) for v in (leak_weight, cost_weight, quad_weight))
    k = model.cost_scale / h
    inv_x_max = 1.0 / model.x_max

    def derivatives(x: NDArray) -> tuple[NDArray, NDArray]:
        l1, l2 = model.leakage_slope_and_curvature(x, h)
        cost = k * (1.0 / x - inv_x_max)
        k_x2 = k / (x * x)
        return a * l1 - k_x2 * (b + g * cost), a * l2 + 2.0 * k_x2 / x * (b + g * cost) + g * k_x2 * k_x2

    return _newton_log_x(model, derivatives, shape, x_floor_ratio * model.x_max)


def cost_slope_of_leakage(model: ReceiveScalingModel, x: ArrayLike, h_min2: ArrayLike) -> NDArray:
    """-dL/dc at x: the leakage saved per unit of convergence cost spent, L'(x) x^2 / K (>= 0).

    Uses x(c) = x_max / (1 + x_max c h^2/(d sigma_n^2)) (the inverse of c), whose derivative is -x^2 / K.
    """
    h = np.asarray(h_min2, dtype=float)
    x = np.asarray(x, dtype=float)
    return model.leakage_slope(x, h) * x * x * h / model.cost_scale
