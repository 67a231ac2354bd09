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

from otagym._exports import lazy_exports
from otagym.schemes.info import RDP_COLUMNS, ObservationLayout, Rollout, RolloutColumn, SchemeInfo, SchemeParts
from otagym.schemes.receive_scaling.scenario import PRESETS, TASK_SETTINGS, ReceiveScalingScenario, get_scenario
from otagym.schemes.receive_scaling.tasks import TASKS

#: Each public name by the module it lives in: imported on first use (:func:`otagym._exports.lazy_exports`).
_EXPORTS = {
    "scenario": ("ReceiveScalingScenario", "Scenario", "PRESETS", "get_scenario", "dbm_to_w", "w_to_dbm",
                 "TASK_SETTINGS"),
    "model": ("ReceiveScalingModel",),
    "formulas": ("ModelArrays", "X_FLOOR_RATIO"),
    "solver": ("minimize_round", "solve_increasing"),
    "actions": ("ActionType", "RewardMode", "BUDGET_ACTIONS", "UNIT_ACTIONS", "ACTION_CODES", "ActionSettings",
                "normalized_x", "spend_cost", "budget_action_cost", "decode_actions", "constrained"),
    "observation": ("OBS_BOUND", "LAYOUT_VERSION", "ObservationOffsets"),
    "core": ("ReceiveScalingCore", "sample_realisation"),
}

__all__ = ["SCHEME", *(name for names in _EXPORTS.values() for name in names), "observation"]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=("observation",))


def _parts() -> SchemeParts:
    from otagym.schemes.receive_scaling import actions, core, observation
    return SchemeParts(core.ReceiveScalingCore, core.sample_realisation, constrained=actions.constrained,
                       observation_layout=ObservationLayout(observation.LAYOUT_VERSION, observation.entry_names),
                       action_semantics=actions.action_semantics)


#: The scheme's registry entry (:data:`otagym.schemes.SCHEMES`).
SCHEME = SchemeInfo("receive_scaling", ReceiveScalingScenario, get_scenario, "paper-mnist", PRESETS,
                    task_settings=TASK_SETTINGS, tasks=TASKS, action_key="x",
                    info_keys=("x", "receive_scaling", "leakage", "convergence_cost", "convergence_cost_mean", "cost",
                               "nu"),
                    rollout=Rollout("EqualAlloc: spend action a = 0, c_t = nu every round", {"action_type": "spend"},
                                    0.0, (RolloutColumn("h_min^2", "h_min2", ".3e"), RolloutColumn("x", "x", ".3e"),
                                          RolloutColumn("sigma", "noise_multiplier", ".3f"),
                                          *RDP_COLUMNS,
                                          RolloutColumn("leakage", "leakage", ".3e"),
                                          RolloutColumn("c_t", "convergence_cost", ".4g"))),
                    # the action semantics (actions.ACTION_KEYS): every formulation is scored by its leakage and cost
                    action_args=frozenset({"reward_mode", "action_type", "x_min_ratio", "budget_multiplier_max",
                                           "price_decades", "price_buffer_sd", "budget_floor"}),
                    parts=_parts)
