"""Where the research scripts ship their models: ``--zoo`` (this checkout's ``agents/zoo``, :data:`ZOO`) or
``--zoo DIR``, never over a model already there unless ``--force`` (checked before any training or search)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

#: The zoo of shipped agents in this checkout, ``--zoo``'s folder when it names none.
ZOO = Path(__file__).resolve().parent.parent / "agents" / "zoo"


def add_zoo_arguments(parser: argparse.ArgumentParser, layout: str) -> None:
    """``--zoo [DIR]`` (``args.zoo``: None, or the zoo's folder; ``layout`` is the path a model takes under it) and
    ``--force``."""
    parser.add_argument("--zoo", nargs="?", type=Path, const=ZOO, default=None, metavar="DIR",
                        help=f"ship the selected models to DIR/{layout}/ (DIR: default agents/zoo of this checkout)")
    parser.add_argument("--force", action="store_true",
                        help="with --zoo: replace the models already there (else refused before any work)")


def refuse_shipped(parser: argparse.ArgumentParser, targets: Iterable[Path], force: bool) -> None:
    """Stop with ``parser.error`` when a target folder already holds a model (``model.zip``, or a device team's
    ``model.pt``) and ``force`` is not given."""
    held = [str(model) for target in targets for model in sorted(target.glob("model.*"))]
    if held and not force:
        parser.error(f"the zoo already holds {', '.join(held)}: give --force to replace, or another --zoo DIR")
