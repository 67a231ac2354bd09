"""Scoring policies on a benchmark task's frozen evaluation set (:mod:`otagym.tasks`): the computation behind
``otagym evaluate``, the stored reference scores (``benchmarks/reference_scores.py``) and the RL results.

A policy is scored per budget nu of the task on every evaluation realisation (one batched episode per nu, the
realisations of :func:`~baselines.evaluation.sample_realisations`, which :func:`otagym.tasks.evaluation_options` gives
to any client) with the paired normalised score (0 = EqualAlloc, 100 = OfflineOptimal on the same realisation). The
statistics are rliable's (Agarwal et al., 2021, "Deep RL at the edge of the statistical precipice"): the interquartile
mean with a stratified-bootstrap 95% CI, and the probability of improvement over a reference.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from baselines.core import Policy
from baselines.evaluation import normalized_score, reference_leakage, run_policy, sample_realisations
from baselines.policies import EqualAlloc
from otagym.env import OTAPrivacyVectorEnv
from otagym.tasks import EVALUATION_SEEDS, TASKS, task_scenario

__all__ = ["task_scores", "offline_returns", "aggregate"]


def task_scores(make: Callable[[NDArray], Policy], task_id: str, seeds: Sequence[int] = EVALUATION_SEEDS,
                nus: Sequence[float] | None = None) -> dict[str, list[float]]:
    """The normalised score of ``make(nus)``'s policy (``nus``: each env's budget) on the realisation of each seed,
    per budget (keyed ``str(nu)``; default: the task's evaluation budgets). One batched episode per nu."""
    out = {}
    for nu in nus or TASKS[task_id].eval_nus:
        scenario = task_scenario(task_id, nu)
        per_env = np.full(len(seeds), float(nu))
        result = run_policy(make(per_env), scenario, sample_realisations(scenario, seeds), dp=False, nu=per_env)
        optimal = np.array([reference_leakage(scenario, float(nu), s) for s in seeds])
        out[str(float(nu))] = normalized_score(result.leakage, result.equal_alloc_leakage, optimal).tolist()
    return out


def offline_returns(task_id: str, nu: float, seeds: Sequence[int] = EVALUATION_SEEDS) -> list[float]:
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
    realisations)), and, with ``baseline``, the probability of improvement over it with its CI for the entries in
    ``compared`` (default: all). The bootstrap resamples runs within each realisation and the realisations themselves
    (``task_bootstrap``), so a policy of one run has a CI too. The probability's bootstrap runs one Mann-Whitney test
    per realisation and resample (``poi_reps`` = 200 resamples: 2000 took 15 minutes per task of 32 realisations x
    10 policies)."""
    from rliable import library as rly
    from rliable import metrics

    iqm, iqm_ci = rly.get_interval_estimates(table, lambda x: np.array([metrics.aggregate_iqm(x)]), reps=reps,
                                             task_bootstrap=True)
    pairs = {name: (x, table[baseline]) for name, x in table.items()
             if baseline is not None and name != baseline and (compared is None or name in compared)}
    poi, poi_ci = (rly.get_interval_estimates(pairs, metrics.probability_of_improvement, reps=poi_reps,
                                              task_bootstrap=True) if pairs else ({}, {}))
    return {name: {"iqm": float(iqm[name][0]), "iqm_ci": [float(v) for v in iqm_ci[name][:, 0]],
                   "mean": float(table[name].mean()),
                   "p_improve": float(poi[name]) if name in pairs else None,
                   "p_improve_ci": [float(v) for v in np.ravel(poi_ci[name])] if name in pairs else None}
            for name in table}
