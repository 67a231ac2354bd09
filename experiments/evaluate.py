"""Deprecated: ``experiments.evaluate`` is :mod:`otagym.cli.evaluate` (this alias is removed in the next release)."""

import warnings

from otagym.cli.evaluate import *  # noqa: F403 - the old module's public names
from otagym.cli.evaluate import __all__  # noqa: F401

warnings.warn("experiments.evaluate is deprecated; import otagym.cli.evaluate instead", DeprecationWarning,
              stacklevel=2)
