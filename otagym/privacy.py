"""Deprecated: the accounting is the package :mod:`otagym.accounting`; import from there. This module re-exports its
names for one release and warns (``DeprecationWarning``) when imported."""

import warnings

from otagym.accounting import (DEFAULT_ORDERS, DP_ORDERS, OPACUS_ORDERS, ORDERS, RDPLedger, SGMCurve, rdp_sgm,
                               rdp_to_dp, tail_bound_budget, tail_bound_c_inverse, tail_bound_epsilon)
from otagym.accounting.curve import curve_derivatives as _curve_derivatives  # noqa: F401  (the old private names of
from otagym.accounting.curve import curve_log_a as _curve_log_a  # noqa: F401  the receive-scaling kernels' imports)

__all__ = [
    "DEFAULT_ORDERS",
    "OPACUS_ORDERS",
    "ORDERS",
    "DP_ORDERS",
    "SGMCurve",
    "RDPLedger",
    "rdp_sgm",
    "rdp_to_dp",
    "tail_bound_budget",
    "tail_bound_epsilon",
    "tail_bound_c_inverse",
]

warnings.warn("otagym.privacy is deprecated: import from otagym.accounting (the same names; the compiled curve "
              "functions as otagym.accounting.curve.curve_log_a and curve_derivatives)", DeprecationWarning,
              stacklevel=2)
