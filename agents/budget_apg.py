"""A pathwise (analytic) policy gradient on a constrained spend task: the episode's return differentiated through its
rounds, batched over the native vector env.

Why (docs/tutorials/constrained-rl.md): on the suite's spend tasks the channels do not depend on the actions, and
given them a round's reward and the budget it leaves are differentiable functions of the round's spend. So the
return of a deterministic policy is a differentiable function of its parameters on every realisation, and its
gradient needs no critic and no likelihood ratio (the analytic policy gradient of differentiable simulators: Freeman
et al., "Brax", 2021; Xu et al., "Accelerated policy learning with parallel differentiable simulation" (SHAC), ICLR
2022). The spend's price is then paid exactly where it arises: spending now lowers the fair share of every later
round, and the chain B_t+1 = B_t - c_t carries that to each of them, which PPO's critic had to learn from the sum of
hundreds of rewards.

Each iteration plays ``num_envs`` whole episodes of the real env, its nu drawn from the task's range widened 2x at
each end (:attr:`BudgetAPGSettings.nu_widening`) (:func:`play_episode`), in the action of
:attr:`BudgetAPGSettings.action` (the env's price action, a = 0 the reference price of the budget left, or the spend
relative to the fair share left through :class:`otagym.wrappers.RelativeSpendVector`; never over the limit, and every
later round keeps ``floor`` of its share), with the policy's deterministic action, and takes one gradient step on
minus their mean return. Values are the env's; only
their derivatives are added:

* the round's cost c_t = :func:`otagym.wrappers.relative_spend` (a_t, B_t, k_t) (or, with the price action,
  :attr:`BudgetAPGSettings.action`, the core's ``budget_action_cost``), differentiated in a_t and B_t by
  central differences of that function (:func:`central_partials`: the one implementation of the formula);
* its reward r_t, differentiated in c_t by the scheme's own slope (``core.reward_cost_slope``: the leakage saved per
  unit of cost);
* the observation's ``budget_left`` (B_t / T) and ``fair_share`` (log1p(B_t / k_t)) entries, differentiated in B_t;
  the other entries (the channel, progress, nu, the cumulative RDP) are held fixed: the RDP's small dependence on the
  past spends is left out of the gradient.

The gradient is backpropagation through the T rounds written as its adjoint recursion (:func:`action_adjoints`):
the episode is played once without a graph, the actor is differentiated in one batch of all T N observations, and
the recursion over the rounds is a few numpy operations on N-vectors each, which makes an iteration about 2x faster
than autograd over a 500-round graph (``benchmarks/bench_budget_ppo.py``). The action is clipped to [-1, 1] before
the spend is differentiated, so a mean outside the range gets the central difference at the bound, half the slope
inside (the difference's outer point is clipped back onto the bound), and is pulled back by it. The full inside slope
(straight through) was measured and not kept: ``ReceiveScalingCMDP-v1``, seed 0, 24M env steps, validation mean
feasible score 97.68 -> 97.1, and CVaR 10% at nu = 0.01 on training realisations 90128-90255 94.2 -> 92.6; at nu =
0.01, 45% of the shipped model's rounds are at a = -1 (spend nothing).
The network is :class:`agents.budget_ppo.RelativeSpendPolicy`'s actor, so the result is the same SB3 ``PPO`` zip as
``budget_ppo``'s (its critic is not trained): ``otagym evaluate``, SB3 and ``baselines`` play its deterministic
action on the raw task. Models are selected on the validation realisations as in :mod:`agents.budget_ppo`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from stable_baselines3 import PPO

from agents.budget_ppo import (BudgetPPOSettings, RelativeSpendPolicy, SpendTrainer, check_settings, check_spend_task,
                               new_model, train_spend_agent)
from otagym.env import OTAPrivacyVectorEnv
from otagym.tasks import TASKS
from otagym.wrappers import RelativeSpendVector, relative_spend

#: The env arguments of each :attr:`BudgetAPGSettings.action` beyond the task's (and the price action's floor).
ACTION_ENV: dict[str, dict[str, str]] = {"spend": {}, "price": {"reward_mode": "budget", "action_type": "price"}}

__all__ = ["BudgetAPGSettings", "Episode", "action_adjoints", "central_partials", "episode_loss", "play_episode",
           "train_budget_apg", "training_iterations"]


@dataclass(frozen=True)
class BudgetAPGSettings:
    """The trainer's hyperparameters (a batch is ``num_envs`` whole episodes, one gradient step).

    The measurements below chose the settings with the spend action (``action="spend"``); the price action keeps
    them.

    Attributes:
        num_envs: episodes per gradient step.
        learning_rate: Adam's step size at the start (annealed linearly to 0 with ``anneal_lr``). Measured on the
            validation realisations (``ReceiveScalingCMDP-v1``, seed 0, floor 0.5, 12.8M env steps): constant 95.8,
            annealed over the 12.8M 92.6 (the late steps are too small to finish the climb).
        max_grad_norm: gradient-norm clip.
        net_arch: hidden layers of the actor (tanh; the critic's are the same and unused).
        reserve: the spend action's safety layer's reserve (:func:`otagym.wrappers.spend_cap`); 0 with the price
            action.
        floor: every later round keeps at least ``floor`` times its share of the limit: the spend action's safety
            layer (:func:`otagym.wrappers.spend_cap`), the price action's env argument ``budget_floor``. Measured
            with the spend action, seed 0 and 16M env steps (validation mean feasible score, i.i.d. / Gauss-Markov /
            block): 0.5: 96.0 / 93.4 / 91.6; 0.7: 97.1 / 95.2 / 92.0; 0.8: 97.2 / 95.3 / 91.8; and the same models'
            CVaR 10% at nu = 0.04 on training realisations 90128-90255 (neither validation nor evaluation): 0.5:
            91.9 / 87.6 / 33.0; 0.7: 93.2 / 89.3 / 76.2; 0.8: 93.9 / 91.1 / 81.6 (block's worst realisation -159,
            55, 76). A floor keeps a run of good channels early from spending the budget that bad ones late need.
            With the price action and no floor (seed 0, block fading, 24M steps) the CVaR at nu = 0.04 on training
            realisations 90128-90383 was -357 (worst -5,455), with 0.8 79.6 (worst 1.3).
        nu_widening: the training episodes draw nu log-uniformly from the task's range widened by this factor at
            each end (2: (0.005, 0.32) for the suite's (0.01, 0.16)); the observed log nu keeps its centre, the
            geometric middle of the range, so the model plays the task's own env. Why: at the range's ends a policy
            learns from the episodes on one side only, and the suite scores it at both ends. Measured with seed 0,
            24M env steps, against 1 (validation mean feasible score, i.i.d. / Gauss-Markov / block): 97.51 / 96.04 /
            92.70 -> 97.68 / 96.19 / 92.97; on training realisations 90128-90255 (neither validation nor
            evaluation), IQM and CVaR 10% at nu = 0.01 / 0.04 / 0.16: i.i.d. 99.1 / 98.1 / 97.0 and 90.9 / 93.8 /
            87.9 -> 99.1 / 97.9 / 97.1 and 94.2 / 93.7 / 89.3; Gauss-Markov 98.4 / 96.8 / 95.9 and 88.4 / 91.8 /
            84.2 -> 98.4 / 96.6 / 95.8 and 89.5 / 89.3 / 87.3; block 96.7 / 93.6 / 90.3 and 79.5 / 82.6 / 68.3 ->
            96.9 / 94.3 / 91.1 and 86.1 / 80.8 / 61.9. Wider (i.i.d. only, the same seed and realisations): 3:
            validation 97.77, CVaR 94.7 / 92.9 / 86.8; 4: 97.80, CVaR 94.4 / 93.1 / 88.5; within a seed's noise, so 2
            is kept.
        eval_every: env steps between validation plays.
        action: what the policy's action in [-1, 1] is. ``"spend"``: the spend relative to the fair share left
            (:class:`otagym.wrappers.RelativeSpendVector`, with ``reserve`` and ``floor``). ``"price"``: the env's own
            budget-mode price action (``reward_mode="budget"``, ``action_type="price"``): the round spends the
            minimiser of its Lagrangian L_t + mu_t c_t at a price mu_t relative to the reference price of the budget
            left (a = 0), never more than the budget left less ``floor`` nu for each later round (the env's
            ``budget_floor``; ``reserve`` must be 0). Why: at a given price the round's best spend is a known
            function of the channel (nothing below a threshold, then a steep rise to a level), which the env computes
            in the price action and a spend policy has to learn for every budget state. Measured at nu = 0.01 on
            ``ReceiveScalingCMDP-v1`` (training realisations 90128-90255, rounds 100-299, the spend model of seed 4
            against ``OnlineOptimal``): in the 50-55% channel quantile ``OnlineOptimal`` spends nothing on 39% of
            rounds and 0.48 of the fair share on average, the spend model on 7% and 0.39; it spends more below that
            and less above. docs/tutorials/constrained-rl.md gives both actions' results.
    """

    num_envs: int = 64
    learning_rate: float = 1e-3
    anneal_lr: bool = False
    max_grad_norm: float = 1.0
    net_arch: tuple[int, ...] = (64, 64)
    reserve: float = 0.0
    floor: float = 0.8
    nu_widening: float = 2.0
    eval_every: int = 1_600_000
    action: str = "price"

    def __post_init__(self) -> None:
        check_settings(self, integers=("num_envs", "eval_every"), shares=("reserve", "floor"),
                       positive=("learning_rate", "max_grad_norm"))
        if not self.nu_widening >= 1 or not np.isfinite(self.nu_widening):
            raise ValueError(f"nu_widening must be finite and >= 1 (1: the task's own nu range); got "
                             f"{self.nu_widening!r}")
        if self.action not in ACTION_ENV:
            raise ValueError(f"action must be one of {sorted(ACTION_ENV)}; got {self.action!r}")
        if self.action == "price" and self.reserve:
            raise ValueError(f"reserve must be 0 with action='price' (the price action keeps its budget with the "
                             f"floor, the env's budget_floor); got {self.reserve!r}")

    @property
    def env_overrides(self) -> dict[str, Any]:
        """The env arguments of the action (``{}`` for the task's own spend action), in ``run.json``'s
        ``env_kwargs``: what ``otagym evaluate`` and :class:`agents.policy.AgentPolicy` play the model's actions as."""
        return {**ACTION_ENV[self.action], **({"budget_floor": self.floor} if self.action == "price" else {})}

    def training_env_kwargs(self, task_id: str) -> dict[str, Any]:
        """The env keyword arguments of the training episodes: the task's, with its nu range widened by
        ``nu_widening`` at each end."""
        kwargs = {**TASKS[task_id].kwargs, **self.env_overrides}
        if kwargs.get("nu_range") is None:
            raise ValueError(f"task_id must draw nu per episode (a spend task of the suite); {task_id} has no "
                             f"nu_range")
        low, high = kwargs["nu_range"]
        kwargs["nu_range"] = (low / self.nu_widening, high * self.nu_widening)
        return kwargs

    def network(self) -> BudgetPPOSettings:
        """The policy network's settings, as :func:`agents.budget_ppo.new_model` builds it."""
        return BudgetPPOSettings(net_arch=self.net_arch, reserve=self.reserve, floor=self.floor)

    def training_env(self, task_id: str) -> Any:
        """The vector env of the training episodes (``num_envs``, :meth:`training_env_kwargs`), its actions this
        setting's ``action``."""
        env = OTAPrivacyVectorEnv(self.num_envs, **self.training_env_kwargs(task_id))
        return env if self.action == "price" else RelativeSpendVector(env, reserve=self.reserve, floor=self.floor)

    def round_spend(self, env: Any, episode: Episode, horizon: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        """c_t(a_t, B_t) (T, N) of the episode's rounds in the units of ``info["cost"]``, as the action plays it:
        :func:`otagym.wrappers.relative_spend`, or the core's ``budget_action_cost`` on the episode's channels."""
        rounds_left = (horizon - np.arange(horizon, dtype=float))[:, None]
        if self.action == "price":
            core = env.unwrapped.core
            return lambda a, b: core.budget_action_cost(a, b, rounds_left, episode.h_min2)
        return lambda a, b: relative_spend(a, b, rounds_left, self.reserve, self.floor)


def central_partials(f: Callable[..., np.ndarray], *arrays: np.ndarray) -> list[np.ndarray]:
    """The partial derivatives of the elementwise numpy function f at ``arrays`` (broadcast), one per array, by
    central differences in float64 (steps of 1e-6 relative): a formula differentiated where it is written. The 2n
    shifted points go to f in one call (f is elementwise, so stacking them along a new leading axis is exact)."""
    x = np.stack(np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in arrays)))  # (n, ...)
    n, h = len(x), 1e-6 * np.maximum(np.abs(x), 1.0)
    points = np.repeat(x[None], 2 * n, axis=0)  # (2n, n, ...); point 2i: x_i + h_i, point 2i + 1: x_i - h_i
    points[2 * np.arange(n), np.arange(n)] += h
    points[2 * np.arange(n) + 1, np.arange(n)] -= h
    values = f(*np.moveaxis(points, 1, 0))
    return list((values[0::2] - values[1::2]) / (2.0 * h))


class Episode(NamedTuple):
    """One whole episode of N envs played with the policy's deterministic action, as the gradient reads it (rows:
    the T rounds)."""

    #: (T, N, d) float32: the observations the policy read
    obs: torch.Tensor
    #: (T, N): the relative actions played (clipped to [-1, 1])
    action: np.ndarray
    #: (T, N): B_t, the budget left before each round (units of ``info["cost"]``)
    budget: np.ndarray
    #: (T, N): dr_t / dc_t (``core.reward_cost_slope``)
    reward_slope: np.ndarray
    #: (T, N): the rounds' channels h_min,t^2 (``info["h_min2"]``)
    h_min2: np.ndarray
    #: (N,): the returns
    returns: np.ndarray


def _mean_action(policy: RelativeSpendPolicy, obs: torch.Tensor) -> torch.Tensor:
    """The actor's deterministic (mean) relative action, unclipped: obs (..., d) -> (...)."""
    features = policy.extract_features(obs.reshape(-1, obs.shape[-1]), policy.pi_features_extractor)
    return policy.action_net(policy.mlp_extractor.forward_actor(features))[:, 0].reshape(obs.shape[:-1])


@torch.no_grad()
def play_episode(policy: RelativeSpendPolicy, env: Any, horizon: int) -> Episode:
    """Every env of ``env`` (:meth:`BudgetAPGSettings.training_env`) through one whole episode with the policy's
    deterministic action."""
    core = env.unwrapped.core
    obs, _ = env.reset()
    observed, actions, costs, slopes, channels = [], [], [], [], []
    returns = np.zeros(env.num_envs)
    for _ in range(horizon):
        observed.append(torch.as_tensor(obs, dtype=torch.float32))
        actions.append(_mean_action(policy, observed[-1]).clamp(-1.0, 1.0).double().numpy())
        obs, reward, _, _, info = env.step(actions[-1][:, None])
        returns += reward
        costs.append(info["cost"])
        slopes.append(core.reward_cost_slope(info["x"], info["h_min2"]))
        channels.append(info["h_min2"])
    spent = np.cumsum(np.concatenate([np.zeros((1, env.num_envs)), np.stack(costs)[:-1]]), axis=0)
    return Episode(torch.stack(observed), np.stack(actions), horizon - spent, np.stack(slopes), np.stack(channels),
                   returns)


def action_adjoints(episode: Episode, obs_slopes: np.ndarray, horizon: int,
                     spend: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """dJ/da_t (T, N) of the return J = sum_t r_t, through every later round (the adjoint, or reverse-mode,
    recursion of the episode's chain; see the module), given ``obs_slopes`` (T, N, 2): the actor's derivatives in
    its ``budget_left`` and ``fair_share`` entries.

    With c_t = g(a_t, B_t) (``spend``: :meth:`BudgetAPGSettings.round_spend`), B_t+1 = B_t - c_t, the observation's
    entries B_t / T and log1p(max(B_t, 0) / k_t), and beta_t = dJ/dB_t (beta_T = 0):
    dJ/dc_t = dr_t/dc_t - beta_t+1, dJ/da_t = dJ/dc_t dg/da_t, and
    beta_t = beta_t+1 + dJ/dc_t dg/dB_t + dJ/da_t (da_t/do_t . do_t/dB_t). At an action clipped to -1 or 1 the
    central difference is half the slope inside (see the module), which pulls a mean outside [-1, 1] back."""
    rounds_left = (horizon - np.arange(horizon, dtype=float))[:, None]
    spend_in_action, spend_in_budget = central_partials(spend, episode.action, episode.budget)
    left = np.maximum(episode.budget, 0.0)
    obs_in_budget = (obs_slopes[..., 0] / horizon
                     + np.where(episode.budget >= 0, obs_slopes[..., 1] / (1.0 + left / rounds_left) / rounds_left, 0.0))
    adjoint, beta = np.empty_like(episode.action), np.zeros(episode.action.shape[1])
    for t in range(horizon - 1, -1, -1):
        in_cost = episode.reward_slope[t] - beta
        adjoint[t] = in_cost * spend_in_action[t]
        beta = beta + in_cost * spend_in_budget[t] + adjoint[t] * obs_in_budget[t]
    return adjoint


def episode_loss(policy: RelativeSpendPolicy, env: Any, horizon: int,
                 settings: BudgetAPGSettings) -> tuple[torch.Tensor, np.ndarray]:
    """One whole episode of every env; a scalar whose gradient in the policy's parameters is minus the mean return's
    (sum_t dJ/da_t da_t/dtheta over the envs, the actor differentiated in one batch of all T N observations), and the
    returns (N,)."""
    episode = play_episode(policy, env, horizon)
    layout = env.unwrapped.core.layout
    obs = episode.obs.requires_grad_(True)
    mean = _mean_action(policy, obs)
    (in_obs,) = torch.autograd.grad(mean.sum(), obs, retain_graph=True)  # each mean reads its own row only
    obs_slopes = in_obs[..., [layout.budget_left, layout.fair_share]].double().numpy()
    adjoint = action_adjoints(episode, obs_slopes, horizon, settings.round_spend(env, episode, horizon))
    return -(mean.double() * torch.as_tensor(adjoint)).sum() / env.num_envs, episode.returns


def training_iterations(model: PPO, task_id: str, settings: BudgetAPGSettings, seed: int,
                        iterations: int) -> Iterator[tuple[int, dict[str, float]]]:
    """The training loop: each iteration plays ``num_envs`` episodes, steps on minus their mean return and yields the
    env steps so far and the batch's mean return and gradient norm."""
    torch.manual_seed(seed)
    policy, horizon = model.policy, TASKS[task_id].max_episode_steps
    optimizer = torch.optim.Adam(policy.parameters(), lr=settings.learning_rate)
    env = settings.training_env(task_id)
    env.reset(seed=seed)
    try:
        for it in range(1, iterations + 1):
            if settings.anneal_lr:
                for group in optimizer.param_groups:
                    group["lr"] = settings.learning_rate * (1.0 - (it - 1) / iterations)
            loss, returns = episode_loss(policy, env, horizon, settings)
            optimizer.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.max_grad_norm)
            optimizer.step()
            yield it * settings.num_envs * horizon, {"mean_return": float(returns.mean()),
                                                      "worst_return": float(returns.min()),
                                                      "grad_norm": float(norm)}
    finally:
        env.close()


def train_budget_apg(task_id: str, run_dir: str | Path, *, seed: int = 0, total_timesteps: int = 24_000_000,
                     settings: BudgetAPGSettings | None = None, overwrite: bool = False,
                     log: Callable[[str], None] | None = print, torch_threads: int | None = 1) -> Path:
    """Train on a spend task of the suite and return the path of the selected ``model.zip``: the run folder of
    :func:`agents.budget_ppo.train_budget_ppo` (``model.zip``, ``run.json``, ``progress.csv``), its arguments the
    same."""
    settings = settings or BudgetAPGSettings()
    check_spend_task(task_id)
    trainer = SpendTrainer("budget_apg", settings, settings.num_envs * TASKS[task_id].max_episode_steps,
                           training_iterations, lambda task, apg, s: new_model(task, apg.network(), s, apg.action),
                           settings.env_overrides)
    return train_spend_agent(trainer, task_id, run_dir, seed=seed, total_timesteps=total_timesteps,
                             overwrite=overwrite, log=log, torch_threads=torch_threads)
