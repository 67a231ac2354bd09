"""The one loop that plays a policy in a vector env (:func:`play`): every benchmark score, reference, calibration,
``otagym compare`` cell and sweep cell is played by it, whatever the scheme; what each reads from the episode is its
``on_round`` and the end-of-episode info."""

from __future__ import annotations

from typing import Any, Callable, Iterable, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["Episodes", "play"]


class Episodes(NamedTuple):
    """Per realisation: the episode return, the episode cost (the sum of ``info["cost"]``) over the task's cost limit
    (at most 1 exactly when the constraint holds), and the env's end-of-episode info (what a scheme scores besides
    the return: receive scaling's leakages, the privacy report)."""

    returns: NDArray
    cost_ratios: NDArray | None  # None where the env reports no cost (an unconstrained env)
    final_info: dict[str, Any] | None = None  # None where nothing is kept (a device team's episodes)


def play(policy: Any, env: Any, options: dict[str, Any], rounds: Iterable[int], *,
         seed: int = 0, cost_limit: float = 1.0, on_round: Callable[[int, dict[str, Any]], None] | None = None
         ) -> Episodes:
    """The one loop that plays a policy: ``policy.reset(env.scenario, seed, **options)`` (an offline policy reads the
    realisation it plays there; the others ignore it), ``env.reset(seed=seed, options=options)``, then a step per
    round of ``rounds`` with ``policy.act(obs, info)`` (one action per env, or one for all, broadcast to the env's
    action shape); ``on_round(t, info)`` after each step, and ``on_round(-1, info)`` with the reset's info. The
    end-of-episode info is the last step's info (its ``final_info`` where the env autoresets on the same step)."""
    policy.reset(env.scenario, seed, **options)
    obs, info = env.reset(seed=seed, options=options)
    if on_round is not None:
        on_round(-1, info)
    shape = env.action_space.shape
    total, cost = np.zeros(env.num_envs), None
    for t in rounds:
        obs, reward, _, _, info = env.step(_batched(policy.act(obs, info), shape))
        total += reward
        if "cost" in info:
            cost = info["cost"] + (0.0 if cost is None else cost)
        if on_round is not None:
            on_round(t, info)
    return Episodes(total, None if cost is None else cost / cost_limit, info.get("final_info", info))


def _batched(action: ArrayLike, shape: tuple[int, ...]) -> NDArray:
    """``action`` as the env's batch of actions: (N,) or one action for all envs, trailing axes of length 1 added,
    broadcast to ``shape`` (a view: no value changes)."""
    action = np.asarray(action)
    return np.broadcast_to(action.reshape(action.shape + (1,) * (len(shape) - action.ndim)), shape)


