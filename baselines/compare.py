"""Deprecated: :mod:`baselines.receive_scaling.compare` (a scheme's baselines are one package); this path goes in the
next release."""

import warnings

from baselines.receive_scaling.compare import *  # noqa: F403
from baselines.receive_scaling.compare import __all__  # noqa: F401

warnings.warn("baselines.compare is deprecated; import from baselines.receive_scaling.compare", DeprecationWarning,
              stacklevel=2)
