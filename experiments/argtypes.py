"""argparse value types that refuse out-of-range input in argparse style (one line naming the option, exit code 2)."""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from pathlib import Path

__all__ = ["positive_int", "positive_float", "correlation", "writable_dir"]


def _ranged(parse, accept, allowed: str):
    """An argparse type: ``parse(text)``, refused unless ``accept(value)``, with "must be <allowed>" as the error."""
    def convert(text: str):
        try:
            value = parse(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {text!r}")
        return value
    return convert


#: An integer >= 1.
positive_int = _ranged(int, lambda v: v >= 1, "an integer >= 1")
#: A finite number > 0.
positive_float = _ranged(float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0")
#: A number in [0, 1) (the Gauss-Markov coefficient).
correlation = _ranged(float, lambda v: 0.0 <= v < 1.0, "a number in [0, 1)")


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
