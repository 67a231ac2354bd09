"""The batched core of ``scheme="receive_scaling"`` (model A: channel inversion + receive scaling, AdaScale paper
§IV-V).

:class:`Rounds` holds N episodes as numpy arrays and steps them with the pure functions of
:mod:`otagym.receive_scaling`, :mod:`otagym.channel` and :mod:`otagym.privacy`; the single and the vector environment
of :mod:`otagym.env` are thin shells around it (the single env is ``Rounds`` with N = 1, so the physics exists once).
A round is one compiled kernel over the envs (:func:`_play`: the action, eq. (9) per device class, the reward and the
info, from the model's compiled formulas), on one core or (:data:`otagym.jit.PARALLEL_FROM`) on all; the
observation is another (:func:`_observe`). The channel draws stay numpy's (the generator of the env's seed).
"""

from __future__ import annotations

import math
import os
from typing import Literal, Sequence, get_args

import numpy as np
from gymnasium import spaces
from numba import njit, prange
from numpy.typing import ArrayLike, NDArray

from otagym import jit, privacy
from otagym.channel import DISTANCE, ChannelModel, FadingState, mean_channel_gain
from otagym.fidelity import TRAINING_ARGS, Fidelity, TrainingRuns
from otagym.jit import JIT, JIT_NO_ALLOC
from otagym.privacy import DEFAULT_ORDERS, DP_ORDERS, RDPLedger, _curve_log_a
from otagym.receive_scaling import (BUDGET_ACTIONS, UNIT_ACTIONS, X_FLOOR_RATIO, ModelArrays, ReceiveScalingModel,
                                    Scenario, _budget_action_cost, _convergence_cost, _h_min2, _leakage, _normalized_x,
                                    _spend_cost, _x_for_cost)
from otagym.validation import (NUM_ENVS, PHYSICAL_RANGE, POSITIVE, AppliesWith, Many, OneOf, Real, Spec, action_array,
                               bound, check_args, option_array, refuse_entries, refuse_without_effect,
                               signature_defaults)

__all__ = ["Rounds", "ActionType", "RewardMode", "OBS_BOUND"]

ActionType = Literal["price", "share", "normalized", "x", "eta", "spend"]
RewardMode = Literal["budget", "cmdp", "lagrangian"]

DISTANCE_RANGE = (DISTANCE.low, DISTANCE.high)
#: Bounds of every observation entry (the observation space is ``Box(-OBS_BOUND, OBS_BOUND)``; values are clipped).
OBS_BOUND = 10.0


# --- the round, compiled: one kernel for every N (the single env is N = 1) -----------------------------------------

#: Codes of the action types in the kernel (:data:`ActionType`'s order).
_ACTION_CODES = {name: code for code, name in enumerate(get_args(ActionType))}


@njit(inline="always", **JIT_NO_ALLOC)
def _decide(code: int, a: float, h_min2: float, nu: float, remaining: float, rounds_left: float, mean_h_min2: float,
            x_min_ratio: float, multiplier_max: float, price_decades: float, buffer_sd: float,
            mdl: ModelArrays) -> tuple[float, float]:
    """``(x_t, c_t)`` of one env's checked action ``a`` (``code``: :data:`_ACTION_CODES`), see :meth:`Rounds.decide`."""
    if code == 5:  # spend
        cost = _spend_cost(a, nu)
        return _x_for_cost(cost, h_min2, mdl.cost_scale, mdl.x_max), cost
    if code <= 1:  # price, share
        cost = _budget_action_cost(code == 1, a, h_min2, remaining, rounds_left, mean_h_min2, multiplier_max,
                                   price_decades, buffer_sd, mdl)
        return _x_for_cost(cost, h_min2, mdl.cost_scale, mdl.x_max), cost
    if code == 2:  # normalized
        x = _normalized_x(a, mdl.x_max, x_min_ratio)
    elif code == 3:  # x
        x = min(a, mdl.x_max)
    else:  # eta: a huge or infinite eta is inf here, clipped to x_max
        x = min(max(a / h_min2, X_FLOOR_RATIO * mdl.x_max), mdl.x_max)
    return x, _convergence_cost(x, h_min2, mdl.cost_scale, mdl.x_max)


@njit(inline="always", **JIT_NO_ALLOC)
def _play(i: int, code: int, actions: NDArray, settings: NDArray, lagrangian: bool, mdl: ModelArrays,
          device_class: NDArray, t: NDArray, nu: NDArray, cost_sum: NDArray, leak_sum: NDArray,
          equal_alloc_sum: NDArray, class_rdp_sum: NDArray, h_min2: NDArray, gains: NDArray, mean_h_min2: NDArray,
          reward_scale: NDArray, out: NDArray, out_class: NDArray, out_device: NDArray) -> None:
    """One round of env i (the whole of :meth:`Rounds.step` but the channel draw): its action's (x_t, c_t), eta_t,
    each class's RDP (eq. (9)) and noise multiplier, L_t, EqualAlloc's L_t on the same channel, the reward, the running
    sums, and the round's info: ``out`` (8, N) x, eta, c_t, L_t, reward, mean c, c_t / nu, nu; ``out_class`` (2, N, C)
    RDP and noise multiplier per class; ``out_device`` (4, N, M) noise multiplier, RDP, cumulative RDP and transmit
    power (eq. (14)) per device. ``settings``: T, x_min_ratio, budget_multiplier_max, price_decades, price_buffer_sd,
    reward_lambda."""
    big_t = settings[0]
    h = h_min2[i]
    x, cost = _decide(code, actions[i], h, nu[i], nu[i] * big_t - cost_sum[i], big_t - t[i], mean_h_min2[i],
                      settings[1], settings[2], settings[3], settings[4], mdl)
    eta = x * h
    leak = 0.0
    for c in range(mdl.counts.size):
        u = eta * mdl.u_per_eta[c]
        rdp = _curve_log_a(u, mdl.log_w[c], mdl.tri) / (mdl.order - 1)
        out_class[0, i, c] = rdp
        out_class[1, i, c] = u ** -0.5  # u > 0: x > 0 and h_min^2 > 0
        leak += rdp * mdl.counts[c]
    # the exogenous baseline: EqualAlloc's leakage on this round's channel, which no action changes
    equal_alloc = _leakage(_x_for_cost(nu[i], h, mdl.cost_scale, mdl.x_max) * h, mdl)
    if lagrangian:
        reward = -(leak - equal_alloc + settings[5] * (cost - nu[i])) / reward_scale[i]
    else:
        reward = -(leak - equal_alloc) / reward_scale[i]
    for c in range(mdl.counts.size):
        class_rdp_sum[i, c] += out_class[0, i, c]
    cost_sum[i] += cost
    leak_sum[i] += leak
    equal_alloc_sum[i] += equal_alloc
    t[i] += 1
    out[0, i], out[1, i], out[2, i], out[3, i], out[4, i] = x, eta, cost, leak, reward
    out[5, i], out[6, i], out[7, i] = cost_sum[i] / t[i], cost / nu[i], nu[i]
    for m in range(device_class.size):
        c = device_class[m]
        out_device[0, i, m] = out_class[1, i, c]
        out_device[1, i, m] = out_class[0, i, c]
        out_device[2, i, m] = class_rdp_sum[i, c]
        out_device[3, i, m] = eta / gains[i, m] * mdl.power_coeff[m]


@njit(**JIT_NO_ALLOC)
def _valid_actions(code: int, actions: NDArray, x_max: float) -> bool:
    """Whether every action lies in its type's range (:meth:`Rounds._checked_action` names the ones that do not)."""
    for a in actions:
        if code <= 2 or code == 5:
            ok = abs(a) <= 1.0
        elif code == 3:
            ok = X_FLOOR_RATIO * x_max <= a <= x_max * (1 + 1e-9)
        else:
            ok = a >= 0.0
        if not ok:  # NaN too
            return False
    return True


@njit(**JIT_NO_ALLOC)
def _play_serial(code, actions, settings, lagrangian, mdl, device_class, t, nu, cost_sum, leak_sum, equal_alloc_sum,
                 class_rdp_sum, h_min2, gains, mean_h_min2, reward_scale, out, out_class, out_device):
    """:func:`_play` for every env, one after another, if every action is valid: the number of envs whose episode
    ended (T rounds played), or -1 if an action is out of range (nothing played)."""
    if not _valid_actions(code, actions, mdl.x_max):
        return -1
    for i in range(actions.size):
        _play(i, code, actions, settings, lagrangian, mdl, device_class, t, nu, cost_sum, leak_sum, equal_alloc_sum,
              class_rdp_sum, h_min2, gains, mean_h_min2, reward_scale, out, out_class, out_device)
    return _ended(t, settings[0])


@njit(parallel=True, **JIT_NO_ALLOC)
def _play_parallel(code, actions, settings, lagrangian, mdl, device_class, t, nu, cost_sum, leak_sum, equal_alloc_sum,
                   class_rdp_sum, h_min2, gains, mean_h_min2, reward_scale, out, out_class, out_device):
    """:func:`_play_serial` over all cores."""
    if not _valid_actions(code, actions, mdl.x_max):
        return -1
    for i in prange(actions.size):
        _play(i, code, actions, settings, lagrangian, mdl, device_class, t, nu, cost_sum, leak_sum, equal_alloc_sum,
              class_rdp_sum, h_min2, gains, mean_h_min2, reward_scale, out, out_class, out_device)
    return _ended(t, settings[0])


@njit(**JIT_NO_ALLOC)
def _ended(t: NDArray, big_t: float) -> int:
    """How many episodes have played their T rounds."""
    ended = 0
    for ti in t:
        ended += ti >= big_t
    return ended


@njit(**JIT)
def _channel(power: NDArray, mean_gain: NDArray, inv_k2: NDArray) -> tuple[NDArray, NDArray]:
    """The gains |h_m|^2 = g_m E|h_m|^2 (N, M) of normalised fading powers ``power`` and h_min^2 (N,) of each env."""
    gains = np.empty(mean_gain.shape)
    h_min2 = np.empty(mean_gain.shape[0])
    for i in range(gains.shape[0]):
        for m in range(gains.shape[1]):
            gains[i, m] = power[i, m] * mean_gain[i, m]
        h_min2[i] = _h_min2(gains[i], inv_k2)
    return gains, h_min2


@njit(**JIT_NO_ALLOC)
def _decide_all(code, actions, settings, mdl, t, nu, cost_sum, h_min2, mean_h_min2, x, cost):
    """:func:`_decide` for every env, into ``x`` and ``cost``."""
    for i in range(actions.size):
        x[i], cost[i] = _decide(code, actions[i], h_min2[i], nu[i], nu[i] * settings[0] - cost_sum[i],
                                settings[0] - t[i], mean_h_min2[i], settings[1], settings[2], settings[3], settings[4],
                                mdl)


@njit(**JIT_NO_ALLOC)
def _observe(gains: NDArray, mean_gain: NDArray, placement: NDArray, h_min2: NDArray, mean_h_min2: NDArray,
             t: NDArray, big_t: int, nu: NDArray, cost_sum: NDArray, class_rdp_sum: NDArray, device_class: NDArray,
             class_device: NDArray, log10_nu_ref: float, block_rounds: int, out: NDArray) -> NDArray:
    """The observations (N, 3M + 6) of :meth:`Rounds.observation` into ``out`` (float32): each entry computed in float64
    and clipped to [-10, 10] (no float32 overflow), then rounded to float32."""
    m = mean_gain.shape[1]
    rdp_at = 2 * m + 5
    for i in range(out.shape[0]):
        budget = nu[i] * big_t
        left = budget - cost_sum[i]
        for c in range(class_device.size):  # each class's entry once, at its first device; then copied
            out[i, rdp_at + class_device[c]] = _clip_obs(math.log1p(class_rdp_sum[i, c]))
        for j in range(m):
            out[i, j] = _clip_obs(math.log10(gains[i, j] / mean_gain[i, j]))
            out[i, m + j] = _clip_obs(placement[i, j])
            out[i, rdp_at + j] = out[i, rdp_at + class_device[device_class[j]]]
        out[i, 2 * m] = _clip_obs(math.log10(h_min2[i] / mean_h_min2[i]))
        out[i, 2 * m + 1] = _clip_obs(t[i] / big_t)
        out[i, 2 * m + 2] = _clip_obs(left / budget)
        out[i, 2 * m + 3] = _clip_obs(math.log1p(max(left, 0.0) / (max(big_t - t[i], 1) * nu[i])))
        out[i, 2 * m + 4] = _clip_obs(math.log10(nu[i]) - log10_nu_ref)
        out[i, 3 * m + 5] = _clip_obs((block_rounds - t[i] % block_rounds) / block_rounds)
    return out


@njit(**JIT_NO_ALLOC)
def _clip_obs(value: float) -> float:
    """An observation entry clipped to [-OBS_BOUND, OBS_BOUND] (NaN stays NaN, as numpy.clip)."""
    return value if math.isnan(value) else min(max(value, -OBS_BOUND), OBS_BOUND)


class Rounds:
    """N independent model-A episodes as arrays; ``step`` advances all of them by one round.

    Args:
        scenario: the deployment.
        num_envs: N.
        reward_mode: the formulation of problem (28) (see :class:`~otagym.env.OTAPrivacyEnv`): ``"budget"`` (the
            action spends the convergence budget, so (28b) holds by construction), ``"cmdp"`` (reward -L_t, constraint
            cost in ``info["cost"]``) or ``"lagrangian"`` (reward -(L_t + lambda (c_t - nu)), ``reward_lambda``
            required).
            Default: ``"budget"``, or ``"cmdp"`` when ``action_type`` names an x action.
        action_type: budget mode takes ``"price"`` (default: a in [-1, 1] sets the round's price of convergence
            cost, mu_t = mu_ref 10^(``price_decades`` a), and the round spends the cost that minimises L_t + mu_t c_t)
            or ``"share"`` (a spends m(a) = ``budget_multiplier_max`` ** a times the fair share of the budget left;
            a = 0 is EqualAlloc); the other modes take ``"normalized"`` (default: a in [-1, 1] -> x on a log scale,
            see :meth:`decide`), ``"spend"`` (a in [-1, 1] spends c_t = nu (10^(1 + a) - 1) / 9 this round,
            uncapped: the constrained task's action, whose cost c_t / nu lies in [0, 11]; a = 0 is EqualAlloc),
            ``"x"`` (x_t in [1e-12 x_max, x_max]) or ``"eta"`` (eta_t in [0, inf], clipped to [1e-12, 1]
            x_max h_min,t^2: above, the power limit binds).
        x_min_ratio: floor of the normalised mapping, x(a=-1) = x_min_ratio * x_max, in (0, 1).
        reward_lambda: lambda of ``reward_mode="lagrangian"``, in leakage (nats) per unit of convergence cost: the
            dual price mu of (28) at the nu it targets (``baselines.OfflineOptimal`` computes it). No default: no fixed
            lambda stands for a budget nu (the dual price at nu = 0.04 ranges 0.05-0.40 over channel realisations).
        budget_multiplier_max: the largest multiple of the fair share one share action spends (> 1); the smallest is
            its inverse.
        price_decades: a price action spans mu_ref 10^[-decades, decades] (> 0).
        price_buffer_sd: the safety stock of the price action's reference, in standard deviations of the remaining
            rounds' spend (>= 0; see :func:`~otagym.receive_scaling.reference_price`).
        nu_range: ``(low, high)`` draws nu log-uniformly per episode (for one policy serving every nu; nu is observed);
            ``None`` keeps the scenario's nu. ``reset(options={"nu": ...})`` sets it for one episode either way.
        dp_orders: RDP orders of the end-of-episode (eps, delta) report; ``None`` turns the all-order ledger off
            (the per-round and cumulative RDP at alpha are always reported).
        fidelity: ``"analytic"`` (the surrogate only) or ``"train"``: every step also trains a real model by FedSGD
            over the air with the round's eta_t (:mod:`otagym.training`; the scenario's d and n_m follow the model and
            the data), and info adds :data:`otagym.fidelity.TRAIN_KEYS`.
        dataset: the data under ``fidelity="train"``: ``"digits"`` (scikit-learn's 8x8 digits, embedded, with
            ``DigitsCNN``), ``"mnist"`` (the paper's ``MnistCNN``) or ``"cifar10"`` (``CifarResNet``), the last two
            read from their standard files in ``data_dir``.
        data_dir: the folder of the MNIST or CIFAR-10 files (nothing is downloaded).
        data_split: how the devices' data is split under ``fidelity="train"``: ``"iid"`` or ``"classes"`` (2
            classes per device).
        data_seed: the seed of the split.
        eval_every: rounds between evaluations (test loss and accuracy, ||grad f||^2) under ``fidelity="train"``.
        momentum: of the model update (12) under ``fidelity="train"``.
        weight_decay: of the model update (12) under ``fidelity="train"``.

    The training arguments (``dataset`` ... ``weight_decay``) apply only under ``fidelity="train"``
    (:attr:`APPLIES_WITH`): with ``"analytic"`` they must keep their defaults (else ``ValueError``: no effect).
    """

    #: The env arguments (beside the scenario's fields) and their specs, checked at construction.
    ARGS: dict[str, Spec] = {
        "reward_mode": OneOf(get_args(RewardMode), optional=True),
        "action_type": OneOf(get_args(ActionType), optional=True),
        "x_min_ratio": Real(X_FLOOR_RATIO, 1.0, high_open=True),
        "reward_lambda": Real(0.0, PHYSICAL_RANGE[1], optional=True),
        "budget_multiplier_max": Real(1.0, PHYSICAL_RANGE[1], low_open=True),
        "price_decades": Real(0.0, 30.0, low_open=True),
        "price_buffer_sd": Real(0.0, 100.0),
        "nu_range": Many(POSITIVE, length=2, optional=True),
        "dp_orders": DP_ORDERS,
        **TRAINING_ARGS,
        "momentum": Real(0.0, 1.0, high_open=True),
        "weight_decay": Real(0.0, 1.0),
    }
    #: The env arguments that have an effect only under another's value (elsewhere they must keep their defaults).
    APPLIES_WITH: dict[str, AppliesWith] = AppliesWith("fidelity", ("train",)).for_each(
        (*(k for k in TRAINING_ARGS if k != "fidelity"), "momentum", "weight_decay"))
    #: Batch axis of each ``reset`` option (a single env inserts it; :meth:`option_shapes` has the shapes).
    OPTION_AXES = {"distances_m": 0, "channel_gains": 1, "nu": 0}
    EPISODE_END_KEYS = ("dp_epsilon", "dp_order", "leakage_total", "equal_alloc_leakage")

    def __init__(
        self,
        scenario: Scenario,
        num_envs: int,
        *,
        reward_mode: RewardMode | None = None,
        action_type: ActionType | None = None,
        x_min_ratio: float = 1e-3,
        reward_lambda: float | None = None,
        budget_multiplier_max: float = 100.0,
        price_decades: float = 2.0,
        price_buffer_sd: float = 1.0,
        nu_range: tuple[float, float] | None = None,
        dp_orders: Sequence[float] | None = DEFAULT_ORDERS,
        fidelity: Fidelity = "analytic",
        dataset: str = "digits",
        data_dir: str | os.PathLike | None = None,
        data_split: str = "iid",
        data_seed: int = 0,
        eval_every: int = 10,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
    ) -> None:
        args = check_args(self.ARGS, reward_mode=reward_mode, action_type=action_type, x_min_ratio=x_min_ratio,
                          reward_lambda=reward_lambda, budget_multiplier_max=budget_multiplier_max,
                          price_decades=price_decades, price_buffer_sd=price_buffer_sd, nu_range=nu_range,
                          dp_orders=dp_orders, fidelity=fidelity, dataset=dataset, data_dir=data_dir,
                          data_split=data_split, data_seed=data_seed, eval_every=eval_every, momentum=momentum,
                          weight_decay=weight_decay)
        refuse_without_effect(args, signature_defaults(Rounds.__init__), self.APPLIES_WITH)
        reward_mode, action_type, reward_lambda = args["reward_mode"], args["action_type"], args["reward_lambda"]
        if reward_mode is None:
            reward_mode = "budget" if action_type is None or action_type in BUDGET_ACTIONS else "cmdp"
        if action_type is None:
            action_type = "price" if reward_mode == "budget" else "normalized"
        if (action_type in BUDGET_ACTIONS) != (reward_mode == "budget"):
            raise ValueError(f"action_type 'price' and 'share' go with reward_mode='budget' and only with it; got "
                             f"action_type={action_type!r}, reward_mode={reward_mode!r}")
        if reward_mode == "lagrangian" and reward_lambda is None:
            raise ValueError("reward_lambda (finite, >= 0: the dual price of (28) at the nu you target) is required "
                             "with reward_mode='lagrangian'; got None. reward_mode='budget' needs no lambda.")
        if reward_mode != "lagrangian" and reward_lambda is not None:
            raise ValueError(f"reward_lambda is only used with reward_mode='lagrangian'; got reward_mode={reward_mode!r}")
        nu_range = args["nu_range"]
        if nu_range is not None and nu_range[0] > nu_range[1]:
            raise ValueError(f"nu_range must be (low, high) with low <= high; got {nu_range}")
        dp_orders = args["dp_orders"]
        num_envs = NUM_ENVS("num_envs", num_envs)
        self.fidelity = args["fidelity"]
        self._train_args = {"momentum": args["momentum"], "weight_decay": args["weight_decay"]}
        self.training = TrainingRuns.create(args, scenario.num_devices, num_envs, scenario.num_rounds)
        if self.training is not None:  # the scenario's d and n_m follow the model and the data that are trained
            fed = self.training.federation
            scenario = scenario.replace(model_dim=fed.model_dim, dataset_size=fed.dataset_sizes)
        self.scenario = scenario
        self.num_rounds = scenario.num_rounds
        self.model = ReceiveScalingModel(scenario)
        self.channel = ChannelModel.from_scenario(scenario)
        self.num_envs = n = num_envs
        self.action_type = action_type
        self.x_min_ratio = args["x_min_ratio"]
        self.reward_mode = reward_mode
        self.reward_lambda = reward_lambda
        self.budget_multiplier_max = args["budget_multiplier_max"]
        self.price_decades = args["price_decades"]
        self.price_buffer_sd = args["price_buffer_sd"]
        self.nu_range = nu_range
        grid = scenario.nu_grid if nu_range is None else nu_range
        #: Centre of the observed log10 nu: the geometric middle of the scenario's nu grid (or of ``nu_range``).
        self.log10_nu_ref = 0.5 * float(np.log10(min(grid)) + np.log10(max(grid)))
        m, c = scenario.num_devices, self.model.class_q.size
        self.obs_dim = 3 * m + 6
        #: Rounds per fading block (block fading's coherence; 1 otherwise): the last observation entry's period.
        self.block_rounds = scenario.coherence_rounds if scenario.fading == "block" else 1
        self.t = np.zeros(n, dtype=np.int64)
        self.nu = np.full(n, scenario.nu)
        self.cost_sum = np.zeros(n)
        self.class_rdp_sum = np.zeros((n, c))
        self.leak_sum = np.zeros(n)
        self.equal_alloc_sum = np.zeros(n)
        self.ledger = (
            RDPLedger(np.broadcast_to(self.model.class_q, (n, c)), orders=dp_orders) if dp_orders is not None else None
        )
        self.distances_m = np.zeros((n, m))
        self.mean_gain = np.zeros((n, m))
        self.mean_h_min2 = np.ones(n)
        self.reward_scale = np.ones(n)
        self.fading: FadingState | None = None
        self.gains = np.zeros((n, m))
        self.h_min2 = np.zeros(n)
        self.trace: NDArray | None = None
        self._snr_scale = self.model.inv_k2 * self.model.x_max / self.model.cost_scale  # s_m = |h_m|^2 * this
        self._log10_placement = np.zeros((n, m))
        #: The kernel's settings: T, x_min_ratio, budget_multiplier_max, price_decades, price_buffer_sd, reward_lambda.
        self._settings = np.array([self.num_rounds, self.x_min_ratio, self.budget_multiplier_max, self.price_decades,
                                   self.price_buffer_sd, reward_lambda or 0.0], dtype=float)
        #: The round's kernel and its compiled code for the types of :meth:`_round_args` (set at the first step).
        self._round_kernel: tuple[object, object] = (None, None)

    # --- episode boundaries ----------------------------------------------------------------------------------
    def reset(
        self,
        rng: np.random.Generator,
        mask: NDArray | None = None,
        *,
        distances_m: NDArray | None = None,
        channel_gains: NDArray | None = None,
        nu: ArrayLike | None = None,
    ) -> None:
        """Start new episodes where ``mask`` is True (all if None).

        ``distances_m`` (N, M) fixes the placement; ``channel_gains`` (T, N, M) replays a channel trace |h|^2 for this
        episode instead of sampling (a full reset only; a later autoreset replays it again with the same placement
        and nu, so ``mean_channel_gain`` keeps matching the gains); ``nu`` (N,) or a scalar sets this episode's
        budget (else the scenario's, or a log-uniform draw from ``nu_range``).
        """
        n, big_t = self.num_envs, self.scenario.num_rounds
        rows = np.ones(n, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        shapes = self.option_shapes()
        if channel_gains is not None:
            if mask is not None:
                raise ValueError("channel_gains can only be replayed on a full reset")
            self.trace = option_array("channel_gains", channel_gains, shapes["channel_gains"], PHYSICAL_RANGE)
        elif mask is None:
            self.trace = None
        replay = mask is not None and self.trace is not None  # an autoreset replays the trace with its placement, nu
        if nu is not None:
            nu = np.broadcast_to(option_array("nu", nu, shapes["nu"], PHYSICAL_RANGE), (n,))
        elif self.nu_range is not None and not replay:
            lo, hi = np.log(self.nu_range)
            nu = np.exp(rng.uniform(lo, hi, size=n))
        if nu is not None:
            self.nu = np.where(rows, nu, self.nu)
        if distances_m is not None:
            dist = option_array("distances_m", distances_m, shapes["distances_m"], DISTANCE_RANGE)
        else:
            dist = self.distances_m if replay else self.channel.draw_distances(rng, (n,))
        fresh = self.channel.initial(rng, (n,))
        if self.fading is None or mask is None:
            self.fading = fresh
            self.distances_m = dist
        else:
            self.fading = self.fading.where(rows, fresh)
            self.distances_m = np.where(rows[:, None], dist, self.distances_m)
        mean_gain = mean_channel_gain(self.distances_m)  # device-major, as drawn: its sums over devices are numpy's
        self.mean_h_min2 = self.model.expected_h_min2(mean_gain)
        self.mean_gain = np.ascontiguousarray(mean_gain)  # the kernels take C-ordered arrays
        self._log10_placement = np.log10(self.mean_gain * self._snr_scale * self.nu[:, None])  # log10(nu E[s_m])
        self.reward_scale[rows] = big_t * self.model.stationary_headroom(self.nu[rows], self.mean_h_min2[rows])
        self.t[rows] = 0
        self.cost_sum[rows] = 0.0
        self.leak_sum[rows] = 0.0
        self.equal_alloc_sum[rows] = 0.0
        self.class_rdp_sum[rows] = 0.0
        if self.ledger is not None:
            self.ledger.reset(None if mask is None else rows)
        self._set_gains()
        if self.training is not None:  # a fresh model per new episode (FedSGD of §IV-A)
            s = self.scenario
            self.training.reset(rng, rows, lambda fed, child: fed.engine(
                child, s.batch_sizes, s.clip_norm, s.learning_rate, **self._train_args))

    def _set_gains(self) -> None:
        """The channel of the round about to be played: new arrays (the last step's info keeps the old ones)."""
        if self.trace is not None:
            self.gains = self.trace[np.minimum(self.t, self.scenario.num_rounds - 1), np.arange(self.num_envs)]
            self.h_min2 = self.model.h_min2(self.gains)
        else:
            self.gains, self.h_min2 = _channel(self.fading.power, self.mean_gain, self.model.inv_k2)

    # --- actions ---------------------------------------------------------------------------------------------
    def decide(self, action: ArrayLike) -> tuple[NDArray, NDArray]:
        """``(x_t, c_t)`` for each env from the action, validated.

        * price, share: c_t = :func:`~otagym.receive_scaling.budget_action_cost` (capped at the budget left R_t; the
          last round spends R_t), x_t = the x with c_t(x) = c_t in closed form.
        * normalized: x = x_max * x_min_ratio ** ((1 - a) / 2), a in [-1, 1] (log scale; a = 1 is full power).
        * spend: c_t = :func:`~otagym.receive_scaling.spend_cost` = nu (10^(1 + a) - 1) / 9, a in [-1, 1] (a = 0 is
          EqualAlloc), x_t = the x with c_t(x) = c_t.
        * x: x in [1e-12 x_max, x_max]. * eta: x = eta / h_min,t^2 clipped to [1e-12 x_max, x_max].
        x must be >= 1e-12 x_max (the floor of the analytic policies' search; below it the convergence cost
        overflows). An x above x_max by less than 1e-9 relative (rounding in a policy) is clipped to x_max. An eta is
        clipped to [1e-12 x_max h_min,t^2, x_max h_min,t^2] (above, the power limit binds: every device transmits
        at P_max), so every action of the closed ``Box(0, inf)`` space is valid, +inf included (NaN is not);
        ``info["receive_scaling"]`` is the eta played. The round's kernel decides with the same compiled function.
        """
        a = self._checked_action(action)
        x, cost = np.empty(self.num_envs), np.empty(self.num_envs)
        _decide_all(_ACTION_CODES[self.action_type], a, self._settings, self.model.arrays, self.t, self.nu,
                    self.cost_sum, self.h_min2, self.mean_h_min2, x, cost)
        return x, cost

    def _checked_action(self, action: ArrayLike) -> NDArray:
        """The actions as a float vector (N,), each in its action type's range (else ValueError)."""
        a = action_array(action, self.num_envs)
        x_max = self.model.x_max
        if self.action_type in UNIT_ACTIONS:
            refuse_entries(f"action ({self.action_type})", "lie in [-1, 1]", a, ~(np.abs(a) <= 1.0))
        elif self.action_type == "x":
            x_floor = X_FLOOR_RATIO * x_max
            refuse_entries("action (x)", f"lie in [{bound(x_floor)}, x_max={bound(x_max)}] (1e-12 x_max to x_max)", a,
                           ~((a >= x_floor) & (a <= x_max * (1 + 1e-9))))
        else:
            refuse_entries("action (eta)", "lie in [0, inf] (an eta above x_max h_min,t^2, +inf included, is played "
                           "at the power limit)", a, ~(a >= 0))  # NaN too
        return a

    # --- the round -------------------------------------------------------------------------------------------
    def step(self, rng: np.random.Generator, action: ArrayLike) -> tuple[NDArray, NDArray, dict[str, NDArray]]:
        """One FL round in every env. Returns ``(reward (N,), terminated (N,), info arrays)``; the caller builds obs.

        The info arrays describe the round just played; episode-end entries (:attr:`EPISODE_END_KEYS`) are present
        when any env terminated (valid where ``terminated``).
        """
        s, n = self.scenario, self.num_envs
        a = action_array(action, n)
        out, out_class = np.empty((8, n)), np.empty((2, n, self.model.class_q.size))
        out_device = np.empty((4, n, s.num_devices))
        args = self._round_args(a, out, out_class, out_device)
        kernel = _play_parallel if jit.parallel(n) else _play_serial
        if self._round_kernel[0] is not kernel:
            self._round_kernel = kernel, jit.specialised(kernel, args)
        ended = self._round_kernel[1](*args)
        if ended < 0:
            self._checked_action(a)  # raises, naming the actions out of range
        x, eta, cost, leak, reward, cost_mean, cost_share, nu = out
        if self.ledger is not None:
            self.ledger.record(out_class[1])
        if self.training is not None:  # the round's FedSGD update with its eta_t
            noise = s.noise_power_w
            self.training.round(self.t, lambda i, engine, g: engine.round(g, float(eta[i]), noise).train_loss)
        info: dict[str, NDArray] = {
            "round": self.t - 1,
            "x": x,
            "receive_scaling": eta,
            "h_min2": self.h_min2,
            "channel_gain": self.gains,
            "noise_multiplier": out_device[0],
            "rdp_round": out_device[1],
            "rdp_cumulative": out_device[2],
            "leakage": leak,
            "convergence_cost": cost,
            "convergence_cost_mean": cost_mean,
            "cost": cost_share,
            "nu": nu,
            "transmit_power_w": out_device[3],
        }
        if self.training is not None:
            info.update(self.training.info())
        terminated = self.t >= s.num_rounds
        if ended:
            info["leakage_total"] = self.leak_sum.copy()
            info["equal_alloc_leakage"] = self.equal_alloc_sum.copy()
            if self.ledger is not None:
                eps, order = self.ledger.epsilon(s.delta)
                dc = self.model.device_class
                info["dp_epsilon"] = eps[:, dc]
                info["dp_order"] = order[:, dc]
        if self.trace is None:
            self.fading = self.channel.advance(rng, self.fading, self.t)
        self._set_gains()
        return reward, terminated, info

    def __getstate__(self) -> dict:
        """The state to pickle: the compiled round is not picklable, and is found again at the next step."""
        return {**self.__dict__, "_round_kernel": (None, None)}

    def _round_args(self, actions: NDArray, out: NDArray, out_class: NDArray, out_device: NDArray) -> tuple:
        """The arguments of the round's kernel (:func:`_play`): of the same numba types at every step (float64
        C-contiguous arrays made here, by :func:`action_array` and by the channel), as
        :func:`otagym.jit.specialised` requires."""
        return (_ACTION_CODES[self.action_type], actions, self._settings, self.reward_mode == "lagrangian",
                self.model.arrays, self.model.device_class, self.t, self.nu, self.cost_sum, self.leak_sum,
                self.equal_alloc_sum, self.class_rdp_sum, self.h_min2, self.gains, self.mean_h_min2, self.reward_scale,
                out, out_class, out_device)

    def observation_space(self) -> spaces.Box:
        return spaces.Box(-OBS_BOUND, OBS_BOUND, shape=(self.obs_dim,), dtype=np.float32)

    def option_shapes(self) -> dict[str, tuple[tuple[int, ...], ...]]:
        """The shapes each ``reset`` option takes (N envs, M devices, T rounds): ``distances_m`` (N, M),
        ``channel_gains`` (T, N, M), ``nu`` () or (N,). The single env takes them less the batch axis
        (:attr:`OPTION_AXES`)."""
        n, m, big_t = self.num_envs, self.scenario.num_devices, self.scenario.num_rounds
        return {"distances_m": ((n, m),), "channel_gains": ((big_t, n, m),), "nu": ((), (n,))}

    def action_space(self) -> spaces.Box:
        if self.action_type in UNIT_ACTIONS:
            return spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        if self.action_type == "x":
            return spaces.Box(X_FLOOR_RATIO * self.model.x_max, self.model.x_max, shape=(1,), dtype=np.float64)
        return spaces.Box(0.0, np.inf, shape=(1,), dtype=np.float64)

    def observation(self) -> NDArray:
        """Observations (N, 3M + 6), float32, each entry clipped to [-10, 10]: see :class:`otagym.env.OTAPrivacyEnv`.
        """
        out = np.empty((self.num_envs, self.obs_dim), dtype=np.float32)
        return _observe(self.gains, self.mean_gain, self._log10_placement, self.h_min2, self.mean_h_min2, self.t,
                        self.num_rounds, self.nu, self.cost_sum, self.class_rdp_sum, self.model.device_class,
                        self.model.class_device, self.log10_nu_ref, self.block_rounds, out)

    def reset_info(self) -> dict[str, NDArray]:
        """Constants of the new episodes that policies may use (nu, placement, mean gains) and the first channel;
        under the training fidelity, the initial model's metrics; and :meth:`blank_round_info`. Its keys are those of
        every ``step``'s info (less :attr:`EPISODE_END_KEYS`)."""
        return {**self.blank_round_info(), "nu": self.nu.copy(), **self.next_channel_info(),
                **(self.training.info() if self.training is not None else {})}

    def blank_round_info(self) -> dict[str, NDArray]:
        """``step``'s entries about the round just played, before the first round: ``round`` -1 and 0 elsewhere
        (nothing played, sent or leaked yet). ``reset``'s info has them so that it has the keys of ``step``'s:
        Gymnasium's autoreset returns a reset info as a step's, and TorchRL reads one key set for both."""
        n, m = self.num_envs, self.scenario.num_devices
        return {"round": self.t - 1,
                **{k: np.zeros(n) for k in ("x", "receive_scaling", "h_min2", "leakage", "convergence_cost",
                                            "convergence_cost_mean", "cost")},
                **{k: np.zeros((n, m)) for k in ("channel_gain", "noise_multiplier", "rdp_round", "rdp_cumulative",
                                                 "transmit_power_w")}}

    def next_channel_info(self) -> dict[str, NDArray]:
        """The channel of the round the next action applies to, in float64 (the observation has it log-scaled), and
        the placement it comes from. Every ``reset`` info key is also a ``step`` info key (TorchRL relies on it)."""
        return {"next_channel_gain": self.gains.copy(), "next_h_min2": self.h_min2.copy(),
                "mean_channel_gain": self.mean_gain.copy(), "distances_m": self.distances_m.copy()}

