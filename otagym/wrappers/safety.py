"""Safety-Gymnasium's view of a task: ``step`` returns ``(obs, reward, cost, terminated, truncated, info)``.

Every benchmark task reports its constraint's per-round cost in ``info["cost"]``, scaled so that the episode cost is
at most the task's :attr:`~otagym.tasks.Task.cost_limit` (T) exactly when the constraint holds. Safe-RL libraries
built on Safety-Gymnasium (OmniSafe, FSRL) take the cost as a separate return value instead;
:class:`Gymnasium2SafetyGymnasium` gives them that view and :class:`SafetyGymnasium2Gymnasium` turns it back, so
Gymnasium's wrappers can sit in between, as Safety-Gymnasium's wrappers of the same names do. Both work on single
envs; a vector env's ``info["cost"]`` is already an array over envs.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym

__all__ = ["Gymnasium2SafetyGymnasium", "SafetyGymnasium2Gymnasium"]


class Gymnasium2SafetyGymnasium(gym.Wrapper):
    """A Gymnasium env that reports ``info["cost"]`` as a Safety-Gymnasium env: ``step`` returns ``(obs, reward,
    cost, terminated, truncated, info)`` with ``cost = float(info["cost"])`` (the info keeps it)."""

    def step(self, action: Any) -> tuple[Any, SupportsFloat, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if "cost" not in info:
            raise KeyError("the env reports no info['cost']: every otagym benchmark task does (otagym.tasks), as "
                           "does OTAPrivacy-v0 in every reward_mode; the anonymous scheme needs target_epsilon")
        return obs, reward, float(info["cost"]), terminated, truncated, info


class SafetyGymnasium2Gymnasium(gym.Wrapper):
    """A Safety-Gymnasium env (6-tuple ``step``) as a Gymnasium env: the cost goes to ``info["cost"]``."""

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, cost, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, "cost": cost}
