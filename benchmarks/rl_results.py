"""RL schedulers against their references on held-out channels: train, select on validation, test, report (rliable).

For each task (paper-mnist, T = 500, budget mode, price action; i.i.d. fading, Gauss-Markov fading with correlation 0.9
and block fading with a coherence of 10 rounds) and each algorithm (PPO and TRPO by default), trains ``--seeds``
nu-conditioned policies (nu drawn log-uniformly in [0.01, 0.16] per episode and observed; training seed k) for
``--minutes`` of wall time each, one at a time, with one torch thread. One minute is past the plateau: the validation
curves are flat from the first checkpoint (100k steps), and three minutes under Gauss-Markov fading (5 seeds each, PPO
and TRPO) scored no better on the test realisations. Every checkpoint and the final model are scored on the validation
realisations (``VALIDATION_SEEDS``, 16 channel realisations x nu in {0.01, 0.04, 0.16}): the learning curves; the best
one is played on the test realisations (``TEST_SEEDS``, 32, never used in training or selection) with deterministic and
with sampled actions. "after 2 updates" is the same algorithm trained for two rollouts (2 n_envs n_steps steps) from the
same seed.

Beside them, on the same test channels: the references of ``baselines.receive_scaling.references`` (``BestConstant`` and
``AdaScaleTrained`` tuned on ``TRAIN_SEEDS``; ``OnlineOptimal`` by dynamic programming, exact for i.i.d. and block
fading and, under Gauss-Markov fading, solved for the i.i.d. marginal: a lower bound on the online optimum there),
EqualAlloc (0) and OfflineOptimal (100) by definition of the normalised score.

Statistics with rliable (Agarwal et al., 2021): the interquartile mean over training seeds x test realisations with a
stratified-bootstrap 95% CI (2000 resamples), and the probability of improvement over ``AdaScaleTrained`` (per
realisation, Mann-Whitney over seeds, averaged over realisations) with its CI (200 resamples) for the deterministic
agents and the other references; beside it, the mean and the worst realisation (the IQM leaves out a quarter of the
realisations at each end, where a budget-exhaustion cliff would show) and the probability of improvement over
``BestConstant``, the floor an agent must beat to have learned anything. Writes ``rl_results.json`` (every score),
``rl_results.md`` (the table) and ``rl_learning_curves.png`` to ``--out``; ``--docs`` copies the last two into docs/ and
``--zoo [DIR]`` ships each task's and algorithm's best model (by validation score) to ``<DIR>/<task>/<algo>/`` with its
``run.json`` (DIR: default ``agents/zoo``; a model already there is replaced only with ``--force``). Rerunning
resumes: a finished run is not retrained, an interrupted one continues from its newest checkpoint, and scores already
computed are read back (``scores.json`` in each run folder).

    python -m benchmarks.rl_results --docs --zoo --force    # what the README reports (about 35 min on 2 cores)
    python -m benchmarks.rl_results --minutes 0.2 --seeds 2 --tasks iid --algos ppo --out /tmp/rl   # a quick look
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from agents.policy import AgentPolicy, load_model
from agents.train import checkpoint_models, latest_checkpoint, load_hyperparams, train
from baselines.benchmark import aggregate, improvement, task_scores
from baselines.receive_scaling.core import Policy
from baselines.receive_scaling.references import (TEST_SEEDS, VALIDATION_SEEDS, AdaScaleTrained, BestConstant,
                                                  OnlineOptimal)
from benchmarks.zoo import add_zoo_arguments, refuse_shipped
from otagym._io import copy_file, save_figure, write_json, write_text
from otagym.tasks import fading_settings

#: The tasks by the short names of the run folders and of ``agents/zoo/<task>/``.
TASKS: dict[str, str] = {"iid": "otagym/ReceiveScalingIID-v0",
                         "gauss_markov_0.9": "otagym/ReceiveScalingGaussMarkov-v0",
                         "block_10": "otagym/ReceiveScalingBlock-v0"}
NUS = (0.01, 0.04, 0.16)
REFERENCES: dict[str, Callable[[np.ndarray], Policy]] = {
    "BestConstant": lambda nu: BestConstant(nu=nu),
    "AdaScaleTrained": lambda nu: AdaScaleTrained(nu=nu),
    "OnlineOptimal": lambda nu: OnlineOptimal(nu=nu),
}


def scores(make: Callable[[np.ndarray], Policy], task: str, seeds: tuple[int, ...]) -> dict[str, list[float]]:
    """Normalised score of ``make(nu)``'s policy on each realisation of ``seeds``, per nu (keyed ``str(nu)``)."""
    return task_scores(make, TASKS[task], seeds, NUS)


def _cached(path: Path, key: str, compute: Callable[[], Any]) -> Any:
    """``compute()`` stored under ``key`` in the JSON file ``path`` (written atomically), or the stored value."""
    table = json.loads(path.read_text()) if path.is_file() else {}
    if key not in table:
        table[key] = compute()
        write_json(path, table)
    return table[key]


def _agent(path: Path, deterministic: bool = True) -> Callable[[np.ndarray], Policy]:
    model = load_model(path)
    meta = json.loads((path.parent if path.name == "model.zip" else path.parent.parent).joinpath("run.json")
                      .read_text())
    return lambda nu: AgentPolicy(model, nu=nu, env_kwargs=meta["env_kwargs"], deterministic=deterministic)


def _checkpoints(run: Path) -> list[tuple[int, Path]]:
    """(env steps, model zip) of each checkpoint of the run and of its final model, by steps."""
    meta = json.loads((run / "run.json").read_text())
    return sorted(checkpoint_models(run) + [(int(meta["trained_timesteps"]), run / "model.zip")])


def train_and_score(task: str, algo: str, seed: int, out: Path, minutes: float, checkpoint_freq: int) -> dict[str, Any]:
    """One training run, its learning curve on the validation realisations, and its best checkpoint's test scores."""
    run = out / task / algo / f"seed{seed}"
    meta = run / "run.json"
    if not ((run / "model.zip").is_file() and meta.is_file() and "wall_s" in json.loads(meta.read_text())):
        resume = latest_checkpoint(run) is not None  # else a run killed before its first checkpoint: start again
        train(algo, run_dir=run, seed=seed, max_minutes=minutes, checkpoint_freq=checkpoint_freq,
              env_overrides=fading_settings(TASKS[task]), resume=resume, overwrite=not resume, progress=False)
    cache = run / "scores.json"
    curve = []
    for steps, path in _checkpoints(run):
        val = _cached(cache, f"validation {path.name}", lambda: scores(_agent(path), task, VALIDATION_SEEDS))
        curve.append((steps, float(np.mean([np.mean(v) for v in val.values()])), str(path)))
    best = max(curve, key=lambda c: c[1])
    best_path = Path(best[2])
    early = run / "early"
    if not (early / "model.zip").is_file():
        hp = load_hyperparams(algo)
        train(algo, run_dir=early, seed=seed, total_timesteps=2 * int(hp["n_envs"]) * int(hp["n_steps"]),
              checkpoint_freq=10**9, env_overrides=fading_settings(TASKS[task]), overwrite=True, progress=False)
    return {
        "curve": curve, "selected": best[2], "selected_steps": best[0],
        "wall_s": json.loads(meta.read_text())["wall_s"],
        "deterministic": _cached(cache, f"test {best_path.name}", lambda: scores(_agent(best_path), task, TEST_SEEDS)),
        "stochastic": _cached(cache, f"test sampled {best_path.name}",
                              lambda: scores(_agent(best_path, deterministic=False), task, TEST_SEEDS)),
        "early": _cached(cache, "test after 2 updates",
                         lambda: scores(_agent(early / "model.zip"), task, TEST_SEEDS)),
    }


def ship(runs: list[dict[str, Any]], target: Path) -> None:
    """The run whose best checkpoint scores best on validation, to ``target``: the selected model (``model.zip``)
    and its run's ``run.json`` with the selection added (``selected``, ``selected_steps``)."""
    best = max(runs, key=lambda r: max(c[1] for c in r["curve"]))
    target.mkdir(parents=True, exist_ok=True)
    selected = Path(best["selected"])
    copy_file(selected, target / "model.zip")
    run_json = json.loads((selected.parent if selected.name == "model.zip" else selected.parent.parent)
                          .joinpath("run.json").read_text())
    run_json.update(selected=selected.name, selected_steps=best["selected_steps"])
    write_json(target / "run.json", run_json)


def _table(results: dict[str, Any], score: str, cell: Callable[[dict[str, Any]], str], reference: str,
           probability: str) -> list[str]:
    """One Markdown table: a row per task and policy, ``cell(row)`` per nu under ``score``, then the row's
    ``probability`` of improvement over ``reference`` per nu ("–" where not computed)."""
    lines = ["| task | policy | " + " | ".join(f"nu = {nu} {score}" for nu in NUS) + " | "
             + " | ".join(f"P(>{reference}) nu = {nu}" for nu in NUS) + " |", "|---|---|" + "---|" * (2 * len(NUS))]
    for task, per_nu in results.items():
        for name in per_nu[str(NUS[0])]:
            rows = [per_nu[str(nu)][name] for nu in NUS]
            probs = ["–" if row.get(probability) is None else f"{row[probability]:.2f}" for row in rows]
            lines.append(f"| {task} | {name} | " + " | ".join(map(cell, rows)) + " | " + " | ".join(probs) + " |")
    return lines


def markdown(results: dict[str, Any], seeds: int, minutes: float) -> str:
    lines = [f"Normalised score (0 = EqualAlloc, 100 = OfflineOptimal) on {len(TEST_SEEDS)} held-out channel "
             f"realisations; agents: IQM over {seeds} training seeds x realisations, [95% stratified-bootstrap CI] "
             f"(rliable); P(>AdaScaleTrained): probability of improvement. Training: {minutes:g} min per run, one "
             "thread, 2-core machine; checkpoint chosen on validation realisations.", ""]
    lines += _table(results, "IQM [CI]", lambda r: f"{r['iqm']:.2f} [{r['iqm_ci'][0]:.2f}, {r['iqm_ci'][1]:.2f}]",
                    "AdaScaleTrained", "p_improve")
    lines += ["", "Mean score (worst realisation) over the same seeds x realisations, and the probability of "
              "improvement over BestConstant:", ""]
    lines += _table(results, "mean (worst)", lambda r: f"{r['mean']:.2f} ({r['worst']:.1f})", "BestConstant",
                    "p_improve_floor")
    return "\n".join(lines) + "\n"


def plot(curves: dict[str, dict[str, list]], reference_lines: dict[str, dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(6 * len(curves), 4.2), squeeze=False)
    for ax, (task, per_algo) in zip(axes[0], curves.items()):
        for k, (algo, runs) in enumerate(per_algo.items()):
            for j, curve in enumerate(runs):
                steps, score = zip(*[(c[0], c[1]) for c in curve])
                ax.plot(np.array(steps) / 1e6, score, color=f"C{k}", alpha=0.6, marker=".",
                        label=algo.upper() if j == 0 else None)
        for k, (name, value) in enumerate(reference_lines[task].items()):
            ax.axhline(value, color=f"C{k + 3}", linestyle="--", label=f"{name} {value:.2f}")
        ax.set_title(f"{task}: validation score (mean over nu and realisations)")
        ax.set_xlabel("env steps (millions)")
        ax.set_ylabel("normalised score")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=1.0, help="wall time per training run (default 1.0)")
    p.add_argument("--seeds", type=int, default=5, help="training seeds per algorithm and task (default 5)")
    p.add_argument("--algos", nargs="+", default=["ppo", "trpo"])
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    p.add_argument("--checkpoint-freq", type=int, default=100_000)
    p.add_argument("--out", type=Path, default=Path("runs/rl_results"))
    p.add_argument("--docs", action="store_true", help="copy the table and the plot into docs/")
    add_zoo_arguments(p, "<task>/<algo>")
    args = p.parse_args(argv)
    if args.zoo is not None:
        refuse_shipped(p, [args.zoo / task / algo for task in args.tasks for algo in args.algos], args.force)
    start = time.perf_counter()
    results: dict[str, Any] = {}
    curves: dict[str, dict[str, list]] = {}
    lines: dict[str, dict[str, float]] = {}
    raw: dict[str, Any] = {}
    for task in args.tasks:
        refs = {name: _cached(args.out / task / "references.json", name, lambda: scores(make, task, TEST_SEEDS))
                for name, make in REFERENCES.items()}
        val = {name: _cached(args.out / task / "references.json", f"validation {name}",
                             lambda: scores(make, task, VALIDATION_SEEDS)) for name, make in REFERENCES.items()}
        lines[task] = {name: float(np.mean([np.mean(v) for v in s.values()])) for name, s in val.items()}
        runs = {algo: [train_and_score(task, algo, k, args.out, args.minutes, args.checkpoint_freq)
                       for k in range(args.seeds)] for algo in args.algos}
        curves[task] = {algo: [r["curve"] for r in rs] for algo, rs in runs.items()}
        raw[task] = {"references": refs, "runs": runs}
        results[task] = {}
        for nu in NUS:
            table = {name: np.array([s[str(nu)]]) for name, s in refs.items()}
            for algo, rs in runs.items():
                for label, key in ((algo.upper(), "deterministic"), (f"{algo.upper()} sampled", "stochastic"),
                                   (f"{algo.upper()} after 2 updates", "early")):
                    table[label] = np.array([r[key][str(nu)] for r in rs])
            agents = tuple(algo.upper() for algo in runs)
            summary = aggregate(table, "AdaScaleTrained", compared=("BestConstant", "OnlineOptimal") + agents)
            floor = improvement(table, "BestConstant", compared=("OnlineOptimal",) + agents)
            for name, row in summary.items():
                row["p_improve_floor"], row["p_improve_floor_ci"] = floor.get(name, (None, None))
            results[task][str(nu)] = summary
        if args.zoo is not None:
            for algo, rs in runs.items():
                ship(rs, args.zoo / task / algo)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "rl_results.json", {"summary": results, "scores": raw, "curves": curves,
                                              "validation_references": lines, "minutes": args.minutes,
                                              "seeds": args.seeds, "wall_s": time.perf_counter() - start})
    table = markdown(results, args.seeds, args.minutes)
    write_text(args.out / "rl_results.md", table)
    plot(curves, lines, args.out / "rl_learning_curves.png")
    if args.docs:
        docs = Path(__file__).resolve().parent.parent / "docs"
        write_text(docs / "rl_results.md", table)
        copy_file(args.out / "rl_learning_curves.png", docs / "rl_learning_curves.png")
    print(table)
    print(f"wall time {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
