"""Receive scaling -- the round, compiled: one kernel for every N (the single env is N = 1).

:func:`play_round` plays one round of every env (the action's (x_t, c_t) by :func:`~.actions.decide`, eq. (9) per
device class, the reward and the info, from the model's compiled formulas), on one core or
(:data:`otagym.jit.PARALLEL_FROM`) on all (:func:`play_round_parallel`). Its arguments are named tuples:
:class:`RoundSettings` (the env's constants), :class:`EpisodeState` (the running arrays, updated in place) and
:class:`RoundInfo` (the outputs). The channel draws stay numpy's; :func:`channel` turns them into gains.
"""

from __future__ import annotations

from typing import NamedTuple

from numba import njit, prange
from numpy.typing import NDArray

from otagym.jit import JIT_NO_ALLOC
from otagym.accounting.curve import curve_log_a
from otagym.schemes.receive_scaling.actions import ActionSettings, decide, valid_actions
from otagym.schemes.receive_scaling.formulas import ModelArrays, _h_min2, _leakage, _x_for_cost

__all__ = ["RoundSettings", "EpisodeState", "RoundInfo", "PER_ENV_ROWS", "ROW_ETA", "ROW_REWARD", "play_round",
           "play_round_parallel", "channel"]


class RoundSettings(NamedTuple):
    """The constants of an env's rounds."""

    num_rounds: float  # T (a float, as the budget nu T it enters)
    action: ActionSettings  # what an action means
    lagrangian: bool  # reward_mode="lagrangian": the reward charges reward_lambda (c_t - nu)
    reward_lambda: float  # lambda of the lagrangian reward (0 in the other modes)


class EpisodeState(NamedTuple):
    """The N episodes' state, the core's one struct of it: the running arrays the round updates in place, the
    round's channel (written in place each round) and the placement's constants
    (the placement itself, like the fading, is the channel process's, in numpy's order as drawn).
    A reset (:meth:`~otagym.schemes.receive_scaling.core.ReceiveScalingCore.reset`) restarts the running arrays'
    rows in place and puts new ``nu``, ``mean_gain``, ``mean_h_min2`` and ``log10_placement`` arrays in a new struct:
    read the core's ``state`` after a reset, not one kept from before it. Every array is float64 (``t`` int64) and
    C-ordered, as the compiled round and observation take them."""

    t: NDArray  # (N,) int64, rounds played
    nu: NDArray  # (N,) the budget per round
    cost_sum: NDArray  # (N,) sum of c_t
    leak_sum: NDArray  # (N,) sum of L_t
    equal_alloc_sum: NDArray  # (N,) sum of EqualAlloc's L_t on the same channels
    class_rdp_sum: NDArray  # (N, C) cumulative RDP at alpha per device class
    gains: NDArray  # (N, M) |h_m,t|^2 of the round
    h_min2: NDArray  # (N,) h_min,t^2 of the round
    mean_h_min2: NDArray  # (N,) E[h_min^2] of the placement
    reward_scale: NDArray  # (N,) the reward's unit (T times the stationary headroom)
    mean_gain: NDArray  # (N, M) E|h_m|^2 of the placement
    log10_placement: NDArray  # (N, M) log10(nu E[s_m]): the observation's placement entry


#: The rows of :attr:`RoundInfo.per_env`, by name (compile-time constants in the kernel): x_t, eta_t, c_t, L_t, the
#: reward, the mean c so far, c_t / nu and nu.
PER_ENV_ROWS = ("x", "eta", "cost", "leakage", "reward", "cost_mean", "cost_share", "nu")
ROW_X, ROW_ETA, ROW_COST, ROW_LEAKAGE, ROW_REWARD, ROW_COST_MEAN, ROW_COST_SHARE, ROW_NU = range(len(PER_ENV_ROWS))


class RoundInfo(NamedTuple):
    """The round's outputs, one row per quantity."""

    per_env: NDArray  # (len(PER_ENV_ROWS), N), the rows named by PER_ENV_ROWS
    per_class: NDArray  # (2, N, C) RDP at alpha and noise multiplier per device class
    per_device: NDArray  # (4, N, M) noise multiplier, RDP, cumulative RDP, transmit power (eq. (14)) per device


@njit(inline="always", **JIT_NO_ALLOC)
def _play(i: int, actions: NDArray, settings: RoundSettings, mdl: ModelArrays, device_class: NDArray,
          state: EpisodeState, info: RoundInfo) -> None:
    """One round of env i (the whole of the core's ``step`` but the channel draw): its action's (x_t, c_t), eta_t,
    each class's RDP (eq. (9)) and noise multiplier, L_t, EqualAlloc's L_t on the same channel, the reward, the running
    sums, and the round's info (:class:`RoundInfo`)."""
    big_t, nu, out, out_class = settings.num_rounds, state.nu, info.per_env, info.per_class
    h = state.h_min2[i]
    x, cost = decide(actions[i], h, nu[i], nu[i] * big_t - state.cost_sum[i], big_t - state.t[i],
                     state.mean_h_min2[i], settings.action, mdl)
    eta = x * h
    leak = 0.0
    for c in range(mdl.counts.size):
        u = eta * mdl.u_per_eta[c]
        rdp = curve_log_a(u, mdl.log_w[c], mdl.tri) / (mdl.order - 1)
        out_class[0, i, c] = rdp
        out_class[1, i, c] = u ** -0.5  # u > 0: x > 0 and h_min^2 > 0
        leak += rdp * mdl.counts[c]
    # the exogenous baseline: EqualAlloc's leakage on this round's channel, which no action changes
    equal_alloc = _leakage(_x_for_cost(nu[i], h, mdl.cost_scale, mdl.x_max) * h, mdl)
    if settings.lagrangian:
        reward = -(leak - equal_alloc + settings.reward_lambda * (cost - nu[i])) / state.reward_scale[i]
    else:
        reward = -(leak - equal_alloc) / state.reward_scale[i]
    for c in range(mdl.counts.size):
        state.class_rdp_sum[i, c] += out_class[0, i, c]
    state.cost_sum[i] += cost
    state.leak_sum[i] += leak
    state.equal_alloc_sum[i] += equal_alloc
    state.t[i] += 1
    out[ROW_X, i], out[ROW_ETA, i], out[ROW_COST, i], out[ROW_LEAKAGE, i], out[ROW_REWARD, i] = (x, eta, cost, leak,
                                                                                                 reward)
    out[ROW_COST_MEAN, i], out[ROW_COST_SHARE, i], out[ROW_NU, i] = state.cost_sum[i] / state.t[i], cost / nu[i], nu[i]
    out_device = info.per_device
    for m in range(device_class.size):
        c = device_class[m]
        out_device[0, i, m] = out_class[1, i, c]
        out_device[1, i, m] = out_class[0, i, c]
        out_device[2, i, m] = state.class_rdp_sum[i, c]
        out_device[3, i, m] = eta / state.gains[i, m] * mdl.power_coeff[m]


#: :func:`_play` compiled to be called, not inlined (:func:`play_round_parallel` says why).
_play_called = njit(**JIT_NO_ALLOC)(_play.py_func)


@njit(**JIT_NO_ALLOC)
def play_round(actions: NDArray, settings: RoundSettings, mdl: ModelArrays, device_class: NDArray,
               state: EpisodeState, info: RoundInfo) -> int:
    """:func:`_play` for every env, one after another, if every action is valid: the number of envs whose episode
    ended (T rounds played), or -1 if an action is out of range (nothing played)."""
    if not valid_actions(settings.action.code, actions, mdl.x_max):
        return -1
    for i in range(actions.size):
        _play(i, actions, settings, mdl, device_class, state, info)
    return _ended(state.t, settings.num_rounds)


@njit(parallel=True, **JIT_NO_ALLOC)
def play_round_parallel(actions: NDArray, settings: RoundSettings, mdl: ModelArrays, device_class: NDArray,
                        state: EpisodeState, info: RoundInfo) -> int:
    """:func:`play_round` over all cores. numba's parallel loop takes no tuple of scalars from outside it, so the
    settings enter it as their scalars and are built again in it; and it loses the writes of an inlined function
    through a tuple of arrays, so each env's round is a call of :func:`_play_called`."""
    if not valid_actions(settings.action.code, actions, mdl.x_max):
        return -1
    big_t, lagrangian, reward_lambda = settings.num_rounds, settings.lagrangian, settings.reward_lambda
    code, x_min_ratio, multiplier_max, price_decades, buffer_sd, budget_floor = settings.action
    for i in prange(actions.size):
        action = ActionSettings(code, x_min_ratio, multiplier_max, price_decades, buffer_sd, budget_floor)
        _play_called(i, actions, RoundSettings(big_t, action, lagrangian, reward_lambda), mdl, device_class, state,
                     info)
    return _ended(state.t, big_t)


@njit(**JIT_NO_ALLOC)
def _ended(t: NDArray, big_t: float) -> int:
    """How many episodes have played their T rounds."""
    ended = 0
    for ti in t:
        ended += ti >= big_t
    return ended


@njit(**JIT_NO_ALLOC)
def channel(power: NDArray, mean_gain: NDArray, inv_k2: NDArray, gains: NDArray, h_min2: NDArray) -> None:
    """The gains |h_m|^2 = g_m E|h_m|^2 (N, M) of normalised fading powers ``power`` and h_min^2 (N,) of each env,
    written into ``gains`` and ``h_min2``."""
    for i in range(gains.shape[0]):
        for m in range(gains.shape[1]):
            gains[i, m] = power[i, m] * mean_gain[i, m]
        h_min2[i] = _h_min2(gains[i], inv_k2)
