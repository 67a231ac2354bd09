"""``otagym compare --scheme cdpb``: CDPB-n / -i / -mixed and the paper's baselines on the same channels (§V of
Kim, Seo & Choi, *Privacy-Enhanced Over-the-Air Federated Learning via Client-Driven Power Balancing*).

Every policy plans from the channel distribution (:mod:`baselines.cdpb.policies`), then runs in the ``scheme="cdpb"``
environment for the longest planned horizon, so each curve shows G(t) = lambda_1 gamma_t + lambda_2 eps_t after every
iteration t (the paper's Fig. 3) and the cumulative RDP (Fig. 5). The table reports each policy at its own horizon
tau (CDPB: tau_opt; gamma-bar based: tau_gamma,min; h_min and IS based: CDPB-i's tau_opt) with both accountings.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from baselines.cdpb.command import DEFAULT_POLICIES
from baselines.cdpb.policies import CDPB_POLICIES, CDPB, HminBased
from baselines.play import play
from baselines.report import policy_colour, readable, write_rows
from otagym._io import save_figure
from otagym.schemes.cdpb import Accounting, CDPBScenario, get_cdpb_scenario, utility
from otagym.env import OTAPrivacyVectorEnv

__all__ = ["compare_cdpb", "format_cdpb_table", "save_cdpb", "DEFAULT_CDPB_POLICIES", "CDPB_TABLE_NOTES"]

#: The policies compared by default (all of them): ``otagym compare``'s declaration's.
DEFAULT_CDPB_POLICIES = DEFAULT_POLICIES
_CURVES = ("gamma", "epsilon_sgm", "epsilon_theorem1", "num_reliable", "noise_var", "rho", "max_power")


def _rollout(s: CDPBScenario, policy: Any, episodes: int, seed: int) -> dict[str, np.ndarray]:
    """Run ``policy`` for s.num_rounds rounds in ``episodes`` parallel envs; per-round curves (T, episodes)."""
    env = OTAPrivacyVectorEnv(episodes, s, scheme="cdpb", action_type="rho", dp_orders=None,
                              autoreset_mode=AutoresetMode.SAME_STEP)  # reads info["final_info"]
    out = {k: np.empty((s.num_rounds, episodes)) for k in _CURVES}

    def record(t: int, info: dict[str, Any]) -> None:
        if t < 0:  # the reset's info
            return
        step = info["final_info"] if t == s.num_rounds - 1 else info
        for k in _CURVES[:-1]:
            out[k][t] = step[k]
        out["max_power"][t] = step["transmit_power_w"].max(axis=-1)

    play(policy, env, {}, range(s.num_rounds), seed=seed, on_round=record)
    return out


def compare_cdpb(scenario: str | CDPBScenario = "paper-cdpb", policies: tuple[str, ...] = DEFAULT_CDPB_POLICIES,
                 *, episodes: int = 3, seed: int = 0, accounting: Accounting | None = None,
                 progress: bool = True, **overrides: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Plan, roll out and summarise; returns ``(rows, curves)`` (curves: per policy, means over episodes per round)."""
    from tqdm.auto import tqdm

    base = get_cdpb_scenario(scenario, **overrides)
    if accounting is not None:
        base = base.replace(accounting=accounting)
    unknown = [p for p in policies if p not in CDPB_POLICIES]
    if unknown:
        raise ValueError(f"policies must be among {sorted(CDPB_POLICIES)}; got {unknown}")
    reference = CDPB()  # CDPB-i's tau_opt is the horizon of the CSI-based baselines
    ref_tau = reference.configure(base.replace(strategy="idle", portion=0.5)).num_rounds  # portion: idle ignores it
    planned = {}
    for name in policies:
        factory, fields = CDPB_POLICIES[name]
        policy = factory(num_rounds=ref_tau) if issubclass(factory, HminBased) else factory()
        planned[name] = (policy, policy.configure(base.replace(**fields)))
    horizon = max(s.num_rounds for _, s in planned.values())
    rows, curves = [], {}
    lam1, lam2 = base.lambda_convergence, base.lambda_privacy
    for name, (policy, s) in tqdm(planned.items(), desc="policies", disable=not progress):
        start = time.perf_counter()
        c = _rollout(s.replace(num_rounds=horizon), policy, episodes, seed)
        tau = s.num_rounds
        at = {k: v[tau - 1] for k, v in c.items()}
        g = {acc: lam1 * at["gamma"] + lam2 * at[f"epsilon_{acc}"] for acc in ("sgm", "theorem1")}
        fixed = getattr(policy, "rho", None)
        rows.append({
            "policy": name, "strategy": s.strategy, "rho": float(c["rho"][:tau].mean()), "tau": tau,
            "num_reliable": float(c["num_reliable"][:tau].mean()), "noise_var": float(c["noise_var"][:tau].mean()),
            "max_power_w": float(c["max_power"][:tau].max()), "gamma": float(at["gamma"].mean()),
            "epsilon_sgm": float(at["epsilon_sgm"].mean()), "epsilon_theorem1": float(at["epsilon_theorem1"].mean()),
            "G_sgm": float(g["sgm"].mean()), "G_theorem1": float(g["theorem1"].mean()),
            "G_planned": None if fixed is None else float(utility(s, fixed, tau)),
            "accounting": s.accounting, "episodes": episodes, "wall_s": time.perf_counter() - start,
        })
        curves[name] = {k: v.mean(axis=1).tolist() for k, v in c.items()}
        curves[name]["tau"] = tau
    return rows, {"scenario": base.to_dict(), "horizon": horizon, "policies": curves}


def format_cdpb_table(rows: list[dict[str, Any]], s: CDPBScenario) -> str:
    """The comparison as a text table, followed by what its columns mean (:data:`CDPB_TABLE_NOTES`). The privacy
    columns print 2 decimals, or scientific notation from 1e5 on (:func:`baselines.report.readable`)."""
    head = (f"{'policy':<12} {'rho':>7} {'tau':>5} {'E K_t':>6} {'sigma_q^2':>9} {'max P':>6} {'gamma':>9} "
            f"{'eps SGM':>9} {'eps Thm1':>9} {'G SGM':>10} {'G Thm1':>10} {'G plan':>10}")
    lines = [f"CDPB on {s.name}: K={s.num_clients}, lambda=({s.lambda_convergence:g}, {s.lambda_privacy:g}), "
             f"gamma-bar={s.gamma_max:g}, eps-bar={s.epsilon_max:g}, alpha={s.rdp_order}, planner accounting: "
             f"{s.accounting}", head, "-" * len(head)]
    for r in rows:
        plan = "-" if r["G_planned"] is None else f"{r['G_planned']:.4e}"
        lines.append(f"{r['policy']:<12} {r['rho']:7.4f} {r['tau']:5d} {r['num_reliable']:6.1f} {r['noise_var']:9.3g} "
                     f"{r['max_power_w']:6.3f} {r['gamma']:9.3e} {readable(r['epsilon_sgm'], 2):>9} "
                     f"{readable(r['epsilon_theorem1'], 2):>9} {r['G_sgm']:10.4e} {r['G_theorem1']:10.4e} {plan:>10}")
    episodes = rows[0]["episodes"] if rows else 0
    lines += ["", *CDPB_TABLE_NOTES,
              (f"Realised columns are at each policy's own tau, means over {episodes} episode(s) on the same channels; "
               f"P = {s.power_max_w:g} W, P/W^2 = {s.rho_max:g}.")]
    return "\n".join(lines)


#: What the columns of :func:`format_cdpb_table` mean (printed under it).
CDPB_TABLE_NOTES = (
    "rho        the power-balancing threshold the server broadcasts (at most P/W^2), mean over the rounds",
    "tau        the policy's horizon in rounds: its plan's tau_opt (CDPB-*, noise-free), tau_gamma,min (gamma-based)",
    "           or CDPB-i's tau_opt (hmin-based, IS-based)",
    "E K_t      reliable clients per round (power gain h_k,t >= rho W^2 / P), mean over the rounds",
    "sigma_q^2  noise power at the receiver per round (artificial noise plus receiver noise, W, total over d), mean",
    "max P      the largest transmit power of any client in any round (W; never above the limit P)",
    "gamma      the convergence error bound 6 mean_t(B_t) / tau after tau rounds (threshold gamma-bar)",
    "eps SGM    the worst client's cumulative Renyi DP at alpha after tau rounds (nats), sampled Gaussian accounting",
    "eps Thm1   the same under the paper's Theorem 1 as printed (reproduction only; see docs/cdpb.md)",
    "G SGM      the realised utility lambda_1 gamma + lambda_2 eps with eps SGM (the lower, the better)",
    "G Thm1     the same with eps Thm1",
    "G plan     the utility G(rho, tau) the planner expects from the channel distribution, under the planner's",
    "           accounting; - for hmin-based and IS-based, which choose rho each round from the channels",
)


def save_cdpb(rows: list[dict[str, Any]], curves: dict[str, Any], s: CDPBScenario, out_dir: Path) -> list[Path]:
    """Write ``compare_cdpb.png`` (G(t) over iterations and RDP over rounds, each policy in its fixed colour,
    :func:`baselines.report.policy_colour`), ``compare_cdpb.csv`` and last ``compare_cdpb.json`` with the others'
    hashes (:func:`baselines.report.write_rows`), each atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    lam1, lam2 = s.lambda_convergence, s.lambda_privacy
    for name, c in curves["policies"].items():
        t = np.arange(1, len(c["gamma"]) + 1)
        for ax, y in ((axes[0], lam1 * np.array(c["gamma"]) + lam2 * np.array(c[f"epsilon_{s.accounting}"])),
                      (axes[1], np.array(c[f"epsilon_{s.accounting}"]))):
            colour = policy_colour(name)
            ax.plot(t, y, label=name, color=colour)
            ax.plot([c["tau"]], [y[c["tau"] - 1]], marker="o", color=colour)
    axes[0].set_ylabel("G(rho, t) = lambda_1 gamma + lambda_2 eps")
    axes[1].set_ylabel(f"cumulative RDP, worst client (alpha={s.rdp_order}, {s.accounting})")
    for ax in axes:
        ax.set_xlabel("iteration t")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{s.name}: CDPB and baselines (dots: each policy's tau), accounting = {s.accounting}")
    fig.tight_layout()
    png = save_figure(fig, out_dir / "compare_cdpb.png", dpi=120)
    plt.close(fig)
    return write_rows(rows, {"scenario": s.to_dict(), "curves": curves}, out_dir, "compare_cdpb", [png]) + [png]
