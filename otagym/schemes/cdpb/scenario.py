"""Model B, client-driven power balancing (CDPB): the deployment as a frozen Scenario, its presets and the settings of
its benchmark task.

The paper: Kim, Seo & Choi, *Privacy-Enhanced Over-the-Air Federated Learning via Client-Driven Power Balancing*
(arXiv:2410.05907, 2024); equation numbers below are the paper's, the notation that of
:mod:`otagym.schemes.cdpb.formulas`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from otagym.channel import FadingFields
from otagym.validation import (PHYSICAL_RANGE, POSITIVE, AppliesWith, Flag, Integer, Many, OneOf, Real, Text, arg,
                               check_dataclass, from_preset)

__all__ = ["CDPBScenario", "CDPB_PRESETS", "get_cdpb_scenario", "Strategy", "Accounting", "Adjacency",
           "TASK_SETTINGS"]

Strategy = Literal["noisy", "idle", "mixed"]
Accounting = Literal["sgm", "theorem1"]
Adjacency = Literal["replace_one", "add_remove"]

#: sigma_z^2 and lambda_2 may be 0 (the paper drops sigma_z^2 after eq. (53)).
NON_NEGATIVE = Real(0.0, PHYSICAL_RANGE[1])


@dataclass(frozen=True)
class CDPBScenario(FadingFields):
    """One CDPB deployment and the utility of problem P1 (25). Per-client ``channel_scale`` may be a scalar or K values.

    Attributes:
        num_clients: K (>= 1).
        power_max_w: P, the per-client transmit power limit (3) in W (> 0).
        grad_bound: W, the bound on the local update norm ||g_k,t|| (model units, > 0).
        channel_scale: sigma_k^2, the Rayleigh scale of client k's channel: the power gain h_k,t is Exponential with
            mean 2 sigma_k^2 (53) (> 0).
        noise_power_w: sigma_z^2, the receiver's noise power (W, >= 0), total over the d coordinates.
        model_dim: d, the number of model coordinates the powers spread over (>= 1). The paper's accounting compares
            W^2 with the total noise power, which is right only for d = 1 (``docs/cdpb.md``); the preset keeps d = 1.
        smoothness: M of assumption A1 (> 0).
        grad_second_moment: G of assumption A3 (> 0).
        rdp_order: alpha, the integer Renyi order of the utility and of the reward (>= 2).
        delta: delta of the end-of-episode (eps, delta) report, in (0, 1).
        num_rounds: tau, rounds per episode (>= 1).
        max_rounds: the longest training the planner may choose (caps the feasible set T, >= 1). Under the SGM
            accounting G(rho, tau) keeps decreasing as rho -> 0 and tau -> infinity (docs/cdpb.md), so the cap binds.
        strategy: what unreliable clients do: ``"noisy"`` (CDPB-n), ``"idle"`` (CDPB-i) or ``"mixed"``.
        portion: Bernoulli probability that an unreliable client sends noise under ``"mixed"`` (in [0, 1]); under
            another strategy it has no effect and must keep its default (0.5).
        artificial_noise: False for the paper's Noise-Free baseline (sigma_r^2 = 0: reliable clients send only their
            gradient, unreliable ones stay silent whatever the strategy).
        client_sampling: probability that a client takes part in a round at all (independent sampling, 1 = always).
        csi_feedback: True when clients report CSI every round (h_min- and IS-based baselines): the server then knows
            who transmits, participation gives no privacy amplification, and observations carry the channels.
        accounting: the privacy accounting of the reward: ``"sgm"`` (accountant-consistent, default) or
            ``"theorem1"`` (the paper's Theorem 1 as printed).
        adjacency: ``"replace_one"`` (sensitivity 2 sqrt(rho) W, default) or ``"add_remove"`` (sqrt(rho) W) for ``sgm``.
        lambda_convergence: lambda_1, the weight of gamma in the utility G = lambda_1 gamma + lambda_2 eps (24) (> 0).
        lambda_privacy: lambda_2, the weight of eps in G (>= 0).
        gamma_max: gamma-bar, the convergence threshold (25b) (> 0).
        epsilon_max: eps-bar, the privacy threshold (25c) (> 0).
        fading: ``"iid"`` (the paper's), ``"block"`` or ``"gauss_markov"``, as in model A's :class:`Scenario`.
        coherence_rounds: rounds per coherence block of ``fading="block"`` (>= 1; only with that fading).
        correlation: the per-round Gauss-Markov coefficient of ``fading="gauss_markov"`` (in [0, 1); only with that
            fading).
        name: label.
    """

    num_clients: int = arg(100, Integer(1, 100_000))
    power_max_w: float = arg(1.0, POSITIVE)
    grad_bound: float = arg(1.0, POSITIVE)
    channel_scale: float | tuple[float, ...] = arg(0.5, Many(POSITIVE, scalar=True))
    noise_power_w: float = arg(0.01, NON_NEGATIVE)
    model_dim: int = arg(1, Integer(1, 10**12))
    smoothness: float = arg(1.0, POSITIVE)
    grad_second_moment: float = arg(1.0, POSITIVE)
    rdp_order: int = arg(2, Integer(2, 1000))
    delta: float = arg(1e-5, Real(0.0, 1.0, low_open=True, high_open=True))
    num_rounds: int = arg(100, Integer(1, 10**6))
    max_rounds: int = arg(1000, Integer(1, 10**6))
    strategy: Strategy = arg("idle", OneOf(get_args(Strategy)))
    portion: float = arg(0.5, Real(0.0, 1.0), applies_with=AppliesWith("strategy", ("mixed",)))
    artificial_noise: bool = arg(True, Flag())
    client_sampling: float = arg(1.0, Real(0.0, 1.0, low_open=True))
    csi_feedback: bool = arg(False, Flag())
    accounting: Accounting = arg("sgm", OneOf(get_args(Accounting)))
    adjacency: Adjacency = arg("replace_one", OneOf(get_args(Adjacency)))
    lambda_convergence: float = arg(1.0, POSITIVE)
    lambda_privacy: float = arg(1e-5, NON_NEGATIVE)
    gamma_max: float = arg(1e-2, POSITIVE)
    epsilon_max: float = arg(100.0, POSITIVE)
    name: str = arg("custom", Text())

    def __post_init__(self) -> None:
        check_dataclass(self)
        if isinstance(self.channel_scale, tuple) and len(self.channel_scale) != self.num_clients:
            raise ValueError(f"CDPBScenario.channel_scale must be a scalar or num_clients={self.num_clients} values; "
                             f"got {len(self.channel_scale)}")
        if 0 < self.noise_power_w < PHYSICAL_RANGE[0]:
            raise ValueError(f"CDPBScenario.noise_power_w must be 0 or in [{PHYSICAL_RANGE[0]:g}, "
                             f"{PHYSICAL_RANGE[1]:g}]; got {self.noise_power_w!r}")
        if not self.artificial_noise and self.noise_power_w == 0:
            raise ValueError("CDPBScenario.noise_power_w must be > 0 when artificial_noise is False (no noise at "
                             f"all: infinite privacy loss); got {self.noise_power_w!r}")

    # --- derived constants ---
    @property
    def mean_gain(self) -> NDArray:
        """E[h_k] = 2 sigma_k^2, shape (K,)."""
        return np.broadcast_to(2.0 * np.asarray(self.channel_scale, dtype=float), (self.num_clients,)).copy()

    @property
    def rho_max(self) -> float:
        """P / W^2, the largest feasible rho (25e)."""
        return self.power_max_w / self.grad_bound**2

    @property
    def noise_portion(self) -> float:
        """Probability that an unreliable client sends noise: 1 (noisy), 0 (idle), ``portion`` (mixed); 0 if
        noise-free."""
        if not self.artificial_noise:
            return 0.0
        return {"noisy": 1.0, "idle": 0.0, "mixed": float(self.portion)}[self.strategy]

    @property
    def sensitivity_factor(self) -> float:
        """kappa with L2 sensitivity kappa sqrt(rho) W at the receiver: 2 (replace-one) or 1 (add/remove)."""
        return 2.0 if self.adjacency == "replace_one" else 1.0

    def replace(self, **changes: Any) -> "CDPBScenario":
        """A validated copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: ``paper-cdpb``: the paper's §V defaults (K = 100, lambda_1 = 1, lambda_2 = 1e-5, gamma-bar = 1e-2, eps-bar = 100).
#: The paper does not print P, W, sigma^2, M, G, alpha or sigma_z^2; we normalise P = W = 1, E[h] = 1 (sigma^2 = 1/2),
#: M = G = 1, alpha = 2 and sigma_z^2 = 0.01 (20 dB below one client's mean received power) -- see docs/cdpb.md.
CDPB_PRESETS: dict[str, CDPBScenario] = {"paper-cdpb": CDPBScenario(name="paper-cdpb")}


def get_cdpb_scenario(name: str | CDPBScenario = "paper-cdpb", /, **overrides: Any) -> CDPBScenario:
    """A CDPB preset by name or a :class:`CDPBScenario`, with validated field overrides."""
    return from_preset(CDPBScenario, CDPB_PRESETS, name, overrides)


#: The settings of CDPB's benchmark task (``otagym/CDPB-v1``, :data:`otagym.tasks.TASKS`): the paper's deployment
#: (K = 100, lambda = (1, 1e-5), gamma-bar = 1e-2, CDPB-i) with the privacy threshold eps-bar = 1 instead of the
#: paper's 100, tau = 100 rounds, rho linear in the action between 1e-3 P/W^2 and P/W^2, rewards in units of MaxRho's
#: expected utility G(P/W^2, 100) = 8.17e-3 (:func:`otagym.schemes.cdpb.formulas.utility`), so that its return is
#: about -1. At eps-bar = 100 no rho comes near the threshold (an episode spends 0.4% to 1.6% of it); at 1 the
#: threshold binds where G is least (tau eps_1(rho) runs from 0.004 at the least rho to 1.56 at P/W^2, and G is least
#: at rho = 0.39 P/W^2, which spends 1.07): a uniformly random policy's episode cost is about the limit and the
#: constrained optimum lies on the boundary.
TASK_SETTINGS: dict[str, Any] = {"scenario": "paper-cdpb", "action_type": "normalized", "dp_orders": None,
                                 "reward_scale": 8.17e-3, "epsilon_max": 1.0}
