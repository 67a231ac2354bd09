"""Per-episode cost budgets as the safe-RL field handles them: Gymnasium wrappers any client can stack, each in a single
and a vector form that share one ledger and one set of pure functions.

Every constrained task reports a per-round cost in ``info["cost"]`` whose episode sum must stay within the task's cost
limit, T (:attr:`otagym.tasks.Task.cost_limit`: a mean of 1 per round). That limit holds per episode: an almost-sure
constraint, which a Lagrangian on the *mean* episode cost does not optimise (it drives the mean to the limit and leaves
about half the episodes over it). In the units of ``info["cost"]``, before round t (0-based) of T:

* the budget left is B_t = T - sum_{tau<t} cost_tau and the rounds left k_t = T - t (this one included);
* the fair share left is F_t = max(B_t, 0) / k_t, the per-round spend that ends the episode exactly at the limit.

The wrappers (Sootla et al., "Saute RL: almost surely safe reinforcement learning using state augmentation", ICML
2022; Dalal et al., "Safe exploration in continuous action spaces", 2018, for the safety layer):

* :class:`RelativeSpend` (and :class:`RelativeSpendVector`): the action says how much of the fair share left to spend,
  cost_t = min(F_t m(a), cap_t) with m(a) = (10^(1 + a) - 1) / 9 (m(-1) = 0, m(0) = 1, m(1) = 11, the env's own spend
  curve), so a = 0 spends the fair share left and no action sequence exceeds the limit: feasibility comes from the
  action, and the learner only has to follow the channel. For envs whose action is a spend in units of the per-round
  budget (receive scaling's ``action_type="spend"``, the suite's spend tasks).
* :class:`ReserveSafetyLayer` (and its vector form): the env's own spend action projected onto cost_t <= cap_t, the
  budget left less a reserve of ``reserve`` times the fair share for every later round (reserve = 0: the budget left).
  Spending a round's reserve cannot leave the later rounds with nothing, which is where a plain clip to the budget
  left fails (rounds at zero spend at the end leak most).
* :class:`SauteBudget` (and its vector form): the reward reshaped once the budget is spent, r_t - penalty x (the
  overspend this round added), a penalty that grows with the overspend (Saute's own reshaping is a constant -n per
  round once the budget is gone; with a large enough penalty, the unconstrained optimum meets the limit);
  ``augment=True`` appends B_t / T to the observation (Saute's state; receive scaling's observation already carries
  it as ``budget_left``).

The ledger (:class:`BudgetLedger`) follows each env's episode from the costs it reports, with either of Gymnasium's
autoreset modes; it is the one state all of them keep.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from numpy.typing import ArrayLike, NDArray

from otagym.schemes.receive_scaling.actions import spend_action, spend_cost
from otagym.validation import Flag

__all__ = [
    "BudgetLedger",
    "RelativeSpend",
    "RelativeSpendVector",
    "ReserveSafetyLayer",
    "ReserveSafetyLayerVector",
    "SauteBudget",
    "SauteBudgetVector",
    "fair_share",
    "relative_action",
    "relative_spend",
    "spend_cap",
    "spend_multiplier",
]


def spend_multiplier(action: ArrayLike) -> NDArray:
    """m(a) = (10^(1 + a) - 1) / 9 for a in [-1, 1]: 0 at a = -1, 1 at a = 0, 11 at a = 1 (the spend action's curve,
    :func:`otagym.schemes.receive_scaling.actions.spend_cost` at a per-round budget of 1)."""
    return spend_cost(np.clip(action, -1.0, 1.0), 1.0)


def relative_action(multiplier: ArrayLike) -> NDArray:
    """The inverse of :func:`spend_multiplier`: a = log10(9 m + 1) - 1 for m in [0, 11] (the spend action of a
    per-round budget of 1, :func:`otagym.schemes.receive_scaling.actions.spend_action`)."""
    return spend_action(np.asarray(multiplier, dtype=float), 1.0)


def fair_share(budget_left: ArrayLike, rounds_left: ArrayLike) -> NDArray:
    """F_t = max(B_t, 0) / k_t: the per-round spend that ends the episode at its limit (``rounds_left`` >= 1)."""
    return np.maximum(np.asarray(budget_left, dtype=float), 0.0) / np.maximum(np.asarray(rounds_left, dtype=float), 1.0)


def spend_cap(budget_left: ArrayLike, rounds_left: ArrayLike, reserve: float = 0.0, floor: float = 0.0) -> NDArray:
    """The most round t may spend, min(B_t - reserve (k_t - 1) F_t, B_t - floor (k_t - 1)) >= 0: the budget left less
    ``reserve`` (in [0, 1]) times the fair share for each later round, and less ``floor`` (in [0, 1], units of the
    per-round limit) for each later round, so that every later round can still spend ``floor`` times its share of
    the limit (a fair share left of at least ``floor``). Both 0: the budget left."""
    left = np.maximum(np.asarray(budget_left, dtype=float), 0.0)
    later = np.maximum(np.asarray(rounds_left, dtype=float), 1.0) - 1.0
    share = fair_share(budget_left, rounds_left)
    return np.maximum(np.minimum(left - reserve * later * share, left - floor * later), 0.0)


def relative_spend(action: ArrayLike, budget_left: ArrayLike, rounds_left: ArrayLike, reserve: float = 0.0,
                   floor: float = 0.0) -> NDArray:
    """cost_t = min(F_t m(a), :func:`spend_cap`): ``action`` a in [-1, 1] relative to the fair share left F_t (a = 0
    spends F_t, a = -1 nothing, a = 1 eleven times F_t), never more than the cap (in the units of ``info["cost"]``)."""
    return np.minimum(fair_share(budget_left, rounds_left) * spend_multiplier(action),
                      spend_cap(budget_left, rounds_left, reserve, floor))


def _check_reserve(reserve: float, name: str = "reserve") -> float:
    number = np.ndim(reserve) == 0 and np.asarray(reserve).dtype.kind in "iuf"  # not a bool, a string or an object
    if not (number and 0.0 <= float(reserve) <= 1.0):
        raise ValueError(f"{name} must be a number in [0, 1] (the share kept for each later round: of the fair share "
                         f"for reserve, of the per-round limit for floor); got {reserve!r}")
    return float(reserve)


class BudgetLedger:
    """The budget state of N episodes, followed from the costs they report: spent (the episode cost so far) and t
    (rounds played), so B_t = ``horizon`` - spent and k_t = ``horizon`` - t.

    ``autoreset_mode`` says what a step after an episode's end is: Gymnasium's NEXT_STEP (the vector env's default:
    the next step resets that env and its cost is not counted) or SAME_STEP (the step that ends it already returns the
    next episode's first observation). A single env is N = 1 and resets explicitly.
    """

    def __init__(self, num_envs: int, horizon: int, autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP) -> None:
        if not (isinstance(horizon, (int, np.integer)) and horizon >= 1):
            raise ValueError(f"horizon must be an integer >= 1 (the episode's rounds, its cost limit); got {horizon!r}")
        if autoreset_mode not in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
            raise ValueError(f"autoreset_mode must be NEXT_STEP or SAME_STEP; got {autoreset_mode!r}")
        self.horizon, self.autoreset_mode = int(horizon), autoreset_mode
        self.spent, self.t = np.zeros(num_envs), np.zeros(num_envs, dtype=np.int64)
        self.final_budget_left = np.full(num_envs, float(horizon))
        self._restarting = np.zeros(num_envs, dtype=bool)

    @property
    def budget_left(self) -> NDArray:
        """B_t = horizon - spent, per env."""
        return self.horizon - self.spent

    @property
    def rounds_left(self) -> NDArray:
        """k_t = horizon - t (at least 1), per env."""
        return np.maximum(self.horizon - self.t, 1)

    def reset(self) -> None:
        """Every env at the start of an episode."""
        self.spent[:], self.t[:], self._restarting[:] = 0.0, 0, False

    def record(self, cost: ArrayLike, terminated: ArrayLike, truncated: ArrayLike) -> NDArray:
        """Counts a step's costs and returns the overspend each env's step added, max(spent - horizon, 0) after
        minus before (0 for a NEXT_STEP reset step)."""
        cost = np.broadcast_to(np.asarray(cost, dtype=float), self.spent.shape)
        live = ~self._restarting
        before = self.spent.copy()
        self.spent[live] += cost[live]
        self.t[live] += 1
        over = np.maximum(self.spent - self.horizon, 0.0) - np.maximum(before - self.horizon, 0.0)
        #: B after this step, before an ending episode's reset (what its final observation saw)
        self.final_budget_left = self.horizon - self.spent
        done = np.broadcast_to(np.logical_or(terminated, truncated), self.spent.shape)  # a single env's bools too
        restart = done if self.autoreset_mode == AutoresetMode.SAME_STEP else self._restarting
        self.spent[restart], self.t[restart] = 0.0, 0
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            self._restarting = done.copy()
        return over


def _horizon(env: Any, horizon: int | None) -> int:
    """The env's episode length T: its scenario's rounds (``env.unwrapped.scenario.num_rounds``; else its spec's
    ``max_episode_steps``); ``horizon`` if given must equal it (``ValueError`` otherwise, and when neither is known)."""
    scenario = getattr(env.unwrapped, "scenario", None)
    spec = getattr(env, "spec", None)
    known = getattr(scenario, "num_rounds", None) or getattr(spec, "max_episode_steps", None)
    if horizon is not None and known is not None and int(horizon) != int(known):
        raise ValueError(f"horizon must be the env's episode length, {known} rounds; got {horizon!r}")
    found = horizon if horizon is not None else known
    if found is None:
        raise ValueError("horizon is needed (the episode's rounds): the env has no scenario.num_rounds and no "
                         "spec.max_episode_steps; pass horizon=T")
    return int(found)


def _check_spend_env(env: Any, wrapper: str) -> None:
    """``ValueError`` unless the env's action is a spend in units of its per-round budget: an otagym env of the spend
    action, not under :class:`RelativeSpend` (or its vector form), whose action is relative to the fair share (a
    safety layer keeps the spend action: a wrapper over it composes)."""
    inner = env
    while isinstance(inner, (gym.Wrapper, gym.vector.VectorWrapper)):
        if isinstance(inner, (RelativeSpend, RelativeSpendVector)):
            raise ValueError(f"{wrapper} needs the env's own spend action; it is under {type(inner).__name__}, whose "
                             "action is relative to the fair share left: use one of them")
        inner = inner.env
    core = getattr(env.unwrapped, "core", None)
    if core is None:
        raise ValueError(f"{wrapper} needs an otagym env or otagym's native vector env (gym.make_vec(task_id, n, "
                         f"vectorization_mode='vector_entry_point')), whose action type it reads; got {env.unwrapped!r}")
    if getattr(core, "action_type", None) != "spend":
        raise ValueError(f"{wrapper} needs an env whose action is the round's spend (action_type='spend', the "
                         f"benchmark suite's spend tasks); got action_type={getattr(core, 'action_type', None)!r}")


def _ledger_cost(info: dict[str, Any]) -> Any:
    """The step's ``info["cost"]``; for a vector env in SAME_STEP mode, an ending episode's from ``final_info``
    (Gymnasium's vector envs put the next episode's reset info in ``info`` there)."""
    if "cost" not in info:
        raise KeyError("the env reports no info['cost']: the budget wrappers need a constrained task's per-round cost")
    final = info.get("final_info")
    if isinstance(final, dict) and "cost" in final and "_final_info" in info:
        return np.where(info["_final_info"], final["cost"], info["cost"])
    return info["cost"]


class _SingleLedger:
    """A single env's ledger (N = 1), reset with the env and fed by its steps."""

    ledger: BudgetLedger

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self.ledger.reset()
        return self.env.reset(seed=seed, options=options)

    def _record(self, info: dict[str, Any], terminated: bool, truncated: bool) -> float:
        return float(self.ledger.record(_ledger_cost(info), terminated, truncated)[0])


class _VectorLedger:
    """A vector env's ledger, reset with it and fed by its steps in its autoreset mode."""

    ledger: BudgetLedger

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self.ledger.reset()
        return self.env.reset(seed=seed, options=options)

    def _record(self, info: dict[str, Any], terminated: NDArray, truncated: NDArray) -> NDArray:
        return self.ledger.record(_ledger_cost(info), terminated, truncated)


def _vector_ledger(env: VectorEnv, horizon: int | None) -> BudgetLedger:
    mode = AutoresetMode(env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP))
    return BudgetLedger(env.num_envs, _horizon(env, horizon), mode)


class RelativeSpend(_SingleLedger, gym.Wrapper):
    """The action relative to the fair share left: a in [-1, 1] spends min(F_t m(a), cap_t)
    (:func:`relative_spend`), so a = 0 spends the fair share left and no action sequence breaks the limit.

    Args:
        env: a spend-action env (a benchmark spend task: ``gym.make("otagym/ReceiveScalingCMDP-v1")``).
        reserve: the safety layer's reserve, a share of the fair share kept for each later round (:func:`spend_cap`).
        floor: the safety layer's floor, a share of the per-round limit kept for each later round (:func:`spend_cap`;
            both 0: the cap is the budget left).
        horizon: T (default: the env's own episode length).

    >>> import gymnasium as gym, numpy as np, otagym
    >>> env = RelativeSpend(gym.make("otagym/ReceiveScalingCMDP-v1"))
    >>> _ = env.reset(seed=0)
    >>> _, _, _, _, info = env.step(np.zeros(1, dtype=np.float32))   # the fair share: nu, as EqualAlloc
    >>> round(float(info["cost"]), 6)
    1.0
    """

    def __init__(self, env: gym.Env, *, reserve: float = 0.0, floor: float = 0.0, horizon: int | None = None) -> None:
        _check_spend_env(env, "RelativeSpend")
        super().__init__(env)
        self.reserve, self.floor = _check_reserve(reserve), _check_reserve(floor, "floor")
        self.ledger = BudgetLedger(1, _horizon(env, horizon))
        self.action_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        cost = relative_spend(np.reshape(action, -1)[:1], self.ledger.budget_left, self.ledger.rounds_left,
                              self.reserve, self.floor)
        obs, reward, terminated, truncated, info = self.env.step(spend_action(cost, 1.0).astype(np.float32))
        self._record(info, terminated, truncated)
        return obs, reward, terminated, truncated, info


class RelativeSpendVector(_VectorLedger, gym.vector.VectorWrapper):
    """:class:`RelativeSpend` for otagym's native vector env (``gym.make_vec(task_id, n,
    vectorization_mode="vector_entry_point")``, either autoreset mode)."""

    def __init__(self, env: VectorEnv, *, reserve: float = 0.0, floor: float = 0.0,
                 horizon: int | None = None) -> None:
        _check_spend_env(env, "RelativeSpendVector")
        super().__init__(env)
        self.reserve, self.floor = _check_reserve(reserve), _check_reserve(floor, "floor")
        self.ledger = _vector_ledger(env, horizon)
        self.single_action_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, env.num_envs)

    def step(self, actions: Any) -> tuple[Any, NDArray, NDArray, NDArray, dict[str, Any]]:
        cost = relative_spend(np.reshape(actions, (self.num_envs, -1))[:, 0], self.ledger.budget_left,
                              self.ledger.rounds_left, self.reserve, self.floor)
        obs, reward, terminated, truncated, info = self.env.step(spend_action(cost, 1.0)[:, None].astype(np.float32))
        self._record(info, terminated, truncated)
        return obs, reward, terminated, truncated, info


def _projected(action: Any, ledger: BudgetLedger, reserve: float, floor: float) -> NDArray:
    """The spend actions with their costs capped at :func:`spend_cap` (the env's own action where it is within)."""
    a = np.clip(np.reshape(np.asarray(action, dtype=float), (ledger.spent.size, -1))[:, 0], -1.0, 1.0)
    cap = spend_cap(ledger.budget_left, ledger.rounds_left, reserve, floor)
    return np.where(spend_cost(a, 1.0) <= cap, a, spend_action(cap, 1.0))[:, None].astype(np.float32)


class ReserveSafetyLayer(_SingleLedger, gym.ActionWrapper):
    """A safety layer on the env's own spend action: the round's cost projected onto [0, cap_t], cap_t the budget left
    less ``reserve`` times the fair share and less ``floor`` (a share of the per-round limit) for every later round
    (:func:`spend_cap`). ``reserve=0, floor=0`` is the plain clip to the budget left, which leaves the last rounds
    nothing once a policy has overspent (they leak most there)."""

    def __init__(self, env: gym.Env, *, reserve: float = 0.5, floor: float = 0.0, horizon: int | None = None) -> None:
        _check_spend_env(env, "ReserveSafetyLayer")
        super().__init__(env)
        self.reserve, self.floor = _check_reserve(reserve), _check_reserve(floor, "floor")
        self.ledger = BudgetLedger(1, _horizon(env, horizon))

    def action(self, action: Any) -> NDArray:
        return _projected(action, self.ledger, self.reserve, self.floor)[0]

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(self.action(action))
        self._record(info, terminated, truncated)
        return obs, reward, terminated, truncated, info


class ReserveSafetyLayerVector(_VectorLedger, gym.vector.VectorWrapper):
    """:class:`ReserveSafetyLayer` for otagym's native vector env (either autoreset mode)."""

    def __init__(self, env: VectorEnv, *, reserve: float = 0.5, floor: float = 0.0, horizon: int | None = None) -> None:
        _check_spend_env(env, "ReserveSafetyLayerVector")
        super().__init__(env)
        self.reserve, self.floor = _check_reserve(reserve), _check_reserve(floor, "floor")
        self.ledger = _vector_ledger(env, horizon)

    def step(self, actions: Any) -> tuple[Any, NDArray, NDArray, NDArray, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(_projected(actions, self.ledger, self.reserve,
                                                                            self.floor))
        self._record(info, terminated, truncated)
        return obs, reward, terminated, truncated, info


def _check_penalty(penalty: float) -> float:
    if not (np.isfinite(penalty) and penalty >= 0):
        raise ValueError(f"penalty must be finite and >= 0 (reward per unit of overspend); got {penalty!r}")
    return float(penalty)


def _augmented_space(space: spaces.Box) -> spaces.Box:
    low, high = np.append(space.low, -np.inf), np.append(space.high, 1.0)
    return spaces.Box(low.astype(space.dtype), high.astype(space.dtype), dtype=space.dtype)


class SauteBudget(_SingleLedger, gym.Wrapper):
    """Saute RL's reshaping with a penalty that grows with the overspend: the reward becomes r_t - ``penalty`` x (the
    overspend round t added, in units of ``info["cost"]``), so an episode over its limit by D loses penalty x D in
    all; ``info["overspend"]`` is that round's. ``augment=True`` appends the budget left B_t / T to the observation
    (Saute's state augmentation; receive scaling's observation carries it already as ``budget_left``). The penalty
    is a weight in the reward's units: on receive scaling's tasks a round at nearly no spend costs up to thousands.

    >>> import gymnasium as gym, numpy as np, otagym
    >>> env = SauteBudget(gym.make("otagym/ReceiveScalingCMDP-v1", num_rounds=2, max_episode_steps=2), penalty=10.0,
    ...                   augment=True)
    >>> obs, _ = env.reset(seed=0)
    >>> float(obs[-1])                                      # B_0 / T: the whole budget left
    1.0
    >>> _, _, _, _, info = env.step(np.ones(1, dtype=np.float32))   # 11 nu: 9 over the episode's limit of 2
    >>> round(float(info["overspend"]), 4)
    9.0
    """

    def __init__(self, env: gym.Env, *, penalty: float = 1.0, augment: bool = False,
                 horizon: int | None = None) -> None:
        super().__init__(env)
        self.penalty, self.augment = _check_penalty(penalty), Flag()("augment", augment)
        self.ledger = BudgetLedger(1, _horizon(env, horizon))
        if self.augment:
            self.observation_space = _augmented_space(env.observation_space)

    def _observe(self, obs: NDArray) -> NDArray:
        if not self.augment:
            return obs
        return np.append(obs, self.ledger.budget_left / self.ledger.horizon).astype(self.observation_space.dtype)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        return self._observe(obs), info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        over = self._record(info, terminated, truncated)
        return (self._observe(obs), float(reward) - self.penalty * over, terminated, truncated,
                {**info, "overspend": over})


class SauteBudgetVector(_VectorLedger, gym.vector.VectorWrapper):
    """:class:`SauteBudget` for any vector env with ``info["cost"]`` (either autoreset mode; ``augment`` appends each
    env's B_t / T, to ``info["final_obs"]`` too)."""

    def __init__(self, env: VectorEnv, *, penalty: float = 1.0, augment: bool = False,
                 horizon: int | None = None) -> None:
        super().__init__(env)
        self.penalty, self.augment = _check_penalty(penalty), Flag()("augment", augment)
        self.ledger = _vector_ledger(env, horizon)
        if self.augment:
            self.single_observation_space = _augmented_space(env.single_observation_space)
            self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, env.num_envs)

    def _observe(self, obs: NDArray) -> NDArray:
        if not self.augment:
            return obs
        column = (self.ledger.budget_left / self.ledger.horizon)[:, None]
        return np.concatenate([obs, column], axis=1).astype(self.single_observation_space.dtype)

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        return self._observe(obs), info

    def step(self, actions: Any) -> tuple[Any, NDArray, NDArray, NDArray, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(actions)
        over = self._record(info, terminated, truncated)
        info = {**info, "overspend": over, "_overspend": np.ones(self.num_envs, dtype=bool)}
        if self.augment and "final_obs" in info:  # SAME_STEP: the ended episodes' last observations, augmented
            final = info["final_obs"].copy()
            for i in np.flatnonzero(info["_final_obs"]):
                final[i] = np.append(final[i], self.ledger.final_budget_left[i] / self.ledger.horizon).astype(
                    self.single_observation_space.dtype)
            info["final_obs"] = final
        return self._observe(obs), reward - self.penalty * over, terminated, truncated, info
