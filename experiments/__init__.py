"""Deprecated: the ``experiments`` package is :mod:`otagym.cli`; it and its modules (``experiments.cli``,
``experiments.compare``, ...: :data:`otagym._moved.MOVED`) are removed in otagym 0.2.0."""

import warnings

from otagym import _moved
from otagym.cli import main

__all__ = ["main"]

warnings.warn(_moved.deprecation("experiments", "otagym.cli"), DeprecationWarning, stacklevel=2)
