"""``otagym sweep CONFIG.yaml``'s argparse: its parser (:func:`add_sweep_parser`), the executor options it shares with
``otagym compare`` (:func:`add_executor_options`, :func:`check_ray`) and the command itself."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from otagym.cli.argtypes import positive_int, writable_dir
from otagym.cli.sweep.config import ConfigError, load_config, plan
from otagym.cli.sweep.driver import exit_code, report, run

__all__ = ["add_executor_options", "check_ray", "add_sweep_parser"]


def add_executor_options(p: argparse.ArgumentParser) -> None:
    """``--workers N`` and ``--ray [ADDRESS]``, shared by ``sweep`` and ``compare``."""
    p.add_argument("--workers", type=positive_int, default=None,
                   help="run cells on N local processes (with --ray: the local Ray's num_cpus)")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run cells as Ray tasks: a local Ray (ray.init()) without ADDRESS, else the cluster at "
                        "ADDRESS ('auto' or 'ray://HOST:10001'); needs the ray extra")


def check_ray(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse ``--ray`` before any work when Ray is not installed, and ``--workers`` with a cluster address."""
    if args.ray is None:
        return
    try:
        import ray  # noqa: F401
    except ImportError:
        parser.error("--ray needs Ray, an optional extra: pip install -c constraints-rllib.txt -e '.[ray]'")
    if args.ray != "local" and args.workers is not None:
        parser.error("--workers sets the CPUs of a local Ray; with --ray ADDRESS the cluster has its own")


def _sweep(args: argparse.Namespace) -> int:
    """``otagym sweep``: plan the config (exit code 2 naming the bad field), run it, print the report."""
    try:
        p = plan({**load_config(args.config), **({"name": args.name} if args.name else {})})
    except ConfigError as err:
        print(f"otagym sweep: error: {err}", file=sys.stderr)
        return 2
    sweep_dir = Path(args.out) / p.name
    outcome = run(p, sweep_dir, workers=args.workers, ray=args.ray, progress=not args.no_progress)
    print(report(outcome, sweep_dir))
    return exit_code(outcome)


def add_sweep_parser(sub: argparse._SubParsersAction, help: str) -> None:
    """Add ``otagym sweep`` to the ``otagym`` parser's commands ``sub``."""
    p = sub.add_parser("sweep", help=help)
    p.add_argument("config", help="the sweep's YAML file (see examples/sweep_paper.yaml)")
    p.add_argument("--out", type=writable_dir, default="results",
                   help="results folder; the sweep writes OUT/NAME/ (cells/<key>.json, cells.csv, summary.csv)")
    p.add_argument("--name", default=None, help="override the config's name (the folder under --out)")
    add_executor_options(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_sweep, check=check_ray)
