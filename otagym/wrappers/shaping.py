"""Potential-based reward shaping (Ng, Harada & Russell, "Policy invariance under reward transformations", ICML 1999) as
Gymnasium wrappers, a single and a vector form: the reward r_t becomes r_t + gamma Phi(s_t+1) - Phi(s_t), with
Phi = 0 once an episode terminates. It changes no optimal policy (the episode's shaped return is its return less
Phi(s_0)), and it moves credit: a potential that prices what an action costs later puts that price in the round
that pays it.

Why here: on the suite's spend tasks with the action relative to the budget left (:class:`~otagym.wrappers.RelativeSpend`)
spending more now lowers the fair share of every later round, a cost a critic must otherwise learn from hundreds of
rounds later; ``agents.budget_ppo.FairShareValue`` is the potential that fixes it (docs/tutorials/constrained-rl.md).
Any client can stack it: ``PotentialShaping(RelativeSpend(gym.make(task_id)), potential)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from numpy.typing import NDArray

__all__ = ["Potential", "PotentialShaping", "PotentialShapingVector"]

#: Phi of a batch of observations (N, ...) -> (N,).
Potential = Callable[[NDArray], NDArray]


def _check_potential(potential: Any) -> Any:
    if not callable(potential):
        raise TypeError(f"potential must be a callable, Phi(observations (N, ...)) -> (N,); got {potential!r}")
    return potential


def _check_gamma(gamma: float) -> float:
    if not (isinstance(gamma, (int, float, np.floating)) and 0.0 <= gamma <= 1.0):
        raise ValueError(f"gamma must be a number in [0, 1] (the learner's discount); got {gamma!r}")
    return float(gamma)


class PotentialShaping(gym.Wrapper):
    """r_t + gamma Phi(s_t+1) - Phi(s_t) (Phi = 0 after a terminating step; a truncated episode keeps Phi of its last
    observation, as its return would be bootstrapped there).

    Args:
        env: any env.
        potential: Phi of a batch of observations, (N, ...) -> (N,) (called with N = 1).
        gamma: the learner's discount (1: undiscounted).
    """

    def __init__(self, env: gym.Env, potential: Potential, *, gamma: float = 1.0) -> None:
        super().__init__(env)
        self.potential, self.gamma = _check_potential(potential), _check_gamma(gamma)
        self._phi = 0.0

    def _phi_of(self, obs: Any) -> float:
        return float(np.asarray(self.potential(np.asarray(obs)[None]), dtype=float)[0])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._phi = self._phi_of(obs)
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        after = 0.0 if terminated else self._phi_of(obs)
        shaped = float(reward) + self.gamma * after - self._phi
        self._phi = after
        return obs, shaped, terminated, truncated, info


class PotentialShapingVector(gym.vector.VectorWrapper):
    """:class:`PotentialShaping` for a vector env in either autoreset mode: under SAME_STEP an ending step's Phi(s_t+1)
    is 0 (terminated) or Phi of ``info["final_obs"]`` (truncated) and the next episode starts from Phi of the returned
    observation; under NEXT_STEP the reset step that follows an end is left at its reward (the env played no round)."""

    def __init__(self, env: VectorEnv, potential: Potential, *, gamma: float = 1.0) -> None:
        super().__init__(env)
        self.potential, self.gamma = _check_potential(potential), _check_gamma(gamma)
        self.autoreset_mode = AutoresetMode(env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP))
        self._phi = np.zeros(self.num_envs)
        self._restarting = np.zeros(self.num_envs, dtype=bool)

    def _phi_of(self, obs: Any) -> NDArray:
        return np.asarray(self.potential(obs), dtype=float).reshape(self.num_envs)

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._phi, self._restarting[:] = self._phi_of(obs), False
        return obs, info

    def step(self, actions: Any) -> tuple[Any, NDArray, NDArray, NDArray, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(actions)
        following = self._phi_of(obs)  # the next state's Phi; at a SAME_STEP end, the next episode's first state's
        after = np.where(terminated, 0.0, following)
        cut = np.flatnonzero(np.logical_and(truncated, np.logical_not(terminated)))
        if self.autoreset_mode == AutoresetMode.SAME_STEP and cut.size:
            final = np.stack([np.asarray(info["final_obs"][i]) for i in cut])
            after[cut] = np.asarray(self.potential(final), dtype=float).reshape(cut.size)
        shaped = reward + self.gamma * after - self._phi
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            shaped = np.where(self._restarting, reward, shaped)
            self._restarting = np.logical_or(terminated, truncated)
        self._phi = following
        return obs, shaped, terminated, truncated, info
