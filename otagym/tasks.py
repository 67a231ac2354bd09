"""Benchmark tasks: registered, versioned env ids with fixed settings, a frozen evaluation set and reference scores.

A task fixes everything that changes what is learned (scheme, deployment, horizon, fading, formulation, action, the
range of budgets nu it is trained over), so that one number on it means the same for every paper. ``import otagym``
registers every task of :data:`TASKS` with Gymnasium (``gym.make(task_id)``, ``gym.make_vec(task_id, n)``) with
``max_episode_steps`` = T. A task's version is bumped whenever anything that changes learning changes (its history is
in :attr:`Task.versions`).

**Evaluation.** A task is evaluated on :data:`EVALUATION_SEEDS` at each of its budgets :attr:`Task.eval_nus`: the
channel realisation of a seed is ``numpy.random.default_rng(seed)`` drawn as :meth:`otagym.channel.ChannelModel.
sample_trace` draws it (placement, then fading), and any client plays it by resetting its env with
:func:`evaluation_options` (``env.reset(options=evaluation_options(task_id, nu, seed))``). The score of an episode
is the paired normalised score of the papers' comparisons: 100 (L_EqualAlloc - L) / (L_EqualAlloc - L_OfflineOptimal)
on that realisation (0 = EqualAlloc, 100 = the offline optimum, which no online policy reaches). The env's return in
budget mode is (L_EqualAlloc - L) / H (H its reward scale), so :func:`normalized_score` turns an episode return into
the score with OfflineOptimal's return on the same realisation, stored with the package.

**Reference scores** (``otagym/data/reference_scores.json``, recomputed by ``benchmarks/reference_scores.py``): per task
and budget, the score of each reference policy on every evaluation realisation: ``UniformRandom`` (uniform actions),
``EqualAlloc`` (0 by definition), ``BestConstant`` (the learnability floor), ``AdaScaleTrained`` (the paper's online
policy calibrated on training channels), ``OnlineOptimal`` (the best online policy computed by dynamic programming:
exact for i.i.d. and block fading, a lower bound under Gauss-Markov fading) and OfflineOptimal's return.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otagym.channel import ChannelModel
from otagym.receive_scaling import get_scenario

__all__ = ["Task", "TASKS", "EVALUATION_SEEDS", "REFERENCE_SCORES_PATH", "evaluation_options", "normalized_score",
           "reference_scores", "register_tasks", "task_scenario", "fading_settings"]

#: The frozen evaluation set: one channel realisation per seed (never used to train or tune a reference).
EVALUATION_SEEDS: tuple[int, ...] = tuple(range(10_000, 10_032))
#: Where the reference scores are stored with the package.
REFERENCE_SCORES_PATH = Path(__file__).parent / "data" / "reference_scores.json"

#: The settings every receive-scaling task shares: the paper's MNIST deployment (T = 500), budget mode (constraint
#: (28b) holds by construction), the price action, one policy for every nu in [0.01, 0.16] (drawn log-uniformly per
#: episode and observed), no all-order DP ledger (the RDP at alpha is always reported).
_RECEIVE_SCALING = {"scenario": "paper-mnist", "reward_mode": "budget", "action_type": "price",
                    "nu_range": (0.01, 0.16), "dp_orders": None}


@dataclass(frozen=True)
class Task:
    """A benchmark task: its id, the env keyword arguments it fixes, its horizon and evaluation budgets.

    Attributes:
        id: the Gymnasium id, ``otagym/<Name>-v<version>``.
        kwargs: keyword arguments of :class:`otagym.env.OTAPrivacyEnv` (scheme, scenario and formulation).
        max_episode_steps: T, the rounds of an episode.
        eval_nus: the budgets nu (mean convergence cost per round) the task is scored at.
        summary: one line on what the task asks.
        versions: the version history, one line per version.
    """

    id: str
    kwargs: Mapping[str, Any]
    max_episode_steps: int
    eval_nus: tuple[float, ...]
    summary: str
    versions: tuple[str, ...] = field(default=("v0: first version",))


def _receive_scaling(name: str, fading: Mapping[str, Any], summary: str) -> Task:
    kwargs = {**_RECEIVE_SCALING, **fading}
    return Task(f"otagym/{name}-v0", kwargs, get_scenario(kwargs["scenario"]).num_rounds, (0.01, 0.04, 0.16), summary)


#: The registered tasks by id.
TASKS: dict[str, Task] = {t.id: t for t in (
    _receive_scaling("ReceiveScalingIID", {}, "Schedule receive scaling under i.i.d. Rayleigh fading: the future "
                     "is unknown, and a good constant price is close to the online optimum."),
    _receive_scaling("ReceiveScalingGaussMarkov", {"fading": "gauss_markov", "correlation": 0.9},
                     "Schedule receive scaling under Gauss-Markov fading (correlation 0.9 per round): the present "
                     "channel predicts the next ones."),
    _receive_scaling("ReceiveScalingBlock", {"fading": "block", "coherence_rounds": 10},
                     "Schedule receive scaling under block fading (10-round coherence, the block position observed): "
                     "a strong channel lasts its block, which a constant price overspends."),
)}


def register_tasks() -> None:
    """Register every task of :data:`TASKS` with Gymnasium (idempotent; ``import otagym`` calls it)."""
    from gymnasium.envs.registration import register, registry

    for task in TASKS.values():
        if task.id not in registry:
            register(id=task.id, entry_point="otagym.env:OTAPrivacyEnv",
                     vector_entry_point="otagym.env:OTAPrivacyVectorEnv", kwargs=dict(task.kwargs),
                     max_episode_steps=task.max_episode_steps)


def _task(task_id: str) -> Task:
    if task_id not in TASKS:
        raise ValueError(f"task must be one of {sorted(TASKS)}; got {task_id!r}")
    return TASKS[task_id]


def fading_settings(task_id: str) -> dict[str, Any]:
    """The task's channel settings beyond its preset (``fading``, ``correlation``, ``coherence_rounds``)."""
    kwargs = _task(task_id).kwargs
    return {k: kwargs[k] for k in ("fading", "correlation", "coherence_rounds") if k in kwargs}


def task_scenario(task_id: str, nu: float | None = None):
    """The scenario a task's env resolves (its preset with the task's fading), at budget ``nu`` if given."""
    return get_scenario(_task(task_id).kwargs["scenario"], **fading_settings(task_id),
                        **({"nu": float(nu)} if nu is not None else {}))


def _check_evaluation(task: Task, nu: float, seed: int) -> None:
    if float(nu) not in task.eval_nus:
        raise ValueError(f"nu must be one of {task.eval_nus} (the evaluation budgets of {task.id}); got {nu!r}")
    if seed not in EVALUATION_SEEDS:
        raise ValueError(f"seed must be one of the evaluation seeds {EVALUATION_SEEDS[0]}..{EVALUATION_SEEDS[-1]}; "
                         f"got {seed!r}")


def evaluation_options(task_id: str, nu: float, seed: int) -> dict[str, Any]:
    """``reset`` options that play evaluation realisation ``seed`` at budget ``nu`` in a single env of the task:
    ``{"distances_m": (M,), "channel_gains": (T, M), "nu": nu}``."""
    task = _task(task_id)
    _check_evaluation(task, nu, seed)
    distances, gains = _realisation(task_id, seed)
    return {"distances_m": distances.copy(), "channel_gains": gains.copy(), "nu": float(nu)}


@lru_cache(maxsize=256)
def _realisation(task_id: str, seed: int) -> tuple[NDArray, NDArray]:
    scenario = task_scenario(task_id)
    return ChannelModel.from_scenario(scenario).sample_trace(np.random.default_rng(seed), scenario.num_rounds)


@lru_cache(maxsize=1)
def _stored() -> dict[str, Any]:
    return json.loads(REFERENCE_SCORES_PATH.read_text())


def reference_scores(task_id: str) -> dict[str, Any]:
    """The stored references of a task: ``{"version", "seeds", "nus", "scores": {policy: {str(nu): [score per
    seed]}}, "offline_return": {str(nu): [OfflineOptimal's episode return per seed]}}``."""
    _task(task_id)
    stored = _stored()
    if task_id not in stored:
        raise ValueError(f"no reference scores stored for {task_id} (run benchmarks/reference_scores.py)")
    return stored[task_id]


def normalized_score(task_id: str, nu: float, seeds: ArrayLike, episode_returns: ArrayLike) -> NDArray:
    """The normalised score of episodes played on evaluation realisations (:func:`evaluation_options`): 100 x the
    episode return over OfflineOptimal's return on the same realisation and budget (0 = EqualAlloc, 100 = the offline
    optimum). Equal to ``otagym evaluate``'s and ``otagym compare``'s score of the same episodes."""
    task = _task(task_id)
    seeds = np.atleast_1d(np.asarray(seeds))
    returns = np.broadcast_to(np.asarray(episode_returns, dtype=float), seeds.shape)
    for seed in seeds:
        _check_evaluation(task, nu, int(seed))
    stored = reference_scores(task_id)
    offline = dict(zip(stored["seeds"], stored["offline_return"][str(float(nu))]))
    return 100.0 * returns / np.array([offline[int(s)] for s in seeds])
