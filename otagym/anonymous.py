"""Deprecated: anonymous OTA's scenario and formulas moved to :mod:`otagym.schemes.anonymous` (``scenario``,
``formulas``); this module re-exports its old names for one release."""

import warnings

from otagym.schemes.anonymous.formulas import (advanced_composition, advanced_composition_curve, clip_gradients,
                                               composed_epsilon, convergence_bound, convergence_term,
                                               device_level_rdp, gaussian_epsilon, inclusion_rate, noise_multiplier,
                                               over_the_air, participation_from_threshold, per_device_noise_var,
                                               rdp_theorem1, rdp_to_dp_lemma2, received_noise_var, round_rdp,
                                               sample_batches, sensitivity, theorem1_conditions,
                                               threshold_for_participation)
from otagym.schemes.anonymous.scenario import (ANONYMOUS_PRESETS, Accounting, AnonymousScenario,
                                               get_anonymous_scenario)

__all__ = [
    "AnonymousScenario", "ANONYMOUS_PRESETS", "get_anonymous_scenario", "Accounting",
    "participation_from_threshold", "threshold_for_participation", "clip_gradients", "per_device_noise_var",
    "received_noise_var", "over_the_air", "inclusion_rate", "sensitivity", "noise_multiplier", "device_level_rdp",
    "round_rdp", "rdp_theorem1", "theorem1_conditions", "rdp_to_dp_lemma2", "gaussian_epsilon",
    "advanced_composition", "advanced_composition_curve", "composed_epsilon", "sample_batches",
    "convergence_term", "convergence_bound",
]

warnings.warn("otagym.anonymous is deprecated: import from otagym.schemes.anonymous", DeprecationWarning,
              stacklevel=2)
