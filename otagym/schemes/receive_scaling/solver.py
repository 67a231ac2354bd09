"""Receive scaling -- the convex round solver: :func:`minimize_round` (AdaScale's problem (30), the drift-plus-penalty
round and the Lagrangian of the offline problem (28)) on :func:`solve_increasing`, a batched safeguarded Newton
root finder (Numerical Recipes' rtsafe) whose elements stop on their own.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otagym.schemes.receive_scaling.formulas import X_FLOOR_RATIO
from otagym.schemes.receive_scaling.model import ReceiveScalingModel

__all__ = ["minimize_round", "solve_increasing", "NEWTON_STEPS", "NEWTON_TOL", "AT_MAX_RTOL"]

#: Iteration cap of the safeguarded Newton solver: the bracket spans <= 28 nats of log x and is at least halved every
#: two iterations (rtsafe rule), so 120 iterations always reach 1e-13; typically an element stops after 4-8.
NEWTON_STEPS = 120
#: An element of the solver stops after the Newton step from a point where |psi| <= this (psi is a log-ratio).
NEWTON_TOL = 1e-9
#: The solver returns x_max for a root within this relative distance of it.
AT_MAX_RTOL = 1e-12


def _logit_x(y: NDArray, x_max: float) -> NDArray:
    """v = log(x / (x_max - x)) from y = log x < log x_max."""
    return y - np.log(x_max - np.exp(y))


def _x_of_logit(v: NDArray, x_max: float) -> NDArray:
    """x = x_max / (1 + e^-v), the inverse of :func:`_logit_x`."""
    return x_max / (1.0 + np.exp(-v))


def solve_increasing(log_ratio, n: int, x_floor: ArrayLike, x_max: float, y_start: NDArray | None = None) -> NDArray:
    """Roots on [x_floor, x_max] of n increasing functions psi of x (Numerical Recipes' rtsafe), batched; ``x_floor``
    is a scalar or one per element.

    ``log_ratio(x, i)`` returns (psi, d psi / d log x) of the elements ``i`` (an index array) at ``x``. A Newton step
    on log x (where psi is smooth in log x), or else on v = log(x / (x_max - x)) (next to x_max, where with an empty
    queue psi ~ -log(x_max - x) is nearly linear in v), is taken only if it stays inside the bracket (tightened every
    iteration by the sign of psi) and is less than half the step before the previous one (in units of v); otherwise
    the midpoint of the bracket in v (which is log x - log x_max far below x_max).

    Each element stops on its own (so its result does not depend on the rest of the batch): once |psi| <=
    :data:`NEWTON_TOL` or the Newton step would move x by less than its rounding, after that step (Newton converges
    quadratically, so the error left is ~ that squared, below the rounding of psi), or once its bracket is narrower
    than 1e-13 in v. The ends are evaluated only when a step would pass one (the root is then at the end if psi keeps
    its sign there). A root within :data:`AT_MAX_RTOL` of x_max is returned as x_max. ``y_start`` (n,) is a warm start
    in log x (e.g. the previous round's solution); default log x_max - 1.
    """
    x_floor = np.broadcast_to(np.asarray(x_floor, dtype=float), (n,))
    x_near_max = x_max * (1.0 - AT_MAX_RTOL)
    # a floor at (or rounding above) the top would leave no bracket: the bracket starts just below x_near_max
    x_low = np.minimum(x_floor, x_max * (1.0 - 2.0 * AT_MAX_RTOL))
    every = np.arange(n)
    y = np.full(n, np.log(x_max) - 1.0) if y_start is None else np.asarray(y_start, dtype=float)
    with np.errstate(over="ignore"):
        x = np.clip(np.exp(y), x_low, x_near_max)
    psi, slope = log_ratio(x, every)
    # The state of the elements still iterating, compressed as they stop: x, the bracket [lo, hi] in x, whether each
    # side is still an end of the interval, not yet evaluated (the root may lie beyond it), and the last two steps in
    # units of v. A Newton step past an end not yet evaluated goes to that end instead: if psi has the same sign there,
    # the root is at the end (x_max, or x_floor).
    result = x.copy()
    at_max, at_floor = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    active, xa = every, x
    lo, hi = x_low.copy(), np.full(n, x_near_max)
    lo_open, hi_open = np.ones(n, dtype=bool), np.ones(n, dtype=bool)
    step = step_old = np.full(n, np.inf)
    for _ in range(NEWTON_STEPS):
        top, bottom = (xa >= x_near_max) & (psi <= 0), (xa <= x_low[active]) & (psi >= 0)
        up = psi > 0
        hi = np.where(up, xa, hi)
        lo = np.where(up, lo, xa)
        hi_open &= ~up
        lo_open &= up
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            newton_y = psi / slope  # Newton on log x: good where psi is smooth in log x
            newton_v = newton_y * (x_max / (x_max - xa))  # the same step in v (d v / d log x = x_max / (x_max - x))
            x_y = xa * np.exp(-newton_y)
        # an infinite psi (no pressure: b = 0 and g = 0) has no Newton step: it points to the end on its side
        x_y = np.where(np.isnan(x_y) & ~np.isnan(psi), np.where(psi > 0, 0.0, np.inf), x_y)
        # the last step: psi is small, or the step moves x by less than its rounding
        converged = (np.abs(psi) <= NEWTON_TOL) | (np.abs(newton_y) <= 1e-15)
        short = np.abs(2.0 * newton_v) <= np.abs(step_old)  # rtsafe: less than half the step before the last
        use_y = converged | (short & (x_y > lo) & (x_y < hi))
        x_next = np.clip(x_y, lo, hi)
        step_old, step = step, newton_v
        probe = ~use_y & ((hi_open & (x_y >= hi)) | (lo_open & (x_y <= lo)))  # x_next is that end already
        rest = np.flatnonzero(~(use_y | probe))
        if rest.size:  # Newton on v, else the midpoint of the bracket in v
            v = _logit_x(np.log(xa[rest]), x_max)
            with np.errstate(invalid="ignore", over="ignore"):
                x_v = _x_of_logit(v - newton_v[rest], x_max)
            lo_r, hi_r = lo[rest], hi[rest]
            use_v = short[rest] & (x_v > lo_r) & (x_v < hi_r)
            v_mid = 0.5 * (_logit_x(np.log(lo_r), x_max) + _logit_x(np.log(hi_r), x_max))
            x_next[rest] = np.where(use_v, x_v, np.clip(_x_of_logit(v_mid, x_max), lo_r, hi_r))
            step[rest] = np.where(use_v, newton_v[rest], v - v_mid)
        at_max[active[top]], at_floor[active[bottom]] = True, True
        xa = x_next
        # the bracket's width in v: (hi - lo) x_max / (lo (x_max - hi)) to first order
        going = ~(top | bottom | converged | ((hi - lo) * x_max < 1e-13 * lo * (x_max - hi)))
        if not going.all():
            result[active] = xa
            active, xa, lo, hi, lo_open, hi_open, step, step_old = (
                a[going] for a in (active, xa, lo, hi, lo_open, hi_open, step, step_old))
            if active.size == 0:
                break
        psi, slope = log_ratio(xa, active)
    result[active] = xa
    return np.where(at_max, x_max, np.where(at_floor, x_floor, result))


def minimize_round(
    model: ReceiveScalingModel,
    h_min2: ArrayLike,
    *,
    leak_weight: ArrayLike,
    cost_weight: ArrayLike,
    quad_weight: ArrayLike = 0.0,
    x_floor_ratio: float = X_FLOOR_RATIO,
    x_start: ArrayLike | None = None,
) -> NDArray:
    """argmin over x in [x_floor, x_max] of  a L(x) + b c(x) + (g/2) c(x)^2, batched (a, b, g broadcast with h).

    With (a, b, g) = (V, Q_t, 1) this is AdaScale's problem (30); (V, Q_t, 0) the naive drift-plus-penalty;
    (1, mu, 0) the Lagrangian of the offline problem (28). The objective is convex (Prop. 1): its derivative
    f' = P(x) - N(x), with P = a L'(x) > 0 increasing and N = K/x^2 (b + g c(x)) >= 0 decreasing, K = d sigma_n^2 / h^2,
    is increasing. The solver finds the root of psi = log P - log N in y = log x (same sign as f'), whose slope
    x L''/L' + 2 + g K / (x (b + g c)) is at least 2: on the power law N ~ K^2/x^3 near x -> 0, where Newton on f'
    advances 1/3 nat per step, psi is nearly linear in y, so Newton converges in a few steps from anywhere.
    ``x_start`` (broadcast like h) warm-starts the solver (e.g. the previous round's x); the result is the same
    minimiser to ~1e-13 whatever the start. Each element is solved on its own: its result does not depend on the
    other elements of the batch.
    """
    h = np.asarray(h_min2, dtype=float)
    shape = np.broadcast_shapes(h.shape, np.shape(leak_weight), np.shape(cost_weight), np.shape(quad_weight))
    params = np.stack([np.broadcast_to(np.asarray(v, dtype=float), shape).ravel()
                       for v in (h, leak_weight, cost_weight, quad_weight)])
    params = np.concatenate([params, model.cost_scale / params[:1]])  # (h, a, b, g, K) x elements
    x_max = model.x_max

    def log_ratio(x: NDArray, i: NDArray) -> tuple[NDArray, NDArray]:
        hi, ai, bi, gi, ki = params[:, i]
        l1, l2 = model.leakage_slope_and_curvature(x, hi)
        # b + g c(x) >= 0, with c = K (x_max - x) / (x x_max): the difference is exact near x_max (1/x - 1/x_max
        # would cancel), and 0 where rounding put x above x_max
        pressure = bi + gi * (ki * np.maximum(x_max - x, 0.0) / (x * x_max))
        with np.errstate(divide="ignore", invalid="ignore"):  # pressure 0 (b = 0 at x_max): psi = +inf, the root
            # lies below (a NaN slope there, or an l1 that underflowed to 0, makes the solver bisect)
            psi = np.log(ai * l1 * x * x) - np.log(ki * pressure)
            slope = x * l2 / l1 + 2.0 + gi * ki / (x * pressure)
        return psi, slope

    y_start = None if x_start is None else np.log(np.broadcast_to(np.asarray(x_start, dtype=float), shape).ravel())
    x = solve_increasing(log_ratio, params.shape[1], x_floor_ratio * x_max, x_max, y_start)
    return x.reshape(shape)

