"""PPO-Lagrangian for the CMDP formulation (``reward_mode="cmdp"``): Lagrangian relaxation of the cost constraint
with dual ascent on the realised episode cost (as in Ray et al., Safety Gym, and OmniSafe's PPOLag).

The env reports ``info["cost"]`` = c_t / nu; the constraint of problem (28) is a mean cost per step of at most 1 (an
episode cost limit of T) at every budget nu. The constrained tasks of the other schemes report a cost of the same
convention (CDPB: the round's share of the privacy threshold (25c); anonymous OTA: of the (eps, delta) target) and
have no nu: one multiplier. One policy serves every nu of ``nu_range`` (nu is observed), so one
multiplier would enforce the constraint only on average over nu: a policy could overspend at large nu and underspend
at small nu. The multipliers are therefore per bin of log nu (``nu_edges``). :class:`LagrangianVecEnv` hands the
learner r_t - lambda_b (cost_t - 1) / T, b the bin of the env's episode, and :class:`DualAscentCallback` updates
lambda_b <- max(0, lambda_b + lr (mean episode cost per step in bin b - 1)) after every rollout, for each bin with a
finished episode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
from numpy.typing import NDArray
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from otagym._io import write_json

__all__ = ["LagrangianVecEnv", "DualAscentCallback", "nu_bin_edges"]


def nu_bin_edges(nu_range: Sequence[float] | None, bins: int) -> NDArray:
    """The inner edges of ``bins`` bins of equal width in log nu over ``nu_range``: none (one bin, one multiplier)
    for ``bins = 1``, a fixed nu, or a scheme without a budget nu (CDPB, anonymous OTA: ``nu_range`` None)."""
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"lagrange_nu_bins must be an integer >= 1; got {bins!r}")
    if nu_range is None or bins == 1:
        return np.empty(0)
    low, high = np.log(nu_range[0]), np.log(nu_range[1])
    return np.exp(np.linspace(low, high, bins + 1)[1:-1])


class LagrangianVecEnv(VecEnvWrapper):
    """Subtracts lambda_b (cost_t - 1) / T from each reward, b the log-nu bin of the env's nu (``nu_edges``: inner
    edges, :func:`nu_bin_edges`), and records each finished episode's bin and mean cost per step."""

    def __init__(self, venv: VecEnv, initial: float = 1.0, nu_edges: Sequence[float] = ()) -> None:
        super().__init__(venv)
        if not (np.isfinite(initial) and initial >= 0):
            raise ValueError(f"lagrange_init must be finite and >= 0; got {initial}")
        self.nu_edges = np.asarray(nu_edges, dtype=float)
        self.multipliers = np.full(self.nu_edges.size + 1, float(initial))
        self.num_rounds = int(venv.get_attr("scenario")[0].num_rounds)
        self._cost_sum = np.zeros(self.num_envs)
        self.finished: list[tuple[int, float]] = []  # (bin, mean cost per step) of each finished episode

    def reset(self) -> np.ndarray:
        self._cost_sum[:] = 0.0
        return self.venv.reset()

    def step_wait(self):
        obs, reward, dones, infos = self.venv.step_wait()
        cost = np.array([info["cost"] for info in infos])
        bins = (np.searchsorted(self.nu_edges, [info["nu"] for info in infos], side="right") if self.nu_edges.size
                else np.zeros(self.num_envs, dtype=int))  # one bin: a fixed nu, or a scheme without one
        self._cost_sum += cost
        for i in np.flatnonzero(dones):
            self.finished.append((int(bins[i]), float(self._cost_sum[i] / self.num_rounds)))
            infos[i]["episode_cost"] = self.finished[-1][1]
            self._cost_sum[i] = 0.0
        shaped = reward - self.multipliers[bins] * (cost - 1.0) / self.num_rounds
        return obs, shaped.astype(np.float32), dones, infos

    def state(self, num_timesteps: int) -> dict:
        """What a run saves and resumes from: the multipliers, their bins' inner edges and the step count."""
        return {"multipliers": self.multipliers.tolist(), "nu_edges": self.nu_edges.tolist(),
                "num_timesteps": int(num_timesteps)}


class DualAscentCallback(BaseCallback):
    """lambda_b <- max(0, lambda_b + lr (mean cost per step of bin b's episodes finished this rollout - 1)) for each
    bin with a finished episode; the state is saved to ``path`` (JSON) after every update so that a resumed run
    continues from it."""

    def __init__(self, env: LagrangianVecEnv, lr: float = 0.5, path: Path | None = None) -> None:
        super().__init__()
        self.env, self.lr, self.path = env, float(lr), path

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        if not self.env.finished:
            return
        bins, costs = (np.array(v) for v in zip(*self.env.finished))
        self.env.finished.clear()
        for b in np.unique(bins):
            mean_cost = float(costs[bins == b].mean())
            self.env.multipliers[b] = max(0.0, self.env.multipliers[b] + self.lr * (mean_cost - 1.0))
        self.logger.record("lagrangian/multiplier_mean", float(self.env.multipliers.mean()))
        self.logger.record("lagrangian/episode_cost", float(costs.mean()))
        if self.path is not None:
            write_json(Path(self.path), self.env.state(self.num_timesteps))
