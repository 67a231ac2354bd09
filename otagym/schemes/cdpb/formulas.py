"""Model B: client-driven power balancing (CDPB) -- the pure, batched formulas (the scenario is
:mod:`otagym.schemes.cdpb.scenario`).

The paper: Kim, Seo & Choi, *Privacy-Enhanced Over-the-Air Federated Learning via Client-Driven Power Balancing*
(arXiv:2410.05907, 2024). The derivations and the deviations from the printed formulas are in ``docs/cdpb.md`` (the
site's "Client-driven power balancing" page under "Formulations and derivations"). Equation numbers below are the
paper's.

Notation: K clients, power limit P (W), gradient-norm bound W, power gain h_k,t ~ Exponential(mean m_k), m_k = 2 s_k
with s_k the Rayleigh scale sigma_k^2 of the paper (so Pr(h_k >= h) = exp(-h / (2 sigma_k^2)), eq. (53)). The server
broadcasts rho in (0, P/W^2]; the threshold is h_th = rho W^2 / P (7); reliable clients (h >= h_th) invert their
channel with a = rho / h (4) and fill the rest of their power with artificial noise (11); unreliable clients send
noise at full power (``noisy``), stay silent (``idle``) or send noise with probability ``portion`` (``mixed``).

All power quantities are total powers over the d model coordinates (the paper's d sigma_r^2); a gradient meets its
bound, ||g|| = W, which is the case the closed forms (56)/(60) and the privacy analysis assume.

Every function takes numpy arrays with any leading batch shape and a trailing client axis of length K where noted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otagym.accounting import rdp_sgm
from otagym.schemes.cdpb.scenario import Accounting, CDPBScenario

__all__ = [
    "participation_probability", "expected_num_reliable", "expected_received_noise", "expected_noise_var",
    "sum_of_others", "RoundPowers", "round_powers", "convergence_term", "convergence_error", "rdp_theorem1",
    "noise_multiplier", "round_rdp", "round_reward", "aggregate_over_the_air", "expected_round_terms", "utility",
]


# --- expectations over the channel (the server's view: channel distribution only) --------------------------------
def participation_probability(s: CDPBScenario, rho: ArrayLike, mean_gain: NDArray | None = None,
                              threshold_scale: ArrayLike = 1.0) -> NDArray:
    """p_k(rho) = Pr(h_k >= rho W^2 / P) = exp(-rho W^2 / (2 P sigma_k^2)), the summand of eq. (53); shape rho + (K,).

    Independent client sampling (``client_sampling``) is not included: it multiplies p_k. ``mean_gain`` replaces the
    K clients' E[h_k] (e.g. by the distinct values only). ``threshold_scale`` c_k >= 1 (batch + (K,) or a scalar) is a
    device's own participation threshold c_k h_th over the paper's (a device that decides for itself,
    :mod:`otagym.multiagent`): p_k = Pr(h_k >= c_k h_th) = exp(-c_k h_th / E[h_k]); 1 is the paper's rule.
    """
    c = np.asarray(rho, dtype=float)[..., None] * (s.grad_bound**2 / s.power_max_w) * threshold_scale
    return np.exp(-c / (s.mean_gain if mean_gain is None else mean_gain))


def expected_num_reliable(s: CDPBScenario, rho: ArrayLike) -> NDArray:
    """E[K_t] at rho: s_c sum_k p_k(rho), eq. (53) (s_c = ``client_sampling``, 1 in the paper)."""
    return s.client_sampling * participation_probability(s, rho).sum(axis=-1)


def expected_received_noise(s: CDPBScenario, rho: ArrayLike, mean_gain: NDArray | None = None) -> NDArray:
    """E[artificial-noise power that client k adds at the receiver], shape rho + (K,) (W, total over d).

    Reliable part: E[(P h - rho W^2) 1{h >= h_th}] = P m_k p_k (the summand of eq. (60), since P h_th = rho W^2);
    unreliable part, sent with probability pi (the strategy's noise portion): pi P E[h 1{h < h_th}] =
    pi P (m_k - (m_k + h_th) p_k), so that pi = 1 gives eq. (56)'s summand 2 P sigma_k^2 - rho W^2 p_k. Zero for the
    noise-free baseline. Multiplied by ``client_sampling`` (non-sampled clients are silent).
    """
    rho = np.asarray(rho, dtype=float)
    m, big_p = (s.mean_gain if mean_gain is None else mean_gain), s.power_max_w
    if not s.artificial_noise:
        return np.zeros(rho.shape + m.shape)
    p = participation_probability(s, rho, m)
    h_th = rho[..., None] * (s.grad_bound**2 / big_p)
    reliable = big_p * m * p
    unreliable = big_p * (m - (m + h_th) * p)
    return s.client_sampling * (reliable + s.noise_portion * unreliable)


def expected_noise_var(s: CDPBScenario, rho: ArrayLike) -> NDArray:
    """E[sigma_q,t^2] at rho: sum_k E[noise_k] + sigma_z^2, eq. (56) (noisy), (60) (idle), their mix (W, total
    over d).

    The paper drops sigma_z^2 after eq. (53); we keep it (it is independent of rho and makes the noise-free baseline
    finite).
    """
    return expected_received_noise(s, rho).sum(axis=-1) + s.noise_power_w


def sum_of_others(values: ArrayLike) -> NDArray:
    """sum_{j != k} values_j for every k along the last axis, from exclusive prefix and suffix sums: for
    non-negative values no cancellation, where ``values.sum() - values`` returns 0 for a client whose term dwarfs
    the others (and the privacy noise covering it then looked like zero)."""
    x = np.asarray(values, dtype=float)
    zero = np.zeros(x.shape[:-1] + (1,))
    before = np.concatenate([zero, np.cumsum(x[..., :-1], axis=-1)], axis=-1)
    after = np.concatenate([np.cumsum(x[..., :0:-1], axis=-1)[..., ::-1], zero], axis=-1)
    return before + after


# --- one realised round ----------------------------------------------------------------------------------------
@dataclass
class RoundPowers:
    """Per-client powers of one round (batch + (K,)); the noise variance of eq. (13)/(17) (batch)."""

    reliable: NDArray  # bool, h >= h_th (and sampled): the set K_t of eq. (6)
    sends_noise: NDArray  # bool, unreliable clients that transmit noise
    signal_power_w: NDArray  # a ||g||^2 = rho W^2 / h at the transmitter (reliable only)
    noise_power_w: NDArray  # artificial-noise power at the transmitter, d sigma_r^2 (times a for reliable)
    received_noise_w: NDArray  # that noise at the receiver: h * noise_power_w
    noise_var: NDArray  # sigma_q,t^2 = sum_k received_noise + sigma_z^2

    @property
    def transmit_power_w(self) -> NDArray:
        """E||x_k,t||^2 of eq. (3)/(11): never above P."""
        return self.signal_power_w + self.noise_power_w

    def noise_var_others(self, noise_power_w: float) -> NDArray:
        """Per client (batch + (K,)), the noise variance that covers its signal: the other clients' received noise
        plus sigma_z^2 (``noise_power_w``), summed without the cancellation of ``noise_var - received``."""
        return sum_of_others(self.received_noise_w) + noise_power_w

    @property
    def num_reliable(self) -> NDArray:
        """K_t = |K_t|."""
        return self.reliable.sum(axis=-1)

    def row(self, i: int) -> "RoundPowers":
        """The powers of env ``i`` of a batch (the arrays' leading axis)."""
        return RoundPowers(**{f.name: getattr(self, f.name)[i] for f in fields(self)})


def round_powers(s: CDPBScenario, rho: ArrayLike, gains: ArrayLike, sends_noise: ArrayLike,
                 sampled: ArrayLike | None = None, threshold_scale: ArrayLike | None = None) -> RoundPowers:
    """The powers of one round, eqs. (4), (6), (7), (10)-(17), for ||g_k,t|| = W.

    Args:
        s: the scenario.
        rho: rho in (0, P/W^2], shape batch.
        gains: power gains h_k,t, shape batch + (K,).
        sends_noise: whether each client would send noise if unreliable (the strategy's coin, batch + (K,)).
        sampled: clients taking part this round (independent sampling), batch + (K,); None = all.
        threshold_scale: c_k >= 1 per client (batch + (K,)), its own threshold c_k h_th: a client with h_th <= h <
            c_k h_th could invert its channel (7) but abstains, and acts as an unreliable one (its coin decides its
            noise); None = 1, the paper's rule.
    """
    rho = np.asarray(rho, dtype=float)
    h = np.asarray(gains, dtype=float)
    big_p, w2 = s.power_max_w, s.grad_bound**2
    h_th = (rho * (w2 / big_p))[..., None]
    active = np.ones(h.shape, dtype=bool) if sampled is None else np.asarray(sampled, dtype=bool)
    reliable = active & (h >= (h_th if threshold_scale is None else h_th * threshold_scale))
    signal = np.where(reliable, rho[..., None] * w2 / np.where(reliable, h, 1.0), 0.0)  # a W^2 = rho W^2 / h <= P
    noisy = active & ~reliable & np.asarray(sends_noise, dtype=bool) & s.artificial_noise
    if s.artificial_noise:
        noise = np.where(reliable, np.maximum(big_p - signal, 0.0), np.where(noisy, big_p, 0.0))  # (11)
    else:
        noise = np.zeros(h.shape)
    received = h * noise
    return RoundPowers(reliable=reliable, sends_noise=noisy, signal_power_w=signal, noise_power_w=noise,
                       received_noise_w=received, noise_var=received.sum(axis=-1) + s.noise_power_w)


def aggregate_over_the_air(s: CDPBScenario, rho: float, gains: NDArray, gradients: NDArray, powers: RoundPowers,
                           rng: np.random.Generator) -> tuple[NDArray, NDArray]:
    """The received signal y_t (12)/(16) and the server's estimate g_hat_t = y_t / (sqrt(rho) K_t) (18) for real
    vectors.

    ``gradients`` (K, d) with norms <= W; each reliable client sends sqrt(a)(g + r), a = rho / h, with artificial noise
    r ~ N(0, (noise power / a) / d I_d); noisy unreliable clients send r ~ N(0, P/d I_d); the receiver adds
    z ~ N(0, sigma_z^2/d I_d). (Phases are compensated, so the channel acts as sqrt(h).) Returns ``(y, g_hat)``;
    g_hat is the zero vector when K_t = 0. The environment uses the powers only; this is for the training fidelity and
    the tests.
    """
    g = np.asarray(gradients, dtype=float)
    k, d = g.shape
    if k != s.num_clients:
        raise ValueError(f"gradients must have shape (K={s.num_clients}, d); got {g.shape}")
    h = np.asarray(gains, dtype=float)
    rel = powers.reliable
    a = np.where(rel, rho / np.where(rel, h, 1.0), 1.0)
    r_var = np.where(rel, powers.noise_power_w / a, powers.noise_power_w) / d  # per-coordinate artificial noise
    r = rng.standard_normal((k, d)) * np.sqrt(r_var)[:, None]
    x = np.where(rel[:, None], np.sqrt(a)[:, None] * (g + r), r)
    y = (np.sqrt(h)[:, None] * x).sum(axis=0) + rng.standard_normal(d) * math.sqrt(s.noise_power_w / d)
    k_t = int(rel.sum())
    return y, (y / (math.sqrt(rho) * k_t) if k_t else np.zeros(d))


# --- convergence (Theorem 2) -------------------------------------------------------------------------------------
def convergence_term(s: CDPBScenario, num_reliable: ArrayLike, noise_var: ArrayLike, rho: ArrayLike) -> NDArray:
    """B = 4 M^2 G / K_t + sigma_q^2 / (K_t^2 rho), the per-round variance term of Lemma 4 (41) and Theorem 2.

    A round with no reliable client (K_t = 0) is charged as K_t = 1 (the estimate is then noise only).
    """
    k_t = np.maximum(np.asarray(num_reliable, dtype=float), 1.0)
    return 4.0 * s.smoothness**2 * s.grad_second_moment / k_t + np.asarray(noise_var) / (k_t**2 * np.asarray(rho))


def convergence_error(term: ArrayLike, num_rounds: ArrayLike) -> NDArray:
    """gamma ~ 6 B / tau: Theorem 2's bound (23) reduced to its dominant term as in Appendix C (mu = 1,
    S_tau ~ tau^3/3)."""
    return 6.0 * np.asarray(term, dtype=float) / np.asarray(num_rounds, dtype=float)


# --- privacy ---------------------------------------------------------------------------------------------------
def rdp_theorem1(order: int, participation: ArrayLike, noise_var: ArrayLike, grad_bound: float) -> NDArray:
    """Per-round eps of the paper's Theorem 1 as printed: log 2/(a-1) + a/(a-1) log(p exp((a-1) W^2 / sigma_q^2) + 1).

    Theorem 1's tau-round value is tau times this. Reproduction only: the ratio W^2 / sigma_q^2 lacks the rho that
    scales the signal at the receiver and the 1/d of per-coordinate noise, and uses Delta^2 = 2 W^2 where replace-one
    gives 4 W^2 (docs/cdpb.md). ``noise_var`` = 0 gives inf.
    """
    a = float(order)
    p = np.asarray(participation, dtype=float)
    with np.errstate(divide="ignore"):
        y = (a - 1.0) * grad_bound**2 / np.asarray(noise_var, dtype=float)
        log_p = np.log(p)
    return math.log(2.0) / (a - 1.0) + a / (a - 1.0) * np.logaddexp(log_p + y, 0.0)


def noise_multiplier(s: CDPBScenario, rho: ArrayLike, noise_var: ArrayLike) -> NDArray:
    """sigma_eff = sqrt(noise_var / d) / (kappa sqrt(rho) W): per-coordinate noise std over the L2 sensitivity of the
    received sum (kappa = 2 replace-one, 1 add/remove), both at the receiver (where the signal is sqrt(rho) g)."""
    rho = np.asarray(rho, dtype=float)
    return np.sqrt(np.asarray(noise_var, dtype=float) / s.model_dim) / (
        s.sensitivity_factor * np.sqrt(rho) * s.grad_bound)


def round_rdp(s: CDPBScenario, rho: ArrayLike, participation: ArrayLike, noise_var_others: ArrayLike,
              noise_var_total: ArrayLike, *, accounting: Accounting | None = None,
              orders: ArrayLike | None = None) -> NDArray:
    """One round's RDP per client (nats), at ``orders`` (default: the scenario's alpha; trailing axis if a sequence).

    * ``sgm``: the sampled Gaussian mechanism, rate = participation (the server does not know who transmits; 1 or 0
      per client when it does), noise multiplier from the noise of the *other* clients and the receiver (a client's
      own artificial noise depends on whether it participates, so it cannot count as independent mechanism noise).
    * ``theorem1``: :func:`rdp_theorem1` with the total sigma_q^2, as the paper does (alpha only).

    ``rho`` has the batch shape; the other arrays batch + (K,) (``noise_var_total`` broadcasts).
    """
    accounting = accounting or s.accounting
    rho_b = np.asarray(rho, dtype=float)[..., None]
    if accounting == "theorem1":
        if orders is not None and np.ndim(orders) != 0 and list(np.atleast_1d(orders)) != [s.rdp_order]:
            raise ValueError("accounting='theorem1' is defined at the scenario's rdp_order only")
        return rdp_theorem1(s.rdp_order, participation, noise_var_total, s.grad_bound)
    z = noise_multiplier(s, rho_b, noise_var_others)
    return rdp_sgm(q=participation, noise_multiplier=z, orders=s.rdp_order if orders is None else orders)


def round_reward(s: CDPBScenario, term: ArrayLike, privacy_increase: ArrayLike, reward_scale: float) -> NDArray:
    """A round's share of -G (24): -(lambda_1 6 B_t / tau^2 + lambda_2 Delta E) / ``reward_scale``, with B_t the
    round's :func:`convergence_term` and Delta E the RDP it adds (the worst client's for the server's reward, a
    device's own for its individual reward); over tau rounds the shares sum to -G with gamma = 6 mean(B) / tau."""
    return -(s.lambda_convergence * 6.0 * np.asarray(term) / s.num_rounds**2
             + s.lambda_privacy * np.asarray(privacy_increase)) / reward_scale


# --- the planner's view: expected per-round terms and the utility (24) ------------------------------------------
def expected_round_terms(s: CDPBScenario, rho: ArrayLike, *, accounting: Accounting | None = None
                         ) -> tuple[NDArray, NDArray]:
    """(B(rho), eps_1(rho)): the expected convergence term and the worst client's per-round RDP at alpha, shape rho.

    B uses E[K_t] (53) and E[sigma_q^2] (56)/(60) as Lemma 1 does; eps_1 is :func:`round_rdp` with the participation
    probability p_k (times ``client_sampling``), or 1 with ``csi_feedback`` (the server knows who transmits).
    """
    rho = np.asarray(rho, dtype=float)
    gains, counts = np.unique(s.mean_gain, return_counts=True)  # clients with equal E[h] have equal terms
    noise_k = expected_received_noise(s, rho, gains)
    total = noise_k @ counts + s.noise_power_w
    p = participation_probability(s, rho, gains)
    term = convergence_term(s, s.client_sampling * (p @ counts), total, rho)
    q = np.ones_like(noise_k) if s.csi_feedback else s.client_sampling * p
    others = sum_of_others(noise_k * counts) + noise_k * (counts - 1) + s.noise_power_w  # no total - own
    eps = round_rdp(s, rho, q, others, total[..., None], accounting=accounting)
    return term, eps.max(axis=-1)


def utility(s: CDPBScenario, rho: ArrayLike, num_rounds: ArrayLike, *, accounting: Accounting | None = None
            ) -> NDArray:
    """G(rho, tau) = lambda_1 gamma + lambda_2 eps (24) with gamma = 6 B(rho) / tau and eps = tau eps_1(rho)."""
    term, eps1 = expected_round_terms(s, rho, accounting=accounting)
    tau = np.asarray(num_rounds, dtype=float)
    return s.lambda_convergence * convergence_error(term, tau) + s.lambda_privacy * tau * eps1
