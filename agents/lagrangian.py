"""PPO-Lagrangian for the CMDP formulation (``reward_mode="cmdp"``): Lagrangian relaxation of the cost constraint,
its multiplier set by a PID controller on the realised episode cost (Stooke, Achiam & Abbeel, "Responsive Safety in
Reinforcement Learning by PID Lagrangian Methods", ICML 2020, Algorithm 2), of which plain dual ascent (Ray et al.,
Safety Gym; OmniSafe's PPOLag) is the integral term alone.

The env reports ``info["cost"]`` (receive scaling: c_t / nu; CDPB: the round's share of the privacy threshold
(25c); anonymous OTA: of the (eps, delta) target); the constraint is a mean cost per step of at most 1 (an episode
cost limit of T). One policy serves every nu of ``nu_range`` (nu is observed), so one multiplier would enforce the
constraint only on average over nu: a policy could overspend at large nu and underspend at small nu. The multipliers
are therefore per bin of log nu (``nu_edges``; one bin where the task has no nu). :class:`LagrangianVecEnv` hands the
learner r_t - lambda_b (cost_t - 1) / T, b the bin of the env's episode, and :class:`DualAscentCallback` updates each
bin with a finished episode after every rollout, with e_b = its episodes' mean cost per step - 1 and J_b that mean
cost:

    I_b <- max(0, I_b + k_I e_b),   lambda_b <- max(0, k_P e_b + I_b + k_D max(0, J_b - J_b,previous))

(``lagrange_lr`` is k_I, ``lagrange_kp`` k_P, ``lagrange_kd`` k_D; I_b starts at ``lagrange_init``). With
``lagrange_quantile`` q, J_b is the q-quantile of the bin's episode costs instead of their mean (a quantile
Lagrangian: it aims at a share of at most 1 - q of the training episodes over the limit, a target on a noisy
empirical quantile of each rollout's finished episodes, not a guarantee). With k_P = k_D =
0 it is dual ascent, lambda_b <- max(0, lambda_b + k_I e_b). The proportional term reacts to an overspend within the
rollout that shows it, where the integral alone overshoots and oscillates (the paper's Figure 1).
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
        #: The PID controller's integral term I_b and each bin's last mean cost J_b (NaN: none yet).
        self.integral = self.multipliers.copy()
        self.previous_cost = np.full(self.multipliers.size, np.nan)
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
        """What a run saves and resumes from: the multipliers and the PID controller's state, their bins' inner edges
        and the step count."""
        return {"multipliers": self.multipliers.tolist(), "integral": self.integral.tolist(),
                "previous_cost": [None if np.isnan(v) else float(v) for v in self.previous_cost],
                "nu_edges": self.nu_edges.tolist(), "num_timesteps": int(num_timesteps)}

    def load_state(self, saved: dict) -> None:
        """Continue from :meth:`state`'s record (a record of dual ascent alone, without the PID state, too)."""
        self.multipliers = np.array(saved["multipliers"], dtype=float)
        self.integral = np.array(saved.get("integral", saved["multipliers"]), dtype=float)
        previous = saved.get("previous_cost") or [None] * self.multipliers.size
        self.previous_cost = np.array([np.nan if v is None else v for v in previous], dtype=float)


class DualAscentCallback(BaseCallback):
    """The PID update of the module docstring for each bin with a finished episode after every rollout (``lr`` is
    k_I; ``kp`` = ``kd`` = 0 is dual ascent); the state is saved to ``path`` (JSON) after every update, so that a
    resumed run continues from it, and at the end of training."""

    def __init__(self, env: LagrangianVecEnv, lr: float = 0.5, path: Path | None = None, kp: float = 0.0,
                 kd: float = 0.0, quantile: float | None = None) -> None:
        super().__init__()
        for name, gain in (("lagrange_lr", lr), ("lagrange_kp", kp), ("lagrange_kd", kd)):
            if not (np.isfinite(gain) and gain >= 0):
                raise ValueError(f"{name} must be finite and >= 0; got {gain}")
        if quantile is not None and not 0.0 < quantile < 1.0:
            raise ValueError(f"lagrange_quantile must lie in (0, 1) (None: the mean); got {quantile!r}")
        self.env, self.lr, self.kp, self.kd, self.path = env, float(lr), float(kp), float(kd), path
        self.quantile = quantile

    def _on_step(self) -> bool:
        return True

    def target(self, costs: NDArray) -> float:
        """The statistic of a bin's episode costs per step that the controller drives to 1: their mean, or with
        ``quantile`` q their q-quantile, which aims at a share of at most 1 - q of the episodes over the limit (the
        per-episode constraint, where the mean allows half of them over it)."""
        return float(np.mean(costs) if self.quantile is None else np.quantile(costs, self.quantile))

    def _on_rollout_end(self) -> None:
        if not self.env.finished:
            return
        bins, costs = (np.array(v) for v in zip(*self.env.finished))
        self.env.finished.clear()
        env = self.env
        for b in np.unique(bins):
            mean_cost = float(self.target(costs[bins == b]))
            error = mean_cost - 1.0
            rising = 0.0 if np.isnan(env.previous_cost[b]) else max(0.0, mean_cost - env.previous_cost[b])
            env.integral[b] = max(0.0, env.integral[b] + self.lr * error)
            env.multipliers[b] = max(0.0, self.kp * error + env.integral[b] + self.kd * rising)
            env.previous_cost[b] = mean_cost
        self.logger.record("lagrangian/multiplier_mean", float(env.multipliers.mean()))
        self.logger.record("lagrangian/episode_cost", float(costs.mean()))
        if self.path is not None:
            write_json(Path(self.path), env.state(self.num_timesteps))

    def _on_training_end(self) -> None:
        """The state again at the run's last step (a budget that stops training mid-rollout skips that rollout's
        update), so that the file's ``num_timesteps`` is the run's."""
        if self.path is not None:
            write_json(Path(self.path), self.env.state(self.num_timesteps))
