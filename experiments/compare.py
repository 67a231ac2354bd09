"""``otagym compare``: the command line of the schemes' comparisons, over their computations in :mod:`baselines`.

``--scheme`` offers the schemes of the registry (:data:`otagym.schemes.SCHEMES`) that have a comparison here
(:data:`COMMANDS`): model A's matched-nu comparison and CDPB's (:func:`baselines.cdpb_compare.compare_cdpb`);
``--scenario`` offers their presets. An option that only another scheme reads is refused, argparse style.

Model A's comparison is a sweep (:mod:`experiments.sweep`) named ``compare`` with a fixed table and plot on top: its
cells are kept in ``OUT/compare/cells/`` (so a rerun resumes, and ``--workers``/``--ray`` run them in parallel) and
``compare.csv``/``.json``/``.png`` are rebuilt from them. Every output is written atomically, the JSON last with the
hashes of the others (one generation: :func:`baselines.report.mismatched_outputs` finds files of another run), and a
folder that holds an earlier comparison of another configuration is not overwritten without ``--overwrite``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from baselines.cdpb import CDPB_POLICIES
from baselines.cdpb_compare import DEFAULT_CDPB_POLICIES, compare_cdpb, format_cdpb_table, save_cdpb
from baselines.compare import DEFAULT_POLICIES, POLICIES, format_table, save, summarize
from baselines.evaluation import training_scenario
from baselines.report import mismatched_outputs
from experiments import sweep
from experiments.argtypes import correlation, positive_float, positive_int, writable_dir
from otagym._io import remove_stale_temporaries
from otagym.schemes import SCHEMES

__all__ = ["SchemeCommand", "COMMANDS", "add_compare_parser"]


def _error(message: str) -> None:
    """Stop before any work with one line on stderr and exit code 2, as argparse does."""
    print(f"otagym compare: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _refuse_to_overwrite(out: Path, stem: str, keys: list[str] | None, overwrite: bool) -> bool:
    """Whether ``out`` holds an earlier ``<stem>`` comparison of the same cells; exits (code 2) if it holds one of
    another configuration (or of unknown configuration) and ``overwrite`` is not set."""
    if out.is_dir():
        remove_stale_temporaries(out)  # what runs killed mid-write left
    earlier = [out / f"{stem}.{ext}" for ext in ("json", "csv", "png") if (out / f"{stem}.{ext}").exists()]
    if not earlier:
        return False
    try:
        same = keys is not None and json.loads((out / f"{stem}.json").read_text()).get("cells") == keys
        mixed = mismatched_outputs(out / f"{stem}.json")
    except (OSError, ValueError):
        same, mixed = False, []
    if same or overwrite:
        return same
    _error(f"{out} already holds an earlier comparison ({', '.join(p.name for p in earlier)}) of another "
           "configuration" + (f" (its {', '.join(mixed)} are of yet another run)" if mixed else "")
           + "; pass --overwrite to replace it, or choose another --out")
    return False


def _run_cdpb(args: argparse.Namespace) -> int:
    out = Path(args.out)
    _refuse_to_overwrite(out, "compare_cdpb", None, args.overwrite)
    scen = SCHEMES["cdpb"].scenario(args.scenario, **({"accounting": args.accounting} if args.accounting else {}))
    start = time.perf_counter()
    rows, curves = compare_cdpb(scen, tuple(args.policies or DEFAULT_CDPB_POLICIES), episodes=args.seeds,
                                progress=not args.no_progress)
    print(format_cdpb_table(rows, scen))
    paths = save_cdpb(rows, curves, scen, out)
    print(f"wrote {', '.join(str(p) for p in paths)} in {time.perf_counter() - start:.1f} s")
    return 0


def _sweep_config(args: argparse.Namespace) -> dict[str, Any]:
    """The sweep that model A's ``otagym compare`` runs, from its options."""
    scenario: dict[str, Any] = {"preset": args.scenario or SCHEMES["receive_scaling"].default_preset}
    if getattr(args, "fading", None):
        scenario.update(fading=args.fading, correlation=args.correlation or 0.0,
                        coherence_rounds=args.coherence_rounds or 1)
    config = {"name": "compare", "scheme": "receive_scaling", "scenarios": [scenario],
              "policies": list(args.policies or DEFAULT_POLICIES), "nu": list(args.nu or (0.01, 0.04, 0.16)),
              "seeds": {"start": args.seed_start, "count": args.seeds}, "fidelity": args.fidelity}
    if args.rounds:
        config["rounds"] = args.rounds
    if args.fidelity == "train":
        config.update(dataset=args.dataset, data_dir=args.data_dir)
    return config


def _run_receive_scaling(args: argparse.Namespace) -> int:
    try:
        p = sweep.plan(_sweep_config(args))
    except sweep.ConfigError as err:
        _error(str(err))
    out = Path(args.out)
    if _refuse_to_overwrite(out, "compare", list(p.keys), args.overwrite):
        print(f"{out} holds this comparison already: its finished cells are reused")
    outcome = sweep.run(p, out / "compare", workers=args.workers, ray=args.ray, progress=not args.no_progress)
    if not outcome.complete:
        print(sweep.report(outcome, out / "compare"))
        print(f"compare.csv/.json/.png are written once every cell is done; {out} is unchanged")
        return sweep.exit_code(outcome)
    cells = [{"policy": c["policy"]["name"], "nu": c["nu"], "seed": c["seed"], **outcome.records[k]["result"]}
             for k, c in zip(p.keys, p.cells)]
    rows = summarize(cells)
    first = p.cells[0]
    scen = sweep._scenario_of(first)
    if args.fidelity == "train":
        scen = training_scenario(scen, args.dataset, args.data_dir)
    print(format_table(rows, scen))
    paths = save(rows, scen, out, extra={"cells": list(p.keys), "sweep": str(out / "compare")})
    print(f"{outcome.computed} cells computed, {outcome.skipped} reused; wrote {', '.join(str(x) for x in paths)} "
          f"in {outcome.wall_s:.1f} s")
    return 0


@dataclass(frozen=True)
class SchemeCommand:
    """A scheme's ``otagym compare``: what it runs, its line of ``--scheme`` help, and the options only it reads
    (with their defaults; another scheme refuses them when given)."""

    run: Callable[[argparse.Namespace], int]
    help: str
    options: dict[str, Any] = field(default_factory=dict)


#: The comparison of every registered scheme that has one, in the registry's order.
COMMANDS: dict[str, SchemeCommand] = {
    "receive_scaling": SchemeCommand(
        _run_receive_scaling, "matched-nu comparison (AdaScale paper)",
        {"nu": None, "rounds": None, "fading": None, "correlation": None, "coherence_rounds": None, "seed_start": 0,
         "fidelity": "analytic",
         "dataset": "digits", "data_dir": None, "workers": None, "ray": None}),
    "cdpb": SchemeCommand(_run_cdpb, "CDPB paper (Figs. 3, 5)", {"accounting": None}),
}


def _schemes() -> list[str]:
    """The schemes ``--scheme`` offers: the registered ones with a comparison, in the registry's order."""
    return [name for name in SCHEMES if name in COMMANDS]


def _run(args: argparse.Namespace) -> int:
    return COMMANDS[args.scheme].run(args)


def _check_scheme_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, argparse style, options that the chosen scheme would silently ignore."""
    own = COMMANDS[args.scheme].options
    unused = {k: v for name in _schemes() if name != args.scheme for k, v in COMMANDS[name].options.items()
              if k not in own}
    given = [k for k, default in unused.items() if getattr(args, k) != default]
    if given:
        parser.error(f"--scheme {args.scheme} does not use " + ", ".join("--" + k.replace("_", "-") for k in given))
    if args.correlation is not None and args.fading != "gauss_markov":
        parser.error("--correlation needs --fading gauss_markov")
    if args.coherence_rounds is not None and args.fading != "block":
        parser.error("--coherence-rounds needs --fading block")
    if args.fidelity != "train" and (args.dataset != "digits" or args.data_dir is not None):
        parser.error("--dataset and --data-dir need --fidelity train")
    if args.dataset != "digits" and args.data_dir is None:
        parser.error(f"--dataset {args.dataset} needs --data-dir (the folder of its files; nothing is downloaded)")
    sweep.check_ray(parser, args)


def add_compare_parser(sub: argparse._SubParsersAction) -> None:
    schemes, default = _schemes(), "receive_scaling"
    defaults = [SCHEMES[n].default_preset + ("" if n == default else f" with --scheme {n}") for n in schemes]
    p = sub.add_parser("compare", help="compare the analytic policies (table, CSV/JSON, plot)")
    p.add_argument("--scheme", default=default, choices=schemes,
                   help="; ".join(f"{name}: {COMMANDS[name].help}" for name in schemes))
    p.add_argument("--scenario", default=None,
                   choices=[preset for name in schemes for preset in sorted(SCHEMES[name].presets)],
                   help="preset (default " + ", or ".join(defaults) + ")")
    p.add_argument("--nu", type=positive_float, nargs="+", help="nu values (default 0.01 0.04 0.16)")
    p.add_argument("--seeds", type=positive_int, default=3,
                   help="channel realisations (seeds S..S+n-1; episodes for cdpb)")
    p.add_argument("--seed-start", type=int, default=0, help="S, the first realisation seed (use held-out seeds "
                   "for trained agents)")
    p.add_argument("--rounds", type=positive_int, default=None, help="override T")
    p.add_argument("--fading", choices=["iid", "block", "gauss_markov"], default=None, help="override the fading")
    p.add_argument("--correlation", type=correlation, default=None, help="Gauss-Markov correlation with --fading")
    p.add_argument("--coherence-rounds", type=positive_int, default=None,
                   help="rounds per fading block with --fading block (default 1)")
    p.add_argument("--policies", nargs="+", default=None,
                   help=f"analytic: {sorted(POLICIES)} (cdpb: {sorted(CDPB_POLICIES)}); a trained agent: "
                        "NAME:PATH/TO/model.zip (e.g. PPO:runs/ppo/model.zip)")
    p.add_argument("--accounting", choices=["sgm", "theorem1"], default=None,
                   help="cdpb: privacy accounting of the planner and the plot (default: the scenario's, sgm)")
    p.add_argument("--fidelity", choices=["analytic", "train"], default="analytic",
                   help="train: also train a real model under each policy's noise and report test accuracy "
                        "(digits: about 0.1 s per env and round)")
    p.add_argument("--dataset", choices=["digits", "mnist", "cifar10"], default="digits",
                   help="with --fidelity train: digits (embedded, DigitsCNN), mnist (the paper's CNN) or cifar10 "
                        "(CifarResNet); the last two read their standard files from --data-dir")
    p.add_argument("--data-dir", default=None, help="folder of the MNIST IDX files or the CIFAR-10 python batches")
    p.add_argument("--out", type=writable_dir, default="results",
                   help="output folder; model A's cell records go to OUT/compare/cells/ (a rerun reuses them)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the outputs of an earlier comparison of another configuration in --out")
    sweep.add_executor_options(p)
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=_run, check=_check_scheme_options)
