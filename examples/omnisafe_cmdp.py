"""Recipe: an otagym benchmark task as an OmniSafe environment (OmniSafe's ``CMDP`` interface).

OmniSafe finds environments through classes registered with its ``env_register`` decorator; each steps torch tensors
and returns ``(obs, reward, cost, terminated, truncated, info)``. This module registers every otagym task (import it
before ``omnisafe.Agent``), with the cost of :mod:`otagym.wrappers.safety`'s Safety-Gymnasium view and the task's cost limit
(T: a mean cost of at most 1 per round)::

    import omnisafe
    import examples.omnisafe_cmdp  # noqa: F401 - registers the otagym tasks with OmniSafe
    custom = {"algo_cfgs": {"cost_limit": 100.0}}  # otagym.tasks.TASKS["otagym/CDPB-v1"].cost_limit
    agent = omnisafe.Agent("PPOLag", "otagym/CDPB-v1", custom_cfgs=custom)
    agent.learn()

OmniSafe 0.5 installs only beside gymnasium 0.28 (through safety-gymnasium), which otagym does not support, so the
recipe is tested against a minimal stand-in of ``omnisafe.envs.core`` (``tests/otagym/test_safety.py``), not OmniSafe
itself.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from omnisafe.envs.core import CMDP, env_register

import otagym  # noqa: F401 - registers the tasks with Gymnasium
from otagym.wrappers.safety import Gymnasium2SafetyGymnasium
from otagym.tasks import TASKS


@env_register
class OTAGymCMDP(CMDP):
    """Any otagym benchmark task for OmniSafe: one env (OmniSafe's adapters vectorise and autoreset it)."""

    _support_envs: ClassVar[list[str]] = sorted(TASKS)
    need_auto_reset_wrapper = True
    need_time_limit_wrapper = False  # every episode terminates after the task's T rounds
    metadata: ClassVar[dict[str, int]] = {}

    def __init__(self, env_id: str, num_envs: int = 1, device: str = "cpu", **kwargs: Any) -> None:
        if num_envs != 1:
            raise ValueError(f"num_envs must be 1 (OmniSafe vectorises CMDPs itself); got {num_envs!r}")
        self._num_envs = 1
        self._device = torch.device(device)
        self._env = Gymnasium2SafetyGymnasium(gym.make(env_id, **kwargs))
        self._observation_space = self._env.observation_space
        self._action_space = self._env.action_space
        self.cost_limit = TASKS[env_id].cost_limit
        self.env_spec_log: dict[str, Any] = {}

    def _tensor(self, value: Any) -> torch.Tensor:
        return torch.as_tensor(np.asarray(value, dtype=np.float32), device=self._device)

    def step(self, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        obs, reward, cost, terminated, truncated, info = self._env.step(action.detach().cpu().numpy())
        if terminated or truncated:  # what OmniSafe's AutoReset wrapper reads
            info["final_observation"] = self._tensor(obs)
        return (self._tensor(obs), self._tensor(reward), self._tensor(cost), self._tensor(terminated),
                self._tensor(truncated), info)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[torch.Tensor, dict]:
        obs, info = self._env.reset(seed=seed, options=options)
        return self._tensor(obs), info

    @property
    def max_episode_steps(self) -> int:
        """The task's T."""
        return int(self._env.spec.max_episode_steps)

    def set_seed(self, seed: int) -> None:
        self.reset(seed=seed)

    def sample_action(self) -> torch.Tensor:
        return self._tensor(self._action_space.sample())

    def spec_log(self, logger: Any) -> None:
        """Nothing beyond OmniSafe's own episode statistics."""

    def render(self) -> Any:
        return self._env.render()

    def close(self) -> None:
        self._env.close()
