"""Model C: anonymous over-the-air computation -- the pure, batched formulas (the scenario is
:mod:`otagym.schemes.anonymous.scenario`).

The paper: Hasırcıoğlu & Gündüz, *Private Wireless Federated Learning with Anonymous Over-the-Air Computation*
(IEEE ICASSP 2021). The derivations, the reproduced Fig. 1 and the deviations from the printed formulas are in
``docs/anonymous.md`` (the site's "Anonymous over-the-air computation" page). Equation, lemma and theorem numbers
below are the paper's; its references [5] are Dwork & Roth (2014), [9] Abadi et al. (2016, DP-SGD) and [22]
Mironov, Talwar & Zhang (2019).

The protocol (§III-IV). N devices (``num_devices``), each with n samples. In round t device i takes part when its
channel is good, which happens with probability p independently of the other devices and rounds (§III); a
participating device Poisson-samples its data with rate q, so a(t) = |A_t| ~ Binomial(N, p) and the round's total
batch b_t = sum_{i in A_t} b_i,t ~ Binomial(a(t) n, q). Device i sends x_i = h_i (xi sum_{j in B_i} g(j) + beta n_i)
(1) with per-sample gradients clipped to L, xi = 1/b_t (§IV-A: the received power no longer depends on who or how
many transmit), beta = 1/sqrt(a(t)) and n_i ~ N(0, sigma^2 I_d) (§IV-B), and channel inversion h_i = 1/(k c_i) from
CSI that the server may scale by k in (0, 1] (§II-B). The server receives (2):

    y[t] = (1/b_t) sum_{i in A_t} sum_{j in B_i} g(j) + n[t] + z[t],   n[t] ~ N(0, sigma^2 I_d)   (for k = 1),

so the noise the devices add totals sigma^2 per coordinate whatever a(t) >= 1 is; z is the channel noise, which the
accounting ignores (§IV-C: the server can fake it with its pilots).

Units: sigma is the per-coordinate standard deviation of n[t] in gradient units (the unit of the clip norm L). The
L2 sensitivity of the averaged gradient under the paper's adjacency (Definition 1: same size, one element replaced)
is Delta f = 2 L / b_t (proof of Theorem 1), so the dimensionless noise multiplier of the round is
sigma' = sigma b_t / (2 L), and each sample is included with probability p q (Corollary 1).

Every function takes numpy arrays with any leading batch shape; ``orders`` adds a trailing axis when a sequence.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otagym.accounting import rdp_sgm, rdp_to_dp

if TYPE_CHECKING:  # the scenario's properties use this module's formulas
    from otagym.schemes.anonymous.scenario import Accounting, AnonymousScenario

__all__ = [
    "participation_from_threshold", "threshold_for_participation", "clip_gradients", "per_device_noise_var",
    "received_noise_var", "over_the_air", "inclusion_rate", "sensitivity", "noise_multiplier", "device_level_rdp",
    "round_rdp", "rdp_theorem1", "theorem1_conditions", "rdp_to_dp_lemma2", "gaussian_epsilon",
    "advanced_composition", "advanced_composition_curve", "composed_epsilon", "sample_batches",
    "convergence_term", "convergence_bound",
]


# --- participation, scaling and noise (§III, §IV-A, §IV-B) ------------------------------------------------------
def participation_from_threshold(threshold: ArrayLike) -> NDArray:
    """p = Pr(|c|^2 / E|c|^2 >= threshold) = exp(-threshold) under Rayleigh fading (|c|^2 is exponential).

    The paper assumes "only the agents having a sufficiently good channel ... participate ... with probability p"
    and leaves p for fading distributions to future work (§III); this is that probability for Rayleigh fading and a
    threshold on the normalised power gain (dimensionless, >= 0).
    """
    return np.exp(-np.asarray(threshold, dtype=float))


def threshold_for_participation(participation: ArrayLike) -> NDArray:
    """The normalised power-gain threshold -ln p that gives participation p under Rayleigh fading (0 for p = 1)."""
    return -np.log(np.asarray(participation, dtype=float))


def clip_gradients(gradients: ArrayLike, clip_norm: float) -> NDArray:
    """g(d) = grad l(w, d) min{1, L / ||grad l(w, d)||}, per sample along the last axis.

    §III prints ``max{1, L/||.||}``, which would scale small gradients up and leave large ones unclipped; the text
    ("downscaled by a factor of L/||.||") and [9] mean the min, which is what makes ||g(d)|| <= L hold.
    """
    g = np.asarray(gradients, dtype=float)
    norm = np.linalg.norm(g, axis=-1, keepdims=True)
    return g * np.minimum(1.0, clip_norm / np.maximum(norm, np.finfo(float).tiny))


def per_device_noise_var(sigma: ArrayLike, participants: ArrayLike) -> NDArray:
    """beta^2 sigma^2 = sigma^2 / a(t), the per-coordinate variance of one participant's noise (§IV-B, beta =
    1/sqrt(a(t))), in gradient units squared; 0 where a(t) = 0 (no device transmits)."""
    a = np.asarray(participants, dtype=float)
    return np.where(a > 0, np.asarray(sigma, dtype=float) ** 2 / np.maximum(a, 1.0), 0.0)


def received_noise_var(sigma: ArrayLike, participants: ArrayLike) -> NDArray:
    """Per-coordinate variance of n[t] in (2): the a(t) independent shares of sigma^2 / a(t) sum to sigma^2 for any
    a(t) >= 1 (the noise does not depend on who transmits); 0 when no device transmits."""
    a = np.asarray(participants, dtype=float)
    return a * per_device_noise_var(sigma, a)


def over_the_air(gradients: ArrayLike, included: ArrayLike, participating: ArrayLike, sigma: float,
                 channel: ArrayLike, rng: np.random.Generator, *, csi_factor: float = 1.0,
                 channel_noise_var: float = 0.0) -> tuple[NDArray, NDArray]:
    """One round on real vectors: the transmissions (1) and the received y[t] (2). Returns ``(y, f)``.

    Args:
        gradients: clipped per-sample gradients, shape (N, n, d).
        included: whether each example is in its device's batch B_i,t, shape (N, n).
        participating: the set A_t, shape (N,).
        sigma: the total noise std per coordinate (gradient units).
        channel: real channel gains c_i,t > 0, shape (N,) (phases are corrected, §III).
        rng: the generator of the device noise and the channel noise.
        csi_factor: k in (0, 1], the server's scaling of the CSI the devices estimate (a pilot attack, §II-B): devices
            invert k c_i, so y = (f + n) / k + z.
        channel_noise_var: N_0 of z[t] per coordinate.

    f = (1/b_t) sum of the included gradients of the participants (0 if b_t = 0) is what the server should learn;
    each participant adds n_i ~ N(0, sigma^2 I_d) scaled by beta = 1/sqrt(a(t)).
    """
    g = np.asarray(gradients, dtype=float)
    inc = np.asarray(included, dtype=bool) & np.asarray(participating, dtype=bool)[:, None]
    part = np.asarray(participating, dtype=bool)
    a, b = int(part.sum()), int(inc.sum())
    d = g.shape[-1]
    xi = 1.0 / b if b else 0.0  # §IV-A; with an empty batch the devices send noise only
    beta = 1.0 / math.sqrt(a) if a else 0.0  # §IV-B
    local = (g * inc[..., None]).sum(axis=1)  # sum_{j in B_i} g(j), (N, d)
    h = 1.0 / (csi_factor * np.asarray(channel, dtype=float))
    x = h[:, None] * (xi * local + beta * sigma * rng.standard_normal((g.shape[0], d)))  # (1)
    x[~part] = 0.0
    y = (np.asarray(channel, dtype=float)[:, None] * x).sum(axis=0) + math.sqrt(channel_noise_var) * (
        rng.standard_normal(d))
    return y, xi * local.sum(axis=0)


# --- accounting (§IV-D, Theorem 1) -------------------------------------------------------------------------------
def inclusion_rate(participation: ArrayLike, sampling_rate: ArrayLike) -> NDArray:
    """p q: the probability that an example is in the round's batch (Corollary 1; the printed corollary says "with
    probability q" for the devices and the result -- read p and p q)."""
    return np.asarray(participation, dtype=float) * np.asarray(sampling_rate, dtype=float)


def sensitivity(clip_norm: ArrayLike, batch: ArrayLike) -> NDArray:
    """Delta f = 2 L / b_t (gradient units, L2), proof of Theorem 1: replacing one example of the averaged batch moves
    the average by at most 2L / b_t. (Adding the example instead moves it by at most 2L / (b_t + 1): the 1/b_t
    normalisation makes the sensitivity about 2L / b_t under add/remove adjacency too.)"""
    return 2.0 * np.asarray(clip_norm, dtype=float) / np.asarray(batch, dtype=float)


def noise_multiplier(sigma: ArrayLike, clip_norm: float, batch: ArrayLike) -> NDArray:
    """sigma' = sigma / Delta f = sigma b_t / (2 L) (Theorem 1), dimensionless; inf where b_t = 0 (no example is sent,
    the round depends on no data).

    This is the noise multiplier of an add/remove sampled Gaussian mechanism of sensitivity 2L / b_t. It is also the
    right one for the substitution pairs of the averaged batch: the pair ((1-r) N(0) + r N(v), N(0)) with
    ||v|| = 2L/b_t occurs (g(x') equal to the average of the rest), and the antipodal pair
    ((1-r) N(0) + r N(v), (1-r) N(0) + r N(-v)), ||v|| = L/b_t, stays below it and above the SGM at L/b_t
    (numerical integration over r in [0.01, 0.5], ||v|| / sigma in [0.25, 2], alpha in [2, 16]: at most 0.9 of it;
    ``tests/otagym/schemes/test_anonymous.py`` checks four points).
    """
    b = np.asarray(batch, dtype=float)
    return np.where(b > 0, np.asarray(sigma, dtype=float) * b / (2.0 * clip_norm), np.inf)


def device_level_rdp(participation: float, rdp_given_participation: ArrayLike, orders: ArrayLike) -> NDArray:
    """(1/(alpha-1)) log(1 - p + p exp((alpha-1) eps_q)): the RDP of a round in which the example's device takes part
    with probability p and then leaks eps_q (nats at order alpha; ``orders`` the trailing axis of the RDP array if
    a sequence).

    exp((alpha - 1) D_alpha) is jointly convex, and the outputs with and without the device are the same mixture
    component on both neighbouring datasets, so this bounds the round whatever the other devices do; for N = 1 (the
    server sees y = 0 when nobody transmits, channel noise ignored) it is exact. ``p = 1`` returns eps_q.
    """
    am1 = np.asarray(orders, dtype=float) - 1.0  # broadcasts on the trailing axis
    x = am1 * np.asarray(rdp_given_participation, dtype=float)
    p = float(participation)
    with np.errstate(over="ignore", divide="ignore"):
        small = np.log1p(p * np.expm1(np.minimum(x, 700.0)))  # full precision for tiny x
        large = np.logaddexp(math.log1p(-p) if p < 1.0 else -np.inf, math.log(p) + x)
    return np.where(x <= 700.0, small, large) / am1


def round_rdp(s: AnonymousScenario, noise_mult: ArrayLike, *, accounting: Accounting | None = None,
              orders: ArrayLike | None = None) -> NDArray:
    """One round's RDP of every example (nats) at the realised sigma' = sigma b_t / (2L), at ``orders`` (default: the
    scenario's alpha; a sequence adds a trailing axis).

    * ``sampled`` (the paper's, §IV-D and §V): the SGM at rate p q with noise multiplier sigma' -- ``rdp_sgm``,
      equal to Opacus's ``compute_rdp`` -- which is what Theorem 1 bounds in closed form.
    * ``device``: :func:`device_level_rdp` of the SGM at rate q. The paper's rate p q needs every example to be
      sampled independently (Corollary 1), but examples of one device enter together with their device: if the
      server can tell whether a device transmitted (N = 1, or a device whose data dominates the average), the leak is
      the device-level value: about 1/p times the SGM at p q where both are small, and orders of magnitude more where
      the SGM at q is not (1,200x at p = q = 0.1, sigma' = 1, alpha = 8; ``tests/otagym/schemes/test_anonymous.py``).
      Joint convexity makes the device-level value a bound for any N, with no independence assumption.

    Both use the realised b_t as Theorem 1 does (the devices know it; the server does not), and neither counts the
    channel noise (§IV-C).
    """
    accounting = accounting or s.accounting
    orders = s.rdp_order if orders is None else orders
    if accounting == "sampled":
        return rdp_sgm(q=s.inclusion_rate, noise_multiplier=noise_mult, orders=orders)
    given = rdp_sgm(q=s.sampling_rate, noise_multiplier=noise_mult, orders=orders)
    return device_level_rdp(s.participation, given, orders)


def rdp_theorem1(order: ArrayLike, rate: ArrayLike, noise_mult: ArrayLike) -> NDArray:
    """Theorem 1's closed form 2 (p q)^2 alpha / sigma'^2 (nats per round), valid where :func:`theorem1_conditions`
    holds ([22], Theorem 11); elsewhere it is not a bound (``tests/otagym/schemes/test_anonymous.py`` shows by how
    much)."""
    r = np.asarray(rate, dtype=float)
    return 2.0 * r * r * np.asarray(order, dtype=float) / np.asarray(noise_mult, dtype=float) ** 2


def theorem1_conditions(order: ArrayLike, rate: ArrayLike, noise_mult: ArrayLike, *,
                        noise_std: ArrayLike | None = None) -> NDArray:
    """Whether Theorem 1 applies: p q <= 1/5, sigma' >= 4, (3) and (4), with L_a = log(1 + 1/(p q (alpha - 1))):

        (3)  1 < alpha <= (1/2) s^2 L_a - 2 log s,
        (4)  alpha <= ((1/2) sigma'^2 L_a^2 - log 5 - 2 log sigma') / (L_a + log(p q alpha) + 1/(2 sigma'^2)).

    With ``noise_std=None``, s = sigma' in (3): the conditions of [22], Theorem 11, which the proof invokes for a
    mechanism of sensitivity 1, i.e. in units of sigma'. With ``noise_std=sigma`` (gradient units), (3) is taken as
    printed: ``(1/2) sigma^2 L_a - 2 log(sigma^2)``, the noise std in place of sigma' and log sigma^2 for log sigma.
    With Delta f = 1 (as in §V) the printed (3) is stricter than [22]'s, which is harmless; with Delta f > 1 it
    admits orders at which the closed form is not a bound (``tests/otagym/schemes/test_anonymous.py``).
    """
    a = np.asarray(order, dtype=float)
    r = np.asarray(rate, dtype=float)
    z = np.asarray(noise_mult, dtype=float)
    with np.errstate(divide="ignore"):
        log_a = np.log1p(1.0 / (r * (a - 1.0)))
    if noise_std is None:
        cond3 = a <= 0.5 * z * z * log_a - 2.0 * np.log(z)
    else:
        s = np.asarray(noise_std, dtype=float)
        cond3 = a <= 0.5 * s * s * log_a - 2.0 * np.log(s * s)
    cond4 = a <= (0.5 * z * z * log_a**2 - math.log(5.0) - 2.0 * np.log(z)) / (
        log_a + np.log(r * a) + 1.0 / (2.0 * z * z))
    return (r <= 0.2) & (z >= 4.0) & (a > 1.0) & cond3 & cond4


def rdp_to_dp_lemma2(rdp: ArrayLike, orders: ArrayLike, delta: float) -> tuple[NDArray, NDArray]:
    """(eps, best order) by Lemma 2: eps = min_alpha rdp_alpha + log(1/delta) / (alpha - 1) (orders on the last axis).

    The paper's conversion (Mironov 2017, Prop. 3). ``otagym.accounting.rdp_to_dp`` (eq. (6) of Moradi Kalarde et al.,
    *Privacy Enhancement in Over-the-Air Federated Learning via Adaptive Receive Scaling*; Opacus's current
    conversion) is lower by log(alpha/(alpha-1)) + log(alpha)/(alpha-1) at every order; the env reports it.
    """
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1); got {delta}")
    o = np.asarray(orders, dtype=float)
    eps = np.asarray(rdp, dtype=float) + math.log(1.0 / delta) / (o - 1.0)
    best = np.argmin(eps, axis=-1)
    return np.take_along_axis(eps, best[..., None], axis=-1)[..., 0], o[best]


def composed_epsilon(rounds: ArrayLike, rate: ArrayLike, noise_mult: ArrayLike, *, delta: float,
                     orders: ArrayLike, lemma2: bool = True) -> NDArray:
    """eps after T rounds of the SGM at (rate, sigma') (Lemma 3: the RDP adds up; §IV-D's "process to compute"),
    minimised over ``orders``; ``lemma2=False`` converts with eq. (6) (``otagym.accounting.rdp_to_dp``).
    Shape: broadcast(rounds, rate, noise_mult)."""
    per_round = rdp_sgm(q=rate, noise_multiplier=noise_mult, orders=orders)
    total = np.asarray(rounds, dtype=float)[..., None] * per_round
    convert = rdp_to_dp_lemma2 if lemma2 else rdp_to_dp
    return convert(total, orders, delta)[0]


def gaussian_epsilon(ratio: ArrayLike, delta: ArrayLike) -> NDArray:
    """Lemma 1: the Gaussian mechanism with Delta f / sigma = ``ratio`` is (sqrt(2 log(1.25/delta)) ratio, delta)-DP.

    As printed; [5, Thm. 3.22] proves it for eps < 1 only, and Fig. 1's setting (ratio 1) is far outside that
    (eps ~ 6). The accountant-consistent per-round eps is that of the analytic Gaussian mechanism (Balle & Wang
    2018); we keep the printed one to reproduce the 'act' curve.
    """
    return np.sqrt(2.0 * np.log(1.25 / np.asarray(delta, dtype=float))) * np.asarray(ratio, dtype=float)


def advanced_composition(epsilon0: ArrayLike, rounds: ArrayLike, delta_slack: ArrayLike) -> NDArray:
    """[5], Theorem 3.20: T (eps0, delta0)-DP mechanisms compose to (eps, T delta0 + delta')-DP with
    eps = sqrt(2 T log(1/delta')) eps0 + T eps0 (e^eps0 - 1)."""
    e0 = np.asarray(epsilon0, dtype=float)
    k = np.asarray(rounds, dtype=float)
    return np.sqrt(2.0 * k * np.log(1.0 / np.asarray(delta_slack, dtype=float))) * e0 + k * e0 * np.expm1(e0)


def advanced_composition_curve(rounds: ArrayLike, delta: float, ratio: float = 1.0, splits: int = 199) -> NDArray:
    """Fig. 1's 'act' curve: eps after T rounds of the Gaussian mechanism (p q = 1) by Lemma 1 + [5, Thm. 3.20].

    The paper does not say how it splits delta between the rounds (T delta0) and the slack delta'; we take the best
    of ``splits`` fractions delta' = f delta, delta0 = (1 - f) delta / T, f in (0, 1) (any split is valid).
    """
    k = np.asarray(rounds, dtype=float)[..., None]
    f = np.linspace(0.0, 1.0, splits + 2)[1:-1]
    eps0 = gaussian_epsilon(ratio, (1.0 - f) * delta / k)
    return advanced_composition(eps0, k, f * delta).min(axis=-1)


# --- the batch of a round ----------------------------------------------------------------------------------------
def sample_batches(s: AnonymousScenario, rng: np.random.Generator, size: int | tuple[int, ...]) -> NDArray:
    """Draws of b_t: a(t) ~ Binomial(N, p), then b_t ~ Binomial(a(t) n, q) (a sum of a(t) Binomial(n, q)), int64."""
    a = rng.binomial(s.num_devices, s.participation, size=size)
    return rng.binomial(a * s.dataset_size, s.sampling_rate)


# --- convergence (not in the paper; the utility term of the reward) ---------------------------------------------
def convergence_term(s: AnonymousScenario, sigma: ArrayLike, participants: ArrayLike, batch: ArrayLike) -> NDArray:
    """V_t = L^2 / max(b_t, 1) + d (sigma_n,t^2 + N_0): a bound on E||y[t] - grad F(w_t)||^2 (gradient units^2).

    The minibatch term bounds the variance of an average of b_t clipped gradients (each of norm <= L; a round with
    an empty batch is charged as one example), the second is the received noise of (2) (sigma^2 when a(t) >= 1, 0
    when nobody transmits) and the channel noise over the d coordinates. Clipping bias is ignored.
    """
    b = np.maximum(np.asarray(batch, dtype=float), 1.0)
    noise = received_noise_var(sigma, participants) + s.channel_noise_var
    return s.clip_norm**2 / b + s.model_dim * noise


def convergence_bound(s: AnonymousScenario, mean_term: ArrayLike, rounds: ArrayLike) -> NDArray:
    """gamma = 2 (F(w_0) - F*) / (eta T) + eta beta mean_t V_t: the bound on (1/T) sum_t E||grad F(w_t)||^2 of SGD
    with a fixed step eta <= 1/beta on a beta-smooth non-convex F (Bottou, Curtis & Nocedal 2018, Thm. 4.8, with
    unbiased updates), evaluated after ``rounds`` rounds. The paper has no convergence analysis; this is ours."""
    t = np.asarray(rounds, dtype=float)
    return 2.0 * s.initial_gap / (s.learning_rate * t) + s.learning_rate * s.smoothness * np.asarray(mean_term)
