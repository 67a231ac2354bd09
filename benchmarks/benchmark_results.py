"""The benchmark suite's results table, regenerated from stored results by one command.

For every task of :data:`otagym.tasks.BENCHMARK`, at each budget nu, on the task's frozen evaluation set (128
realisations, :data:`otagym.tasks.BENCHMARK_EVALUATION_SEEDS`): the floor (``BestConstant``), the references stored
with the package (``otagym/data/reference_scores.json``: ``OnlineOptimal`` is the ceiling, ``DualPrice`` the optimum
of the constraint in expectation, ``AdaScaleTrained`` the paper's online policy) and each trained algorithm of the
zoo's runs (``--runs``: ``<runs>/<algo>/<task name>/seed<k>.json``, one record per training seed with its scores and
cost ratios per budget, as ``benchmarks/constrained_search.py`` and ``benchmarks/train_suite.py`` write them under
``runs/benchmark``; the records of the shipped results are kept in ``benchmarks/records``, so the table regenerates
without training).

Every score is the feasible score (:func:`otagym.tasks.feasible_score`: an episode over its cost limit scores below
every feasible one, FullPower's score on its realisation less 100 x its cost over the limit). Per entry: rliable's
IQM with its stratified-bootstrap 95% CI, the mean, the CVaR at 10% and the worst realisation, the mean episode cost
over the limit and the share of episodes over it, the probability of improvement over the floor, each training
seed's IQM (their range), and the share of the room (ceiling IQM - floor IQM) that the IQM reaches, the room counted
from 0 where the floor is below it (with the log-x action the best constant scores far below EqualAlloc's 0, which
meets the limit on every realisation). Writes ``--out/benchmark-results.json`` (every statistic, per task
``"budgets"`` (per nu) and ``"pooled"`` (the task's one number, :func:`pooled`): the table of ``docs/benchmark.md``
is :func:`markdown` of it and the README's headline table :func:`headline`; ``--docs`` rewrites both) and
``--out/benchmark-profiles.png`` (rliable's performance profiles of the feasible score, one panel per task, all
budgets pooled).

    pip install -e ".[rl,results]"
    python -m benchmarks.benchmark_results --out docs --docs .   # also rewrites the tables of the docs and README
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rliable import metrics

from baselines.benchmark import aggregate, ranked_scores
from otagym._io import atomic_write, write_json
from otagym.cli.report import wide
from otagym.tasks import BENCHMARK, COST_TOLERANCE, TASKS, reference_scores

#: The references shown, floor first; the ceiling is the task's :attr:`~otagym.tasks.Task.ceiling`.
REFERENCES = ("BestConstant", "AdaScaleTrained", "DualPrice", "OnlineOptimal")


def reference_table(task_id: str) -> dict[str, dict[str, tuple[NDArray, NDArray]]]:
    """Per reference and budget: (scores, cost ratios), each (1, realisations)."""
    stored = reference_scores(task_id)
    return {name: {nu: (np.array([s]), np.array([stored["cost_ratios"][name][nu]]))
                   for nu, s in stored["scores"][name].items()} for name in REFERENCES}


def agent_table(runs: Path, task_id: str) -> dict[str, dict[str, tuple[NDArray, NDArray]]]:
    """Per trained algorithm under ``runs`` and budget: (scores, cost ratios), each (seeds, realisations)."""
    out = {}
    for folder in sorted(p for p in runs.iterdir() if p.is_dir()):
        records = [json.loads(p.read_text()) for p in sorted((folder / task_id.split("/", 1)[1]).glob("seed*.json"))]
        if records:
            out[folder.name] = {nu: (np.array([r["test"][nu] for r in records]),
                                     np.array([r["test_cost_ratios"][nu] for r in records]))
                                for nu in records[0]["test"]}
    return out


def summarise(task_id: str, entries: dict[str, dict[str, tuple[NDArray, NDArray]]]) -> dict[str, dict[str, Any]]:
    """Per budget and entry: the statistics of the module docstring."""
    task = TASKS[task_id]
    out: dict[str, dict[str, Any]] = {}
    for nu in map(str, map(float, task.eval_nus)):
        table = {name: ranked_scores(task_id, float(nu), task.eval_seeds, *per_nu[nu])
                 for name, per_nu in entries.items()}
        stats = aggregate(table, task.floor, compared=tuple(n for n in table if n not in REFERENCES))
        # the room is counted from the floor or from 0 (EqualAlloc, feasible on every realisation), the higher
        floor, ceiling = max(stats[task.floor]["iqm"], 0.0), stats[task.ceiling]["iqm"]
        for name, (_, costs) in ((n, e[nu]) for n, e in entries.items()):
            per_seed = [float(metrics.aggregate_iqm(run[None])) for run in table[name]]
            stats[name].update(cost=float(costs.mean()), over=float(np.mean(costs > 1.0 + COST_TOLERANCE)),
                               room=(stats[name]["iqm"] - floor) / (ceiling - floor),
                               seeds=int(costs.shape[0]), seed_iqm_range=[min(per_seed), max(per_seed)])
        out[nu] = stats
    return out


def pooled(task_id: str, entries: dict[str, dict[str, tuple[NDArray, NDArray]]],
           shipped: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Per entry: the task's one number (:func:`otagym.cli.report.task_score`: the feasible score's IQM pooled over
    runs, budgets and realisations, with CI, mean, CVaR 10%, worst and the share over the limit), the runs pooled and,
    for a trained algorithm, the same statistics (no CI) of the seed the zoo ships (``shipped``: algorithm -> seed
    index)."""
    from otagym.cli.report import pooled_table, task_score

    out = {}
    for name, per_nu in entries.items():
        scores = {nu: scores for nu, (scores, _) in per_nu.items()}
        table, costs = pooled_table(task_id, scores, {nu: costs for nu, (_, costs) in per_nu.items()},
                                    TASKS[task_id].eval_seeds)
        out[name] = task_score(table, costs) | {"runs": int(table.shape[0])}
        if name in shipped:
            out[name]["shipped"] = {"seed": shipped[name]} | task_score(table[[shipped[name]]],
                                                                          costs[[shipped[name]]], reps=0)
    return out


def shipped_seeds(task_id: str, algos: list[str]) -> dict[str, int]:
    """The training seed the zoo ships for each algorithm on the task (``agents/zoo/<task>/<algo>/run.json``'s)."""
    zoo = Path(__file__).resolve().parents[1] / "agents" / "zoo" / task_id.split("/", 1)[1]
    out = {}
    for algo in algos:
        meta = zoo / algo / "run.json"
        if meta.is_file() and "seed" in json.loads(meta.read_text()):
            out[algo] = int(json.loads(meta.read_text())["seed"])
    return out


def markdown(results: dict[str, dict[str, Any]]) -> str:
    """The table: one row per task, budget and entry."""
    lines = ["| task | ν | policy | IQM [95% CI] | seeds' IQMs | mean | CVaR 10% | worst | cost / limit | over limit "
             "| room reached | P(> floor) |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for task_id, result in results.items():
        for nu, stats in result["budgets"].items():
            for name, s in stats.items():
                p = "" if s["p_improve"] is None else f"{s['p_improve']:.2f}"
                runs = f" ({s['seeds']} seeds)" if s["seeds"] > 1 else ""
                spread = f"{s['seed_iqm_range'][0]:.1f} to {s['seed_iqm_range'][1]:.1f}" if s["seeds"] > 1 else ""
                iqm = (f"{_number(s['iqm'])} [{_number(s['iqm_ci'][0])}, {_number(s['iqm_ci'][1])}]"
                       + (" (wide)" if wide(s) else ""))
                lines.append(f"| `{task_id.split('/', 1)[1]}` | {float(nu):g} | {name}{runs} | {iqm} | {spread} | "
                             f"{_number(s['mean'])} | {_number(s['cvar10'])} | {_number(s['worst'])} | "
                             f"{s['cost']:.3f} | {100 * s['over']:.0f}% | {100 * s['room']:.0f}% | {p} |")
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    """A score for the headline: one decimal, thousands separated; from a million on, three significant digits (the
    tails run to hundreds of millions)."""
    return f"{value:,.1f}".replace(",", " ") if abs(value) < 1e6 else f"{value:.2e}"


def headline(results: dict[str, dict[str, Any]]) -> str:
    """The README's table: per policy (rows) and task (columns), the task's one number (its runs pooled): the IQM
    with its CI, the CVaR 10% and the share of episodes over the limit side by side; below each trained algorithm,
    the same for the seed the zoo ships."""
    tasks = list(results)
    names = list(dict.fromkeys(n for r in results.values() for n in r["pooled"]))
    lines = ["| policy | " + " | ".join(f"`{t.split('/', 1)[1]}`" for t in tasks) + " |", "|---|" + "---|" * len(tasks)]

    def cell(s: dict[str, Any] | None) -> str:
        if s is None:
            return ""
        ci = "" if s.get("iqm_ci") is None else (f" [{_number(s['iqm_ci'][0])}, {_number(s['iqm_ci'][1])}]"
                                                 + (" (wide)" if wide(s) else ""))
        return f"{_number(s['iqm'])}{ci} · {_number(s['cvar10'])} · {100 * s['over_limit_share']:.0f}%"

    for name in names:
        runs = {results[t]["pooled"][name]["runs"] for t in tasks if name in results[t]["pooled"]}
        label = name + (f" ({runs.pop()} seeds)" if runs != {1} else "")
        lines.append(f"| {label} | " + " | ".join(cell(results[t]["pooled"].get(name)) for t in tasks) + " |")
        if any("shipped" in results[t]["pooled"].get(name, {}) for t in tasks):
            lines.append(f"| {name}, the zoo's seed | " + " | ".join(
                cell(results[t]["pooled"].get(name, {}).get("shipped")) for t in tasks) + " |")
    return "\n".join(lines) + "\n"


def profiles(entries_by_task: dict[str, dict[str, dict[str, tuple[NDArray, NDArray]]]], path: Path) -> None:
    """rliable's performance profiles of the feasible score (all budgets pooled as rliable's tasks), one panel per
    task, to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rliable import library as rly
    from rliable import plot_utils

    taus = np.linspace(0.0, 100.0, 101)
    fig, axes = plt.subplots(1, len(entries_by_task), figsize=(4.6 * len(entries_by_task), 3.8), squeeze=False)
    outer = np.random.get_state()
    np.random.seed(0)
    try:
        for ax, (task_id, entries) in zip(axes[0], entries_by_task.items()):
            scores = {name: np.concatenate([ranked_scores(task_id, float(nu), TASKS[task_id].eval_seeds, *e[nu])
                                            for nu in e], axis=1)
                      for name, e in entries.items()}
            profile, cis = rly.create_performance_profile(scores, taus, reps=200)
            plot_utils.plot_performance_profiles(profile, taus, performance_profile_cis=cis, ax=ax,
                                                 xlabel=r"feasible score $\tau$",
                                                 ylabel=r"fraction of episodes > $\tau$")
            ax.set_title(task_id.split("/", 1)[1], fontsize=10)
            ax.legend(fontsize=7, loc="lower left")
    finally:
        np.random.set_state(outer)
    fig.tight_layout()
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)


#: The files whose generated blocks ``--docs`` rewrites, and the function of the results that fills each.
DOCS = {Path("docs/benchmark.md"): "markdown", Path("README.md"): "headline"}
BEGIN, END = "<!-- benchmark_results.py: begin -->", "<!-- benchmark_results.py: end -->"


def replace_block(text: str, table: str) -> str:
    """``text`` with the block between :data:`BEGIN` and :data:`END` replaced by ``table``."""
    head, found, rest = text.partition(BEGIN)
    _, found_end, tail = rest.partition(END)
    if not (found and found_end):
        raise ValueError(f"no {BEGIN} ... {END} block to replace")
    return f"{head}{BEGIN}\n{table}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.rsplit("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=Path(__file__).resolve().parent / "records",
                        help="one folder per algorithm: <runs>/<algo>/<task name>/seed<k>.json (default: the "
                             "records of the shipped results, benchmarks/records)")
    parser.add_argument("--out", type=Path, default=Path("results/benchmark"),
                        help="where benchmark-results.json and benchmark-profiles.png go")
    parser.add_argument("--docs", type=Path, default=None, metavar="REPO",
                        help="also rewrite the generated tables of REPO/docs/benchmark.md and REPO/README.md")
    args = parser.parse_args(argv)
    entries = {t: {**reference_table(t), **(agent_table(args.runs, t) if args.runs.is_dir() else {})}
               for t in BENCHMARK}
    results = {t: {"budgets": summarise(t, e),
                   "pooled": pooled(t, e, shipped_seeds(t, [n for n in e if n not in REFERENCES]))}
               for t, e in entries.items()}
    write_json(args.out / "benchmark-results.json", results)
    profiles(entries, args.out / "benchmark-profiles.png")
    print(markdown(results))
    print(headline(results))
    for path, kind in DOCS.items() if args.docs is not None else ():
        target = args.docs / path
        with atomic_write(target, "w") as fh:
            fh.write(replace_block(target.read_text(), {"markdown": markdown, "headline": headline}[kind](results)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
