"""Receive scaling -- the actions: their types and named codes, the settings that say what an action means, and the one
decoder of an action into the round's (x_t, c_t), :func:`decide`, which the round's kernel calls per env and
:func:`decode_actions` (so the env's ``decide`` and the policies of ``baselines``) applies to arrays.

Action types (the env's ``action_type``; budget mode takes the first two, the other modes the rest):

* ``"price"`` (:data:`ACTION_PRICE`), ``"share"`` (:data:`ACTION_SHARE`): a in [-1, 1] spends c_t =
  :func:`budget_action_cost` (capped at the budget left R_t; the last round spends R_t);
* ``"normalized"`` (:data:`ACTION_NORMALIZED`): a in [-1, 1] -> x = x_max x_min_ratio^((1 - a) / 2);
* ``"x"`` (:data:`ACTION_X`): x_t itself, in [1e-12 x_max, x_max];
* ``"eta"`` (:data:`ACTION_ETA`): eta_t in [0, inf], x = eta / h_min,t^2 clipped to [1e-12 x_max, x_max];
* ``"spend"`` (:data:`ACTION_SPEND`): a in [-1, 1] spends c_t = :func:`spend_cost`, uncapped.

x_t follows from c_t in closed form (the x with c_t(x) = c_t) and c_t from x_t by (28b).
"""

from __future__ import annotations

from typing import Any, Literal, Mapping, NamedTuple, get_args

import numpy as np
from gymnasium import spaces
from numba import njit
from numpy.typing import ArrayLike, NDArray

from otagym.jit import JIT_NO_ALLOC
from otagym.schemes.receive_scaling.formulas import (X_FLOOR_RATIO, ModelArrays, _budget_action_cost,
                                                     _convergence_cost, _elementwise, _flat, _normalized_x, _shaped,
                                                     _spend_cost, _x_for_cost)
from otagym.schemes.receive_scaling.model import ReceiveScalingModel
from otagym.validation import PHYSICAL_RANGE, OneOf, Real, Spec, bound, check_args, refuse_entries

__all__ = ["ActionType", "ACTION_TYPES", "RewardMode", "BUDGET_ACTIONS", "UNIT_ACTIONS", "ACTION_PRICE", "ACTION_SHARE",
           "ACTION_NORMALIZED", "ACTION_X", "ACTION_ETA", "ACTION_SPEND", "ACTION_CODES", "ActionSettings",
           "ACTION_ARGS", "ACTION_KEYS", "resolve_modes", "action_semantics", "normalized_x", "spend_cost", "spend_action",
           "budget_action_cost", "decide", "decode_actions", "check_actions", "action_space", "constrained"]

ActionType = Literal["price", "share", "normalized", "x", "eta", "spend"]
#: The action types, in the order of their codes.
ACTION_TYPES: tuple[ActionType, ...] = get_args(ActionType)
RewardMode = Literal["budget", "cmdp", "lagrangian"]

#: Action types of the budget formulation (see :func:`budget_action_cost`).
BUDGET_ACTIONS = ("price", "share")
#: The action types whose action is a in [-1, 1] (the budget actions, the normalised x and the spend).
UNIT_ACTIONS = BUDGET_ACTIONS + ("normalized", "spend")

#: The codes of the action types in the compiled round (:data:`ActionType`'s order; numba reads them as constants).
ACTION_PRICE, ACTION_SHARE, ACTION_NORMALIZED, ACTION_X, ACTION_ETA, ACTION_SPEND = range(6)
#: The code of each action type by name.
ACTION_CODES = {name: code for code, name in enumerate(get_args(ActionType))}


class ActionSettings(NamedTuple):
    """What an action means beyond its type (the env arguments of the same names), one argument of the compiled
    decoder."""

    code: int  # the action type (:data:`ACTION_CODES`)
    x_min_ratio: float  # x(a=-1) / x_max of the normalised action
    budget_multiplier_max: float  # the largest multiple of the fair share one share action spends
    price_decades: float  # a price action spans mu_ref 10^[-decades, decades]
    price_buffer_sd: float  # the price reference's safety stock, in standard deviations of the spend left
    budget_floor: float = 0.0  # a budget action leaves budget_floor nu for each later round (at most what is left)


#: The env arguments that say what an action means, and their specs (the core's ``ARGS`` include them).
ACTION_ARGS: dict[str, Spec] = {
    "reward_mode": OneOf(get_args(RewardMode), optional=True),
    "action_type": OneOf(get_args(ActionType), optional=True),
    "budget_multiplier_max": Real(1.0, PHYSICAL_RANGE[1], low_open=True),
    "price_decades": Real(0.0, 30.0, low_open=True),
    "price_buffer_sd": Real(0.0, 100.0),
    "budget_floor": Real(0.0, 1.0),
    "x_min_ratio": Real(X_FLOOR_RATIO, 1.0, high_open=True),
}
#: Their names, and the defaults of those that have one (the core's signature uses these).
ACTION_KEYS = tuple(ACTION_ARGS)
ACTION_DEFAULTS: dict[str, Any] = {"reward_mode": None, "action_type": None, "x_min_ratio": 1e-3,
                                   "budget_multiplier_max": 100.0, "price_decades": 2.0, "price_buffer_sd": 1.0,
                                   "budget_floor": 0.0}


def resolve_modes(reward_mode: RewardMode | None, action_type: ActionType | None) -> tuple[str, str]:
    """The formulation and the action type the env plays: ``reward_mode`` defaults to ``"budget"`` (``"cmdp"`` when
    ``action_type`` names an x action), ``action_type`` to ``"price"`` in budget mode (else ``"normalized"``); the
    budget actions go with budget mode and only with it (else ``ValueError``)."""
    if reward_mode is None:
        reward_mode = "budget" if action_type is None or action_type in BUDGET_ACTIONS else "cmdp"
    if action_type is None:
        action_type = "price" if reward_mode == "budget" else "normalized"
    if (action_type in BUDGET_ACTIONS) != (reward_mode == "budget"):
        raise ValueError(f"action_type 'price' and 'share' go with reward_mode='budget' and only with it; got "
                         f"action_type={action_type!r}, reward_mode={reward_mode!r}")
    return reward_mode, action_type


def action_semantics(env_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """The :data:`ACTION_KEYS` as the env resolves them from ``env_kwargs`` (the others are ignored): validated, the
    defaults filled in and the modes resolved (:func:`resolve_modes`)."""
    given = {k: v for k, v in (env_kwargs or {}).items() if k in ACTION_ARGS}
    args = check_args(ACTION_ARGS, **{k: given.get(k, ACTION_DEFAULTS[k]) for k in ACTION_KEYS})
    args["reward_mode"], args["action_type"] = resolve_modes(args["reward_mode"], args["action_type"])
    return args


def normalized_x(action: ArrayLike, x_max: float, x_min_ratio: float) -> NDArray:
    """x = x_max * x_min_ratio ** ((1 - a) / 2) for a in [-1, 1]: the log-scale action of the cmdp/lagrangian modes
    (a = 1 is full power, a = -1 is x_min_ratio * x_max)."""
    return _elementwise(_normalized_x, (action,), x_max, x_min_ratio)


def spend_cost(action: ArrayLike, nu: ArrayLike) -> NDArray:
    """c_t = nu (10^(1 + a) - 1) / 9 for a in [-1, 1]: the ``spend`` action of the constrained formulation, in the
    units of c_t (28b). Nothing at a = -1 (the optimum spends nothing on a weak channel: half the rounds at
    nu = 0.01), nu at a = 0 (EqualAlloc), 11 nu at a = 1; exponential in a, so that each tenth of the range multiplies
    the spend alike above nu."""
    return _elementwise(_spend_cost, (action, nu))


def spend_action(cost: ArrayLike, nu: ArrayLike) -> NDArray:
    """The spend action a in [-1, 1] whose :func:`spend_cost` is ``cost`` (the inverse, a = log10(9 c_t / nu + 1) - 1):
    a cost of 0 or less is a = -1, one of 11 nu or more is a = 1 (the action's range), NaN is refused."""
    cost, nu = np.asarray(cost, dtype=float), np.asarray(nu, dtype=float)
    if np.isnan(cost).any() or not (nu > 0).all():
        raise ValueError(f"cost must not be NaN and nu must be > 0; got cost={cost}, nu={nu}")
    ratio = np.clip(cost / nu, 0.0, 11.0)
    return np.clip(np.log10(9.0 * ratio + 1.0) - 1.0, -1.0, 1.0)


@njit(**JIT_NO_ALLOC)
def _budget_action_cost_many(share: bool, action: NDArray, h_min2: NDArray, remaining: NDArray, rounds_left: NDArray,
                             mean_h_min2: NDArray, keep: NDArray, settings: ActionSettings, mdl: ModelArrays,
                             out: NDArray) -> NDArray:
    for i in range(action.size):
        out[i] = _budget_action_cost(share, action[i], h_min2[i], remaining[i], rounds_left[i], mean_h_min2[i],
                                     keep[i], settings.budget_multiplier_max, settings.price_decades,
                                     settings.price_buffer_sd, mdl)
    return out


def budget_action_cost(model: ReceiveScalingModel, settings: ActionSettings, action: ArrayLike, h_min2: ArrayLike,
                       remaining: ArrayLike, rounds_left: ArrayLike, *, mean_h_min2: ArrayLike,
                       nu: ArrayLike | None = None) -> NDArray:
    """c_t of a budget-mode action a in [-1, 1] of type ``settings.code`` (:data:`ACTION_PRICE` or
    :data:`ACTION_SHARE`; the round's decoder, :func:`decide`, spends the same).

    R_t = nu T - sum_{tau<t} c_tau (``remaining``) is the budget of constraint (28b) left before round t and
    k = T - t >= 1 (``rounds_left``) the rounds left including this one. The round spends

    * ``"price"``: :meth:`~otagym.schemes.receive_scaling.model.ReceiveScalingModel.price_spend` at mu_t = mu_ref,t 10^(price_decades a),
      mu_ref,t the :meth:`~otagym.schemes.receive_scaling.model.ReceiveScalingModel.reference_price` of R_t and k on the channel law of
      ``mean_h_min2`` with its safety stock of ``settings.price_buffer_sd`` standard deviations, price_decades
      ``settings.price_decades``;
    * ``"share"``: m(a) = multiplier_max^a times the fair share (a = 0 is EqualAlloc), multiplier_max
      ``settings.budget_multiplier_max``;

    capped at R_t less ``settings.budget_floor`` nu for each later round (``nu``: the budget per round, read by
    the floor only and required with one), and all of R_t in the last round. Every c_t lies in [0, R_t], so (1/T) sum_t c_t = nu holds
    for any sequence of actions.
    """
    if settings.code not in (ACTION_PRICE, ACTION_SHARE):
        names = {code: name for name, code in ACTION_CODES.items()}
        raise ValueError(f"settings.code must be a budget action type's ({', '.join(BUDGET_ACTIONS)}); got "
                         f"{names.get(settings.code, settings.code)!r}")
    if settings.budget_floor > 0 and nu is None:
        raise ValueError(f"nu must be given with settings.budget_floor > 0 (the floor keeps budget_floor nu for each "
                         f"later round); got budget_floor={settings.budget_floor!r} and no nu")
    keep = settings.budget_floor * np.asarray(0.0 if nu is None else nu, dtype=float)
    (action, h, remaining, rounds_left, mean, keep), shape = _flat((action, h_min2, remaining, rounds_left,
                                                                   mean_h_min2, keep))
    typed = ActionSettings(int(settings.code), *map(float, settings[1:]))  # one compiled variant
    return _shaped(_budget_action_cost_many(settings.code == ACTION_SHARE, action, h, remaining, rounds_left, mean,
                                            keep, typed, model.arrays, np.empty_like(h)), shape)


@njit(inline="always", **JIT_NO_ALLOC)
def decide(a: float, h_min2: float, nu: float, remaining: float, rounds_left: float, mean_h_min2: float,
           settings: ActionSettings, mdl: ModelArrays) -> tuple[float, float]:
    """``(x_t, c_t)`` of one env's checked action ``a`` of type ``settings.code`` on the channel ``h_min2``, with
    ``remaining`` = R_t the budget left, ``rounds_left`` = T - t and ``mean_h_min2`` = E[h_min^2] (the budget
    actions read those), ``nu`` the budget per round (the spend action): see the module's docstring."""
    code = settings.code
    if code == ACTION_SPEND:
        cost = _spend_cost(a, nu)
        return _x_for_cost(cost, h_min2, mdl.cost_scale, mdl.x_max), cost
    if code == ACTION_PRICE or code == ACTION_SHARE:
        cost = _budget_action_cost(code == ACTION_SHARE, a, h_min2, remaining, rounds_left, mean_h_min2,
                                   settings.budget_floor * nu, settings.budget_multiplier_max, settings.price_decades,
                                   settings.price_buffer_sd, mdl)
        return _x_for_cost(cost, h_min2, mdl.cost_scale, mdl.x_max), cost
    if code == ACTION_NORMALIZED:
        x = _normalized_x(a, mdl.x_max, settings.x_min_ratio)
    elif code == ACTION_X:
        x = min(a, mdl.x_max)
    else:  # eta: a huge or infinite eta is inf here, clipped to x_max
        x = min(max(a / h_min2, X_FLOOR_RATIO * mdl.x_max), mdl.x_max)
    return x, _convergence_cost(x, h_min2, mdl.cost_scale, mdl.x_max)


@njit(**JIT_NO_ALLOC)
def _decide_many(actions: NDArray, h_min2: NDArray, nu: NDArray, remaining: NDArray, rounds_left: NDArray,
                 mean_h_min2: NDArray, settings: ActionSettings, mdl: ModelArrays, x: NDArray,
                 cost: NDArray) -> None:
    """:func:`decide` for every element, into ``x`` and ``cost``."""
    for i in range(actions.size):
        x[i], cost[i] = decide(actions[i], h_min2[i], nu[i], remaining[i], rounds_left[i], mean_h_min2[i], settings,
                               mdl)


def decode_actions(model: ReceiveScalingModel, settings: ActionSettings, action: ArrayLike, h_min2: ArrayLike, *,
                   nu: ArrayLike, remaining: ArrayLike, rounds_left: ArrayLike,
                   mean_h_min2: ArrayLike = 1.0) -> tuple[NDArray, NDArray]:
    """``(x_t, c_t)`` of checked actions (broadcast with the channels ``h_min2`` and the budget's state: ``nu`` the
    budget per round, ``remaining`` R_t = nu T - sum_{tau<t} c_tau, ``rounds_left`` T - t, ``mean_h_min2`` E[h_min^2],
    read by the budget actions only), by the round's own compiled :func:`decide`, element by element."""
    flat, shape = _flat((action, h_min2, nu, remaining, rounds_left, mean_h_min2))
    x, cost = np.empty_like(flat[0]), np.empty_like(flat[0])
    _decide_many(*flat, settings, model.arrays, x, cost)
    return _shaped(x, shape), _shaped(cost, shape)


@njit(**JIT_NO_ALLOC)
def valid_actions(code: int, actions: NDArray, x_max: float) -> bool:
    """Whether every action lies in its type's range (:func:`check_actions` names the ones that do not)."""
    for a in actions:
        if code == ACTION_X:
            ok = X_FLOOR_RATIO * x_max <= a <= x_max * (1 + 1e-9)
        elif code == ACTION_ETA:
            ok = a >= 0.0
        else:  # the unit actions
            ok = abs(a) <= 1.0
        if not ok:  # NaN too
            return False
    return True


def check_actions(action_type: str, a: NDArray, x_max: float) -> NDArray:
    """``a`` if each action lies in its type's range (else ``ValueError`` naming the ones that do not)."""
    if action_type in UNIT_ACTIONS:
        refuse_entries(f"action ({action_type})", "lie in [-1, 1]", a, ~(np.abs(a) <= 1.0))
    elif action_type == "x":
        x_floor = X_FLOOR_RATIO * x_max
        refuse_entries("action (x)", f"lie in [{bound(x_floor)}, x_max={bound(x_max)}] (1e-12 x_max to x_max)", a,
                       ~((a >= x_floor) & (a <= x_max * (1 + 1e-9))))
    else:
        refuse_entries("action (eta)", "lie in [0, inf] (an eta above x_max h_min,t^2, +inf included, is played "
                       "at the power limit)", a, ~(a >= 0))  # NaN too
    return a


def action_space(action_type: str, x_max: float) -> spaces.Box:
    """The action space of one env: [-1, 1] for the unit actions, [1e-12 x_max, x_max] for x, [0, inf] for eta."""
    if action_type in UNIT_ACTIONS:
        return spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
    if action_type == "x":
        return spaces.Box(X_FLOOR_RATIO * x_max, x_max, shape=(1,), dtype=np.float64)
    return spaces.Box(0.0, np.inf, shape=(1,), dtype=np.float64)


def constrained(env_kwargs: Mapping[str, Any]) -> bool:
    """Every formulation but budget mode (the default ``reward_mode``), which meets the budget by construction."""
    return env_kwargs.get("reward_mode", "budget") != "budget"
