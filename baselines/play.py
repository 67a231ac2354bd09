"""The one loop that plays a policy in a vector env (:func:`play`): every benchmark score of a single-agent task,
reference, calibration, ``otagym compare`` cell and sweep cell is played by it, whatever the scheme; what each reads
from the episode is its ``on_round`` and the end-of-episode info. (A devices-as-agents team plays on the device side,
:mod:`otagym.multiagent`; ``otagym rollout`` prints one env's rounds.)"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Iterable, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["Episodes", "play"]


class Episodes(NamedTuple):
    """Per realisation: the episode return, the episode cost (the sum of ``info["cost"]``) over ``cost_limit`` (a
    task's: at most 1 exactly when the constraint holds), and the env's end-of-episode info (what a scheme scores
    besides the return: receive scaling's leakages, the privacy report)."""

    returns: NDArray
    cost_ratios: NDArray | None  # None where the env reports no cost (an unconstrained env)
    final_info: dict[str, Any] | None = None  # None where nothing is kept (a device team's episodes)


def play(policy: Any, env: Any, options: dict[str, Any], rounds: Iterable[int], *, seed: int = 0,
         cost_limit: float = 1.0, scenario: Any = None,
         on_round: Callable[[int, dict[str, Any]], None] | None = None) -> Episodes:
    """The one loop that plays a policy: ``policy.reset(scenario, seed, **options)`` (``scenario`` default: the
    env's; the reset options, i.e. the realisation, go to a ``reset`` that takes keyword arguments, where an offline
    policy reads the future channel; others ignore them), ``env.reset(seed=seed, options=options)``, then a step per
    round of ``rounds`` with ``policy.act(obs, info)``: the vector env's batch of actions, (N, 1) on every scheme (a
    scalar is broadcast to every env, and one per env of shape (N,) gets the trailing axis; any other shape reaches
    the env, which names it); ``on_round(t, info)`` after each step, and ``on_round(-1, info)``
    with the reset's info. The end-of-episode info is the last step's info (its ``final_info`` where the env
    autoresets on the same step)."""
    _reset_policy(policy, env.scenario if scenario is None else scenario, seed, options)
    obs, info = env.reset(seed=seed, options=options)
    if on_round is not None:
        on_round(-1, info)
    shape = env.action_space.shape
    total, cost, costed = np.zeros(env.num_envs), np.zeros(env.num_envs), False
    for t in rounds:
        obs, reward, _, _, info = env.step(_batched(policy.act(obs, info), shape))
        total += reward
        if "cost" in info:
            cost += info["cost"]
            costed = True
        if on_round is not None:
            on_round(t, info)
    return Episodes(total, cost / cost_limit if costed else None, info.get("final_info", info))


def _reset_policy(policy: Any, scenario: Any, seed: int, options: dict[str, Any]) -> None:
    """``policy.reset(scenario, seed, **options)``, or ``policy.reset(scenario, seed)`` where its ``reset`` takes no
    keyword arguments (a policy written to ``reset(scenario, seed)`` alone)."""
    parameters = inspect.signature(policy.reset).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        policy.reset(scenario, seed, **options)
    else:
        policy.reset(scenario, seed)


def _batched(action: ArrayLike, shape: tuple[int, ...]) -> NDArray:
    """``action`` as the env's batch of actions: a single action broadcast to ``shape``; one per env given without
    the trailing axes of length 1 gets them (no value changes; any other shape reaches the env, which names it)."""
    action = np.asarray(action)
    if action.ndim == 0:
        return np.broadcast_to(action, shape)
    if action.ndim < len(shape) and action.shape == shape[:action.ndim] and all(n == 1 for n in shape[action.ndim:]):
        return action.reshape(shape)
    return action
