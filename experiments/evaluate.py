"""``otagym evaluate TASK POLICY``: a policy's normalised score on a benchmark task's frozen evaluation set, beside the
task's stored reference scores.

POLICY is an analytic policy's name (receive scaling: the task's references,
:func:`baselines.benchmark.receive_scaling_references`, and ``baselines.compare.POLICIES``; CDPB and anonymous OTA:
the task's references, :func:`baselines.benchmark.scheme_references`), an SB3 ``model.zip`` (``otagym train``'s, with
its ``run.json``, or any SB3 PPO/SAC/TD3/TRPO model of the task's action space), an rl_zoo3 log folder (its
``best_model.zip``, else the one ``.zip`` in it) or ``module:function``, a Python callable from the observation batch
(N, obs_dim) to the env's actions (N,) or (N, 1). On receive scaling every (nu, seed) of the task's evaluation set is
a cell computed by :func:`baselines.compare.evaluate_cells`, the computation of ``otagym compare``, so the numbers
are the same as ``otagym compare``'s on the same seeds; on the other tasks the realisations play as one batched
episode (:func:`baselines.benchmark.task_scores`). The summary per nu is rliable's interquartile mean with a stratified-bootstrap
95% CI over the realisations and the probability of improvement over ``BestConstant`` (the learnability floor).
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

from baselines.benchmark import (EnvActionPolicy, aggregate, play_episodes, receive_scaling_references,
                                 scheme_references)
from baselines.compare import POLICIES, PolicySpec, evaluate_cells
from baselines.policies import ActionPolicy
from experiments.argtypes import _ranged, positive_int
from otagym._io import write_json
from otagym.tasks import EVALUATION_SEEDS, TASKS, normalized_score, reference_scores, task_scenario

__all__ = ["FunctionPolicy", "resolve_policy", "evaluate", "formulation", "add_evaluate_parser"]


class FunctionPolicy(ActionPolicy):
    """A Python callable from the observation batch (N, obs_dim) to env actions (N,) or (N, 1), played with the
    action semantics of ``env_kwargs`` (a task's settings)."""

    def __init__(self, function: Callable[[NDArray], Any], nu: Any = None,
                 env_kwargs: dict[str, Any] | None = None) -> None:
        super().__init__(nu, env_kwargs=env_kwargs or {})
        self.function = function

    def action(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        return np.asarray(self.function(np.asarray(observation, dtype=np.float32)), dtype=float)


def formulation(env_kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """What receive-scaling env arguments make of the problem, defaults filled in: (scenario, reward mode, action
    type, fading, correlation, coherence rounds)."""
    mode = env_kwargs.get("reward_mode", "budget")
    return (env_kwargs.get("scenario", "paper-mnist"), mode,
            env_kwargs.get("action_type", "price" if mode == "budget" else "normalized"),
            env_kwargs.get("fading", "iid"), env_kwargs.get("correlation"), env_kwargs.get("coherence_rounds"))


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


def resolve_policy(text: str, task_id: str) -> tuple[str, Any]:
    """The name and the policy of POLICY (see the module docstring): on receive scaling a
    :class:`~baselines.compare.PolicySpec`, on the other tasks ``(factory, env overrides)`` as
    :func:`~baselines.benchmark.scheme_references` gives them. ``ValueError`` naming what was looked for when it is
    none of the forms."""
    task = TASKS[task_id]
    analytic = ({**POLICIES, **receive_scaling_references(task_id)} if task.scheme == "receive_scaling" else
                scheme_references(task_id))
    if text in analytic:
        return text, analytic[text]
    path = Path(text)
    if path.exists():
        from agents.policy import AgentPolicy, load_model, run_metadata

        model_path = _model_file(path)
        model, name = load_model(model_path), _model_name(model_path)
        if task.scheme != "receive_scaling":
            return name, (lambda: EnvActionPolicy(lambda obs: model.predict(obs, deterministic=True)[0]), {})
        kw = run_metadata(model_path).get("env_kwargs") or dict(task.kwargs)
        trained, asked = formulation(kw)[:3], formulation(task.kwargs)[:3]
        if trained != asked:
            raise ValueError(f"policy {text!r} was trained on scenario, reward_mode, action_type = {trained}, and "
                             f"{task_id} is {asked}: its actions would mean something else here")
        return name, PolicySpec(lambda nu, p: AgentPolicy(model, nu=nu, env_kwargs=kw))
    if re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", text):
        module, _, name = text.partition(":")
        try:
            function = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as err:
            raise ValueError(f"policy {text!r}: cannot import {name} from {module} ({err})") from None
        if not callable(function):
            raise ValueError(f"policy {text!r}: {module}.{name} is not callable")
        if task.scheme != "receive_scaling":
            return name, (lambda: EnvActionPolicy(function), {})
        return name, PolicySpec(lambda nu, p: FunctionPolicy(function, nu, dict(task.kwargs)))
    raise ValueError(f"policy must be an analytic policy of {task_id} {sorted(analytic)}, an existing model .zip or "
                     f"rl_zoo3 log folder, or module:function; got {text!r}")


def evaluate(task_id: str, spec: Any, seeds: tuple[int, ...] = EVALUATION_SEEDS,
             batched: bool = True) -> tuple[dict[str, list[float]], dict[str, list[float]] | None]:
    """The normalised score of ``spec``'s policy (:func:`resolve_policy`'s) on each evaluation realisation, per
    budget (keyed ``str(nu)``), and on the constrained tasks each episode's cost over the task's cost limit (at most
    1 where the constraint holds; receive scaling's budget mode meets it by construction: None). On receive
    scaling, ``batched``: all realisations of a budget in one vector env (analytic policies, whose numbers are the
    same bits either way); else one at a time, as ``otagym compare`` plays trained models and callables (a network's
    forward pass over a batch may round differently from one over a single observation). The other tasks play every
    realisation of a budget in one batched episode."""
    task = TASKS[task_id]
    if task.scheme != "receive_scaling":
        factory, overrides = spec
        scores, costs = {}, {}
        for nu in task.eval_nus:
            played = play_episodes(factory(), task_id, seeds, **overrides)
            scores[str(float(nu))] = normalized_score(task_id, nu, seeds, played.returns).tolist()
            costs[str(float(nu))] = played.cost_ratios.tolist()
        return scores, costs
    scenario = task_scenario(task_id)
    out, costs = {}, {}
    for nu in task.eval_nus:
        cells = [(nu, s) for s in seeds]
        results = (evaluate_cells(scenario, spec, cells) if batched else
                   [evaluate_cells(scenario, spec, [cell])[0] for cell in cells])
        out[str(float(nu))] = [r["score"] for r in results]
        costs[str(float(nu))] = [r["cost_mean"] / nu for r in results]  # info["cost"] = c_t / nu
    return out, costs if task.constrained else None


def _run(args: argparse.Namespace) -> int:
    try:
        name, spec = resolve_policy(args.policy, args.task)
    except ValueError as err:
        print(f"otagym evaluate: error: {err}", file=sys.stderr)
        return 2
    seeds = EVALUATION_SEEDS[:args.seeds]
    scores, costs = evaluate(args.task, spec, seeds, batched=args.policy in POLICIES)
    stored = reference_scores(args.task)
    index = [stored["seeds"].index(s) for s in seeds]
    task = TASKS[args.task]
    summary, lines = {}, []
    header = f"{task.budget:>5}  {name + ' IQM [95% CI]':>30} {'mean':>8} {'P(>BestConstant)':>17}"
    refs = [r for r in stored["scores"] if r != name]
    lines.append(header + "".join(f" {r:>16}" for r in refs))
    for nu in TASKS[args.task].eval_nus:
        key = str(float(nu))
        table = {r: np.array([stored["scores"][r][key]])[:, index] for r in refs} | {name: np.array([scores[key]])}
        stats = aggregate(table, "BestConstant", compared=(name,), reps=args.reps)
        summary[key] = stats
        own = stats[name]
        ci = f"{own['iqm']:.2f} [{own['iqm_ci'][0]:.2f}, {own['iqm_ci'][1]:.2f}]"
        p = "-" if own["p_improve"] is None else f"{own['p_improve']:.2f}"
        lines.append(f"{nu:>5g}  {ci:>30} {own['mean']:8.2f} {p:>17}"
                     + "".join(f" {stats[r]['iqm']:16.2f}" for r in refs))
    print(f"{args.task}: {name} on {len(seeds)} evaluation realisations per {task.budget} (normalised score: 0 = "
          f"{task.anchors[0]}, 100 = {task.anchors[1]} on the same realisation; the references' columns are their "
          "IQMs on the same realisations)"
          + ("" if len(seeds) == len(EVALUATION_SEEDS) else f"; a quick look: the benchmark's number is on all "
             f"{len(EVALUATION_SEEDS)}"))
    print("\n".join(lines))
    for key, ratios in (costs or {}).items():
        over = int(np.sum(np.asarray(ratios) > 1.0 + 1e-9))  # a ratio's last bits are rounding
        print(f"{task.budget} = {float(key):g}: episode cost / limit {np.mean(ratios):.3g} on average (max "
              f"{np.max(ratios):.3g}); over the limit on {over} of {len(ratios)} realisations")
    out = Path(args.out) if args.out else Path("results") / "evaluate" / args.task.split("/")[-1] / f"{name}.json"
    write_json(out, {"task": args.task, "policy": args.policy, "name": name, "seeds": list(seeds),
                     "scores": scores, "cost_ratios": costs, "summary": summary})
    print(f"wrote {out}")
    return 0


#: The number of evaluation realisations to play: 2 (the fewest a CI needs) to all of them.
_evaluation_count = _ranged(int, lambda v: 2 <= v <= len(EVALUATION_SEEDS),
                            f"an integer in [2, {len(EVALUATION_SEEDS)}]")


def add_evaluate_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="score a policy on a benchmark task's frozen evaluation set")
    p.add_argument("task", choices=sorted(TASKS), help="the benchmark task id")
    p.add_argument("policy", help="an analytic policy name, an SB3 model.zip, an rl_zoo3 log folder or "
                   "module:function (observation batch -> actions)")
    p.add_argument("--out", default=None, help="the JSON to write (default results/evaluate/<task>/<policy>.json)")
    p.add_argument("--reps", type=positive_int, default=2000, help="bootstrap resamples of the CIs (default 2000)")
    p.add_argument("--seeds", type=_evaluation_count, default=len(EVALUATION_SEEDS),
                   help=f"play only the first K evaluation realisations, a quick look (default all "
                   f"{len(EVALUATION_SEEDS)}: trained models and callables play one realisation at a time, as in "
                   "otagym compare, about 1 s each per nu)")
    p.set_defaults(func=_run)
