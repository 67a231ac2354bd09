"""Model A: channel-inversion FedSGD with server receive scaling (AdaScale paper, seed 000, §IV-V). Pure, batched.

Notation (SPEC §2): eta_t receive scaling, h_min,t = min_m |h_m,t| / k_m, x_t = eta_t / h_min,t^2 (eq. (23)),
x_max = P_max d M^2 / G^2, 0 < x_t <= x_max (eq. (24)).

All functions take arrays with a leading batch shape and devices on the last axis; they work for batch size 1.
:class:`ReceiveScalingModel` binds the scenario constants once and is what the environments and the policies call.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otagym.privacy import SGMCurve
from otagym.scenario import Scenario

__all__ = ["ReceiveScalingModel", "budget_cost", "budget_multiplier", "normalized_x"]

#: Gauss-Laguerre nodes and weights for expectations over h_min^2 ~ Exponential (see
#: :meth:`ReceiveScalingModel.expected_equal_alloc_leakage`).
_LAGUERRE_NODES, _LAGUERRE_WEIGHTS = np.polynomial.laguerre.laggauss(48)


def normalized_x(action: ArrayLike, x_max: float, x_min_ratio: float) -> NDArray:
    """x = x_max * x_min_ratio ** ((1 - a) / 2) for a in [-1, 1]: the log-scale action of the cmdp/lagrangian modes
    (a = 1 is full power, a = -1 is x_min_ratio * x_max)."""
    return x_max * np.exp(0.5 * np.log(x_min_ratio) * (1.0 - np.asarray(action, dtype=float)))


def budget_multiplier(action: ArrayLike, multiplier_max: float) -> NDArray:
    """m(a) = multiplier_max ** a: the multiple of the fair share a budget-mode action spends (log scale, m(0) = 1)."""
    return np.power(float(multiplier_max), np.asarray(action, dtype=float))


def budget_cost(action: ArrayLike, remaining: ArrayLike, rounds_left: ArrayLike, multiplier_max: float) -> NDArray:
    """This round's convergence cost c_t in budget mode: m(a) R_t / (T - t), capped at R_t; the last round spends R_t.

    R_t = nu T - sum_{tau<t} c_tau is the budget of constraint (28b) left before round t and T - t >= 1 the rounds
    left including this one. Every c_t lies in [0, R_t], so (1/T) sum_t c_t = nu holds for any sequence of actions.
    """
    remaining = np.maximum(np.asarray(remaining, dtype=float), 0.0)  # rounding can leave -1e-17
    rounds_left = np.asarray(rounds_left)
    share = budget_multiplier(action, multiplier_max) * remaining / rounds_left
    return np.where(rounds_left <= 1, remaining, np.minimum(share, remaining))


class ReceiveScalingModel:
    """Scenario constants of model A and the per-round formulas, batched over any leading shape.

    Devices with equal (B_m, q_m) leak identically (eq. (25) depends on m only through B_m), so the RDP is evaluated
    once per *device class* and gathered; the paper's homogeneous presets have a single class.
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
        # 1/sigma_m^2 = 2 eta G^2 / (M^2 B_m^2 sigma_n^2)  (inverse square of eq. (15)), per unit eta.
        self.class_u_per_eta = 2.0 * s.clip_norm**2 / (s.num_devices**2 * classes[:, 0] ** 2 * s.noise_power_w)
        self.curve = SGMCurve(self.class_q, s.rdp_order)
        # Transmit power per unit eta and unit 1/|h|^2: G^2 k_m^2 / (d M^2)  (eq. (14)).
        self.power_coeff = s.clip_norm**2 * self.k2 / (s.model_dim * s.num_devices**2)
        self.cost_scale = s.model_dim * s.noise_power_w  # d sigma_n^2

    # --- channel statistics --------------------------------------------------------------------------------
    def h_min2(self, gains: ArrayLike) -> NDArray:
        """h_min,t^2 = min_m |h_m,t|^2 / k_m^2 (below eq. (23)); ``gains`` = |h|^2, devices last."""
        return np.min(gains * self.inv_k2, axis=-1)

    # --- privacy ---------------------------------------------------------------------------------------------
    def class_inverse_noise_var(self, eta: ArrayLike) -> NDArray:
        """u = 1/sigma^2 per device class, shape ``eta.shape + (C,)``."""
        return np.multiply.outer(eta, self.class_u_per_eta)

    def class_rdp(self, eta: ArrayLike) -> NDArray:
        """Per-round RDP at the scenario's order alpha per device class (Lemma 1, eq. (9)), ``eta.shape + (C,)``."""
        return self.curve.rdp(self.class_inverse_noise_var(eta))

    def leakage(self, x: ArrayLike, h_min2: ArrayLike) -> NDArray:
        """sum_m rho_alpha(q_m, sigma_m,t) at x_t (the summand of objective (28a))."""
        return (self.class_rdp(np.multiply(x, h_min2)) * self.class_counts).sum(axis=-1)

    def leakage_slope(self, x: ArrayLike, h_min2: ArrayLike) -> NDArray:
        """d/dx of :meth:`leakage` (u is linear in x: du/dx = h_min^2 u_per_eta)."""
        h = np.asarray(h_min2, dtype=float)
        du_dx = np.multiply.outer(h, self.class_u_per_eta)
        u = np.asarray(x)[..., None] * du_dx
        return (self.curve.slope(u) * du_dx * self.class_counts).sum(axis=-1)

    def leakage_slope_and_curvature(self, x: ArrayLike, h_min2: ArrayLike) -> tuple[NDArray, NDArray]:
        """First and second derivatives of :meth:`leakage` in x."""
        h = np.asarray(h_min2, dtype=float)
        du_dx = np.multiply.outer(h, self.class_u_per_eta)
        d1, d2 = self.curve.slope_and_curvature(np.asarray(x)[..., None] * du_dx)
        return ((d1 * du_dx * self.class_counts).sum(axis=-1),
                (d2 * du_dx * du_dx * self.class_counts).sum(axis=-1))

    # --- convergence surrogate -------------------------------------------------------------------------------
    def convergence_cost(self, x: ArrayLike, h_min2: ArrayLike) -> NDArray:
        """c_t(x) = d sigma_n^2 / h_min,t^2 (1/x_t - 1/x_max), the summand of constraint (28b); >= 0."""
        return self.cost_scale / np.asarray(h_min2) * (1.0 / np.asarray(x) - 1.0 / self.x_max)

    def x_for_cost(self, cost: ArrayLike, h_min2: ArrayLike) -> NDArray:
        """The x with c_t(x) = cost (inverse of :meth:`convergence_cost`): x_max / (1 + x_max cost h^2 / (d s_n^2)).

        With cost = nu this is EqualAlloc's rule (§VII).
        """
        return self.x_max / (1.0 + self.x_max * np.asarray(cost) * np.asarray(h_min2) / self.cost_scale)

    def expected_h_min2(self, mean_channel_gain: ArrayLike) -> NDArray:
        """E[h_min^2] under Rayleigh fading: h_min^2 = min_m |h_m|^2 / k_m^2 is the minimum of independent
        exponentials with rates PL_m k_m^2, hence Exponential with rate sum_m PL_m k_m^2 (SPEC §2). Holds for every
        fading model here (all have the Exponential marginal). ``mean_channel_gain`` = 1/PL_m, devices last."""
        return 1.0 / (self.k2 / np.asarray(mean_channel_gain, dtype=float)).sum(axis=-1)

    def expected_equal_alloc_leakage(self, nu: ArrayLike, mean_h_min2: ArrayLike) -> NDArray:
        """E[L_t] under EqualAlloc (c_t = nu) with h_min,t^2 ~ Exponential(mean ``mean_h_min2``), by 48-node
        Gauss-Laguerre quadrature: the per-round leakage scale of the env's reward. Finite: as h grows, x h^2 tends to
        d sigma_n^2 / nu, so the integrand is bounded."""
        mean = np.asarray(mean_h_min2, dtype=float)[..., None]
        h = mean * _LAGUERRE_NODES
        x = self.x_for_cost(np.asarray(nu, dtype=float)[..., None], h)
        return self.leakage(x, h) @ _LAGUERRE_WEIGHTS

    # --- power -----------------------------------------------------------------------------------------------
    def transmit_power_w(self, eta: ArrayLike, gains: ArrayLike) -> NDArray:
        """Average transmit power bound of eq. (14): eta G^2 k_m^2 / (d M^2 |h_m|^2), W, devices last."""
        return np.asarray(eta)[..., None] / gains * self.power_coeff  # this order keeps gains' device-major layout
