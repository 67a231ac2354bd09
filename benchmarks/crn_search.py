r"""Direct policy search on common random numbers: a small linear policy of the observation, trained by CMA-ES on the
training channels, scored on held-out channels beside the references of ``rl_results.py``.

Why (docs/rl.md §9): the policy-gradient agents do not resolve the price shifts worth a point of score, because the
return's variance between channel realisations exceeds the variance between nearby policies. Scoring every candidate
policy on the *same* realisations (common random numbers, the variance reduction of simulation studies) removes that
variance from each comparison: the objective is a deterministic function of the parameters, which CMA-ES (Hansen's
``cma``) maximises: the margin of the mean normalised score over ``BestConstant``'s on ``--train-realisations``
training realisations (:func:`training_seeds`: :data:`~baselines.receive_scaling.references.TRAIN_SEEDS` and the seeds after them)
at each nu of ``rl_results.NUS``, averaged over nu (``--objective mean``) or the smallest of the three
(``worst-nu``). The policy is linear in nine features of the observation (:mod:`agents.linear`): 1, z, z^2, h, p, t,
z h, z p, z t (z = log10 nu - log10 nu_ref, h = log10(h_min^2 / E[h_min^2]), p = log1p(budget left per round / nu),
t = t/T), on the price action. ``--agent linear_crn``: a = clip(theta . phi(obs), -1, 1), so theta = 0 is the action's
reference, a = 0. ``--agent online_optimal_residual``: a = clip(a_OO + theta . phi(obs), -1, 1), a learned residual on
:class:`~baselines.receive_scaling.references.OnlineOptimalAction` (the dynamic programme's price as the price action), so theta = 0
is ``OnlineOptimal``: under Gauss-Markov fading the programme, solved for the i.i.d. marginal, does not use what the
present channel says of the next ones, which the residual may learn.

Per seed: CMA-ES from theta = 0 (step 0.05, population 10, its seed) for ``--generations``; its mean every 10
generations is a checkpoint, the one with the best objective on :data:`VALIDATION_SEEDS` is kept and scored on
:data:`TEST_SEEDS`. The objective is deterministic and CMA-ES seeded, so a seed's search is reproducible to the bit.
Each seed's result is written atomically to ``--out/<task>/<agent>/<objective>/seed<k>.json`` and read back on a
rerun with the same ``--generations`` and ``--train-realisations`` (a killed run resumes at the first unfinished seed).
``--zoo [DIR]`` ships the seed best on validation to ``<DIR>/<task>/<agent>/`` as an SB3 model (``ARS.load``; DIR:
default ``agents/zoo``; a model already there is replaced only with ``--force``).
The summary: rliable IQM with stratified-bootstrap 95% CIs over seeds x test realisations, mean and worst,
P(> BestConstant) and P(> AdaScaleTrained), beside the first checkpoint (after 10 generations) and the references
(``rl_results.py``'s ``<--references>/<task>/references.json`` as it is when there, else computed).
``--more-test K`` prints the same summary again on K more held-out realisations (seeds 30000...), never used in a
search or its selection, for CIs the 32 test realisations are too few to separate.

    pip install -e ".[rl,results]"       # SB3 (the references and rl_results.py's helpers), rliable, cma
    python -m benchmarks.crn_search --zoo --force    # the three tasks, 5 seeds each: about 65 min on one core
    python -m benchmarks.crn_search --tasks gauss_markov_0.9 --seeds 2 --generations 30   # a quick look
    python -m benchmarks.crn_search --agent online_optimal_residual --tasks gauss_markov_0.9 --generations 50 \
        --zoo --force
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

from agents.linear import FEATURES, LinearFeaturePolicy, linear_price_model, linear_term
from agents.train import package_versions
from baselines.benchmark import aggregate, improvement, task_scores
from baselines.receive_scaling.references import TEST_SEEDS, TRAIN_SEEDS, VALIDATION_SEEDS, OnlineOptimalAction
from benchmarks.rl_results import NUS, REFERENCES, TASKS, scores
from benchmarks.zoo import add_zoo_arguments, refuse_shipped
from otagym import ENV_ID, OTAPrivacyEnv
from otagym._io import atomic_write, write_json
from otagym.tasks import TASKS as TASK_SETTINGS

#: CMA-ES generations between two checkpoints (each scored on the validation realisations).
CHECKPOINT_EVERY = 10


class ResidualFeaturePolicy(OnlineOptimalAction):
    """The price action a = clip(a_OO + theta . price_features(obs), -1, 1) (``online_optimal_residual``), a_OO the
    action of :class:`~baselines.receive_scaling.references.OnlineOptimalAction`, for the batched search."""

    def __init__(self, theta: NDArray, nu: NDArray | None = None, env_kwargs: dict[str, Any] | None = None) -> None:
        super().__init__(nu, env_kwargs=env_kwargs)
        self.theta = np.asarray(theta, dtype=float)

    def action(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        return np.clip(super().action(observation, info) + linear_term(self.theta, observation), -1.0, 1.0)


#: The searched agents: the policy class of each ``--agent`` (its zoo folder has the same name).
AGENTS = {"linear_crn": LinearFeaturePolicy, "online_optimal_residual": ResidualFeaturePolicy}


def scores_by_nu(thetas: NDArray, task: str, seeds: tuple[int, ...], agent: str = "linear_crn") -> dict[str, NDArray]:
    """The normalised scores (rows, seeds) of ``agent``'s policy with each parameter row, per nu of :data:`NUS`, all
    rows on the same realisations (one batched episode per nu), on the task's action settings."""
    rows, n = len(thetas), len(seeds)
    per_env = np.repeat(np.asarray(thetas), n, axis=0)  # env k * n + i: row k on realisation i
    settings = TASK_SETTINGS[TASKS[task]].kwargs
    table = task_scores(lambda nus: AGENTS[agent](per_env, nus, settings), TASKS[task], seeds * rows, NUS)
    return {nu: np.asarray(s).reshape(rows, n) for nu, s in table.items()}


def objective(by_nu: dict[str, NDArray], floor: dict[str, float], kind: str) -> NDArray:
    """Each row's margin over ``floor`` (BestConstant's mean score per nu on the same realisations): the mean over nu
    (``"mean"``) or the smallest (``"worst-nu"``: beat the floor at every nu)."""
    margins = np.array([s.mean(axis=1) - floor[nu] for nu, s in by_nu.items()])
    return margins.mean(axis=0) if kind == "mean" else margins.min(axis=0)


def training_seeds(count: int) -> tuple[int, ...]:
    """The first ``count`` (>= 1) seeds of ``90_000, 90_001, ...``: :data:`~baselines.receive_scaling.references.TRAIN_SEEDS` (on
    which BestConstant and AdaScaleTrained are tuned) and, past 32, the seeds after them, disjoint from the validation
    (20_000...) and test (10_000...) seeds."""
    if count < 1:
        raise ValueError(f"train realisations must be >= 1; got {count}")
    return tuple(range(TRAIN_SEEDS[0], TRAIN_SEEDS[0] + count))


@functools.cache
def best_constant_means(task: str, train_realisations: int) -> dict[str, dict[str, float]]:
    """BestConstant's mean score per nu on the training and on the validation realisations (once per task and
    process: every seed's search measures its margins against them)."""
    return {name: {nu: float(np.mean(s)) for nu, s in scores(REFERENCES["BestConstant"], task, seeds).items()}
            for name, seeds in (("train", training_seeds(train_realisations)), ("validation", VALIDATION_SEEDS))}


def search(task: str, seed: int, generations: int, kind: str, train_realisations: int = 64,
           agent: str = "linear_crn") -> dict[str, Any]:
    """One seed of ``agent``: ``generations`` (a positive multiple of 10) of CMA-ES on ``train_realisations``
    training realisations, the checkpoint with the best validation objective, its test scores."""
    import cma

    if generations <= 0 or generations % CHECKPOINT_EVERY:
        raise ValueError(f"generations must be a positive multiple of {CHECKPOINT_EVERY}; got {generations}")
    train = training_seeds(train_realisations)
    floors = best_constant_means(task, train_realisations)
    es = cma.CMAEvolutionStrategy(np.zeros(len(FEATURES)), 0.05, {"seed": seed + 1, "popsize": 10, "verbose": -9})
    start, checkpoints = time.perf_counter(), []
    for generation in range(1, generations + 1):
        candidates = np.array(es.ask())
        es.tell(list(candidates), -objective(scores_by_nu(candidates, task, train, agent), floors["train"], kind))
        if generation % CHECKPOINT_EVERY == 0:
            theta = np.array(es.mean)
            val = objective(scores_by_nu(theta[None], task, VALIDATION_SEEDS, agent), floors["validation"], kind)
            checkpoints.append({"generation": generation, "theta": theta.tolist(), "validation": float(val[0])})
    best = max(checkpoints, key=lambda c: c["validation"])
    test = scores_by_nu(np.array(best["theta"])[None], task, TEST_SEEDS, agent)
    return {"agent": agent, "seed": seed, "objective": kind, "generations": generations,
            "train_realisations": train_realisations, "wall_s": time.perf_counter() - start,
            "selected": best, "checkpoints": checkpoints, "test": {nu: s[0].tolist() for nu, s in test.items()}}


def ship(task: str, runs: list[dict[str, Any]], target: Path) -> None:
    """The seed whose selected checkpoint has the best validation objective, as an SB3 model every client loads:
    ``target/model.zip`` (``ARS.load``; :class:`agents.linear.LinearPricePolicy`, or
    :class:`agents.linear.OnlineOptimalResidualPolicy` for the residual agent) and ``target/run.json``."""
    import cma

    best = max(runs, key=lambda r: r["selected"]["validation"])
    residual = best.get("agent", "linear_crn") == "online_optimal_residual"
    settings = TASK_SETTINGS[TASKS[task]].kwargs
    model = linear_price_model(best["selected"]["theta"], OTAPrivacyEnv(**settings),
                               online_optimal_base=settings if residual else None)
    with atomic_write(target / "model.zip", "wb") as fh:
        model.save(fh)
    write_json(target / "run.json", {
        "algo": "ars", "policy": f"agents.linear.{type(model.policy).__name__}",
        "trained_by": "CMA-ES on common random numbers (benchmarks/crn_search.py)", "env_id": ENV_ID,
        "task": TASKS[task], "env_kwargs": settings, "seed": best["seed"], "objective": best["objective"],
        "generations": best["generations"], "train_realisations": best["train_realisations"],
        "selected_generation": best["selected"]["generation"], "validation_objective": best["selected"]["validation"],
        "features": list(FEATURES), "theta": best["selected"]["theta"],
        "versions": {**package_versions(), "cma": cma.__version__}})


def more_test_seeds(count: int) -> tuple[int, ...]:
    """The first ``count`` (>= 0) seeds of ``30_000, 30_001, ...``: held-out realisations beyond the tasks' 32 frozen
    test ones (:data:`~baselines.receive_scaling.references.TEST_SEEDS`), for CIs those are too few to separate; disjoint from the
    training, validation and test seeds, and never used in a search or its selection."""
    if count < 0:
        raise ValueError(f"more test realisations must be >= 0; got {count}")
    return tuple(range(30_000, 30_000 + count))


def report(task: str, runs: list[dict[str, Any]], references: Path,
           seeds: tuple[int, ...] = TEST_SEEDS) -> None:
    """Print the searched policy's scores on ``seeds`` beside its first checkpoint's and the references'. On the test
    seeds, the agent's are those its search stored and the references' are read from ``references`` (rl_results.py's
    --out: its ``<task>/references.json``) when there; on other seeds all are computed."""
    ref_path = references / task / "references.json"
    stored = json.loads(ref_path.read_text()) if ref_path.is_file() and seeds == TEST_SEEDS else {}
    refs = {name: stored.get(name) or scores(make, task, seeds) for name, make in REFERENCES.items()}
    agent = runs[0].get("agent", "linear_crn")
    first = scores_by_nu(np.array([r["checkpoints"][0]["theta"] for r in runs]), task, seeds, agent)
    played = ({nu: np.array([r["test"][nu] for r in runs]) for nu in map(str, NUS)} if seeds == TEST_SEEDS else
              scores_by_nu(np.array([r["selected"]["theta"] for r in runs]), task, seeds, agent))
    kind = "test" if seeds == TEST_SEEDS else f"more held-out ({seeds[0]}-{seeds[-1]})"
    print(f"{task}, {agent}: {len(runs)} seed(s) x {len(seeds)} {kind} realisations; selected generations "
          f"{[r['selected']['generation'] for r in runs]} of {runs[0]['generations']}")
    for nu in map(str, NUS):
        table = {agent: played[nu],
                 f"after {CHECKPOINT_EVERY} generations": first[nu],
                 **{name: np.array([s[nu]]) for name, s in refs.items()}}
        stats = aggregate(table, "BestConstant", compared=(agent,))
        versus = {name: improvement(table, name, (agent,))[agent][0] for name in ("AdaScaleTrained", "OnlineOptimal")}
        print(f"nu = {nu}")
        for name, s in stats.items():
            extra = (f"  P(>BestConstant) {s['p_improve']:.2f}" + "".join(
                f"  P(>{other}) {p:.2f}" for other, p in versus.items()) if name == agent else "")
            print(f"  {name:22s} IQM {s['iqm']:6.2f} [{s['iqm_ci'][0]:6.2f}, {s['iqm_ci'][1]:6.2f}]  "
                  f"mean {s['mean']:7.2f}  worst {s['worst']:8.1f}{extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.rsplit("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agent", choices=list(AGENTS), default="linear_crn",
                        help="the linear policy alone, or as a residual on OnlineOptimal's action (default linear_crn)")
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS),
                        help="the tasks to search (default: all three)")
    parser.add_argument("--seeds", type=int, default=5, help="search seeds per task (default 5)")
    parser.add_argument("--generations", type=int, default=150, help="CMA-ES generations per seed (multiple of 10)")
    parser.add_argument("--train-realisations", type=int, default=64,
                        help="training realisations every candidate plays at each nu (the first 32 are TRAIN_SEEDS)")
    parser.add_argument("--objective", choices=("mean", "worst-nu"), default="mean",
                        help="the margin over BestConstant to maximise: its mean over nu, or its smallest")
    parser.add_argument("--out", type=Path, default=Path("runs/crn_search"),
                        help="one JSON per task, agent, objective and seed: <out>/<task>/<agent>/<objective>/"
                             "seed<k>.json")
    add_zoo_arguments(parser, "<task>/<agent>")
    parser.add_argument("--more-test", type=int, default=0, metavar="K",
                        help="also score the selected policies and the references on K more held-out realisations "
                             "(seeds 30000, 30001, ...; default 0)")
    parser.add_argument("--references", type=Path, default=Path("runs/rl_results"),
                        help="rl_results.py's --out: its <task>/references.json is read as it is when there")
    args = parser.parse_args()
    if args.zoo is not None and args.objective != "mean":
        parser.error("--zoo ships the searches of --objective mean only")
    if args.zoo is not None:
        refuse_shipped(parser, [args.zoo / task / args.agent for task in args.tasks], args.force)
    paths = {task: [args.out / task / args.agent / args.objective / f"seed{k}.json" for k in range(args.seeds)]
             for task in args.tasks}
    budget = (args.generations, args.train_realisations)
    stored_paths = [path for task_paths in paths.values() for path in task_paths if path.is_file()]
    for path in stored_paths:  # before any search: a stored seed of another budget is refused
        stored = json.loads(path.read_text())
        if (stored.get("generations"), stored.get("train_realisations")) != budget:
            raise SystemExit(f"{path} is not a search of --generations {args.generations} on --train-realisations "
                             f"{args.train_realisations}: use another --out, or remove it to search again")
    for task, task_paths in paths.items():
        for k, path in enumerate(task_paths):
            if not path.is_file():
                print(f"{task}: searching seed {k} ({args.generations} generations; the first also scores the "
                      "references on the training and validation realisations)", flush=True)
                write_json(path, search(task, k, args.generations, args.objective, args.train_realisations,
                                        args.agent))
        runs = [json.loads(path.read_text()) for path in task_paths]
        if args.zoo is not None:
            ship(task, runs, args.zoo / task / args.agent)
        report(task, runs, args.references)
        if args.more_test:
            report(task, runs, args.references, more_test_seeds(args.more_test))


if __name__ == "__main__":
    main()
