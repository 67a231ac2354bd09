"""CDPB's benchmark tasks, declared (:mod:`otagym.tasks` builds them): the server's task (its settings:
:data:`~otagym.schemes.cdpb.scenario.TASK_SETTINGS`, where the reasons for each number are) and the devices-as-agents
task (:data:`DEVICE_TASK_SETTINGS`, played by :mod:`otagym.multiagent`)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["TASKS", "DEVICE_TASK_SETTINGS", "DEVICE_TASKS"]

#: The task's declaration (see :data:`otagym.schemes.receive_scaling.tasks.TASKS`).
TASKS: tuple[dict[str, Any], ...] = (
    dict(name="CDPB", settings={}, eval_nus=(1.0,), budget="epsilon_max", anchors=("MaxRho", "BestConstant"),
         summary="Choose the power-balancing threshold rho of client-driven power balancing each round to minimise "
         "the paper's utility G = gamma + 1e-5 eps, without CSI, within a privacy threshold eps <= 1.",
         versions=("v0: the paper's eps-bar = 100, which no policy comes near (the cost was slack)",
                   "v1: eps-bar = 1, which binds at the best rho")),
)

#: The device task's deployment (``otagym/CDPB-Devices-v0``): K = 10 devices 10 dB apart in mean gain (Rayleigh
#: scales 0.1 to 1, geometric), CDPB-n (a device that does not send its gradient sends noise), the server's
#: rho = 0.3 P/W^2, privacy weight lambda_2 = 5e-3 (the paper's 1e-5 makes privacy irrelevant at K = 10), eps-bar = 20,
#: tau = 100; rewards in units of the paper's rule's |return| on it (0.198).
DEVICE_TASK_SETTINGS: dict[str, Any] = {
    "scenario": "paper-cdpb",
    "scenario_overrides": {"num_clients": 10, "channel_scale": tuple(np.round(np.geomspace(0.1, 1.0, 10), 4)),
                           "strategy": "noisy", "lambda_privacy": 5e-3, "epsilon_max": 20.0},
    "rho": 0.3, "reward_scale": 0.198,
}

#: The devices-as-agents tasks' declarations (:class:`otagym.tasks.DeviceTask`'s fields): ``name``, ``settings``
#: (the :class:`~otagym.multiagent.env.DevicesParallelEnv` arguments), ``summary``, ``versions`` and
#: ``reference_actions``, the actions of the references that a search chose on the task's validation realisations
#: (``python -m benchmarks.multiagent_results``, 8 minutes): the best action common to all devices
#: (:func:`baselines.cdpb.devices.best_common_constant` over a = -1, -0.95, ..., 1; mean validation return -0.99715,
#: the paper's rule's) and each device's best constant action by coordinate search from it
#: (:func:`~baselines.cdpb.devices.best_per_device_constants` over a = -1, -0.9, ..., 1; -0.91415), weakest mean gain
#: first.
DEVICE_TASKS: tuple[dict[str, Any], ...] = (
    dict(name="CDPB-Devices", settings=DEVICE_TASK_SETTINGS,
         summary="Ten devices 10 dB apart in mean channel gain each choose their own participation threshold under "
         "client-driven power balancing (CDPB-n) at the server's rho = 0.3 P/W^2, to minimise the paper's utility "
         "gamma + 5e-3 max_k eps_k as a team; a device whose RDP reaches 20 leaves.",
         reference_actions={"BestCommonConstant": (-1.0,),
                            "PerDeviceConstants": (-1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -0.9, -0.7, -0.5)}),
)
