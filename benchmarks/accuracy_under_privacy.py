"""The papers' accuracy experiments on Fashion-MNIST, measured with the training fidelity through ``otagym sweep``.

Three sweeps, each written as a YAML config to ``--out`` and run by the sweep (one record per cell, so a killed run
resumes where it stopped and a rerun recomputes nothing):

* ``receive_scaling``: model A on the AdaScale paper's MNIST deployment (``paper-mnist``: M = 10, B = 60, n_m = 6,000
  so q = 0.01, lambda = 0.5, C = 1, the paper's CNN with d = 26,010), Fashion-MNIST split IID over the 10 devices,
  at nu = 0.01 / 0.04 / 0.16: AdaScale (V calibrated to nu per realisation, §VII), EqualAlloc and OfflineOptimal, the
  references of the RL results (BestConstant, AdaScaleTrained, OnlineOptimal, tuned on training channels) and the
  best shipped agent for i.i.d. fading, ``agents/zoo/iid/linear_crn`` (LinearCRN). The test accuracy every T/20
  rounds and at the end, the RDP and the (eps, delta) each cell's policy reaches.
* ``beyond``: EqualAlloc at nu far above the paper's range, where the noise starts to cost accuracy.
* ``cdpb``: model B at the CDPB paper's preset (K = 100 clients, eps-bar = 100, gamma-bar = 1e-2, its own Theorem 1
  accounting), the policies of its Fig. 4 (CDPB-n, CDPB-i, gamma-based, h_min-based, IS-based, noise-free), each
  over its planned horizon tau (h_min- and IS-based over CDPB-i's, ``--cdpb-rounds``).

Anonymous OTA has no training fidelity (its sweep runs the analytic one only), so its accuracy is not measured here.

**The reduction** that keeps the run within an hour on one core (measured without it: a cell at T = 20 took 200 s,
21 evaluations of 8.3 s, ||grad f||^2 over the 60,000 training samples 7.4 s of each, and 0.15 s a round; so about
250 s a cell at T = 500): T = 200 rounds (2 epochs) instead of 500; evaluations on 2,000 random test images and
2,000 random training samples (``eval_samples``); CDPB's clients on 2,000 random training samples (20 each,
``train_samples``: its rounds run full batches on every reliable client). The model, the deployment and the
accounting are the paper's.

Writes ``accuracy_under_privacy.{png,md,json}`` to ``--out``; ``--docs`` writes them to docs/ (the page of the docs
site). The tables and the figure are rebuilt from the records on every run. Torch runs one thread per process;
``--workers N`` runs N cells at a time.

    python -m benchmarks.accuracy_under_privacy --docs              # the docs' run (44 min on one core)
    python -m benchmarks.accuracy_under_privacy --rounds 20 --seeds 1 --out /tmp/acc   # a quick look
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from baselines.report import ci95, policy_colour
from otagym._io import save_figure, write_json, write_text
from otagym.cli import sweep

#: The budgets of the AdaScale paper's Fig. 1 that the issue asks for, and EqualAlloc's beyond them.
NUS = (0.01, 0.04, 0.16)
BEYOND_NUS = (2.56, 10.24, 40.96)
#: Model A's policies: the paper's (OfflineOptimal, AdaScale, EqualAlloc), the RL references and the best shipped
#: agent for i.i.d. fading (docs/rl.md, "Learning on common random numbers": above BestConstant at every nu).
ROOT = Path(__file__).resolve().parent.parent
POLICIES: tuple[Any, ...] = ("OfflineOptimal", "AdaScale", "EqualAlloc", "BestConstant", "AdaScaleTrained",
                             "OnlineOptimal",
                             {"name": "LinearCRN", "model": str(ROOT / "agents/zoo/iid/linear_crn/model.zip")})
#: The policies of the CDPB paper's Fig. 4.
CDPB_POLICIES = ("CDPB-n", "CDPB-i", "gamma-based", "hmin-based", "IS-based", "noise-free")
STEM = "accuracy_under_privacy"
#: The datasets the script runs on: their name and where their files come from.
SOURCES = {"fashion-mnist": ("Fashion-MNIST", "Debian's `dataset-fashion-mnist`"),
           "mnist": ("MNIST", "MNIST's IDX files in `--data-dir`")}
DOCS = ROOT / "docs"


def sweep_configs(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The three sweep configs (``otagym sweep`` YAML as dicts) of this run's settings."""
    data = {"fidelity": "train", "dataset": args.dataset, "eval_samples": args.eval_samples,
            **({"data_dir": args.data_dir} if args.data_dir else {})}
    seeds = list(range(args.seeds))
    model_a = {"scheme": "receive_scaling", "scenarios": ["paper-mnist"], "rounds": args.rounds, **data,
               "seeds": seeds}
    return [
        {"name": "receive_scaling", **model_a, "policies": list(POLICIES), "nu": list(NUS)},
        {"name": "beyond", **model_a, "policies": ["EqualAlloc"], "nu": list(BEYOND_NUS)},
        {"name": "cdpb", "scheme": "cdpb", "scenarios": [{"preset": "paper-cdpb", "accounting": "theorem1"}],
         "rounds": args.cdpb_rounds, **data, "train_samples": args.cdpb_train_samples,
         "policies": list(CDPB_POLICIES), "seeds": seeds},
    ]


def run_sweeps(configs: list[dict[str, Any]], out: Path, workers: int | None
               ) -> tuple[dict[str, list[dict[str, Any]]], int]:
    """Each config written to ``out/<name>.yaml`` and run by the sweep into ``out/<name>/`` (finished cells are
    reused); returns each sweep's cells (the cell's policy name, nu, seed and result, and its wall time) and how many
    cells were computed now. A sweep that does not finish raises ``RuntimeError`` with the sweep's report (rerun the
    same command to resume)."""
    import yaml

    cells: dict[str, list[dict[str, Any]]] = {}
    computed = 0
    for config in configs:
        path = write_text(out / f"{config['name']}.yaml",
                          f"# written by python -m benchmarks.{STEM}; otagym sweep {config['name']}.yaml runs it\n"
                          + yaml.safe_dump(config, sort_keys=False))
        plan = sweep.plan(sweep.load_config(path))
        outcome = sweep.run(plan, out / config["name"], workers=workers)
        if not outcome.complete:
            raise RuntimeError(sweep.report(outcome, out / config["name"]) + "\nrerun the same command to resume")
        computed += outcome.computed
        cells[config["name"]] = [
            {"policy": c["policy"]["name"], "nu": c.get("nu"), "seed": c["seed"], **outcome.records[k]["result"],
             "cell_wall_s": outcome.records[k]["wall_s"]} for k, c in zip(plan.keys, plan.cells)]
    return cells, computed


def _spread(values: Sequence[float]) -> dict[str, Any]:
    """Mean, half-width of the 95% CI over seeds (:func:`baselines.report.ci95`) and the per-seed values."""
    mean, half = ci95(np.asarray(values, dtype=float))
    return {"mean": mean, "ci95": half, "seeds": [float(v) for v in values]}


def _groups(cells: list[dict[str, Any]], keys: Sequence[str]) -> list[list[dict[str, Any]]]:
    """The cells grouped by ``keys`` (e.g. policy and nu), in order of first appearance."""
    out: dict[tuple, list[dict[str, Any]]] = {}
    for cell in cells:
        out.setdefault(tuple(cell[k] for k in keys), []).append(cell)
    return list(out.values())


def model_a_rows(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (policy, nu): final test accuracy, eps (delta = 1e-5) and RDP (alpha = 3) per device (mean over
    devices) and the realised mean c_t, each over seeds; the accuracy curve (mean over seeds) against rounds."""
    rows = []
    for group in _groups(cells, ("policy", "nu")):
        curves = np.array([c["accuracy_curve"] for c in group])
        rows.append({"policy": group[0]["policy"], "nu": group[0]["nu"],
                     **{key: _spread([c[key] for c in group]) for key in ("accuracy", "epsilon", "rdp", "cost_mean")},
                     "rounds": group[0]["accuracy_rounds"], "accuracy_curve": curves.mean(axis=0).tolist(),
                     "matched": all(c["matched"] for c in group)})
    return rows


def cdpb_rows(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per CDPB policy: final test accuracy, the worst client's RDP (alpha = 2) under the paper's Theorem 1
    (``rdp``; eps-bar bounds it) and under the SGM accounting, rounds played (tau), mean rho and reliable clients."""
    return [{"policy": group[0]["policy"],
             **{key: _spread([c[key] for c in group])
                for key in ("accuracy", "epsilon_theorem1", "epsilon_sgm", "rounds_played", "rho", "num_reliable")}}
            for group in _groups(cells, ("policy",))]


def _pm(stat: dict[str, Any], digits: int = 3) -> str:
    return f"{stat['mean']:.{digits}f} ± {stat['ci95']:.{digits}f}"


def _seeds(stat: dict[str, Any], digits: int = 3) -> str:
    return ", ".join(f"{v:.{digits}f}" for v in stat["seeds"])


def _sig(stat: dict[str, Any]) -> str:
    return f"{stat['mean']:.3g} ± {stat['ci95']:.2g}"


def markdown(result: dict[str, Any]) -> str:
    """The docs page: what ran, the reduction, the wall time, and the three tables."""
    s = result["settings"]
    name, source = SOURCES[s.get("dataset", "fashion-mnist")]
    lines = [
        f"# Accuracy under privacy on {name}: the measured tables",
        "",
        f"Written by `python -m benchmarks.{STEM} --docs` (resumable: a killed run continues from its last finished "
        "cell). [The papers, reproduced](results.md#accuracy-under-privacy-on-fashion-mnist) says what these numbers "
        "mean for each paper's claim.",
        "",
        f"Training fidelity, {name} from {source}, {s['seeds']} seeds (channel "
        f"realisations, model initialisations and batches). Reduction: T = {s['rounds']} rounds for model A (the "
        f"paper: 500); evaluations on {s['eval_samples']:,} random test images and as many training samples; CDPB's "
        f"clients on {s['cdpb_train_samples']:,} random training samples. Model, deployment and accounting are the "
        f"papers'. This run: {result['wall_s'] / 60:.1f} min of wall time for {result['computed']} cells computed "
        f"({result['reused']} reused); the {result['cells']} cells took {result['cell_wall_s'] / 60:.1f} min in all.",
        "",
        "![accuracy under privacy](accuracy_under_privacy.png)",
        "",
        f"## Model A, `paper-mnist` deployment, T = {s['rounds']}",
        "",
        "Final test accuracy (mean ± 95% CI over seeds; the seeds' values) and the leakage each policy reaches: eps at "
        "δ = 1e-5 and RDP at α = 3, means over devices.",
        "",
        "| policy | ν | test accuracy | per seed | ε (δ = 1e-5) | RDP (α = 3) | mean c_t |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["model_a"] + result["beyond"]:
        lines.append(f"| {r['policy']} | {r['nu']:g} | {_pm(r['accuracy'])} | {_seeds(r['accuracy'])} | "
                     f"{_sig(r['epsilon'])} | {_sig(r['rdp'])} | {r['cost_mean']['mean']:.4g} |")
    lines += [
        "",
        "## Model B, `paper-cdpb` (K = 100, ε̄ = 100, the paper's Theorem 1 accounting)",
        "",
        "| policy | τ (rounds) | test accuracy | per seed | Theorem 1 RDP (α = 2) | SGM RDP (α = 2) | ρ | reliable K_t"
        " |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["cdpb"]:
        lines.append(f"| {r['policy']} | {r['rounds_played']['mean']:.0f} | {_pm(r['accuracy'])} | "
                     f"{_seeds(r['accuracy'])} | {_sig(r['epsilon_theorem1'])} | {_sig(r['epsilon_sgm'])} | "
                     f"{r['rho']['mean']:.3g} | {r['num_reliable']['mean']:.1f} |")
    return "\n".join(lines) + "\n"


def figure(result: dict[str, Any], path: Path) -> Path:
    """Test accuracy against rounds (one panel per nu, and EqualAlloc beyond the paper's range), against the eps
    reached and against nu, and CDPB's accuracy against its Theorem 1 RDP."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplot_mosaic([["0.01", "0.04", "0.16", "beyond"], ["eps", "eps", "nu", "cdpb"]],
                                 figsize=(18, 9), layout="constrained")
    rows, beyond = result["model_a"], result["beyond"]
    for nu in NUS:
        for r in (r for r in rows if r["nu"] == nu):
            ax[f"{nu:g}"].plot(r["rounds"], r["accuracy_curve"], label=r["policy"], color=policy_colour(r["policy"]))
        ax[f"{nu:g}"].set(title=f"model A, ν = {nu:g} (mean of seeds)", xlabel="rounds played",
                          ylabel="test accuracy")
    ax["0.01"].legend(fontsize=8, title="the lines lie on each other", title_fontsize=8)
    for r, shade in zip([r for r in rows if r["policy"] == "EqualAlloc" and r["nu"] == NUS[0]] + beyond,
                        ("k", "0.3", "0.5", "0.7")):
        ax["beyond"].plot(r["rounds"], r["accuracy_curve"], color=shade, label=f"ν = {r['nu']:g}")
    ax["beyond"].set(title="EqualAlloc beyond the paper's ν", xlabel="rounds played", ylabel="test accuracy")
    ax["beyond"].legend(fontsize=8)
    markers = dict(zip(NUS, ("o", "s", "^")))
    for r in rows:
        ax["eps"].scatter(r["epsilon"]["seeds"], r["accuracy"]["seeds"], color=policy_colour(r["policy"]),
                          marker=markers[r["nu"]], s=18, alpha=0.8)
    ax["eps"].set(xscale="log", title="each cell: final accuracy vs the ε it reaches (o: ν = 0.01, □: 0.04, △: 0.16)",
                  xlabel="ε (δ = 1e-5), mean over devices", ylabel="final test accuracy")
    for name in dict.fromkeys(r["policy"] for r in rows):
        mine = sorted((r for r in rows + beyond if r["policy"] == name), key=lambda r: r["nu"])
        ax["nu"].errorbar([r["nu"] for r in mine], [r["accuracy"]["mean"] for r in mine],
                          yerr=[r["accuracy"]["ci95"] for r in mine], color=policy_colour(name), marker="o", ms=3,
                          capsize=2, label=name)
    ax["nu"].axvspan(NUS[0], NUS[-1], color="0.9", zorder=0)
    ax["nu"].set(xscale="log", title="final accuracy vs ν (grey: the paper's range)", xlabel="ν",
                 ylabel="final test accuracy (95% CI)")
    for r in result["cdpb"]:
        ax["cdpb"].scatter(r["epsilon_theorem1"]["seeds"], r["accuracy"]["seeds"], color=policy_colour(r["policy"]),
                           label=f"{r['policy']} (τ = {r['rounds_played']['mean']:.0f})", s=22)
    ax["cdpb"].axvline(100.0, color="k", linewidth=0.8)
    ax["cdpb"].set(xscale="log", title="model B (CDPB), K = 100 (line: ε̄ = 100)", ylabel="final test accuracy",
                   xlabel="worst client's RDP at α = 2 (Theorem 1)")
    ax["cdpb"].legend(fontsize=8)
    for a in ax.values():
        a.grid(alpha=0.3, which="both")
    s = result["settings"]
    name = SOURCES[s.get("dataset", "fashion-mnist")][0]
    fig.suptitle(f"{name}, training fidelity, {s['seeds']} seeds; model A T = {s['rounds']}, evaluations on "
                 f"{s['eval_samples']:,} samples")
    save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=f"python -m benchmarks.{STEM}", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=200, help="T of model A's cells (the paper: 500)")
    p.add_argument("--cdpb-rounds", type=int, default=74,
                   help="rounds of CDPB's h_min- and IS-based cells (CDPB-i's planned tau at paper-cdpb)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1")
    p.add_argument("--eval-samples", type=int, default=2000, help="samples of each evaluation")
    p.add_argument("--cdpb-train-samples", type=int, default=2000, help="training samples of CDPB's clients")
    p.add_argument("--dataset", choices=tuple(SOURCES), default="fashion-mnist",
                   help="fashion-mnist (default; Debian's package) or mnist (MNIST's IDX files in --data-dir)")
    p.add_argument("--data-dir", default=None, help="the dataset's folder (default for fashion-mnist: Debian's)")
    p.add_argument("--workers", type=int, default=None, help="a process pool of N (default: in-process)")
    p.add_argument("--out", type=Path, default=Path("results") / STEM, help="sweeps, records and outputs")
    p.add_argument("--docs", action="store_true", help=f"write {STEM}.png/.md/.json to docs/ instead of --out")
    args = p.parse_args(argv)
    if args.dataset == "mnist" and args.data_dir is None:
        p.error("--dataset mnist reads MNIST's IDX files from --data-dir: give the folder (nothing is downloaded)")
    if args.dataset != "fashion-mnist" and args.docs:
        p.error("--docs holds the Fashion-MNIST run; write another dataset's run to --out")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one torch thread per process, the spawned workers' too
    import torch

    torch.set_num_threads(1)  # small models run faster so, above all on a busy machine; cores go to --workers
    start = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        cells, computed = run_sweeps(sweep_configs(args), args.out, args.workers)
    except RuntimeError as err:
        print(err)
        return 1
    every = [c for group in cells.values() for c in group]
    result = {"settings": {k: v for k, v in vars(args).items() if k not in ("out", "docs", "workers")},
              "wall_s": time.perf_counter() - start, "cells": len(every), "computed": computed,
              "reused": len(every) - computed, "cell_wall_s": float(sum(c["cell_wall_s"] for c in every)),
              "model_a": model_a_rows(cells["receive_scaling"]), "beyond": model_a_rows(cells["beyond"]),
              "cdpb": cdpb_rows(cells["cdpb"])}
    target = DOCS if args.docs else args.out
    figure(result, target / f"{STEM}.png")
    write_text(target / f"{STEM}.md", markdown(result))
    write_json(target / f"{STEM}.json", result)
    print(markdown(result))
    print(f"wrote {target / STEM}.png/.md/.json in {result['wall_s'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
