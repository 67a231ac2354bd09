"""How anonymous OTA's tasks are scored (:class:`baselines.benchmark.SchemeBenchmark`'s default: played in the
task's env, scored against the task's anchors) and its references."""

from __future__ import annotations

from typing import Any

from baselines.anonymous.policies import CalibratedSigma, PaperSetting
from baselines.benchmark import ConstantAction, RandomAction, SchemeBenchmark, best_constant_action
from otagym.accounting import DEFAULT_ORDERS
from otagym.tasks import TASKS

__all__ = ["AnonymousBenchmark", "BENCHMARK"]


class AnonymousBenchmark(SchemeBenchmark):
    """Anonymous OTA's tasks: the sigma policies play the raw action (``action_type="sigma"``)."""

    def references(self, task_id: str) -> dict[str, Any]:
        """``(factory, env overrides)`` by name, floor to ceiling; the sigma calibrated to the task's target eps is
        the last."""
        target = float(TASKS[task_id].kwargs["target_epsilon"])
        return {"UniformRandom": (RandomAction, {}), "MidAction": (lambda: ConstantAction(0.0), {}),
                "BestConstant": (lambda: ConstantAction(best_constant_action(task_id)), {}),
                "PaperSetting": (PaperSetting, {"action_type": "sigma"}),
                "CalibratedSigma": (lambda: CalibratedSigma(target, orders=DEFAULT_ORDERS), {"action_type": "sigma"})}


BENCHMARK = AnonymousBenchmark()
