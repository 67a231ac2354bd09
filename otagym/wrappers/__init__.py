"""Gymnasium wrappers that change how an agent sees a task without changing its physics, each stackable by any client
(as in ``gymnasium.wrappers``): the per-episode budget wrappers of :mod:`otagym.wrappers.budget`, potential-based reward shaping
(:mod:`otagym.wrappers.shaping`), and
:class:`~otagym.wrappers.unconstrained.UnconstrainedLearner`, which says when a learner that ignores the cost trains on
a constrained task. The adapters to other APIs are here too, imported on demand (their libraries are optional):
:mod:`otagym.wrappers.sb3` (SB3's ``VecEnv`` over the native vector env) and :mod:`otagym.wrappers.safety`
(Safety-Gymnasium's ``step``)."""

from otagym.wrappers.budget import (
                                    BudgetLedger,
                                    RelativeSpend,
                                    RelativeSpendVector,
                                    ReserveSafetyLayer,
                                    ReserveSafetyLayerVector,
                                    SauteBudget,
                                    SauteBudgetVector,
                                    fair_share,
                                    relative_action,
                                    relative_spend,
                                    spend_cap,
                                    spend_multiplier,
)
from otagym.wrappers.shaping import Potential, PotentialShaping, PotentialShapingVector
from otagym.wrappers.unconstrained import UnconstrainedLearner

__all__ = ["BudgetLedger", "RelativeSpend", "RelativeSpendVector", "ReserveSafetyLayer", "ReserveSafetyLayerVector",
           "SauteBudget", "SauteBudgetVector", "fair_share", "relative_action", "relative_spend", "spend_cap",
           "spend_multiplier", "Potential", "PotentialShaping", "PotentialShapingVector", "UnconstrainedLearner"]
