"""CDPB's benchmark task, declared (:mod:`otagym.tasks` builds it; its settings:
:data:`~otagym.schemes.cdpb.scenario.TASK_SETTINGS`, where the reasons for each number are)."""

from __future__ import annotations

from typing import Any

__all__ = ["TASKS"]

#: The task's declaration (see :data:`otagym.schemes.receive_scaling.tasks.TASKS`).
TASKS: tuple[dict[str, Any], ...] = (
    dict(name="CDPB", settings={}, eval_nus=(1.0,), budget="epsilon_max", anchors=("MaxRho", "BestConstant"),
         summary="Choose the power-balancing threshold rho of client-driven power balancing each round to minimise "
         "the paper's utility G = gamma + 1e-5 eps, without CSI, within a privacy threshold eps <= 1.",
         versions=("v0: the paper's eps-bar = 100, which no policy comes near (the cost was slack)",
                   "v1: eps-bar = 1, which binds at the best rho")),
)
