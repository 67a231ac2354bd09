"""Training speed of the batched trainers, :mod:`agents.budget_ppo` (PPO over the native vector env) and
:mod:`agents.budget_apg` (the pathwise policy gradient), against SB3's PPO on the same task, as ratios of env steps per
second timed in the same run, the three alternated, one torch thread each:

    python -m benchmarks.bench_budget_ppo

SB3's PPO runs with the settings of ``agents/configs/ppo_lagrangian.yml`` (16 envs of the SB3 adapter
:class:`otagym.wrappers.sb3.OTAPrivacySB3VecEnv`, 512 steps per env per rollout, 10 epochs of minibatches of 1,024, a 64x64
MLP), which ``otagym train --algo ppo_lagrangian`` trains with; the batched trainer with its defaults
(:class:`agents.budget_ppo.BudgetPPOSettings`: 256 envs, 64 steps per env per rollout, 4 epochs of 4 minibatches,
a 64x64 MLP, the relative action and the potential-based shaping included) and the pathwise gradient with its
(:class:`agents.budget_apg.BudgetAPGSettings`: 64 whole episodes a gradient step). All are timed end to end, rollout
and update, over whole iterations (no validation play). Goal: batched >= 5x SB3's env steps per second.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from stable_baselines3 import PPO

from agents import budget_apg
from agents.budget_ppo import BudgetPPOSettings, new_model, training_iterations
from otagym.wrappers.sb3 import OTAPrivacySB3VecEnv
from otagym.tasks import TASKS

TASK = "otagym/ReceiveScalingCMDP-v1"


def sb3_rate(rollouts: int) -> float:
    """SB3 PPO's env steps per second over ``rollouts`` rollouts (after one untimed)."""
    model = PPO("MlpPolicy", OTAPrivacySB3VecEnv(16, **TASKS[TASK].kwargs), n_steps=512, batch_size=1024, n_epochs=10,
                gamma=1.0, gae_lambda=0.95, seed=0, device="cpu",
                policy_kwargs={"net_arch": {"pi": [64, 64], "vf": [64, 64]}, "log_std_init": -2.0})
    model.learn(16 * 512)
    clock = time.perf_counter()
    model.learn(rollouts * 16 * 512, reset_num_timesteps=False)
    return rollouts * 16 * 512 / (time.perf_counter() - clock)


def batched_rate(rollouts: int) -> float:
    """The batched trainer's env steps per second over ``rollouts`` rollouts (after one untimed, which also builds
    its shaping table)."""
    settings = BudgetPPOSettings()
    loop = training_iterations(new_model(TASK, settings, 0), TASK, settings, 0, rollouts + 1)
    next(loop)
    clock = time.perf_counter()
    for _ in loop:
        pass
    return rollouts * settings.batch_size / (time.perf_counter() - clock)


def pathwise_rate(iterations: int) -> float:
    """The pathwise trainer's env steps per second over ``iterations`` gradient steps (after one untimed)."""
    settings = budget_apg.BudgetAPGSettings()
    loop = budget_apg.training_iterations(new_model(TASK, settings.network(), 0), TASK, settings, 0, iterations + 1)
    next(loop)
    clock = time.perf_counter()
    for _ in loop:
        pass
    return iterations * settings.num_envs * TASKS[TASK].max_episode_steps / (time.perf_counter() - clock)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="alternated timings of each (default 3)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    sb3, batched, pathwise = [], [], []
    for _ in range(args.repeats):
        sb3.append(sb3_rate(4))          # 32,768 env steps
        batched.append(batched_rate(8))  # 131,072 env steps
        pathwise.append(pathwise_rate(4))  # 128,000 env steps
    s, b, p = statistics.median(sb3), statistics.median(batched), statistics.median(pathwise)
    print(f"{TASK}, one torch thread, medians of {args.repeats} alternated timings")
    print(f"  SB3 PPO (ppo_lagrangian.yml's settings): {s:,.0f} env steps/s")
    print(f"  agents.budget_ppo (its defaults):        {b:,.0f} env steps/s, {b / s:.1f}x (goal >= 5x)")
    print(f"  agents.budget_apg (its defaults):        {p:,.0f} env steps/s, {p / s:.1f}x (goal >= 5x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
