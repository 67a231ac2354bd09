"""Deprecated: receive scaling's scenario and formulas moved to :mod:`otagym.schemes.receive_scaling`."""

import warnings

from otagym.schemes.receive_scaling import (BUDGET_ACTIONS, PRESETS, UNIT_ACTIONS, X_FLOOR_RATIO, ModelArrays,
                                            ReceiveScalingModel, Scenario, budget_action_cost, cost_slope_of_leakage,
                                            dbm_to_w, get_scenario, minimize_round, normalized_x, price_spend,
                                            reference_price, solve_increasing, spend_cost, w_to_dbm)

__all__ = ["Scenario", "PRESETS", "get_scenario", "dbm_to_w", "w_to_dbm", "ReceiveScalingModel", "ModelArrays",
           "normalized_x", "spend_cost", "minimize_round", "solve_increasing", "cost_slope_of_leakage", "price_spend",
           "reference_price", "budget_action_cost", "BUDGET_ACTIONS", "UNIT_ACTIONS", "X_FLOOR_RATIO"]

warnings.warn("otagym.receive_scaling is deprecated: import from otagym.schemes.receive_scaling", DeprecationWarning,
              stacklevel=2)
