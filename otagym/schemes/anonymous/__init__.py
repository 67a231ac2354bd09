"""Model C: anonymous over-the-air computation, one package; the paper: Hasırcıoğlu & Gündüz, *Private Wireless
Federated Learning with Anonymous Over-the-Air Computation* (IEEE ICASSP 2021).

* :mod:`~otagym.schemes.anonymous.scenario`: the frozen Scenario, its presets and their getter, and its task's settings.
* :mod:`~otagym.schemes.anonymous.formulas`: the pure, batched formulas, with the paper's equation numbers.
* :mod:`~otagym.schemes.anonymous.actions`: the action types (named constants) and the one decoder,
  :func:`~otagym.schemes.anonymous.actions.action_to_sigma`, that the core and the policies use.
* :mod:`~otagym.schemes.anonymous.observation`: the observation's entries by name, in order, and its
  ``LAYOUT_VERSION``; the core writes through it.
* :mod:`~otagym.schemes.anonymous.core`: the batched core :class:`AnonymousCore` (N episodes as arrays) and
  :func:`~otagym.schemes.anonymous.core.sample_realisation`.

The registry (:data:`otagym.schemes.SCHEMES`) finds the scheme's parts here.
"""

from otagym._exports import lazy_exports
from otagym.schemes.info import RDP_COLUMNS, ObservationLayout, Rollout, RolloutColumn, SchemeInfo, SchemeParts
from otagym.schemes.anonymous.scenario import (ANONYMOUS_PRESETS, TASK_SETTINGS, AnonymousScenario,
                                               get_anonymous_scenario)
from otagym.schemes.anonymous.tasks import TASKS

#: Each public name by the module it lives in: imported on first use (:func:`otagym._exports.lazy_exports`).
_EXPORTS = {
    "scenario": ("AnonymousScenario", "ANONYMOUS_PRESETS", "get_anonymous_scenario", "Accounting", "TASK_SETTINGS"),
    "formulas": ("participation_from_threshold", "threshold_for_participation", "clip_gradients",
                 "per_device_noise_var", "received_noise_var", "over_the_air", "inclusion_rate", "sensitivity",
                 "noise_multiplier", "device_level_rdp", "round_rdp", "rdp_theorem1", "theorem1_conditions",
                 "rdp_to_dp_lemma2", "gaussian_epsilon", "advanced_composition", "advanced_composition_curve",
                 "composed_epsilon", "sample_batches", "convergence_term", "convergence_bound"),
    "actions": ("SigmaActionType", "NORMALIZED", "SIGMA", "ACTION_TYPES", "action_to_sigma"),
    "core": ("AnonymousCore", "sample_realisation"),
}

__all__ = ["SCHEME", *(name for names in _EXPORTS.values() for name in names), "observation"]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=("observation",))


def _parts() -> SchemeParts:
    from otagym.schemes.anonymous import core, observation
    return SchemeParts(core.AnonymousCore, core.sample_realisation,
                       observation_layout=ObservationLayout(observation.LAYOUT_VERSION, observation.entry_names))


#: The scheme's registry entry (:data:`otagym.schemes.SCHEMES`).
SCHEME = SchemeInfo("anonymous", AnonymousScenario, get_anonymous_scenario, "paper-anonymous", ANONYMOUS_PRESETS,
                    task_settings=TASK_SETTINGS, tasks=TASKS, action_key="sigma", info_keys=("sigma", "cost"),
                    rollout=Rollout("the normalized action a = 0 every round (sigma in the middle of its log range)", {}, 0.0,
                                    (RolloutColumn("sigma", "sigma", ".3e"),
                                     RolloutColumn("participants", "participants", ".0f"),
                                     RolloutColumn("noise mult", "noise_multiplier", ".3f"),
                                     *RDP_COLUMNS,
                                     RolloutColumn("utility", "utility", ".4g"))),
                    parts=_parts)
