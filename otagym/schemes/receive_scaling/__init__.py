"""Receive scaling (model A: channel-inversion FedSGD with server receive scaling; the AdaScale paper: Kalarde et al.,
*Privacy Enhancement in Over-the-Air Federated Learning via Adaptive Receive Scaling*, §IV-V), one scheme in one
package:

* :mod:`~otagym.schemes.receive_scaling.scenario`: :class:`ReceiveScalingScenario` (``otagym.Scenario``), the presets
  and :func:`get_scenario`;
* :mod:`~otagym.schemes.receive_scaling.formulas`: the per-round formulas, compiled (:class:`ModelArrays`),
  :mod:`~otagym.schemes.receive_scaling.stationary` the channel law's integrals and
  :mod:`~otagym.schemes.receive_scaling.model` :class:`ReceiveScalingModel`, which applies them to arrays;
* :mod:`~otagym.schemes.receive_scaling.solver`: the convex round solver (:func:`minimize_round`);
* :mod:`~otagym.schemes.receive_scaling.actions`: the action types and the one action decoder;
* :mod:`~otagym.schemes.receive_scaling.observation`: the named, versioned observation layout;
* :mod:`~otagym.schemes.receive_scaling.kernel`: the round, compiled, on named tuples of its settings and state;
* :mod:`~otagym.schemes.receive_scaling.core`: :class:`ReceiveScalingCore`, N episodes as arrays.
"""

from typing import Any

from otagym._moved import renamed
from otagym.schemes.receive_scaling import observation
from otagym.schemes.receive_scaling.actions import (BUDGET_ACTIONS, UNIT_ACTIONS, ActionSettings, ActionType,
                                                    RewardMode, budget_action_cost, constrained, decode_actions,
                                                    normalized_x, spend_cost)
from otagym.schemes.receive_scaling.core import ReceiveScalingCore, sample_realisation
from otagym.schemes.receive_scaling.formulas import (X_FLOOR_RATIO, ModelArrays, cost_slope_of_leakage, price_spend,
                                                     reference_price)
from otagym.schemes.receive_scaling.model import ReceiveScalingModel
from otagym.schemes.receive_scaling.observation import LAYOUT_VERSION, OBS_BOUND, ObservationOffsets
from otagym.schemes.receive_scaling.scenario import (PRESETS, TASK_SETTINGS, ReceiveScalingScenario, Scenario,
                                                     dbm_to_w, get_scenario, w_to_dbm)
from otagym.schemes.receive_scaling.solver import minimize_round, solve_increasing

__all__ = ["ReceiveScalingScenario", "Scenario", "PRESETS", "get_scenario", "dbm_to_w", "w_to_dbm",
           "ReceiveScalingModel", "ModelArrays", "X_FLOOR_RATIO", "cost_slope_of_leakage", "reference_price",
           "price_spend", "minimize_round", "solve_increasing", "ActionType", "RewardMode", "BUDGET_ACTIONS",
           "UNIT_ACTIONS", "ActionSettings", "normalized_x", "spend_cost", "budget_action_cost", "decode_actions",
           "OBS_BOUND", "LAYOUT_VERSION", "ObservationOffsets", "ReceiveScalingCore", "sample_realisation",
           "constrained", "TASK_SETTINGS", "observation"]


def __getattr__(name: str) -> Any:
    return renamed(__name__, name)
