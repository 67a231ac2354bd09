"""Deprecated: ``experiments.argtypes`` is :mod:`otagym.cli.argtypes` (this alias is removed in the next release)."""

import warnings

from otagym.cli.argtypes import *  # noqa: F403 - the old module's public names
from otagym.cli.argtypes import __all__  # noqa: F401

warnings.warn("experiments.argtypes is deprecated; import otagym.cli.argtypes instead", DeprecationWarning,
              stacklevel=2)
