"""Deprecated: CDPB's scenario and formulas moved to :mod:`otagym.schemes.cdpb` (``scenario``, ``formulas``,
``actions``); this module re-exports its old names for one release."""

import warnings

from otagym.schemes.cdpb.actions import RHO_FLOOR_RATIO
from otagym.schemes.cdpb.formulas import (RoundPowers, aggregate_over_the_air, convergence_error, convergence_term,
                                          expected_noise_var, expected_num_reliable, expected_received_noise,
                                          expected_round_terms, noise_multiplier, participation_probability,
                                          rdp_theorem1, round_powers, round_rdp, sum_of_others, utility)
from otagym.schemes.cdpb.scenario import (CDPB_PRESETS, Accounting, Adjacency, CDPBScenario, Strategy,
                                          get_cdpb_scenario)

__all__ = [
    "CDPBScenario", "CDPB_PRESETS", "get_cdpb_scenario", "Strategy", "Accounting", "Adjacency", "RHO_FLOOR_RATIO",
    "participation_probability", "expected_num_reliable", "expected_received_noise", "expected_noise_var",
    "RoundPowers", "round_powers", "convergence_term", "convergence_error", "rdp_theorem1", "noise_multiplier",
    "round_rdp", "aggregate_over_the_air", "expected_round_terms", "utility", "sum_of_others",
]

warnings.warn("otagym.cdpb is deprecated: import from otagym.schemes.cdpb", DeprecationWarning, stacklevel=2)
