"""``otagym compare``: the command line of the schemes' comparisons, over their computations in :mod:`baselines`.

``--scheme`` offers the registered schemes (:data:`otagym.schemes.SCHEMES`) whose baselines package declares a
comparison (:func:`baselines.comparison.scheme_comparisons`: model A's matched-nu comparison, CDPB's paper
comparison); ``--scenario`` offers their presets. An option that only another scheme reads is refused, argparse
style. The parser reads the declarations only; a comparison's computations load when it runs.

A sweep's comparison (model A's) is a sweep (:mod:`otagym.cli.sweep`) named ``compare`` with a fixed table and plot
on top: its cells are kept in ``OUT/compare/cells/`` (so a rerun resumes, and ``--workers``/``--ray`` run them in
parallel) and ``compare.csv``/``.json``/``.png`` are rebuilt from them. Every output is written atomically, the JSON last with the
hashes of the others (one generation: :func:`baselines.report.mismatched_outputs` finds files of another run); a run
killed while writing them is finished by the same command (``OUT/compare/sweep.json`` names its cells). A
comparison of another configuration in the same folder is replaced when its cells are all stored (its command
rebuilds it from them in seconds); one that cannot be rebuilt (its records gone, files of two runs mixed, a cdpb
comparison) is not replaced without ``--overwrite``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from baselines.comparison import SchemeComparison, scheme_comparisons
from baselines.report import mismatched_outputs
from otagym.cli import sweep
from otagym.cli.sweep.cells import scenario_of
from otagym.cli.argtypes import correlation, field_type, from_spec, non_negative_int, writable_dir
from otagym._io import remove_stale_temporaries
from otagym.accounting import ACCOUNTANTS
from otagym.channel import FadingFields
from otagym.datasets import DATA_PACKAGES, DATASET_NAMES, FASHION_MNIST_DIR
from otagym.fidelity import TRAINING_ARGS
from otagym.schemes import DEFAULT_SCHEME, SCHEMES
from otagym.tasks import EVALUATION_SEEDS

__all__ = ["add_compare_parser"]


def _error(message: str) -> None:
    """Stop before any work with one line on stderr and exit code 2, as argparse does."""
    print(f"otagym compare: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _rebuildable(out: Path, stem: str) -> int | None:
    """The number of cells of the earlier ``<stem>`` comparison in ``out`` when replacing its outputs loses nothing:
    its JSON is readable and of one generation with its CSV and plot, and every one of its cells has a finished record
    in ``OUT/compare/cells/`` (its command rebuilds its outputs from them). None otherwise."""
    try:
        keys = json.loads((out / f"{stem}.json").read_text()).get("cells")
        if not isinstance(keys, list) or not keys or mismatched_outputs(out / f"{stem}.json"):
            return None
    except (OSError, ValueError, AttributeError):
        return None
    found = sweep.read_records(out / "compare", keys).valid
    return len(keys) if all(k in found and found[k]["status"] == "ok" for k in keys) else None


def _latest_run_keys(sweep_dir: Path) -> list[str] | None:
    """The cell keys of the latest run of the sweep in ``sweep_dir``, as its ``sweep.json`` records them (None when it
    is missing, unreadable or written before the keys were recorded)."""
    try:
        keys = json.loads((sweep_dir / "sweep.json").read_text()).get("keys")
    except (OSError, ValueError, AttributeError):
        return None
    return keys if isinstance(keys, list) else None


def _refuse_to_overwrite(out: Path, stem: str, keys: list[str] | None, overwrite: bool) -> bool:
    """Whether ``out`` holds an earlier ``<stem>`` comparison of the same cells: its JSON names them, or its outputs
    are torn (a run killed while writing them) and the latest run of ``OUT/compare`` had them (this command's own
    run, which a rerun finishes). An earlier comparison of another configuration is replaced when its cells are kept
    (``keys`` given and :func:`_rebuildable`: rerunning its command rebuilds it, so nothing is lost) or with
    ``overwrite``; otherwise this exits (code 2) before any work."""
    if out.is_dir():
        remove_stale_temporaries(out)  # what runs killed mid-write left
    earlier = [out / f"{stem}.{ext}" for ext in ("json", "csv", "png") if (out / f"{stem}.{ext}").exists()]
    if not earlier:
        return False
    try:
        same = keys is not None and json.loads((out / f"{stem}.json").read_text()).get("cells") == keys
        mixed = mismatched_outputs(out / f"{stem}.json")
    except (OSError, ValueError, AttributeError):
        same, mixed, torn = False, [], True
    else:
        torn = bool(mixed)
    if torn and not same and keys is not None:  # not one generation: a run was killed while writing them
        same = _latest_run_keys(out / "compare") == keys
    if same or overwrite:
        return same
    kept = _rebuildable(out, stem) if keys is not None else None
    if kept is not None:
        print(f"replacing the comparison of another configuration in {out}: its {kept} cells stay in "
              f"{out / 'compare' / 'cells'} (rerun its command to rebuild its table and plot from them)")
        return False
    _error(f"{out} already holds an earlier comparison ({', '.join(p.name for p in earlier)}) of another "
           "configuration" + (f" (its {', '.join(mixed)} are of yet another run)" if mixed else "")
           + "; pass --overwrite to replace it, or choose another --out")
    return False


def _run_direct(comparison: SchemeComparison, args: argparse.Namespace) -> int:
    out = Path(args.out)
    _refuse_to_overwrite(out, comparison.stem, None, args.overwrite)
    start = time.perf_counter()
    made = comparison.run(args, out)
    print(made.table)
    print(f"wrote {', '.join(str(p) for p in made.paths)} in {time.perf_counter() - start:.1f} s")
    return 0


#: The options behind each field of a comparison's sweep config (to name them in errors).
_CONFIG_OPTIONS = {"policies": "--policies", "nu": "--nu", "seeds": "--seeds/--seed-start", "rounds": "--rounds",
                   "scenarios": "--scenario/--fading", "dataset": "--dataset", "data_dir": "--data-dir",
                   "fidelity": "--fidelity", "accountant": "--accountant", "train_samples": "--train-samples",
                   "eval_samples": "--eval-samples"}


def _config_error(err: sweep.ConfigError) -> str:
    """A sweep config error as the command line's: ``argument --policies: policies[0] must be ...``."""
    field = str(err).split(" ", 1)[0].split("[", 1)[0].split(".", 1)[0].rstrip(":")
    return (f"argument {_CONFIG_OPTIONS[field]}: " if field in _CONFIG_OPTIONS else "") + str(err)


def _run_sweep(comparison: SchemeComparison, args: argparse.Namespace) -> int:
    try:
        p = sweep.plan(comparison.sweep_config(args))
    except sweep.ConfigError as err:
        _error(_config_error(err))
    out = Path(args.out)
    if _refuse_to_overwrite(out, comparison.stem, list(p.keys), args.overwrite):
        print(f"{out} holds this comparison already: its finished cells are reused")
    outcome = sweep.run(p, out / "compare", workers=args.workers, ray=args.ray, progress=not args.no_progress)
    if not outcome.complete:
        print(sweep.report(outcome, out / "compare"))
        print(f"{comparison.stem}.csv/.json/.png are written once every cell is done; {out} is unchanged")
        return sweep.exit_code(outcome)
    cells = [{"policy": c["policy"]["name"], "nu": c["nu"], "seed": c["seed"], **outcome.records[k]["result"]}
             for k, c in zip(p.keys, p.cells)]
    made = comparison.finish(cells, scenario_of(p.cells[0]), args, out,
                             {"cells": list(p.keys), "sweep": str(out / "compare")})
    print(made.table)
    print(f"{outcome.computed} cells computed, {outcome.skipped} reused; wrote {', '.join(str(x) for x in made.paths)} "
          f"in {outcome.wall_s:.1f} s")
    return 0


def _schemes() -> list[str]:
    """The schemes ``--scheme`` offers: the registered ones with a comparison, in the registry's order."""
    return list(scheme_comparisons())


def _run(args: argparse.Namespace) -> int:
    comparison = scheme_comparisons()[args.scheme]
    if args.seeds is None:
        args.seeds = comparison.seeds
    return (_run_sweep if comparison.sweep_config is not None else _run_direct)(comparison, args)


def _check_scheme_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, argparse style, options that the chosen scheme would silently ignore."""
    comparisons = scheme_comparisons()
    own = comparisons[args.scheme].options
    unused = {k: v for name, c in comparisons.items() if name != args.scheme for k, v in c.options.items()
              if k not in own}
    given = [k for k, default in unused.items() if getattr(args, k) != default]
    if given:
        parser.error(f"--scheme {args.scheme} does not use " + ", ".join("--" + k.replace("_", "-") for k in given))
    if args.correlation is not None and args.fading != "gauss_markov":
        parser.error("--correlation needs --fading gauss_markov")
    if args.coherence_rounds is not None and args.fading != "block":
        parser.error("--coherence-rounds needs --fading block")
    if args.fidelity != "train" and (args.dataset != "digits" or args.data_dir is not None
                                     or args.train_samples is not None or args.eval_samples is not None):
        parser.error("--dataset, --data-dir, --train-samples and --eval-samples need --fidelity train")
    if args.dataset not in DATA_PACKAGES and args.dataset != "digits" and args.data_dir is None:
        parser.error(f"--dataset {args.dataset} needs --data-dir (the folder of its files; nothing is downloaded)")
    presets = sorted(SCHEMES[args.scheme].presets)
    if args.scenario is not None and args.scenario not in presets:
        parser.error(f"argument --scenario: {args.scenario!r} is not a preset of --scheme {args.scheme}; "
                     f"choose from {presets}")
    if own_policies := comparisons[args.scheme].policies:
        unknown = [name for name in args.policies or () if name not in own_policies]
        if unknown:
            parser.error(f"argument --policies: --scheme {args.scheme} plays {sorted(own_policies)}; got {unknown}")
    sweep.check_ray(parser, args)


def add_compare_parser(sub: argparse._SubParsersAction, help: str) -> None:
    comparisons = scheme_comparisons()
    schemes = list(comparisons)
    default = DEFAULT_SCHEME
    defaults = [SCHEMES[n].default_preset + ("" if n == default else f" with --scheme {n}") for n in schemes]
    p = sub.add_parser("compare", help=help,
                       description="Play policies on the same channel realisations and compare them: a table (its "
                       "columns are explained below it), compare.csv, compare.json and compare.png in --out. With "
                       "model A (receive_scaling), every policy is calibrated to the same convergence budget nu, and "
                       "each realisation is scored against OfflineOptimal on the same channels.")
    p.add_argument("--scheme", default=default, choices=schemes,
                   help="; ".join(f"{name}: {c.help}" for name, c in comparisons.items()))
    p.add_argument("--scenario", default=None,
                   choices=[preset for name in schemes for preset in sorted(SCHEMES[name].presets)],
                   help="the scheme's preset (default: " + ", or ".join(defaults) + ")")
    scenario_type = SCHEMES[default].scenario_type
    p.add_argument("--nu", type=field_type(scenario_type, "nu"), nargs="+", help="nu values (default: 0.01 0.04 0.16)")
    p.add_argument("--seeds", type=from_spec(sweep.SEED_COUNT), default=None,
                   help="channel realisations (seeds S..S+n-1; episodes for cdpb); default: "
                   + ", ".join(f"{c.seeds} ({name})" for name, c in comparisons.items()))
    p.add_argument("--seed-start", type=non_negative_int, default=0,
                   help=f"S, the first realisation seed (trained agents: held-out seeds from {EVALUATION_SEEDS[0]}, "
                   "as the benchmark's evaluation set)")
    p.add_argument("--rounds", type=field_type(scenario_type, "num_rounds"), default=None,
                   help="T (default: the scenario's)")
    p.add_argument("--fading", choices=["iid", "block", "gauss_markov"], default=None,
                   help="the fading (default: the scenario's, iid)")
    p.add_argument("--correlation", type=correlation, default=None,
                   help="Gauss-Markov correlation with --fading gauss_markov (default: 0)")
    p.add_argument("--coherence-rounds", type=field_type(FadingFields, "coherence_rounds"), default=None,
                   help="rounds per fading block with --fading block (default: 1)")
    p.add_argument("--policies", nargs="+", default=None,
                   help="; ".join(f"{name}: {c.policy_help}" for name, c in comparisons.items()))
    p.add_argument("--accounting", choices=["sgm", "theorem1"], default=None,
                   help="cdpb: privacy accounting of the planner and the plot (default: the scenario's, sgm)")
    p.add_argument("--accountant", choices=list(ACCOUNTANTS), default="rdp",
                   help="pld: also report each policy's eps from the devices' privacy loss distributions "
                        "(an upper bound, tighter than the RDP ledger's) as the eps PLD column beside "
                        "eps (receive scaling only)")
    p.add_argument("--fidelity", choices=["analytic", "train"], default="analytic",
                   help="train: also train a real model under each policy's noise and report test accuracy "
                        "(digits: about 0.1 s per env and round)")
    p.add_argument("--dataset", choices=list(DATASET_NAMES), default="digits",
                   help="with --fidelity train: digits (embedded, DigitsCNN), mnist or fashion-mnist (the paper's "
                        "CNN) or cifar10 (CifarResNet), read from their standard files in --data-dir; fashion-mnist "
                        "needs no --data-dir once `apt-get install dataset-fashion-mnist` has put it in "
                        f"{FASHION_MNIST_DIR}")
    p.add_argument("--data-dir", default=None,
                   help="folder of the (Fashion-)MNIST IDX files or the CIFAR-10 python batches")
    p.add_argument("--train-samples", type=from_spec(TRAINING_ARGS["train_samples"]), default=None,
                   help="with --fidelity train: keep N training samples, split over the devices (default: all; "
                   "fewer make a cell faster)")
    p.add_argument("--eval-samples", type=from_spec(TRAINING_ARGS["eval_samples"]), default=None,
                   help="with --fidelity train: measure each evaluation (test accuracy, f(w), ||grad f(w)||^2) on at "
                   "most N samples (default: all; on Fashion-MNIST most of a short cell's time is these evaluations)")
    p.add_argument("--out", type=writable_dir, default="results",
                   help="output folder; model A's cell records go to OUT/compare/cells/ (a rerun reuses them, and a "
                   "comparison of another configuration replaces the tables while its cells stay there)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the outputs of an earlier comparison in --out that cannot be rebuilt from stored "
                   "cells (its records are gone, or it is a cdpb comparison)")
    sweep.add_executor_options(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_run, check=_check_scheme_options)
