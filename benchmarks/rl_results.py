"""RL schedulers against the analytic policies: train, evaluate on held-out channels, write the table and the plot.

For each fading model (i.i.d., and Gauss-Markov with correlation 0.9) and each algorithm (PPO and SAC by default),
trains one nu-conditioned policy (nu drawn log-uniformly in [0.01, 0.16] per episode and observed) for at most
``--minutes`` of wall time with ``otagym train``'s engine, then plays it with ``otagym compare``'s engine on
``--eval-seeds`` channel realisations never used in training (seeds 10000.., each a fresh ``default_rng(seed)``;
training draws its channels from the vector env's generator seeded 0) at nu in {0.01, 0.04, 0.16}, beside AdaScale
(calibrated to the same nu on the same channels), EqualAlloc and OfflineOptimal.

Every checkpoint (each 200k steps) and the final model are scored on 8 *validation* realisations (seeds 20000-20007,
used neither in training nor in the test): the learning curves. The final model plays the test (``--select best``:
the best validation checkpoint, as SB3's ``EvalCallback`` keeps ``best_model``). Writes ``rl_results.json`` (every
row, the curves, the models played), ``rl_results.md`` (the table) and ``learning_curves.png`` (validation score
against training steps) to ``--out``.
Rerunning resumes: a finished run (``model.zip`` with its wall time in ``run.json``) is not retrained, an interrupted
one continues from its newest checkpoint.

    python benchmarks/rl_results.py --minutes 10          # what the README reports
    python benchmarks/rl_results.py --minutes 1 --eval-seeds 4 --out /tmp/rl   # a quick look
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from otagym._io import save_figure, write_json, write_text
from agents.policy import AgentPolicy, load_model
from agents.train import latest_checkpoint, train
from baselines import OfflineOptimal, run_policy, sample_realisations
from baselines.compare import PolicySpec, compare, normalized_score
from otagym import get_scenario

FADINGS = {"iid": {"fading": "iid"}, "gauss_markov_0.9": {"fading": "gauss_markov", "correlation": 0.9}}
ANALYTIC = ("OfflineOptimal", "AdaScale", "EqualAlloc")


def _trained(run: Path) -> bool:
    meta = run / "run.json"
    return (run / "model.zip").is_file() and meta.is_file() and "wall_s" in json.loads(meta.read_text())


def _learning_curve(run: Path, scenario, real, nus: np.ndarray, optimal: np.ndarray) -> tuple[list, list, list]:
    """(env steps, mean normalised score over ``real`` x ``nus``, model path) of every checkpoint and of the final
    model, in order of steps."""
    points = []
    for path in (run / "checkpoints").glob("model_*_steps.zip"):
        points.append((int(path.stem.split("_")[1]), path))
    meta = json.loads((run / "run.json").read_text())
    points.append((int(meta["trained_timesteps"]), run / "model.zip"))
    steps, scores, paths = [], [], []
    for step, path in sorted(points):
        result = run_policy(AgentPolicy(path, nu=nus), scenario, real, dp=False, nu=nus)
        steps.append(step)
        scores.append(float(normalized_score(result.leakage, result.equal_alloc_leakage, optimal).mean()))
        paths.append(str(path))
    return steps, scores, paths


def _table(rows_by_fading: dict[str, list[dict]]) -> str:
    lines = ["| fading | nu | policy | RDP at alpha=3 (± 95% CI) | RDP / AdaScale | eps at delta=1e-5 | realised nu | "
             "normalised score |", "|---|---|---|---|---|---|---|---|"]
    for fading, rows in rows_by_fading.items():
        ada = {r["nu"]: r["rdp"] for r in rows if r["policy"] == "AdaScale"}
        for r in rows:
            lines.append(f"| {fading} | {r['nu']:g} | {r['policy']} | {r['rdp']:.4g} ± {r['rdp_ci95']:.2g} | "
                         f"{r['rdp'] / ada[r['nu']]:.3f} | {r['epsilon']:.3g} ± {r['epsilon_ci95']:.2g} | "
                         f"{r['cost_mean']:.4g} | {r['score']:.1f} ± {r['score_ci95']:.1f} |")
    return "\n".join(lines)


def _plot(curves: dict[str, dict[str, tuple[list, list]]], reference: dict[str, float], nus, seeds,
          path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(5.5 * len(curves), 4), squeeze=False)
    for ax, (fading, runs) in zip(axes[0], curves.items()):
        for algo, (steps, scores, _) in runs.items():
            ax.plot(steps, scores, marker=".", label=algo)
        ax.axhline(reference[fading], color="k", ls="--", lw=1, label="AdaScale (calibrated)")
        ax.axhline(0.0, color="grey", ls=":", lw=1, label="EqualAlloc")
        ax.set(title=fading, xlabel="training env steps (rounds)", ylim=(-100, 105),
               ylabel=f"normalised score, mean over nu in {list(nus)}\nand {len(seeds)} validation realisations")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", default=["ppo", "sac"])
    parser.add_argument("--fadings", nargs="+", default=list(FADINGS), choices=list(FADINGS))
    parser.add_argument("--minutes", type=float, default=10.0, help="training wall time per (fading, algo)")
    parser.add_argument("--eval-seeds", type=int, default=32)
    parser.add_argument("--nus", type=float, nargs="+", default=[0.01, 0.04, 0.16])
    parser.add_argument("--select", choices=["final", "best"], default="final",
                        help="play the final model, or the checkpoint with the best validation score")
    parser.add_argument("--out", default="results/rl")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = tuple(range(10_000, 10_000 + args.eval_seeds))
    rows_by_fading: dict[str, list[dict]] = {}
    chosen: dict[str, dict] = {}
    curves: dict[str, dict[str, tuple[list, list, list]]] = {}
    curve_seeds = tuple(range(20_000, 20_008))  # validation: neither training nor the test seeds
    curve_nus = np.tile(np.asarray(args.nus, dtype=float), len(curve_seeds))
    for fading in args.fadings:
        scenario = get_scenario("paper-mnist", **FADINGS[fading])
        real = sample_realisations(scenario, curve_seeds).repeat(len(args.nus))
        optimal = OfflineOptimal(nu=curve_nus)
        optimal.reset(scenario, channel_gains=real.channel_gains)
        optimal_leakage = optimal.total_leakage()
        curves[fading] = {}
        extra = {}
        for algo in args.algos:
            run = out / "runs" / f"{fading}-{algo}"
            if not _trained(run):
                start = time.perf_counter()
                train(algo, run_dir=run, seed=0, max_minutes=args.minutes, resume=latest_checkpoint(run) is not None,
                      env_overrides=FADINGS[fading], progress=False, checkpoint_freq=200_000)
                print(f"trained {run} in {time.perf_counter() - start:.0f} s", flush=True)
            curve = curves[fading][algo.upper()] = _learning_curve(run, scenario, real, curve_nus, optimal_leakage)
            # --select best: model selection on the validation realisations (SB3's best_model); final: the last
            best = int(np.argmax(curve[1])) if args.select == "best" else len(curve[0]) - 1
            chosen[f"{fading} {algo.upper()}"] = {"steps": curve[0][best], "validation_score": curve[1][best],
                                                  "path": curve[2][best]}
            model = load_model(curve[2][best])
            kw = json.loads((run / "run.json").read_text())["env_kwargs"]
            extra[algo.upper()] = PolicySpec(lambda nu, p, model=model, kw=kw: AgentPolicy(model, nu=nu,
                                                                                           env_kwargs=kw))
        start = time.perf_counter()
        rows = compare("paper-mnist", tuple(args.nus), seeds, ANALYTIC, extra_policies=extra, progress=False,
                       **FADINGS[fading])
        print(f"evaluated {fading} on {len(seeds)} held-out realisations in {time.perf_counter() - start:.0f} s",
              flush=True)
        rows_by_fading[fading] = rows
    table = _table(rows_by_fading)
    table += (f"\n\nModels played ({args.select}; validation score = mean normalised score on seeds 20000-20007):\n"
              + "\n".join(f"- {k}: {v['steps']} steps (validation score {v['validation_score']:.1f})"
                           for k, v in chosen.items()))
    print(table)
    meta = {"scenario": get_scenario("paper-mnist").to_dict(), "eval_seeds": list(seeds), "minutes": args.minutes,
            "algos": args.algos, "rows": rows_by_fading, "learning_curves": curves,
            "validation_seeds": list(curve_seeds), "chosen_checkpoints": chosen}
    write_json(out / "rl_results.json", meta)
    write_text(out / "rl_results.md", table + "\n")
    reference = {f: float(np.mean([r["score"] for r in rows if r["policy"] == "AdaScale"]))
                 for f, rows in rows_by_fading.items()}
    _plot(curves, reference, args.nus, curve_seeds, out / "learning_curves.png")
    print(f"wrote {out / 'rl_results.json'}, {out / 'rl_results.md'}, {out / 'learning_curves.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
