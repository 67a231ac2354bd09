"""Deprecated: ``experiments.compare`` is :mod:`otagym.cli.compare` (this alias is removed in the next release)."""

import warnings

from otagym.cli.compare import *  # noqa: F403 - the old module's public names
from otagym.cli.compare import __all__  # noqa: F401

warnings.warn("experiments.compare is deprecated; import otagym.cli.compare instead", DeprecationWarning, stacklevel=2)
