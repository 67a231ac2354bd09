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

from typing import Any

from otagym._moved import renamed

from otagym.schemes.cdpb import devices, observation
from otagym.schemes.cdpb.actions import (RhoActionType, NORMALIZED, RHO, ACTION_TYPES, RHO_FLOOR_RATIO, action_to_rho)
from otagym.schemes.cdpb.core import CDPBCore, sample_realisation
from otagym.schemes.cdpb.formulas import (participation_probability, expected_num_reliable, expected_received_noise,
                                          expected_noise_var, sum_of_others, RoundPowers, round_powers,
                                          convergence_term, convergence_error, rdp_theorem1, noise_multiplier,
                                          round_rdp, aggregate_over_the_air, expected_round_terms, utility)
from otagym.schemes.cdpb.scenario import (CDPBScenario, CDPB_PRESETS, get_cdpb_scenario, Strategy, Accounting,
                                          Adjacency, TASK_SETTINGS)

__all__ = [
    "CDPBScenario", "CDPB_PRESETS", "get_cdpb_scenario", "Strategy", "Accounting", "Adjacency", "TASK_SETTINGS",
    "participation_probability", "expected_num_reliable", "expected_received_noise", "expected_noise_var",
    "sum_of_others", "RoundPowers", "round_powers", "convergence_term", "convergence_error", "rdp_theorem1",
    "noise_multiplier", "round_rdp", "aggregate_over_the_air", "expected_round_terms", "utility", "RhoActionType",
    "NORMALIZED", "RHO", "ACTION_TYPES", "RHO_FLOOR_RATIO", "action_to_rho", "CDPBCore", "sample_realisation",
    "observation", "devices",
]


def __getattr__(name: str) -> Any:
    return renamed(__name__, name)
