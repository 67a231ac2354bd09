"""``otagym compare`` with receive scaling: the AdaScale paper's matched-nu comparison, a sweep named ``compare``
(its cells are :func:`~baselines.receive_scaling.compare.evaluate_cell`'s) with a fixed table and plot on top
(:func:`~baselines.receive_scaling.compare.summarize`, ``format_table``, ``save``). Declared here, light: the
computations are imported when the command runs (:mod:`baselines.comparison`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from baselines.comparison import ComparisonOutput, SchemeComparison
from otagym.fidelity import SUBSET_KEYS
from otagym.schemes import SCHEMES

__all__ = ["COMPARISON", "POLICY_NAMES", "DEFAULT_POLICIES"]

#: The analytic policies ``--policies`` may name: :data:`baselines.receive_scaling.compare.POLICIES`' (a test checks
#: that they are the same names), here so that ``--help`` needs no computation.
POLICY_NAMES = ("OfflineOptimal", "AdaScale", "EstimFuture", "EqualAlloc", "LiuSimeone", "LyapunovDPBudget",
                "LyapunovDPP", "FullPower", "BestConstant", "AdaScaleTrained", "OnlineOptimal")
#: The policies compared when ``--policies`` is not given.
DEFAULT_POLICIES = ("OfflineOptimal", "AdaScale", "EstimFuture", "EqualAlloc", "LiuSimeone", "LyapunovDPBudget",
                    "LyapunovDPP")


def sweep_config(args: argparse.Namespace) -> dict[str, Any]:
    """The sweep that ``otagym compare`` runs, from its options."""
    scenario: dict[str, Any] = {"preset": args.scenario or SCHEMES["receive_scaling"].default_preset}
    if getattr(args, "fading", None):
        scenario.update(fading=args.fading, correlation=args.correlation or 0.0,
                        coherence_rounds=args.coherence_rounds or 1)
    config = {"name": "compare", "scheme": "receive_scaling", "scenarios": [scenario],
              "policies": list(args.policies or DEFAULT_POLICIES), "nu": list(args.nu or (0.01, 0.04, 0.16)),
              "seeds": {"start": args.seed_start, "count": args.seeds}, "fidelity": args.fidelity}
    if args.rounds:
        config["rounds"] = args.rounds
    if args.accountant != "rdp":
        config["accountant"] = args.accountant
    if args.fidelity == "train":
        config.update(dataset=args.dataset, data_dir=args.data_dir)
        config.update({k: getattr(args, k) for k in SUBSET_KEYS if getattr(args, k) is not None})
    return config


def finish(cells: list[dict[str, Any]], scenario: Any, args: argparse.Namespace, out: Path,
           extra: dict[str, Any]) -> ComparisonOutput:
    """The table, ``compare.csv``/``.json``/``.png`` of the finished cells (under the training fidelity, on the
    scenario of its dataset)."""
    from baselines.receive_scaling.compare import format_table, save, summarize
    from baselines.receive_scaling.evaluation import training_scenario

    rows = summarize(cells)
    if args.fidelity == "train":
        scenario = training_scenario(scenario, args.dataset, args.data_dir)
    return ComparisonOutput(format_table(rows, scenario), save(rows, scenario, out, extra=extra))


COMPARISON = SchemeComparison(
    help="matched-nu comparison (AdaScale paper)",
    policy_help=(f"analytic {sorted(POLICY_NAMES)} (default: {' '.join(DEFAULT_POLICIES)}) or a trained agent "
                 "NAME:PATH/TO/model.zip (e.g. PPO:runs/ppo/model.zip)"),
    options={"nu": None, "rounds": None, "fading": None, "correlation": None, "coherence_rounds": None,
             "seed_start": 0, "fidelity": "analytic", "accountant": "rdp", "dataset": "digits", "data_dir": None,
             "train_samples": None, "eval_samples": None, "workers": None, "ray": None},
    seeds=16, sweep_config=sweep_config, finish=finish)
