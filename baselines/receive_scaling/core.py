"""The policy protocol of the analytic policies (model A), and the convex per-round solver they share, which lives
with the model's formulas in :mod:`otagym.schemes.receive_scaling` (the env's price action uses it too)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from numpy.typing import NDArray

from otagym.schemes.receive_scaling import X_FLOOR_RATIO, Scenario, minimize_round, solve_increasing

__all__ = ["Policy", "minimize_round", "solve_increasing", "X_FLOOR_RATIO"]


@runtime_checkable
class Policy(Protocol):
    """A receive-scaling policy: returns x_t (the env's ``action_type="x"``) from public information only.

    ``reset`` receives the scenario and a seed; ``act`` the observation and the info of the previous ``reset``/
    ``step`` (``next_h_min2``, ``next_channel_gain``, ``mean_channel_gain``, ``convergence_cost``...). Both work for a
    single env (scalars) and batched over a vector env (arrays over envs). ``reset`` is also given the realisation
    played, as the env's reset options (``distances_m``, ``channel_gains`` and ``nu``; :func:`baselines.play.play`):
    offline policies read the future channel there, online policies ignore it.
    """

    def reset(self, scenario: Scenario, seed: int | None = None, **offline: Any) -> None: ...

    def act(self, observation: NDArray, info: dict[str, Any]) -> NDArray: ...
