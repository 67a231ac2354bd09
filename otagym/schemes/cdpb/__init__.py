"""Model B: client-driven power balancing (CDPB), one package; the paper: Kim, Seo & Choi, *Privacy-Enhanced
Over-the-Air Federated Learning via Client-Driven Power Balancing* (arXiv:2410.05907, 2024).

* :mod:`~otagym.schemes.cdpb.scenario`: the frozen Scenario, its presets and their getter, and its task's settings.
* :mod:`~otagym.schemes.cdpb.formulas`: the pure, batched formulas, with the paper's equation numbers.
* :mod:`~otagym.schemes.cdpb.actions`: the action types (named constants) and the one decoder,
  :func:`~otagym.schemes.cdpb.actions.action_to_rho`, that the core and the policies use.
* :mod:`~otagym.schemes.cdpb.observation`: the observation's entries by name, in order, and its
  ``LAYOUT_VERSION``; the core writes through it.
* :mod:`~otagym.schemes.cdpb.core`: the batched core :class:`CDPBCore` (N episodes as arrays) and
  :func:`~otagym.schemes.cdpb.core.sample_realisation`.
* :mod:`~otagym.schemes.cdpb.devices`: each device an agent (its observation, action, reward and cost) over that
  core, :class:`~otagym.schemes.cdpb.devices.CDPBDevices`; :mod:`otagym.multiagent` is its PettingZoo shell.

The registry (:data:`otagym.schemes.SCHEMES`) finds the scheme's parts here.
"""

from otagym._exports import lazy_exports
from otagym.schemes.info import RDP_COLUMNS, ObservationLayout, Rollout, RolloutColumn, SchemeInfo, SchemeParts
from otagym.schemes.cdpb.scenario import CDPB_PRESETS, TASK_SETTINGS, CDPBScenario, get_cdpb_scenario
from otagym.schemes.cdpb.tasks import DEVICE_TASKS, TASKS

#: Each public name by the module it lives in: imported on first use (:func:`otagym._exports.lazy_exports`).
_EXPORTS = {
    "scenario": ("CDPBScenario", "CDPB_PRESETS", "get_cdpb_scenario", "Strategy", "Accounting", "Adjacency",
                 "TASK_SETTINGS"),
    "formulas": ("participation_probability", "expected_num_reliable", "expected_received_noise",
                 "expected_noise_var", "sum_of_others", "RoundPowers", "round_powers", "convergence_term",
                 "convergence_error", "rdp_theorem1", "noise_multiplier", "round_rdp", "aggregate_over_the_air",
                 "expected_round_terms", "utility"),
    "actions": ("RhoActionType", "NORMALIZED", "RHO", "ACTION_TYPES", "RHO_FLOOR_RATIO", "action_to_rho"),
    "core": ("CDPBCore", "sample_realisation"),
}

__all__ = ["SCHEME", *(name for names in _EXPORTS.values() for name in names), "observation", "devices"]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=("observation", "devices"))


def _parts() -> SchemeParts:
    from otagym.schemes.cdpb import core, devices, observation
    return SchemeParts(core.CDPBCore, core.sample_realisation,
                       observation_layout=ObservationLayout(observation.LAYOUT_VERSION, observation.entry_names),
                       devices=devices.CDPBDevices)


#: The scheme's registry entry (:data:`otagym.schemes.SCHEMES`).
SCHEME = SchemeInfo("cdpb", CDPBScenario, get_cdpb_scenario, "paper-cdpb", CDPB_PRESETS, task_settings=TASK_SETTINGS,
                    tasks=TASKS, action_key="rho", info_keys=("rho", "cost"), device_tasks=DEVICE_TASKS,
                    rollout=Rollout("the normalized action a = 0 every round (rho in the middle of [0.001, 1])", {}, 0.0,
                                    (RolloutColumn("rho", "rho", ".4f"), RolloutColumn("reliable", "num_reliable", ".0f"),
                                     RolloutColumn("noise var", "noise_var", ".3e"),
                                     *RDP_COLUMNS,
                                     RolloutColumn("utility", "utility", ".4g"), RolloutColumn("cost", "cost", ".4g"))),
                    parts=_parts)
