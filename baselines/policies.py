"""Deprecated: :mod:`baselines.receive_scaling.policies` (a scheme's baselines are one package); this path goes in the
next release."""

import warnings

from baselines.receive_scaling.policies import *  # noqa: F403
from baselines.receive_scaling.policies import __all__  # noqa: F401

warnings.warn("baselines.policies is deprecated; import from baselines.receive_scaling.policies", DeprecationWarning,
              stacklevel=2)
