"""The devices-as-agents benchmark tasks: versioned settings, the frozen seed sets of the benchmark suite and the
channel realisations of its evaluation (the single-agent tasks' conventions, :mod:`otagym.tasks`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
from numpy.typing import NDArray

from otagym.multiagent.env import DevicesParallelEnv
from otagym.schemes import get_scheme
from otagym.schemes.cdpb.devices import DEVICE_TASK_SETTINGS
from otagym.tasks import BENCHMARK_EVALUATION_SEEDS, BENCHMARK_TRAINING_SEEDS, BENCHMARK_VALIDATION_SEEDS
from otagym.validation import OneOf

__all__ = ["DeviceTask", "DEVICE_TASKS", "DEFAULT_DEVICE_TASK", "device_task_kwargs", "make_device_env",
           "device_side", "device_evaluation_options"]


@dataclass(frozen=True)
class DeviceTask:
    """A registered devices-as-agents task.

    Attributes:
        id: ``"otagym/<Name>-v<version>"``.
        scheme: the scheme whose devices act.
        kwargs: the :class:`~otagym.multiagent.env.DevicesParallelEnv` arguments the task fixes.
        summary: what is learned.
        versions: the history of the version number.
        eval_seeds / validation_seeds / training_seeds: the disjoint realisation seeds to report on, to select on and
            to train on (the single-agent benchmark suite's).
    """

    id: str
    scheme: str
    kwargs: Mapping[str, Any]
    summary: str
    versions: tuple[str, ...] = ()
    eval_seeds: tuple[int, ...] = field(default=BENCHMARK_EVALUATION_SEEDS)
    validation_seeds: tuple[int, ...] = field(default=BENCHMARK_VALIDATION_SEEDS)
    training_seeds: tuple[int, ...] = field(default=BENCHMARK_TRAINING_SEEDS)


#: Every devices-as-agents task by id.
DEVICE_TASKS: dict[str, DeviceTask] = {t.id: t for t in (
    DeviceTask("otagym/CDPB-Devices-v0", "cdpb", DEVICE_TASK_SETTINGS,
               "Ten devices 10 dB apart in mean channel gain each choose their own participation threshold under "
               "client-driven power balancing (CDPB-n) at the server's rho = 0.3 P/W^2, to minimise the paper's "
               "utility gamma + 5e-3 max_k eps_k as a team; a device whose RDP reaches 20 leaves.",
               versions=("v0: first version",)),
)}


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
    (:func:`device_task_kwargs`)."""
    return DevicesParallelEnv(scheme=_task(task_id).scheme, **device_task_kwargs(task_id, **overrides))


def device_side(task_id: str, num_envs: int = 1, **overrides: Any) -> Any:
    """The scheme's device side of a task (:attr:`otagym.schemes.SchemeInfo.devices`) for ``num_envs`` episodes
    played in step, with ``overrides`` of its arguments (:func:`device_task_kwargs`): what evaluates a device
    policy on many realisations at once."""
    info = get_scheme(_task(task_id).scheme)
    kwargs = device_task_kwargs(task_id, **overrides)
    scenario = info.scenario(kwargs.pop("scenario", None), **kwargs.pop("scenario_overrides"))
    return info.devices(scenario, num_envs, **kwargs)


def device_evaluation_options(task_id: str, seed: int) -> dict[str, NDArray]:
    """The ``reset`` options that replay the realisation of ``seed`` of a task: the scheme's realisation sampler
    (:attr:`otagym.schemes.SchemeInfo.sample_realisation`) drawn from ``numpy.random.default_rng(seed)``."""
    sample = get_scheme(_task(task_id).scheme).sample_realisation
    return sample(device_side(task_id).scenario, np.random.default_rng(seed))
