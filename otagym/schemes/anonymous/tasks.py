"""Anonymous OTA's benchmark task, declared (:mod:`otagym.tasks` builds it; its settings:
:data:`~otagym.schemes.anonymous.scenario.TASK_SETTINGS`, where the reasons for each number are)."""

from __future__ import annotations

from typing import Any

__all__ = ["TASKS"]

#: The task's declaration (see :data:`otagym.schemes.receive_scaling.tasks.TASKS`).
TASKS: tuple[dict[str, Any], ...] = (
    dict(name="AnonymousOTA", settings={}, eval_nus=(8.0,), budget="target_epsilon",
         anchors=("MidAction", "BestConstant"),
         summary="Choose the public noise level sigma of anonymous over-the-air FL each round to minimise the SGD "
         "bound plus 0.01 x RDP, under an (8, 1e-5)-DP cost."),
)
