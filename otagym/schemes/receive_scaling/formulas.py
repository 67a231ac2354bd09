"""Receive scaling (model A, the AdaScale paper: Kalarde et al., *Privacy Enhancement in Over-the-Air Federated
Learning via Adaptive Receive Scaling*, §IV-V) -- the per-round formulas, compiled.

Notation (the AdaScale paper's): eta_t receive scaling, h_min,t = min_m |h_m,t| / k_m, x_t = eta_t / h_min,t^2
(eq. (23)), x_max = P_max d M^2 / G^2, 0 < x_t <= x_max (eq. (24)).

Each formula of one element is a compiled scalar function (numba, :data:`otagym.jit.JIT`) reading the scenario's
constants from one :class:`ModelArrays`; :class:`~otagym.schemes.receive_scaling.model.ReceiveScalingModel` and the
functions here apply them to arrays (any leading batch shape, devices on the last axis; batch size 1 works), and the
round's kernel (:mod:`otagym.schemes.receive_scaling.kernel`) calls the same scalars. Those that create no array are
compiled without reference counting (:data:`otagym.jit.JIT_NO_ALLOC`), so that passing :class:`ModelArrays` costs a
call nothing.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from numba import njit
from numpy.typing import ArrayLike, NDArray

from otagym.jit import JIT, JIT_NO_ALLOC
from otagym.accounting.curve import curve_derivatives, curve_log_a

__all__ = ["ModelArrays", "X_FLOOR_RATIO"]

#: The smallest x of every action and policy, as a fraction of x_max (below it the convergence cost overflows).
X_FLOOR_RATIO = 1e-12


class ModelArrays(NamedTuple):
    """The constants of a :class:`ReceiveScalingModel` that its compiled formulas read, as one argument."""

    x_max: float
    cost_scale: float  # d sigma_n^2
    u_per_eta: NDArray  # (C,) 1/sigma^2 per unit eta of each device class (inverse square of eq. (25))
    counts: NDArray  # (C,) devices per class
    log_w: NDArray  # (C, K) the weights of eq. (9) at alpha (:attr:`otagym.accounting.SGMCurve.log_weights`)
    tri: NDArray  # (K,)
    low_mass: NDArray  # (C,)
    order: int  # alpha
    inv_k2: NDArray  # (M,) 1 / k_m^2
    power_coeff: NDArray  # (M,) G^2 k_m^2 / (d M^2)
    price_y: NDArray  # (P,) log eta of the price table (:meth:`ReceiveScalingModel.price_receive_scaling`)
    price_log_g: NDArray  # (P,) log(eta^2 L'(eta)) there
    tail_v: NDArray  # the stationary level's table (:class:`_TailTable`), with tail_dv = d v / d log f
    tail_log_f: NDArray
    tail_dv: NDArray
    tail_log_cv2: NDArray
    tail_dlog_cv2: NDArray


@njit(**JIT)
def _normalized_x(action: float, x_max: float, x_min_ratio: float) -> float:
    """x of the normalised action (:func:`normalized_x`; numpy's exp and log: this applies to vectors as it is)."""
    return x_max * np.exp(0.5 * np.log(x_min_ratio) * (1.0 - action))


@njit(**JIT)
def _spend_cost(action: float, nu: float) -> float:
    """c_t of the spend action (:func:`spend_cost`; numpy's power: this applies to vectors as it is)."""
    return nu * ((np.power(10.0, 1.0 + action) - 1.0) / 9.0)  # the share first: exactly nu at a = 0


@njit(**JIT)
def _convergence_cost(x: float, h_min2: float, cost_scale: float, x_max: float) -> float:
    """c_t(x) = d sigma_n^2 / h_min,t^2 (1/x_t - 1/x_max) (summand of (28b))."""
    return cost_scale / h_min2 * (1.0 / x - 1.0 / x_max)


@njit(**JIT)
def _x_for_cost(cost: float, h_min2: float, cost_scale: float, x_max: float) -> float:
    """The x with c_t(x) = cost: x_max / (1 + x_max cost h^2 / (d sigma_n^2))."""
    return x_max / (1.0 + x_max * cost * h_min2 / cost_scale)


@njit(**JIT_NO_ALLOC)
def _h_min2(gains: NDArray, inv_k2: NDArray) -> float:
    """h_min,t^2 = min_m |h_m,t|^2 / k_m^2 (below eq. (23)) of one env's gains (M,)."""
    h = math.inf
    for m in range(gains.size):
        h = min(h, gains[m] * inv_k2[m])
    return h


@njit(**JIT_NO_ALLOC)
def _h_min2_rows(gains: NDArray, inv_k2: NDArray, out: NDArray) -> NDArray:
    for i in range(gains.shape[0]):
        out[i] = _h_min2(gains[i], inv_k2)
    return out


@njit(inline="always", **JIT_NO_ALLOC)
def _class_rdp(eta: float, c: int, mdl: ModelArrays) -> float:
    """RDP at alpha of device class c at receive scaling eta (eq. (9) at u = eta u_per_eta_c)."""
    return curve_log_a(eta * mdl.u_per_eta[c], mdl.log_w[c], mdl.tri) / (mdl.order - 1)


@njit(inline="always", **JIT_NO_ALLOC)
def _leakage(eta: float, mdl: ModelArrays) -> float:
    """L = sum_m rho_alpha(q_m, sigma_m) at receive scaling eta (summand of (28a))."""
    total = 0.0
    for c in range(mdl.counts.size):
        total += _class_rdp(eta, c, mdl) * mdl.counts[c]
    return total


@njit(inline="always", **JIT_NO_ALLOC)
def _leakage_derivatives(x: float, h_min2: float, mdl: ModelArrays) -> tuple[float, float]:
    """dL/dx and d^2L/dx^2 at x on channel h_min2 (u is linear in x: du/dx = h_min2 u_per_eta)."""
    d1 = d2 = 0.0
    for c in range(mdl.counts.size):
        du_dx = h_min2 * mdl.u_per_eta[c]
        s1, s2 = curve_derivatives(x * du_dx, mdl.log_w[c], mdl.tri, mdl.low_mass[c], mdl.order)
        d1 += s1 * du_dx * mdl.counts[c]
        d2 += s2 * du_dx * du_dx * mdl.counts[c]
    return d1, d2


@njit(**JIT_NO_ALLOC)
def _hermite(t: float, i: int, step: float, y: NDArray, dy: NDArray) -> float:
    """Cubic Hermite interpolation between nodes i and i + 1 at fraction t, ``step`` the node spacing, values ``y`` and
    derivatives ``dy`` per unit of the abscissa."""
    t2 = t * t
    return ((1.0 + 2.0 * t) * (1.0 - t) ** 2 * y[i] + t * (1.0 - t) ** 2 * step * dy[i]
            + t2 * (3.0 - 2.0 * t) * y[i + 1] + t2 * (t - 1.0) * step * dy[i + 1])


@njit(inline="always", **JIT_NO_ALLOC)
def _theta_log(log_f: float, mdl: ModelArrays) -> float:
    """v = log theta with log f(theta) = ``log_f`` (f decreases) from the table: Hermite on the inverse, between the
    last node above ``log_f`` and the next; above the table's top (theta < 1e-12) f ~ 1/theta, below its end
    theta = 700."""
    lf = mdl.tail_log_f
    if log_f > lf[0]:
        return mdl.tail_v[0] + lf[0] - log_f
    lo, hi = 0, lf.size  # the first node at or below log_f lies in [lo, hi]
    while lo < hi:
        mid = (lo + hi) // 2
        if lf[mid] > log_f:
            lo = mid + 1
        else:
            hi = mid
    i = min(max(lo - 1, 0), lf.size - 2)
    step = lf[i + 1] - lf[i]
    t = min(max((log_f - lf[i]) / step, 0.0), 1.0)
    return _hermite(t, i, step, mdl.tail_v, mdl.tail_dv)


@njit(inline="always", **JIT_NO_ALLOC)
def _stationary_level(spend: float, mean_h_min2: float, mdl: ModelArrays) -> float:
    """The water level eta_bar of :meth:`ReceiveScalingModel.stationary_level`."""
    a = mdl.x_max * mean_h_min2
    return a * math.exp(_theta_log(math.log(spend * a / mdl.cost_scale), mdl))


@njit(inline="always", **JIT_NO_ALLOC)
def _stationary_spend_cv(level: float, mean_h_min2: float, mdl: ModelArrays) -> float:
    """The coefficient of variation of :meth:`ReceiveScalingModel.stationary_spend_cv`: log(1 + cv^2) by Hermite on
    the table's uniform grid of v = log theta."""
    tv = mdl.tail_v
    h = tv[1] - tv[0]
    x = (min(max(math.log(level / (mdl.x_max * mean_h_min2)), tv[0]), tv[-1]) - tv[0]) / h
    i = min(int(x), tv.size - 2)
    log_cv2 = _hermite(x - i, i, h, mdl.tail_log_cv2, mdl.tail_dlog_cv2)
    return math.sqrt(max(math.expm1(min(log_cv2, 700.0)), 0.0))


@njit(**JIT_NO_ALLOC)
def _interp(x: float, xp: NDArray, fp: NDArray) -> float:
    """numpy.interp at one point (the same arithmetic): ends held, linear between the nodes around x."""
    if x < xp[0]:
        return fp[0]
    if x >= xp[-1]:
        return fp[-1]
    lo, hi = 0, xp.size - 1  # xp[lo] <= x < xp[hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if xp[mid] <= x:
            lo = mid
        else:
            hi = mid
    if xp[lo] == x:
        return fp[lo]
    return (fp[lo + 1] - fp[lo]) / (xp[lo + 1] - xp[lo]) * (x - xp[lo]) + fp[lo]


@njit(inline="always", **JIT_NO_ALLOC)
def _price_receive_scaling(mu: float, mdl: ModelArrays) -> float:
    """eta*(mu) of :meth:`ReceiveScalingModel.price_receive_scaling`: the price table, then two Newton steps on
    y = log eta of log(eta^2 L'(eta)) = log(mu d sigma_n^2)."""
    target = math.log(mu * mdl.cost_scale)
    g = mdl.price_log_g
    y = _interp(target, g, mdl.price_y)
    if target > g[-1]:  # outside the table log g grows with slope 2 in y (L' tends to constants at both ends of u)
        y = y + (target - g[-1]) / 2.0
    if target < g[0]:
        y = y + (target - g[0]) / 2.0
    for _ in range(2):
        eta = math.exp(y)
        d1, d2 = _leakage_derivatives(eta, 1.0, mdl)  # at h = 1, x is eta
        y = y - (math.log(eta * eta * d1) - target) / (2.0 + eta * d2 / d1)
    return math.exp(y)


@njit(inline="always", **JIT_NO_ALLOC)
def _cost_slope_of_leakage(x: float, h_min2: float, mdl: ModelArrays) -> float:
    """-dL/dc at x (:func:`cost_slope_of_leakage`)."""
    return _leakage_derivatives(x, h_min2, mdl)[0] * x * x * h_min2 / mdl.cost_scale


@njit(inline="always", **JIT_NO_ALLOC)
def _reference_price(remaining: float, rounds_left: float, mean_h_min2: float, buffer_sd: float,
                     mdl: ModelArrays) -> float:
    """mu_ref of :func:`reference_price`."""
    buffer = 0.0
    if buffer_sd > 0:
        cv = _stationary_spend_cv(_stationary_level(remaining / rounds_left, mean_h_min2, mdl), mean_h_min2, mdl)
        buffer = min(buffer_sd * math.sqrt(rounds_left) * cv, rounds_left)
    return _cost_slope_of_leakage(_stationary_level(remaining / (rounds_left + buffer), mean_h_min2, mdl), 1.0, mdl)


@njit(inline="always", **JIT_NO_ALLOC)
def _price_spend(action: float, h_min2: float, price_ref: float, price_decades: float, mdl: ModelArrays) -> float:
    """The cost of :func:`price_spend`."""
    mu = price_ref * 10.0 ** (price_decades * action)
    eta = min(_price_receive_scaling(mu, mdl), mdl.x_max * h_min2)
    return _convergence_cost(eta / h_min2, h_min2, mdl.cost_scale, mdl.x_max)


@njit(inline="always", **JIT_NO_ALLOC)
def _budget_action_cost(share: bool, action: float, h_min2: float, remaining: float, rounds_left: float,
                        mean_h_min2: float, keep: float, multiplier_max: float, price_decades: float,
                        buffer_sd: float, mdl: ModelArrays) -> float:
    """c_t of :func:`budget_action_cost` (``share``: the share action, else the price action), at most what leaves
    ``keep`` (nu times the budget floor) for each later round."""
    remaining = max(remaining, 0.0)  # rounding can leave -1e-17
    if share:
        spend = remaining / rounds_left * multiplier_max ** action
    else:
        price_ref = _reference_price(remaining, rounds_left, mean_h_min2, buffer_sd, mdl)
        spend = _price_spend(action, h_min2, price_ref, price_decades, mdl)
    return remaining if rounds_left <= 1 else min(spend, max(remaining - keep * (rounds_left - 1.0), 0.0))



# --- applying a compiled formula to arrays ------------------------------------------------------------------------


def _flat(arrays: tuple[ArrayLike, ...]) -> tuple[list[NDArray], tuple[int, ...]]:
    """Arrays broadcast together, each as a contiguous writeable float64 vector (:func:`_vector`: never a broadcast
    view, on which numba warns and whose writeable flag numpy is deprecating), and their broadcast shape. The
    formulas only read them."""
    arrays = [np.asarray(a, dtype=float) for a in arrays]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    return [_vector(a, shape) for a in arrays], shape


def _vector(a: NDArray, shape: tuple[int, ...]) -> NDArray:
    """``a`` broadcast to ``shape`` as a contiguous writeable float64 vector: itself, flattened, when it already is
    one of that shape (the formulas only read it), else a copy (a scalar filled in without a broadcast view)."""
    if a.shape == shape and a.flags.c_contiguous and a.flags.writeable:
        return a.reshape(-1)
    if a.ndim == 0:
        return np.full(math.prod(shape), a[()])
    return np.array(np.broadcast_to(a, shape), order="C").reshape(-1)


def _shaped(flat: NDArray, shape: tuple[int, ...]) -> NDArray:
    """A result vector in the broadcast shape (a numpy scalar for shape ())."""
    return flat.reshape(shape)[()]


def _elementwise(formula: Any, arrays: tuple[ArrayLike, ...], *constants: Any) -> NDArray:
    """``formula`` (a compiled formula of pure arithmetic, which numba applies to vectors as it is) over ``arrays``
    broadcast, with scalar ``constants`` after them."""
    flat, shape = _flat(arrays)
    return _shaped(np.asarray(formula(*flat, *constants), dtype=float), shape)


@njit(**JIT_NO_ALLOC)
def _leakage_many(eta: NDArray, mdl: ModelArrays, out: NDArray) -> NDArray:
    for i in range(eta.size):
        out[i] = _leakage(eta[i], mdl)
    return out


@njit(**JIT_NO_ALLOC)
def _leakage_derivatives_many(x: NDArray, h_min2: NDArray, mdl: ModelArrays, d1: NDArray,
                              d2: NDArray) -> tuple[NDArray, NDArray]:
    for i in range(x.size):
        d1[i], d2[i] = _leakage_derivatives(x[i], h_min2[i], mdl)
    return d1, d2


@njit(**JIT_NO_ALLOC)
def _stationary_many(spend: NDArray, mean_h_min2: NDArray, cv: bool, mdl: ModelArrays, out: NDArray) -> NDArray:
    """The stationary level of each ``spend``, or (``cv``) the spend's cv at each level."""
    for i in range(spend.size):
        out[i] = (_stationary_spend_cv(spend[i], mean_h_min2[i], mdl) if cv
                  else _stationary_level(spend[i], mean_h_min2[i], mdl))
    return out


@njit(**JIT_NO_ALLOC)
def _price_receive_scaling_many(mu: NDArray, mdl: ModelArrays, out: NDArray) -> NDArray:
    for i in range(mu.size):
        out[i] = _price_receive_scaling(mu[i], mdl)
    return out


@njit(**JIT_NO_ALLOC)
def _reference_price_many(remaining: NDArray, rounds_left: NDArray, mean_h_min2: NDArray, buffer_sd: float,
                          mdl: ModelArrays, out: NDArray) -> NDArray:
    for i in range(remaining.size):
        out[i] = _reference_price(remaining[i], rounds_left[i], mean_h_min2[i], buffer_sd, mdl)
    return out


@njit(**JIT_NO_ALLOC)
def _price_spend_many(action: NDArray, h_min2: NDArray, price_ref: NDArray, price_decades: float, mdl: ModelArrays,
                      out: NDArray) -> NDArray:
    for i in range(action.size):
        out[i] = _price_spend(action[i], h_min2[i], price_ref[i], price_decades, mdl)
    return out


@njit(**JIT)
def _transmit_power_w(eta: float, gain: float, power_coeff: float) -> float:
    """Eq. (14) for one device: eta / |h_m|^2 times G^2 k_m^2 / (d M^2), W."""
    return eta / gain * power_coeff

