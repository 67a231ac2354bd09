"""argparse value types that refuse out-of-range input in argparse style (one line naming the option, exit code 2)."""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from pathlib import Path

__all__ = ["positive_int", "positive_float", "correlation", "writable_dir"]


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0; got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0; got {text!r}")
    return value


def correlation(text: str) -> float:
    """A number in [0, 1) (the Gauss-Markov coefficient)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1); got {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1); got {text!r}")
    return value


def writable_dir(text: str) -> str:
    """A folder that exists or can be made, and that a file can be written into (checked now, before any work)."""
    path = Path(text)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as err:
        raise argparse.ArgumentTypeError(f"cannot write into {text!r}: {err.strerror or err}") from None
    return os.fspath(path)
