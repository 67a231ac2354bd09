"""``otagym evaluate TASK POLICY...``: a policy's normalised score on a benchmark task's frozen evaluation set (or on
any realisations, ``--seeds A:B``), beside the task's reference scores, written as a result file
(:mod:`otagym.cli.report`); several policies are the runs (training seeds) of one agent, pooled.

POLICY is an analytic policy's name (the task's references and what else its scheme offers,
:meth:`baselines.benchmark.SchemeBenchmark.analytic_policies`), an SB3 ``model.zip`` (``otagym train``'s, with
its ``run.json``, or any SB3 PPO/SAC/TD3/TRPO/ARS model of the task's spaces), an rl_zoo3 log folder (its
``best_model.zip``, else the one ``.zip`` in it) or ``module:function``, a Python callable from the observation batch
(N, obs_dim) to the env's actions (N,) or (N, 1). Every policy is played by the one loop
(:func:`baselines.benchmark.play_episodes`, all realisations of a budget in one vector env). A receive-scaling
analytic policy is calibrated on the realisations first, as ``otagym compare``'s cells are
(:meth:`baselines.receive_scaling.compare.PolicySpec.calibrated`), and scored from its leakage, as a cell is.
Trained models and callables play the env's own action in the task's env, scored against the stored anchors; on
receive scaling their scores equal ``otagym compare``'s of the same model on the same seeds up to the rounding of a
network's forward pass over a batch rather than one observation (``tests/otagym/cli/test_evaluate.py``: within
1e-6). The summary per nu is rliable's interquartile mean with a stratified-bootstrap 95% CI over the realisations and
the probability of improvement over ``BestConstant`` (the learnability floor).
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from otagym import __version__
from otagym.cli.argtypes import (CALLABLE, add_torch_threads_argument, import_callable, non_negative_int, positive_int,
                                 writable_file)
from otagym.cli.report import SCHEMA, interval, pooled_table, submission_gaps, task_score
from otagym._io import remove_stale_temporaries, write_json
from otagym.schemes import DEFAULT_SCHEME
from otagym.tasks import BENCHMARK, COST_TOLERANCE, DEVICE_TASKS, TASKS, feasible_score, registered_task

__all__ = ["resolve_policy", "evaluate", "add_evaluate_parser"]


def _model_file(path: Path) -> Path:
    """An SB3 model file, or the model of an rl_zoo3 log folder (``best_model.zip``, else its one ``.zip``)."""
    if path.is_file():
        return path
    best = sorted(path.rglob("best_model.zip"))
    found = best or sorted(p for p in path.rglob("*.zip") if "checkpoint" not in p.name and "rl_model" not in p.name)
    if len(found) != 1:
        raise ValueError(f"policy {str(path)!r}: expected one best_model.zip or one model .zip in the folder; found "
                         f"{[str(p) for p in found] or 'none'}")
    return found[0]


def _model_name(model_path: Path) -> str:
    """A trained model's name in the results: its file's stem, or its folder's name where the file has SB3's or
    rl_zoo3's generic name (``model.zip``, ``best_model.zip``), so that ``agents/zoo/iid/ppo/model.zip`` and
    ``.../trpo/model.zip`` are ``ppo`` and ``trpo`` and do not write the same results file."""
    return model_path.parent.name if model_path.stem in ("model", "best_model") else model_path.stem


def _task_env(task_id: str, overrides: dict[str, Any]) -> Any:
    """The task's single env as a policy plays it (``overrides``: a trained model's action semantics)."""
    from otagym.env import OTAPrivacyEnv

    return OTAPrivacyEnv(**{**TASKS[task_id].kwargs, **overrides})


def _check_spaces(text: str, model: Any, task_id: str, env: Any) -> None:
    """``ValueError`` naming the mismatch when a model's observation or action space is not the task's (``env``)."""
    for what, theirs, ours in (("observation", model.observation_space, env.observation_space),
                               ("action", model.action_space, env.action_space)):
        if theirs.shape != ours.shape:
            raise ValueError(f"policy {text!r} was trained on observations/actions of another env: its {what} shape "
                             f"is {theirs.shape} and {task_id}'s is {ours.shape}")


def resolve_policy(text: str, task_id: str) -> tuple[str, Any]:
    """The name and the policy of POLICY (see the module docstring): an analytic policy as its scheme gives it
    (:meth:`~baselines.benchmark.SchemeBenchmark.analytic_policies`: receive scaling's are
    :class:`~baselines.receive_scaling.compare.PolicySpec`), anything else as ``(factory, env overrides)`` (a
    trained model or a callable: a :class:`PlayedPolicy`, with the overrides its scheme reads from the model's
    ``run.json``, :meth:`~baselines.benchmark.SchemeBenchmark.trained_overrides`).
    A callable is named ``module.function``. ``ValueError`` naming what was looked for when it is none of the
    forms, or naming the mismatch when a model's spaces or formulation are not the task's."""
    from baselines.benchmark import PlayedPolicy, scheme_benchmark

    task = TASKS[task_id]
    scheme = scheme_benchmark(task.scheme)
    analytic = scheme.analytic_policies(task_id)
    if text in analytic:
        return text, analytic[text]
    path = Path(text)
    if path.exists():
        from agents.policy import load_model, run_metadata

        model_path = _model_file(path)
        model, name = load_model(model_path, act_only=True), _model_name(model_path)
        # the actions as the model was trained on them
        overrides = scheme.trained_overrides(text, run_metadata(model_path).get("env_kwargs") or {}, task_id)
        env = _task_env(task_id, overrides)
        _check_spaces(text, model, task_id, env)
        bounds = float(env.action_space.low.min()), float(env.action_space.high.max())
        return name, (lambda: PlayedPolicy(lambda obs: model.predict(obs, deterministic=True)[0], text, *bounds),
                      overrides)
    if CALLABLE.fullmatch(text):
        label, function = import_callable(text)
        space = _task_env(task_id, {}).action_space
        return label, (lambda: PlayedPolicy(function, text, float(space.low.min()), float(space.high.max())), {})
    raise ValueError(f"policy must be an analytic policy of {task_id} {sorted(analytic)}, an existing model .zip or "
                     f"rl_zoo3 log folder, or module:function; got {text!r}")


def evaluate(task_id: str, spec: Any, seeds: Sequence[int] | None = None
             ) -> tuple[dict[str, list[float]], dict[str, list[float]] | None]:
    """The normalised score of ``spec``'s policy (:func:`resolve_policy`'s) on the realisation of each seed (default:
    the task's frozen evaluation set; any seeds), per budget (keyed ``str(nu)``), and on the constrained tasks each
    episode's cost over the task's cost limit (at most 1 where the constraint holds; receive scaling's budget mode
    meets it by construction: None): :meth:`baselines.benchmark.SchemeBenchmark.evaluate` of the task's scheme."""
    from baselines.benchmark import scheme_benchmark

    task = TASKS[task_id]
    seeds = task.eval_seeds if seeds is None else tuple(seeds)
    scores, costs = scheme_benchmark(task.scheme).evaluate(spec, task_id, seeds)
    return scores, costs if task.constrained else None


def _seed_set_line(task: Any, seeds: tuple[int, ...], references: dict[str, Any]) -> str:
    """Which realisations a report is on, in words."""
    span = f"seeds {seeds[0]}..{seeds[-1]}" if seeds == tuple(range(seeds[0], seeds[-1] + 1)) else f"{len(seeds)} seeds"
    if references["frozen"]:
        quick = "" if len(seeds) == len(task.eval_seeds) else (f"; a quick look: the benchmark's number is on all "
                                                                f"{len(task.eval_seeds)}")
        return f"realisations: the frozen evaluation set ({span}){quick}"
    outside = f"realisations: {span}, not the frozen evaluation set ({task.eval_seeds[0]}..{task.eval_seeds[-1]})"
    if references["cache"] is None:
        return f"{outside}: every reference played here"
    return (f"{outside}: the anchors and the floor played here (cached in {references['cache']}); the other "
            "references are stored for the frozen set only")


def task_trained_on(model_path: Any) -> str | None:
    """The task a run was trained on: the one its ``run.json`` names (``otagym train --task``, a device task's
    too), else the task of its scheme with the formulation of its env arguments
    (:meth:`~baselines.benchmark.SchemeBenchmark.formulation`: receive scaling's scenario, reward mode, action and
    fading), if one has them; None without a record."""
    from agents.policy import run_metadata
    from baselines.benchmark import scheme_benchmark

    meta = run_metadata(Path(model_path))
    env_kwargs = meta.get("env_kwargs")
    if meta.get("task") in TASKS or meta.get("task") in DEVICE_TASKS:
        return meta["task"]
    if not env_kwargs:
        return None
    scheme = env_kwargs.get("scheme", DEFAULT_SCHEME)
    formulation = scheme_benchmark(scheme).formulation
    trained = formulation(env_kwargs)
    if trained is None:
        return None
    return next((t.id for t in TASKS.values() if t.scheme == scheme and formulation(t.kwargs) == trained), None)


def _run_record(text: str) -> dict[str, Any]:
    """What is on record of a run: the ``task`` it trained on (:func:`task_trained_on`; else the env id it trained
    on, None where it has no record), its training ``seed``, and the environment steps it trained for,
    ``env_steps``: the whole run's, whichever checkpoint was selected (:func:`_trained_steps`); 0 for an analytic
    policy (it trains for none), None for a callable."""
    path = Path(text)
    if not path.exists():
        return {"task": None, "seed": None, "env_steps": None if CALLABLE.fullmatch(text) else 0}
    from agents.policy import run_metadata

    model = _model_file(path)
    meta = run_metadata(model)
    seed = meta.get("seed")
    return {"task": task_trained_on(model) or meta.get("env_id"), "seed": seed if isinstance(seed, int) else None,
            "env_steps": _trained_steps(meta, model)}


def _trained_steps(meta: dict[str, Any], model: Path) -> int | None:
    """The steps a run trained for, as its record has them: ``otagym train``'s ``trained_timesteps`` (SB3's
    algorithms, a ``--minutes`` budget included; a run stopped before its end: its last segment's), a team's
    ``env_steps``, the batched trainers' ``total_timesteps`` (whole batches), a search's ``episodes`` of its task's
    rounds, else the model file's saved ``num_timesteps`` (an SB3 model, an rl_zoo3 folder's, a team's IPPO); None
    where none says (a saved 0 too: a policy saved without training, such as a CMA-ES search's linear policy, did
    train, on episodes its record does not count)."""
    segments = meta.get("segments") or [{}]
    for steps in (meta.get("trained_timesteps"), segments[-1].get("end_steps"), meta.get("env_steps"),
                  meta.get("total_timesteps")):
        if isinstance(steps, int):
            return steps
    if isinstance(meta.get("episodes"), int) and meta.get("task") in TASKS:
        return meta["episodes"] * TASKS[meta["task"]].max_episode_steps
    try:
        with zipfile.ZipFile(model) as archive:
            return int(json.loads(archive.read("data"))["num_timesteps"]) or None
    except (KeyError, ValueError, OSError, zipfile.BadZipFile):
        return None


def _resolve_runs(args: argparse.Namespace) -> tuple[str, list[Any], list[dict[str, Any]]]:
    """The result's name, each run's policy and its record (:func:`_run_record`); ``ValueError`` naming the policy
    that does not resolve, or one given twice (each entry is one run: an independent training seed). Where a model
    was loaded, torch's thread count is set to ``--torch-threads`` (process-wide)."""
    if args.task in DEVICE_TASKS:
        from otagym.cli.evaluate_devices import resolve_team as resolve
    else:
        resolve = resolve_policy
    seen = {}
    for text in args.policy:
        key = _run_key(text)
        if key in seen:
            raise ValueError(f"policy {text!r} is given twice (as {seen[key]!r}): each entry is one run, an "
                             "independent training seed")
        seen[key] = text
    resolved = [resolve(text, args.task) for text in args.policy]
    if args.torch_threads and "torch" in sys.modules:  # a model was loaded: one thread plays a small MLP fastest
        sys.modules["torch"].set_num_threads(args.torch_threads)
    return args.name or resolved[0][0], [spec for _, spec in resolved], [_run_record(text) for text in args.policy]


def _run_key(text: str) -> str:
    """What makes two POLICY entries one run: the model file an existing path plays (a folder's, rl_zoo3's), else
    the text."""
    path = Path(text)
    if not path.exists():
        return text
    try:
        return str(_model_file(path).resolve())
    except ValueError:  # no model in the folder: resolving the policy names it
        return str(path.resolve())


def _env_steps(args: argparse.Namespace, records: list[dict[str, Any]]) -> int | None:
    """The steps each run trained for: ``--env-steps``, else the runs' own budget where they agree."""
    steps = {record["env_steps"] for record in records}
    return args.env_steps if args.env_steps is not None else (steps.pop() if len(steps) == 1 else None)


def _budget_lines(task: Any, name: str, scores: dict[str, Any], costs: dict[str, Any] | None,
                  stored: dict[str, Any], reps: int) -> tuple[dict[str, Any], list[str]]:
    """The summary per budget (the policy's statistics over runs x realisations, the references' IQMs) and its
    table's lines."""
    from baselines.benchmark import aggregate, improvement, iqm_of

    feasible = task.id in BENCHMARK  # the suite's score: an episode over its cost limit below every feasible one
    refs = [r for r in stored["scores"] if r != name]
    rows = [[task.budget, name + " IQM [95% CI]", "mean", "CVaR 10%", "worst", f"P(>{task.floor})", *refs]]
    summary = {}
    for nu in task.eval_nus:
        key = str(float(nu))
        table = {r: np.array([stored["scores"][r][key]]) for r in refs} | {name: np.array(scores[key])}
        if feasible:
            floor = stored["scores"][task.violation_floor][key]
            table = {r: feasible_score(table[r], np.array([stored["cost_ratios"][r][key]]), floor) for r in refs}
            table[name] = feasible_score(scores[key], costs[key], floor)
        own = aggregate({name: table[name]}, reps=reps)[name]  # the references' columns: IQMs alone
        own["p_improve"], own["p_improve_ci"] = improvement(table, task.floor, (name,)).get(name, (None, None))
        summary[key] = {name: own} | {r: {"iqm": iqm_of(table[r])} for r in refs}
        p = "-" if own["p_improve"] is None else f"{own['p_improve']:.2f}"
        rows.append([f"{nu:g}", interval(own, digits=2), *(f"{own[k]:.2f}" for k in ("mean", "cvar10", "worst")), p,
                     *(f"{summary[key][r]['iqm']:.2f}" for r in refs)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(f"{cell:>{w}}" for cell, w in zip(row, widths)) for row in rows]
    if any(r[1].endswith("(wide)") for r in rows[1:]):
        lines.append("(wide): a 95% CI wider than +-10 points")
    return summary, lines


def _playing(task_id: str) -> tuple[Any, Any, str]:
    """How a task's runs are played: its references on seeds (:func:`baselines.benchmark.seed_references`' form), a
    run's scores and costs (:func:`evaluate`'s), and what a score means."""
    if task_id in DEVICE_TASKS:
        from otagym.cli.evaluate_devices import SCORE_NOTE, device_seed_references, evaluate_team

        return device_seed_references, evaluate_team, SCORE_NOTE.format(*DEVICE_TASKS[task_id].anchors)
    from baselines.benchmark import seed_references

    task = TASKS[task_id]
    feasible = (f"feasible score: an episode over its cost limit scores below {task.violation_floor}'s, by 100 x "
                "its cost over the limit; " if task_id in BENCHMARK else "")
    return (seed_references, evaluate,
            f"{feasible}normalised score: 0 = {task.anchors[0]}, 100 = {task.anchors[1]} on the same realisation")


def _run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from baselines.benchmark import PolicyError

    try:
        name, specs, records = _resolve_runs(args)
    except ValueError as err:
        print(f"otagym evaluate: error: {err}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path("results") / "evaluate" / args.task.split("/")[-1] / f"{name}.json"
    try:  # before any work (--out itself was checked by argparse; the default path is checked here)
        writable_file(str(out))
    except argparse.ArgumentTypeError as err:
        print(f"otagym evaluate: error: argument --out: {err}", file=sys.stderr)
        return 2
    if out.exists() and not args.force:  # nothing a user made is replaced without being asked
        print(f"otagym evaluate: error: argument --out: {out} exists; give --force to replace it, or another --out",
              file=sys.stderr)
        return 2
    if out.parent.is_dir():
        remove_stale_temporaries(out.parent)  # what an evaluation killed mid-write left
    task = registered_task(args.task)
    references, play, score_note = _playing(args.task)
    seeds = task.eval_seeds[:args.seeds] if isinstance(args.seeds, int) else args.seeds
    scores = {str(float(nu)): [] for nu in task.eval_nus}
    costs = {key: [] for key in scores} if task.constrained else None
    with tqdm(total=len(specs) + 1, desc=f"{name} on {len(seeds)} realisations", unit="run", disable=None,
              leave=False) as bar:
        bar.set_postfix_str("references")
        stored = references(args.task, seeds)
        bar.update()
        bar.set_postfix_str(f"playing each {task.budget}")
        for spec in specs:
            try:
                run_scores, run_costs = play(args.task, spec, seeds)
            except PolicyError as err:
                print(f"otagym evaluate: error: {err}", file=sys.stderr)
                return 1
            bar.update()
            for key in scores:
                scores[key].append(run_scores[key])
                if costs is not None:
                    costs[key].append(run_costs[key])
    summary, lines = _budget_lines(task, name, scores, costs, stored, args.reps)
    headline = task_score(*pooled_table(task.id, scores, costs, seeds), reps=args.reps)
    runs = f"{len(specs)} runs pooled, " if len(specs) > 1 else ""
    print(f"{args.task}: {name} on {len(seeds)} realisations per {task.budget} ({runs}{score_note}; the references' "
          "columns are their IQMs on the same realisations)")
    print(_seed_set_line(task, tuple(seeds), stored))
    print("\n".join(lines))
    for key, ratios in (costs or {}).items():
        over = int(np.sum(np.asarray(ratios) > 1.0 + COST_TOLERANCE))  # a ratio's last bits are rounding
        print(f"{task.budget} = {float(key):g}: episode cost / limit {np.mean(ratios):.4f} on average (max "
              f"{np.max(ratios):.4f}); over the limit on {over} of {np.size(ratios)} episodes")
    over = "" if headline["over_limit_share"] is None else f", over the limit on {headline['over_limit_share']:.1%}"
    print(f"task score (IQM over runs, budgets and realisations): {interval(headline, digits=2)}, CVaR 10% "
          f"{headline['cvar10']:.2f}, worst {headline['worst']:.2f}{over}")
    result = {"schema": SCHEMA, "otagym_version": __version__, "task": args.task, "name": name,
              "policies": list(args.policy), "runs": len(specs), "env_steps": _env_steps(args, records),
              "trained": [{k: record[k] for k in ("task", "seed")} for record in records], "seeds": list(seeds),
              "frozen_seeds": stored["frozen"], "scores": scores, "cost_ratios": costs, "summary": summary,
              "task_score": headline}
    write_json(out, result)
    gaps = submission_gaps(result)
    print(f"wrote {out}" + ("" if not gaps else " (not a submission: " + "; ".join(gaps) + ")"))
    return 0


#: The number of evaluation realisations to play: 1 (a smoke test; one realisation has no interval) to the largest
#: evaluation set's.
_MOST_SEEDS = max(len(t.eval_seeds) for t in TASKS.values())


def _seed_set(text: str) -> int | tuple[int, ...]:
    """``--seeds``: ``K``, the first K realisations of the frozen evaluation set (1 to the largest set's), or
    ``A:B``, the realisations of seeds A, A+1, ..., B-1 (Python's range; 0 <= A < B, at most 4,096 of them)."""
    first, colon, last = text.partition(":")
    try:
        if not colon and 1 <= int(first) <= _MOST_SEEDS:
            return int(first)
        if colon and 0 <= int(first) < int(last) <= int(first) + 4096:
            return tuple(range(int(first), int(last)))
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"must be K, an integer in [1, {_MOST_SEEDS}] (the first K realisations of the "
                                     "frozen evaluation set), or A:B, seeds A to B-1 (0 <= A < B <= A + 4096); got "
                                     f"{text!r}")


def add_evaluate_parser(sub: argparse._SubParsersAction, help: str) -> None:
    p = sub.add_parser("evaluate", help=help)
    p.add_argument("task", choices=sorted(TASKS) + sorted(DEVICE_TASKS), help="the benchmark task id (a "
                   "devices-as-agents task too)")
    p.add_argument("policy", nargs="+", help="an analytic policy name, an SB3 model.zip, an rl_zoo3 log folder or "
                   "module:function (observation batch -> actions); on a devices-as-agents task a reference, an "
                   "otagym train --algo ippo model.zip or module:function (the devices' observations (N, K, E) -> "
                   "actions (N, K, A)); several: one per training seed, pooled")
    p.add_argument("--name", default=None, help="the result's name (default: the first policy's)")
    p.add_argument("--env-steps", type=non_negative_int, default=None,
                   help="the environment steps each run trained for, stated in the result (default: each run's "
                   "training budget, from its run.json or its SB3 model's num_timesteps, where they agree)")
    p.add_argument("--out", type=writable_file, default=None,
                   help="the JSON to write, checked before any work (default results/evaluate/<task>/<policy>.json); "
                   "an existing one is replaced only with --force")
    p.add_argument("--force", action="store_true", help="replace the --out file if it exists")
    p.add_argument("--reps", type=positive_int, default=2000, help="bootstrap resamples of the CIs (default 2000)")
    p.add_argument("--seeds", type=_seed_set, default=_MOST_SEEDS,
                   help="K: the first K realisations of the task's frozen evaluation set, a quick look (default: all "
                   "of them, 128 on the benchmark suite, 32 on the formulation tasks); A:B: the realisations of "
                   "seeds A to B-1, any seeds (their anchors are played once and cached)")
    add_torch_threads_argument(p, "play")
    p.set_defaults(func=_run)
