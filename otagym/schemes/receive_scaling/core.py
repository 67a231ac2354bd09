"""Receive scaling -- the batched core of ``scheme="receive_scaling"`` (model A: channel inversion + receive scaling,
AdaScale paper §IV-V).

:class:`ReceiveScalingCore` holds N episodes as numpy arrays and steps them with the pure functions of its scheme's
modules (:mod:`~otagym.schemes.receive_scaling.model`, :mod:`~otagym.schemes.receive_scaling.actions`),
:mod:`otagym.channel` and :mod:`otagym.accounting`; the single and the vector environment of :mod:`otagym.env` are thin
shells around it (the single env is the core with N = 1, so the physics exists once). A round is one compiled kernel
over the envs (:mod:`~otagym.schemes.receive_scaling.kernel`); the observation is another
(:mod:`~otagym.schemes.receive_scaling.observation`). The channel draws stay numpy's (the generator of the env's seed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from gymnasium import spaces
from numpy.typing import ArrayLike, NDArray

from otagym import jit
from otagym.channel import DISTANCE, ChannelModel, FadingState, mean_channel_gain
from otagym.fidelity import TRAIN_ONLY, TrainingOptions, TrainingRuns
from otagym.accounting import ACCOUNTANTS, DEFAULT_ORDERS, DP_ORDERS, EpisodeEpsilon
from otagym.schemes.receive_scaling.actions import (ACTION_ARGS, ACTION_CODES, ACTION_DEFAULTS, ActionSettings,
                                                    ActionType, RewardMode, action_space, budget_action_cost,
                                                    check_actions, decode_actions, resolve_modes)
from otagym.schemes.receive_scaling.kernel import (PER_ENV_ROWS, ROW_ETA, ROW_REWARD, EpisodeState, RoundInfo,
                                                   RoundSettings, channel, play_round, play_round_parallel)
from otagym.schemes.receive_scaling.model import ReceiveScalingModel
from otagym.schemes.receive_scaling.observation import (OBS_BOUND, ObservationConstants, ObservationOffsets,
                                                        block_rounds, log10_nu_ref, observe)
from otagym.schemes.receive_scaling.scenario import Scenario
from otagym.schemes.episodes import restart_rows
from otagym.validation import (AppliesWith, Many, NUM_ENVS, OneOf, PHYSICAL_RANGE, POSITIVE, Real, Spec, action_array,
                               arg, check_dataclass, field_conditions, field_specs, option_array, options_of,
                               replayed_trace)

__all__ = ["ReceiveScalingOptions", "ReceiveScalingCore", "sample_realisation"]

DISTANCE_RANGE = (DISTANCE.low, DISTANCE.high)


@dataclass(frozen=True, kw_only=True)
class ReceiveScalingOptions(TrainingOptions):
    """The env arguments of receive scaling beside the scenario's fields (``gym.make``'s flat keyword arguments),
    checked and resolved once, at construction: each against its spec (:data:`ReceiveScalingCore.ARGS`), the
    training ones against ``fidelity`` (:data:`ReceiveScalingCore.APPLIES_WITH`), the formulation's modes resolved
    (:func:`~otagym.schemes.receive_scaling.actions.resolve_modes`) and their combinations checked.

    Attributes:
        reward_mode: the formulation of problem (28) (see :class:`~otagym.env.OTAPrivacyEnv`): ``"budget"`` (the
            action spends the convergence budget, so (28b) holds by construction), ``"cmdp"`` (reward -L_t, constraint
            cost in ``info["cost"]``) or ``"lagrangian"`` (reward -(L_t + lambda (c_t - nu)), ``reward_lambda``
            required).
            Default: ``"budget"``, or ``"cmdp"`` when ``action_type`` names an x action.
        action_type: budget mode takes ``"price"`` (default: a in [-1, 1] sets the round's price of convergence
            cost, mu_t = mu_ref 10^(``price_decades`` a), and the round spends the cost that minimises L_t + mu_t c_t)
            or ``"share"`` (a spends m(a) = ``budget_multiplier_max`` ** a times the fair share of the budget left;
            a = 0 is EqualAlloc); the other modes take ``"normalized"`` (default: a in [-1, 1] -> x on a log scale,
            see :meth:`ReceiveScalingCore.decide`), ``"spend"`` (a in [-1, 1] spends c_t = nu (10^(1 + a) - 1) / 9
            this round, uncapped: the constrained task's action, whose cost c_t / nu lies in [0, 11]; a = 0 is
            EqualAlloc), ``"x"`` (x_t in [1e-12 x_max, x_max]) or ``"eta"`` (eta_t in [0, inf], clipped to [1e-12, 1]
            x_max h_min,t^2: above, the power limit binds).
        x_min_ratio: floor of the normalised mapping, x(a=-1) = x_min_ratio * x_max, in (0, 1).
        reward_lambda: lambda of ``reward_mode="lagrangian"``, in leakage (nats) per unit of convergence cost: the
            dual price mu of (28) at the nu it targets (``baselines.OfflineOptimal`` computes it). No default: no fixed
            lambda stands for a budget nu (the dual price at nu = 0.04 ranges 0.05-0.40 over channel realisations).
        budget_multiplier_max: the largest multiple of the fair share one share action spends (> 1); the smallest is
            its inverse.
        price_decades: a price action spans mu_ref 10^[-decades, decades] (> 0).
        price_buffer_sd: the safety stock of the price action's reference, in standard deviations of the remaining
            rounds' spend (>= 0; see :meth:`~otagym.schemes.receive_scaling.model.ReceiveScalingModel.reference_price`).
        budget_floor: a budget action's round spends at most the budget left less ``budget_floor`` nu for each later
            round, in [0, 1] (0, the default: the budget left), so that every later round can still spend that share
            of nu (the floor of :func:`otagym.wrappers.spend_cap`, kept by the env's own budget actions).
        nu_range: ``(low, high)`` draws nu log-uniformly per episode (for one policy serving every nu; nu is observed);
            ``None`` keeps the scenario's nu. ``reset(options={"nu": ...})`` sets it for one episode either way.
        dp_orders: RDP orders of the end-of-episode (eps, delta) report; ``None`` turns the all-order ledger off
            (the per-round and cumulative RDP at alpha are always reported).
        accountant: ``"rdp"`` (the default: ``dp_epsilon``, from the RDP ledger at ``dp_orders``) or ``"pld"``: the
            episode's end also reports ``dp_epsilon_pld``, each device's rounds composed by their privacy loss
            distribution (:mod:`otagym.accounting.pld`: tighter, an upper bound too; docs/speed.md gives its time),
            and ``dp_epsilon_pld_from_rdp``, True where the RDP ledger's ε at its orders was the smaller and is
            reported instead. The reward's per-round RDP leakage is the same under both.
        fidelity: ``"analytic"`` (the surrogate only) or ``"train"``: every step also trains a real model by FedSGD
            over the air with the round's eta_t (:mod:`otagym.training`; the scenario's d and n_m follow the model and
            the data), and info adds :data:`otagym.fidelity.TRAIN_KEYS`.
        dataset: the data under ``fidelity="train"``: ``"digits"`` (scikit-learn's 8x8 digits, embedded, with
            ``DigitsCNN``), ``"mnist"`` or ``"fashion-mnist"`` (both with the paper's ``MnistCNN``) or ``"cifar10"``
            (``CifarResNet``), the last three read from their standard files (:data:`otagym.datasets.DATASET_NAMES`).
        data_dir: the folder of the MNIST, Fashion-MNIST or CIFAR-10 files (nothing is downloaded); None finds
            Fashion-MNIST where Debian's ``apt-get install dataset-fashion-mnist`` puts it
            (:data:`otagym.datasets.FASHION_MNIST_DIR`).
        data_split: how the devices' data is split under ``fidelity="train"``: ``"iid"`` or ``"classes"`` (2
            classes per device).
        data_seed: the seed of the split (and of the subsets below).
        eval_every: rounds between evaluations (test loss and accuracy, ||grad f||^2) under ``fidelity="train"``.
        train_samples: train on a random subset of this many training samples (None: all; n_m follows).
        eval_samples: evaluate on random subsets of at most this many test samples (loss, accuracy) and devices'
            samples (f(w), ||grad f||^2); None: all of them.
        eval_gradient: whether an evaluation also measures ||grad f(w)||^2 (and the initial f(w)) over the
            devices' data; False leaves them NaN, and an evaluation is the test loss and accuracy only (most of
            its time on a large dataset: 60,000 Fashion-MNIST samples).
        momentum: of the model update (12) under ``fidelity="train"``.
        weight_decay: of the model update (12) under ``fidelity="train"``.

    The training arguments (``dataset`` ... ``weight_decay``) apply only under ``fidelity="train"``
    (:attr:`ReceiveScalingCore.APPLIES_WITH`): with ``"analytic"`` they must keep their defaults (else
    ``ValueError``: no effect).
    """

    reward_mode: RewardMode | None = arg(ACTION_DEFAULTS["reward_mode"], ACTION_ARGS["reward_mode"])
    action_type: ActionType | None = arg(ACTION_DEFAULTS["action_type"], ACTION_ARGS["action_type"])
    x_min_ratio: float = arg(ACTION_DEFAULTS["x_min_ratio"], ACTION_ARGS["x_min_ratio"])
    reward_lambda: float | None = arg(None, Real(0.0, PHYSICAL_RANGE[1], optional=True))
    budget_multiplier_max: float = arg(ACTION_DEFAULTS["budget_multiplier_max"], ACTION_ARGS["budget_multiplier_max"])
    price_decades: float = arg(ACTION_DEFAULTS["price_decades"], ACTION_ARGS["price_decades"])
    price_buffer_sd: float = arg(ACTION_DEFAULTS["price_buffer_sd"], ACTION_ARGS["price_buffer_sd"])
    budget_floor: float = arg(ACTION_DEFAULTS["budget_floor"], ACTION_ARGS["budget_floor"])
    nu_range: tuple[float, float] | None = arg(None, Many(POSITIVE, length=2, optional=True))
    dp_orders: tuple[float, ...] | None = arg(DEFAULT_ORDERS, DP_ORDERS)
    accountant: str = arg("rdp", OneOf(ACCOUNTANTS))
    momentum: float = arg(0.0, Real(0.0, 1.0, high_open=True), TRAIN_ONLY)
    weight_decay: float = arg(0.0, Real(0.0, 1.0), TRAIN_ONLY)

    def __post_init__(self) -> None:
        check_dataclass(self, owner="")
        reward_mode, action_type = resolve_modes(self.reward_mode, self.action_type)
        object.__setattr__(self, "reward_mode", reward_mode)
        object.__setattr__(self, "action_type", action_type)
        if reward_mode == "lagrangian" and self.reward_lambda is None:
            raise ValueError("reward_lambda (finite, >= 0: the dual price of (28) at the nu you target) is required "
                             "with reward_mode='lagrangian'; got None. reward_mode='budget' needs no lambda.")
        if reward_mode != "lagrangian" and self.reward_lambda is not None:
            raise ValueError(f"reward_lambda is only used with reward_mode='lagrangian'; got "
                             f"reward_mode={reward_mode!r}")
        if reward_mode != "budget" and self.budget_floor:
            raise ValueError(f"budget_floor is only used with reward_mode='budget' (the budget actions keep it); got "
                             f"budget_floor={self.budget_floor!r} with reward_mode={reward_mode!r}")
        if self.nu_range is not None and self.nu_range[0] > self.nu_range[1]:
            raise ValueError(f"nu_range must be (low, high) with low <= high; got {self.nu_range}")


class ReceiveScalingCore:
    """N independent model-A episodes as arrays; ``step`` advances all of them by one round.

    Args:
        scenario: the deployment.
        num_envs: N.
        options: the env arguments (:class:`ReceiveScalingOptions`), checked once; or give them as keyword
            arguments (``env_args``), as ``gym.make`` does.
    """

    #: The env arguments (beside the scenario's fields) and their specs (:class:`ReceiveScalingOptions`).
    #: The option struct whose fields are the env arguments (:class:`ReceiveScalingOptions`).
    OPTIONS = ReceiveScalingOptions
    ARGS: dict[str, Spec] = field_specs(ReceiveScalingOptions)
    #: The env arguments that have an effect only under another's value (elsewhere they must keep their defaults).
    APPLIES_WITH: dict[str, AppliesWith] = field_conditions(ReceiveScalingOptions)
    #: Batch axis of each ``reset`` option (a single env inserts it; :meth:`option_shapes` has the shapes).
    OPTION_AXES = {"distances_m": 0, "channel_gains": 1, "nu": 0}
    EPISODE_END_KEYS = ("dp_epsilon", "dp_order", "dp_epsilon_pld", "dp_epsilon_pld_from_rdp", "leakage_total",
                        "equal_alloc_leakage")

    def __init__(self, scenario: Scenario, num_envs: int, options: ReceiveScalingOptions | None = None,
                 **env_args: Any) -> None:
        self.options = options_of(ReceiveScalingOptions, options, env_args)
        self.num_envs = NUM_ENVS("num_envs", num_envs)
        self._bind_scenario(scenario, self.options)
        self._set_action_semantics(self.options)
        self._allocate_episodes(self.options.dp_orders, self.options.accountant)

    def _bind_scenario(self, scenario: Scenario, options: ReceiveScalingOptions) -> None:
        """The scenario (its d and n_m those of the trained model and data under the training fidelity), its model,
        channel and the observation's constants."""
        self.fidelity = options.fidelity
        self._train_args = {"momentum": options.momentum, "weight_decay": options.weight_decay}
        self.training = TrainingRuns.create(options, scenario.num_devices, self.num_envs, scenario.num_rounds)
        if self.training is not None:  # the scenario's d and n_m follow the model and the data that are trained
            fed = self.training.federation
            try:
                scenario = scenario.replace(model_dim=fed.model_dim, dataset_size=fed.dataset_sizes)
            except ValueError as err:
                raise ValueError(f"{err} (n_m follows the training data: dataset={options.dataset!r} and "
                                 f"train_samples={options.train_samples} give n_m = {fed.dataset_sizes})") from None
        self.scenario = scenario
        self.num_rounds = scenario.num_rounds
        self.model = ReceiveScalingModel(scenario)
        self.channel = ChannelModel.from_scenario(scenario)
        self.nu_range = options.nu_range
        #: Centre of the observed log10 nu: the geometric middle of the scenario's nu grid (or of ``nu_range``).
        self.log10_nu_ref = log10_nu_ref(scenario.nu_grid, self.nu_range)
        self.layout = ObservationOffsets.of(scenario.num_devices)
        self.obs_dim = self.layout.size
        #: Rounds per fading block (block fading's coherence; 1 otherwise): the last observation entry's period.
        self.block_rounds = block_rounds(scenario)
        self.observation_constants = ObservationConstants(self.num_rounds, self.model.device_class,
                                                          self.model.class_device, self.log10_nu_ref,
                                                          self.block_rounds, self.layout)

    def _set_action_semantics(self, options: ReceiveScalingOptions) -> None:
        """What an action means (the action arguments) and the round kernel's :class:`RoundSettings`."""
        self.action_type, self.reward_mode = options.action_type, options.reward_mode
        self.x_min_ratio, self.reward_lambda = options.x_min_ratio, options.reward_lambda
        self.budget_multiplier_max = options.budget_multiplier_max
        self.price_decades, self.price_buffer_sd = options.price_decades, options.price_buffer_sd
        self.budget_floor = options.budget_floor
        action = ActionSettings(ACTION_CODES[self.action_type], float(self.x_min_ratio),
                                float(self.budget_multiplier_max), float(self.price_decades),
                                float(self.price_buffer_sd), float(self.budget_floor))
        self.settings = RoundSettings(float(self.num_rounds), action, self.reward_mode == "lagrangian",
                                      float(self.reward_lambda or 0.0))
        #: The round's kernel and its compiled code for the types of :meth:`_round_args` (set at the first step).
        self._round_kernel: tuple[object, object] = (None, None)
        #: The observation's compiled code for the types of :meth:`observation`'s arguments (set at its first call).
        self._observe: Callable[..., NDArray] | None = None

    def _allocate_episodes(self, dp_orders: Sequence[float] | None, accountant: str) -> None:
        """The episodes' state (:attr:`state`), ledger and channel process, before the first reset."""
        n, m, c = self.num_envs, self.scenario.num_devices, self.model.class_q.size
        #: The episodes' state, one struct (:class:`~otagym.schemes.receive_scaling.kernel.EpisodeState`).
        self.state = EpisodeState(t=np.zeros(n, dtype=np.int64), nu=np.full(n, self.scenario.nu),
                                  cost_sum=np.zeros(n), leak_sum=np.zeros(n), equal_alloc_sum=np.zeros(n),
                                  class_rdp_sum=np.zeros((n, c)), gains=np.zeros((n, m)), h_min2=np.zeros(n),
                                  mean_h_min2=np.ones(n), reward_scale=np.ones(n), mean_gain=np.zeros((n, m)),
                                  log10_placement=np.zeros((n, m)))
        self.episode_epsilon = EpisodeEpsilon((n, c), dp_orders, accountant, sampling_rate=self.model.class_q)
        #: The channel process: the placement (N, M) in metres, the fading and the replayed trace, if any.
        self.distances_m = np.zeros((n, m))
        self.fading: FadingState | None = None
        self.trace: NDArray | None = None
        self._snr_scale = self.model.inv_k2 * self.model.x_max / self.model.cost_scale  # s_m = |h_m|^2 * this

    @property
    def t(self) -> NDArray:
        """(N,) rounds played in each episode (``state.t``)."""
        return self.state.t

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
        rows = np.ones(self.num_envs, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        replay = self._set_trace(channel_gains, mask)
        self._set_nu(rng, rows, nu, replay)
        self._place(rng, rows, mask, distances_m, replay)
        self._start_episodes(rng, rows, mask)

    def _set_trace(self, channel_gains: NDArray | None, mask: NDArray | None) -> bool:
        """The replayed channel trace (a full reset sets or clears it); whether this reset replays the one kept (an
        autoreset replays the trace with its placement and nu)."""
        self.trace = replayed_trace("channel_gains", channel_gains, self.trace, self.option_shapes()["channel_gains"],
                                    mask)
        return mask is not None and self.trace is not None

    def _set_nu(self, rng: np.random.Generator, rows: NDArray, nu: ArrayLike | None, replay: bool) -> None:
        """The new episodes' nu: given, else drawn log-uniformly from ``nu_range`` (not on a replay), else kept."""
        if nu is not None:
            nu = np.broadcast_to(option_array("nu", nu, self.option_shapes()["nu"], PHYSICAL_RANGE), (self.num_envs,))
        elif self.nu_range is not None and not replay:
            lo, hi = np.log(self.nu_range)
            nu = np.exp(rng.uniform(lo, hi, size=self.num_envs))
        if nu is not None:
            self.state = self.state._replace(nu=np.where(rows, nu, self.state.nu))

    def _place(self, rng: np.random.Generator, rows: NDArray, mask: NDArray | None, distances_m: NDArray | None,
               replay: bool) -> None:
        """The new episodes' placement (given, kept on a replay, else drawn), first fading state and the constants of
        the placement: mean gains, E[h_min^2] and the observed placement."""
        n, state = self.num_envs, self.state
        if distances_m is not None:
            dist = option_array("distances_m", distances_m, self.option_shapes()["distances_m"], DISTANCE_RANGE)
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
        contiguous = np.ascontiguousarray(mean_gain)  # the kernels take C-ordered arrays
        self.state = state._replace(
            mean_gain=contiguous, mean_h_min2=self.model.expected_h_min2(mean_gain),
            log10_placement=np.log10(contiguous * self._snr_scale * state.nu[:, None]))  # log10(nu E[s_m])

    def _start_episodes(self, rng: np.random.Generator, rows: NDArray, mask: NDArray | None) -> None:
        """The new episodes' reward unit, running sums, ledger rows, first channel and (training fidelity) fresh
        models."""
        state = self.state
        state.reward_scale[rows] = self.num_rounds * self.model.stationary_headroom(state.nu[rows],
                                                                                    state.mean_h_min2[rows])
        restart_rows(rows, state.t, state.cost_sum, state.leak_sum, state.equal_alloc_sum, state.class_rdp_sum)
        self.episode_epsilon.reset(None if mask is None else rows)
        self._set_gains()
        if self.training is not None:  # a fresh model per new episode (FedSGD of §IV-A)
            s = self.scenario
            self.training.reset(rng, rows, lambda fed, child: fed.engine(
                child, s.batch_sizes, s.clip_norm, s.learning_rate, **self._train_args))

    def _set_gains(self) -> None:
        """The channel of the round about to be played, written into the state (the last step's info has copies)."""
        state = self.state
        if self.trace is not None:
            state.gains[:] = self.trace[np.minimum(self.t, self.scenario.num_rounds - 1), np.arange(self.num_envs)]
            state.h_min2[:] = self.model.h_min2(state.gains)
        else:
            channel(self.fading.power, state.mean_gain, self.model.inv_k2, state.gains, state.h_min2)

    # --- actions ---------------------------------------------------------------------------------------------
    def decide(self, action: ArrayLike) -> tuple[NDArray, NDArray]:
        """``(x_t, c_t)`` for each env from the action, validated.

        * price, share: c_t = :func:`~otagym.schemes.receive_scaling.actions.budget_action_cost` (capped at the
          budget left R_t; the last round spends R_t), x_t = the x with c_t(x) = c_t in closed form.
        * normalized: x = x_max * x_min_ratio ** ((1 - a) / 2), a in [-1, 1] (log scale; a = 1 is full power).
        * spend: c_t = :func:`~otagym.schemes.receive_scaling.actions.spend_cost` = nu (10^(1 + a) - 1) / 9,
          a in [-1, 1] (a = 0 is EqualAlloc), x_t = the x with c_t(x) = c_t.
        * x: x in [1e-12 x_max, x_max]. * eta: x = eta / h_min,t^2 clipped to [1e-12 x_max, x_max].
        x must be >= 1e-12 x_max (the floor of the analytic policies' search; below it the convergence cost
        overflows). An x above x_max by less than 1e-9 relative (rounding in a policy) is clipped to x_max. An eta is
        clipped to [1e-12 x_max h_min,t^2, x_max h_min,t^2] (above, the power limit binds: every device transmits
        at P_max), so every action of the closed ``Box(0, inf)`` space is valid, +inf included (NaN is not);
        ``info["receive_scaling"]`` is the eta played. The round's kernel decides with the same compiled function
        (:func:`~otagym.schemes.receive_scaling.actions.decide`).
        """
        a, state = self._checked_action(action), self.state
        return decode_actions(self.model, self.settings.action, a, state.h_min2, nu=state.nu,
                              remaining=state.nu * self.settings.num_rounds - state.cost_sum,
                              rounds_left=self.settings.num_rounds - state.t, mean_h_min2=state.mean_h_min2)

    def _checked_action(self, action: ArrayLike) -> NDArray:
        """The actions as a float vector (N,), each in its action type's range (else ValueError)."""
        return check_actions(self.action_type, action_array(action, self.num_envs), self.model.x_max)

    # --- the round -------------------------------------------------------------------------------------------
    def step(self, rng: np.random.Generator, action: ArrayLike) -> tuple[NDArray, NDArray, dict[str, NDArray]]:
        """One FL round in every env. Returns ``(reward (N,), terminated (N,), info arrays)``; the caller builds obs.

        The info arrays describe the round just played; episode-end entries (:attr:`EPISODE_END_KEYS`) are present
        when any env terminated (valid where ``terminated``).
        """
        s, n = self.scenario, self.num_envs
        a = action_array(action, n)
        out = RoundInfo(np.empty((len(PER_ENV_ROWS), n)), np.empty((2, n, self.model.class_q.size)),
                        np.empty((4, n, s.num_devices)))
        args = self._round_args(a, out)
        kernel = play_round_parallel if jit.parallel(n) else play_round
        if self._round_kernel[0] is not kernel:
            self._round_kernel = kernel, jit.specialised(kernel, args)
        ended = self._round_kernel[1](*args)
        if ended < 0:
            self._checked_action(a)  # raises, naming the actions out of range
        self.episode_epsilon.record_gaussian(out.per_class[1])
        if self.training is not None:  # the round's FedSGD update with its eta_t
            noise, eta = s.noise_power_w, out.per_env[ROW_ETA]
            self.training.round(self.t, lambda i, engine, g: engine.round(g, float(eta[i]), noise).train_loss)
        info, reward = self._round_info(out), out.per_env[ROW_REWARD]
        if self.training is not None:
            info.update(self.training.info())
        # the kernel counted the episodes that ended: most rounds none did, and zeros are made faster than compared
        terminated = self.t >= s.num_rounds if ended else np.zeros(n, dtype=bool)
        if ended:
            info["leakage_total"] = self.state.leak_sum.copy()
            info["equal_alloc_leakage"] = self.state.equal_alloc_sum.copy()
            # each device class's report, given to every device of the class
            info.update({k: v[:, self.model.device_class]
                         for k, v in self.episode_epsilon.report(s.delta, terminated).items()})
        if self.trace is None:
            self.fading = self.channel.advance(rng, self.fading, self.t)
        self._set_gains()
        return reward, terminated, info

    def reward_cost_slope(self, x: ArrayLike, h_min2: ArrayLike) -> NDArray:
        """dr_t / d(c_t / nu) of the rounds just played (``info["x"]``, ``info["h_min2"]``), before any env starts a
        new episode: how the round's reward moves with its cost in the units of ``info["cost"]``.

        The reward is -(L_t - L_t^EA + lambda (c_t - nu)) / H (lambda = 0 but in ``reward_mode="lagrangian"``), L_t^EA
        does not depend on the action and dL_t/dc_t = -:meth:`~.model.ReceiveScalingModel.cost_slope_of_leakage`
        (the summand of (28a) through x(c_t), the inverse of (28b)'s summand), so the slope is
        nu (-dL/dc - lambda) / H, per env (N,). Pathwise policy gradients (``agents.budget_apg``) read it.
        """
        slope = self.model.cost_slope_of_leakage(x, h_min2) - float(self.reward_lambda or 0.0)
        return self.state.nu * slope / self.state.reward_scale

    def budget_action_cost(self, action: ArrayLike, budget_left: ArrayLike, rounds_left: ArrayLike,
                           h_min2: ArrayLike) -> NDArray:
        """c_t / nu of budget-mode actions (``action_type`` "price" or "share") at any budget left B_t and rounds
        left k_t (>= 1), on channels ``h_min2``, for the episodes in the state (each env's nu and channel law; before
        any env starts a new episode), in the units of ``info["cost"]`` (B_t likewise: T less the costs so far):
        :func:`~otagym.schemes.receive_scaling.actions.budget_action_cost` with R_t = nu B_t, the function the round
        spends by. Broadcast over leading axes (e.g. (T, N) rounds of N envs). Pathwise policy gradients
        (``agents.budget_apg``) differentiate it."""
        nu, mean = self.state.nu, self.state.mean_h_min2
        cost = budget_action_cost(self.model, self.settings.action, action, h_min2, nu * np.asarray(budget_left, float),
                                  rounds_left, mean_h_min2=np.broadcast_to(mean, np.shape(h_min2)), nu=nu)
        return cost / nu

    def _round_info(self, out: RoundInfo) -> dict[str, NDArray]:
        """The info of the round just played, from the kernel's outputs."""
        x, eta, cost, leak, reward, cost_mean, cost_share, nu = out.per_env  # the rows of PER_ENV_ROWS, in order
        return {
            "round": self.t - 1,
            "x": x,
            "receive_scaling": eta,
            "h_min2": self.state.h_min2.copy(),
            "channel_gain": self.state.gains.copy(),
            "noise_multiplier": out.per_device[0],
            "rdp_round": out.per_device[1],
            "rdp_cumulative": out.per_device[2],
            "leakage": leak,
            "convergence_cost": cost,
            "convergence_cost_mean": cost_mean,
            "cost": cost_share,
            "nu": nu,
            "transmit_power_w": out.per_device[3],
        }

    def __getstate__(self) -> dict:
        """The state to pickle: the compiled round and observation are not picklable, and are found again at the
        next call."""
        return {**self.__dict__, "_round_kernel": (None, None), "_observe": None}

    def _round_args(self, actions: NDArray, out: RoundInfo) -> tuple:
        """The arguments of the round's kernel (:func:`~otagym.schemes.receive_scaling.kernel.play_round`): of the
        same numba types at every step (float64 C-contiguous arrays: the outputs made by :meth:`step`, the actions by
        :func:`action_array`, the state at construction and at each reset), as :func:`otagym.jit.specialised`
        requires."""
        return actions, self.settings, self.model.arrays, self.model.device_class, self.state, out

    def observation_space(self) -> spaces.Box:
        return spaces.Box(-OBS_BOUND, OBS_BOUND, shape=(self.obs_dim,), dtype=np.float32)

    def option_shapes(self) -> dict[str, tuple[tuple[int, ...], ...]]:
        """The shapes each ``reset`` option takes (N envs, M devices, T rounds): ``distances_m`` (N, M),
        ``channel_gains`` (T, N, M), ``nu`` () or (N,). The single env takes them less the batch axis
        (:attr:`OPTION_AXES`)."""
        n, m, big_t = self.num_envs, self.scenario.num_devices, self.scenario.num_rounds
        return {"distances_m": ((n, m),), "channel_gains": ((big_t, n, m),), "nu": ((), (n,))}

    def action_space(self) -> spaces.Box:
        return action_space(self.action_type, self.model.x_max)

    def observation(self) -> NDArray:
        """Observations (N, 3M + 6), float32, each entry clipped to [-10, 10], laid out as
        :class:`~otagym.schemes.receive_scaling.observation.ObservationOffsets` says (see
        :class:`otagym.env.OTAPrivacyEnv`)."""
        args = (self.state, self.observation_constants, np.empty((self.num_envs, self.obs_dim), dtype=np.float32))
        if self._observe is None:  # numba's dispatch types its arguments at every call: a fifth of a step
            self._observe = jit.specialised(observe, args)
        return self._observe(*args)

    def reset_info(self) -> dict[str, NDArray]:
        """Constants of the new episodes that policies may use (nu, placement, mean gains) and the first channel;
        under the training fidelity, the initial model's metrics; and :meth:`blank_round_info`. Its keys are those of
        every ``step``'s info (less :attr:`EPISODE_END_KEYS`)."""
        return {**self.blank_round_info(), "nu": self.state.nu.copy(), **self.next_channel_info(),
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
        state = self.state
        return {"next_channel_gain": state.gains.copy(), "next_h_min2": state.h_min2.copy(),
                "mean_channel_gain": state.mean_gain.copy(), "distances_m": self.distances_m.copy()}



def sample_realisation(scenario: Scenario, rng: np.random.Generator) -> dict[str, NDArray]:
    """A receive-scaling realisation: the placement, then the fading of every round, as
    :meth:`otagym.channel.ChannelModel.sample_trace` draws them: ``{"distances_m": (M,), "channel_gains": (T, M)}``."""
    distances, gains = ChannelModel.from_scenario(scenario).sample_trace(rng, scenario.num_rounds)
    return {"distances_m": distances, "channel_gains": gains}
