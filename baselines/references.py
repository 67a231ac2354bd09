"""Deprecated: :mod:`baselines.receive_scaling.references` (a scheme's baselines are one package); this path goes in the
next release."""

import warnings

from baselines.receive_scaling.references import *  # noqa: F403
from baselines.receive_scaling.references import __all__  # noqa: F401

warnings.warn("baselines.references is deprecated; import from baselines.receive_scaling.references",
              DeprecationWarning, stacklevel=2)
