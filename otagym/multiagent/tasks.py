"""The devices-as-agents benchmark tasks played: their environments, device sides and evaluation realisations (the
tasks themselves, :data:`~otagym.tasks.DEVICE_TASKS`, are declared in their schemes' packages and built by
:mod:`otagym.tasks`, without PettingZoo)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from otagym.multiagent.env import DevicesParallelEnv
from otagym.schemes import get_scheme
from otagym.tasks import DEVICE_TASKS, DeviceTask
from otagym.validation import OneOf

__all__ = ["DeviceTask", "DEVICE_TASKS", "DEFAULT_DEVICE_TASK", "device_task_kwargs", "make_device_env",
           "device_side", "device_evaluation_options"]


#: The task ``otagym.multiagent.parallel_env()`` and ``env()`` build when given no argument.
DEFAULT_DEVICE_TASK = "otagym/CDPB-Devices-v0"


def _task(task_id: str) -> DeviceTask:
    return DEVICE_TASKS[OneOf(tuple(DEVICE_TASKS))("task_id", task_id)]


def device_task_kwargs(task_id: str, **overrides: Any) -> dict[str, Any]:
    """A task's env arguments with ``overrides``; ``scenario_overrides`` update the task's own
    (``{"epsilon_max": 2.0}`` keeps its ten devices)."""
    task = _task(task_id)
    scenario_overrides = {**task.kwargs.get("scenario_overrides", {}),
                          **(overrides.pop("scenario_overrides", None) or {})}
    return {**task.kwargs, **overrides, "scenario_overrides": scenario_overrides}


def make_device_env(task_id: str, **overrides: Any) -> DevicesParallelEnv:
    """The parallel env of a task, with its settings and any ``overrides`` of the env's arguments
    (:func:`device_task_kwargs`; not its ``scheme``: another scheme is another task)."""
    scheme = _task(task_id).scheme
    if "scheme" in overrides:
        raise ValueError(f"scheme is {task_id}'s ({scheme!r}) and cannot be overridden; got scheme="
                         f"{overrides['scheme']!r} (the device tasks: {sorted(DEVICE_TASKS)})")
    return DevicesParallelEnv(scheme=scheme, **device_task_kwargs(task_id, **overrides))


def device_side(task_id: str, num_envs: int = 1, **overrides: Any) -> Any:
    """The scheme's device side of a task (:attr:`otagym.schemes.SchemeInfo.devices`) for ``num_envs`` episodes
    played in step, with ``overrides`` of its arguments (:func:`device_task_kwargs`): what evaluates a device
    policy on many realisations at once."""
    info = get_scheme(_task(task_id).scheme)
    kwargs = device_task_kwargs(task_id, **overrides)
    for shell in DevicesParallelEnv.SHELL_ARGS:  # the PettingZoo env's own arguments
        kwargs.pop(shell, None)
    scenario = info.scenario(kwargs.pop("scenario", None), **kwargs.pop("scenario_overrides"))
    return info.devices(scenario, num_envs, **kwargs)


def device_evaluation_options(task_id: str, seed: int) -> dict[str, NDArray]:
    """The ``reset`` options that replay the realisation of ``seed`` of a task: the scheme's realisation sampler
    (:attr:`otagym.schemes.SchemeInfo.sample_realisation`) drawn from ``numpy.random.default_rng(seed)``."""
    sample = get_scheme(_task(task_id).scheme).sample_realisation
    return sample(device_side(task_id).scenario, np.random.default_rng(seed))
