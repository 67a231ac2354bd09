"""Model A: channel-inversion FedSGD with server receive scaling (the AdaScale paper: Kalarde et al., *Privacy Enhancement in Over-the-Air Federated Learning via
Adaptive Receive Scaling*, §IV-V) -- the scenario
and the pure, batched formulas.

Scenario presets follow §VII of the AdaScale paper (docs/environment/receive-scaling.md says where they deviate):

* ``paper-mnist``: M=10, P_max=23 dBm, sigma_n^2=-90 dBm, d_m ~ U[10, 200] m, B=60, n_m=6000, T=500, lambda=0.5,
  C=G=1.0, d=26,010 (the Tramer-Boneh CNN), alpha=3, delta=1e-5, nu in [0.01, 0.16].
* ``paper-cifar10``: as MNIST but n_m=5000, B=400, T=720, C=G=2.0, lambda=0.25, d=~500k (ResNet), nu in [0.01, 0.32].

Notation (the AdaScale paper's): eta_t receive scaling, h_min,t = min_m |h_m,t| / k_m, x_t = eta_t / h_min,t^2 (eq. (23)),
x_max = P_max d M^2 / G^2, 0 < x_t <= x_max (eq. (24)).

All functions take arrays with a leading batch shape and devices on the last axis; they work for batch size 1.
:class:`ReceiveScalingModel` binds the scenario constants once and is what the environments and the policies call.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numba import njit
from numpy.typing import ArrayLike, NDArray
from scipy import special

from otagym.channel import DISTANCE, FadingFields
from otagym.jit import JIT, JIT_NO_ALLOC
from otagym.privacy import SGMCurve, _curve_derivatives, _curve_log_a
from otagym.validation import POSITIVE, Integer, Many, Real, Text, arg, check_dataclass, from_preset

__all__ = ["Scenario", "PRESETS", "get_scenario", "dbm_to_w", "w_to_dbm", "ReceiveScalingModel", "ModelArrays",
           "normalized_x", "spend_cost",
           "minimize_round", "solve_increasing", "cost_slope_of_leakage", "price_spend", "reference_price",
           "budget_action_cost", "BUDGET_ACTIONS", "UNIT_ACTIONS"]


def dbm_to_w(dbm: float) -> float:
    """Power in dBm -> watts."""
    return 10.0 ** ((dbm - 30.0) / 10.0)


def w_to_dbm(watts: float) -> float:
    """Power in watts -> dBm."""
    return 10.0 * math.log10(watts) + 30.0


def _per_device(name: str, value: Any, m: int) -> tuple:
    """The M values of a per-device field (checked by its spec: a scalar or a tuple), its length checked."""
    if not isinstance(value, tuple):
        return (value,) * m
    if len(value) != m:
        raise ValueError(f"Scenario.{name} must be a scalar or have num_devices={m} entries; got {len(value)}")
    return value


@dataclass(frozen=True)
class Scenario(FadingFields):
    """One OTA-FL deployment (model A). Per-device fields accept a scalar (same for all) or M values.

    Attributes:
        num_devices: M, number of devices (>= 1).
        power_max_w: P_max, per-device average transmit power limit in W (> 0).
        noise_power_w: sigma_n^2, receiver noise power in W (> 0).
        distance_min_m: device distances are drawn U[distance_min_m, distance_max_m] metres at every reset
            (COST-231 Hata path loss needs distances >= 1 m).
        distance_max_m: the upper end of that range (metres).
        distances_m: fixed device distances in metres; when set, no distances are drawn.
        batch_size: B_m, expected Poisson batch size per device (> 0, <= dataset_size).
        dataset_size: n_m, local dataset size per device (>= 1).
        model_dim: d, number of model parameters (>= 1).
        clip_norm: G (the paper's C), per-sample gradient clipping norm (> 0).
        num_rounds: T, rounds per episode (>= 1).
        learning_rate: lambda of eq. (12) (> 0); enters only the Theorem-1 conversion between nu and gamma.
        rdp_order: alpha, the integer RDP order of the objective (>= 2).
        delta: delta of the final (eps, delta)-DP report, in (0, 1).
        nu: convergence budget per round of eq. (28b) (> 0).
        nu_grid: the nu values the paper sweeps (used by ``otagym compare``).
        fading: ``"iid"`` (default, the paper's), ``"block"`` (constant for ``coherence_rounds``) or
            ``"gauss_markov"`` (first-order AR on the complex gain with ``correlation``).
        coherence_rounds: block length in rounds for ``fading="block"`` (>= 1; under another fading it has no
            effect and must keep its default, 1).
        correlation: AR(1) coefficient in [0, 1) of the complex gain for ``fading="gauss_markov"`` (under another
            fading it must keep its default, 0.0).
        name: label.
    """

    num_devices: int = arg(10, Integer(1, 10_000))
    power_max_w: float = arg(dbm_to_w(23.0), POSITIVE)
    noise_power_w: float = arg(dbm_to_w(-90.0), POSITIVE)
    distance_min_m: float = arg(10.0, DISTANCE)
    distance_max_m: float = arg(200.0, DISTANCE)
    distances_m: tuple[float, ...] | None = arg(None, Many(DISTANCE, optional=True))
    batch_size: float | tuple[float, ...] = arg(60.0, Many(POSITIVE, scalar=True))
    dataset_size: int | tuple[int, ...] = arg(6000, Many(Integer(1, 10**12), scalar=True))
    model_dim: int = arg(26_010, Integer(1, 10**12))
    clip_norm: float = arg(1.0, POSITIVE)
    num_rounds: int = arg(500, Integer(1, 10**6))
    learning_rate: float = arg(0.5, POSITIVE)
    rdp_order: int = arg(3, Integer(2, 1000))
    delta: float = arg(1e-5, Real(0.0, 1.0, low_open=True, high_open=True))
    nu: float = arg(0.04, POSITIVE)
    nu_grid: tuple[float, ...] = arg((0.01, 0.02, 0.04, 0.08, 0.16), Many(POSITIVE))
    name: str = arg("custom", Text())

    def __post_init__(self) -> None:
        check_dataclass(self)
        m = self.num_devices
        if self.distance_min_m > self.distance_max_m:
            raise ValueError(f"Scenario.distance_min_m must be <= distance_max_m; got "
                             f"{(self.distance_min_m, self.distance_max_m)}")
        if self.distances_m is not None:
            _per_device("distances_m", self.distances_m, m)
        batch = _per_device("batch_size", self.batch_size, m)
        data = _per_device("dataset_size", self.dataset_size, m)
        if not all(b <= n for b, n in zip(batch, data)):
            raise ValueError(f"Scenario.batch_size must be in (0, dataset_size] (q_m = B_m/n_m in (0, 1]); got "
                             f"batch_size={self.batch_size!r}, dataset_size={self.dataset_size!r}")

    # --- derived constants (numpy arrays, one entry per device) ---
    @property
    def batch_sizes(self) -> NDArray:
        """B_m, shape (M,)."""
        return np.broadcast_to(np.asarray(self.batch_size, dtype=float), (self.num_devices,)).copy()

    @property
    def sampling_rates(self) -> NDArray:
        """q_m = B_m / n_m, shape (M,)."""
        return self.batch_sizes / np.broadcast_to(np.asarray(self.dataset_size, dtype=float), (self.num_devices,))

    @property
    def batch_size_factor(self) -> NDArray:
        """k_m^2 = E[|B_mt|^2 / B_m^2] = 1 + (1 - q_m) / B_m under Poisson sampling (eq. (14)), shape (M,)."""
        return 1.0 + (1.0 - self.sampling_rates) / self.batch_sizes

    @property
    def x_max(self) -> float:
        """x_max = P_max d M^2 / G^2 (below eq. (23)), the largest feasible x_t = eta_t / h_min,t^2."""
        return self.power_max_w * self.model_dim * self.num_devices**2 / self.clip_norm**2

    def replace(self, **changes: Any) -> "Scenario":
        """A validated copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


PRESETS: dict[str, Scenario] = {
    "paper-mnist": Scenario(name="paper-mnist"),
    "paper-cifar10": Scenario(
        name="paper-cifar10",
        batch_size=400.0,
        dataset_size=5000,
        num_rounds=720,
        clip_norm=2.0,
        learning_rate=0.25,
        model_dim=500_000,
        nu=0.04,
        nu_grid=(0.01, 0.02, 0.04, 0.08, 0.16, 0.32),
    ),
}


def get_scenario(name: str | Scenario = "paper-mnist", /, **overrides: Any) -> Scenario:
    """A preset by name (``paper-mnist``, ``paper-cifar10``) or a Scenario, with validated field overrides."""
    return from_preset(Scenario, PRESETS, name, overrides)


# --- the formulas -----------------------------------------------------------------------------------------------
#: Action types of the budget formulation (see :func:`budget_action_cost`).
BUDGET_ACTIONS = ("price", "share")
#: The action types whose action is a in [-1, 1] (the budget actions, the normalised x and the spend).
UNIT_ACTIONS = BUDGET_ACTIONS + ("normalized", "spend")

#: Iteration cap of the safeguarded Newton solver: the bracket spans <= 28 nats of log x and is at least halved every
#: two iterations (rtsafe rule), so 120 iterations always reach 1e-13; typically an element stops after 4-8.
NEWTON_STEPS = 120
#: An element of the solver stops after the Newton step from a point where |psi| <= this (psi is a log-ratio).
NEWTON_TOL = 1e-9
#: The solver returns x_max for a root within this relative distance of it.
AT_MAX_RTOL = 1e-12
X_FLOOR_RATIO = 1e-12


#: Gauss-Laguerre nodes and weights for expectations over h_min^2 ~ Exponential (see
#: :meth:`ReceiveScalingModel.expected_equal_alloc_leakage`).
_LAGUERRE_NODES, _LAGUERRE_WEIGHTS = np.polynomial.laguerre.laggauss(48)
_LEGENDRE_NODES, _LEGENDRE_WEIGHTS = np.polynomial.legendre.leggauss(64)


def _quadrature(values: NDArray, weights: NDArray) -> NDArray:
    """sum_j values[..., j] weights[j], row by row: the same bits for a row whatever the rows beside it (a BLAS
    matrix-vector product sums a row differently in a batch of 7 than alone, which an env's round must not see)."""
    return (values * weights).sum(axis=-1)

#: Range of v = log theta of :meth:`ReceiveScalingModel.stationary_level` (theta: the water level over x_max E[h^2]).
_TAIL_V_MIN, _TAIL_V_MAX = float(np.log(1e-12)), float(np.log(700.0))


def _scaled_tail(theta: NDArray) -> NDArray:
    """r(theta) = 1/theta - e^theta E_1(theta) > 0 (= e^theta f(theta), see
    :meth:`ReceiveScalingModel.stationary_level`); above theta = 40, where the difference cancels, by its asymptotic
    series sum_k (-1)^(k+1) k! / theta^(k+1) (30 terms: relative error below 1e-14)."""
    theta = np.asarray(theta, dtype=float)
    small = np.minimum(theta, 40.0)
    direct = 1.0 / small - special.exp1(small) * np.exp(small)
    if not np.any(theta > 40.0):
        return direct
    big = np.maximum(theta, 40.0)
    series = np.zeros_like(big)
    term = 1.0 / big
    for k in range(1, 31):
        term = term * (k / big) * (-1.0 if k > 1 else 1.0)
        series = series + term
    return np.where(theta <= 40.0, direct, series)


def _scaled_tail_square(theta: NDArray) -> NDArray:
    """r2(theta) = e^theta int_theta^inf (1/theta - 1/e)^2 e^-e de = r (1 + 2/theta) - 1/theta^2 (r =
    :func:`_scaled_tail`), the second moment of :meth:`ReceiveScalingModel.stationary_level`'s spend; above theta = 40,
    where the difference cancels, by its series sum_{n>=3} (-1)^(n+1) (n-1)! (n-2) / theta^(n+1) (30 terms)."""
    theta = np.asarray(theta, dtype=float)
    small = np.minimum(theta, 40.0)
    direct = _scaled_tail(small) * (1.0 + 2.0 / small) - 1.0 / small**2
    if not np.any(theta > 40.0):
        return direct
    big = np.maximum(theta, 40.0)
    series = np.zeros_like(big)
    term = 1.0 / big**3  # (n - 1)! / theta^(n + 1) at n = 2
    for n in range(3, 33):
        term = term * (n - 1) / big
        series = series + (-1.0) ** (n + 1) * (n - 2) * term
    return np.where(theta <= 40.0, direct, series)


@dataclass(frozen=True)
class _TailTable:
    """log f(theta) and log(1 + cv^2)(theta) on a uniform grid of v = log theta, with their exact derivatives, for
    cubic Hermite interpolation (8192 nodes: relative error ~1e-13 in theta; no E_1 per call). f is the mean spend of
    :meth:`ReceiveScalingModel.stationary_level` in units of d sigma_n^2 / a, cv its coefficient of variation."""

    v: NDArray
    log_f: NDArray
    dlog_f: NDArray  # d log f / d v = -1 / (theta r)
    log_cv2: NDArray  # log(1 + cv^2) = theta + log r2 - 2 log r
    dlog_cv2: NDArray

    @classmethod
    def build(cls, nodes: int = 8192) -> "_TailTable":
        v = np.linspace(_TAIL_V_MIN, _TAIL_V_MAX, nodes)
        theta = np.exp(v)
        r, r2 = _scaled_tail(theta), _scaled_tail_square(theta)
        dr = r - 1.0 / theta**2  # r' (d/dtheta e^theta E_1 = e^theta E_1 - 1/theta)
        dr2 = dr * (1.0 + 2.0 / theta) - 2.0 * r / theta**2 + 2.0 / theta**3
        return cls(v, np.log(r) - theta, -1.0 / (theta * r), theta + np.log(r2) - 2.0 * np.log(r),
                   theta * (1.0 + dr2 / r2 - 2.0 * dr / r))


_TAIL = _TailTable.build()


def normalized_x(action: ArrayLike, x_max: float, x_min_ratio: float) -> NDArray:
    """x = x_max * x_min_ratio ** ((1 - a) / 2) for a in [-1, 1]: the log-scale action of the cmdp/lagrangian modes
    (a = 1 is full power, a = -1 is x_min_ratio * x_max)."""
    return _elementwise(_normalized_x, (action,), x_max, x_min_ratio)


def spend_cost(action: ArrayLike, nu: ArrayLike) -> NDArray:
    """c_t = nu (10^(1 + a) - 1) / 9 for a in [-1, 1]: the ``spend`` action of the constrained formulation, in the
    units of c_t (28b). Nothing at a = -1 (the optimum spends nothing on a weak channel: half the rounds at
    nu = 0.01), nu at a = 0 (EqualAlloc), 11 nu at a = 1; exponential in a, so that each tenth of the range multiplies
    the spend alike above nu."""
    return _elementwise(_spend_cost, (action, nu))


# --- the formulas, compiled: one implementation for the numpy API below and the environments' round kernel -------
#
# Each formula of one element is a compiled scalar function (numba, :data:`otagym.jit.JIT`). The methods of
# :class:`ReceiveScalingModel` and the functions of this module apply them to arrays (broadcast, element by element),
# and :mod:`otagym.receive_scaling_env` calls the same scalars inside its kernel of the whole round. Those that create no
# array are compiled without reference counting (:data:`otagym.jit.JIT_NO_ALLOC`), so that passing
# :class:`ModelArrays` costs a call nothing.


class ModelArrays(NamedTuple):
    """The constants of a :class:`ReceiveScalingModel` that its compiled formulas read, as one argument."""

    x_max: float
    cost_scale: float  # d sigma_n^2
    u_per_eta: NDArray  # (C,) 1/sigma^2 per unit eta of each device class (inverse square of eq. (25))
    counts: NDArray  # (C,) devices per class
    log_w: NDArray  # (C, K) the weights of eq. (9) at alpha (:attr:`otagym.privacy.SGMCurve.log_weights`)
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
    return _curve_log_a(eta * mdl.u_per_eta[c], mdl.log_w[c], mdl.tri) / (mdl.order - 1)


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
        s1, s2 = _curve_derivatives(x * du_dx, mdl.log_w[c], mdl.tri, mdl.low_mass[c], mdl.order)
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
                        mean_h_min2: float, multiplier_max: float, price_decades: float, buffer_sd: float,
                        mdl: ModelArrays) -> float:
    """c_t of :func:`budget_action_cost` (``share``: the share action, else the price action)."""
    remaining = max(remaining, 0.0)  # rounding can leave -1e-17
    if share:
        spend = remaining / rounds_left * multiplier_max ** action
    else:
        price_ref = _reference_price(remaining, rounds_left, mean_h_min2, buffer_sd, mdl)
        spend = _price_spend(action, h_min2, price_ref, price_decades, mdl)
    return remaining if rounds_left <= 1 else min(spend, remaining)


# --- applying a compiled formula to arrays ------------------------------------------------------------------------


def _flat(arrays: tuple[ArrayLike, ...]) -> tuple[list[NDArray], tuple[int, ...]]:
    """Arrays broadcast together, each as a contiguous float64 vector of its own (a copy: numba warns on broadcast
    views, whose writeable flag numpy is deprecating), and their broadcast shape."""
    arrays = [np.asarray(a, dtype=float) for a in arrays]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    return [np.array(np.broadcast_to(a, shape), order="C").reshape(-1) for a in arrays], shape


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


@njit(**JIT_NO_ALLOC)
def _budget_action_cost_many(share: bool, action: NDArray, h_min2: NDArray, remaining: NDArray, rounds_left: NDArray,
                             mean_h_min2: NDArray, multiplier_max: float, price_decades: float, buffer_sd: float,
                             mdl: ModelArrays, out: NDArray) -> NDArray:
    for i in range(action.size):
        out[i] = _budget_action_cost(share, action[i], h_min2[i], remaining[i], rounds_left[i], mean_h_min2[i],
                                     multiplier_max, price_decades, buffer_sd, mdl)
    return out


class ReceiveScalingModel:
    """Scenario constants of model A and the per-round formulas, batched over any leading shape.

    Devices with equal (B_m, q_m) leak identically (eq. (25) depends on m only through B_m), so the RDP is evaluated
    once per *device class* and gathered; the paper's homogeneous presets have a single class. Each formula is one
    compiled function of one element (:class:`ModelArrays` holds the constants it reads); the methods apply it to
    arrays, and the environments' round kernel calls the same functions.
    """

    def __init__(self, scenario: Scenario) -> None:
        s = scenario
        self.scenario = s
        self.num_devices = s.num_devices
        self.model_dim = s.model_dim
        self.noise_power_w = s.noise_power_w
        self.x_max = s.x_max
        self.k2 = s.batch_size_factor  # (M,)
        self.inv_k2 = 1.0 / self.k2
        batch, q = s.batch_sizes, s.sampling_rates
        classes, self.device_class = np.unique(np.stack([batch, q], axis=1), axis=0, return_inverse=True)
        self.device_class = self.device_class.reshape(-1)
        self.class_counts = np.bincount(self.device_class, minlength=len(classes)).astype(float)
        self.class_q = classes[:, 1]
        #: One device of each class (its index): per-device arrays at these indices are the per-class values.
        self.class_device = np.unique(self.device_class, return_index=True)[1]
        # 1/sigma_m^2 = 2 eta G^2 / (M^2 B_m^2 sigma_n^2)  (inverse square of eq. (15)), per unit eta.
        self.class_u_per_eta = 2.0 * s.clip_norm**2 / (s.num_devices**2 * classes[:, 0] ** 2 * s.noise_power_w)
        self.curve = SGMCurve(self.class_q, s.rdp_order)
        # Transmit power per unit eta and unit 1/|h|^2: G^2 k_m^2 / (d M^2)  (eq. (14)).
        self.power_coeff = s.clip_norm**2 * self.k2 / (s.model_dim * s.num_devices**2)
        self.cost_scale = s.model_dim * s.noise_power_w  # d sigma_n^2
        curve = self.curve
        self.arrays = ModelArrays(float(self.x_max), float(self.cost_scale), self.class_u_per_eta, self.class_counts,
                                  curve.log_weights, curve.tri, curve.low_mass, curve.order, self.inv_k2,
                                  self.power_coeff, np.zeros(2), np.zeros(2), _TAIL.v, _TAIL.log_f, 1.0 / _TAIL.dlog_f,
                                  _TAIL.log_cv2, _TAIL.dlog_cv2)
        # the price table (log eta, log(eta^2 L'(eta))) on 4096 points spanning u = 1/sigma^2 in [1e-8, 1e5] for every
        # class (:meth:`price_receive_scaling`)
        y = np.linspace(np.log(1e-8 / self.class_u_per_eta.max()), np.log(1e5 / self.class_u_per_eta.min()), 4096)
        eta = np.exp(y)
        self.arrays = self.arrays._replace(price_y=y, price_log_g=np.log(eta * eta * self.leakage_slope(eta, 1.0)))

    # --- channel statistics --------------------------------------------------------------------------------
    def h_min2(self, gains: ArrayLike) -> NDArray:
        """h_min,t^2 = min_m |h_m,t|^2 / k_m^2 (below eq. (23)); ``gains`` = |h|^2, devices last."""
        gains = np.asarray(gains, dtype=float)
        rows = np.ascontiguousarray(np.broadcast_to(gains, gains.shape[:-1] + self.inv_k2.shape)).reshape(
            -1, self.num_devices)
        return _shaped(_h_min2_rows(rows, self.inv_k2, np.empty(rows.shape[0])), gains.shape[:-1])

    # --- privacy ---------------------------------------------------------------------------------------------
    def class_inverse_noise_var(self, eta: ArrayLike) -> NDArray:
        """u = 1/sigma^2 per device class, shape ``eta.shape + (C,)``."""
        return np.multiply.outer(eta, self.class_u_per_eta)

    def class_rdp(self, eta: ArrayLike) -> NDArray:
        """Per-round RDP at the scenario's order alpha per device class (Lemma 1, eq. (9)), ``eta.shape + (C,)``."""
        return self.curve.rdp(self.class_inverse_noise_var(eta))

    def leakage(self, x: ArrayLike, h_min2: ArrayLike) -> NDArray:
        """sum_m rho_alpha(q_m, sigma_m,t) at x_t (the summand of objective (28a))."""
        (eta,), shape = _flat((np.multiply(x, h_min2),))
        return _shaped(_leakage_many(eta, self.arrays, np.empty_like(eta)), shape)

    def leakage_slope(self, x: ArrayLike, h_min2: ArrayLike) -> NDArray:
        """d/dx of :meth:`leakage` (u is linear in x: du/dx = h_min^2 u_per_eta)."""
        return self.leakage_slope_and_curvature(x, h_min2)[0]

    def leakage_slope_and_curvature(self, x: ArrayLike, h_min2: ArrayLike) -> tuple[NDArray, NDArray]:
        """First and second derivatives of :meth:`leakage` in x."""
        (x, h), shape = _flat((x, h_min2))
        d1, d2 = _leakage_derivatives_many(x, h, self.arrays, np.empty_like(x), np.empty_like(x))
        return _shaped(d1, shape), _shaped(d2, shape)

    # --- convergence surrogate -------------------------------------------------------------------------------
    def convergence_cost(self, x: ArrayLike, h_min2: ArrayLike) -> NDArray:
        """c_t(x) = d sigma_n^2 / h_min,t^2 (1/x_t - 1/x_max), the summand of constraint (28b); >= 0."""
        return _elementwise(_convergence_cost, (x, h_min2), self.cost_scale, self.x_max)

    def x_for_cost(self, cost: ArrayLike, h_min2: ArrayLike) -> NDArray:
        """The x with c_t(x) = cost (inverse of :meth:`convergence_cost`): x_max / (1 + x_max cost h^2 / (d s_n^2)).

        With cost = nu this is EqualAlloc's rule (§VII).
        """
        return _elementwise(_x_for_cost, (cost, h_min2), self.cost_scale, self.x_max)

    def expected_h_min2(self, mean_channel_gain: ArrayLike) -> NDArray:
        """E[h_min^2] under Rayleigh fading: h_min^2 = min_m |h_m|^2 / k_m^2 is the minimum of independent
        exponentials with rates PL_m k_m^2, hence Exponential with rate sum_m PL_m k_m^2. Holds for every
        fading model here (all have the Exponential marginal). ``mean_channel_gain`` = 1/PL_m, devices last."""
        return 1.0 / (self.k2 / np.asarray(mean_channel_gain, dtype=float)).sum(axis=-1)

    def expected_equal_alloc_leakage(self, nu: ArrayLike, mean_h_min2: ArrayLike) -> NDArray:
        """E[L_t] under EqualAlloc (c_t = nu) with h_min,t^2 ~ Exponential(mean ``mean_h_min2``), by 48-node
        Gauss-Laguerre quadrature: the per-round leakage scale of the env's reward. Finite: as h grows, x h^2 tends to
        d sigma_n^2 / nu, so the integrand is bounded."""
        mean = np.asarray(mean_h_min2, dtype=float)[..., None]
        h = mean * _LAGUERRE_NODES
        x = self.x_for_cost(np.asarray(nu, dtype=float)[..., None], h)
        return _quadrature(self.leakage(x, h), _LAGUERRE_WEIGHTS)

    # --- the stationary water level ---------------------------------------------------------------------------------
    def stationary_level(self, spend: ArrayLike, mean_h_min2: ArrayLike) -> NDArray:
        """The water level eta_bar whose expected convergence cost per round is ``spend`` when every round plays
        eta_t = min(eta_bar, x_max h_min,t^2) with h_min,t^2 ~ Exponential(mean ``mean_h_min2``) (i.i.d. Rayleigh
        fading; every fading model here has this marginal).

        This is OfflineOptimal's schedule (one eta, capped by the power limit, eq. (24)) with the channel law in place
        of the realisation. With a = x_max E[h_min^2] and theta = eta_bar / a, eq. (28b)'s summand
        c = d sigma_n^2 (1/eta - 1/(x_max h^2)) integrates in closed form:

            E[c] = (d sigma_n^2 / a) f(theta),   f(theta) = e^-theta / theta - E_1(theta),

        f' = -e^-theta / theta^2 < 0, so the level is one root, read from a table of log f on log theta by cubic
        Hermite interpolation with the exact slope d log f / d log theta = -1 / (theta r), r = e^theta f (relative
        error ~1e-13; no E_1 per call). ``spend`` = 0 gives the top of the table
        (theta = 700: every round at full power to rounding). Broadcasts ``spend`` against ``mean_h_min2``.
        """
        (spend, mean), shape = _flat((spend, mean_h_min2))
        return _shaped(_stationary_many(spend, mean, False, self.arrays, np.empty_like(spend)), shape)

    def stationary_spend_cv(self, level: ArrayLike, mean_h_min2: ArrayLike) -> NDArray:
        """Coefficient of variation (std / mean) of one round's convergence cost at the water level ``level``
        (:meth:`stationary_level`), h_min^2 ~ Exponential(mean ``mean_h_min2``): with theta = level / (x_max
        E[h_min^2]), E[c^2] / E[c]^2 = e^theta r2(theta) / r(theta)^2 in closed form (E[c^2] integrates like E[c]). Large
        when most rounds run at full power and a few strong channels take the spend (small nu)."""
        (level, mean), shape = _flat((level, mean_h_min2))
        return _shaped(_stationary_many(level, mean, True, self.arrays, np.empty_like(level)), shape)

    def stationary_leakage(self, level: ArrayLike, mean_h_min2: ArrayLike) -> NDArray:
        """E[L_t] per round when every round plays min(``level``, x_max h_min,t^2), h_min,t^2 ~ Exponential(mean
        ``mean_h_min2``): int_0^theta L(a e) e^-e de + L(eta_bar) e^-theta (a = x_max E[h_min^2], theta =
        level / a), the first term by 64-node Gauss-Legendre on [0, min(theta, 60)] (the integrand is smooth there;
        beyond 60 its weight e^-e is below rounding)."""
        a = self.x_max * np.asarray(mean_h_min2, dtype=float)
        level = np.asarray(level, dtype=float)
        theta = np.broadcast_to(level / a, np.broadcast_shapes(level.shape, a.shape))
        top = np.minimum(theta, 60.0)[..., None]
        e = 0.5 * top * (_LEGENDRE_NODES + 1.0)
        below = _quadrature(self.leakage(a[..., None] * e, 1.0) * np.exp(-e), _LEGENDRE_WEIGHTS) * (0.5 * top[..., 0])
        return below + self.leakage(np.minimum(level, a * 700.0), 1.0) * np.exp(-theta)

    def stationary_headroom(self, nu: ArrayLike, mean_h_min2: ArrayLike) -> NDArray:
        """E[L_t under EqualAlloc] - E[L_t at the stationary water level of spend nu] per round: the expected gap
        per round between EqualAlloc and the best schedule of one eta (the offline optimum's form), the unit of the
        budget-mode reward (see :class:`otagym.receive_scaling_env.Rounds`). Positive: water-filling beats equal
        spending by Jensen's inequality unless the channel is constant; floored at 1e-6 of EqualAlloc's leakage so
        that a degenerate placement cannot give an infinite reward."""
        equal = self.expected_equal_alloc_leakage(nu, mean_h_min2)
        water = self.stationary_leakage(self.stationary_level(nu, mean_h_min2), mean_h_min2)
        return np.maximum(equal - water, 1e-6 * equal)

    # --- the round's Lagrangian at a price -----------------------------------------------------------------------
    def price_receive_scaling(self, mu: ArrayLike) -> NDArray:
        """eta*(mu) = argmin_eta L(eta) + mu d sigma_n^2 / eta, the receive scaling that minimises the round's
        Lagrangian L_t + mu c_t of problem (28) when the power limit does not bind. It does not depend on the
        channel: with eta = x h_min^2, c_t = d sigma_n^2 (1/eta - 1/(x_max h_min^2)) and L_t depends on eta alone
        (eq. (25)). The round's solution is min(eta*, x_max h_min^2).

        Solves eta^2 L'(eta) = mu d sigma_n^2 (the left side increases: L is convex and increasing, Prop. 1) by a
        table lookup on log eta (4096 points spanning u = 1/sigma^2 in [1e-8, 1e5] for every class), then two Newton
        steps on y = log eta (F'(y) = 2 + eta L''/L' >= 2)."""
        (mu,), shape = _flat((mu,))
        return _shaped(_price_receive_scaling_many(mu, self.arrays, np.empty_like(mu)), shape)

    # --- power -----------------------------------------------------------------------------------------------
    def transmit_power_w(self, eta: ArrayLike, gains: ArrayLike) -> NDArray:
        """Average transmit power bound of eq. (14): eta G^2 k_m^2 / (d M^2 |h_m|^2), W, devices last."""
        return _elementwise(_transmit_power_w, (np.asarray(eta)[..., None], gains, self.power_coeff))


@njit(**JIT)
def _transmit_power_w(eta: float, gain: float, power_coeff: float) -> float:
    """Eq. (14) for one device: eta / |h_m|^2 times G^2 k_m^2 / (d M^2), W."""
    return eta / gain * power_coeff


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
    its sign there). A root within :data:`AT_MAX_RTOL` of x_max is returned as x_max. ``y_start`` (n,) is a warm start in log x (e.g. the previous
    round's solution); default log x_max - 1.
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


def cost_slope_of_leakage(model: ReceiveScalingModel, x: ArrayLike, h_min2: ArrayLike) -> NDArray:
    """-dL/dc at x: the leakage saved per unit of convergence cost spent, L'(x) x^2 / K (>= 0).

    Uses x(c) = x_max / (1 + x_max c h^2/(d sigma_n^2)) (the inverse of c), whose derivative is -x^2 / K.
    """
    h = np.asarray(h_min2, dtype=float)
    x = np.asarray(x, dtype=float)
    return model.leakage_slope(x, h) * x * x * h / model.cost_scale


def reference_price(model: ReceiveScalingModel, remaining: ArrayLike, rounds_left: ArrayLike,
                    mean_h_min2: ArrayLike, buffer_sd: float = 1.0) -> NDArray:
    """mu_ref: the price action's zero point, in nats per unit of convergence cost. It is the price eta_bar^2
    L'(eta_bar) / (d sigma_n^2) of the stationary water level eta_bar (:meth:`~ReceiveScalingModel.stationary_level`,
    so that eta*(mu_ref) = eta_bar) that spends R / (k + b) per round on average, with R the budget left
    (``remaining``), k the rounds left including this one and b a safety stock of ``buffer_sd`` standard deviations of
    the spend of the k rounds at the fair share R / k, in rounds: b = buffer_sd sqrt(k) cv (cv the per-round spend's
    :meth:`~ReceiveScalingModel.stationary_spend_cv`), at most k. So a = 0 is offline water-filling with the channel law
    in place of the future channels, paced by the budget left (spending more than the share raises the next reference
    price), that keeps a buffer against a run of strong channels near the end, which the last round spends: without
    it, a constant action runs out of budget on some realisations and the last rounds leak up to 10^3 times the rest
    of the episode (docs/rl.md)."""
    (remaining, rounds_left, mean), shape = _flat((remaining, rounds_left, mean_h_min2))
    return _shaped(_reference_price_many(remaining, rounds_left, mean, float(buffer_sd), model.arrays,
                                         np.empty_like(remaining)), shape)


def price_spend(model: ReceiveScalingModel, action: ArrayLike, h_min2: ArrayLike, price_ref: ArrayLike,
                price_decades: float) -> NDArray:
    """The cost a price action buys: the minimiser of the round's Lagrangian L_t(x) + mu_t c_t(x) of (28), as
    ``baselines.OfflineOptimal`` with a fixed mu (eta = min(eta*(mu), x_max h^2), see
    :meth:`ReceiveScalingModel.price_receive_scaling`), at mu_t = price_ref * 10^(price_decades a)."""
    (action, h, price_ref), shape = _flat((action, h_min2, price_ref))
    return _shaped(_price_spend_many(action, h, price_ref, float(price_decades), model.arrays, np.empty_like(h)),
                   shape)


def budget_action_cost(model: ReceiveScalingModel, action_type: str, action: ArrayLike, h_min2: ArrayLike,
                       remaining: ArrayLike, rounds_left: ArrayLike, *, mean_h_min2: ArrayLike,
                       multiplier_max: float, price_decades: float, buffer_sd: float = 1.0) -> NDArray:
    """c_t of a budget-mode action a in [-1, 1] (the env and :class:`baselines.policies.ActionPolicy` both call this).

    R_t = nu T - sum_{tau<t} c_tau (``remaining``) is the budget of constraint (28b) left before round t and
    k = T - t >= 1 (``rounds_left``) the rounds left including this one. The round spends

    * ``"price"``: :func:`price_spend` at mu_t = mu_ref,t 10^(price_decades a), mu_ref,t the :func:`reference_price`
      of R_t and k on the channel law of ``mean_h_min2`` with its safety stock of ``buffer_sd`` standard deviations;
    * ``"share"``: m(a) = multiplier_max^a times the fair share (a = 0 is EqualAlloc);

    capped at R_t, and all of R_t in the last round. Every c_t lies in [0, R_t], so (1/T) sum_t c_t = nu holds for any
    sequence of actions.
    """
    if action_type not in BUDGET_ACTIONS:
        raise ValueError(f"budget action_type must be one of {BUDGET_ACTIONS}; got {action_type!r}")
    (action, h, remaining, rounds_left, mean), shape = _flat((action, h_min2, remaining, rounds_left, mean_h_min2))
    return _shaped(_budget_action_cost_many(action_type == "share", action, h, remaining, rounds_left, mean,
                                            float(multiplier_max), float(price_decades), float(buffer_sd),
                                            model.arrays, np.empty_like(h)), shape)
