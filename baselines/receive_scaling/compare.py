"""The matched-nu comparison of §VII of the AdaScale paper (Fig. 1 style), behind ``otagym compare`` (whose command
line is :mod:`otagym.cli.compare`) and the cells of ``otagym sweep`` (:mod:`otagym.cli.sweep`).

For each nu, every policy whose hyperparameter is tunable is calibrated so that its realised (1/T) sum_t c_t equals
nu (within 1%) on the same channel realisations (one per seed); then the average overall RDP per device at alpha and
the average eps at delta are reported as mean and 95% confidence interval over seeds.

The unit of work is a *cell*, one (policy, nu, seed), whose numbers are a function of its own arguments only:
:func:`evaluate_cell` computes one, :func:`evaluate_cells` several cells of one policy batched in one vector env, with
the same bits (every step is elementwise: the solvers stop per element, the calibration bisects per env, sums over
rounds and devices run row by row, and each env's eps is accounted alone). :func:`compare` runs each policy's cells as
one batch and :func:`summarize`s them; the sweep engine runs the same cells in other processes or on Ray and gets the
same numbers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from baselines.receive_scaling.command import DEFAULT_POLICIES
from baselines.receive_scaling.core import Policy
from baselines.receive_scaling.evaluation import (ANALYTIC, CellTraining, Realisations, calibrate, leakage_score,
                                                  reference_leakage, run_policy, sample_realisations,
                                                  training_scenario)
from baselines.receive_scaling.policies import (AdaScale, EqualAlloc, EstimFuture, FullPower, LiuSimeone,
                                                LyapunovDPBudget, LyapunovDPP, OfflineOptimal)
from baselines.receive_scaling.references import AdaScaleTrained, BestConstant, OnlineOptimal
from baselines.report import ci95, policy_colour, readable, write_rows
from otagym._io import save_figure
from otagym.schemes.receive_scaling import Scenario, get_scenario

__all__ = ["PolicySpec", "POLICIES", "DEFAULT_POLICIES", "compare", "evaluate_cell", "evaluate_cells", "summarize",
           "reference_leakage",
           "leakage_score", "format_table", "save", "TABLE_NOTES", "PLD_TABLE_NOTES"]


@dataclass(frozen=True)
class PolicySpec:
    """How to build a policy for per-env nu (N,) and, if ``param`` is set, a tuned hyperparameter (N,).

    ``build(nu, value, **options)``; ``options`` names the policy's keyword arguments a sweep may set (each a finite
    number > 0). Setting ``param`` itself fixes it: the policy is then run as given, not calibrated.
    """

    build: Callable[..., Policy]
    param: str | None = None
    bracket: tuple[float, float] = (1.0, 1.0)
    matched: bool = True  # meets nu by construction or calibration
    options: tuple[str, ...] = ()

    def calibrated(self, scenario: Scenario, realisations: Realisations, nu: NDArray,
                   options: Mapping[str, float] | None = None) -> tuple[Policy, NDArray | None, bool]:
        """The policy for per-env ``nu`` (N,) on ``realisations`` (N), its tuned parameter calibrated there so that
        each env's realised (1/T) sum_t c_t is its nu (§VII; :func:`~baselines.receive_scaling.evaluation.calibrate`)
        unless ``options`` sets it (the other options are passed on): the policy, the parameter per env (None
        without one) and whether it was calibrated. A step before play, which is the same for any policy."""
        options = dict(options or {})
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise ValueError(f"options must be among {list(self.options)}; got {unknown}")
        value, calibrated = None, False
        if self.param is not None and self.param in options:
            value = np.full(len(nu), float(options.pop(self.param)))
        elif self.param is not None:
            value, _ = calibrate(lambda p, n: self.build(n, p, **options), scenario, realisations, nu, self.bracket)
            calibrated = True
        return self.build(nu, value, **options), value, calibrated


POLICIES: dict[str, PolicySpec] = {
    "OfflineOptimal": PolicySpec(lambda nu, p: OfflineOptimal(nu=nu)),
    "AdaScale": PolicySpec(lambda nu, p: AdaScale(V=p, nu=nu), "V", (1e-8, 1e9), options=("V",)),
    "EstimFuture": PolicySpec(lambda nu, p: EstimFuture(nu=nu)),
    "EqualAlloc": PolicySpec(lambda nu, p: EqualAlloc(nu=nu)),
    "LiuSimeone": PolicySpec(lambda nu, p, **kw: LiuSimeone(epsilon_budget=p, **kw), "epsilon_budget", (1e-3, 1e5),
                             options=("epsilon_budget", "delta")),
    "LyapunovDPBudget": PolicySpec(lambda nu, p, **kw: LyapunovDPBudget(epsilon_budget=p, **kw), "epsilon_budget",
                                   (1e-3, 1e5), options=("epsilon_budget", "V", "delta")),
    "LyapunovDPP": PolicySpec(lambda nu, p, **kw: LyapunovDPP(nu=nu, **kw), matched=False,
                              options=("V", "c", "beta", "x_floor_ratio")),
    "FullPower": PolicySpec(lambda nu, p: FullPower(nu=nu), matched=False),
    # the references of RL results (baselines.receive_scaling.references): tuned on training channels, budget mode
    "BestConstant": PolicySpec(lambda nu, p: BestConstant(nu=nu)),
    "AdaScaleTrained": PolicySpec(lambda nu, p: AdaScaleTrained(nu=nu)),
    "OnlineOptimal": PolicySpec(lambda nu, p: OnlineOptimal(nu=nu)),
}


def evaluate_cell(
    scenario: Scenario,
    spec: PolicySpec,
    nu: float,
    seed: int,
    *,
    options: Mapping[str, float] | None = None,
    training: CellTraining = ANALYTIC,
    accountant: str = "rdp",
) -> dict[str, Any]:
    """One cell of the comparison: ``spec``'s policy at ``nu`` on the channel realisation of ``seed``.

    The policy's tuned parameter is calibrated on this realisation (§VII) unless ``options`` sets it; the other
    ``options`` are passed to the policy. ``training`` (:class:`~baselines.receive_scaling.evaluation.CellTraining`)
    under the training fidelity also trains the model (``scenario`` must then be
    :func:`~baselines.receive_scaling.evaluation.training_scenario`'s; the model's randomness is seeded by ``seed``). Returns plain
    floats: ``rdp``, ``epsilon``, ``cost_mean``, ``leakage``, ``equal_alloc_leakage``, ``optimal_leakage``,
    ``score``, ``matched`` (meets nu by construction, or within 1%), ``param``, ``param_value``, ``calibrated``,
    ``wall_s``, and with the training fidelity ``accuracy``, ``accuracy_rounds`` and ``accuracy_curve``.
    ``accountant="pld"`` adds ``epsilon_pld`` (eps at delta from each device's privacy loss distribution, mean over
    devices: :func:`otagym.accounting.pld_epsilon`) beside the RDP ledger's ``epsilon``.
    """
    return evaluate_cells(scenario, spec, [(nu, seed)], options=options, training=training, accountant=accountant)[0]


def evaluate_cells(
    scenario: Scenario,
    spec: PolicySpec,
    cells: Sequence[tuple[float, int]],
    *,
    options: Mapping[str, float] | None = None,
    training: CellTraining = ANALYTIC,
    accountant: str = "rdp",
) -> list[dict[str, Any]]:
    """:func:`evaluate_cell` for several (nu, seed) cells of one policy, batched in one vector env (analytic fidelity).

    Every number of a cell is computed elementwise (the env, the policies, their solvers, which stop per element, the
    calibration, which bisects per env, and the accounting), so a cell's results are the same bits whether it runs
    alone or beside others (``tests/baselines/test_baselines.py`` checks it): batching changes the wall time only. Under
    the training fidelity each cell runs alone (the models' randomness comes from the env's generator, which a batch
    shares). Each result's ``wall_s`` is the batch's wall time divided by its cells.
    """
    if training.fidelity == "train" and len(cells) > 1:
        return [evaluate_cell(scenario, spec, nu, seed, options=options, training=training, accountant=accountant)
                for nu, seed in cells]
    start = time.perf_counter()
    nu_arr = np.array([float(nu) for nu, _ in cells])
    seeds = [int(seed) for _, seed in cells]
    real = sample_realisations(scenario, seeds)
    policy, value, calibrated = spec.calibrated(scenario, real, nu_arr, options)
    result = run_policy(policy, scenario, real, seed=seeds[0], nu=nu_arr, training=training, accountant=accountant)
    outs = []
    for i, (nu, seed) in enumerate(zip(nu_arr, seeds)):
        optimal = reference_leakage(scenario, float(nu), seed)
        leakage, equal_alloc = float(result.leakage[i]), float(result.equal_alloc_leakage[i])
        cost = float(result.cost_mean[i])
        out: dict[str, Any] = {
            "rdp": float(result.rdp[i]), "epsilon": float(result.epsilon[i]), "cost_mean": cost, "leakage": leakage,
            "equal_alloc_leakage": equal_alloc, "optimal_leakage": optimal,
            "score": float(leakage_score(leakage, equal_alloc, optimal)),
            # matched: meets nu by construction, or calibrated within 1%
            "matched": spec.matched and bool(abs(cost - nu) <= 0.0101 * nu),
            "param": spec.param, "param_value": None if value is None else float(value[i]), "calibrated": calibrated,
        }
        if result.epsilon_pld is not None:
            out["epsilon_pld"] = float(result.epsilon_pld[i])
        if result.test_accuracy is not None:
            out.update(accuracy=float(result.test_accuracy[i]),
                       accuracy_rounds=[int(r) + 1 for r in result.accuracy_rounds],
                       accuracy_curve=[float(v) for v in result.accuracy_curve[:, i]])
        outs.append(out)
    wall = (time.perf_counter() - start) / len(cells)
    return [dict(out, wall_s=wall) for out in outs]


def summarize(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The comparison's rows from cells: one row per (policy, nu) in order of first appearance, with means and 95% CIs
    over the cells' seeds (each cell: ``policy``, ``nu`` and :func:`evaluate_cell`'s result)."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for c in cells:
        groups.setdefault((c["policy"], c["nu"]), []).append(c)
    rows: list[dict[str, Any]] = []
    for (name, nu), group in groups.items():
        seeds = {k: np.array([c[k] for c in group], dtype=float) for k in ("rdp", "epsilon", "cost_mean", "score")}
        rdp, rdp_ci = ci95(seeds["rdp"])
        eps, eps_ci = ci95(seeds["epsilon"])
        cost, cost_ci = ci95(seeds["cost_mean"])
        score, score_ci = ci95(seeds["score"])
        rows.append({
            "policy": name, "nu": nu, "rdp": rdp, "rdp_ci95": rdp_ci, "epsilon": eps, "epsilon_ci95": eps_ci,
            "cost_mean": cost, "cost_ci95": cost_ci, "score": score, "score_ci95": score_ci,
            "score_seeds": seeds["score"].tolist(), "matched": all(c["matched"] for c in group),
            **_leakage_ratios(group),
            "rdp_seeds": seeds["rdp"].tolist(), "epsilon_seeds": seeds["epsilon"].tolist(),
            "param": group[0]["param"],
            "param_values": None if group[0]["param_value"] is None else [c["param_value"] for c in group],
            "seeds": len(group), "wall_s": float(sum(c["wall_s"] for c in group)),
        })
        if "epsilon_pld" in group[0]:
            rows[-1] = _with_pld(rows[-1], np.array([c["epsilon_pld"] for c in group], dtype=float))
        if "accuracy" in group[0]:
            acc, acc_ci = ci95(np.array([c["accuracy"] for c in group]))
            curve = [ci95(v) for v in np.array([c["accuracy_curve"] for c in group]).T]
            rows[-1].update(accuracy=acc, accuracy_ci95=acc_ci, accuracy_seeds=[c["accuracy"] for c in group],
                            accuracy_rounds=group[0]["accuracy_rounds"], accuracy_curve=[m for m, _ in curve],
                            accuracy_curve_ci95=[ci for _, ci in curve])
    return rows


def _with_pld(row: dict[str, Any], seeds: Any) -> dict[str, Any]:
    """``row`` with the PLD accountant's eps (mean, 95% CI half-width and per-seed values) after the RDP ledger's."""
    mean, ci = ci95(seeds)
    out: dict[str, Any] = {}
    for key, value in row.items():
        out[key] = value
        if key == "epsilon_ci95":
            out.update(epsilon_pld=mean, epsilon_pld_ci95=ci)
        elif key == "epsilon_seeds":
            out["epsilon_pld_seeds"] = seeds.tolist()
    return out


def _leakage_ratios(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The paired comparison with OfflineOptimal: each cell's total leakage sum_t L_t over OfflineOptimal's on the same
    realisation and nu (``leakage_ratio_seeds``; 1 = optimal) and their geometric mean (``leakage_ratio``)."""
    ratios = np.array([c.get("leakage", np.nan) / c.get("optimal_leakage", np.nan) for c in cells], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        geometric = float(np.exp(np.mean(np.log(ratios))))
    return {"leakage_ratio": geometric, "leakage_ratio_seeds": ratios.tolist()}


def compare(
    scenario: str | Scenario = "paper-mnist",
    nus: tuple[float, ...] | None = None,
    seeds: tuple[int, ...] = (0, 1, 2),
    policies: Sequence[str] | Mapping[str, PolicySpec] = DEFAULT_POLICIES,
    *,
    progress: bool = True,
    training: CellTraining = ANALYTIC,
    accountant: str = "rdp",
    **overrides: Any,
) -> list[dict[str, Any]]:
    """Run the matched-nu comparison; one row per (policy, nu) with means and 95% CIs over seeds.

    Every (policy, nu, seed) is one cell; a built-in policy's cells run here batched (:func:`evaluate_cells`: the same
    numbers as one at a time); ``otagym sweep`` and ``otagym compare`` run the same cells in parallel and keep them on
    disk. Calibrated policies are tuned per cell.
    ``policies``: names of built-in policies (:data:`POLICIES`), or a mapping of names to how to build each, which
    adds policies of your own (a trained agent, say: ``{"AdaScale": POLICIES["AdaScale"], "PPO": PolicySpec(...)}``).
    Every row also has the normalised score (:func:`leakage_score`), for which OfflineOptimal is solved on the
    same realisations (once per (nu, seed); about 0.7 s each at T = 500). ``training`` (a
    :class:`~baselines.receive_scaling.evaluation.CellTraining`) with ``fidelity="train"`` also trains the model
    of its ``dataset`` (``data_dir`` for MNIST and CIFAR-10) under every policy's noise (calibration runs analytically:
    the leakage and cost are the same) and adds the final test accuracy (``accuracy``) and the test accuracy every
    ``training.eval_every`` rounds (default T/20: ``accuracy_rounds``, ``accuracy_curve`` and its
    ``accuracy_curve_ci95``); the scenario's d and n_m then follow the model and data. ``accountant="pld"`` adds ``epsilon_pld`` and its CI beside the RDP ledger's
    ``epsilon`` (:func:`evaluate_cell`).
    """
    from tqdm.auto import tqdm

    moved = sorted({"fidelity", "dataset", "data_dir"} & set(overrides))
    if moved or not isinstance(training, CellTraining):
        raise TypeError(f"the training fidelity is given as training=CellTraining(fidelity, dataset, data_dir); got "
                        f"{moved or f'training={training!r}'}")
    scen = get_scenario(scenario, **overrides)
    if training.fidelity == "train":
        scen = training_scenario(scen, training.dataset, training.data_dir)
    nus = tuple(scen.nu_grid if nus is None else nus)
    unknown = [] if isinstance(policies, Mapping) else [p for p in policies if p not in POLICIES]
    if unknown:
        raise ValueError(f"policies must be among {sorted(POLICIES)} (or a mapping of names to PolicySpecs); got "
                         f"{unknown}")
    table = dict(policies) if isinstance(policies, Mapping) else {name: POLICIES[name] for name in policies}
    if not nus or not all(np.isfinite(v) and v > 0 for v in nus):
        raise ValueError(f"nus must be a non-empty sequence of finite values > 0; got {nus}")
    grid = [(float(nu), int(seed)) for nu in nus for seed in seeds]
    cells = []
    for name in tqdm(table, desc="policies", disable=not progress):
        # the built-in policies' cells as one batch; extra ones (trained networks, whose forward pass over a batch may
        # round differently) one at a time, as the sweep runs them
        batches = [grid] if name in POLICIES and table[name] is POLICIES[name] else [[cell] for cell in grid]
        results = [r for b in batches for r in evaluate_cells(scen, table[name], b, training=training,
                                                               accountant=accountant)]
        cells += [{"policy": name, "nu": nu, "seed": seed, **result} for (nu, seed), result in zip(grid, results)]
    return summarize(cells)


def format_table(rows: list[dict[str, Any]], scenario: Scenario) -> str:
    """The comparison as a text table, followed by what its columns mean. Numbers of 1e5 or more in magnitude are
    printed in scientific notation (:func:`baselines.report.readable`)."""
    accuracy = bool(rows) and "accuracy" in rows[0]
    pld = bool(rows) and "epsilon_pld" in rows[0]
    head = (f"{'policy':<17} {'nu':>6} {'RDP (alpha=' + str(scenario.rdp_order) + ')':>22} "
            f"{'eps (delta=' + format(scenario.delta, 'g') + ')':>22} " + (f"{'eps PLD':>22} " if pld else "")
            + f"{'mean c_t':>10} {'L/L_opt':>9} "
            f"{'score':>9}{'':11} {'wall s':>7}" + (f" {'test accuracy':>17}" if accuracy else ""))
    lines = [head, "-" * len(head)]
    for r in rows:
        flag = "" if r["matched"] else "  (not matched to nu: excluded from the plot)"
        score, score_ci = readable(r["score"]), readable(r["score_ci95"])
        lines.append(f"{r['policy']:<17} {r['nu']:6.3g} {r['rdp']:12.4g} ± {r['rdp_ci95']:<7.2g} "
                     f"{r['epsilon']:12.4g} ± {r['epsilon_ci95']:<7.2g} "
                     + (f"{r['epsilon_pld']:12.4g} ± {r['epsilon_pld_ci95']:<7.2g} " if pld else "")
                     + f"{r['cost_mean']:10.4g} "
                     f"{r.get('leakage_ratio', float('nan')):9.3g} {score:>9} ± {score_ci:<8} {r['wall_s']:7.1f}"
                     + (f" {r['accuracy']:9.3f} ± {r['accuracy_ci95']:<5.3f}" if "accuracy" in r else "") + flag)
    seeds = rows[0]["seeds"] if rows else 0
    notes = [*TABLE_NOTES, *(PLD_TABLE_NOTES if pld else ())]
    lines += ["", *notes, (f"±         half-width of the 95% Student-t confidence interval of the mean over "
                           f"the {seeds} channel realisations (seeds)" if seeds != 1 else
                           "±         0: one channel realisation (seed) has no confidence interval; pass "
                           "--seeds 2 or more for one")]
    return "\n".join(lines)


#: What the columns of :func:`format_table` mean (printed under it).
TABLE_NOTES = (
    "RDP, eps  average over devices of the Renyi DP at alpha, and of the (eps, delta)-DP it gives, after T rounds",
    "mean c_t  realised convergence cost (1/T) sum_t c_t, which the policies are calibrated to meet: nu (within 1%)",
    "L/L_opt   total leakage sum_t L_t over OfflineOptimal's on the same channels (geometric mean; 1 = optimal)",
    "score     100 (L_EqualAlloc - L) / (L_EqualAlloc - L_OfflineOptimal) on each realisation: 0 = EqualAlloc,",
    "          100 = OfflineOptimal (which knows the future); below 0: more leakage than EqualAlloc",
    "wall s    compute time of the policy's cells at this nu",
)
#: What the "eps PLD" column of :func:`format_table` means (printed under it where the table has one).
PLD_TABLE_NOTES = (
    "eps PLD   the same (eps, delta) from each device's privacy loss distribution (dp_accounting, --accountant pld):",
    "          an upper bound too, tighter than the RDP conversion's eps; average over devices",
)
def _offsets(names: list[str], spread: float = 0.035) -> dict[str, float]:
    """A factor per policy on nu, so that the markers of the policies at one nu stand side by side on a log axis."""
    middle = (len(names) - 1) / 2
    return {name: float(np.exp(spread * (i - middle))) for i, name in enumerate(names)}


def iqm_interval(values: Any, reps: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """The interquartile mean of per-realisation ``values`` (scipy's 25% trimmed mean, rliable's IQM) and its 95%
    percentile-bootstrap interval over the realisations (``reps`` resamples, seeded: a plot redrawn from the same
    values is the same); one value has no interval (its IQM both ends)."""
    from scipy import stats

    values = np.asarray(values, dtype=float)
    iqm = float(stats.trim_mean(values, 0.25))
    if values.size < 2 or np.all(values == values[0]):
        return iqm, iqm, iqm
    ci = stats.bootstrap((values,), lambda v, axis: stats.trim_mean(v, 0.25, axis=axis), n_resamples=reps,
                         method="percentile", random_state=np.random.default_rng(seed)).confidence_interval
    return iqm, float(ci.low), float(ci.high)


#: The plot's panels: (title, y label, the per-realisation values of a row, the linear range of the symmetric-log
#: y axis and its height in decades).
_PANELS: dict[str, tuple[str, str, Callable[[dict[str, Any]], Any], float, float]] = {
    "excess": ("total leakage over the offline optimum's", "excess leakage (%)",
               lambda r: 100.0 * (np.asarray(r["leakage_ratio_seeds"], dtype=float) - 1.0), 1.0, 1.0),
    "score": ("normalised score", "score (0 = EqualAlloc, 100 = OfflineOptimal)",
              lambda r: np.asarray(r["score_seeds"], dtype=float), 100.0, 4.0),
    "accuracy": ("training fidelity", "final test accuracy", lambda r: np.asarray(r["accuracy_seeds"], dtype=float),
                 0.0, 0.0),
}


def _paired_panel(ax: Any, rows: list[dict[str, Any]], key: str, offsets: dict[str, float], label: str) -> None:
    """One panel of the comparison plot (``key`` of :data:`_PANELS`): each matched row's per-realisation values
    (dots), their interquartile mean (line) and its 95% bootstrap interval (bars) vs nu, in the policy's colour, on a
    symmetric-log y axis (linear within its range: every value drawn, none clipped); ``label`` in its corner."""
    title, ylabel, values_of, linear, height = _PANELS[key]
    for name, factor in offsets.items():
        pr = [r for r in rows if r["policy"] == name and r["matched"]]
        if not pr:
            continue
        colour = policy_colour(name)
        nu = np.array([r["nu"] for r in pr]) * factor
        values = [values_of(r) for r in pr]
        iqm, low, high = np.array([iqm_interval(v) for v in values]).T
        ax.errorbar(nu, iqm, yerr=[iqm - low, high - iqm], color=colour, label=name, linewidth=1.5, capsize=3,
                    zorder=4)
        for x, v in zip(nu, values):
            ax.scatter(np.full(len(v), x), v, s=8, color=colour, alpha=0.35, linewidths=0, zorder=3)
    if linear:
        ax.set_yscale("symlog", linthresh=linear, linscale=height)
        ax.axhline(0.0, color="k", linewidth=0.8)
    ax.set_title(title, fontsize=9)
    ax.set_ylabel(ylabel)
    ax.text(-0.12, 1.02, label, transform=ax.transAxes, fontsize=11, fontweight="bold", va="bottom")
    ax.set_xscale("log")
    ax.set_xlabel("ν (convergence budget per round)")
    ax.grid(True, which="both", alpha=0.3)


def save(rows: list[dict[str, Any]], scenario: Scenario, out_dir: Path,
         extra: dict[str, Any] | None = None) -> list[Path]:
    """Write ``compare.png`` (with the training fidelity also ``compare_accuracy.png``), ``compare.csv`` and last
    ``compare.json`` (:func:`baselines.report.write_rows`: it holds the hashes of the others), each atomically;
    ``extra`` goes into the JSON beside the scenario.

    The plot is the paired comparison, per channel realisation, as a paper's figure (its explanations belong in the
    caption, none inside it): (a) each policy's total leakage over OfflineOptimal's on the same channels, in %, and
    (b) its normalised score, vs nu; dots are realisations, lines their interquartile mean with its 95% bootstrap
    interval (:func:`iqm_interval`), each policy in its fixed colour (:func:`baselines.report.policy_colour`), the y
    axes symmetric-log beyond +-1% and +-100 points so that nothing is clipped. Rows not matched to nu are left out
    (the table marks them)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    png_path = out_dir / "compare.png"
    panels = ["excess", "score"] + (["accuracy"] if "accuracy" in rows[0] else [])
    offsets = _offsets(list(dict.fromkeys(r["policy"] for r in rows)))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.0 * len(panels) + 2.0, 4.0), layout="constrained")
    for ax, key, label in zip(axes, panels, "abc"):
        _paired_panel(ax, rows, key, offsets, f"({label})")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right center", fontsize=8)
    save_figure(fig, png_path, dpi=120)
    plt.close(fig)
    figures = [png_path] + ([_save_accuracy_rounds(rows, scenario, out_dir / "compare_accuracy.png")]
                            if "accuracy_curve" in rows[0] else [])
    return write_rows(rows, {"scenario": scenario.to_dict(), **(extra or {})}, out_dir, "compare", figures) + figures


def _save_accuracy_rounds(rows: list[dict[str, Any]], scenario: Scenario, path: Path) -> Path:
    """Test accuracy vs rounds (training fidelity): one panel per nu, one line per matched policy, 95% CI bands."""
    import matplotlib.pyplot as plt

    nus = list(dict.fromkeys(r["nu"] for r in rows))
    fig, axes = plt.subplots(1, len(nus), figsize=(4.5 * len(nus), 4.0), squeeze=False, sharey=True)
    for ax, nu in zip(axes[0], nus):
        for r in (r for r in rows if r["nu"] == nu and r["matched"]):
            rounds, mean, ci = (np.asarray(r[k], dtype=float) for k in ("accuracy_rounds", "accuracy_curve",
                                                                         "accuracy_curve_ci95"))
            colour = policy_colour(r["policy"])
            ax.plot(rounds, mean, label=r["policy"], color=colour)
            ax.fill_between(rounds, mean - ci, np.minimum(mean + ci, 1.0), alpha=0.15, color=colour)
        ax.set_title(f"nu = {nu:g}")
        ax.set_xlabel("rounds played")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("test accuracy")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"{scenario.name}: test accuracy during training ({rows[0]['seeds']} seeds, 95% CI)")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
    return path
