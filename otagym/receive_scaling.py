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

__all__ = ["ReceiveScalingModel"]


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

    # --- power -----------------------------------------------------------------------------------------------
    def transmit_power_w(self, eta: ArrayLike, gains: ArrayLike) -> NDArray:
        """Average transmit power bound of eq. (14): eta G^2 k_m^2 / (d M^2 |h_m|^2), W, devices last."""
        return np.asarray(eta)[..., None] / gains * self.power_coeff  # this order keeps gains' device-major layout
