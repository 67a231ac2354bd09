"""Recompute the reference scores stored with the package (``otagym/data/reference_scores.json``).

For every benchmark task (:data:`otagym.tasks.TASKS`) and evaluation budget nu: the normalised score of each reference
policy on every realisation of the task's evaluation set (:attr:`otagym.tasks.Task.eval_seeds`) and the returns of the
task's two anchors there (what :func:`otagym.tasks.normalized_score` scores against); on the constrained tasks (all but
receive scaling's budget mode) also each reference's episode cost over the task's cost limit (``cost_ratios``).
Each reference is scored as its scheme scores its tasks
(:meth:`baselines.benchmark.SchemeBenchmark.reference_scores`; receive scaling: OfflineOptimal is 100). Tasks already
stored for this package version are kept unless ``--force`` (a reference added since is computed and added); the
file is written atomically after each task, so an interrupted run resumes.

    python -m benchmarks.reference_scores            # about 20 minutes on 2 cores for the six tasks
    python -m benchmarks.reference_scores --markdown # also print the README's task table
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from baselines.benchmark import aggregate, reference_record, references
from otagym import __version__
from otagym._io import write_json
from otagym.tasks import REFERENCE_SCORES_PATH, TASKS

def markdown(stored: dict[str, Any]) -> str:
    """The task table: each reference's IQM [95% CI] per task and budget (rliable, over the evaluation realisations)."""
    lines = ["| task | budget | reference | IQM [95% CI] |", "|---|---|---|---|"]
    for task_id, record in stored.items():
        for nu in record["nus"]:
            for name, per_nu in record["scores"].items():
                s = aggregate({name: np.array([per_nu[str(float(nu))]])}, reps=500)[name]
                lines.append(f"| `{task_id}` | {TASKS[task_id].budget} = {nu:g} | {name} | {s['iqm']:.2f} "
                             f"[{s['iqm_ci'][0]:.2f}, {s['iqm_ci'][1]:.2f}] |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    p.add_argument("--force", action="store_true", help="recompute tasks already stored for this version")
    p.add_argument("--markdown", action="store_true", help="print the task table of reference IQMs")
    args = p.parse_args(argv)
    stored = json.loads(REFERENCE_SCORES_PATH.read_text()) if REFERENCE_SCORES_PATH.is_file() else {}
    for task_id in args.tasks:
        start = time.perf_counter()
        kept = stored.get(task_id, {}) if not args.force and stored.get(task_id, {}).get("version") == __version__ \
            else {}
        missing = [name for name in references(task_id) if name not in kept.get("scores", {})]
        if kept and not missing:
            print(f"{task_id}: stored for otagym {__version__}, kept (--force recomputes it)")
            continue
        if kept:  # a reference added since: its rows only
            added = reference_record(task_id, names=missing)
            stored[task_id] = {**kept, **{key: {**kept[key], **added[key]} for key in ("scores", "cost_ratios")
                                          if key in added}}
        else:
            stored[task_id] = reference_record(task_id)
        write_json(REFERENCE_SCORES_PATH, stored)
        print(f"{task_id}: computed in {time.perf_counter() - start:.0f} s")
    if args.markdown:
        print(markdown({k: stored[k] for k in TASKS if k in stored}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
