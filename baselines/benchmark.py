"""Scoring policies on a benchmark task's frozen evaluation set (:mod:`otagym.tasks`): the computation behind
``otagym evaluate``, the stored reference scores (``benchmarks/reference_scores.py``) and the RL results.

A policy is scored per budget nu of the task on every evaluation realisation (one batched episode per nu, the
realisations :func:`otagym.tasks.evaluation_options` gives to any client) with the paired normalised score of
:func:`otagym.tasks.normalized_score` as the task's scheme scores it (:class:`SchemeBenchmark`: by default
from the episode returns, 0 and 100 the task's anchors; receive scaling: from the leakages, 0 = EqualAlloc, 100 =
OfflineOptimal on the same realisation). The statistics are rliable's (Agarwal et al., 2021, "Deep RL at the edge of the
statistical precipice"): the interquartile mean with a stratified-bootstrap 95% CI, and the probability of improvement
over a reference.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from gymnasium.vector import AutoresetMode
from numpy.typing import NDArray

from otagym import __version__
from otagym._io import write_json
from baselines.play import Episodes, play
from otagym.env import OTAPrivacyVectorEnv
from otagym.schemes import get_scheme
from otagym.tasks import (BENCHMARK, DEVICE_TASKS, TASKS, TUNING_SEEDS, feasible_score, reference_scores, robust_score,
                          sample_realisation, score_against, task_scenario)

__all__ = ["SchemeBenchmark", "scheme_benchmark", "references", "reference_record", "seed_references",
           "violation_floor_scores", "ranked_scores",
           "normalized_score", "cache_dir", "task_scores", "task_scores_and_costs", "aggregate", "cvar", "iqm_of",
           "improvement", "episode_returns", "play_episodes", "anchor_returns", "ConstantAction",
           "RandomAction", "EnvActionPolicy", "PlayedPolicy", "PolicyError", "check_action_range", "best_constant_action"]


class EnvActionPolicy:
    """A policy that returns the env's own actions: ``function(observation batch (N, obs_dim)) -> actions (N, 1)``
    (an SB3 model's ``predict``, a callable). Any scheme."""

    def __init__(self, function: Callable[[NDArray], Any]) -> None:
        self.function = function

    def reset(self, scenario: Any, seed: int | None = None, **_: Any) -> None:
        """Nothing to plan."""

    def act(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        return np.asarray(self.function(np.asarray(observation, dtype=np.float32)), dtype=float).reshape(-1, 1)


class PolicyError(RuntimeError):
    """A policy failed while it played (it raised, or returned other than one action per observation); the message
    names the policy."""


class PlayedPolicy(EnvActionPolicy):
    """A trained model's or a callable's env actions, ``function(observation batch (N, obs_dim)) -> actions (N,) or
    (N, 1)``, with any failure raised as :class:`PolicyError` naming ``label`` (the policy as the user gave it): an
    error of its own, other than one action per observation, or an action outside [``low``, ``high``] (the env's
    action space; NaN is outside every one)."""

    def __init__(self, function: Callable[[NDArray], Any], label: str, low: float = -np.inf,
                 high: float = np.inf) -> None:
        super().__init__(function)
        self.label, self.low, self.high = label, float(low), float(high)

    def act(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        try:
            action = super().act(observation, info)
        except Exception as err:  # noqa: BLE001 - any error of the user's code, in one line
            raise PolicyError(f"policy {self.label!r} raised {type(err).__name__}: {err}") from err
        if action.shape[0] != len(observation):
            raise PolicyError(f"policy {self.label!r} returned {action.size} actions for {len(observation)} "
                              "observations (expected one per observation, shape (N,) or (N, 1))")
        check_action_range(self.label, action, self.low, self.high)
        return action


def check_action_range(label: str, action: NDArray, low: float, high: float) -> None:
    """:class:`PolicyError` naming the policy ``label`` when an action is NaN or outside [``low``, ``high``]."""
    if np.isnan(action).any():
        raise PolicyError(f"policy {label!r} returned NaN actions (the env's actions lie in [{low:g}, {high:g}])")
    if (action < low).any() or (action > high).any():
        raise PolicyError(f"policy {label!r} returned actions outside the env's action space [{low:g}, {high:g}]: "
                          f"from {action.min():g} to {action.max():g} (clip them, as SB3's predict does)")


class ConstantAction(EnvActionPolicy):
    """The env action ``a`` every round, in every env."""

    def __init__(self, a: float) -> None:
        super().__init__(lambda obs: np.full((len(obs), 1), float(a)))
        self.a = float(a)


class RandomAction(EnvActionPolicy):
    """Env actions drawn uniformly from [-1, 1] per env and round, from ``default_rng(seed)`` of ``reset``."""

    def __init__(self) -> None:
        super().__init__(lambda obs: self.rng.uniform(-1.0, 1.0, (len(obs), 1)))
        self.rng = np.random.default_rng(0)

    def reset(self, scenario: Any, seed: int | None = None, **_: Any) -> None:
        self.rng = np.random.default_rng(seed)


def play_episodes(policy: Any, task_id: str, seeds: Sequence[int], nu: float | Sequence[float] | None = None,
                  **env_overrides: Any) -> Episodes:
    """``policy`` (``reset(scenario, seed, **realisation)``, ``act(obs, info)``) on the realisation of each seed
    (:func:`otagym.tasks.sample_realisation`) in the task's vector env of ``len(seeds)`` envs (observations (N,
    obs_dim), actions (N, 1)), one batched episode of the one loop
    (:func:`baselines.play.play`: returns, cost ratios and the end-of-episode info). The policy is told the task's
    scenario, with the episodes' budget where they share one (a policy without a ``nu`` of its own plans for it);
    ``env_overrides`` changes env
    arguments that do not change the physics (an analytic policy's ``action_type``, a trained model's action
    semantics). ``nu``: the episodes' budget (one, or one per seed) on a task whose budget is nu (receive scaling, a
    reset option there: required); the other tasks fix theirs. An episode is the same as a single env's reset with
    :func:`otagym.tasks.evaluation_options` (CDPB and anonymous OTA: every draw that matters is in the realisation;
    receive scaling: the whole episode is)."""
    task = TASKS[task_id]
    if (task.budget == "nu") != (nu is not None):
        raise ValueError(f"nu must be {'a budget' if task.budget == 'nu' else 'None'} on {task_id} (its budget is "
                         f"{task.budget}); got {nu!r}")
    env = OTAPrivacyVectorEnv(len(seeds), **{**task.kwargs, **env_overrides}, autoreset_mode=AutoresetMode.SAME_STEP)
    real = [sample_realisation(task_id, s) for s in seeds]
    options = {k: np.stack([r[k] for r in real], axis=env.core.OPTION_AXES[k]) for k in real[0]}
    if nu is not None:
        options["nu"] = np.broadcast_to(np.asarray(nu, dtype=float), (len(seeds),)).copy()
    told = task_scenario(task_id, float(nu)) if nu is not None and np.ndim(nu) == 0 else None  # one budget: its own
    return play(policy, env, options, range(task.max_episode_steps), cost_limit=task.cost_limit, scenario=told)


def episode_returns(policy: Any, task_id: str, seeds: Sequence[int], **env_overrides: Any) -> NDArray:
    """The episode returns of :func:`play_episodes`."""
    return play_episodes(policy, task_id, seeds, **env_overrides).returns


@functools.lru_cache(maxsize=None)
def best_constant_action(task_id: str, nu: float | None = None, points: int = 21, rounds: int = 3) -> float:
    """The constant env action with the best mean return on the training realisations
    (:data:`otagym.tasks.TUNING_SEEDS`, never the evaluation ones; cached) among those that meet the task's
    constraint in the mean (mean episode cost at most the cost limit, the CMDP's constraint), at budget ``nu``
    (receive scaling; a constant per budget): a grid of ``points`` actions over [-1, 1], then ``rounds - 1`` finer
    grids around the best, every action and realisation in one batched episode per grid."""
    seeds = list(TUNING_SEEDS)
    lo, hi = -1.0, 1.0
    best_a, best = lo, -np.inf
    for _ in range(rounds):
        grid = np.linspace(lo, hi, points)
        values = np.repeat(grid, len(seeds))  # env j * len(seeds) + i plays grid[j] on seed i
        policy = EnvActionPolicy(lambda obs, v=values: v[:, None])
        played = play_episodes(policy, task_id, seeds * points, nu)
        mean = played.returns.reshape(points, len(seeds)).mean(axis=1)
        feasible = played.cost_ratios.reshape(points, len(seeds)).mean(axis=1) <= 1.0
        if not feasible.any():
            raise ValueError(f"no constant action meets the constraint of {task_id} on the training realisations")
        mean = np.where(feasible, mean, -np.inf)
        k = int(np.argmax(mean))
        if mean[k] > best:
            best_a, best = float(grid[k]), float(mean[k])
        step = grid[1] - grid[0]
        lo, hi = max(-1.0, grid[k] - step), min(1.0, grid[k] + step)
    return best_a


class SchemeBenchmark:
    """How the tasks of one scheme are scored, each scheme's in ``baselines/<scheme>/benchmark.py`` as its
    ``BENCHMARK``. This default plays every policy in the task's env (:func:`play_episodes`) and scores its returns
    against the task's two anchors (:attr:`otagym.tasks.Task.anchors`, scores 0 and 100), which is how CDPB and
    anonymous OTA are scored; a scheme that scores otherwise (receive scaling: from the leakage, against
    OfflineOptimal on the same channels) overrides the methods it needs."""

    def references(self, task_id: str) -> dict[str, Any]:  # pragma: no cover - every scheme defines its own
        """The task's reference policies by name, floor to ceiling: ``(factory, env overrides)`` here."""
        raise NotImplementedError

    def analytic_policies(self, task_id: str) -> dict[str, Any]:
        """What ``otagym evaluate`` can name on the task: its references."""
        return self.references(task_id)

    def formulation(self, env_kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
        """What the env arguments make of the problem, by which a trained model's task is recognised from its
        ``run.json`` when it names none (None here: only a run that names its task has one)."""
        return None

    def trained_overrides(self, label: str, run_kwargs: dict[str, Any], task_id: str) -> dict[str, Any]:
        """The env arguments that make a model trained with ``run_kwargs`` (its ``run.json``'s) play its actions
        on ``task_id`` as it learnt them; ``ValueError`` naming ``label`` when they would mean something else there.
        Here: none (the model plays the task's env as it is)."""
        return {}

    def anchor_returns(self, task_id: str, nu: float, seeds: Sequence[int]) -> tuple[list[float], list[float]]:
        """The returns of the task's anchors on the realisation of each seed."""
        refs = self.references(task_id)
        out = []
        for name in TASKS[task_id].anchors:
            factory, overrides = refs[name]
            out.append(episode_returns(factory(), task_id, seeds, **overrides).tolist())
        return out[0], out[1]

    def scores_and_costs(self, policy: Any, task_id: str, seeds: Sequence[int], nu: float,
                         **env_overrides: Any) -> tuple[list[float], list[float]]:
        """The normalised score and the cost ratio of ``policy`` (env actions, or ``env_overrides``' action type) on
        each realisation, against the anchors on the same realisations (:func:`normalized_score`)."""
        played = play_episodes(policy, task_id, seeds, **env_overrides)
        return normalized_score(task_id, nu, seeds, played.returns).tolist(), played.cost_ratios.tolist()

    def evaluate(self, spec: Any, task_id: str, seeds: Sequence[int]
                 ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
        """The normalised scores and cost ratios per budget (keyed ``str(nu)``) of a policy as ``otagym evaluate``
        resolves it (here ``(factory, env overrides)``) on the realisation of each seed: every budget's episodes in
        one vector env (:func:`play_episodes`), scored against the anchors on the same realisations
        (:func:`normalized_score`: stored for the frozen set, computed and cached elsewhere)."""
        task, (factory, overrides) = TASKS[task_id], spec
        seeds = tuple(int(s) for s in seeds)
        nus = task.eval_nus if task.budget == "nu" else (None,)
        played = play_episodes(factory(), task_id, seeds * len(nus),
                               None if nus == (None,) else np.repeat(nus, len(seeds)), **overrides)
        scores, costs = {}, {}
        for i, nu in enumerate(task.eval_nus):
            part = slice(i * len(seeds), (i + 1) * len(seeds)) if task.budget == "nu" else slice(None)
            scores[str(float(nu))] = normalized_score(task_id, nu, seeds, played.returns[part]).tolist()
            costs[str(float(nu))] = played.cost_ratios[part].tolist()
        return scores, costs

    def device_references(self, task_id: str) -> dict[str, Any]:
        """A devices-as-agents task's references by name, floor to ceiling (:attr:`otagym.tasks.DeviceTask.anchors`
        among them): device policies, ``act(observations (N, K, entries)) -> actions (N, K, A)``."""
        raise ValueError(f"{task_id}: this scheme has no devices-as-agents task")

    def play_team(self, policy: Any, task_id: str, seeds: Sequence[int]) -> Episodes:
        """A device policy's episodes on the realisation of each seed of a devices-as-agents task: the team's return
        and the episode's cost over its limit (above 1 where a device spent its budget)."""
        raise ValueError(f"{task_id}: this scheme has no devices-as-agents task")

    def team_scores_and_costs(self, policy: Any, task_id: str, seeds: Sequence[int]) -> tuple[list[float], list[float]]:
        """A device policy's scores (:func:`otagym.tasks.robust_score` against the task's anchors played on the same
        realisations) and episode costs over the limit on the realisation of each seed."""
        played = self.play_team(policy, task_id, seeds)
        zero, hundred = _team_anchor_returns(self, task_id, tuple(int(s) for s in seeds))
        return robust_score(played.returns, zero, hundred).tolist(), played.cost_ratios.tolist()

    def reference_scores(self, task_id: str, anchors: dict[str, tuple[list[float], list[float]]],
                         seeds: Sequence[int], names: Sequence[str] | None = None
                         ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The scores and cost ratios per budget (keyed ``str(nu)``) of each reference (``names``, default all) on
        the realisation of each seed, against ``anchors`` (the anchors' returns there per budget, computed
        alongside: :func:`reference_record`)."""
        scores, costs = {}, {}
        for name, (factory, overrides) in self.references(task_id).items():
            if names is not None and name not in names:
                continue
            played = play_episodes(factory(), task_id, seeds, **overrides)
            scores[name] = {nu: score_against(played.returns, *anchors[nu]).tolist() for nu in anchors}
            costs[name] = {nu: played.cost_ratios.tolist() for nu in anchors}
        return scores, costs


@functools.lru_cache(maxsize=16)
def _team_anchor_returns(scheme: SchemeBenchmark, task_id: str, seeds: tuple[int, ...]) -> tuple[NDArray, NDArray]:
    """The returns of a devices-as-agents task's anchors on the realisation of each seed (cached per process)."""
    refs = scheme.device_references(task_id)
    zero, hundred = (scheme.play_team(refs[name], task_id, seeds).returns for name in DEVICE_TASKS[task_id].anchors)
    return zero, hundred


def scheme_benchmark(scheme: str) -> SchemeBenchmark:
    """The :class:`SchemeBenchmark` of a registered scheme (:func:`otagym.schemes.get_scheme` checks the name):
    ``baselines.<scheme>.benchmark.BENCHMARK``, each scheme's baselines being one package named as the scheme."""
    name = get_scheme(scheme).name
    return importlib.import_module(f"baselines.{name}.benchmark").BENCHMARK


def references(task_id: str) -> dict[str, Any]:
    """The reference policies of a task by name, floor to ceiling (:meth:`SchemeBenchmark.references` of its
    scheme)."""
    return scheme_benchmark(TASKS[task_id].scheme).references(task_id)


def anchor_returns(task_id: str, nu: float, seeds: Sequence[int] | None = None) -> tuple[list[float], list[float]]:
    """The returns of the task's anchor policies (:attr:`otagym.tasks.Task.anchors`, the scores 0 and 100) on the
    realisation of each seed (default: the task's evaluation set) at budget ``nu``."""
    task = TASKS[task_id]
    return scheme_benchmark(task.scheme).anchor_returns(task_id, nu, task.eval_seeds if seeds is None else seeds)


def cache_dir() -> Path:
    """Where the references computed on seeds outside a task's frozen evaluation set are cached
    (:func:`seed_references`): ``$OTAGYM_CACHE_DIR``, else ``$XDG_CACHE_HOME/otagym``, else ``~/.cache/otagym``."""
    if os.environ.get("OTAGYM_CACHE_DIR"):
        return Path(os.environ["OTAGYM_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "otagym"


def reference_record(task_id: str, seeds: Sequence[int] | None = None,
                     names: Sequence[str] | None = None) -> dict[str, Any]:
    """The task's references on the realisation of each seed (default: its frozen evaluation set) in the stored
    record's form (:func:`otagym.tasks.reference_scores`): version, seeds, budgets, the anchors and their returns,
    the scores of each reference in ``names`` (default all) and, on a constrained task, their episode costs over the
    cost limit (``cost_ratios``)."""
    task = TASKS[task_id]
    seeds = [int(s) for s in (task.eval_seeds if seeds is None else seeds)]
    anchors = {str(float(nu)): anchor_returns(task_id, nu, seeds) for nu in task.eval_nus}
    record = {"version": __version__, "seeds": seeds, "nus": list(task.eval_nus), "anchors": list(task.anchors),
              "anchor_returns": {nu: [list(r) for r in v] for nu, v in anchors.items()}}
    scores, costs = scheme_benchmark(task.scheme).reference_scores(task_id, anchors, seeds, names)
    return {**record, "scores": scores, **({"cost_ratios": costs} if task.constrained else {})}


def seed_references(task_id: str, seeds: Sequence[int] | None = None) -> dict[str, Any]:
    """The task's references on the realisation of each seed, in :func:`reference_record`'s form with ``"frozen"``
    (whether every seed is in the frozen evaluation set, :attr:`otagym.tasks.Task.eval_seeds`) and ``"cache"`` (the
    file of computed ones, else None). On the frozen set (the default): the stored rows of every reference. On
    any other seeds: the anchors, the floor (:attr:`otagym.tasks.Task.floor`) and the violation floor
    (:attr:`otagym.tasks.Task.violation_floor`, on a task of the suite), computed once per (task, seeds,
    otagym version) and cached under :func:`cache_dir` (a few seconds for 128 receive-scaling realisations; the other
    references are stored for the frozen set only: OnlineOptimal's dynamic programme takes ~3 s a realisation)."""
    task = TASKS[task_id]
    seeds = [int(s) for s in (task.eval_seeds if seeds is None else seeds)]
    if not seeds or any(isinstance(s, bool) or s < 0 for s in seeds):
        raise ValueError(f"seeds must be a non-empty list of integers >= 0; got {seeds!r}")
    if set(seeds) <= set(task.eval_seeds):
        stored = reference_scores(task_id)
        index = [stored["seeds"].index(s) for s in seeds]
        rows = {key: {name: {nu: [v[i] for i in index] for nu, v in per_nu.items()}
                      for name, per_nu in stored[key].items()} for key in ("scores", "cost_ratios") if key in stored}
        anchors = {nu: [[r[i] for i in index] for r in v] for nu, v in stored["anchor_returns"].items()}
        return {**stored, "seeds": seeds, "anchor_returns": anchors, **rows, "frozen": True, "cache": None}
    digest = hashlib.sha256(json.dumps([task_id, __version__, seeds]).encode()).hexdigest()[:12]
    path = cache_dir() / "references" / f"{task_id.split('/')[-1]}-{seeds[0]}-{seeds[-1]}-{len(seeds)}-{digest}.json"
    names = tuple(n for n in (task.floor, task.violation_floor) if n)
    record = json.loads(path.read_text()) if path.is_file() else None
    if (record is None or record.get("seeds") != seeds or record.get("version") != __version__
            or any(n not in record["scores"] for n in names)):
        record = reference_record(task_id, seeds, names=names)
        write_json(path, record)
    return {**record, "frozen": False, "cache": str(path)}


def violation_floor_scores(task_id: str, nu: float, seeds: Sequence[int]) -> NDArray:
    """The scores of the task's violation floor (:attr:`otagym.tasks.Task.violation_floor`) on the realisation of
    each seed at budget ``nu`` (:func:`seed_references`: stored for the frozen set, computed and cached elsewhere),
    what :func:`otagym.tasks.feasible_score` ranks an episode over its cost limit below."""
    name = TASKS[task_id].violation_floor
    if name is None:
        raise ValueError(f"{task_id} has no violation floor: only the suite's tasks ({', '.join(BENCHMARK)}) rank "
                         "episodes over their cost limit")
    return np.asarray(seed_references(task_id, seeds)["scores"][name][str(float(nu))], dtype=float)


def ranked_scores(task_id: str, nu: float, seeds: Sequence[int], scores: Any, cost_ratios: Any) -> NDArray:
    """The suite's score of episodes (``scores``, ``cost_ratios``: (..., len(seeds))) played on the realisation of
    each seed at budget ``nu``: :func:`otagym.tasks.feasible_score` against the task's violation floor there."""
    return feasible_score(scores, cost_ratios, violation_floor_scores(task_id, nu, seeds))


def normalized_score(task_id: str, nu: float, seeds: Sequence[int], episode_returns: Any) -> NDArray:
    """The normalised score of episodes played on the realisation of each seed (any seeds:
    :func:`otagym.tasks.evaluation_options` plays them), 100 (R - R_0) / (R_100 - R_0) with the anchors' returns on
    the same realisations (:func:`seed_references`: stored for the frozen evaluation set, computed and cached
    elsewhere). On the frozen set it equals :func:`otagym.tasks.normalized_score`."""
    task = TASKS[task_id]
    if float(nu) not in task.eval_nus:
        raise ValueError(f"nu must be one of {task.eval_nus} (the evaluation budgets of {task_id}); got {nu!r}")
    seeds = [int(s) for s in np.atleast_1d(np.asarray(seeds))]
    zero, hundred = seed_references(task_id, seeds)["anchor_returns"][str(float(nu))]
    return score_against(np.broadcast_to(np.asarray(episode_returns, dtype=float), len(seeds)), zero, hundred)


def task_scores(make: Callable[[NDArray], Any], task_id: str, seeds: Sequence[int] | None = None,
                nus: Sequence[float] | None = None, **env_overrides: Any) -> dict[str, list[float]]:
    """The normalised scores of :func:`task_scores_and_costs`."""
    return task_scores_and_costs(make, task_id, seeds, nus, **env_overrides)[0]


def task_scores_and_costs(make: Callable[[NDArray], Any], task_id: str, seeds: Sequence[int] | None = None,
                          nus: Sequence[float] | None = None,
                          **env_overrides: Any) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """The normalised score of ``make(nus)``'s policy (``nus``: each env's budget) on the realisation of each seed,
    and its episode cost over the task's cost limit there, per budget (keyed ``str(nu)``; default: the task's
    evaluation budgets; seeds default: the task's evaluation set), one batched episode per nu, scored as the task's
    scheme scores (:meth:`SchemeBenchmark.scores_and_costs`)."""
    task = TASKS[task_id]
    seeds = task.eval_seeds if seeds is None else seeds
    scheme = scheme_benchmark(task.scheme)
    scores, costs = {}, {}
    for nu in nus or task.eval_nus:
        key = str(float(nu))
        scores[key], costs[key] = scheme.scores_and_costs(make(np.full(len(seeds), float(nu))), task_id, seeds,
                                                          float(nu), **env_overrides)
    return scores, costs

def aggregate(table: dict[str, NDArray], baseline: str | None = None, reps: int = 2000,
              compared: tuple[str, ...] | None = None, poi_reps: int = 200) -> dict[str, dict[str, Any]]:
    """rliable's IQM with its stratified-bootstrap 95% CI for each entry of ``table`` (name -> (runs,
    realisations)), beside the mean, the lower tail (:func:`cvar`, 10%) and the worst score, and, with
    ``baseline``, rliable's probability of improvement over it with a 95% CI for the entries
    in ``compared`` (default: all). The IQM's bootstrap resamples runs within each realisation and the realisations
    themselves (``task_bootstrap``), so a policy of one run has a CI too; its resamples are seeded, so a table
    recomputed from the same scores is the same. rliable's bootstrap of the probability
    resamples runs only (a policy of one run would get a CI of one point), so its CI is :func:`_paired_poi_interval`'s,
    which resamples the realisations too (``poi_reps`` = 200 resamples: one Mann-Whitney test per realisation and
    resample)."""
    from rliable import library as rly

    outer = np.random.get_state()  # rliable resamples from numpy's global generator: seed it here, and only here
    np.random.seed(0)
    try:
        iqm, iqm_ci = rly.get_interval_estimates(table, lambda x: np.array([iqm_of(x)]), reps=reps,
                                                 task_bootstrap=True)
    finally:
        np.random.set_state(outer)
    poi = {} if baseline is None else improvement(table, baseline, compared, poi_reps)
    return {name: {"iqm": float(iqm[name][0]), "iqm_ci": [float(v) for v in iqm_ci[name][:, 0]],
                   "mean": float(table[name].mean()), "cvar10": cvar(table[name]), "worst": float(table[name].min()),
                   "p_improve": poi[name][0] if name in poi else None,
                   "p_improve_ci": poi[name][1] if name in poi else None}
            for name in table}


def iqm_of(scores: Any) -> float:
    """The interquartile mean of ``scores``, all runs and realisations pooled: rliable's ``aggregate_iqm`` (scipy's
    ``trim_mean`` at 25%: the lowest and the highest floor(n/4) dropped) by one sort, 25x faster than scipy's
    dispatch, which a bootstrap of 2,000 resamples calls 2,000 times."""
    flat = np.sort(np.ravel(np.asarray(scores, dtype=float)))
    cut = int(0.25 * flat.size)
    return float(flat[cut:flat.size - cut].mean())


def cvar(scores: NDArray, level: float = 0.1) -> float:
    """The conditional value at risk of ``scores`` at ``level``: the mean of the lowest ``level`` share of them (at
    least one), all runs and realisations pooled; the tail where budget-exhaustion cliffs show."""
    flat = np.sort(np.ravel(np.asarray(scores, dtype=float)))
    return float(flat[:max(1, int(np.ceil(level * flat.size)))].mean())


def improvement(table: dict[str, NDArray], baseline: str, compared: tuple[str, ...] | None = None,
                reps: int = 200) -> dict[str, tuple[float, list[float]]]:
    """rliable's probability of improvement over ``table[baseline]`` and its paired 95% CI
    (:func:`_paired_poi_interval`, ``reps`` resamples) of each entry in ``compared`` (default: all but the baseline)."""
    from rliable import metrics

    return {name: (float(metrics.probability_of_improvement(x, table[baseline])),
                   _paired_poi_interval(x, table[baseline], reps))
            for name, x in table.items() if name != baseline and (compared is None or name in compared)}


def _paired_poi_interval(x: NDArray, y: NDArray, reps: int, seed: int = 0) -> list[float]:
    """The percentile 95% CI of the probability of improvement of ``x`` over ``y`` (runs, realisations) under a
    stratified bootstrap that resamples the realisations (the same ones for both: the scores are paired on them) and,
    within each, the runs of each policy. Each resample's probability is rliable's, the mean over realisations of
    the Mann-Whitney U of the runs over (runs of x x runs of y), computed for all resamples at once."""
    rng = np.random.default_rng(seed)
    n = x.shape[1]
    cols = rng.integers(0, n, (reps, 1, n))
    xb = x[rng.integers(0, x.shape[0], (reps, x.shape[0], n)), cols]  # (reps, runs_x, n)
    yb = y[rng.integers(0, y.shape[0], (reps, y.shape[0], n)), cols]
    diff = xb[:, :, None, :] - yb[:, None, :, :]  # (reps, runs_x, runs_y, n)
    values = ((diff > 0) + 0.5 * (diff == 0)).mean(axis=(1, 2, 3))
    return [float(v) for v in np.percentile(values, [2.5, 97.5])]
