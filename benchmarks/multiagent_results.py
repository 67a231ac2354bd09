"""Devices as agents: the room on a device task (``--task``, :data:`otagym.tasks.DEVICE_TASKS`) and the learned
teams (IPPO, MAPPO) against its references.

1. The references (:func:`baselines.cdpb.devices.device_references`): the paper's rule for every device, the
   paper's planner per device (the threshold of its Stage-II rho at the task's tau, where above the server's), uniform
   random, and at the actions the task stores (:attr:`otagym.tasks.DeviceTask.reference_actions`) the best action
   common to all devices (the floor) and the best action of each device (the computed ceiling), which a search on the
   validation realisations (32) chose (:func:`~baselines.cdpb.devices.best_common_constant`, then
   :func:`~baselines.cdpb.devices.best_per_device_constants` from it: ``--search`` runs it again, 6 to 8 minutes, and
   says whether it finds the stored actions); beside them an upper bound no policy can beat, even with every channel
   known (:func:`~baselines.cdpb.devices.full_csi_bound`: the paper's rule, nobody leaving, no privacy charged).
2. IPPO (SB3 PPO through SuperSuit, parameters shared by the devices, :func:`agents.multiagent.train_ippo`) and
   MAPPO (TorchRL's recipe, a shared actor and a centralised critic, :func:`agents.mappo.train_mappo`), each trained
   with ``--seeds`` training seeds (the task's training seeds) for ``--steps`` device steps each (default: the task's
   ``train_steps``, else 1.5M), one at a time, one torch thread; the final model of each run (no checkpoint
   selection; its validation score is reported).
3. Everything played on the task's 128 evaluation realisations, never used above. Score
   (:func:`otagym.tasks.robust_score`, what ``otagym evaluate`` gives): 0 and 100 the task's anchors
   (:attr:`otagym.tasks.DeviceTask.anchors`: the paper's rule, or the floor where the paper's rule spends every
   budget, and the per-device constants) on the typical realisation: 100 (R - R_0) / IQM(R_100 - R_0), paired per
   realisation over the interquartile mean of the rooms (one realisation's room can be near 0, where a ratio per
   realisation would blow up, and one where every device leaves under the paper's rule is 30 times the typical room,
   which would move a mean). rliable's IQM with its stratified-bootstrap 95% CI, the probability of improvement over
   the best common constant, the mean, CVaR 10% and the worst realisation; the share of episodes in which a device
   spent its budget (and left); the room from the floor to the ceiling in points of the floor's |return|.

``--zoo [DIR]`` ships each team's run with the best validation return to ``<DIR>/<task name>/<algo>/`` (its model
file and ``run.json``; DIR: default ``agents/zoo``; a model already there is replaced only with ``--force``).

Writes ``references.json`` (``search.json`` with ``--search``), ``runs/<algo>/seed_<s>/`` (model, run record,
scores) and ``multiagent_results.json`` to ``--out/<task name>/``; ``--docs`` puts the task's summary into
docs/multiagent_results.json (keyed by task) and rewrites docs/multiagent_results.md from every task's. Rerunning
resumes: references, finished runs and their scores are read back (a run there of another length than
``--steps`` is refused, not read back as this one).

    python -m benchmarks.multiagent_results --task otagym/CDPB-Devices50-v0 --docs --zoo --force
    python -m benchmarks.multiagent_results --seeds 1 --steps 50000 --out /tmp/ma    # a quick look
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from agents.teams import DEVICE_TRAINERS
from baselines.benchmark import aggregate, improvement, iqm_of
from baselines.cdpb.devices import (ACTION_GRID, DeviceEpisodes, best_common_constant, best_per_device_constants,
                                    device_references, evaluate_devices, full_csi_bound)
from benchmarks.zoo import add_zoo_arguments, refuse_shipped
from otagym._io import copy_file, write_json, write_text
from otagym.multiagent import DEFAULT_DEVICE_TASK, make_device_env
from otagym.tasks import DEVICE_TASKS, robust_score

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _cached(path: Path, compute: Callable[[], Any]) -> Any:
    """``compute()``'s JSON-able result, kept in ``path`` (read back when it exists)."""
    if path.exists():
        return json.loads(path.read_text())
    value = compute()
    write_json(path, value)
    return value


def references(task_id: str, out: Path) -> dict[str, Any]:
    """The floor's and the ceiling's stored actions and their validation returns, beside the paper's rule's (cached in
    ``references.json``)."""
    seeds, stored = DEVICE_TASKS[task_id].validation_seeds, DEVICE_TASKS[task_id].reference_actions
    refs = device_references(task_id)

    def compute() -> dict[str, Any]:
        value = {name: float(evaluate_devices(task_id, refs[name], seeds).returns.mean())
                 for name in ("PaperRule", "BestCommonConstant", "PerDeviceConstants")}
        return {"common_action": stored["BestCommonConstant"][0], "common_validation_return":
                value["BestCommonConstant"], "per_device_actions": list(stored["PerDeviceConstants"]),
                "per_device_validation_return": value["PerDeviceConstants"],
                "paper_validation_return": value["PaperRule"]}

    return _cached(out / "references.json", compute)


def search(task_id: str, out: Path) -> dict[str, Any]:
    """The search that chose the stored actions, run again on the validation realisations (cached in
    ``search.json``), and whether it finds them."""
    seeds, stored = DEVICE_TASKS[task_id].validation_seeds, DEVICE_TASKS[task_id].reference_actions

    def compute() -> dict[str, Any]:
        start = time.time()
        common, common_value = best_common_constant(task_id, seeds)
        per_device, per_device_value = best_per_device_constants(task_id, seeds, common, grid=ACTION_GRID[::2])
        return {"common_action": common, "common_validation_return": common_value,
                "per_device_actions": per_device[:, 0].tolist(), "per_device_validation_return": per_device_value,
                "search_seconds": time.time() - start}

    found = _cached(out / "search.json", compute)
    same = (np.allclose(found["per_device_actions"], stored["PerDeviceConstants"])
            and np.isclose(found["common_action"], stored["BestCommonConstant"][0]))
    return {**found, "finds_the_stored_actions": bool(same)}


def _record(episodes: DeviceEpisodes) -> dict[str, list]:
    return {"returns": episodes.returns.tolist(), "worst_privacy_used": episodes.worst_privacy_used.tolist(),
            "devices_left": episodes.devices_left.tolist()}


def other_length(folder: Path, steps: int) -> str | None:
    """Why ``folder`` cannot be resumed as a run of ``steps`` device steps: it holds a run (its ``run.json`` or its
    ``scores.json``) of another length, which rerunning would otherwise read back as this one; None if it can."""
    held = [json.loads((folder / "run.json").read_text())["settings"]["total_timesteps"]] \
        if (folder / "run.json").exists() else []
    held += [json.loads((folder / "scores.json").read_text())["steps"]] if (folder / "scores.json").exists() else []
    other = [length for length in held if length != steps]
    return f"{folder} holds a run of {other[0]:,} device steps, not {steps:,}: give --steps {other[0]}, another " \
        "--out, or move it away" if other else None


def team_runs(task_id: str, out: Path, algo: str, seeds: int, steps: int) -> list[dict[str, Any]]:
    """Train (or read back) ``algo``'s runs (:data:`agents.teams.DEVICE_TRAINERS`) in ``out/runs/<algo>/`` and
    score each on the validation and evaluation realisations."""
    task, runs = DEVICE_TASKS[task_id], []
    algorithm = DEVICE_TRAINERS[algo]()
    settings = replace(algorithm.settings(), total_timesteps=steps)
    for seed in task.training_seeds[:seeds]:
        folder = out / "runs" / algo / f"seed_{seed}"

        def compute(folder: Path = folder, seed: int = seed) -> dict[str, Any]:
            start = time.time()
            policy = algorithm.load(algorithm.train(task_id, seed, folder, settings))
            trained = time.time() - start
            return {"seed": seed, "train_seconds": trained, "steps": settings.total_timesteps,
                    "validation": _record(evaluate_devices(task_id, policy, task.validation_seeds)),
                    "evaluation": _record(evaluate_devices(task_id, policy, task.eval_seeds)),
                    "first_round_actions": first_round_actions(task_id, policy)}

        runs.append(_cached(folder / "scores.json", compute))
        print(f"{algo} seed {seed}: validation return {np.mean(runs[-1]['validation']['returns']):.4f}", flush=True)
    return runs


def ship(out: Path, algo: str, runs: list[dict[str, Any]], target: Path) -> None:
    """The run with the best validation return, to ``target``: its model file and its ``run.json`` with the
    selection added."""
    best = max(runs, key=lambda run: np.mean(run["validation"]["returns"]))
    folder = out / "runs" / algo / f"seed_{best['seed']}"
    model = DEVICE_TRAINERS[algo]().model_file
    copy_file(folder / model, target / model)
    record = json.loads((folder / "run.json").read_text())
    record.update(selected=f"the best validation return of {len(runs)} training seeds "
                  "(benchmarks/multiagent_results.py)")
    write_json(target / "run.json", record)


def evaluate_references(task_id: str) -> dict[str, dict[str, list]]:
    """The references on the evaluation realisations."""
    seeds = DEVICE_TASKS[task_id].eval_seeds
    records = {name: _record(evaluate_devices(task_id, policy, seeds))
               for name, policy in device_references(task_id).items()}
    bound = full_csi_bound(task_id, seeds)
    return {**records, "FullCSIBound": {"returns": bound.tolist(), "worst_privacy_used": [np.nan] * len(seeds),
                                        "devices_left": [0] * len(seeds)}}


def first_round_actions(task_id: str, policy: Any) -> list[float]:
    """A team's deterministic action for every device at the first round (weakest mean gain first)."""
    env = make_device_env(task_id)
    obs, _ = env.reset(seed=0)
    first = np.stack([obs[agent] for agent in env.possible_agents])[None]
    return np.round(policy.act(first)[0, :, 0], 2).tolist()


def summarise(task_id: str, refs: dict[str, Any], evaluated: dict[str, dict], teams: dict[str, list[dict]]
              ) -> dict[str, Any]:
    """Scores (0 and 100 the task's anchors, :attr:`otagym.tasks.DeviceTask.anchors`, on the typical realisation,
    paired: :func:`otagym.tasks.robust_score`), rliable statistics and the budget columns of the references and of
    each team's runs (``teams``: name -> runs), whether the learned teams are told apart (MAPPO's probability of
    improvement over IPPO, runs x realisations paired), and the room from the floor to the ceiling: in returns, and
    in points of the floor's |return| (the task's kept only with 20 or more)."""
    task = DEVICE_TASKS[task_id]
    zero, hundred = (np.array(evaluated[name]["returns"]) for name in task.anchors)
    floor = np.array(evaluated[task.floor]["returns"])
    score = lambda returns: robust_score(returns, zero, hundred)  # noqa: E731
    records = {**{name: [rec] for name, rec in evaluated.items()},
               **{name: [run["evaluation"] for run in runs] for name, runs in teams.items()}}
    table = {name: np.stack([score(r["returns"]) for r in recs]) for name, recs in records.items()}
    stats = aggregate(table, baseline=task.floor)
    for name, recs in records.items():
        left = np.concatenate([r["devices_left"] for r in recs])
        stats[name].update(mean_return=float(np.mean([r["returns"] for r in recs])),
                           share_over_budget=float(np.mean(left > 0)), mean_devices_left=float(left.mean()))
    apart = improvement(table, "IPPO", ("MAPPO",)) if {"IPPO", "MAPPO"} <= set(teams) else {}
    return {"task": task_id, "anchors": list(task.anchors), "floor": task.floor, "references": refs,
            "statistics": stats,
            "teams": {name: {"validation_returns": [float(np.mean(run["validation"]["returns"])) for run in runs],
                             "steps": runs[0]["steps"] if runs else None,
                             "train_seconds": [run["train_seconds"] for run in runs],
                             "first_round_actions": [run["first_round_actions"] for run in runs]}
                      for name, runs in teams.items()},
            "mappo_over_ippo": apart.get("MAPPO"),
            "room_return": float(np.mean(hundred - floor)),
            "room_return_iqm": float(iqm_of(hundred - zero)),
            "room_points": float(100 * np.mean(hundred - floor) / abs(np.mean(floor)))}


def _actions(runs: list[list[float]]) -> str:
    return "; ".join(", ".join(f"{a + 0.0:g}" for a in run) for run in runs)


#: The results page's head: what every task's section shares.
HEAD = [
    "# Devices as agents: results", "",
    "Each devices-as-agents task ([the environment](environment/multiagent.md)) on its 128 evaluation realisations "
    "(never used to choose anything). Score: 100 (R - R_0) / IQM(R_100 - R_0), paired per realisation over the "
    "interquartile mean of the rooms (`otagym.tasks.robust_score`, what `otagym evaluate` gives), where 0 and 100 are "
    "the task's anchors: the paper's CDPB rule, or the best action common to all devices where the paper's rule "
    "spends every budget, and the best per-device constant actions (the computed ceiling) on the typical realisation; "
    "one realisation where every device leaves cannot move it. IPPO: SB3 PPO through SuperSuit, one network shared by "
    "the devices. MAPPO: TorchRL's recipe on the batched env (`otagym.multiagent.torchrl_env`), a shared actor and a "
    "centralised critic that sees every device. Each run keeps its final model (one torch thread; `otagym train "
    "--algo ippo|mappo` with the same settings); IQM over seeds x realisations with its stratified-bootstrap 95% CI "
    "(rliable); P(>) is the probability of improvement over the best common constant. No policy can beat "
    "`FullCSIBound`, even one that sees every channel (the paper's rule with nobody leaving and no privacy charged: "
    "under CDPB-n each round's convergence term falls with every device that joins, "
    "`baselines.cdpb.devices.full_csi_bound`); it is loose by the privacy charge, which every policy pays. "
    "Regenerate a task's section with `python -m benchmarks.multiagent_results --task TASK --docs`.", ""]


def _room(summary: dict[str, Any]) -> str:
    refs = summary["references"]
    actions = refs["per_device_actions"]
    shown = ", ".join(f"{a:g}" for a in actions) if len(actions) <= 10 else \
        f"from {min(actions):g} to {max(actions):g} (median {np.median(actions):g})"
    return (f"**The room.** On the validation realisations the best action common to all devices is a = "
            f"{refs['common_action']:g} (mean return {refs['common_validation_return']:.4f}; the paper's rule: "
            f"{refs['paper_validation_return']:.4f}); the best per-device actions (coordinate search) reach "
            f"{refs['per_device_validation_return']:.4f}, with the devices' actions, weakest mean gain first, "
            f"{shown}. On the evaluation realisations the ceiling's return is {summary['room_return']:.4f} above the "
            f"floor's on average ({summary['room_points']:.1f} points of the floor's |return|), and "
            f"{summary['room_return_iqm']:.4f} above the score's 0 on the typical realisation (the IQM of the rooms, "
            "the score's 100).")


def _table(stats: dict[str, Any], floor: str) -> list[str]:
    lines = [f"| policy | IQM [95% CI] | mean | CVaR 10% | worst | P(> {floor}) [CI] | mean return | "
             "episodes in which a device spent its budget (and left) | devices that left (mean) |", "|---" * 9 + "|"]
    for name, s in stats.items():
        poi = "–" if s["p_improve"] is None else f"{s['p_improve']:.2f} [{s['p_improve_ci'][0]:.2f}, " \
                                                 f"{s['p_improve_ci'][1]:.2f}]"
        lines.append(f"| {name} | {s['iqm']:.1f} [{s['iqm_ci'][0]:.1f}, {s['iqm_ci'][1]:.1f}] | {s['mean']:.1f} | "
                     f"{s['cvar10']:.1f} | {s['worst']:.1f} | {poi} | {s['mean_return']:.4f} | "
                     f"{100 * s['share_over_budget']:.0f}% | {s['mean_devices_left']:.2f} |")
    return lines


def _shows(summary: dict[str, Any]) -> list[str]:
    stats, teams, floor = summary["statistics"], summary["teams"], summary["floor"]
    low = stats[floor]
    said = [f"{name} reaches {stats[name]['iqm']:.0f} points of the room (IQM, CI [{stats[name]['iqm_ci'][0]:.0f}, "
            f"{stats[name]['iqm_ci'][1]:.0f}]; the best common constant's [{low['iqm_ci'][0]:.0f}, "
            f"{low['iqm_ci'][1]:.0f}]), probability of improvement {stats[name]['p_improve']:.2f} over it, CVaR 10% "
            f"{stats[name]['cvar10']:.0f}, worst {stats[name]['worst']:.0f}; in "
            f"{100 * stats[name]['share_over_budget']:.0f}% of its episodes a device spends its budget and leaves"
            + (f" (its actions at the first round, weakest device first: {_actions(team['first_round_actions'])})."
               if len(team["first_round_actions"][0]) <= 10 else ".") for name, team in teams.items()]
    said.append("Devices that left on average: " + ", ".join(
        f"{name} {stats[name]['mean_devices_left']:.1f}" for name in ("PaperRule", floor, "PerDeviceConstants")) + ".")
    lines = ["", "**What it shows.** " + " ".join(said) if teams else "**No learned team trained yet.**"]
    apart = summary.get("mappo_over_ippo")
    if apart:
        told = "told apart" if apart[1][0] > 0.5 or apart[1][1] < 0.5 else "not told apart"
        lines += ["", f"MAPPO over IPPO: probability of improvement {apart[0]:.2f} [{apart[1][0]:.2f}, "
                  f"{apart[1][1]:.2f}] (paired over runs x realisations): {told}."]
    return lines


def section(summary: dict[str, Any]) -> str:
    """A task's section of the results page: its runs, the room, the table and what it shows."""
    teams = summary["teams"]
    runs = ", ".join(f"{name} {len(team['validation_returns'])} training seeds x {team['steps']:,} device steps"
                     for name, team in teams.items())
    lines = [f"## `{summary['task']}`", "", f"Score 0: {summary['anchors'][0]}; 100: {summary['anchors'][1]}. "
             f"Teams: {runs or 'none yet'}.", "", _room(summary), ""]
    lines += [f"{name}'s validation returns by seed: {', '.join(f'{v:.4f}' for v in team['validation_returns'])}; "
              f"minutes a seed: {', '.join(f'{t / 60:.1f}' for t in team['train_seconds'])}.\n"
              for name, team in teams.items()]
    lines += _table(summary["statistics"], summary["floor"]) + _shows(summary)
    return "\n".join(lines) + "\n"


def markdown(summaries: dict[str, dict[str, Any]]) -> str:
    """The results page: the head, then each task's section (``summaries``: task id -> :func:`summarise`'s)."""
    return "\n".join(HEAD) + "\n" + "\n".join(section(summaries[t]) for t in DEVICE_TASKS if t in summaries)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=list(DEVICE_TASKS), default=DEFAULT_DEVICE_TASK,
                   help=f"the device task (default {DEFAULT_DEVICE_TASK})")
    p.add_argument("--seeds", type=int, default=5, help="training seeds of each team (default 5)")
    p.add_argument("--steps", type=int, help="device steps per run (default: the task's train_steps, else 1.5M)")
    p.add_argument("--out", type=Path, default=Path("results/multiagent"), help="the task's folder goes in it")
    p.add_argument("--docs", action="store_true", help="put the task's section and numbers into docs/")
    p.add_argument("--search", action="store_true", help="run the search that chose the stored references again "
                   "(8 minutes on the ten devices' task) and say whether it finds them")
    p.add_argument("--teams", nargs="*", choices=list(DEVICE_TRAINERS), default=list(DEVICE_TRAINERS),
                   help="the learned teams to train and score (default: all; none: the references only)")
    add_zoo_arguments(p, "<task name>/<algo>")
    args = p.parse_args(argv)
    name = args.task.split("/")[1]
    out = args.out / name
    if args.zoo is not None:
        refuse_shipped(p, [args.zoo / name / algo for algo in args.teams], args.force)
    steps = args.steps or DEVICE_TASKS[args.task].train_steps or 1_500_000
    seeds = DEVICE_TASKS[args.task].training_seeds[:args.seeds]
    stale = [why for algo in args.teams for seed in seeds if (why := other_length(out / "runs" / algo / f"seed_{seed}",
                                                                               steps))]
    if stale:
        p.error(stale[0])
    refs = references(args.task, out)
    print(f"references: {refs}", flush=True)
    if args.search:
        print(f"search: {search(args.task, out)}", flush=True)
    teams = {algo.upper(): team_runs(args.task, out, algo, args.seeds, steps) for algo in args.teams}
    summary = summarise(args.task, refs, evaluate_references(args.task), teams)
    write_json(out / "multiagent_results.json", summary)
    print(section(summary))
    if args.zoo is not None:
        for algo in args.teams:
            ship(out, algo, teams[algo.upper()], args.zoo / name / algo)
    if args.docs:
        summaries = {**json.loads((DOCS / "multiagent_results.json").read_text()), args.task: summary}
        write_json(DOCS / "multiagent_results.json", summaries)
        write_text(DOCS / "multiagent_results.md", markdown(summaries))


if __name__ == "__main__":
    main()
