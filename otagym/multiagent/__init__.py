"""Devices as agents: PettingZoo environments in which each device of an over-the-air FL deployment decides for
itself (:class:`~otagym.multiagent.env.DevicesParallelEnv`), and their benchmark tasks
(:data:`~otagym.multiagent.tasks.DEVICE_TASKS`).

``parallel_env(**kwargs)`` is the parallel API, ``env(**kwargs)`` the AEC one (PettingZoo's ``parallel_to_aec``),
as a PettingZoo environment module offers them.
"""

from __future__ import annotations

from typing import Any

from otagym.multiagent.env import MULTIAGENT_SCHEMES, DevicesParallelEnv, agent_name, parallel_env
from otagym.multiagent.tasks import (DEVICE_TASKS, DeviceTask, device_evaluation_options, device_side,
                                     device_task_kwargs, make_device_env)

__all__ = ["DevicesParallelEnv", "parallel_env", "env", "agent_name", "MULTIAGENT_SCHEMES", "DeviceTask",
           "DEVICE_TASKS", "device_task_kwargs", "make_device_env", "device_side", "device_evaluation_options"]


def env(**kwargs: Any):
    """The AEC form of :func:`parallel_env` (``pettingzoo.utils.parallel_to_aec``)."""
    from pettingzoo.utils import parallel_to_aec

    return parallel_to_aec(parallel_env(**kwargs))
