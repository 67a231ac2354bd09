"""Deprecated: the ``experiments`` package is :mod:`otagym.cli` (this alias is removed in the next release)."""

import warnings

from otagym.cli import main

__all__ = ["main"]

warnings.warn("experiments is deprecated; import otagym.cli instead", DeprecationWarning, stacklevel=2)
