"""What a scheme's ``otagym compare`` is: each scheme that has one declares it in its baselines package, as the
``COMPARISON`` of ``baselines/<scheme>/command.py``, and the command line finds it by the scheme's name
(:func:`scheme_comparisons`). A declaration is light (names, help, defaults): ``otagym compare --help`` reads it
without importing the computations, which its functions import when they run.

A comparison is one of two kinds. A sweep's (``sweep_config``): the command runs the sweep that ``sweep_config``
makes of the options (its cells kept and resumed, :mod:`otagym.cli.sweep`) and ``finish`` turns the finished cells
into the table and the files. A direct one (``run``): the command calls it once and it writes its files.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from otagym.schemes import SCHEMES

__all__ = ["SchemeComparison", "ComparisonOutput", "scheme_comparisons"]


@dataclass(frozen=True)
class ComparisonOutput:
    """What a comparison made: the table to print and the files it wrote."""

    table: str
    paths: Sequence[Path]


@dataclass(frozen=True)
class SchemeComparison:
    """A scheme's ``otagym compare``: its line of ``--scheme`` help, what its ``--policies`` takes, the options only
    it reads (with their defaults; another scheme refuses them when given), and what it runs (one of ``sweep_config``
    with ``finish``, or ``run``: see the module)."""

    help: str
    policy_help: str
    options: Mapping[str, Any] = field(default_factory=dict)
    #: The policy names ``--policies`` may give; None: the sweep's analytic policies or NAME:PATH (its plan checks).
    policies: tuple[str, ...] | None = None
    #: ``--seeds``'s default: realisations (or episodes) enough for a stable line at the command's speed.
    seeds: int = 3
    #: The stem of its output files in ``--out`` (``<stem>.json``, ``.csv``, ``.png``).
    stem: str = "compare"
    #: A sweep's comparison: the sweep config (:mod:`otagym.cli.sweep`) of the parsed options.
    sweep_config: Callable[[argparse.Namespace], dict[str, Any]] | None = None
    #: A sweep's comparison: ``(cells' results, the first cell's scenario, options, out folder, extra JSON fields)``
    #: to the table and the files written.
    finish: Callable[[list[dict[str, Any]], Any, argparse.Namespace, Path, dict[str, Any]],
                     ComparisonOutput] | None = None
    #: A direct comparison: ``(options, out folder)`` to the table and the files written.
    run: Callable[[argparse.Namespace, Path], ComparisonOutput] | None = None

    def __post_init__(self) -> None:
        if (self.sweep_config is None) == (self.run is None) or (self.sweep_config is None) != (self.finish is None):
            raise ValueError("a comparison is a sweep's (sweep_config and finish) or a direct one (run), not both")


@functools.lru_cache(maxsize=1)
def scheme_comparisons() -> dict[str, SchemeComparison]:
    """The comparison of every registered scheme that has one (``baselines/<scheme>/command.py``), in the
    registry's order."""
    found = {}
    for name in SCHEMES:
        module = f"baselines.{name}.command"
        if importlib.util.find_spec(f"baselines.{name}") is not None and importlib.util.find_spec(module) is not None:
            found[name] = importlib.import_module(module).COMPARISON
    return found
