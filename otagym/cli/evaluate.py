"""``otagym evaluate TASK POLICY``: a policy's normalised score on a benchmark task's frozen evaluation set, beside the
task's stored reference scores.

POLICY is an analytic policy's name (the task's references and what else its scheme offers,
:meth:`baselines.benchmark.SchemeBenchmark.analytic_policies`), an SB3 ``model.zip`` (``otagym train``'s, with
its ``run.json``, or any SB3 PPO/SAC/TD3/TRPO/ARS model of the task's spaces), an rl_zoo3 log folder (its
``best_model.zip``, else the one ``.zip`` in it) or ``module:function``, a Python callable from the observation batch
(N, obs_dim) to the env's actions (N,) or (N, 1). A receive-scaling analytic policy plays every (nu, seed) of the
task's evaluation set as a cell of :func:`baselines.compare.evaluate_cells`, the computation of ``otagym compare``.
Trained models and callables play the env's own action in the task's env, all realisations of a budget in one
vector env (:func:`baselines.benchmark.play_episodes`), scored against the stored anchors; on receive scaling their
scores equal ``otagym compare``'s of the same model on the same seeds up to the rounding of a network's forward pass
over a batch rather than one observation (``tests/otagym/cli/test_evaluate.py``: within 1e-6). The summary per nu is
rliable's interquartile mean with a stratified-bootstrap 95% CI over the realisations and the probability of improvement
over ``BestConstant`` (the learnability floor).
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
from numpy.typing import NDArray

from baselines.benchmark import EnvActionPolicy, aggregate, play_episodes, scheme_benchmark
from baselines.receive_scaling.compare import PolicySpec, evaluate_cells
from otagym.cli.argtypes import _ranged, positive_int, writable_file
from otagym._io import remove_stale_temporaries, write_json
from otagym.env import OTAPrivacyEnv
from otagym.tasks import (BENCHMARK, COST_TOLERANCE, TASKS, feasible_score, normalized_score, reference_scores,
                          task_scenario)

__all__ = ["PlayedPolicy", "PolicyError", "resolve_policy", "evaluate", "add_evaluate_parser"]


class PolicyError(RuntimeError):
    """A policy failed while it played (it raised, or returned other than one action per observation); the message
    names the policy."""


class PlayedPolicy(EnvActionPolicy):
    """A trained model's or a callable's env actions, ``function(observation batch (N, obs_dim)) -> actions (N,) or
    (N, 1)``, with any failure raised as :class:`PolicyError` naming ``label`` (the policy as the user gave it)."""

    def __init__(self, function: Callable[[NDArray], Any], label: str) -> None:
        super().__init__(function)
        self.label = label

    def act(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        try:
            action = super().act(observation, info)
        except Exception as err:  # noqa: BLE001 - any error of the user's code, in one line
            raise PolicyError(f"policy {self.label!r} raised {type(err).__name__}: {err}") from err
        if action.shape[0] != len(observation):
            raise PolicyError(f"policy {self.label!r} returned {action.size} actions for {len(observation)} "
                              "observations (expected one per observation, shape (N,) or (N, 1))")
        return action


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


def _check_spaces(text: str, model: Any, task_id: str) -> None:
    """``ValueError`` naming the mismatch when a model's observation or action space is not the task's."""
    env = OTAPrivacyEnv(**TASKS[task_id].kwargs)
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
    task = TASKS[task_id]
    scheme = scheme_benchmark(task.scheme)
    analytic = scheme.analytic_policies(task_id)
    if text in analytic:
        return text, analytic[text]
    path = Path(text)
    if path.exists():
        from agents.policy import load_model, run_metadata

        model_path = _model_file(path)
        model, name = load_model(model_path), _model_name(model_path)
        # the actions as the model was trained on them
        overrides = scheme.trained_overrides(text, run_metadata(model_path).get("env_kwargs") or {}, task_id)
        _check_spaces(text, model, task_id)
        return name, (lambda: PlayedPolicy(lambda obs: model.predict(obs, deterministic=True)[0], text), overrides)
    if re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", text):
        module, _, name = text.partition(":")
        try:
            function = getattr(importlib.import_module(module), name)
        except Exception as err:  # noqa: BLE001 - importing the user's module runs its code: any error, in one line
            raise ValueError(f"policy {text!r}: cannot import {name} from {module} ({type(err).__name__}: "
                             f"{err})") from None
        if not callable(function):
            raise ValueError(f"policy {text!r}: {module}.{name} is not callable")
        return f"{module}.{name}", (lambda: PlayedPolicy(function, text), {})
    raise ValueError(f"policy must be an analytic policy of {task_id} {sorted(analytic)}, an existing model .zip or "
                     f"rl_zoo3 log folder, or module:function; got {text!r}")


def evaluate(task_id: str, spec: Any, seeds: tuple[int, ...] | None = None
             ) -> tuple[dict[str, list[float]], dict[str, list[float]] | None]:
    """The normalised score of ``spec``'s policy (:func:`resolve_policy`'s) on each evaluation realisation, per
    budget (keyed ``str(nu)``), and on the constrained tasks each episode's cost over the task's cost limit (at most
    1 where the constraint holds; receive scaling's budget mode meets it by construction: None). All realisations of
    a budget play in one vector env: a receive-scaling analytic policy (a :class:`~baselines.compare.PolicySpec`) as
    ``otagym compare``'s cells, any other policy in the task's env (:func:`~baselines.benchmark.play_episodes`),
    scored against the stored anchors (:func:`otagym.tasks.normalized_score`)."""
    task = TASKS[task_id]
    seeds = task.eval_seeds if seeds is None else seeds
    scores, costs = {}, {}
    for nu in task.eval_nus:
        key = str(float(nu))
        if isinstance(spec, PolicySpec):
            results = evaluate_cells(task_scenario(task_id), spec, [(nu, s) for s in seeds])
            scores[key] = [r["score"] for r in results]
            costs[key] = [r["cost_mean"] / nu for r in results]  # info["cost"] = c_t / nu
            continue
        factory, overrides = spec
        played = play_episodes(factory(), task_id, seeds, nu=nu if task.budget == "nu" else None, **overrides)
        scores[key] = normalized_score(task_id, nu, seeds, played.returns).tolist()
        costs[key] = played.cost_ratios.tolist()
    return scores, costs if task.constrained else None


def _run(args: argparse.Namespace) -> int:
    try:
        name, spec = resolve_policy(args.policy, args.task)
    except ValueError as err:
        print(f"otagym evaluate: error: {err}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path("results") / "evaluate" / args.task.split("/")[-1] / f"{name}.json"
    try:  # before any work (--out itself was checked by argparse; the default path is checked here)
        writable_file(str(out))
    except argparse.ArgumentTypeError as err:
        print(f"otagym evaluate: error: argument --out: {err}", file=sys.stderr)
        return 2
    if out.parent.is_dir():
        remove_stale_temporaries(out.parent)  # what an evaluation killed mid-write left
    task = TASKS[args.task]
    seeds = task.eval_seeds[:args.seeds]
    try:
        scores, costs = evaluate(args.task, spec, seeds)
    except PolicyError as err:
        print(f"otagym evaluate: error: {err}", file=sys.stderr)
        return 1
    stored = reference_scores(args.task)
    index = [stored["seeds"].index(s) for s in seeds]
    feasible = args.task in BENCHMARK  # the suite's score: an episode over its cost limit is worth at most 0
    summary, lines = {}, []
    header = (f"{task.budget:>5}  {name + ' IQM [95% CI]':>30} {'mean':>8} {'CVaR 10%':>9} {'worst':>9} "
              f"{'P(>BestConstant)':>17}")
    refs = [r for r in stored["scores"] if r != name]
    lines.append(header + "".join(f" {r:>16}" for r in refs))
    for nu in task.eval_nus:
        key = str(float(nu))
        table = {r: np.array([stored["scores"][r][key]])[:, index] for r in refs} | {name: np.array([scores[key]])}
        if feasible:
            table = {r: feasible_score(table[r], np.array([stored["cost_ratios"][r][key]])[:, index]) for r in refs}
            table[name] = feasible_score([scores[key]], [costs[key]])
        stats = aggregate(table, "BestConstant", compared=(name,), reps=args.reps)
        summary[key] = stats
        own = stats[name]
        ci = f"{own['iqm']:.2f} [{own['iqm_ci'][0]:.2f}, {own['iqm_ci'][1]:.2f}]"
        p = "-" if own["p_improve"] is None else f"{own['p_improve']:.2f}"
        lines.append(f"{nu:>5g}  {ci:>30} {own['mean']:8.2f} {own['cvar10']:9.2f} {own['worst']:9.2f} {p:>17}"
                     + "".join(f" {stats[r]['iqm']:16.2f}" for r in refs))
    print(f"{args.task}: {name} on {len(seeds)} evaluation realisations per {task.budget} ("
          + ("feasible score: an episode over its cost limit scores at most 0; " if feasible else "")
          + f"normalised score: 0 = {task.anchors[0]}, 100 = {task.anchors[1]} on the same realisation; the "
          "references' columns are their IQMs on the same realisations)"
          + ("" if len(seeds) == len(task.eval_seeds) else f"; a quick look: the benchmark's number is on all "
             f"{len(task.eval_seeds)}"))
    print("\n".join(lines))
    for key, ratios in (costs or {}).items():
        over = int(np.sum(np.asarray(ratios) > 1.0 + COST_TOLERANCE))  # a ratio's last bits are rounding
        print(f"{task.budget} = {float(key):g}: episode cost / limit {np.mean(ratios):.4f} on average (max "
              f"{np.max(ratios):.4f}); over the limit on {over} of {len(ratios)} realisations")
    write_json(out, {"task": args.task, "policy": args.policy, "name": name, "seeds": list(seeds),
                     "scores": scores, "cost_ratios": costs, "summary": summary})
    print(f"wrote {out}")
    return 0


#: The number of evaluation realisations to play: 1 (a smoke test; one realisation has no interval) to the largest
#: evaluation set's.
_MOST_SEEDS = max(len(t.eval_seeds) for t in TASKS.values())
_evaluation_count = _ranged(int, lambda v: 1 <= v <= _MOST_SEEDS, f"an integer in [1, {_MOST_SEEDS}]")


def add_evaluate_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="score a policy on a benchmark task's frozen evaluation set")
    p.add_argument("task", choices=sorted(TASKS), help="the benchmark task id")
    p.add_argument("policy", help="an analytic policy name, an SB3 model.zip, an rl_zoo3 log folder or "
                   "module:function (observation batch -> actions)")
    p.add_argument("--out", type=writable_file, default=None,
                   help="the JSON to write, checked before any work (default results/evaluate/<task>/<policy>.json)")
    p.add_argument("--reps", type=positive_int, default=2000, help="bootstrap resamples of the CIs (default 2000)")
    p.add_argument("--seeds", type=_evaluation_count, default=_MOST_SEEDS,
                   help="play only the first K evaluation realisations of the task, a quick look (default: all of "
                   "them, 128 on the benchmark suite, 32 on the formulation tasks)")
    p.set_defaults(func=_run)
