"""A pathwise (analytic) policy gradient on a constrained spend task: the episode's return differentiated through its
rounds, batched over the native vector env.

Why (docs/tutorials/constrained-rl.md): on the suite's spend tasks the channels do not depend on the actions, and
given them a round's reward and the budget it leaves are differentiable functions of the round's spend. So the
return of a deterministic policy is a differentiable function of its parameters on every realisation, and its
gradient needs no critic and no likelihood ratio: backpropagation through the T rounds (the analytic policy
gradient of differentiable simulators: Freeman et al., "Brax", 2021; Xu et al., "Accelerated policy learning with
parallel differentiable simulation" (SHAC), ICLR 2022). The spend's price is then paid exactly where it arises:
spending now lowers the fair share of every later round, and the chain B_t+1 = B_t - c_t carries that to each of
them, which PPO's critic had to learn from the sum of hundreds of rewards.

Each iteration plays ``num_envs`` whole episodes of the real env, through :class:`otagym.wrappers.RelativeSpendVector`
(a = 0 spends the fair share left; never over the limit), with the policy's deterministic action, and takes one
gradient step on minus their mean return. Values are the env's; only their derivatives are added:

* the round's cost c_t = :func:`otagym.wrappers.relative_spend` (a_t, B_t, k_t), differentiated in a_t and B_t by
  central differences of that function (:class:`_Elementwise`: the one implementation of the formula);
* its reward r_t, differentiated in c_t by the scheme's own slope (``core.reward_cost_slope``: the leakage saved per
  unit of cost);
* the observation's ``budget_left`` (B_t / T) and ``fair_share`` (log1p(B_t / k_t)) entries, differentiated in B_t;
  the other entries (the channel, progress, nu, the cumulative RDP) are held fixed: the RDP's small dependence on the
  past spends is left out of the gradient.

The action's clip to [-1, 1] passes the gradient straight through (a mean outside the range is pulled back by it).
The network is :class:`agents.budget_ppo.RelativeSpendPolicy`'s actor, so the result is the same SB3 ``PPO`` zip as
``budget_ppo``'s (its critic is not trained): ``otagym evaluate``, SB3 and ``baselines`` play its deterministic
action on the raw task. Models are selected on the validation realisations as in :mod:`agents.budget_ppo`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3 import PPO

from agents.budget_ppo import (BudgetPPOSettings, RelativeSpendPolicy, SpendTrainer, check_settings, check_spend_task,
                               new_model, train_spend_agent)
from otagym.env import OTAPrivacyVectorEnv
from otagym.tasks import TASKS
from otagym.wrappers import RelativeSpendVector, relative_spend

__all__ = ["BudgetAPGSettings", "train_budget_apg", "training_iterations"]


@dataclass(frozen=True)
class BudgetAPGSettings:
    """The trainer's hyperparameters (a batch is ``num_envs`` whole episodes, one gradient step).

    Attributes:
        num_envs: episodes per gradient step.
        learning_rate: Adam's step size at the start (annealed linearly to 0 with ``anneal_lr``). Measured on the
            validation realisations (``ReceiveScalingCMDP-v1``, seed 0, 12.8M env steps): constant 95.8, annealed
            over the 12.8M 92.6 (the late steps are too small to finish the climb).
        max_grad_norm: gradient-norm clip.
        net_arch: hidden layers of the actor (tanh; the critic's are the same and unused).
        reserve: the safety layer's reserve (:func:`otagym.wrappers.spend_cap`).
        floor: the safety layer's floor (:func:`otagym.wrappers.spend_cap`; ``budget_ppo``'s 0.5).
        eval_every: env steps between validation plays.
    """

    num_envs: int = 64
    learning_rate: float = 1e-3
    anneal_lr: bool = False
    max_grad_norm: float = 1.0
    net_arch: tuple[int, ...] = (64, 64)
    reserve: float = 0.0
    floor: float = 0.5
    eval_every: int = 1_600_000

    def __post_init__(self) -> None:
        check_settings(self, integers=("num_envs", "eval_every"), shares=("reserve", "floor"),
                       positive=("learning_rate", "max_grad_norm"))

    def network(self) -> BudgetPPOSettings:
        """The policy network's settings, as :func:`agents.budget_ppo.new_model` builds it."""
        return BudgetPPOSettings(net_arch=self.net_arch, reserve=self.reserve, floor=self.floor)


class _Elementwise(torch.autograd.Function):
    """y = f(x_1, ..., x_n) elementwise, its value given (the env's), its partial derivatives by central differences
    of the numpy function f in float64 (steps of 1e-6 relative): a formula differentiated where it is written. The
    2n shifted points go to f in one call (f is elementwise, so stacking them along a new leading axis is exact)."""

    @staticmethod
    def forward(ctx: Any, value: torch.Tensor, f: Callable[..., np.ndarray], *inputs: torch.Tensor) -> torch.Tensor:
        ctx.f, ctx.arrays = f, [x.detach().double().numpy() for x in inputs]
        return value.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        x = np.stack(ctx.arrays)  # (n, N)
        n, h = len(x), 1e-6 * np.maximum(np.abs(x), 1.0)
        points = np.repeat(x[None], 2 * n, axis=0)  # (2n, n, N); point 2i: x_i + h_i, point 2i + 1: x_i - h_i
        points[2 * np.arange(n), np.arange(n)] += h
        points[2 * np.arange(n) + 1, np.arange(n)] -= h
        values = ctx.f(*points.transpose(1, 0, 2))
        slopes = torch.as_tensor((values[0::2] - values[1::2]) / (2.0 * h), dtype=grad.dtype)
        return (None, None, *(grad * slope for slope in slopes))


def _mean_action(policy: RelativeSpendPolicy, obs: torch.Tensor) -> torch.Tensor:
    """The actor's deterministic (mean) relative action (N,), unclipped."""
    features = policy.extract_features(obs, policy.pi_features_extractor)
    return policy.action_net(policy.mlp_extractor.forward_actor(features))[:, 0]


def _episode_return(policy: RelativeSpendPolicy, env: RelativeSpendVector, horizon: int,
                    settings: BudgetAPGSettings) -> torch.Tensor:
    """One whole episode of every env with the policy's deterministic action; the returns (N,), differentiable in
    the policy's parameters (see the module)."""
    core, layout = env.unwrapped.core, env.unwrapped.core.layout
    obs, _ = env.reset()
    budget = torch.full((env.num_envs,), float(horizon), dtype=torch.float64)
    total = torch.zeros(env.num_envs, dtype=torch.float64)
    for t in range(horizon):
        observed = torch.as_tensor(obs, dtype=torch.float32).clone()
        moved = {layout.budget_left: budget / horizon,
                 layout.fair_share: torch.log1p(budget.clamp(min=0) / (horizon - t))}
        for column, entry in moved.items():  # the value observed, the derivative in B_t
            observed[:, column] = observed[:, column] + (entry - entry.detach()).float()
        mean = _mean_action(policy, observed)
        action = (mean + (mean.clamp(-1.0, 1.0) - mean).detach()).double()
        obs, reward, _, _, info = env.step(action.detach().numpy()[:, None])
        cost = _Elementwise.apply(torch.as_tensor(info["cost"], dtype=torch.float64),  # in a_t and B_t; k_t bound now
                                  lambda a, b, k=horizon - t: relative_spend(a, b, k, settings.reserve, settings.floor),
                                  action, budget)
        slope = torch.as_tensor(core.reward_cost_slope(info["x"], info["h_min2"]), dtype=torch.float64)
        total = total + torch.as_tensor(reward, dtype=torch.float64) + slope * (cost - cost.detach())
        budget = budget - cost
    return total


def training_iterations(model: PPO, task_id: str, settings: BudgetAPGSettings, seed: int,
                        iterations: int) -> Iterator[tuple[int, dict[str, float]]]:
    """The training loop: each iteration plays ``num_envs`` episodes, steps on minus their mean return and yields the
    env steps so far and the batch's mean return and gradient norm."""
    torch.manual_seed(seed)
    policy, horizon = model.policy, TASKS[task_id].max_episode_steps
    optimizer = torch.optim.Adam(policy.parameters(), lr=settings.learning_rate)
    env = RelativeSpendVector(OTAPrivacyVectorEnv(settings.num_envs, **TASKS[task_id].kwargs),
                              reserve=settings.reserve, floor=settings.floor)
    env.reset(seed=seed)
    try:
        for it in range(1, iterations + 1):
            if settings.anneal_lr:
                for group in optimizer.param_groups:
                    group["lr"] = settings.learning_rate * (1.0 - (it - 1) / iterations)
            returns = _episode_return(policy, env, horizon, settings)
            optimizer.zero_grad()
            (-returns.mean()).backward()
            norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.max_grad_norm)
            optimizer.step()
            returns = returns.detach()
            yield it * settings.num_envs * horizon, {"mean_return": float(returns.mean()),
                                                      "worst_return": float(returns.min()),
                                                      "grad_norm": float(norm)}
    finally:
        env.close()


def train_budget_apg(task_id: str, run_dir: str | Path, *, seed: int = 0, total_timesteps: int = 16_000_000,
                     settings: BudgetAPGSettings | None = None, overwrite: bool = False,
                     log: Callable[[str], None] | None = print, torch_threads: int | None = 1) -> Path:
    """Train on a spend task of the suite and return the path of the selected ``model.zip``: the run folder of
    :func:`agents.budget_ppo.train_budget_ppo` (``model.zip``, ``run.json``, ``progress.csv``), its arguments the
    same."""
    settings = settings or BudgetAPGSettings()
    check_spend_task(task_id)
    trainer = SpendTrainer("budget_apg", settings, settings.num_envs * TASKS[task_id].max_episode_steps,
                           training_iterations, lambda task, apg, s: new_model(task, apg.network(), s))
    return train_spend_agent(trainer, task_id, run_dir, seed=seed, total_timesteps=total_timesteps,
                             overwrite=overwrite, log=log, torch_threads=torch_threads)
