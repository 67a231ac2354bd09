"""Devices as agents: PettingZoo environments in which each device of an over-the-air FL deployment decides for
itself (:class:`~otagym.multiagent.env.DevicesParallelEnv`), and their benchmark tasks
(:data:`~otagym.multiagent.tasks.DEVICE_TASKS`).

``parallel_env(**kwargs)`` is the parallel API, ``env(**kwargs)`` the AEC one (PettingZoo's ``parallel_to_aec``),
as a PettingZoo environment module offers them: ``task=ID`` builds a task's env (its settings under any other
arguments), and with no argument at all the default task's (:data:`DEFAULT_DEVICE_TASK`), not the scheme's raw
preset (whose hundred devices all leave within a few rounds).
"""

from __future__ import annotations

from typing import Any

from otagym.multiagent.env import MULTIAGENT_SCHEMES, DevicesParallelEnv, agent_name
from otagym.multiagent.tasks import (DEFAULT_DEVICE_TASK, DEVICE_TASKS, DeviceTask, device_evaluation_options,
                                     device_side, device_task_kwargs, make_device_env)

__all__ = ["DevicesParallelEnv", "parallel_env", "env", "agent_name", "MULTIAGENT_SCHEMES", "DeviceTask",
           "DEVICE_TASKS", "DEFAULT_DEVICE_TASK", "device_task_kwargs", "make_device_env", "device_side",
           "device_evaluation_options"]


def parallel_env(task: str | None = None, **kwargs: Any) -> DevicesParallelEnv:
    """A :class:`DevicesParallelEnv` (PettingZoo's ``parallel_env`` entry point): the task ``task``'s
    (:func:`make_device_env`, ``kwargs`` overriding its settings), the env ``kwargs`` describe when no task is named,
    and with no argument at all the default task's (:data:`DEFAULT_DEVICE_TASK`)."""
    if task is None and not kwargs:
        task = DEFAULT_DEVICE_TASK
    return DevicesParallelEnv(**kwargs) if task is None else make_device_env(task, **kwargs)


def env(task: str | None = None, **kwargs: Any):
    """The AEC form of :func:`parallel_env` (``pettingzoo.utils.parallel_to_aec``), a task's or any."""
    from pettingzoo.utils import parallel_to_aec

    return parallel_to_aec(parallel_env(task, **kwargs))
