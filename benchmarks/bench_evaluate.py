"""How long ``otagym evaluate`` takes on a suite task with an MLP model, by part, and what the batching and the IQM by
one sort buy, as ratios against the previous ways timed in the same run, alternated:

    python -m benchmarks.bench_evaluate

Parts: the whole command (a subprocess, start-up included), importing the command, loading the model (torch and
SB3, to play only: no optimiser), the play (every budget's 128 realisations in one vector env, against one vector env per
budget) and the statistics (the policy's bootstrap alone with the IQM by one sort, against every reference's
bootstrap with rliable's scipy IQM). Goal: the whole command <= 10 s on a quiet 2-core machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TASK = "otagym/ReceiveScalingCMDP-v1"
MODEL = Path(__file__).resolve().parents[1] / "agents" / "zoo" / "ReceiveScalingCMDP-v1" / "budget_ppo" / "model.zip"


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _command() -> None:
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "-m", "otagym.cli", "evaluate", TASK, str(MODEL), "--out",
                        str(Path(out) / "r.json")], check=True, capture_output=True)


def _import() -> None:
    subprocess.run([sys.executable, "-c", "import otagym.cli.evaluate"], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    from rliable import library as rly
    from rliable import metrics

    from baselines.benchmark import aggregate, play_episodes, seed_references
    from otagym.cli.evaluate import resolve_policy
    from otagym.tasks import TASKS

    task = TASKS[TASK]
    seeds = task.eval_seeds
    load = _timed(lambda: resolve_policy(str(MODEL), TASK))
    _, (factory, overrides) = resolve_policy(str(MODEL), TASK)
    sys.modules["torch"].set_num_threads(1)  # as the command does (--torch-threads 1)
    refs = seed_references(TASK)
    table = {r: np.array([refs["scores"][r]["0.16"]]) for r in refs["scores"]}

    def batched() -> None:
        play_episodes(factory(), TASK, seeds * 3, np.repeat(task.eval_nus, len(seeds)), **overrides)

    def per_budget() -> None:
        for nu in task.eval_nus:
            play_episodes(factory(), TASK, seeds, nu, **overrides)

    def own_stats() -> None:
        for _ in task.eval_nus:
            aggregate({"policy": table["AdaScaleTrained"]})

    def every_reference_scipy() -> None:
        for _ in task.eval_nus:
            rly.get_interval_estimates(table, lambda x: np.array([metrics.aggregate_iqm(x)]), reps=2000,
                                       task_bootstrap=True)

    times: dict[str, list[float]] = {k: [] for k in ("command", "import", "batched", "per_budget", "own_stats",
                                                      "every_reference_scipy")}
    for _ in range(args.repeats):  # alternated, so that a change of load hits both sides of a ratio
        for name, fn in (("command", _command), ("import", _import), ("batched", batched),
                         ("per_budget", per_budget), ("own_stats", own_stats),
                         ("every_reference_scipy", every_reference_scipy)):
            times[name].append(_timed(fn))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"otagym evaluate {TASK} <budget_ppo model>: {med['command']:.1f} s (median of {args.repeats}; goal <= 10 s "
          "on a quiet machine)")
    print(f"  import the command {med['import']:.1f} s, load the model {load:.1f} s (torch, SB3; to play only, no optimiser)")
    print(f"  play 3 x 128 realisations: {med['batched']:.2f} s in one vector env, {med['per_budget']:.2f} s one per "
          f"budget ({med['per_budget'] / med['batched']:.1f}x)")
    print(f"  statistics: {med['own_stats']:.2f} s the policy's bootstrap by one sort, "
          f"{med['every_reference_scipy']:.2f} s every reference's with scipy's IQM "
          f"({med['every_reference_scipy'] / med['own_stats']:.1f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
