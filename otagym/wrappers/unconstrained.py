"""A marker for learners that optimise the reward alone: :class:`UnconstrainedLearner`."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym

from otagym.tasks import constrained

__all__ = ["UnconstrainedLearner"]


class UnconstrainedLearner(gym.Wrapper):
    """The env unchanged, with a ``UserWarning`` when it is a constrained MDP (:func:`otagym.tasks.constrained` of its
    spec's keyword arguments): the learner that trains on it optimises the reward alone, so nothing keeps an
    episode's summed ``info["cost"]`` within its limit, and the benchmark suite scores an episode over it below every
    feasible one.
    rl_zoo3's configs of the unconstrained algorithms (``agents/configs/{ppo,sac,td3,trpo}.yml``) put it on the
    constrained tasks as their ``env_wrapper``, so ``python -m rl_zoo3.train`` says what ``otagym train`` says."""

    def __init__(self, env: gym.Env, **_: Any) -> None:
        super().__init__(env)
        spec = env.spec
        if spec is not None and constrained(spec.kwargs or {}):
            warnings.warn(f"{spec.id} is a constrained MDP and this learner optimises the reward alone: nothing "
                          "keeps an episode's summed info['cost'] within its limit (T), and an episode over it "
                          "scores below every feasible one on the benchmark suite; train with otagym train --algo "
                          "ppo_lagrangian, budget_ppo or budget_apg, or wrap the env (otagym.wrappers)", UserWarning,
                          stacklevel=2)
