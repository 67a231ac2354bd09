"""Deprecated: ``experiments.sweep`` is :mod:`otagym.cli.sweep` (this alias is removed in the next release)."""

import warnings

from otagym.cli.sweep import *  # noqa: F403 - the old module's public names
from otagym.cli.sweep import __all__  # noqa: F401

warnings.warn("experiments.sweep is deprecated; import otagym.cli.sweep instead", DeprecationWarning, stacklevel=2)
