"""What ``otagym train`` prints when a run ends (:func:`training_summary`): the last training episodes' return beside
their cost over the limit and the share over it, and the multipliers where the run has them, as Safety-Gymnasium's
and OmniSafe's loggers end an epoch; for ``budget_ppo`` the selected model's validation scores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from otagym.tasks import COST_TOLERANCE

__all__ = ["training_summary", "LAST_EPISODES"]

#: The training episodes the summary averages over: the run's last ones.
LAST_EPISODES = 100


def _monitor_summary(run: Path) -> str | None:
    """The last :data:`LAST_EPISODES` episodes of ``monitor.csv`` (SB3's format), or None without one."""
    from stable_baselines3.common.monitor import load_results

    if not (run / "monitor.csv").is_file():
        return None
    episodes = load_results(str(run))
    if episodes.empty:
        return "no training episode ended"
    last = episodes.tail(LAST_EPISODES)
    text = f"last {len(last)} of {len(episodes)} training episodes: return {last['r'].mean():.4g} on average"
    if "episode_cost" in last:
        ratio = (last["episode_cost"] / last["cost_limit"]).to_numpy()
        text += (f", episode cost / limit {ratio.mean():.3f} (max {ratio.max():.3f}), over the limit on "
                 f"{np.mean(ratio > 1 + COST_TOLERANCE):.0%}")
    return text


def training_summary(model_path: str | Path) -> str:
    """One or two lines on how the run in ``model_path``'s folder ended (see the module docstring)."""
    run = Path(model_path).parent
    lines = [line for line in (_monitor_summary(run),) if line]
    if (run / "lagrange.json").is_file():
        state = json.loads((run / "lagrange.json").read_text())
        lines.append("Lagrange multipliers at step {:,}: {}".format(
            state["num_timesteps"], ", ".join(f"{m:.4g}" for m in state["multipliers"])))
    meta = json.loads((run / "run.json").read_text()) if (run / "run.json").is_file() else {}
    selected = meta.get("selected") or {}
    if meta.get("validation") and "steps" in selected:
        best = next(v for v in meta["validation"] if v["steps"] == selected["steps"])
        per_nu = ", ".join(f"{v['score']:.1f} at nu = {nu} ({v['over']:.0%} over)" for nu, v in best["per_nu"].items())
        lines.append(f"selected at {selected['steps']:,} steps on the validation realisations: mean feasible score "
                     f"{best['score']:.1f} ({per_nu})")
    return "\n".join(lines)
