"""CDPB's benchmark tasks, declared (:mod:`otagym.tasks` builds them): the server's task (its settings:
:data:`~otagym.schemes.cdpb.scenario.TASK_SETTINGS`, where the reasons for each number are) and the devices-as-agents
task (:data:`DEVICE_TASK_SETTINGS`, played by :mod:`otagym.multiagent`)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["TASKS", "DEVICE_TASK_SETTINGS", "LARGE_DEVICE_TASK_SETTINGS", "DEVICE_TASKS"]

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
    "rho": 0.3, "reward_scale": 0.198, "dp_orders": None,
}

#: Each device's share of eps-bar on ``otagym/CDPB-Devices50-v0``: 0.1 to 1 geometrically (0.5 to 5 in RDP), assigned
#: to the devices (weakest mean gain first) by a fixed permutation (``default_rng(1).permutation(50)``), so that a
#: device's budget says nothing of its channel.
LARGE_DEVICE_BUDGETS: tuple[float, ...] = (
    0.202, 0.324, 0.569, 0.295, 0.409, 0.133, 0.356, 1.0, 0.115, 0.373, 0.153, 0.471, 0.212, 0.309, 0.1, 0.256, 0.281,
    0.139, 0.954, 0.518, 0.222, 0.244, 0.91, 0.391, 0.429, 0.268, 0.791, 0.105, 0.168, 0.625, 0.193, 0.121, 0.72,
    0.655, 0.754, 0.339, 0.829, 0.494, 0.11, 0.176, 0.16, 0.543, 0.126, 0.146, 0.45, 0.687, 0.869, 0.233, 0.184, 0.596)

#: The large device task's deployment (``otagym/CDPB-Devices50-v0``): K = 50 devices 10 dB apart in mean gain from the
#: weakest to the strongest, each seeing its channel before it decides (``csi_feedback``: the accounting then counts
#: the rounds a device took part in), with its own budget (:data:`LARGE_DEVICE_BUDGETS` of eps-bar = 5); otherwise
#: as :data:`DEVICE_TASK_SETTINGS`. Measured before it was kept (the 32 validation realisations): the paper's rule
#: spends every device's budget (return -8.6 in the units below); the best action common to all devices, a = -0.7,
#: loses 31 of the 50 devices on average and returns -1.0 (0.0793, the rewards' unit); each device's best constant
#: action (coordinate search) returns -0.60: a room of 40% of the floor's |return|. A device that spent its budget
#: stays an agent (``keep_departed``): with most devices leaving, a team reward that stopped at a device's departure
#: would pay it to leave early (IPPO trained so, 6M device steps, learned the paper's rule: -8.64 on validation).
LARGE_DEVICE_TASK_SETTINGS: dict[str, Any] = {
    "scenario": "paper-cdpb",
    "scenario_overrides": {"num_clients": 50, "channel_scale": tuple(np.round(np.geomspace(0.1, 1.0, 50), 4)),
                           "strategy": "noisy", "lambda_privacy": 5e-3, "epsilon_max": 5.0, "csi_feedback": True},
    "rho": 0.3, "budget_scale": LARGE_DEVICE_BUDGETS, "reward_scale": 0.0793, "keep_departed": True,
    "dp_orders": None,
}

#: The devices-as-agents tasks' declarations (:class:`otagym.tasks.DeviceTask`'s fields): ``name``, ``settings``
#: (the :class:`~otagym.multiagent.env.DevicesParallelEnv` arguments), ``summary``, ``versions`` and
#: ``reference_actions``, the actions of the references that a search chose on the task's validation realisations
#: (``python -m benchmarks.multiagent_results --task ID --search``: 8 and 6 minutes): the best action common to all
#: devices (:func:`baselines.cdpb.devices.best_common_constant` over a = -1, -0.95, ..., 1; mean validation return
#: -0.99715, the paper's rule's, and -0.99966) and each device's best constant action by coordinate search from it
#: (:func:`~baselines.cdpb.devices.best_per_device_constants` over a = -1, -0.9, ..., 1; -0.91415 and -0.59895),
#: weakest mean gain first; and ``train_steps``, the device steps a team trains for by default (on the ten devices' task
#: IPPO seed 90000 reached 40% of the room on validation at 1.5M steps, 122% at 4.5M: about 9 minutes, one core).
DEVICE_TASKS: tuple[dict[str, Any], ...] = (
    dict(name="CDPB-Devices", settings=DEVICE_TASK_SETTINGS,
         summary="Ten devices 10 dB apart in mean channel gain each choose their own participation threshold under "
         "client-driven power balancing (CDPB-n) at the server's rho = 0.3 P/W^2, to minimise the paper's utility "
         "gamma + 5e-3 max_k eps_k as a team; a device whose RDP reaches 20 leaves.",
         train_steps=4_500_000,
         reference_actions={"BestCommonConstant": (-1.0,),
                            "PerDeviceConstants": (-1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -0.9, -0.7, -0.5)}),
    dict(name="CDPB-Devices50", settings=LARGE_DEVICE_TASK_SETTINGS,
         summary="Fifty devices 10 dB apart in mean channel gain, each seeing its channel and holding its own privacy "
         "budget (0.5 to 5 in RDP, unrelated to its channel), each choose their own participation threshold under "
         "CDPB-n at the server's rho = 0.3 P/W^2 to minimise gamma + 5e-3 max_k eps_k as a team; a device whose "
         "RDP reaches its budget leaves. The paper's rule spends every budget: the floor is the best common action.",
         anchors=("BestCommonConstant", "PerDeviceConstants"),
         train_steps=6_000_000,
         reference_actions={"BestCommonConstant": (-0.7,), "PerDeviceConstants": (
             -1.0, -1.0, -1.0, -1.0, -1.0, -0.9, -1.0, -1.0, -0.8, -1.0, -0.8, -1.0, -0.9, -1.0, -0.6, -0.9, -0.9,
             -0.6, -1.0, -1.0, -0.7, -0.7, -1.0, -0.9, -1.0, -0.7, -1.0, -0.3, -0.4, -1.0, -0.4, -0.3, -1.0, -1.0,
             -1.0, -0.6, -1.0, -0.8, -0.1, -0.2, -0.1, -0.8, 0.0, 0.0, -0.5, -0.7, -0.6, -0.1, 0.0, -0.7)}),
)
