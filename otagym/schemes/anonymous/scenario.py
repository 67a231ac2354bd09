"""Model C, anonymous over-the-air computation: the deployment as a frozen Scenario, its presets and the settings of
its benchmark task.

The paper: Hasırcıoğlu & Gündüz, *Private Wireless Federated Learning with Anonymous Over-the-Air Computation*
(IEEE ICASSP 2021); section numbers below are the paper's, the notation that of
:mod:`otagym.schemes.anonymous.formulas`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, get_args

from otagym.validation import PHYSICAL_RANGE, POSITIVE, Integer, OneOf, Real, Text, arg, check_dataclass, from_preset

__all__ = ["AnonymousScenario", "ANONYMOUS_PRESETS", "get_anonymous_scenario", "Accounting", "TASK_SETTINGS"]

#: ``sampled``: the paper's accounting (SGM at rate p q); ``device``: the device-level bound (see :func:`round_rdp`).
Accounting = Literal["sampled", "device"]

#: A probability that may be 1 (no sampling: Fig. 1's p q = 1) but not 0.
RATE = Real(0.0, 1.0, low_open=True)
#: Non-negative physical quantity (channel noise, utility weight).
NON_NEGATIVE = Real(0.0, PHYSICAL_RANGE[1])


@dataclass(frozen=True)
class AnonymousScenario:
    """One anonymous-OTA deployment, its accounting and the utility of the reward.

    Attributes:
        num_devices: N, the devices (>= 1).
        participation: p, the probability that a device's channel is good enough to transmit in a round, independent
            across devices and rounds (§III), in (0, 1]. The environment realises it with a threshold on Rayleigh
            fading: device i transmits when |c_i,t|^2 / E|c_i|^2 >= -ln p (:func:`threshold_for_participation`).
        sampling_rate: q, the Poisson rate at which a participating device samples each local example, in (0, 1].
        dataset_size: n, examples per device (equal sizes, as §III assumes; >= 1).
        clip_norm: L, the per-sample gradient norm bound (gradient units, > 0).
        model_dim: d, the model coordinates (>= 1): the noise power the model update receives is d sigma^2.
        num_rounds: T, rounds per episode (>= 1).
        delta: delta of the end-of-episode (eps, delta) report, in (0, 1).
        rdp_order: alpha, the integer Renyi order of the reward's leakage term and of the observation (>= 2).
        accounting: ``"sampled"`` (the paper's: SGM at rate p q, the default) or ``"device"`` (the bound that does
            not rely on Corollary 1; see :func:`round_rdp`).
        channel_noise_var: N_0, the receiver noise per coordinate in gradient units after channel inversion (>= 0).
            It enters the convergence term only: the accounting ignores it (§IV-C).
        learning_rate: eta of w_t+1 = w_t - eta y[t] (§III) (> 0, eta <= 1 / smoothness).
        smoothness: beta, the Lipschitz constant of the loss gradient (> 0), for the convergence bound.
        initial_gap: F(w_0) - F*, the initial optimality gap (loss units, > 0), for the convergence bound.
        lambda_convergence: lambda_c, the weight of the convergence bound gamma (:func:`convergence_bound`) in the
            utility lambda_c gamma + lambda_p eps_alpha that the reward pays (> 0).
        lambda_privacy: lambda_p, the weight of eps_alpha, the cumulative RDP at ``rdp_order``, in that utility
            (>= 0).
        name: label.
    """

    num_devices: int = arg(100, Integer(1, 100_000))
    participation: float = arg(0.1, RATE)
    sampling_rate: float = arg(0.1, RATE)
    dataset_size: int = arg(600, Integer(1, 10**9))
    clip_norm: float = arg(1.0, POSITIVE)
    model_dim: int = arg(26_010, Integer(1, 10**12))
    num_rounds: int = arg(1000, Integer(1, 10**6))
    delta: float = arg(1e-5, Real(0.0, 1.0, low_open=True, high_open=True))
    rdp_order: int = arg(8, Integer(2, 1000))
    accounting: Accounting = arg("sampled", OneOf(get_args(Accounting)))
    channel_noise_var: float = arg(0.0, NON_NEGATIVE)
    learning_rate: float = arg(0.05, POSITIVE)
    smoothness: float = arg(1.0, POSITIVE)
    initial_gap: float = arg(1.0, POSITIVE)
    lambda_convergence: float = arg(1.0, POSITIVE)
    lambda_privacy: float = arg(0.01, NON_NEGATIVE)
    name: str = arg("custom", Text())

    def __post_init__(self) -> None:
        check_dataclass(self)
        if 0 < self.channel_noise_var < PHYSICAL_RANGE[0]:
            raise ValueError(f"AnonymousScenario.channel_noise_var must be 0 or in [{PHYSICAL_RANGE[0]:g}, "
                             f"{PHYSICAL_RANGE[1]:g}]; got {self.channel_noise_var!r}")
        if self.learning_rate * self.smoothness > 1.0:
            raise ValueError(f"AnonymousScenario.learning_rate must be <= 1/smoothness = {1 / self.smoothness:.6g} "
                             f"(the step size of the SGD bound); got {self.learning_rate!r}")

    @property
    def inclusion_rate(self) -> float:
        """p q, the probability that a given example is in a round's batch (Corollary 1)."""
        from otagym.schemes.anonymous import formulas  # the accounting's import, on first use (otagym._exports)
        return formulas.inclusion_rate(self.participation, self.sampling_rate)

    @property
    def expected_batch(self) -> float:
        """E[b_t] = N p n q (examples per round)."""
        return self.num_devices * self.dataset_size * self.inclusion_rate

    @property
    def nominal_batch(self) -> float:
        """max(E[b_t], 1): the batch at which the action's sigma is expressed as a noise multiplier."""
        return max(self.expected_batch, 1.0)

    @property
    def sigma_unit(self) -> float:
        """2 L / nominal batch: the sigma (gradient units) whose noise multiplier is 1 at the nominal batch."""
        from otagym.schemes.anonymous import formulas
        return formulas.sensitivity(self.clip_norm, self.nominal_batch)

    def replace(self, **changes: Any) -> "AnonymousScenario":
        """A validated copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: ``paper-anonymous``: delta = 1e-5 and p q = 0.01 are the paper's (§V, Fig. 1: the rate it calls reasonable for
#: edge networks, with "many devices ... with quite large local datasets"). The paper gives no N, n, p, q separately,
#: no model and no learning task; we take N = 100 devices, p = q = 0.1, n = 600 (60,000 MNIST examples over 100
#: devices), d = 26,010 (the MNIST CNN of Tramer & Boneh, :class:`otagym.training.MnistCNN`, as in the
#: receive-scaling preset ``paper-mnist``), L = 1, T = 1000, eta = 0.05, beta = F(w_0) - F* = 1.
ANONYMOUS_PRESETS: dict[str, AnonymousScenario] = {"paper-anonymous": AnonymousScenario(name="paper-anonymous")}


def get_anonymous_scenario(name: str | AnonymousScenario = "paper-anonymous", /, **overrides: Any
                           ) -> AnonymousScenario:
    """An anonymous-OTA preset by name or an :class:`AnonymousScenario`, with validated field overrides."""
    return from_preset(AnonymousScenario, ANONYMOUS_PRESETS, name, overrides)


#: The settings of anonymous OTA's benchmark task (``otagym/AnonymousOTA-v0``, :data:`otagym.tasks.TASKS`): the
#: paper's Fig. 1 deployment (p q = 0.01, delta = 1e-5), T = 1000 rounds, sigma log-linear in the action over noise
#: multipliers [2, 20] at the expected batch (where a uniformly random policy's episode cost is 1.5x the limit: over
#: the env's default [0.1, 100] it is 6,400x, and a Lagrangian multiplier cannot be tuned across that), the cost of an
#: (8, 1e-5) target, rewards in units of the mid action's expected utility (0.633, Monte Carlo over 256 episodes), so
#: that its return is about -1.
TASK_SETTINGS: dict[str, Any] = {"scenario": "paper-anonymous", "dp_orders": None,
                                 "noise_multiplier_range": (2.0, 20.0), "reward_scale": 0.633, "target_epsilon": 8.0}
