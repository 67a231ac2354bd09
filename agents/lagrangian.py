"""PPO-Lagrangian for the CMDP formulation (``reward_mode="cmdp"``): Lagrangian relaxation of the cost constraint
with dual ascent on the realised episode cost (as in Ray et al., Safety Gym, and OmniSafe's PPOLag).

The env reports ``info["cost"]`` = c_t / nu; the constraint of problem (28) is a mean cost per step of at most 1 (an
episode cost limit of T). :class:`LagrangianVecEnv` hands the learner r_t - lambda (cost_t - 1) / T, and
:class:`DualAscentCallback` updates lambda <- max(0, lambda + lr (mean episode cost per step - 1)) after every rollout.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from otagym._io import write_json

__all__ = ["LagrangianVecEnv", "DualAscentCallback"]


class LagrangianVecEnv(VecEnvWrapper):
    """Subtracts lambda (cost_t - 1) / T from each reward and records each finished episode's mean cost per step."""

    def __init__(self, venv: VecEnv, initial: float = 1.0) -> None:
        super().__init__(venv)
        if not (np.isfinite(initial) and initial >= 0):
            raise ValueError(f"lagrange_init must be finite and >= 0; got {initial}")
        self.multiplier = float(initial)
        self.num_rounds = int(venv.get_attr("scenario")[0].num_rounds)
        self._cost_sum = np.zeros(self.num_envs)
        self.finished_costs: list[float] = []

    def reset(self) -> np.ndarray:
        self._cost_sum[:] = 0.0
        return self.venv.reset()

    def step_wait(self):
        obs, reward, dones, infos = self.venv.step_wait()
        cost = np.array([info["cost"] for info in infos])
        self._cost_sum += cost
        for i in np.flatnonzero(dones):
            self.finished_costs.append(float(self._cost_sum[i] / self.num_rounds))
            infos[i]["episode_cost"] = self.finished_costs[-1]
            self._cost_sum[i] = 0.0
        shaped = reward - self.multiplier * (cost - 1.0) / self.num_rounds
        return obs, shaped.astype(np.float32), dones, infos


class DualAscentCallback(BaseCallback):
    """lambda <- max(0, lambda + lr (mean cost per step of the episodes finished this rollout - 1)); saved to
    ``path`` (JSON) after every update so that a resumed run continues from it."""

    def __init__(self, env: LagrangianVecEnv, lr: float = 0.5, path: Path | None = None) -> None:
        super().__init__()
        self.env, self.lr, self.path = env, float(lr), path

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        if not self.env.finished_costs:
            return
        mean_cost = float(np.mean(self.env.finished_costs))
        self.env.finished_costs.clear()
        self.env.multiplier = max(0.0, self.env.multiplier + self.lr * (mean_cost - 1.0))
        self.logger.record("lagrangian/multiplier", self.env.multiplier)
        self.logger.record("lagrangian/episode_cost", mean_cost)
        if self.path is not None:
            write_json(Path(self.path), {"multiplier": self.env.multiplier, "num_timesteps": self.num_timesteps})
