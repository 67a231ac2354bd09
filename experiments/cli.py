"""Deprecated: ``experiments.cli`` is :mod:`otagym.cli.commands` (this alias is removed in the next release)."""

import warnings

from otagym.cli.commands import *  # noqa: F403 - the old module's public names
from otagym.cli.commands import __all__  # noqa: F401

warnings.warn("experiments.cli is deprecated; import otagym.cli.commands instead", DeprecationWarning, stacklevel=2)

if __name__ == "__main__":
    import sys

    sys.exit(main())  # noqa: F405
