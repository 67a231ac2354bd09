"""Receive scaling (model A, the AdaScale paper §IV-V) -- :class:`ReceiveScalingModel`: the scenario's constants bound
once, and every per-round formula of :mod:`otagym.schemes.receive_scaling.formulas` applied to arrays (any leading
batch shape, devices on the last axis). The environments and the policies call it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otagym.accounting import SGMCurve
from otagym.schemes.receive_scaling.formulas import (ModelArrays, _convergence_cost, _elementwise, _flat, _h_min2_rows,
                                                     _leakage_derivatives_many, _leakage_many,
                                                     _price_receive_scaling_many, _price_spend_many,
                                                     _reference_price_many, _shaped, _stationary_many,
                                                     _transmit_power_w, _x_for_cost)
from otagym.schemes.receive_scaling.scenario import Scenario
from otagym.schemes.receive_scaling.stationary import (_LAGUERRE_NODES, _LAGUERRE_WEIGHTS, _LEGENDRE_NODES,
                                                       _LEGENDRE_WEIGHTS, _TAIL, _quadrature)

__all__ = ["ReceiveScalingModel"]


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
        E[h_min^2]), E[c^2] / E[c]^2 = e^theta r2(theta) / r(theta)^2 in closed form (E[c^2] integrates like E[c]).
        Large when most rounds run at full power and a few strong channels take the spend (small nu)."""
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
        budget-mode reward (see :class:`otagym.schemes.receive_scaling.core.ReceiveScalingCore`). Positive:
        water-filling beats equal
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

    def cost_slope_of_leakage(self, x: ArrayLike, h_min2: ArrayLike) -> NDArray:
        """-dL/dc at x: the leakage saved per unit of convergence cost spent, L'(x) x^2 / K (>= 0).

        Uses x(c) = x_max / (1 + x_max c h^2/(d sigma_n^2)) (the inverse of c), whose derivative is -x^2 / K.
        """
        h = np.asarray(h_min2, dtype=float)
        x = np.asarray(x, dtype=float)
        return self.leakage_slope(x, h) * x * x * h / self.cost_scale

    def reference_price(self, remaining: ArrayLike, rounds_left: ArrayLike, mean_h_min2: ArrayLike,
                        buffer_sd: float = 1.0) -> NDArray:
        """mu_ref: the price action's zero point, in nats per unit of convergence cost. It is the price eta_bar^2
        L'(eta_bar) / (d sigma_n^2) of the stationary water level eta_bar (:meth:`stationary_level`, so that
        eta*(mu_ref) = eta_bar) that spends R / (k + b) per round on average, with R the budget left (``remaining``),
        k the rounds left including this one and b a safety stock of ``buffer_sd`` standard deviations of the spend
        of the k rounds at the fair share R / k, in rounds: b = buffer_sd sqrt(k) cv (cv the per-round spend's
        :meth:`stationary_spend_cv`), at most k. So a = 0 is offline water-filling with the channel law in place of
        the future channels, paced by the budget left (spending more than the share raises the next reference
        price), that keeps a buffer against a run of strong channels near the end, which the last round spends:
        without it, a constant action runs out of budget on some realisations and the last rounds leak up to 10^3
        times the rest of the episode (docs/rl.md)."""
        (remaining, rounds_left, mean), shape = _flat((remaining, rounds_left, mean_h_min2))
        return _shaped(_reference_price_many(remaining, rounds_left, mean, float(buffer_sd), self.arrays,
                                             np.empty_like(remaining)), shape)

    def price_spend(self, action: ArrayLike, h_min2: ArrayLike, price_ref: ArrayLike, price_decades: float) -> NDArray:
        """The cost a price action buys: the minimiser of the round's Lagrangian L_t(x) + mu_t c_t(x) of (28), as
        ``baselines.OfflineOptimal`` with a fixed mu (eta = min(eta*(mu), x_max h^2), see
        :meth:`price_receive_scaling`), at mu_t = price_ref * 10^(price_decades a)."""
        (action, h, price_ref), shape = _flat((action, h_min2, price_ref))
        return _shaped(_price_spend_many(action, h, price_ref, float(price_decades), self.arrays,
                                         np.empty_like(h)), shape)

    # --- power -----------------------------------------------------------------------------------------------
    def transmit_power_w(self, eta: ArrayLike, gains: ArrayLike) -> NDArray:
        """Average transmit power bound of eq. (14): eta G^2 k_m^2 / (d M^2 |h_m|^2), W, devices last."""
        return _elementwise(_transmit_power_w, (np.asarray(eta)[..., None], gains, self.power_coeff))

