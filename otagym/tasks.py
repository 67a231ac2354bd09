"""Benchmark tasks: registered, versioned env ids with fixed settings, a frozen evaluation set and reference scores.

A task fixes everything that changes what is learned (scheme, deployment, horizon, fading, formulation, action, the
range of budgets nu it is trained over, the reward's scale), so that one number on it means the same for every paper.
Every task's env reports ``info["cost"]``, a per-round cost whose episode sum is at most the task's
:attr:`Task.cost_limit` (= T) exactly when the task's constraint holds (Safety-Gymnasium's convention).
``import otagym`` registers every task of :data:`TASKS` with Gymnasium (``gym.make(task_id)``,
``gym.make_vec(task_id, n)``) with ``max_episode_steps`` = T. A task's version is bumped whenever anything that
changes learning changes (its history is in :attr:`Task.versions`). Each scheme declares its tasks in its package
(``otagym/schemes/<scheme>/tasks.py``, :attr:`otagym.schemes.SchemeInfo.tasks`); this module builds, registers and
scores them.

**The benchmark suite** (:data:`BENCHMARK`): the constrained receive-scaling tasks on which RL algorithms are
ranked, each with a floor (:attr:`Task.floor`, the best constant action that meets the constraint in the mean), a
ceiling (:attr:`Task.ceiling`, the best online policy the project computes, :attr:`Task.ceiling_note` says whether
it is exact) and at least 20 normalised points between them at every budget. They are scored on their own frozen
evaluation set (:data:`BENCHMARK_EVALUATION_SEEDS`, 128 realisations) with the feasible score
(:func:`feasible_score`: an episode over its cost limit scores below the least feasible one, by how far over);
:data:`BENCHMARK_VALIDATION_SEEDS` and :data:`BENCHMARK_TRAINING_SEEDS` are the disjoint sets to select and train
on. The other tasks are the papers' formulation and sanity tasks.

**Devices as agents** (:data:`DEVICE_TASKS`, :class:`DeviceTask`): tasks in which each device decides for itself,
played by :mod:`otagym.multiagent` (PettingZoo) on the suite's seed sets and scored with :func:`robust_score`, paired
per realisation over the typical room between the paper's rule and the computed ceiling.

**Evaluation.** A task is evaluated on its :attr:`Task.eval_seeds` at each of its budgets :attr:`Task.eval_nus`: the
realisation of a seed is drawn from ``numpy.random.default_rng(seed)`` by the scheme's realisation sampler
(:attr:`otagym.schemes.SchemeInfo.sample_realisation`; receive scaling: as
:meth:`otagym.channel.ChannelModel.sample_trace` draws it, placement then fading), and any client plays it by
resetting its env with :func:`evaluation_options` (``env.reset(options=evaluation_options(task_id, nu, seed))``).
The score of an episode is paired on its realisation, D4RL-style: 100 (R - R_0) / (R_100 - R_0), with R_0 and R_100
the returns of the task's two anchor policies (:attr:`Task.anchors`) on the same realisation, stored with the
package.

* Receive scaling: 0 = EqualAlloc, 100 = OfflineOptimal (the offline optimum, which no online policy reaches), the
  score of the papers' comparisons, 100 (L_EqualAlloc - L) / (L_EqualAlloc - L_OfflineOptimal). The env's return in
  budget mode (and in the constrained tasks' cmdp mode) is (L_EqualAlloc - L) / H (H its reward scale), so R_0 = 0.
  On a constrained task a policy that overspends can score above 100: the suite reports its feasible score.
* CDPB and anonymous OTA: 0 = the scheme's simplest policy (CDPB: rho = P/W^2; anonymous: the middle of the action
  range), 100 = ``BestConstant`` (the best constant action on
  training realisations). There the online optimum is a constant action: the rounds are i.i.d., the server sees none
  of the next round's channel, and the round's expected reward depends on its action alone (for CDPB up to the max
  over clients of the cumulative RDP in G, whose weight is 1e-5), so 100 is the online optimum up to its tuning.

**Reference scores** (``otagym/data/reference_scores.json``, recomputed by ``benchmarks/reference_scores.py``): per task
and budget, the score of each reference policy on every evaluation realisation, and the anchors' returns. Receive
scaling: ``UniformRandom`` (uniform actions), ``EqualAlloc`` (0 by definition), ``BestConstant`` (the learnability
floor), ``AdaScaleTrained`` (the paper's online policy calibrated on training channels), ``OnlineOptimal`` (the best
online policy computed by dynamic programming: exact for i.i.d. and block fading, a lower bound under Gauss-Markov
fading). The constrained tasks of the suite: ``UniformRandom`` (uniform actions), ``EqualAlloc`` (0),
``BestConstant`` (the constant action per budget with the best mean return on training realisations among those that
meet the constraint in the mean: with the spend action a = 0, which is EqualAlloc, since a constant spend meets the
constraint exactly when a <= 0 and spending more leaks less), ``AdaScaleTrained`` and ``OnlineOptimal`` (budget
mode's, which meet nu on every realisation: the ceiling) and ``DualPrice`` (the online optimum when the constraint
holds in expectation only; over the limit on about half the realisations) and ``FullPower`` (x_t = x_max: it spends
nothing and leaks the most, the violation floor of :func:`feasible_score`). CDPB: ``UniformRandom``, ``MaxRho``
(rho = P/W^2, 0), ``BestConstant`` (100),
``CDPB`` (the paper's planner, Stage II at the task's horizon within eps-bar (25c)). Anonymous OTA: ``UniformRandom``,
``MidAction`` (a = 0: sigma' = sqrt(40), 0), ``BestConstant`` (100), ``PaperSetting`` (Fig. 1's sigma' = 1, outside the
task's action range), ``CalibratedSigma`` (the least constant sigma that meets the task's (eps, delta) in 95% of
simulated episodes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otagym.schemes import DEFAULT_SCHEME, SCHEMES, SchemeInfo, get_scheme

__all__ = ["Task", "TASKS", "BENCHMARK", "build_task", "constrained", "EVALUATION_SEEDS", "TUNING_SEEDS",
           "FORMULATION_VALIDATION_SEEDS", "BENCHMARK_EVALUATION_SEEDS",
           "BENCHMARK_VALIDATION_SEEDS", "BENCHMARK_TRAINING_SEEDS", "COST_TOLERANCE", "REFERENCE_SCORES_PATH",
           "evaluation_options", "normalized_score", "feasible_score", "reference_scores", "register_tasks",
           "task_scenario", "fading_settings", "sample_realisation", "score_against", "DeviceTask", "DEVICE_TASKS",
           "build_device_task", "registered_task", "robust_score"]

#: The formulation tasks' frozen evaluation set: one channel realisation per seed (never used to train or tune a
#: reference), 32 realisations.
EVALUATION_SEEDS: tuple[int, ...] = tuple(range(10_000, 10_032))
#: The realisations the references tune on (BestConstant's action, AdaScaleTrained's scale, a task's floor): 32, the
#: first of :data:`BENCHMARK_TRAINING_SEEDS`, disjoint from every evaluation and validation set.
TUNING_SEEDS: tuple[int, ...] = tuple(range(90_000, 90_032))
#: The formulation tasks' validation realisations: checkpoint selection and learning curves of trained agents (16).
FORMULATION_VALIDATION_SEEDS: tuple[int, ...] = tuple(range(20_000, 20_016))
#: The benchmark suite's frozen evaluation set (:data:`BENCHMARK`): 128 realisations per budget from seeds that no
#: design decision, search or table of the project looked at before the suite was frozen (the formulation tasks'
#: evaluation, validation, training and "more test" seeds are 10_000..., 20_000..., 90_000... and 30_000...). Report
#: only: never select a checkpoint or a hyperparameter on it.
BENCHMARK_EVALUATION_SEEDS: tuple[int, ...] = tuple(range(70_000, 70_128))
#: The benchmark suite's validation realisations: select checkpoints and hyperparameters here (32, disjoint).
BENCHMARK_VALIDATION_SEEDS: tuple[int, ...] = tuple(range(60_000, 60_032))
#: The benchmark suite's training realisations: the first ones of 90_000, 90_001, ... (as many as a method needs;
#: the references tune on the first 32, :data:`TUNING_SEEDS`), disjoint from both sets above.
BENCHMARK_TRAINING_SEEDS: tuple[int, ...] = tuple(range(90_000, 90_512))
#: The relative slack of the cost limit: an episode whose cost is at most (1 + COST_TOLERANCE) times the limit is
#: within it (a constant spend of exactly nu sums to T up to rounding).
COST_TOLERANCE = 1e-6
#: Where the reference scores are stored with the package.
REFERENCE_SCORES_PATH = Path(__file__).parent / "data" / "reference_scores.json"

@dataclass(frozen=True)
class Task:
    """A benchmark task: its id, the env keyword arguments it fixes, its horizon and evaluation budgets.

    Attributes:
        id: the Gymnasium id, ``otagym/<Name>-v<version>``.
        kwargs: keyword arguments of :class:`otagym.env.OTAPrivacyEnv` (scheme, scenario and formulation).
        max_episode_steps: T, the rounds of an episode.
        eval_nus: the budgets the task is scored at, in the units :attr:`budget` names.
        summary: one line on what the task asks.
        versions: the version history, one line per version.
        budget: what a budget is: ``"nu"`` (receive scaling: the mean convergence cost per round, drawn per episode
            and observed; a ``reset`` option), ``"epsilon_max"`` (CDPB: the privacy threshold eps-bar of (25c), fixed
            by the task) or ``"target_epsilon"`` (anonymous OTA: the (eps, delta) target of ``info["cost"]``, fixed).
        anchors: the policies whose returns on each realisation define the scores 0 and 100.
        eval_seeds: the frozen evaluation set (:data:`BENCHMARK_EVALUATION_SEEDS` for the benchmark suite,
            :data:`EVALUATION_SEEDS` for the formulation tasks).
        floor: the reference that a learner must beat to have learned anything (the best constant action that meets
            the task's constraint in the mean on training realisations).
        violation_floor: on a task of the suite, the reference that scores least on every realisation and is
            feasible (receive scaling: ``FullPower``, x_t = x_max, spends nothing and leaks the most): an episode
            over its cost limit scores below it (:func:`feasible_score`); None elsewhere.
        ceiling: the best online policy the project can compute, and what it is (``ceiling_note``): the exact online
            optimum, or a policy whose score bounds the online optimum's from below (OfflineOptimal's 100 bounds it
            from above).
    """

    id: str
    kwargs: Mapping[str, Any]
    max_episode_steps: int
    eval_nus: tuple[float, ...]
    summary: str
    versions: tuple[str, ...] = field(default=("v0: first version",))
    budget: str = "nu"
    anchors: tuple[str, str] = ("EqualAlloc", "OfflineOptimal")
    eval_seeds: tuple[int, ...] = EVALUATION_SEEDS
    floor: str = "BestConstant"
    ceiling: str = "OnlineOptimal"
    ceiling_note: str = "the exact online optimum (dynamic programming over the budget left, up to its grids)"
    violation_floor: str | None = None

    @property
    def scheme(self) -> str:
        """The scheme the task's env runs (:data:`otagym.schemes.SCHEMES`)."""
        return str(self.kwargs.get("scheme", DEFAULT_SCHEME))

    @property
    def constrained(self) -> bool:
        """Whether a policy can break the task's constraint (a constrained MDP: its episode cost can exceed
        :attr:`cost_limit`); receive scaling in budget mode meets it by construction."""
        return constrained(self.kwargs)

    @property
    def cost_limit(self) -> float:
        """The episode cost limit of ``info["cost"]``: T (a mean cost of at most 1 per round)."""
        return float(self.max_episode_steps)


def constrained(env_kwargs: Mapping[str, Any]) -> bool:
    """Whether env keyword arguments make a constrained MDP (a policy can break the constraint of ``info["cost"]``):
    every scheme's but those whose formulation meets it by construction (receive scaling in budget mode, its default),
    as the scheme's :attr:`~otagym.schemes.SchemeInfo.constrained` says."""
    return get_scheme(env_kwargs.get("scheme", DEFAULT_SCHEME)).constrained(env_kwargs)


def build_task(info: SchemeInfo, declared: Mapping[str, Any]) -> Task:
    """The task a scheme declares (:attr:`otagym.schemes.SchemeInfo.tasks`): its id versioned by its history, its env
    keyword arguments the scheme's (its name where it is not the default) and task settings and its own ``settings``,
    its horizon its preset's T, scored on the benchmark suite's realisations where it is on the suite."""
    task = dict(declared)
    name, settings, suite = task.pop("name"), task.pop("settings"), task.pop("suite", False)
    kwargs = {**({} if info.name == DEFAULT_SCHEME else {"scheme": info.name}), **info.task_settings, **settings}
    versions = task.pop("versions", ("v0: first version",))
    return Task(f"otagym/{name}-v{len(versions) - 1}", kwargs, info.scenario(kwargs["scenario"]).num_rounds,
                task.pop("eval_nus"), task.pop("summary"), versions=versions,
                eval_seeds=BENCHMARK_EVALUATION_SEEDS if suite else EVALUATION_SEEDS, **task)


#: The registered tasks by id: every scheme's (:attr:`otagym.schemes.SchemeInfo.tasks`), in the registry's order.
TASKS: dict[str, Task] = {t.id: t for info in SCHEMES.values() for t in (build_task(info, d) for d in info.tasks)}


#: The benchmark suite: the tasks a learner is ranked on (each with a floor, a computable ceiling and at
#: least 20 normalised points between them at every budget). The other tasks of :data:`TASKS` are formulation and
#: sanity tasks (the papers' comparisons run on them).
BENCHMARK: tuple[str, ...] = tuple(t.id for t in TASKS.values() if t.eval_seeds == BENCHMARK_EVALUATION_SEEDS)


@dataclass(frozen=True)
class DeviceTask:
    """A devices-as-agents task (:mod:`otagym.multiagent`): each device of the scheme's deployment decides for itself,
    scored as the benchmark suite is (its seed sets, an IQM with its CI, the tail) against references that a search
    chose on its validation realisations.

    Attributes:
        id: ``"otagym/<Name>-v<version>"``.
        scheme: the scheme whose devices act.
        kwargs: the :class:`~otagym.multiagent.env.DevicesParallelEnv` arguments the task fixes.
        summary: what is learned.
        eval_nus: the device's privacy threshold eps-bar (one budget, fixed by the task: ``budget``).
        reference_actions: the stored actions of the searched references by name (their declaration says how they
            were found), each device's in order or one for all.
        versions: the history of the version number.
        anchors: the references whose returns on each realisation define the score's 0 and its 100
            (:func:`robust_score`): the paper's rule and the computed ceiling.
        floor: the reference a team must beat to have learned anything: the best action common to all devices.
        train_steps: the device steps ``otagym train --algo ippo|mappo`` trains for on the task when ``--steps`` is
            not given, where the task needs more than the algorithm's default (None: the algorithm's).
        eval_seeds / validation_seeds / training_seeds: the disjoint realisation seeds to report on, to select on and
            to train on (the benchmark suite's).
    """

    id: str
    scheme: str
    kwargs: Mapping[str, Any]
    summary: str
    eval_nus: tuple[float, ...]
    reference_actions: Mapping[str, tuple[float, ...]]
    versions: tuple[str, ...] = ("v0: first version",)
    budget: str = "epsilon_max"
    anchors: tuple[str, str] = ("PaperRule", "PerDeviceConstants")
    floor: str = "BestCommonConstant"
    train_steps: int | None = None
    eval_seeds: tuple[int, ...] = BENCHMARK_EVALUATION_SEEDS
    validation_seeds: tuple[int, ...] = BENCHMARK_VALIDATION_SEEDS
    training_seeds: tuple[int, ...] = BENCHMARK_TRAINING_SEEDS

    @property
    def constrained(self) -> bool:
        """Always: a device can spend its privacy budget (and leaves when it has)."""
        return True


def build_device_task(info: SchemeInfo, declared: Mapping[str, Any]) -> DeviceTask:
    """The devices-as-agents task a scheme declares (:attr:`otagym.schemes.SchemeInfo.device_tasks`): its id versioned
    by its history, its budget its deployment's eps-bar."""
    task = dict(declared)
    name, settings = task.pop("name"), task.pop("settings")
    versions = task.pop("versions", ("v0: first version",))
    scenario = info.scenario(settings.get("scenario"), **settings.get("scenario_overrides", {}))
    return DeviceTask(f"otagym/{name}-v{len(versions) - 1}", info.name, settings, task.pop("summary"),
                      (float(scenario.epsilon_max),), versions=versions, **task)


#: The devices-as-agents tasks by id: every scheme's (:attr:`otagym.schemes.SchemeInfo.device_tasks`).
DEVICE_TASKS: dict[str, DeviceTask] = {t.id: t for info in SCHEMES.values()
                                       for t in (build_device_task(info, d) for d in info.device_tasks)}


def registered_task(task_id: str) -> Task | DeviceTask:
    """The task of :data:`TASKS` or :data:`DEVICE_TASKS` with this id; ``ValueError`` naming both otherwise."""
    task = TASKS.get(task_id) or DEVICE_TASKS.get(task_id)
    if task is None:
        raise ValueError(f"task must be one of {sorted(TASKS)} or a devices-as-agents task {sorted(DEVICE_TASKS)}; "
                         f"got {task_id!r}")
    return task


def robust_score(returns: ArrayLike, zero: ArrayLike, hundred: ArrayLike) -> NDArray:
    """100 (R - R_0) / IQM(R_100 - R_0), element-wise: returns R scored against the anchors' returns R_0 and R_100
    on the same realisations (paired), over the interquartile mean of the room R_100 - R_0 across the realisations.
    Pairing takes the realisation's own difficulty out of R - R_0; dividing by the IQM of the rooms, rather than by
    each realisation's (which can be near 0) or their mean (which one realisation can move: one where every device
    leaves under the paper's rule has a room 30 times the typical one), keeps the scale of the typical realisation.
    The anchors' scores are 0 and, on average over the middle half of the rooms, 100."""
    from scipy.stats import trim_mean

    zero = np.asarray(zero, dtype=float)
    room = float(trim_mean(np.asarray(hundred, dtype=float) - zero, 0.25))
    if not room > 0.0:
        raise ValueError(f"the anchors' room must be positive (R_100 above R_0 on the middle half of the "
                         f"realisations); got an IQM of {room}")
    return 100.0 * (np.asarray(returns, dtype=float) - zero) / room


def register_tasks() -> None:
    """Register every task of :data:`TASKS` with Gymnasium (idempotent; ``import otagym`` calls it), its cost limit
    among the spec's kwargs (``gym.spec(task_id).kwargs["cost_limit"]``, Safety-Gymnasium's convention of a limit
    that travels with the task)."""
    from gymnasium.envs.registration import register, registry

    for task in TASKS.values():
        if task.id not in registry:
            register(id=task.id, entry_point="otagym.env:OTAPrivacyEnv",
                     vector_entry_point="otagym.env:OTAPrivacyVectorEnv",
                     kwargs={**task.kwargs, "cost_limit": task.cost_limit}, max_episode_steps=task.max_episode_steps)


def _task(task_id: str) -> Task:
    if task_id not in TASKS:
        raise ValueError(f"task must be one of {sorted(TASKS)}; got {task_id!r}")
    return TASKS[task_id]


def fading_settings(task_id: str) -> dict[str, Any]:
    """The task's channel settings beyond its preset (``fading``, ``correlation``, ``coherence_rounds``)."""
    kwargs = _task(task_id).kwargs
    return {k: kwargs[k] for k in ("fading", "correlation", "coherence_rounds") if k in kwargs}


def task_scenario(task_id: str, nu: float | None = None):
    """The scenario a task's env resolves: its preset with the task's scenario fields (its fading, its thresholds), as
    :func:`otagym.env.make_core` splits them from the env arguments; where the task's budget is the scenario's
    ``nu`` (receive scaling), at budget ``nu`` if given."""
    task = _task(task_id)
    info = get_scheme(task.scheme)
    overrides = {k: v for k, v in task.kwargs.items() if k not in ("scheme", "scenario") and k not in info.env_args}
    if nu is not None and task.budget == "nu":
        overrides["nu"] = float(nu)
    return info.scenario(task.kwargs["scenario"], **overrides)


def _check_budget(task: Task, nu: float) -> None:
    if float(nu) not in task.eval_nus:
        raise ValueError(f"nu must be one of {task.eval_nus} (the evaluation budgets of {task.id}); got {nu!r}")


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0 (a realisation's seed); got {seed!r}")
    return int(seed)


def evaluation_options(task_id: str, nu: float, seed: int) -> dict[str, Any]:
    """``reset`` options that play the realisation of ``seed`` (the frozen evaluation set's, :attr:`Task.eval_seeds`,
    or any other) at budget ``nu`` in a single env of the task: receive scaling ``{"distances_m": (M,),
    "channel_gains": (T, M), "nu": nu}``; CDPB ``{"channel_gains": (T, K)}``; anonymous OTA ``{"channel_gains": (T,
    devices), "batch_sizes": (T,)}`` (their budget is fixed by the task, so ``nu`` must be it)."""
    task = _task(task_id)
    _check_budget(task, nu)
    options = {k: v.copy() for k, v in sample_realisation(task_id, _check_seed(seed)).items()}
    return options | ({"nu": float(nu)} if task.budget == "nu" else {})


def sample_realisation(task_id: str, seed: int) -> dict[str, NDArray]:
    """The realisation of any ``seed`` (evaluation or not) as a single env's ``reset`` options, less the budget:
    drawn from ``numpy.random.default_rng(seed)``. Cached; do not modify the arrays."""
    return _realisation(task_id, int(seed))


@lru_cache(maxsize=256)
def _realisation(task_id: str, seed: int) -> dict[str, NDArray]:
    return get_scheme(_task(task_id).scheme).sample_realisation(task_scenario(task_id), np.random.default_rng(seed))


@lru_cache(maxsize=1)
def _stored() -> dict[str, Any]:
    return json.loads(REFERENCE_SCORES_PATH.read_text())


def reference_scores(task_id: str) -> dict[str, Any]:
    """The stored references of a task: ``{"version", "seeds", "nus", "anchors": [name of 0, name of 100],
    "scores": {policy: {str(nu): [score per seed]}}, "anchor_returns": {str(nu): [[R_0 per seed], [R_100 per
    seed]]}}``."""
    _task(task_id)
    stored = _stored()
    if task_id not in stored:
        raise ValueError(f"no reference scores stored for {task_id} (run benchmarks/reference_scores.py)")
    return stored[task_id]


def normalized_score(task_id: str, nu: float, seeds: ArrayLike, episode_returns: ArrayLike) -> NDArray:
    """The normalised score of episodes played on the frozen evaluation set (:func:`evaluation_options`):
    100 (R - R_0) / (R_100 - R_0) with R_0, R_100 the returns of the task's anchors (:attr:`Task.anchors`) on the same
    realisation and budget (receive scaling: 0 = EqualAlloc, 100 = the offline optimum). Equal to ``otagym
    evaluate``'s (and, on receive scaling, ``otagym compare``'s) score of the same episodes. Other seeds:
    ``baselines.benchmark.normalized_score``."""
    task = _task(task_id)
    seeds = np.atleast_1d(np.asarray(seeds))
    returns = np.broadcast_to(np.asarray(episode_returns, dtype=float), seeds.shape)
    _check_budget(task, nu)
    outside = [int(s) for s in seeds if int(s) not in task.eval_seeds]
    if outside:
        raise ValueError(f"seed {outside[0]} is outside the frozen evaluation set {task.eval_seeds[0]}.."
                         f"{task.eval_seeds[-1]} of {task.id}, the seeds whose anchor returns are stored; score any "
                         "other seeds with baselines.benchmark.normalized_score (it plays the anchors there and "
                         "caches their returns)")
    stored = reference_scores(task_id)
    index = [stored["seeds"].index(int(s)) for s in seeds]
    zero, hundred = (np.asarray(r, dtype=float)[index] for r in stored["anchor_returns"][str(float(nu))])
    return score_against(returns, zero, hundred)


def feasible_score(scores: ArrayLike, cost_ratios: ArrayLike, floor_scores: ArrayLike) -> NDArray:
    """The score of episodes on a task of the suite, which ranks every episode over its cost limit below every
    feasible one, by how far over: an episode within the limit (``cost_ratios`` = episode cost /
    :attr:`Task.cost_limit` <= 1 + :data:`COST_TOLERANCE`) keeps its score; one over it scores
    S_floor - 100 (cost / limit - 1), with S_floor (``floor_scores``, broadcast against ``scores``) the score of the
    task's :attr:`Task.violation_floor` on the same realisation. That reference is feasible and scores least on its
    realisation (receive scaling: FullPower spends nothing, and every round at x_max leaks the most), so an
    overspending episode is worth less than the worst feasible one, and 1% more over the limit costs one point more.
    Element-wise. Report it with the share of episodes over the limit and the mean cost over the limit
    (Safety-Gymnasium's return, cost and violation)."""
    scores = np.asarray(scores, dtype=float)
    ratios = np.asarray(cost_ratios, dtype=float)
    violated = np.broadcast_to(np.asarray(floor_scores, dtype=float), scores.shape) - 100.0 * (ratios - 1.0)
    return np.where(ratios > 1.0 + COST_TOLERANCE, violated, scores)


def score_against(returns: ArrayLike, zero: ArrayLike, hundred: ArrayLike) -> NDArray:
    """100 (R - R_0) / (R_100 - R_0), element-wise: the score of returns R against the anchors' returns on the same
    realisations."""
    zero = np.asarray(zero, dtype=float)
    return 100.0 * (np.asarray(returns, dtype=float) - zero) / (np.asarray(hundred, dtype=float) - zero)
