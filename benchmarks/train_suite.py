"""Train an SB3 algorithm on the benchmark suite's tasks with several seeds, select each seed's checkpoint on the
validation realisations and score it on the frozen evaluation set, in the records ``benchmark_results.py`` reads.

Per task and seed k: ``otagym train``'s :func:`agents.train.train` with the algorithm's packaged config entry of the
task id (the task's env settings; ``ppo_lagrangian``: PPO with the PID Lagrangian multiplier of
:mod:`agents.lagrangian`), ``--steps`` env steps, a checkpoint every ``--checkpoint-every`` steps, into
``--out/<algo>/<task name>/seed<k>/`` (resumed where a run was killed). Each checkpoint and the final model play the
validation realisations (:data:`otagym.tasks.BENCHMARK_VALIDATION_SEEDS`) deterministically at every budget; the one
with the best mean feasible score (:func:`baselines.benchmark.ranked_scores`) is scored on the evaluation set, and the
record is written atomically to ``--out/<algo>/<task name>/seed<k>.json``. ``--zoo [DIR]`` ships each task's seed
best on validation to ``<DIR>/<task name>/<algo>/`` (``model.zip`` and the run's ``run.json``, which names the task;
DIR: default ``agents/zoo``; a model already there is replaced only with ``--force``).

    pip install -e ".[rl,results]"
    python -m benchmarks.train_suite --algo ppo_lagrangian --tasks otagym/ReceiveScalingCMDP-v1 --seeds 5
    python -m benchmarks.train_suite --algo budget_apg --steps 24000000 --out benchmarks/records \
        --tasks otagym/ReceiveScalingCMDP-v1 otagym/ReceiveScalingCMDPGaussMarkov-v0 otagym/ReceiveScalingCMDPBlock-v0

The batched algorithms, ``budget_ppo`` (:mod:`agents.budget_ppo`) and ``budget_apg`` (:mod:`agents.budget_apg`),
select their model on the validation realisations while they train and keep no checkpoints: an interrupted seed is
trained again.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from agents import BATCHED_ALGOS, batched_trainer
from agents.policy import AgentPolicy, load_model, run_metadata
from agents.train import checkpoint_models, train
from baselines.benchmark import ranked_scores, task_scores_and_costs
from benchmarks.zoo import add_zoo_arguments, refuse_shipped
from otagym._io import atomic_write, write_json
from otagym.tasks import BENCHMARK, BENCHMARK_VALIDATION_SEEDS, TASKS


def play(model_path: Path, task_id: str, seeds: tuple[int, ...]) -> dict[str, tuple[list[float], list[float]]]:
    """Per budget: the deterministic policy's scores and cost ratios on ``seeds`` (one batched episode per budget), its
    actions played as its ``run.json`` says (the task's own where it says nothing)."""
    model = load_model(model_path)
    kwargs = dict(run_metadata(model_path).get("env_kwargs") or TASKS[task_id].kwargs)
    scores, costs = task_scores_and_costs(lambda nus: AgentPolicy(model, nus, env_kwargs=kwargs), task_id, seeds)
    return {nu: (scores[nu], costs[nu]) for nu in scores}


def candidates(run: Path, steps: int) -> list[tuple[int, Path]]:
    """(env steps, model file) of each checkpoint of the run and of its final model."""
    return [(s, p) for s, p in checkpoint_models(run) if s < steps] + [(steps, run / "model.zip")]


def one_seed(algo: str, task_id: str, seed: int, steps: int, every: int, folder: Path,
             config: Path | None = None) -> dict[str, Any]:
    """Train (or resume) one seed, select its checkpoint on validation, score it on the evaluation set."""
    run = folder / f"seed{seed}"
    clock = time.perf_counter()
    if algo in BATCHED_ALGOS:
        return batched_seed(algo, task_id, seed, steps, run, clock)
    if not (run / "model.zip").is_file():
        resume = (run / "run.json").is_file() and (run / "checkpoints").is_dir()
        train(algo, config=config, run_dir=run, seed=seed, total_timesteps=steps, checkpoint_freq=every, task=task_id,
              resume=resume, progress=False)
    validation = []
    for at, path in candidates(run, steps):
        played = play(path, task_id, BENCHMARK_VALIDATION_SEEDS)
        value = float(np.mean([ranked_scores(task_id, nu, BENCHMARK_VALIDATION_SEEDS, s, c).mean()
                               for nu, (s, c) in played.items()]))
        validation.append({"steps": at, "model": str(path), "validation": value})
    best = max(validation, key=lambda v: v["validation"])
    test = play(Path(best["model"]), task_id, TASKS[task_id].eval_seeds)
    return {"task": task_id, "algo": algo, "seed": seed, "steps": steps, "run": str(run), "selected": best,
            "checkpoints": validation,
            "wall_s": time.perf_counter() - clock, "test": {nu: s for nu, (s, _) in test.items()},
            "test_cost_ratios": {nu: c for nu, (_, c) in test.items()}}


def batched_seed(algo: str, task_id: str, seed: int, steps: int, run: Path, clock: float) -> dict[str, Any]:
    """One seed of a batched algorithm (:func:`agents.batched_trainer`), which selects its model on the validation
    realisations as it trains (every ``eval_every`` env steps of its settings; an unfinished run is trained again),
    scored on the evaluation set."""
    done = (run / "run.json").is_file() and json.loads((run / "run.json").read_text()).get("complete", True)
    if not (done and (run / "model.zip").is_file()):
        batched_trainer(algo)(task_id, run, seed=seed, total_timesteps=steps, overwrite=True, log=print)
    meta = json.loads((run / "run.json").read_text())
    test = play(run / "model.zip", task_id, TASKS[task_id].eval_seeds)
    return {"task": task_id, "algo": algo, "seed": seed, "steps": meta["total_timesteps"], "run": str(run),
            "selected": {"steps": meta["selected"]["steps"], "model": str(run / "model.zip"),
                         "validation": meta["selected"]["validation_mean_feasible_score"]},
            "checkpoints": [{"steps": v["steps"], "validation": v["score"]} for v in meta["validation"]],
            "wall_s": time.perf_counter() - clock, "train_wall_s": meta["wall_s"],
            "test": {nu: s for nu, (s, _) in test.items()},
            "test_cost_ratios": {nu: c for nu, (_, c) in test.items()}}


def zoo_folder(zoo: Path, task_id: str, algo: str) -> Path:
    """``<zoo>/<task name>/<algo>``, the task's name with its version (``ReceiveScalingCMDP-v1``)."""
    return zoo / task_id.split("/", 1)[1] / algo


def ship(records: list[dict[str, Any]], task_id: str, algo: str, zoo: Path) -> Path:
    """The seed whose selected checkpoint is best on validation, to ``<zoo>/<task name>/<algo>/``: its model
    (``model.zip``) and its run's ``run.json`` with the selection added (``selected``: steps, validation score)."""
    best = max(records, key=lambda r: r["selected"]["validation"])
    source = Path(best["selected"]["model"])
    target = zoo_folder(zoo, task_id, algo)
    meta = json.loads(Path(best["run"], "run.json").read_text())
    with atomic_write(target / "model.zip", "wb") as fh:
        fh.write(source.read_bytes())
    write_json(target / "run.json", {**meta, "task": task_id, "seed": best["seed"], "selected": {
        "steps": best["selected"]["steps"], "validation_mean_feasible_score": best["selected"]["validation"],
        "by": "benchmarks/train_suite.py"}})
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.rsplit("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", default="ppo_lagrangian", help="an algorithm of `otagym train` (budget_ppo: "
                        "the spend tasks only)")
    parser.add_argument("--config", type=Path, default=None,
                        help="an rl_zoo3-format YAML instead of the packaged one (a hyperparameter candidate)")
    parser.add_argument("--tasks", nargs="+", choices=list(BENCHMARK), default=list(BENCHMARK))
    parser.add_argument("--seeds", type=int, default=5, help="training seeds per task (default 5)")
    parser.add_argument("--steps", type=int, default=2_000_000, help="env steps per seed (default 2,000,000)")
    parser.add_argument("--checkpoint-every", type=int, default=250_000, help="env steps between checkpoints")
    parser.add_argument("--out", type=Path, default=Path("runs/benchmark"),
                        help="<out>/<algo>/<task name>/seed<k>.json and the runs beside them")
    add_zoo_arguments(parser, "<task name>/<algo>")
    args = parser.parse_args(argv)
    if args.algo in BATCHED_ALGOS and (args.config is not None or args.checkpoint_every != 250_000):
        parser.error(f"--config and --checkpoint-every are not for --algo {args.algo}: its settings are "
                     "its module's (agents.budget_ppo, agents.budget_apg) and it selects on validation as it trains")
    if args.zoo is not None:
        refuse_shipped(parser, [zoo_folder(args.zoo, task_id, args.algo) for task_id in args.tasks], args.force)
    for task_id in args.tasks:
        folder = args.out / args.algo / task_id.split("/", 1)[1]
        for seed in range(args.seeds):
            record = folder / f"seed{seed}.json"
            if record.is_file():
                continue
            print(f"{task_id}: {args.algo} seed {seed}, {args.steps:,} steps", flush=True)
            result = one_seed(args.algo, task_id, seed, args.steps, args.checkpoint_every, folder, args.config)
            write_json(record, result)
            means = {nu: float(np.mean(ranked_scores(task_id, nu, TASKS[task_id].eval_seeds, s,
                                                     result["test_cost_ratios"][nu])))
                     for nu, s in result["test"].items()}
            print(f"  selected {result['selected']['steps']:,} steps; "
                  + ", ".join(f"nu {nu}: {m:.1f}" for nu, m in means.items())
                  + f" ({result['wall_s']:.0f} s)", flush=True)
        if args.zoo is not None:
            records = [json.loads(p.read_text()) for p in sorted(folder.glob("seed*.json"))]
            print(f"  shipped {ship(records, task_id, args.algo, args.zoo)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
