"""Direct policy search on common random numbers for the benchmark suite's constrained tasks: a linear policy of nine
observation features in the task's own action (the spend, or x on a log scale), trained by CMA-ES on training
realisations, selected on validation realisations, scored on the suite's frozen evaluation set.

The policy is :class:`agents.linear.LinearFeaturePolicy`: a = clip(theta . phi(obs), -1, 1) with the twelve "cubic"
features 1, z, z^2, h, p, t, z h, z p, z t, h^2, h^3, z h^2 (z the observed log budget, h this round's weakest channel
against its mean, p the budget left per round, t the round; :mod:`agents.linear`). Every candidate of a generation
plays the same training realisations at each budget nu of the task (common random numbers: the objective is a
deterministic function of theta), and CMA-ES (Hansen's ``cma``) maximises

    objective(theta) = mean over nu and realisations of [ capped score - 100 max(0, cost / limit - 1) ],

the score with an episode over its cost limit capped at EqualAlloc's 0, less a penalty proportional to the overspend,
which points an infeasible candidate back to the limit (the objective the zoo's linear models were searched with;
the suite then scores them with :func:`otagym.tasks.feasible_score`, which ranks an episode over the limit below
every feasible one).
The search starts at the task's ``BestConstant`` action (the bias; the other weights 0) with step 0.1 and population
10. Seed k trains on its own realisations, ``BENCHMARK_TRAINING_SEEDS[32 k : 32 (k + 1)]`` (``--train-realisations``
of them), so the seeds are independent training runs; its mean every 10 generations is a checkpoint, and the one
with the best objective on :data:`otagym.tasks.BENCHMARK_VALIDATION_SEEDS` is scored on the task's evaluation set.
Each seed's result is written atomically to ``--out/<task>/seed<k>.json`` and read back on a rerun with the same
budget (a killed run resumes at the first unfinished seed). ``--zoo [DIR]`` ships the seed best on validation to
``<DIR>/<task name>/linear_crn/`` as an SB3 model (``ARS.load``) with a ``run.json`` that names the task (DIR: default
``agents/zoo``; a model already there is replaced only with ``--force``).

    pip install -e ".[rl,results]"
    python -m benchmarks.constrained_search --zoo --force    # the four tasks, 5 seeds each, 150 generations
    python -m benchmarks.constrained_search --tasks otagym/ReceiveScalingCMDP-v1 --seeds 1 --generations 10
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.linear import FEATURE_SETS, LinearFeaturePolicy, linear_price_model
from agents.train import package_versions
from baselines.benchmark import best_constant_action, ranked_scores, task_scores_and_costs
from benchmarks.zoo import add_zoo_arguments, refuse_shipped
from otagym import OTAPrivacyEnv
from otagym._io import atomic_write, write_json
from otagym.tasks import BENCHMARK, BENCHMARK_TRAINING_SEEDS, BENCHMARK_VALIDATION_SEEDS, COST_TOLERANCE, TASKS

#: The feature set of the policy (:data:`agents.linear.FEATURE_SETS`).
FEATURES = "cubic"
#: CMA-ES generations between two checkpoints (each scored on the validation realisations).
CHECKPOINT_EVERY = 10


def zoo_folder(zoo: Path, task_id: str) -> Path:
    """``<zoo>/<task name>/linear_crn``, the task's name with its version (``ReceiveScalingCMDP-v1``)."""
    return zoo / task_id.split("/", 1)[1] / "linear_crn"


def play(thetas: NDArray, task_id: str, seeds: tuple[int, ...]) -> dict[str, tuple[NDArray, NDArray]]:
    """Per budget (``str(nu)``): the scores and the cost ratios (rows, seeds) of the linear policy with each
    parameter row, every row on the same realisations (one batched episode per budget)."""
    rows, n = len(thetas), len(seeds)
    per_env = np.repeat(np.asarray(thetas, dtype=float), n, axis=0)  # env k * n + i: row k on realisation i
    kwargs = TASKS[task_id].kwargs
    scores, costs = task_scores_and_costs(lambda nus: LinearFeaturePolicy(per_env, nus, kwargs), task_id,
                                          tuple(seeds) * rows)
    return {nu: (np.reshape(scores[nu], (rows, n)), np.reshape(costs[nu], (rows, n))) for nu in scores}


def objective(played: dict[str, tuple[NDArray, NDArray]], kind: str = "mean") -> NDArray:
    """Each row's mean over realisations of the feasible score less 100 times the overspend, averaged over the
    budgets (``kind="mean"``) or the smallest of them (``"worst-nu"``: every budget's room counts alike)."""
    per_nu = np.array([(np.where(c > 1.0 + COST_TOLERANCE, np.minimum(s, 0.0), s)
                        - 100.0 * np.maximum(c - 1.0, 0.0)).mean(axis=1) for s, c in played.values()])
    return per_nu.mean(axis=0) if kind == "mean" else per_nu.min(axis=0)


def start(task_id: str) -> NDArray:
    """theta of the task's BestConstant: its action (the mean over the budgets) as the bias, the rest 0."""
    theta = np.zeros(len(FEATURE_SETS[FEATURES]))
    theta[0] = np.mean([best_constant_action(task_id, nu) for nu in TASKS[task_id].eval_nus])
    return theta


def training_seeds(seed: int, count: int) -> tuple[int, ...]:
    """Seed ``seed``'s own training realisations: ``count`` of :data:`BENCHMARK_TRAINING_SEEDS` from ``count`` x
    ``seed`` on (disjoint between seeds)."""
    first = count * seed
    if count < 1 or seed < 0 or first + count > len(BENCHMARK_TRAINING_SEEDS):
        raise ValueError(f"train realisations x (seed + 1) must be in [1, {len(BENCHMARK_TRAINING_SEEDS)}]; got "
                         f"{count} x {seed + 1}")
    return BENCHMARK_TRAINING_SEEDS[first:first + count]


def search(task_id: str, seed: int, generations: int, train_realisations: int = 32) -> dict[str, Any]:
    """One training seed: CMA-ES for ``generations`` (a positive multiple of 10) on its training realisations, the
    checkpoint with the best validation objective, and that policy's scores and costs on the evaluation set."""
    import cma

    if generations <= 0 or generations % CHECKPOINT_EVERY:
        raise ValueError(f"generations must be a positive multiple of {CHECKPOINT_EVERY}; got {generations}")
    train = training_seeds(seed, train_realisations)
    es = cma.CMAEvolutionStrategy(start(task_id), 0.1, {"seed": seed + 1, "popsize": 10, "verbose": -9})
    clock, checkpoints = time.perf_counter(), []
    for generation in range(1, generations + 1):
        candidates = np.array(es.ask())
        es.tell(list(candidates), list(-objective(play(candidates, task_id, train))))
        if generation % CHECKPOINT_EVERY == 0:
            theta = np.array(es.mean)
            value = objective(play(theta[None], task_id, BENCHMARK_VALIDATION_SEEDS))[0]
            checkpoints.append({"generation": generation, "theta": theta.tolist(), "validation": float(value),
                                "episodes": generation * 10 * len(train) * len(TASKS[task_id].eval_nus)})
    best = max(checkpoints, key=lambda c: c["validation"])
    test = play(np.array(best["theta"])[None], task_id, TASKS[task_id].eval_seeds)
    return {"task": task_id, "seed": seed, "generations": generations, "train_realisations": train_realisations,
            "wall_s": time.perf_counter() - clock, "selected": best, "checkpoints": checkpoints,
            "test": {nu: s[0].tolist() for nu, (s, _) in test.items()},
            "test_cost_ratios": {nu: c[0].tolist() for nu, (_, c) in test.items()}}


def ship(task_id: str, runs: list[dict[str, Any]], zoo: Path) -> Path:
    """The seed whose selected checkpoint has the best validation objective, as an SB3 (ARS) model of
    :class:`agents.linear.LinearPricePolicy` with its ``run.json``, into the zoo ``zoo`` (:func:`zoo_folder`);
    returns the folder."""
    import cma

    best = max(runs, key=lambda r: r["selected"]["validation"])
    target = zoo_folder(zoo, task_id)
    settings = dict(TASKS[task_id].kwargs)
    model = linear_price_model(best["selected"]["theta"], OTAPrivacyEnv(**settings))
    with atomic_write(target / "model.zip", "wb") as fh:
        model.save(fh)
    write_json(target / "run.json", {
        "algo": "ars", "policy": "agents.linear.LinearPricePolicy", "task": task_id, "env_kwargs": settings,
        "trained_by": "CMA-ES on common random numbers (benchmarks/constrained_search.py)", "seed": best["seed"],
        "generations": best["generations"], "train_realisations": best["train_realisations"],
        "selected_generation": best["selected"]["generation"], "validation_objective": best["selected"]["validation"],
        "episodes": best["selected"]["episodes"], "features": list(FEATURE_SETS[FEATURES]),
        "theta": best["selected"]["theta"],
        "versions": {**package_versions(), "cma": cma.__version__}})
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.rsplit("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", choices=list(BENCHMARK), default=list(BENCHMARK),
                        help="the benchmark tasks to search (default: all)")
    parser.add_argument("--seeds", type=int, default=5, help="training seeds per task (default 5, at most 8)")
    parser.add_argument("--generations", type=int, default=150, help="CMA-ES generations per seed (multiple of 10)")
    parser.add_argument("--train-realisations", type=int, default=32,
                        help="training realisations every candidate plays at each budget (default 32, at most 32)")
    parser.add_argument("--out", type=Path, default=Path("runs/benchmark/linear_crn"),
                        help="one JSON per task and seed: <out>/<task name>/seed<k>.json (where benchmark_results.py "
                             "reads the linear_crn runs)")
    add_zoo_arguments(parser, "<task name>/linear_crn")
    args = parser.parse_args(argv)
    if not 1 <= args.seeds <= 8:
        parser.error(f"--seeds must be in [1, 8]; got {args.seeds}")
    if args.zoo is not None:
        refuse_shipped(parser, [zoo_folder(args.zoo, task_id) for task_id in args.tasks], args.force)
    budget = (args.generations, args.train_realisations)
    for task_id in args.tasks:
        paths = [args.out / task_id.split("/", 1)[1] / f"seed{k}.json" for k in range(args.seeds)]
        for k, path in enumerate(paths):
            if path.is_file():
                stored = json.loads(path.read_text())
                if (stored["generations"], stored["train_realisations"]) != budget:
                    parser.error(f"{path} is a search of another budget: use another --out, or remove it")
                continue
            print(f"{task_id}: seed {k}, {args.generations} generations", flush=True)
            write_json(path, search(task_id, k, *budget))
        runs = [json.loads(p.read_text()) for p in paths]
        for r in runs:
            costs = {nu: np.asarray(c) for nu, c in r["test_cost_ratios"].items()}
            means = {nu: (float(np.mean(ranked_scores(task_id, nu, TASKS[task_id].eval_seeds, s, costs[nu]))),
                          float(np.mean(costs[nu] > 1.0 + COST_TOLERANCE))) for nu, s in r["test"].items()}
            print(f"  seed {r['seed']}: generation {r['selected']['generation']} selected, "
                  + ", ".join(f"nu {nu}: feasible mean {m:.2f} over {o:.2f}" for nu, (m, o) in means.items())
                  + f" ({r['wall_s']:.0f} s)")
        if args.zoo is not None:
            print(f"  shipped {ship(task_id, runs, args.zoo)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
