"""Direct policy search on common random numbers: a small linear policy of the observation, trained by CMA-ES on the
training channels, scored on held-out channels beside the references of ``rl_results.py``.

Why (docs/rl.md §9): the policy-gradient agents do not resolve the price shifts worth a point of score, because the
return's variance between channel realisations exceeds the variance between nearby policies. Scoring every candidate
policy on the *same* realisations (common random numbers, the variance reduction of simulation studies) removes that
variance from each comparison: the objective is a deterministic function of the parameters, which CMA-ES (Hansen's
``cma``) maximises: the margin of the mean normalised score over ``BestConstant``'s on the realisations of
:data:`~baselines.references.TRAIN_SEEDS`, at each nu of ``rl_results.NUS``, averaged over nu (``--objective mean``)
or the smallest of the three (``worst-nu``). The policy is a = clip(theta . phi(obs), -1, 1) on the price action with
nine features of the observation (:func:`features`): 1, z, z^2, h, p, t, z h, z p, z t, where z = log10 nu - log10
nu_ref, h = log10(h_min^2 / E[h_min^2]), p = log1p(budget left per round / nu) and t = t/T; theta = 0 is the action's
reference, a = 0.

Per seed: CMA-ES from theta = 0 (step 0.05, population 10, its seed), for ``--minutes``; its mean every 5
generations (and at the last) is a checkpoint, the one with the best objective on :data:`VALIDATION_SEEDS` is kept
and scored on :data:`TEST_SEEDS`. Each seed's result is written atomically to
``--out/<task>/<objective>/seed<k>.json`` and read back on a rerun with the same ``--minutes`` (a killed run resumes at
the first unfinished seed). The summary: rliable IQM with stratified-bootstrap 95% CIs over seeds x test
realisations, mean and worst, P(> BestConstant) and P(> AdaScaleTrained), beside the references (``rl_results.py``'s
``<--references>/<task>/references.json`` as it is when there, else computed).

    pip install -e ".[rl,results]"       # SB3 (the references and rl_results.py's helpers), rliable, cma
    python benchmarks/crn_search.py --task gauss_markov_0.9 --seeds 5 --minutes 6    # about 35 min on one core
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from rl_results import NUS, REFERENCES, TASKS, scores

from baselines.benchmark import aggregate, improvement, task_scores
from baselines.policies import ActionPolicy
from baselines.references import TEST_SEEDS, TRAIN_SEEDS, VALIDATION_SEEDS
from otagym._io import write_json

#: Names of the features of :func:`features`, in order.
FEATURES = ("1", "z", "z^2", "h", "p", "t", "z h", "z p", "z t")


def features(obs: NDArray) -> NDArray:
    """(N, 9) features of observations (N, 3M + 6) of M devices (layout:
    docs/environment/receive-scaling.md#observation)."""
    m = (obs.shape[1] - 6) // 3
    z, h, p, t = obs[:, 2 * m + 4], obs[:, 2 * m], obs[:, 2 * m + 3], obs[:, 2 * m + 1]
    return np.stack([np.ones_like(z), z, z * z, h, p, t, z * h, z * p, z * t], axis=1)


class LinearFeaturePolicy(ActionPolicy):
    """The price action a = clip(theta . features(obs), -1, 1); ``theta`` (9,) or one row per env (N, 9)."""

    def __init__(self, theta: NDArray, nu: NDArray | None = None) -> None:
        super().__init__(nu)
        self.theta = np.asarray(theta, dtype=float)

    def action(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        phi = features(np.asarray(observation, dtype=float))
        return np.clip((self.theta * phi).sum(axis=1), -1.0, 1.0)


def scores_by_nu(thetas: NDArray, task: str, seeds: tuple[int, ...]) -> dict[str, NDArray]:
    """The normalised scores (rows, seeds) of each parameter row per nu of :data:`NUS`, all rows on the same
    realisations (one batched episode per nu)."""
    rows, n = len(thetas), len(seeds)
    per_env = np.repeat(np.asarray(thetas), n, axis=0)  # env k * n + i: row k on realisation i
    table = task_scores(lambda nus: LinearFeaturePolicy(per_env, nus), TASKS[task], seeds * rows, NUS)
    return {nu: np.asarray(s).reshape(rows, n) for nu, s in table.items()}


def objective(by_nu: dict[str, NDArray], floor: dict[str, float], kind: str) -> NDArray:
    """Each row's margin over ``floor`` (BestConstant's mean score per nu on the same realisations): the mean over nu
    (``"mean"``) or the smallest (``"worst-nu"``: beat the floor at every nu)."""
    margins = np.array([s.mean(axis=1) - floor[nu] for nu, s in by_nu.items()])
    return margins.mean(axis=0) if kind == "mean" else margins.min(axis=0)


@functools.cache
def best_constant_means(task: str) -> dict[str, dict[str, float]]:
    """BestConstant's mean score per nu on the training and on the validation realisations (once per task and
    process: every seed's search measures its margins against them)."""
    return {name: {nu: float(np.mean(s)) for nu, s in scores(REFERENCES["BestConstant"], task, seeds).items()}
            for name, seeds in (("train", TRAIN_SEEDS), ("validation", VALIDATION_SEEDS))}


def search(task: str, seed: int, minutes: float, kind: str) -> dict[str, Any]:
    """One seed: CMA-ES on the training realisations for ``minutes`` (> 0) of wall time, the checkpoint with the best
    validation objective, its test scores."""
    import cma

    if not minutes > 0:
        raise ValueError(f"minutes must be > 0; got {minutes}")
    floors = best_constant_means(task)
    es = cma.CMAEvolutionStrategy(np.zeros(len(FEATURES)), 0.05, {"seed": seed + 1, "popsize": 10, "verbose": -9})
    start, generation, checkpoints, done = time.perf_counter(), 0, [], False
    while not done:
        candidates = np.array(es.ask())
        es.tell(list(candidates), -objective(scores_by_nu(candidates, task, TRAIN_SEEDS), floors["train"], kind))
        generation += 1
        done = time.perf_counter() - start >= 60.0 * minutes
        if generation % 5 == 0 or done:  # and the last generation
            theta = np.array(es.mean)
            val = objective(scores_by_nu(theta[None], task, VALIDATION_SEEDS), floors["validation"], kind)
            checkpoints.append({"generation": generation, "theta": theta.tolist(), "validation": float(val[0])})
    best = max(checkpoints, key=lambda c: c["validation"])
    test = scores_by_nu(np.array(best["theta"])[None], task, TEST_SEEDS)
    return {"seed": seed, "objective": kind, "minutes": minutes, "generations": generation,
            "wall_s": time.perf_counter() - start, "selected": best, "checkpoints": checkpoints,
            "test": {nu: s[0].tolist() for nu, s in test.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="gauss_markov_0.9")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--minutes", type=float, default=6.0)
    parser.add_argument("--objective", choices=("mean", "worst-nu"), default="mean",
                        help="the margin over BestConstant to maximise: its mean over nu, or its smallest")
    parser.add_argument("--out", type=Path, default=Path("runs/crn_search"))
    parser.add_argument("--references", type=Path, default=Path("runs/rl_results"),
                        help="rl_results.py's --out: its <task>/references.json is read as it is when there")
    args = parser.parse_args()
    folder = args.out / args.task / args.objective
    runs = []
    for k in range(args.seeds):
        path = folder / f"seed{k}.json"
        if not path.is_file():
            write_json(path, search(args.task, k, args.minutes, args.objective))
        runs.append(json.loads(path.read_text()))
        if runs[-1].get("minutes") != args.minutes:
            raise SystemExit(f"{path} was searched for {runs[-1].get('minutes')} minutes, not --minutes "
                             f"{args.minutes}: use another --out, or remove it to search again")
    ref_path = args.references / args.task / "references.json"
    stored = json.loads(ref_path.read_text()) if ref_path.is_file() else {}
    refs = {name: stored.get(name) or scores(make, args.task, TEST_SEEDS) for name, make in REFERENCES.items()}
    print(f"{args.task}: {len(runs)} seeds x {len(TEST_SEEDS)} test realisations; "
          f"generations {[r['generations'] for r in runs]}")
    for nu in map(str, NUS):
        table = {"LinearCRN": np.array([r["test"][nu] for r in runs]),
                 **{name: np.array([s[nu]]) for name, s in refs.items()}}
        stats = aggregate(table, "BestConstant", compared=("LinearCRN",))
        vs_ada = improvement(table, "AdaScaleTrained", ("LinearCRN",))["LinearCRN"][0]
        print(f"nu = {nu}")
        for name, s in stats.items():
            extra = (f"  P(>BestConstant) {s['p_improve']:.2f}  P(>AdaScaleTrained) {vs_ada:.2f}"
                     if name == "LinearCRN" else "")
            print(f"  {name:16s} IQM {s['iqm']:6.2f} [{s['iqm_ci'][0]:6.2f}, {s['iqm_ci'][1]:6.2f}]  "
                  f"mean {s['mean']:7.2f}  worst {s['worst']:8.1f}{extra}")


if __name__ == "__main__":
    main()
