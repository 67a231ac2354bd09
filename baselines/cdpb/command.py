"""``otagym compare`` with CDPB: the CDPB paper's comparison (Figs. 3 and 5), planned and rolled out by
:func:`~baselines.cdpb.compare.compare_cdpb`. Declared here, light: the computations are imported when the command
runs (:mod:`baselines.comparison`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from baselines.comparison import ComparisonOutput, SchemeComparison

__all__ = ["COMPARISON", "POLICY_NAMES", "DEFAULT_POLICIES"]

#: The policies ``--policies`` may name: :data:`baselines.cdpb.policies.CDPB_POLICIES`' (a test checks that they are
#: the same names), here so that ``--help`` needs no computation.
POLICY_NAMES = ("CDPB-n", "CDPB-i", "CDPB-mixed", "gamma-based", "hmin-based", "IS-based", "noise-free")
#: The policies compared when ``--policies`` is not given: all of them.
DEFAULT_POLICIES = POLICY_NAMES


def run(args: argparse.Namespace, out: Path) -> ComparisonOutput:
    """Plan and roll out the policies on ``args.seeds`` episodes; the table and ``compare_cdpb.csv``/``.json``/``.png``
    in ``out``."""
    from baselines.cdpb.compare import compare_cdpb, format_cdpb_table, save_cdpb
    from otagym.schemes import SCHEMES

    scenario = SCHEMES["cdpb"].scenario(args.scenario, **({"accounting": args.accounting} if args.accounting else {}))
    rows, curves = compare_cdpb(scenario, tuple(args.policies or DEFAULT_POLICIES), episodes=args.seeds,
                                progress=not args.no_progress)
    return ComparisonOutput(format_cdpb_table(rows, scenario), save_cdpb(rows, curves, scenario, out))


COMPARISON = SchemeComparison(help="CDPB paper (Figs. 3, 5)", policy_help=f"{sorted(POLICY_NAMES)} (default: all)",
                              options={"accounting": None}, policies=POLICY_NAMES, stem="compare_cdpb", run=run)
