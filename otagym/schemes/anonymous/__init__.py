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

from typing import Any

from otagym._moved import renamed
from otagym.schemes.anonymous import observation
from otagym.schemes.anonymous.actions import (SigmaActionType, NORMALIZED, SIGMA, ACTION_TYPES, action_to_sigma)
from otagym.schemes.anonymous.core import AnonymousCore, sample_realisation
from otagym.schemes.anonymous.formulas import (participation_from_threshold, threshold_for_participation,
                                               clip_gradients, per_device_noise_var, received_noise_var, over_the_air,
                                               inclusion_rate, sensitivity, noise_multiplier, device_level_rdp,
                                               round_rdp, rdp_theorem1, theorem1_conditions, rdp_to_dp_lemma2,
                                               gaussian_epsilon, advanced_composition, advanced_composition_curve,
                                               composed_epsilon, sample_batches, convergence_term, convergence_bound)
from otagym.schemes.anonymous.scenario import (AnonymousScenario, ANONYMOUS_PRESETS, get_anonymous_scenario,
                                               Accounting, TASK_SETTINGS)

__all__ = [
    "AnonymousScenario", "ANONYMOUS_PRESETS", "get_anonymous_scenario", "Accounting", "TASK_SETTINGS",
    "participation_from_threshold", "threshold_for_participation", "clip_gradients", "per_device_noise_var",
    "received_noise_var", "over_the_air", "inclusion_rate", "sensitivity", "noise_multiplier", "device_level_rdp",
    "round_rdp", "rdp_theorem1", "theorem1_conditions", "rdp_to_dp_lemma2", "gaussian_epsilon",
    "advanced_composition", "advanced_composition_curve", "composed_epsilon", "sample_batches", "convergence_term",
    "convergence_bound", "SigmaActionType", "NORMALIZED", "SIGMA", "ACTION_TYPES", "action_to_sigma",
    "AnonymousCore", "sample_realisation", "observation",
]


def __getattr__(name: str) -> Any:
    return renamed(__name__, name)
