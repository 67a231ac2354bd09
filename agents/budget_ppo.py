"""PPO on a constrained spend task with the action relative to the budget left, batched over the native vector env.

Why (docs/tutorials/constrained-rl.md): the suite's cost limit holds per episode, and a Lagrangian on the mean episode
cost leaves about half the episodes over it. Here the learner acts through :class:`otagym.wrappers.RelativeSpendVector`:
its action says how much of the fair share left to spend (a = 0: the fair share, EqualAlloc's pace), capped at the
budget left, so every episode meets the limit by construction and the learner only has to learn *when* to spend.

The loop is CleanRL's ``ppo_continuous_action.py`` (Huang et al., "The 37 implementation details of PPO", 2022) over
:class:`otagym.env.OTAPrivacyVectorEnv` (same-step autoreset, so a rollout has no reset steps to mask): many envs
stepped as arrays, one rollout buffer of tensors, GAE, clipped surrogate, advantage normalisation per minibatch,
gradient clipping, a linearly annealed learning rate, rewards scaled by a running estimate of the return's standard
deviation (Gymnasium's ``NormalizeReward``). The network is SB3's ``ActorCriticPolicy`` (:class:`RelativeSpendPolicy`),
so the result is an SB3 ``PPO`` zip that ``otagym evaluate``, :func:`agents.policy.load_model` and any SB3 client
play on the task's own env: its ``predict`` returns the env's spend action, mapped from the relative one with the
budget left and the rounds left read from the observation (:func:`env_actions`).

Every ``eval_every`` env steps the policy plays the benchmark's validation realisations
(:data:`otagym.tasks.BENCHMARK_VALIDATION_SEEDS`, every budget of the task); the checkpoint with the best mean score
is kept as ``model.zip`` (the evaluation set is never looked at). :func:`train_budget_ppo` writes the run folder:
``model.zip``, ``run.json`` (task, settings, seed, the validation curve, the selected step, wall time),
``progress.csv`` (one row per iteration).
"""

from __future__ import annotations

import csv
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from numpy.typing import NDArray
from stable_baselines3 import PPO
from stable_baselines3.common.policies import ActorCriticPolicy

from agents.train.save import package_versions
from otagym._io import atomic_write, write_json
from otagym.env import OTAPrivacyVectorEnv
from otagym.schemes import SCHEMES
from otagym.schemes.receive_scaling.observation import ObservationOffsets
from otagym.tasks import BENCHMARK, BENCHMARK_TRAINING_SEEDS, BENCHMARK_VALIDATION_SEEDS, TASKS
from otagym.wrappers import PotentialShapingVector, RelativeSpendVector, relative_action, relative_spend

__all__ = ["SPEND_TASKS", "BudgetPPOSettings", "FairShareValue", "RelativeSpendPolicy", "SpendTrainer",
           "check_settings", "check_spend_task", "env_actions", "new_model", "train_budget_ppo", "train_spend_agent",
           "training_iterations", "validation_score"]


#: The benchmark tasks whose action is the round's spend, which the trainer takes.
SPEND_TASKS: tuple[str, ...] = tuple(t for t in BENCHMARK if TASKS[t].kwargs.get("action_type") == "spend")


@dataclass(frozen=True)
class BudgetPPOSettings:
    """The trainer's hyperparameters (CleanRL's names; a batch is ``num_envs * rollout_steps`` env steps).

    Attributes:
        num_envs: episodes stepped together.
        rollout_steps: steps per env per rollout.
        epochs: passes over each rollout.
        minibatches: minibatches per pass.
        learning_rate: Adam's step size at the start (annealed linearly to 0 with ``anneal_lr``).
        gamma: discount (1: the task's return is undiscounted over its T rounds, and progress is observed).
        gae_lambda: GAE's lambda. Measured on the validation realisations (``ReceiveScalingCMDP-v1``, seed 0, 5M
            env steps; best validation mean feasible score): 0.99 78.6, 0.95 83.3, 0.9 85.5, 0.8 85.5, 0.65 85.6 (at
            lambda = 0.99: gamma = 0.99 79.6, 10 epochs 79.7). The fair-share potential carries the long-run
            price, so a shorter lambda trades little bias for much less variance: the shaped per-round reward's
            spread was a tenth of the lambda = 0.99 advantages'.
        clip_range: PPO's ratio clip.
        ent_coef: entropy bonus.
        vf_coef: value-loss weight.
        max_grad_norm: gradient-norm clip.
        net_arch: hidden layers of the actor and of the critic (tanh).
        log_std_init: the Gaussian's initial log standard deviation.
        reward_gamma: the discount of the running return whose standard deviation scales the rewards (0: no scaling).
        reward_floor: the training reward is max(r_t, -reward_floor) (None: unclipped, the default). Measured: a floor
            of 1 (the episode's room) hides what running the budget dry costs, and the learner drains it.
        reserve: the safety layer's reserve (:func:`otagym.wrappers.spend_cap`; 0: the cap is the budget left).
        floor: the safety layer's floor (:func:`otagym.wrappers.spend_cap`): every later round keeps at least
            ``floor`` times its share of the limit. Measured on training realisations 90128-90255 with a model
            trained without it (Gauss-Markov task, nu = 0.16): CVaR 10% -2,228 at 0, -1,774 at 0.1, -1.2 at 0.25,
            18 at 0.5, the median 52-53 throughout: the budget-exhaustion cliff is the rounds a drained budget cannot
            pay for.
        shaping: add the potential-based term Phi(s_t+1) - Phi(s_t) of :class:`FairShareValue` to the reward (Ng et
            al., 1999: the same optimal policies; the episode's shaped return is its return less Phi(s_0)).
        eval_every: env steps between validation plays.
    """

    num_envs: int = 256
    rollout_steps: int = 64
    epochs: int = 4
    minibatches: int = 4
    learning_rate: float = 3e-4
    anneal_lr: bool = True
    gamma: float = 1.0
    gae_lambda: float = 0.8
    clip_range: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    net_arch: tuple[int, ...] = (64, 64)
    log_std_init: float = -2.0
    reward_gamma: float = 0.0
    reward_floor: float | None = None
    reserve: float = 0.0
    floor: float = 0.5
    shaping: bool = True
    eval_every: int = 500_000

    def __post_init__(self) -> None:
        check_settings(self, integers=("num_envs", "rollout_steps", "epochs", "minibatches", "eval_every"),
                       shares=("gamma", "gae_lambda", "reward_gamma", "reserve", "floor"),
                       positive=("learning_rate", "clip_range", "max_grad_norm"))
        if (self.num_envs * self.rollout_steps) % self.minibatches:
            raise ValueError(f"minibatches must divide num_envs * rollout_steps = "
                             f"{self.num_envs * self.rollout_steps}; got {self.minibatches}")
        if self.shaping and (self.reward_gamma > 0 or self.reward_floor is not None):
            raise ValueError("shaping adds Phi in the reward's own units: not with reward_gamma > 0 or a reward_floor, "
                             f"which rescale or clip it first; got reward_gamma={self.reward_gamma}, "
                             f"reward_floor={self.reward_floor}")

    @property
    def batch_size(self) -> int:
        """Env steps per rollout."""
        return self.num_envs * self.rollout_steps


def check_settings(settings: Any, *, integers: tuple[str, ...], shares: tuple[str, ...],
                   positive: tuple[str, ...]) -> None:
    """``ValueError`` naming the first field of ``settings`` that is not an integer >= 1 (``integers``), not in
    [0, 1] (``shares``) or not finite and > 0 (``positive``)."""
    for name in integers:
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
    for name in shares:
        if not 0 <= getattr(settings, name) <= 1:
            raise ValueError(f"{name} must lie in [0, 1]; got {getattr(settings, name)!r}")
    for name in positive:
        if not (np.isfinite(getattr(settings, name)) and getattr(settings, name) > 0):
            raise ValueError(f"{name} must be finite and > 0; got {getattr(settings, name)!r}")


def check_spend_task(task_id: str) -> None:
    """``ValueError`` unless ``task_id`` is a spend task of the suite (:data:`SPEND_TASKS`)."""
    if task_id not in SPEND_TASKS:
        raise ValueError(f"task_id must be one of the spend tasks {SPEND_TASKS}; got {task_id!r}")


class FairShareValue:
    """Phi(s) = k_t g(F_t / nu; nu): the expected return of the rounds left when each spends the fair share left F_t
    (g(m; nu) the mean reward of a round that spends m nu on the task's channels, measured by playing constant spends
    on training realisations and interpolated over a grid of m and log nu).

    Why: spending more now lowers the fair share of every later round, a cost that shows up hundreds of rounds later
    (the budget runs dry at the end, where a round at nearly no spend leaks thousands of times the episode's room); a
    critic must learn that from the sum of those rounds. With Phi as a potential, the price of the budget spent is in
    the round that spends it: Phi falls as F_t does, by about g'(F_t / nu) / nu per unit of budget.
    """

    #: The grid of m: nothing, then geometric from 0.02 to 11 with m = 1 (EqualAlloc's spend: g = 0 exactly) on it.
    MULTIPLIERS = np.concatenate([[0.0], np.geomspace(0.02, 1.0, 12), np.geomspace(1.0, 11.0, 9)[1:]])

    def __init__(self, task_id: str, seeds: tuple[int, ...], nus: NDArray) -> None:
        from baselines.benchmark import EnvActionPolicy, play_episodes

        self.horizon = TASKS[task_id].max_episode_steps
        self.log_nus = np.log10(np.asarray(nus, dtype=float))
        actions = relative_action(self.MULTIPLIERS)
        grid = np.empty((self.log_nus.size, self.MULTIPLIERS.size))
        values = np.repeat(actions, len(seeds))
        for i, nu in enumerate(nus):  # env j * len(seeds) + s plays multiplier j on seed s
            played = play_episodes(EnvActionPolicy(lambda obs, v=values: v[:, None]), task_id,
                                   list(seeds) * self.MULTIPLIERS.size, float(nu))
            grid[i] = played.returns.reshape(self.MULTIPLIERS.size, len(seeds)).mean(axis=1) / self.horizon
        self.grid = grid

    def per_round(self, multiplier: NDArray, nu: NDArray) -> NDArray:
        """g(m; nu), bilinear in (log nu, m), m clipped to [0, 11] and nu to the grid's range."""
        m = np.clip(multiplier, 0.0, self.MULTIPLIERS[-1])
        ln = np.clip(np.log10(nu), self.log_nus[0], self.log_nus[-1])
        i = np.clip(np.searchsorted(self.log_nus, ln) - 1, 0, self.log_nus.size - 2)
        w = (ln - self.log_nus[i]) / (self.log_nus[i + 1] - self.log_nus[i])
        rows = np.stack([np.interp(m, self.MULTIPLIERS, row) for row in self.grid])  # (nus, N)
        cols = np.arange(m.size)
        return (1 - w) * rows[i, cols] + w * rows[i + 1, cols]

    def __call__(self, observation: NDArray, log10_nu_ref: float) -> NDArray:
        """Phi of receive-scaling observations (N, 3M + 6): k_t = T (1 - progress), F_t / nu =
        expm1(``fair_share``), nu = 10^(``log_nu`` + ``log10_nu_ref``)."""
        obs = np.asarray(observation, dtype=float)
        layout = ObservationOffsets.of_size(obs.shape[1])
        rounds_left = np.rint(self.horizon * (1.0 - obs[:, layout.progress]))
        nu = 10.0 ** (obs[:, layout.log_nu] + log10_nu_ref)
        return rounds_left * self.per_round(np.expm1(obs[:, layout.fair_share]), nu)

    def potential(self, env: Any) -> Callable[[NDArray], NDArray]:
        """Phi of the observations of ``env`` (an otagym env or vector env of the task, wrapped or not), for
        :class:`otagym.wrappers.PotentialShaping` / :class:`~otagym.wrappers.PotentialShapingVector`."""
        reference = env.unwrapped.core.log10_nu_ref
        return lambda observation: self(observation, reference)


def env_actions(relative: NDArray, observation: NDArray, horizon: int, reserve: float = 0.0,
                floor: float = 0.0) -> NDArray:
    """The env's spend actions (N, 1) of relative actions (N,) or (N, 1), with the budget left B_t = ``budget_left`` x
    T and the rounds left k_t = T (1 - ``progress``) read from receive-scaling observations (N, 3M + 6), in the units
    of ``info["cost"]`` (:func:`otagym.wrappers.relative_spend`): what :class:`~otagym.wrappers.RelativeSpendVector`
    plays from its ledger, up to the observation's float32 rounding."""
    obs = np.asarray(observation, dtype=float).reshape(len(observation), -1)
    layout = ObservationOffsets.of_size(obs.shape[1])
    budget_left = obs[:, layout.budget_left] * horizon
    rounds_left = np.rint(horizon * (1.0 - obs[:, layout.progress]))
    a = np.clip(np.asarray(relative, dtype=float).reshape(len(obs), -1)[:, 0], -1.0, 1.0)
    return relative_action(relative_spend(a, budget_left, rounds_left, reserve, floor))[:, None]


class RelativeSpendPolicy(ActorCriticPolicy):
    """SB3's MLP actor-critic whose distribution is over the relative action, and whose ``predict`` returns the task
    env's own spend action (:func:`env_actions`, with the episode's ``horizon`` T and the ``reserve`` it was trained
    with, both saved in the zip): ``PPO.load(path).predict(obs)`` plays the raw task (not one wrapped in
    :class:`~otagym.wrappers.RelativeSpend`, which would map the action twice). With ``action="price"``
    (:attr:`agents.budget_apg.BudgetAPGSettings.action`) the action is the env's budget-mode price action, which
    ``predict`` returns clipped to [-1, 1]: it plays the env made with the model's ``run.json`` ``env_kwargs``. Train
    it with :func:`train_budget_ppo` or :func:`agents.budget_apg.train_budget_apg`: SB3's own ``learn`` would play its
    relative actions as raw spends."""

    def __init__(self, *args: Any, horizon: int, reserve: float = 0.0, floor: float = 0.0, action: str = "spend",
                 **kwargs: Any) -> None:
        self.horizon, self.reserve, self.floor, self.action = int(horizon), float(reserve), float(floor), action
        super().__init__(*args, **kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), "horizon": self.horizon, "reserve": self.reserve,
                "floor": self.floor, "action": self.action}

    def _predict(self, observation: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        relative = self.get_distribution(observation).get_actions(deterministic=deterministic)
        if self.action == "price":  # the env's own price action (agents.budget_apg.BudgetAPGSettings.action)
            return relative.clamp(-1.0, 1.0)
        played = env_actions(relative.cpu().numpy(), observation.cpu().numpy(), self.horizon, self.reserve,
                             self.floor)
        return torch.as_tensor(played, dtype=relative.dtype, device=relative.device)


def new_model(task_id: str, settings: BudgetPPOSettings, seed: int, action: str = "spend") -> PPO:
    """A new SB3 model holding the trainer's policy (:class:`RelativeSpendPolicy` with ``settings``' network and
    ``action``), built on a one-env adapter of the task (only its spaces are read)."""
    from otagym.wrappers.sb3 import OTAPrivacySB3VecEnv

    task = TASKS[task_id]
    net = list(settings.net_arch)
    policy_kwargs = {"net_arch": {"pi": net, "vf": net}, "log_std_init": settings.log_std_init,
                     "horizon": task.max_episode_steps, "reserve": settings.reserve, "floor": settings.floor,
                     "action": action}
    with warnings.catch_warnings():  # SB3 checks its batch size against the one-env adapter's rollout: not used here
        warnings.filterwarnings("ignore", message="You have specified a mini-batch size")
        return PPO(RelativeSpendPolicy, OTAPrivacySB3VecEnv(1, **task.kwargs), seed=seed, device="cpu",
                   learning_rate=settings.learning_rate, n_steps=settings.rollout_steps,
                   batch_size=settings.batch_size // settings.minibatches, n_epochs=settings.epochs,
                   gamma=settings.gamma, gae_lambda=settings.gae_lambda, clip_range=settings.clip_range,
                   ent_coef=settings.ent_coef, vf_coef=settings.vf_coef, max_grad_norm=settings.max_grad_norm,
                   policy_kwargs=policy_kwargs)


def _training_env(task_id: str, settings: BudgetPPOSettings, seed: int) -> gym.vector.VectorEnv:
    """The task's native vector env (same-step autoreset, nu drawn per episode), the relative action on it, and the
    fair-share potential's shaping (``shaping``) or the rewards clipped and scaled by a running return's standard
    deviation."""
    task = TASKS[task_id]
    native = OTAPrivacyVectorEnv(settings.num_envs, **task.kwargs, autoreset_mode=AutoresetMode.SAME_STEP)
    env: gym.vector.VectorEnv = RelativeSpendVector(native, reserve=settings.reserve, floor=settings.floor)
    if settings.shaping:
        value = FairShareValue(task_id, BENCHMARK_TRAINING_SEEDS[:32], np.geomspace(0.01, 0.16, 9))
        env = PotentialShapingVector(env, value.potential(native), gamma=settings.gamma)
    if settings.reward_floor is not None:
        env = gym.wrappers.vector.ClipReward(env, min_reward=-settings.reward_floor)
    if settings.reward_gamma > 0:
        env = gym.wrappers.vector.NormalizeReward(env, gamma=settings.reward_gamma)
    env.reset(seed=seed)
    return env


def validation_score(model: Any, task_id: str, seeds: tuple[int, ...] = BENCHMARK_VALIDATION_SEEDS,
                     env_kwargs: dict[str, Any] | None = None) -> tuple[float, dict[str, Any]]:
    """The mean feasible score of ``model``'s deterministic policy on ``seeds`` at every budget of the task, and per
    budget its mean score and share of episodes over the limit; ``env_kwargs``: the env arguments its actions are
    played as (default: the task's)."""
    from agents.policy import AgentPolicy
    from baselines.benchmark import ranked_scores, task_scores_and_costs

    kwargs = dict(TASKS[task_id].kwargs if env_kwargs is None else env_kwargs)
    scores, costs = task_scores_and_costs(lambda nus: AgentPolicy(model, nus, env_kwargs=kwargs), task_id, seeds)
    feasible = {nu: ranked_scores(task_id, float(nu), seeds, scores[nu], costs[nu]) for nu in scores}
    per_nu = {nu: {"score": float(np.mean(feasible[nu])), "over": float(np.mean(np.asarray(costs[nu]) > 1 + 1e-6))}
              for nu in scores}
    return float(np.mean([v["score"] for v in per_nu.values()])), per_nu


@dataclass
class _Rollout:
    """One rollout's tensors (steps, envs)."""

    obs: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor
    values: torch.Tensor


def _collect(policy: RelativeSpendPolicy, env: gym.vector.VectorEnv, obs: NDArray,
             steps: int) -> tuple[_Rollout, NDArray, torch.Tensor]:
    """``steps`` steps of every env; the rollout, the next observation and its values."""
    n = env.num_envs
    shape = (steps, n)
    buf = _Rollout(torch.zeros(shape + obs.shape[1:]), torch.zeros(shape + (1,)), torch.zeros(shape),
                   torch.zeros(shape), torch.zeros(shape), torch.zeros(shape))
    for t in range(steps):
        obs_t = torch.as_tensor(obs, dtype=torch.float32)
        with torch.no_grad():
            actions, values, log_probs = policy(obs_t)
        buf.obs[t], buf.actions[t], buf.log_probs[t], buf.values[t] = obs_t, actions, log_probs, values.flatten()
        obs, reward, terminated, truncated, _ = env.step(np.clip(actions.numpy(), -1.0, 1.0))
        done = np.logical_or(terminated, truncated)
        buf.rewards[t] = torch.as_tensor(reward, dtype=torch.float32)
        buf.dones[t] = torch.as_tensor(done, dtype=torch.float32)
    with torch.no_grad():
        next_values = policy.predict_values(torch.as_tensor(obs, dtype=torch.float32)).flatten()
    return buf, obs, next_values


def _advantages(buf: _Rollout, next_values: torch.Tensor, gamma: float, lam: float) -> torch.Tensor:
    """GAE(lambda); a done step (the episode's last: same-step autoreset) does not bootstrap."""
    adv = torch.zeros_like(buf.rewards)
    last = torch.zeros_like(next_values)
    for t in reversed(range(buf.rewards.shape[0])):
        following = next_values if t == buf.rewards.shape[0] - 1 else buf.values[t + 1]
        live = 1.0 - buf.dones[t]
        delta = buf.rewards[t] + gamma * following * live - buf.values[t]
        last = delta + gamma * lam * live * last
        adv[t] = last
    return adv


def _update(policy: RelativeSpendPolicy, buf: _Rollout, adv: torch.Tensor, settings: BudgetPPOSettings,
            rng: torch.Generator) -> dict[str, float]:
    """PPO's epochs over the rollout; the last minibatch's losses."""
    obs = buf.obs.reshape(-1, buf.obs.shape[-1])
    actions, old_log_probs = buf.actions.reshape(-1, 1), buf.log_probs.reshape(-1)
    advantages, returns = adv.reshape(-1), (adv + buf.values).reshape(-1)
    size = obs.shape[0] // settings.minibatches
    stats: dict[str, float] = {}
    for _ in range(settings.epochs):
        order = torch.randperm(obs.shape[0], generator=rng)
        for start in range(0, obs.shape[0], size):
            idx = order[start:start + size]
            values, log_prob, entropy = policy.evaluate_actions(obs[idx], actions[idx])
            a = advantages[idx]
            a = (a - a.mean()) / (a.std() + 1e-8)
            ratio = torch.exp(log_prob - old_log_probs[idx])
            policy_loss = torch.max(-a * ratio, -a * torch.clamp(ratio, 1 - settings.clip_range,
                                                                   1 + settings.clip_range)).mean()
            value_loss = 0.5 * ((values.flatten() - returns[idx]) ** 2).mean()
            loss = policy_loss + settings.vf_coef * value_loss - settings.ent_coef * entropy.mean()
            policy.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.max_grad_norm)
            policy.optimizer.step()
            stats = {"policy_loss": float(policy_loss.detach()), "value_loss": float(value_loss.detach()),
                     "clip_fraction": float(((ratio - 1).abs() > settings.clip_range).float().mean())}
    return stats


class SpendTrainer(NamedTuple):
    """A trainer of the spend tasks, as :func:`train_spend_agent` runs it.

    Attributes:
        algo: its name in ``run.json`` (``otagym train --algo``).
        settings: its hyperparameters (a frozen dataclass with ``eval_every``), saved in ``run.json``.
        batch_size: env steps per iteration.
        iterations: ``(model, task_id, settings, seed, iterations)`` -> the loop, yielding the env steps so far and
            the iteration's statistics after each iteration.
        model: ``(task_id, settings, seed)`` -> a new SB3 model holding a :class:`RelativeSpendPolicy`.
        env_overrides: the env arguments its actions are played with beyond the task's (``run.json``'s
            ``env_kwargs``, the validation plays).
    """

    algo: str
    settings: Any
    batch_size: int
    iterations: Callable[[PPO, str, Any, int, int], Iterator[tuple[int, dict[str, float]]]]
    model: Callable[[str, Any, int], PPO]
    env_overrides: Mapping[str, Any] = MappingProxyType({})


def train_budget_ppo(task_id: str, run_dir: str | Path, *, seed: int = 0, total_timesteps: int = 4_000_000,
                     settings: BudgetPPOSettings | None = None, overwrite: bool = False,
                     log: Callable[[str], None] | None = print, torch_threads: int | None = 1) -> Path:
    """Train on a spend task of the suite and return the path of the selected ``model.zip`` (see the module).

    Args:
        task_id: a benchmark task whose action is the spend (``otagym/ReceiveScalingCMDP-v1``, ``…GaussMarkov-v0``,
            ``…Block-v0``).
        run_dir: the run folder; a folder holding a ``run.json`` is refused unless ``overwrite``.
        seed: seeds the envs' generator, torch and the minibatch order.
        total_timesteps: env steps (rounded up to whole rollouts).
        settings: hyperparameters (default :class:`BudgetPPOSettings`).
        overwrite: replace a run already in ``run_dir``.
        log: where progress lines go (None: silent).
        torch_threads: ``torch.set_num_threads`` before training (process-wide, not restored; None: as it is).
    """
    settings = settings or BudgetPPOSettings()
    trainer = SpendTrainer("budget_ppo", settings, settings.batch_size, training_iterations, new_model)
    return train_spend_agent(trainer, task_id, run_dir, seed=seed, total_timesteps=total_timesteps,
                             overwrite=overwrite, log=log, torch_threads=torch_threads)


def train_spend_agent(trainer: SpendTrainer, task_id: str, run_dir: str | Path, *, seed: int, total_timesteps: int,
                      overwrite: bool, log: Callable[[str], None] | None, torch_threads: int | None) -> Path:
    """Run ``trainer`` on a spend task (the arguments of :func:`train_budget_ppo`): every ``eval_every`` env steps
    the model plays the validation realisations and the best is kept as ``model.zip``; ``run.json`` and
    ``progress.csv`` are written beside it."""
    settings = trainer.settings
    check_spend_task(task_id)
    if not (isinstance(total_timesteps, int) and total_timesteps >= 1):
        raise ValueError(f"total_timesteps must be an integer >= 1; got {total_timesteps!r}")
    run = Path(run_dir)
    if (run / "run.json").is_file() and not overwrite:
        raise FileExistsError(f"{run} holds a run (run.json): pass overwrite=True (--overwrite) to replace it")
    run.mkdir(parents=True, exist_ok=True)
    if torch_threads is not None:
        torch.set_num_threads(int(torch_threads))
    model = trainer.model(task_id, settings, seed)
    iterations = -(-total_timesteps // trainer.batch_size)
    env_kwargs = {**TASKS[task_id].kwargs, **trainer.env_overrides}
    meta: dict[str, Any] = {"algo": trainer.algo, "task": task_id, "env_id": task_id, "seed": seed,
                            "env_kwargs": env_kwargs, "settings": asdict(settings),
                            "total_timesteps": iterations * trainer.batch_size, "validation": [],
                            "versions": package_versions(),
                            "observation_layout": SCHEMES[TASKS[task_id].scheme].observation_layout.version}
    best, clock, rows, next_eval = -np.inf, time.perf_counter(), [], settings.eval_every
    for steps, stats in trainer.iterations(model, task_id, settings, seed, iterations):
        rows.append({"steps": steps, "wall_s": time.perf_counter() - clock, **stats})
        if steps >= next_eval or steps == iterations * trainer.batch_size:
            next_eval = (steps // settings.eval_every + 1) * settings.eval_every
            score, per_nu = validation_score(model, task_id, env_kwargs=env_kwargs)
            meta["validation"].append({"steps": steps, "score": score, "per_nu": per_nu})
            if score > best:
                best = score
                model.num_timesteps = steps
                meta["selected"] = {"steps": steps, "validation_mean_feasible_score": score}
                write_json(run / "run.json", {**meta, "complete": False})  # the model's metadata before the model
                _save(model, run / "model.zip")
            if log:
                log(f"{task_id} seed {seed}: {steps:,} steps, {time.perf_counter() - clock:.0f} s, validation "
                    f"{score:.1f} (" + ", ".join(f"nu {nu}: {v['score']:.1f}, {100 * v['over']:.0f}% over"
                                                 for nu, v in per_nu.items()) + ")")
    meta["wall_s"] = time.perf_counter() - clock
    meta["torch_threads"] = torch.get_num_threads()
    _write_progress(run / "progress.csv", rows)
    write_json(run / "run.json", {**meta, "complete": True})
    return run / "model.zip"


def training_iterations(model: PPO, task_id: str, settings: BudgetPPOSettings, seed: int,
                        iterations: int) -> Iterator[tuple[int, dict[str, float]]]:
    """The training loop: each iteration collects a rollout of every env, computes GAE and runs PPO's epochs on
    ``model.policy``, then yields the env steps so far and the last minibatch's losses."""
    torch.manual_seed(seed)
    policy = model.policy
    env = _training_env(task_id, settings, seed)
    obs, _ = env.reset(seed=seed)
    rng = torch.Generator().manual_seed(seed)
    try:
        for it in range(1, iterations + 1):
            if settings.anneal_lr:
                for group in policy.optimizer.param_groups:
                    group["lr"] = settings.learning_rate * (1.0 - (it - 1) / iterations)
            buf, obs, next_values = _collect(policy, env, obs, settings.rollout_steps)
            adv = _advantages(buf, next_values, settings.gamma, settings.gae_lambda)
            yield it * settings.batch_size, _update(policy, buf, adv, settings, rng)
    finally:
        env.close()


def _save(model: PPO, path: Path) -> None:
    """``model`` saved as an SB3 zip, atomically."""
    with atomic_write(path, "wb") as fh:
        model.save(fh)


def _write_progress(path: Path, rows: list[dict[str, Any]]) -> None:
    with atomic_write(path, "w") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
