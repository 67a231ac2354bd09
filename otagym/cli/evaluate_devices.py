"""``otagym evaluate DEVICE_TASK TEAM...`` on a devices-as-agents task (:data:`otagym.tasks.DEVICE_TASKS`): what
:mod:`otagym.cli.evaluate` plays and scores there instead of a single agent.

TEAM is a reference's name (:meth:`baselines.benchmark.SchemeBenchmark.device_references`), a model that ``otagym
train --algo ippo`` or ``--algo mappo`` wrote (its ``model.zip`` or ``model.pt``, with the ``run.json`` naming the
task beside it; :func:`agents.teams.load_team`) or
``module:function``, a Python callable from the devices' observations (N, K, entries) to their actions (N, K, A).
Every realisation plays in step on the task's batched device side
(:meth:`~baselines.benchmark.SchemeBenchmark.play_team`), and each episode is scored with
:func:`otagym.tasks.robust_score` against the task's anchors played on the same realisations: 0 = every device
follows the paper's rule, 100 = the per-device constants on the typical realisation. An episode's cost is its worst
device's privacy spent over its budget: above 1, that device spent its budget and left.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from otagym.cli.argtypes import CALLABLE, import_callable
from otagym.tasks import DEVICE_TASKS

__all__ = ["resolve_team", "evaluate_team", "device_seed_references", "SCORE_NOTE"]

#: What a score means, in the words of ``otagym evaluate``'s header.
SCORE_NOTE = ("score: 100 (R - R_{0}) / IQM over the realisations of (R_{1} - R_{0}), paired on each realisation: 0 = "
              "{0}, 100 = {1} on the typical realisation; episode cost: the worst device's privacy spent over its "
              "budget, above 1 where it spent its budget and left")


def _scheme(task_id: str) -> Any:
    """How the task's scheme plays and scores its devices (:func:`baselines.benchmark.scheme_benchmark`)."""
    from baselines.benchmark import scheme_benchmark

    return scheme_benchmark(DEVICE_TASKS[task_id].scheme)


class _CallableTeam:
    """A ``module:function`` team: the callable's actions for the devices' observations, checked against the shape
    and the bounds [``low``, ``high``] of the devices' action space."""

    def __init__(self, function: Any, label: str, low: float, high: float) -> None:
        self.function, self.label, self.low, self.high = function, label, low, high

    def act(self, observations: np.ndarray) -> np.ndarray:
        from baselines.benchmark import PolicyError, check_action_range

        try:
            actions = np.asarray(self.function(observations), dtype=float)
        except Exception as err:  # noqa: BLE001 - any error of the user's code, in one line
            raise PolicyError(f"policy {self.label!r} raised {type(err).__name__}: {err}") from err
        if actions.shape[:2] != observations.shape[:2] or actions.ndim != 3:
            raise PolicyError(f"policy {self.label!r} must return actions (N, K, A) for observations of shape "
                              f"{observations.shape}; returned shape {actions.shape}")
        check_action_range(self.label, actions, self.low, self.high)
        return actions


def resolve_team(text: str, task_id: str) -> tuple[str, Any]:
    """The name and the device policy of TEAM (see the module docstring); ``ValueError`` naming what was looked for,
    or the task a model was trained on where it is another, or the multiagent extra where it is missing."""
    if importlib.util.find_spec("pettingzoo") is None:
        raise ValueError(f"{task_id} needs the multiagent extra (missing: pettingzoo): pip install -c constraints.txt "
                         "-e '.[multiagent]'")
    references = _scheme(task_id).device_references(task_id)
    if text in references:
        return text, references[text]
    path = Path(text)
    if path.is_file():
        from agents.teams import load_team

        record = path.parent / "run.json"
        trained = json.loads(record.read_text()).get("task") if record.is_file() else None
        if trained != task_id:
            raise ValueError(f"policy {text!r}: a team model needs the run.json of otagym train beside it, "
                             f"naming {task_id}; found {'none' if trained is None else repr(trained)}")
        return (path.parent.name if path.stem in ("model", "best_model") else path.stem), load_team(path)
    if CALLABLE.fullmatch(text):
        from otagym.multiagent import make_device_env

        label, function = import_callable(text)
        env = make_device_env(task_id)
        space = env.action_space(env.possible_agents[0])
        return label, _CallableTeam(function, text, float(space.low.min()), float(space.high.max()))
    raise ValueError(f"policy must be a reference of {task_id} {sorted(references)}, a team model of otagym train "
                     f"(model.zip, model.pt) or module:function; got {text!r}")


def evaluate_team(task_id: str, policy: Any, seeds: Sequence[int]
                  ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """The scores and the episode costs over the limit of a team on the realisation of each seed, keyed by the task's
    budget (``str(eps-bar)``), as :func:`otagym.cli.evaluate.evaluate` gives a single agent's."""
    scores, costs = _scheme(task_id).team_scores_and_costs(policy, task_id, seeds)
    key = str(float(DEVICE_TASKS[task_id].eval_nus[0]))
    return {key: scores}, {key: costs}


def device_seed_references(task_id: str, seeds: Sequence[int]) -> dict[str, Any]:
    """Every reference's scores and episode costs on the realisation of each seed (played here, any seeds), in the
    form of :func:`baselines.benchmark.seed_references`."""
    task, scores, costs = DEVICE_TASKS[task_id], {}, {}
    for name, policy in _scheme(task_id).device_references(task_id).items():
        scores[name], costs[name] = evaluate_team(task_id, policy, seeds)
    return {"scores": scores, "cost_ratios": costs, "frozen": set(seeds) <= set(task.eval_seeds),
            "cache": None}
