"""Scoring policies on a benchmark task's frozen evaluation set (:mod:`otagym.tasks`): the computation behind
``otagym evaluate``, the stored reference scores (``benchmarks/reference_scores.py``) and the RL results.

A policy is scored per budget nu of the task on every evaluation realisation (one batched episode per nu, the
realisations :func:`otagym.tasks.evaluation_options` gives to any client) with the paired normalised score of
:func:`otagym.tasks.normalized_score` (receive scaling: 0 = EqualAlloc, 100 = OfflineOptimal on the same realisation,
computed from the leakages by :func:`~baselines.evaluation.run_policy`; CDPB and anonymous OTA: from the episode
returns of :func:`episode_returns`, 0 and 100 the task's anchors). The statistics are rliable's (Agarwal et al., 2021, "Deep RL at the edge of the statistical precipice"): the interquartile
mean with a stratified-bootstrap 95% CI, and the probability of improvement over a reference.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np
from gymnasium.vector import AutoresetMode
from numpy.typing import NDArray

from baselines.anonymous import CalibratedSigma, PaperSetting
from baselines.cdpb import MaxRho, StageTwo
from baselines.core import Policy
from baselines.evaluation import normalized_score, reference_leakage, run_policy, sample_realisations
from baselines.policies import EqualAlloc
from baselines.compare import POLICIES, PolicySpec
from baselines.references import TRAIN_SEEDS, BestConstant, DualPrice, UniformRandom
from otagym.accounting import DEFAULT_ORDERS
from otagym.env import OTAPrivacyVectorEnv
from otagym.tasks import TASKS, sample_realisation, task_scenario
from otagym.tasks import normalized_score as task_normalized_score

__all__ = ["task_scores", "task_scores_and_costs", "receive_scaling_references", "offline_returns", "aggregate", "cvar",
           "improvement", "episode_returns", "play_episodes", "Episodes",
           "anchor_returns", "ConstantAction",
           "RandomAction", "EnvActionPolicy", "best_constant_action", "scheme_references"]

class EnvActionPolicy:
    """A policy that returns the env's own actions: ``function(observation batch (N, obs_dim)) -> actions (N, 1)``
    (an SB3 model's ``predict``, a callable). Any scheme."""

    def __init__(self, function: Callable[[NDArray], Any]) -> None:
        self.function = function

    def reset(self, scenario: Any, seed: int | None = None, **_: Any) -> None:
        """Nothing to plan."""

    def act(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        return np.asarray(self.function(np.asarray(observation, dtype=np.float32)), dtype=float).reshape(-1, 1)


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


class Episodes(NamedTuple):
    """Per realisation: the episode return, and the episode cost (the sum of ``info["cost"]``) over the task's
    cost limit (at most 1 exactly when the constraint holds)."""

    returns: NDArray
    cost_ratios: NDArray


def play_episodes(policy: Any, task_id: str, seeds: Sequence[int], nu: float | None = None,
                  **env_overrides: Any) -> Episodes:
    """``policy`` (``reset(scenario, seed)``, ``act(obs, info)``) on the realisation of each seed
    (:func:`otagym.tasks.sample_realisation`) in the task's env, one batched episode; ``env_overrides`` changes env
    arguments that do not change the physics (an analytic policy's ``action_type``, a trained model's action
    semantics). ``nu``: every episode's budget on a task whose budget is nu (receive scaling, a reset option there:
    required); the other tasks fix theirs. An episode is the same as a single env's reset with
    :func:`otagym.tasks.evaluation_options` (CDPB and anonymous OTA: every draw that matters is in the realisation;
    receive scaling: the whole episode is)."""
    task = TASKS[task_id]
    if (task.budget == "nu") != (nu is not None):
        raise ValueError(f"nu must be {'a budget' if task.budget == 'nu' else 'None'} on {task_id} (its budget is "
                         f"{task.budget}); got {nu!r}")
    env = OTAPrivacyVectorEnv(len(seeds), **{**task.kwargs, **env_overrides}, autoreset_mode=AutoresetMode.SAME_STEP)
    real = [sample_realisation(task_id, s) for s in seeds]
    options = {k: np.stack([r[k] for r in real], axis=env.rounds.OPTION_AXES[k]) for k in real[0]}
    if nu is not None:
        options["nu"] = np.full(len(seeds), float(nu))
    policy.reset(env.scenario, 0)
    obs, info = env.reset(seed=0, options=options)
    total, cost = np.zeros(len(seeds)), np.zeros(len(seeds))
    for _ in range(task.max_episode_steps):
        obs, reward, _, _, info = env.step(policy.act(obs, info))
        total += reward
        cost += info["cost"]
    return Episodes(total, cost / task.cost_limit)


def episode_returns(policy: Any, task_id: str, seeds: Sequence[int], **env_overrides: Any) -> NDArray:
    """The episode returns of :func:`play_episodes`."""
    return play_episodes(policy, task_id, seeds, **env_overrides).returns


def scheme_references(task_id: str) -> dict[str, tuple[Callable[[], Any], dict[str, Any]]]:
    """The reference policies of a CDPB or anonymous task by name: ``(factory, env overrides)`` (the analytic
    policies play their raw action); the analytic reference (the planner, the calibrated sigma) is the last."""
    task = TASKS[task_id]
    if task.scheme == "cdpb":
        return {"UniformRandom": (RandomAction, {}), "MaxRho": (MaxRho, {"action_type": "rho"}),
                "BestConstant": (lambda: ConstantAction(best_constant_action(task_id)), {}),
                "CDPB": (StageTwo, {"action_type": "rho"})}
    if task.scheme == "anonymous":
        target = float(task.kwargs["target_epsilon"])
        return {"UniformRandom": (RandomAction, {}), "MidAction": (lambda: ConstantAction(0.0), {}),
                "BestConstant": (lambda: ConstantAction(best_constant_action(task_id)), {}),
                "PaperSetting": (PaperSetting, {"action_type": "sigma"}),
                "CalibratedSigma": (lambda: CalibratedSigma(target, orders=DEFAULT_ORDERS), {"action_type": "sigma"})}
    raise ValueError(f"task must be a CDPB or anonymous task (receive scaling's references are in "
                     f"baselines.references); got {task_id!r}")


@functools.lru_cache(maxsize=None)
def best_constant_action(task_id: str, nu: float | None = None, points: int = 21, rounds: int = 3) -> float:
    """The constant env action with the best mean return on the training realisations
    (:data:`baselines.references.TRAIN_SEEDS`, never the evaluation ones; cached) among those that meet the task's
    constraint in the mean (mean episode cost at most the cost limit, the CMDP's constraint), at budget ``nu``
    (receive scaling; a constant per budget): a grid of ``points`` actions over [-1, 1], then ``rounds - 1`` finer
    grids around the best, every action and realisation in one batched episode per grid."""
    seeds = list(TRAIN_SEEDS)
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


def anchor_returns(task_id: str, nu: float, seeds: Sequence[int] | None = None) -> tuple[list[float], list[float]]:
    """The returns of the task's anchor policies (:attr:`otagym.tasks.Task.anchors`, the scores 0 and 100) on the
    realisation of each seed (default: the task's evaluation set) at budget ``nu``."""
    task = TASKS[task_id]
    seeds = task.eval_seeds if seeds is None else seeds
    if task.scheme == "receive_scaling":
        return [0.0] * len(seeds), offline_returns(task_id, nu, seeds)
    refs = scheme_references(task_id)
    out = []
    for name in task.anchors:
        factory, overrides = refs[name]
        out.append(episode_returns(factory(), task_id, seeds, **overrides).tolist())
    return out[0], out[1]


def task_scores(make: Callable[[NDArray], Policy], task_id: str, seeds: Sequence[int] | None = None,
                nus: Sequence[float] | None = None, **env_overrides: Any) -> dict[str, list[float]]:
    """The normalised scores of :func:`task_scores_and_costs`."""
    return task_scores_and_costs(make, task_id, seeds, nus, **env_overrides)[0]


def task_scores_and_costs(make: Callable[[NDArray], Policy], task_id: str, seeds: Sequence[int] | None = None,
                          nus: Sequence[float] | None = None,
                          **env_overrides: Any) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """The normalised score of ``make(nus)``'s policy (``nus``: each env's budget) on the realisation of each seed,
    and its episode cost over the task's cost limit there, per budget (keyed ``str(nu)``; default: the task's
    evaluation budgets; seeds default: the task's evaluation set). One batched episode per nu. On a CDPB or anonymous
    task the policy plays the env's own action
    (or ``env_overrides``' action type) and is scored from its returns against the stored anchors (evaluation seeds
    only); on receive scaling it returns x_t (:class:`baselines.core.Policy`) and is scored from its leakage."""
    scores, costs = {}, {}
    task = TASKS[task_id]
    seeds = task.eval_seeds if seeds is None else seeds
    for nu in nus or task.eval_nus:
        key, per_env = str(float(nu)), np.full(len(seeds), float(nu))
        if task.scheme != "receive_scaling":
            played = play_episodes(make(per_env), task_id, seeds, **env_overrides)
            scores[key] = task_normalized_score(task_id, nu, seeds, played.returns).tolist()
            costs[key] = played.cost_ratios.tolist()
            continue
        scenario = task_scenario(task_id, nu)
        result = run_policy(make(per_env), scenario, sample_realisations(scenario, seeds), dp=False, nu=per_env)
        optimal = np.array([reference_leakage(scenario, float(nu), s) for s in seeds])
        scores[key] = normalized_score(result.leakage, result.equal_alloc_leakage, optimal).tolist()
        costs[key] = (result.cost_mean / per_env).tolist()  # info["cost"] = c_t / nu: the episode's over T
    return scores, costs


def receive_scaling_references(task_id: str) -> dict[str, PolicySpec]:
    """The reference policies of a receive-scaling task by name, floor to ceiling (OfflineOptimal is 100 by
    definition of the score): ``UniformRandom`` (the task's own action, uniform), ``EqualAlloc``, ``BestConstant``,
    ``AdaScaleTrained`` and ``OnlineOptimal`` (:mod:`baselines.references`; budget mode, so each meets nu on every
    realisation). On a constrained task (a CMDP) ``BestConstant`` is the constant env action per budget with the best
    mean return on training realisations among those that meet the constraint in the mean
    (:func:`best_constant_action`; with the spend action it is a = 0, EqualAlloc: a constant spend meets the
    constraint exactly when a <= 0, and spending more leaks less), and ``DualPrice`` is the online optimum when the
    constraint holds in expectation only (it is over the limit on about half the realisations)."""
    task = TASKS[task_id]
    action = str(task.kwargs["action_type"])
    refs = {"UniformRandom": PolicySpec(lambda nu, p: UniformRandom(nu=nu, action_type=action), matched=False),
            **{name: POLICIES[name] for name in ("EqualAlloc", "BestConstant", "AdaScaleTrained", "OnlineOptimal")}}
    if task.constrained:
        refs["BestConstant"] = PolicySpec(lambda nu, p: BestConstant(
            nu=nu, action=_per_env(lambda v: best_constant_action(task_id, v), nu), action_type=action))
        refs["DualPrice"] = PolicySpec(lambda nu, p: DualPrice(nu=nu), matched=False)
    return refs


def _per_env(value: Callable[[float], float], nu: NDArray) -> NDArray:
    """``value(nu)`` of each env's budget, computed once per distinct budget."""
    table = {float(v): value(float(v)) for v in np.unique(nu)}
    return np.array([table[float(v)] for v in np.ravel(nu)]).reshape(np.shape(nu))


def offline_returns(task_id: str, nu: float, seeds: Sequence[int]) -> list[float]:
    """OfflineOptimal's episode return in the task's env on the realisation of each seed at ``nu``:
    (L_EqualAlloc - L_OfflineOptimal) / H, H the env's reward scale of that placement and budget (the return of any
    episode over it is the episode's normalised score / 100)."""
    scenario = task_scenario(task_id, nu)
    real = sample_realisations(scenario, seeds)
    per_env = np.full(len(seeds), float(nu))
    equal_alloc = run_policy(EqualAlloc(nu=per_env), scenario, real, dp=False, nu=per_env).equal_alloc_leakage
    optimal = np.array([reference_leakage(scenario, float(nu), s) for s in seeds])
    env = OTAPrivacyVectorEnv(len(seeds), **TASKS[task_id].kwargs)
    env.reset(seed=0, options={"distances_m": real.distances_m, "channel_gains": real.channel_gains, "nu": per_env})
    return ((equal_alloc - optimal) / env.rounds.reward_scale).tolist()


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
    from rliable import metrics

    outer = np.random.get_state()  # rliable resamples from numpy's global generator: seed it here, and only here
    np.random.seed(0)
    try:
        iqm, iqm_ci = rly.get_interval_estimates(table, lambda x: np.array([metrics.aggregate_iqm(x)]), reps=reps,
                                                 task_bootstrap=True)
    finally:
        np.random.set_state(outer)
    poi = {} if baseline is None else improvement(table, baseline, compared, poi_reps)
    return {name: {"iqm": float(iqm[name][0]), "iqm_ci": [float(v) for v in iqm_ci[name][:, 0]],
                   "mean": float(table[name].mean()), "cvar10": cvar(table[name]), "worst": float(table[name].min()),
                   "p_improve": poi[name][0] if name in poi else None,
                   "p_improve_ci": poi[name][1] if name in poi else None}
            for name in table}


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
