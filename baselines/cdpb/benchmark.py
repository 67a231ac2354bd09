"""How CDPB's tasks are scored (:class:`baselines.benchmark.SchemeBenchmark`'s default: played in the task's env,
scored against the task's anchors) and its references; its devices-as-agents tasks played on the batched device side
(:mod:`baselines.cdpb.devices`)."""

from __future__ import annotations

from typing import Any, Sequence

from baselines.benchmark import ConstantAction, RandomAction, SchemeBenchmark, best_constant_action
from baselines.play import Episodes
from baselines.cdpb.policies import MaxRho, StageTwo

__all__ = ["CDPBBenchmark", "BENCHMARK"]


class CDPBBenchmark(SchemeBenchmark):
    """CDPB's tasks: the references play the raw action rho (``action_type="rho"``) or the task's own."""

    def references(self, task_id: str) -> dict[str, Any]:
        """``(factory, env overrides)`` by name, floor to ceiling; the paper's planner (Stage II) is the last."""
        return {"UniformRandom": (RandomAction, {}), "MaxRho": (MaxRho, {"action_type": "rho"}),
                "BestConstant": (lambda: ConstantAction(best_constant_action(task_id)), {}),
                "CDPB": (StageTwo, {"action_type": "rho"})}

    def device_references(self, task_id: str) -> dict[str, Any]:
        """:func:`baselines.cdpb.devices.device_references`."""
        from baselines.cdpb.devices import device_references

        return device_references(task_id)

    def play_team(self, policy: Any, task_id: str, seeds: Sequence[int]) -> Episodes:
        """:func:`baselines.cdpb.devices.evaluate_devices`: the episode's cost is its worst device's privacy spent
        over its budget."""
        from baselines.cdpb.devices import evaluate_devices

        played = evaluate_devices(task_id, policy, seeds)
        return Episodes(played.returns, played.worst_privacy_used)


BENCHMARK = CDPBBenchmark()
