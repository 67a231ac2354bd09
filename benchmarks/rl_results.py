"""RL schedulers against the analytic policies: train, evaluate on held-out channels, write the table and the plot.

For each fading model (i.i.d., and Gauss-Markov with correlation 0.9) and each algorithm (PPO and SAC by default),
trains one nu-conditioned policy (nu drawn log-uniformly in [0.01, 0.16] per episode and observed) for at most
``--minutes`` of wall time with ``otagym train``'s engine, then plays it with ``otagym compare``'s engine on
``--eval-seeds`` channel realisations never used in training (seeds 10000.., each a fresh ``default_rng(seed)``;
training draws its channels from the vector env's generator seeded 0) at nu in {0.01, 0.04, 0.16}, beside AdaScale
(calibrated to the same nu on the same channels), EqualAlloc and OfflineOptimal.

Writes ``rl_results.json`` (every row), ``rl_results.md`` (the table) and ``learning_curves.png`` to ``--out``.
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

from agents._io import write_json
from agents.policy import AgentPolicy, load_model
from agents.train import train
from baselines.compare import PolicySpec, compare
from otagym import get_scenario

FADINGS = {"iid": {"fading": "iid"}, "gauss_markov_0.9": {"fading": "gauss_markov", "correlation": 0.9}}
ANALYTIC = ("OfflineOptimal", "AdaScale", "EqualAlloc")


def _trained(run: Path) -> bool:
    meta = run / "run.json"
    return (run / "model.zip").is_file() and meta.is_file() and "wall_s" in json.loads(meta.read_text())


def _learning_curve(run: Path) -> tuple[np.ndarray, np.ndarray]:
    """(env steps, rolling median over 50 episodes of the episode's leakage / EqualAlloc's on its channels)."""
    rows = []
    for path in sorted(run.glob("monitor*.csv")):
        data = np.genfromtxt(path, delimiter=",", names=True, skip_header=1)
        rows.append(np.atleast_1d(data))
    if not rows:
        return np.zeros(0), np.zeros(0)
    data = np.concatenate(rows)
    ratio = data["episode_leakage"] / data["episode_equal_alloc_leakage"]
    steps = np.cumsum(data["l"])
    k = min(50, len(ratio))
    rolling = np.array([np.median(ratio[max(0, i - k + 1):i + 1]) for i in range(len(ratio))])
    return steps, rolling


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


def _plot(curves: dict[str, tuple[np.ndarray, np.ndarray]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, (steps, ratio) in curves.items():
        if steps.size:
            ax.plot(steps, ratio, label=name)
    ax.axhline(1.0, color="k", lw=0.8, ls="--", label="EqualAlloc")
    ax.set(xlabel="env steps (rounds)", ylabel="leakage / EqualAlloc's (rolling median, 50 episodes)",
           yscale="log", title="training episodes (stochastic policy, nu drawn per episode)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", default=["ppo", "sac"])
    parser.add_argument("--fadings", nargs="+", default=list(FADINGS), choices=list(FADINGS))
    parser.add_argument("--minutes", type=float, default=10.0, help="training wall time per (fading, algo)")
    parser.add_argument("--eval-seeds", type=int, default=32)
    parser.add_argument("--nus", type=float, nargs="+", default=[0.01, 0.04, 0.16])
    parser.add_argument("--out", default="results/rl")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = tuple(range(10_000, 10_000 + args.eval_seeds))
    rows_by_fading: dict[str, list[dict]] = {}
    curves = {}
    for fading in args.fadings:
        extra = {}
        for algo in args.algos:
            run = out / "runs" / f"{fading}-{algo}"
            if not _trained(run):
                start = time.perf_counter()
                train(algo, run_dir=run, seed=0, max_minutes=args.minutes, resume=True,
                      env_overrides=FADINGS[fading], progress=False, checkpoint_freq=200_000)
                print(f"trained {run} in {time.perf_counter() - start:.0f} s", flush=True)
            model = load_model(run / "model.zip")
            kw = json.loads((run / "run.json").read_text())["env_kwargs"]
            extra[algo.upper()] = PolicySpec(lambda nu, p, model=model, kw=kw: AgentPolicy(model, nu=nu,
                                                                                           env_kwargs=kw))
            curves[f"{fading} {algo.upper()}"] = _learning_curve(run)
        start = time.perf_counter()
        rows = compare("paper-mnist", tuple(args.nus), seeds, ANALYTIC, extra_policies=extra, progress=False,
                       **FADINGS[fading])
        print(f"evaluated {fading} on {len(seeds)} held-out realisations in {time.perf_counter() - start:.0f} s",
              flush=True)
        rows_by_fading[fading] = rows
    table = _table(rows_by_fading)
    print(table)
    meta = {"scenario": get_scenario("paper-mnist").to_dict(), "eval_seeds": list(seeds), "minutes": args.minutes,
            "algos": args.algos, "rows": rows_by_fading}
    write_json(out / "rl_results.json", meta)
    tmp = out / "rl_results.md.tmp"
    tmp.write_text(table + "\n")
    tmp.replace(out / "rl_results.md")
    _plot(curves, out / "learning_curves.png")
    print(f"wrote {out / 'rl_results.json'}, {out / 'rl_results.md'}, {out / 'learning_curves.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
