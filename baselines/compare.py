"""The matched-nu comparison of §VII of the AdaScale paper (Fig. 1 style), behind ``otagym compare`` (whose command
line is :mod:`experiments.compare`).

For each nu, every policy whose hyperparameter is tunable is calibrated so that its realised (1/T) sum_t c_t equals
nu (within 1%) on the same channel realisations (one per seed); then the average overall RDP per device at alpha and
the average eps at delta are reported as mean and 95% confidence interval over seeds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
from numpy.typing import NDArray

from baselines.core import Policy
from baselines.evaluation import calibrate, run_policy, sample_realisations, training_scenario
from baselines.policies import (AdaScale, EqualAlloc, EstimFuture, FullPower, LiuSimeone, LyapunovDPBudget,
                                LyapunovDPP, OfflineOptimal)
from baselines.report import ci95, write_rows
from otagym.receive_scaling import Scenario, get_scenario

__all__ = ["PolicySpec", "POLICIES", "DEFAULT_POLICIES", "compare", "normalized_score", "format_table", "save"]


@dataclass(frozen=True)
class PolicySpec:
    """How to build a policy for per-env nu (N,) and, if ``param`` is set, a tuned hyperparameter (N,)."""

    build: Callable[[NDArray, NDArray | None], Policy]
    param: str | None = None
    bracket: tuple[float, float] = (1.0, 1.0)
    matched: bool = True  # meets nu by construction or calibration


POLICIES: dict[str, PolicySpec] = {
    "OfflineOptimal": PolicySpec(lambda nu, p: OfflineOptimal(nu=nu)),
    "AdaScale": PolicySpec(lambda nu, p: AdaScale(V=p, nu=nu), "V", (1e-8, 1e9)),
    "EstimFuture": PolicySpec(lambda nu, p: EstimFuture(nu=nu)),
    "EqualAlloc": PolicySpec(lambda nu, p: EqualAlloc(nu=nu)),
    "LiuSimeone": PolicySpec(lambda nu, p: LiuSimeone(epsilon_budget=p), "epsilon_budget", (1e-3, 1e5)),
    "LyapunovDPBudget": PolicySpec(lambda nu, p: LyapunovDPBudget(epsilon_budget=p), "epsilon_budget", (1e-3, 1e5)),
    "LyapunovDPP": PolicySpec(lambda nu, p: LyapunovDPP(nu=nu), matched=False),
    "FullPower": PolicySpec(lambda nu, p: FullPower(nu=nu), matched=False),
}
DEFAULT_POLICIES = ("OfflineOptimal", "AdaScale", "EstimFuture", "EqualAlloc", "LiuSimeone", "LyapunovDPBudget",
                    "LyapunovDPP")


def normalized_score(leakage: NDArray, equal_alloc: NDArray, optimal: NDArray) -> NDArray:
    """D4RL-style score of objective (28a) on one channel realisation: 0 = EqualAlloc, 100 = OfflineOptimal.

    100 (L_EqualAlloc - L) / (L_EqualAlloc - L_OfflineOptimal), all at the same nu and channels.
    """
    return 100.0 * (np.asarray(equal_alloc) - np.asarray(leakage)) / (np.asarray(equal_alloc) - np.asarray(optimal))


def compare(
    scenario: str | Scenario = "paper-mnist",
    nus: tuple[float, ...] | None = None,
    seeds: tuple[int, ...] = (0, 1, 2),
    policies: tuple[str, ...] = DEFAULT_POLICIES,
    *,
    extra_policies: dict[str, PolicySpec] | None = None,
    progress: bool = True,
    fidelity: str = "analytic",
    dataset: str = "digits",
    data_dir: str | None = None,
    **overrides: Any,
) -> list[dict[str, Any]]:
    """Run the matched-nu comparison; one row per (policy, nu) with means and 95% CIs over seeds.

    All (seed, nu) pairs run as one batch of envs; calibrated policies bisect their parameter for all pairs at once.
    ``extra_policies`` adds policies by name (a trained agent, say); they are listed in ``policies`` too or appended.
    Every row also has the normalised score (:func:`normalized_score`), for which OfflineOptimal is solved on the
    same realisations (once; about 0.25 s per realisation and nu at T = 500). ``fidelity="train"`` also trains the
    model of ``dataset`` (``data_dir`` for MNIST and CIFAR-10) under every policy's noise (calibration runs
    analytically: the leakage and cost are the same) and adds the final test accuracy (``accuracy``) and the test
    accuracy every T/20 rounds (``accuracy_rounds``, ``accuracy_curve`` and its ``accuracy_curve_ci95``); the
    scenario's d and n_m then follow the model and data.
    """
    from tqdm.auto import tqdm

    scen = get_scenario(scenario, **overrides)
    if fidelity == "train":
        scen = training_scenario(scen, dataset, data_dir)
    nus = tuple(scen.nu_grid if nus is None else nus)
    table = {**POLICIES, **(extra_policies or {})}
    policies = tuple(policies) + tuple(k for k in (extra_policies or {}) if k not in policies)
    unknown = [p for p in policies if p not in table]
    if unknown:
        raise ValueError(f"policies must be among {sorted(table)}; got {unknown}")
    if not nus or not all(np.isfinite(v) and v > 0 for v in nus):
        raise ValueError(f"nus must be a non-empty sequence of finite values > 0; got {nus}")
    base = sample_realisations(scen, seeds)
    real = base.repeat(len(nus))  # env index = seed_index * len(nus) + nu_index
    nu = np.tile(np.asarray(nus, dtype=float), len(seeds))
    optimal = OfflineOptimal(nu=nu)
    optimal.reset(scen, channel_gains=real.channel_gains)
    optimal_leakage = optimal.total_leakage()
    rows: list[dict[str, Any]] = []
    for name in tqdm(policies, desc="policies", disable=not progress):
        spec = table[name]
        start = time.perf_counter()
        param = None
        if spec.param is not None:
            param, _ = calibrate(lambda p, spec=spec: spec.build(nu, p), scen, real, nu, spec.bracket)
        result = run_policy(spec.build(nu, param), scen, real, nu=nu, fidelity=fidelity, dataset=dataset,
                            data_dir=data_dir)
        wall = time.perf_counter() - start
        score_all = normalized_score(result.leakage, result.equal_alloc_leakage, optimal_leakage)
        for j, nu_j in enumerate(nus):
            idx = np.arange(len(seeds)) * len(nus) + j
            rdp, rdp_ci = ci95(result.rdp[idx])
            eps, eps_ci = ci95(result.epsilon[idx])
            cost, cost_ci = ci95(result.cost_mean[idx])
            score, score_ci = ci95(score_all[idx])
            rows.append({
                "policy": name, "nu": nu_j, "rdp": rdp, "rdp_ci95": rdp_ci, "epsilon": eps, "epsilon_ci95": eps_ci,
                "cost_mean": cost, "cost_ci95": cost_ci, "score": score, "score_ci95": score_ci,
                "score_seeds": [float(v) for v in score_all[idx]],
                # matched: meets nu by construction, or calibrated within 1% on every seed
                "matched": spec.matched and bool(np.all(np.abs(result.cost_mean[idx] - nu_j) <= 0.0101 * nu_j)),
                "rdp_seeds": [float(v) for v in result.rdp[idx]], "epsilon_seeds": [float(v) for v in result.epsilon[idx]],
                "param": spec.param, "param_values": None if param is None else [float(v) for v in param[idx]],
                "seeds": len(seeds), "wall_s": wall,
            })
            if result.test_accuracy is not None:
                acc, acc_ci = ci95(result.test_accuracy[idx])
                curve = [ci95(v) for v in result.accuracy_curve[:, idx]]
                rows[-1].update(accuracy=acc, accuracy_ci95=acc_ci,
                                accuracy_seeds=[float(v) for v in result.test_accuracy[idx]],
                                accuracy_rounds=[int(r) + 1 for r in result.accuracy_rounds],
                                accuracy_curve=[m for m, _ in curve], accuracy_curve_ci95=[c for _, c in curve])
    return rows


def format_table(rows: list[dict[str, Any]], scenario: Scenario) -> str:
    head = (f"{'policy':<17} {'nu':>6} {'RDP (alpha=' + str(scenario.rdp_order) + ')':>22} "
            f"{'eps (delta=' + format(scenario.delta, 'g') + ')':>22} {'mean c_t':>10} {'score':>14} {'wall s':>7}"
            + (f" {'test accuracy':>17}" if rows and "accuracy" in rows[0] else ""))
    lines = [head, "-" * len(head)]
    for r in rows:
        flag = "" if r["matched"] else "  (not matched to nu: excluded from the plot)"
        lines.append(f"{r['policy']:<17} {r['nu']:6.3g} {r['rdp']:12.4g} ± {r['rdp_ci95']:<7.2g} "
                     f"{r['epsilon']:12.4g} ± {r['epsilon_ci95']:<7.2g} {r['cost_mean']:10.4g} "
                     f"{r['score']:7.1f} ± {r['score_ci95']:<4.1f} {r['wall_s']:7.1f}"
                     + (f" {r['accuracy']:9.3f} ± {r['accuracy_ci95']:<5.3f}" if "accuracy" in r else "") + flag)
    return "\n".join(lines)


def save(rows: list[dict[str, Any]], scenario: Scenario, out_dir: Path) -> list[Path]:
    """Write ``compare.csv``, ``compare.json`` and ``compare.png`` (RDP and DP vs nu, shaded 95% CIs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    csv_path, json_path = write_rows(rows, {"scenario": scenario.to_dict()}, out_dir, "compare")
    png_path = out_dir / "compare.png"
    panels = [("rdp", f"average overall RDP (alpha={scenario.rdp_order})"),
              ("epsilon", f"average DP epsilon (delta={scenario.delta:g})")]
    if "accuracy" in rows[0]:
        panels.append(("accuracy", "final test accuracy (training fidelity)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2))
    for ax, (key, label) in zip(axes, panels):
        for name in dict.fromkeys(r["policy"] for r in rows):
            pr = [r for r in rows if r["policy"] == name and r["matched"]]
            if not pr:
                continue
            nu = np.array([r["nu"] for r in pr])
            mean = np.array([r[key] for r in pr])
            ci = np.array([r[key + "_ci95"] for r in pr])
            lowest = np.array([min(r[key + "_seeds"]) for r in pr])
            ax.plot(nu, mean, marker="o", label=name)
            # Per-seed leakage is heavy-tailed: a symmetric CI can go below zero, which a log axis cannot show; the
            # band's lower edge is clipped at the smallest value any seed reached.
            ax.fill_between(nu, np.maximum(mean - ci, lowest), mean + ci, alpha=0.15)
        ax.set_xscale("log")
        ax.set_yscale("linear" if key == "accuracy" else "log")
        ax.set_xlabel("nu (convergence budget per round)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{scenario.name}: leakage vs nu at matched convergence ({rows[0]['seeds']} seeds, 95% CI)")
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)
    plt.close(fig)
    if "accuracy_curve" not in rows[0]:
        return [csv_path, json_path, png_path]
    return [csv_path, json_path, png_path, _save_accuracy_rounds(rows, scenario, out_dir / "compare_accuracy.png")]


def _save_accuracy_rounds(rows: list[dict[str, Any]], scenario: Scenario, path: Path) -> Path:
    """Test accuracy vs rounds (training fidelity): one panel per nu, one line per matched policy, 95% CI bands."""
    import matplotlib.pyplot as plt

    nus = list(dict.fromkeys(r["nu"] for r in rows))
    fig, axes = plt.subplots(1, len(nus), figsize=(4.5 * len(nus), 4.0), squeeze=False, sharey=True)
    for ax, nu in zip(axes[0], nus):
        for r in (r for r in rows if r["nu"] == nu and r["matched"]):
            rounds, mean, ci = (np.asarray(r[k], dtype=float) for k in ("accuracy_rounds", "accuracy_curve",
                                                                         "accuracy_curve_ci95"))
            ax.plot(rounds, mean, label=r["policy"])
            ax.fill_between(rounds, mean - ci, np.minimum(mean + ci, 1.0), alpha=0.15)
        ax.set_title(f"nu = {nu:g}")
        ax.set_xlabel("rounds played")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("test accuracy")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"{scenario.name}: test accuracy during training ({rows[0]['seeds']} seeds, 95% CI)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
