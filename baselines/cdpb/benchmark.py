"""How CDPB's tasks are scored (:class:`baselines.benchmark.SchemeBenchmark`'s default: played in the task's env,
scored against the task's anchors) and its references."""

from __future__ import annotations

from typing import Any

from baselines.benchmark import ConstantAction, RandomAction, SchemeBenchmark, best_constant_action
from baselines.cdpb.policies import MaxRho, StageTwo

__all__ = ["CDPBBenchmark", "BENCHMARK"]


class CDPBBenchmark(SchemeBenchmark):
    """CDPB's tasks: the references play the raw action rho (``action_type="rho"``) or the task's own."""

    def references(self, task_id: str) -> dict[str, Any]:
        """``(factory, env overrides)`` by name, floor to ceiling; the paper's planner (Stage II) is the last."""
        return {"UniformRandom": (RandomAction, {}), "MaxRho": (MaxRho, {"action_type": "rho"}),
                "BestConstant": (lambda: ConstantAction(best_constant_action(task_id)), {}),
                "CDPB": (StageTwo, {"action_type": "rho"})}


BENCHMARK = CDPBBenchmark()
