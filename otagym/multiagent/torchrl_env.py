"""Devices as agents for TorchRL and BenchMARL: N episodes of a device task as one batched TorchRL environment
(VMAS-style), over the scheme's batched device side (:attr:`otagym.schemes.SchemeInfo.devices`), with the keys of
TorchRL's ``PettingZooWrapper`` on :class:`~otagym.multiagent.env.DevicesParallelEnv` (``use_mask=True``,
``return_state=True``), so that a policy written for one runs on the other.

Keys, N the batch and K the devices, all in one group named after the agents (``"client"``):

* ``("client", "observation")`` (N, K, entries), ``("client", "mask")`` (N, K): whether the device is still in;
  ``"state"`` (N, state): the global state for a centralised critic (MAPPO);
* ``("client", "action")`` (N, K, A) in [-1, 1];
* ``("client", "reward")`` (N, K, 1); ``"done"`` / ``"terminated"`` / ``"truncated"`` (N, 1) and the same per device
  (N, K, 1), the episode's.

Every episode runs its tau rounds, so the batch stays in step and resets together. A device that leaves keeps its
slot: it is masked, its actions are ignored, and (team reward) it shares the team's reward to the end. Where every
device has left, the remaining rounds are played without them and their rewards arrive round by round; the PettingZoo
env charges them at the step the last device leaves. The team's return is the same on every realisation, and so are
the live devices' observations and rewards at every round before (``tests/otagym/multiagent/test_torchrl_env.py``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

from otagym.multiagent.env import agent_name
from otagym.multiagent.tasks import DEFAULT_DEVICE_TASK, device_evaluation_options, device_side

__all__ = ["DevicesTorchRLEnv", "GROUP"]

#: The group of every device, as TorchRL's ``PettingZooWrapper`` names it from the agents' names.
GROUP = agent_name(0).rsplit("_", 1)[0]


def _box(space: Any, batch: tuple[int, ...]) -> Bounded:
    """A gymnasium Box of one device (or of the state) as a TorchRL spec with leading ``batch`` dims."""
    shape = batch + space.shape
    low, high = (torch.tensor(np.broadcast_to(bound, shape)) for bound in (space.low, space.high))
    return Bounded(low, high, shape, dtype=torch.float32)


def _flags(shape: tuple[int, ...]) -> Composite:
    """``done``, ``terminated`` and ``truncated`` of ``shape`` (the last dim 1)."""
    flag = Categorical(2, shape, dtype=torch.bool)
    return Composite(done=flag.clone(), terminated=flag.clone(), truncated=flag.clone(), shape=shape[:-1])


class DevicesTorchRLEnv(EnvBase):
    """``num_envs`` episodes of a device task, batched (see the module docstring).

    Args:
        task: a devices-as-agents task id (:data:`otagym.tasks.DEVICE_TASKS`).
        num_envs: N, the episodes played in step.
        realisations: one seed per episode: every reset replays the realisation of each (the evaluation's,
            :func:`~otagym.multiagent.device_evaluation_options`); None draws new channels at every reset.
        seed: the seed of the episodes' randomness (``set_seed`` changes it).
        device: the torch device of the tensors (the physics runs in numpy on the CPU).
        **overrides: the task's env arguments to change (:func:`~otagym.multiagent.device_task_kwargs`).
    """

    def __init__(self, task: str = DEFAULT_DEVICE_TASK, num_envs: int = 1, *,
                 realisations: Sequence[int] | None = None, seed: int | None = None, device: Any = "cpu",
                 **overrides: Any) -> None:
        super().__init__(device=device, batch_size=torch.Size([num_envs]))
        self.side = device_side(task, num_envs, **overrides)
        if realisations is not None and len(realisations) != num_envs:
            raise ValueError(f"realisations must hold one seed per env (num_envs={num_envs}); got {len(realisations)}")
        self._gains = None if realisations is None else np.stack(
            [device_evaluation_options(task, int(s))["channel_gains"] for s in realisations], axis=1)
        self._replaying = False
        self.rng = np.random.default_rng(seed)
        n, k = (num_envs,), (num_envs, self.side.num_devices)
        self.observation_spec = Composite({GROUP: Composite(observation=_box(self.side.observation_space(), k),
                                                            mask=Categorical(2, k, dtype=torch.bool), shape=k),
                                           "state": _box(self.side.state_space(), n)}, shape=n)
        self.action_spec = Composite({GROUP: Composite(action=_box(self.side.action_space(), k), shape=k)}, shape=n)
        self.reward_spec = Composite({GROUP: Composite(reward=Unbounded(k + (1,)), shape=k)}, shape=n)
        self.done_spec = Composite({**_flags(n + (1,)), GROUP: _flags(k + (1,))}, shape=n)

    def _set_seed(self, seed: int | None) -> None:
        self.rng = np.random.default_rng(seed)

    def _observe(self, done: np.ndarray) -> TensorDict:
        """The observation keys and the episode's flags (``done`` (N,))."""
        n, k = self.side.num_envs, self.side.num_devices
        flag = torch.as_tensor(done, device=self.device).reshape(n, 1)
        per_device = flag[:, None, :].expand(n, k, 1).clone()
        group = {"observation": torch.as_tensor(self.side.observations(), device=self.device),
                 "mask": torch.as_tensor(self.side.active.copy(), device=self.device),
                 "done": per_device, "terminated": per_device.clone(), "truncated": torch.zeros_like(per_device)}
        return TensorDict({GROUP: TensorDict(group, batch_size=(n, k)),
                           "state": torch.as_tensor(self.side.state(), device=self.device), "done": flag,
                           "terminated": flag.clone(), "truncated": torch.zeros_like(flag)},
                          batch_size=(n,), device=self.device)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        mask = None if tensordict is None or "_reset" not in tensordict.keys() else (
            tensordict["_reset"].reshape(-1).cpu().numpy())
        gains = None if self._gains is None or (self._replaying and mask is not None) else self._gains
        self.side.reset(self.rng, channel_gains=gains, mask=None if gains is not None else mask)
        self._replaying = self._gains is not None
        return self._observe(np.zeros(self.side.num_envs, dtype=bool))

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        actions = tensordict[GROUP, "action"].detach().cpu().numpy().astype(float)
        played = self.side.step(self.rng, actions)
        out = self._observe(np.asarray(played.done))
        out[GROUP, "reward"] = torch.as_tensor(played.rewards, dtype=torch.float32, device=self.device)[..., None]
        return out
