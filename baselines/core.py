"""Deprecated: :mod:`baselines.receive_scaling.core` (a scheme's baselines are one package); this path goes in the next
release."""

import warnings

from baselines.receive_scaling.core import *  # noqa: F403
from baselines.receive_scaling.core import __all__  # noqa: F401

warnings.warn("baselines.core is deprecated; import from baselines.receive_scaling.core", DeprecationWarning,
              stacklevel=2)
