"""Deprecated: :mod:`baselines.cdpb.compare` (a scheme's baselines are one package); this path goes in the next
release."""

import warnings

from baselines.cdpb.compare import *  # noqa: F403
from baselines.cdpb.compare import __all__  # noqa: F401

warnings.warn("baselines.cdpb_compare is deprecated; import from baselines.cdpb.compare", DeprecationWarning,
              stacklevel=2)
