"""Results one can report: the result file ``otagym evaluate`` writes (``otagym/data/result.schema.json``), the one
number per task and for the suite, and ``otagym report FILE...``, which checks result files and prints the headline.

**The task's number** (:func:`task_score`): the interquartile mean of the episode scores pooled over the runs
(training seeds), the budgets and the realisations, every (budget, realisation) one of rliable's "tasks", with its
stratified-bootstrap 95% CI; on the benchmark suite the score is the feasible score (an episode over its cost limit
scores below every feasible one, :func:`otagym.tasks.feasible_score`). Beside it: the mean, the CVaR at 10% and the
worst episode of the same pool, and the share of episodes over the limit. **The suite's number**: the same statistics pooled over the four suite tasks' (budget,
realisation) columns, every task's result with the same number of runs on its frozen evaluation set.

**A submission** (docs/benchmark.md, "Report a result") is a result file per suite task with at least
:data:`MIN_RUNS` runs on the frozen evaluation set and the environment steps each run trained for stated;
``otagym report`` says which of these a file misses, and refuses a file that does not follow the schema or whose
numbers are not its scores'.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from otagym.tasks import BENCHMARK, COST_TOLERANCE, DEVICE_TASKS, feasible_score, registered_task

__all__ = ["SCHEMA", "SCHEMA_PATH", "MIN_RUNS", "ResultError", "pooled_table", "task_score", "check_result",
           "submission_gaps", "wide", "interval", "add_report_parser"]

#: The schema's name in every result file.
SCHEMA = "otagym-result/2"
#: The JSON Schema of a result file.
SCHEMA_PATH = Path(__file__).resolve().parents[1] / "data" / "result.schema.json"
#: The training seeds (independent runs) a submission pools, as the project's own agents do.
MIN_RUNS = 5


class ResultError(ValueError):
    """A result file that does not follow the schema, or whose numbers are not its scores'."""


def pooled_table(task_id: str, scores: dict[str, Any], cost_ratios: dict[str, Any] | None,
                 seeds: Any) -> tuple[Any, Any]:
    """(runs, budgets x realisations) arrays of the scores as the task ranks them (the suite's feasible score, against
    the violation floor on the realisation of each of ``seeds``) and of the cost ratios (None where the task cannot be
    over its limit), the budgets in the task's order."""
    keys = [str(float(nu)) for nu in registered_task(task_id).eval_nus]
    table = np.concatenate([np.asarray(scores[k], dtype=float) for k in keys], axis=1)
    if cost_ratios is None:
        return table, None
    costs = np.concatenate([np.asarray(cost_ratios[k], dtype=float) for k in keys], axis=1)
    if task_id not in BENCHMARK:
        return table, costs
    from baselines.benchmark import violation_floor_scores

    floor = np.concatenate([violation_floor_scores(task_id, float(k), list(seeds)) for k in keys])
    return feasible_score(table, costs, floor), costs


def task_score(table: Any, costs: Any | None, reps: int = 2000) -> dict[str, Any]:
    """The one number of a task (or of the suite, its tasks' columns side by side): the IQM of ``table`` (runs,
    columns) with rliable's stratified-bootstrap 95% CI (``reps`` resamples; 0: no CI), the mean, the CVaR 10% and
    the worst score, and the share of episodes over the cost limit (``costs``, same shape; None: not constrained)."""
    from baselines.benchmark import aggregate, cvar, iqm_of

    table = np.asarray(table, dtype=float)
    ci = aggregate({"result": table}, reps=reps)["result"]["iqm_ci"] if reps else None
    return {"iqm": iqm_of(table), "iqm_ci": ci, "mean": float(table.mean()), "cvar10": cvar(table),
            "worst": float(table.min()),
            "over_limit_share": None if costs is None else float(np.mean(np.asarray(costs) > 1.0 + COST_TOLERANCE))}


def _schema_errors(result: Any) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))
    return [f"{'/'.join(str(p) for p in err.absolute_path) or '(top)'}: {err.message}"
            for err in sorted(validator.iter_errors(result), key=lambda e: list(e.absolute_path))]


def check_result(result: Any) -> None:
    """``ResultError`` naming the field when ``result`` does not follow the schema, is not of a registered task's
    budgets and realisations (runs x realisations per budget), or states a task score that is not its scores'
    (within 1e-9; the CI, a bootstrap, is not recomputed)."""
    if isinstance(result, dict) and result.get("schema") == "otagym-result/1":
        raise ResultError("schema: otagym-result/1 capped an episode over its cost limit at 0; the suite now ranks it "
                          f"below every feasible one ({SCHEMA}): run otagym evaluate again")
    errors = _schema_errors(result)
    if errors:
        raise ResultError("does not follow otagym/data/result.schema.json: " + "; ".join(errors[:3]))
    task_id = result["task"]
    try:
        task = registered_task(task_id)
    except ValueError as err:
        raise ResultError(f"task: {err}") from None
    keys = [str(float(nu)) for nu in task.eval_nus]
    shape = (result["runs"], len(result["seeds"]))
    for field in ("policies", "trained"):
        if field in result and len(result[field]) != result["runs"]:
            raise ResultError(f"{field}: must have one entry a run ({result['runs']}); got {len(result[field])}")
    for field in ("scores", "cost_ratios"):
        if field == "cost_ratios" and result[field] is None:
            if task.constrained:
                raise ResultError(f"cost_ratios: {task_id} is constrained: its episodes' cost ratios are required")
            continue
        if sorted(result[field]) != sorted(keys):
            raise ResultError(f"{field}: must have the budgets {keys} of {task_id}; got {sorted(result[field])}")
        for key in keys:
            if np.shape(result[field][key]) != shape:
                raise ResultError(f"{field}/{key}: must be runs x realisations {shape}; got "
                                  f"{np.shape(result[field][key])}")
    table, costs = pooled_table(task_id, result["scores"], result["cost_ratios"], result["seeds"])
    stated = result["task_score"]
    for key, value in task_score(table, costs, reps=0).items():
        same = value is None and stated[key] is None or (
            value is not None and stated[key] is not None and np.isclose(value, stated[key], rtol=1e-9, atol=1e-9))
        if key != "iqm_ci" and not same:
            raise ResultError(f"task_score/{key}: the scores give {value}; the file states {stated[key]}")


def submission_gaps(result: dict[str, Any]) -> list[str]:
    """What a checked result misses to be a submission: the suite's task (or a devices-as-agents task, a benchmark of
    its own), its frozen evaluation set, at least :data:`MIN_RUNS` runs, the environment steps stated; a policy
    that trained for none (``env_steps`` 0: an analytic policy) is a reference, which pools no training seeds."""
    task = registered_task(result["task"])
    gaps = []
    if task.id not in BENCHMARK and task.id not in DEVICE_TASKS:
        gaps.append(f"{task.id} is not a task of the benchmark suite")
    if not result["frozen_seeds"] or list(result["seeds"]) != list(task.eval_seeds):
        gaps.append(f"not on the whole frozen evaluation set ({task.eval_seeds[0]}..{task.eval_seeds[-1]})")
    if result["env_steps"] == 0:
        gaps.append("an analytic policy is a reference (it trained for no steps)")
    elif result["runs"] < MIN_RUNS:
        gaps.append(f"{result['runs']} run(s): a submission pools at least {MIN_RUNS} training seeds")
    if result["env_steps"] is None:
        gaps.append("env_steps unknown: state the steps each run trained for (otagym evaluate --env-steps)")
    trained = result.get("trained") or []
    others = sorted({r["task"] for r in trained if r["task"] not in (None, task.id)})
    if others:
        gaps.append(f"runs trained on another task ({', '.join(others)})")
    seeds = [r["seed"] for r in trained if r["seed"] is not None]
    if len(set(seeds)) < len(seeds):
        gaps.append("runs share a training seed: a submission pools independent ones")
    return gaps


def wide(stats: dict[str, Any]) -> bool:
    """Whether the IQM's 95% CI (``stats["iqm_ci"]``) is wider than +-10 points: a number to report with care."""
    lo, hi = stats["iqm_ci"]
    return bool(hi - lo > 20.0)


def interval(stats: dict[str, Any], digits: int = 1) -> str:
    """``IQM [lo, hi]``, marked "(wide)" where the CI is wider than +-10 points (:func:`wide`)."""
    lo, hi = stats["iqm_ci"]
    return f"{stats['iqm']:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]" + (" (wide)" if wide(stats) else "")


#: The columns of ``otagym report``'s table, after the row's label.
_COLUMNS = ("IQM [95% CI]", "CVaR 10%", "worst", "over", "runs", "env steps")


def _cells(label: str, stats: dict[str, Any], runs: int, steps: Any) -> list[str]:
    """A row of ``otagym report``'s table (:data:`_COLUMNS`)."""
    over = "-" if stats["over_limit_share"] is None else f"{100 * stats['over_limit_share']:.1f}%"
    return [label, interval(stats), f"{stats['cvar10']:.1f}", f"{stats['worst']:.1f}", over, str(runs),
            "-" if steps is None else f"{steps:,}"]


def _table(rows: list[list[str]]) -> list[str]:
    """Rows as lines, each column as wide as its widest cell (labels left, numbers right)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join([row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:]))]).rstrip()
            for row in rows]


def _suite(results: list[dict[str, Any]], reps: int) -> tuple[list[list[str]], list[str]]:
    """The suite's rows, one per agent whose submissions cover the suite's tasks with one number of runs (a suite's
    number is one agent's), and what the other agents miss."""
    agents: dict[str, dict[str, Any]] = {}
    for r in results:
        if r["task"] in BENCHMARK and not submission_gaps(r):
            agents.setdefault(r["name"], {})[r["task"]] = r
    rows, missing = [], []
    for name, suite in agents.items():
        runs = sorted({r["runs"] for r in suite.values()})
        if set(suite) == set(BENCHMARK) and len(runs) == 1:
            tables = [pooled_table(t, suite[t]["scores"], suite[t]["cost_ratios"], suite[t]["seeds"])
                      for t in BENCHMARK]
            stats = task_score(np.concatenate([t for t, _ in tables], axis=1),
                               np.concatenate([c for _, c in tables], axis=1), reps=reps)
            rows.append(_cells(f"suite ({len(BENCHMARK)} tasks pooled): {name}", stats, runs[0], None))
        else:
            lacking = sorted(set(BENCHMARK) - set(suite))
            missing.append(f"suite score of {name}: needs its submission on each of the {len(BENCHMARK)} suite tasks "
                           "with the same number of runs; "
                           + (f"it has none for {lacking}" if lacking else f"its runs are {runs}"))
    if not agents:
        missing.append(f"suite score: needs an agent's submission on each of the {len(BENCHMARK)} suite tasks; none "
                       "here")
    return rows, missing


def _run(args: argparse.Namespace) -> int:
    results = []
    for path in args.results:
        try:
            result = json.loads(Path(path).read_text())
            check_result(result)
        except (OSError, json.JSONDecodeError, ResultError) as err:
            print(f"otagym report: error: {path}: {err}", file=sys.stderr)
            return 2
        results.append((path, result))
    suite_rows, missing = _suite([r for _, r in results], args.reps)
    rows = [_cells(f"{r['task'].split('/')[-1]}: {r['name']}", r["task_score"], r["runs"], r["env_steps"])
            for _, r in results]  # task: agent
    print("\n".join(_table([["task: agent", *_COLUMNS], *rows, *suite_rows])))
    if any(row[1].endswith("(wide)") for row in rows + suite_rows):
        print("(wide): a 95% CI wider than +-10 points")
    for path, result in results:
        for gap in submission_gaps(result):
            print(f"{path}: not a submission: {gap}")
    for line in missing:
        print(line)
    return 0


def add_report_parser(sub: argparse._SubParsersAction, help: str) -> None:
    p = sub.add_parser("report", help=help)
    p.add_argument("results", nargs="+", help="result JSON files (otagym evaluate --out), one per task")
    p.add_argument("--reps", type=int, default=2000, help="bootstrap resamples of the suite's CI (default 2000)")
    p.set_defaults(func=_run)
