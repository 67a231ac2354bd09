"""The batched core of ``scheme="anonymous"`` (model C, anonymous over-the-air computation: Hasırcıoğlu & Gündüz,
*Private Wireless Federated Learning with Anonymous Over-the-Air Computation*, ICASSP 2021; section numbers below are
the paper's).

:class:`AnonymousCore` holds N episodes as arrays and steps them with the pure functions of
:mod:`otagym.schemes.anonymous.formulas`, decodes actions with
:func:`~otagym.schemes.anonymous.actions.action_to_sigma` and writes observations through
:mod:`otagym.schemes.anonymous.observation`; the single and the vector environment of :mod:`otagym.env` are thin
shells around it. :func:`sample_realisation` draws a whole realisation of a scenario, as an episode draws it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from otagym.channel import ChannelModel, FadingState
from otagym.accounting import ACCOUNTANTS, DEFAULT_ORDERS, DP_ORDERS, EpisodeEpsilon
from otagym.schemes.anonymous.actions import (ACTION_TYPES, NORMALIZED, SigmaActionType, action_space,
                                              action_to_sigma, sigma_range)
from otagym.schemes.anonymous.formulas import (convergence_bound, convergence_term, noise_multiplier,
                                               per_device_noise_var, received_noise_var, round_rdp,
                                               threshold_for_participation)
from otagym.schemes.anonymous.observation import AnonymousObservation, observation_space, write_observation
from otagym.schemes.anonymous.scenario import AnonymousScenario
from otagym.schemes.episodes import restart_rows
from otagym.validation import (NUM_ENVS, POSITIVE, AppliesWith, Many, OneOf, Real, Spec, arg, check_dataclass,
                               field_conditions, field_specs, option_array, options_of, refuse_entries)

__all__ = ["AnonymousEpisodes", "AnonymousOptions", "AnonymousCore", "sample_realisation", "channel_model"]


def channel_model(s: AnonymousScenario) -> ChannelModel:
    """The devices' normalised fading powers |c_i,t|^2 / E|c_i|^2: Rayleigh, i.i.d. over devices and rounds."""
    return ChannelModel(s.num_devices, 1.0, 1.0, None, "iid", 1, 0.0)


def sample_realisation(s: AnonymousScenario, rng: np.random.Generator) -> dict[str, NDArray]:
    """A whole realisation of scenario ``s`` for one env as ``reset`` options (less the batch axis):
    ``{"channel_gains": (T, devices), "batch_sizes": (T,)}``, the fading powers by the same ``initial``/``advance``
    steps as an episode and b_t ~ Binomial(a(t) n, q)."""
    channel = channel_model(s)
    state = channel.initial(rng)
    power = np.empty((s.num_rounds, s.num_devices))
    for t in range(s.num_rounds):
        power[t] = state.power
        state = channel.advance(rng, state, t + 1)
    threshold = float(threshold_for_participation(s.participation))
    batch = rng.binomial((power >= threshold).sum(axis=-1) * s.dataset_size, s.sampling_rate)
    return {"channel_gains": power, "batch_sizes": batch.astype(float)}


@dataclass(frozen=True, kw_only=True)
class AnonymousOptions:
    """The env arguments of anonymous over-the-air computation beside the scenario's fields (``gym.make``'s flat
    keyword arguments), checked once, at construction (:data:`AnonymousCore.ARGS`).

    Attributes:
        action_type: ``"normalized"`` (a in [-1, 1] -> sigma = s_lo (s_hi / s_lo)^((a + 1)/2), log-linear, with
            [s_lo, s_hi] = ``noise_multiplier_range`` times ``scenario.sigma_unit`` = 2L / max(E[b_t], 1), so a is a
            log noise multiplier at the expected batch) or ``"sigma"`` (sigma in gradient units, in [1e-30, 1e30]);
            :func:`~otagym.schemes.anonymous.actions.action_to_sigma` decodes both.
        noise_multiplier_range: (low, high), 0 < low < high, of the normalised action in noise-multiplier units.
        dp_orders: RDP orders of the end-of-episode (eps, delta) report; ``None`` turns it off (the per-round and
            cumulative RDP at alpha are always reported).
        accountant: ``"rdp"`` (default) or ``"pld"``: the episode's end also reports ``dp_epsilon_pld``, every
            example's rounds (the SGM at rate p q, noise multiplier sigma') composed by their privacy loss
            distribution (:mod:`otagym.accounting.pld`); the ``"sampled"`` accounting only (the ``"device"`` one is
            not a subsampled Gaussian mechanism); ``dp_epsilon_pld_from_rdp`` is True where the RDP ledger's ε was
            the smaller and is reported instead.
        reward_scale: the reward is divided by this (> 0, utility units): 1 keeps -(lambda_c gamma + lambda_p E_T) as
            the return; a benchmark task sets its reference policy's expected utility, so that its return is about -1.
        target_epsilon: a privacy budget (eps at the scenario's delta) that adds ``info["cost"]``, the round's share
            of the RDP budget at alpha that guarantees it, T e_t / E_max with E_max = target_epsilon - log(1/delta) /
            (alpha - 1) (the RDP-to-DP conversion of Mironov 2017, Prop. 3): an episode's cost is at most T when
            E_T <= E_max, which implies (target_epsilon, delta)-DP. ``None`` (default): no cost.
    """

    action_type: SigmaActionType = arg(NORMALIZED, OneOf(ACTION_TYPES))
    noise_multiplier_range: tuple[float, float] = arg((0.1, 100.0), Many(Real(1e-6, 1e6), length=2))
    dp_orders: tuple[float, ...] | None = arg(DEFAULT_ORDERS, DP_ORDERS)
    accountant: str = arg("rdp", OneOf(ACCOUNTANTS))
    reward_scale: float = arg(1.0, POSITIVE)
    target_epsilon: float | None = arg(None, Real(0.0, 1e6, low_open=True, optional=True))

    def __post_init__(self) -> None:
        check_dataclass(self, owner="")
        low, high = self.noise_multiplier_range
        if not low < high:
            raise ValueError(f"noise_multiplier_range must be (low, high) with low < high; got {(low, high)}")


@dataclass
class AnonymousEpisodes:
    """The N episodes' state, the core's one struct of it: the running arrays a reset restarts."""

    t: NDArray  # (N,) int64, rounds played
    rdp_sum: dict[str, NDArray]  # (N,) cumulative RDP at alpha, by accounting ("sampled", "device")
    nominal_rdp_sum: NDArray  # (N,) cumulative RDP at the nominal batch: the observation's public privacy entry
    term_sum: NDArray  # (N,) sum of the convergence terms V_t
    last_sigma: NDArray  # (N,) the last round's sigma (the observation's)


class AnonymousCore:
    """N independent anonymous-OTA episodes as arrays; ``step`` plays one round of §III-IV in each.

    Each round: device i's normalised channel power |c_i,t|^2 / E|c_i|^2 ~ Exponential(1) (Rayleigh, i.i.d. over
    devices and rounds) and it transmits when that is >= -ln p, so a(t) ~ Binomial(N, p); the batch is
    b_t ~ Binomial(a(t) n, q); the action sets sigma, each participant adds N(0, sigma^2 / a(t)) per coordinate, and
    every example of the round leaks :func:`~otagym.schemes.anonymous.formulas.round_rdp` at
    sigma' = sigma b_t / (2L).

    The action is public: the server hears sigma^2 in the received noise power, so sigma must not depend on a(t) or
    b_t, which the protocol keeps from the server (§III). The observation therefore holds public quantities only, and
    policies should not read the ``participants``/``batch_size`` info entries.

    Args:
        scenario: the deployment (:class:`~otagym.schemes.anonymous.scenario.AnonymousScenario`).
        num_envs: N.
        options: the env arguments (:class:`AnonymousOptions`), checked once; or give them as keyword arguments
            (``env_args``), as ``gym.make`` does.

    ``reset(options=...)`` replays a realisation on a full reset (an autoreset replays it again): ``channel_gains``
    (T, N, devices), the normalised fading powers |c_i,t|^2 / E|c_i|^2 that decide who transmits, and with it
    optionally ``batch_sizes`` (T, N), the b_t drawn (integers, at most a(t) n).
    """

    #: The env arguments (beside the scenario's fields) and their specs, checked at construction.
    #: The option struct whose fields are the env arguments (:class:`AnonymousOptions`).
    OPTIONS = AnonymousOptions
    ARGS: dict[str, Spec] = field_specs(AnonymousOptions)
    #: The env arguments that have an effect only under another's value: none.
    APPLIES_WITH: dict[str, AppliesWith] = field_conditions(AnonymousOptions)
    #: Batch axis of each ``reset`` option (a single env inserts it).
    OPTION_AXES: dict[str, int] = {"channel_gains": 1, "batch_sizes": 1}
    EPISODE_END_KEYS = ("dp_epsilon", "dp_order", "dp_epsilon_pld", "dp_epsilon_pld_from_rdp")

    def __init__(self, scenario: AnonymousScenario, num_envs: int, options: AnonymousOptions | None = None,
                 **env_args: Any) -> None:
        self.options = args = options_of(AnonymousOptions, options, env_args)
        if args.accountant == "pld" and scenario.accounting != "sampled":
            raise ValueError("accountant='pld' needs AnonymousScenario.accounting='sampled' (the device-level "
                             f"accounting is not a subsampled Gaussian mechanism); got {scenario.accounting!r}")
        low, high = args.noise_multiplier_range
        s = self.scenario = scenario
        self.reward_scale = args.reward_scale
        self.rdp_budget = None
        if args.target_epsilon is not None:
            self.rdp_budget = args.target_epsilon - np.log(1.0 / s.delta) / (s.rdp_order - 1)
            if not self.rdp_budget > 0:
                raise ValueError(f"target_epsilon must exceed log(1/delta) / (alpha - 1) = "
                                 f"{np.log(1.0 / s.delta) / (s.rdp_order - 1):.6g} (delta = {s.delta:g}, alpha = "
                                 f"{s.rdp_order}: no RDP budget is left below it); got {args.target_epsilon!r}")
        self.num_envs = n = NUM_ENVS("num_envs", num_envs)
        self.num_rounds = s.num_rounds
        self.action_type = args.action_type
        self.sigma_range = sigma_range(s, (low, high))
        self.threshold = float(threshold_for_participation(s.participation))
        self.channel = channel_model(s)
        #: The episodes' state, one struct (:class:`AnonymousEpisodes`).
        self.state = AnonymousEpisodes(t=np.zeros(n, dtype=np.int64),
                                       rdp_sum={acc: np.zeros(n) for acc in ("sampled", "device")},
                                       nominal_rdp_sum=np.zeros(n), term_sum=np.zeros(n), last_sigma=np.zeros(n))
        self.episode_epsilon = EpisodeEpsilon((n,), args.dp_orders, args.accountant)
        self.fading: FadingState | None = None
        self.trace: NDArray | None = None
        self.batch_trace: NDArray | None = None

    @property
    def t(self) -> NDArray:
        """(N,) rounds played in each episode (``state.t``)."""
        return self.state.t

    # --- spaces ----------------------------------------------------------------------------------------------
    def observation_space(self) -> spaces.Box:
        return observation_space(self.scenario)

    def action_space(self) -> spaces.Box:
        return action_space(self.action_type, self.sigma_range)

    def option_shapes(self) -> dict[str, tuple[tuple[int, ...], ...]]:
        """The shapes of each ``reset`` option: ``channel_gains`` (T, N, devices), ``batch_sizes`` (T, N)."""
        big_t, n = self.num_rounds, self.num_envs
        return {"channel_gains": ((big_t, n, self.scenario.num_devices),), "batch_sizes": ((big_t, n),)}

    # --- episode boundaries ----------------------------------------------------------------------------------
    def reset(self, rng: np.random.Generator, mask: NDArray | None = None, *, channel_gains: NDArray | None = None,
              batch_sizes: NDArray | None = None) -> None:
        """Start new episodes where ``mask`` is True (all if None); draws the first round's channels, or replays
        ``channel_gains`` (T, N, devices) and ``batch_sizes`` (T, N) (a full reset only; see the class docstring)."""
        rows = np.ones(self.num_envs, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        if channel_gains is not None or batch_sizes is not None:
            self._replay(mask, channel_gains, batch_sizes)
        elif mask is None:
            self.trace = self.batch_trace = None
        fresh = self.channel.initial(rng, (self.num_envs,))
        self.fading = fresh if (self.fading is None or mask is None) else self.fading.where(rows, fresh)
        state = self.state
        restart_rows(rows, state.t, *state.rdp_sum.values(), state.nominal_rdp_sum, state.term_sum, state.last_sigma)
        self.episode_epsilon.reset(rows)

    def _replay(self, mask: NDArray | None, channel_gains: NDArray | None, batch_sizes: NDArray | None) -> None:
        """Check and store a realisation to replay (see :meth:`reset`)."""
        if mask is not None:
            raise ValueError("channel_gains and batch_sizes can only be replayed on a full reset")
        if channel_gains is None:
            raise ValueError("reset option batch_sizes needs channel_gains too (b_t is drawn from the examples of the "
                             "devices that transmit)")
        shapes = self.option_shapes()
        gains = option_array("channel_gains", channel_gains, shapes["channel_gains"], (0.0, np.inf))
        batch = None
        if batch_sizes is not None:
            batch = option_array("batch_sizes", batch_sizes, shapes["batch_sizes"], (0.0, np.inf))
            most = (gains >= self.threshold).sum(axis=-1) * self.scenario.dataset_size
            refuse_entries("reset option batch_sizes", "be whole numbers of at most a(t) n (the examples of the "
                           "devices that transmit)", batch, (batch != np.round(batch)) | (batch > most))
            batch = batch.astype(np.int64)
        self.trace, self.batch_trace = gains, batch

    def sample_realisation(self, rng: np.random.Generator) -> dict[str, NDArray]:
        """:func:`sample_realisation` of the core's scenario."""
        return sample_realisation(self.scenario, rng)

    # --- actions ---------------------------------------------------------------------------------------------
    def action_to_sigma(self, action: NDArray) -> NDArray:
        """sigma (gradient units, per coordinate) for each env from the action, validated
        (:func:`~otagym.schemes.anonymous.actions.action_to_sigma` with the core's action type and range)."""
        return action_to_sigma(action, self.num_envs, action_type=self.action_type, sigma_range=self.sigma_range)

    # --- the round -------------------------------------------------------------------------------------------
    def step(self, rng: np.random.Generator, action: NDArray) -> tuple[NDArray, NDArray, dict[str, NDArray]]:
        """One round in every env: ``(reward (N,), terminated (N,), info arrays)``; the caller builds obs.

        reward = -(lambda_c (2 (F(w_0) - F*) / (eta T^2) + eta beta V_t / T) + lambda_p e_t) / ``reward_scale``, with
        V_t the round's :func:`~otagym.schemes.anonymous.formulas.convergence_term` and e_t its RDP at alpha under
        the scenario's accounting, so an episode's return is -(lambda_c gamma + lambda_p E_T) / ``reward_scale``:
        gamma the SGD bound of :func:`~otagym.schemes.anonymous.formulas.convergence_bound`, E_T = sum_t e_t the
        episode's RDP (as CDPB's return is -G).
        """
        s, state = self.scenario, self.state
        sigma = self.action_to_sigma(action)
        participating, b = self._participation(rng)
        a = participating.sum(axis=-1)
        rdp = self._account(sigma, b)
        term = convergence_term(s, sigma, a, b)
        state.term_sum += term
        big_t = s.num_rounds
        conv = 2.0 * s.initial_gap / (s.learning_rate * big_t**2) + s.learning_rate * s.smoothness * term / big_t
        reward = -(s.lambda_convergence * conv + s.lambda_privacy * rdp[s.accounting]) / self.reward_scale
        state.t += 1
        state.last_sigma = sigma.copy()  # info keeps sigma; an autoreset zeroes this one
        info = self._round_info(sigma, participating, b, term, rdp)
        terminated = state.t >= big_t
        info.update(self.episode_epsilon.report(s.delta, terminated))
        self.fading = self.channel.advance(rng, self.fading, self.t)
        return reward, terminated, info

    def _participation(self, rng: np.random.Generator) -> tuple[NDArray, NDArray]:
        """Who transmits this round (channel power above the threshold, (N, K)) and the batch each env's
        participants sample (N,), drawn, or replayed from a trace (drawn anyway, so the same draws follow)."""
        rows = np.arange(self.num_envs)
        power = self.fading.power if self.trace is None else self.trace[self.t, rows]
        participating = power >= self.threshold
        b = rng.binomial(participating.sum(axis=-1) * self.scenario.dataset_size, self.scenario.sampling_rate)
        if self.batch_trace is not None:
            b = self.batch_trace[self.t, rows]
        return participating, b

    def _account(self, sigma: NDArray, b: NDArray) -> dict[str, NDArray]:
        """The round's RDP at alpha under each accounting, added to the running sums and the episode's privacy
        report (the PLD's mechanism is the sampled accounting's, the only one it is offered under)."""
        s = self.scenario
        z = noise_multiplier(sigma, s.clip_norm, b)
        rdp = {acc: round_rdp(s, z, accounting=acc) for acc in ("sampled", "device")}
        for acc, r in rdp.items():
            self.state.rdp_sum[acc] += r
        self.episode_epsilon.record(lambda orders: round_rdp(s, z, orders=orders), s.inclusion_rate, z)
        self.state.nominal_rdp_sum += round_rdp(s, noise_multiplier(sigma, s.clip_norm, s.nominal_batch))
        return rdp

    def _round_info(self, sigma: NDArray, participating: NDArray, b: NDArray, term: NDArray,
                    rdp: dict[str, NDArray]) -> dict[str, NDArray]:
        """The info of the round just played (``self.t`` already counts it)."""
        s, rdp_sum = self.scenario, self.state.rdp_sum
        a = participating.sum(axis=-1)
        gamma = convergence_bound(s, self.state.term_sum / self.t, self.t)
        info: dict[str, NDArray] = {
            "round": self.t - 1,
            "sigma": sigma,
            "noise_multiplier": sigma * b / (2.0 * s.clip_norm),  # finite: 0 where b_t = 0 (which leaks nothing)
            "participating": participating,
            "participants": a,
            "batch_size": b,
            "per_device_noise_var": per_device_noise_var(sigma, a),
            "received_noise_var": received_noise_var(sigma, a),
            "convergence_term": term,
            "gamma": gamma,
            "rdp_round": rdp[s.accounting],
            "rdp_cumulative": rdp_sum[s.accounting].copy(),
            "rdp_round_sampled": rdp["sampled"],
            "rdp_round_device": rdp["device"],
            "utility": s.lambda_convergence * gamma + s.lambda_privacy * rdp_sum[s.accounting],
        }
        if self.rdp_budget is not None:
            info["cost"] = s.num_rounds * rdp[s.accounting] / self.rdp_budget
        return info

    def observation(self) -> NDArray:
        """Observations (N, 3), float32, public quantities only, in the layout of
        :mod:`otagym.schemes.anonymous.observation`."""
        s, state = self.scenario, self.state
        with np.errstate(divide="ignore"):
            last = np.where(state.last_sigma > 0, np.log10(state.last_sigma / s.sigma_unit), 0.0)
        return write_observation(AnonymousObservation(round_fraction=state.t / s.num_rounds, log_sigma=last,
                                                      log_rdp=np.log10(1.0 + state.nominal_rdp_sum)))

    def reset_info(self) -> dict[str, NDArray]:
        """:meth:`blank_round_info` only (no per-episode constants: every episode of a scenario has the same law). Its
        keys are those of every ``step``'s info (less :attr:`EPISODE_END_KEYS`)."""
        return self.blank_round_info()

    def blank_round_info(self) -> dict[str, NDArray]:
        """``step``'s entries about the round just played, before the first round: ``round`` -1 and 0 (False)
        elsewhere, for ``reset``'s info (:meth:`otagym.schemes.receive_scaling.core.ReceiveScalingCore.blank_round_info`
        says why)."""
        n = self.num_envs
        return {"round": self.t - 1, "participating": np.zeros((n, self.scenario.num_devices), dtype=bool),
                **{k: np.zeros(n, dtype=np.int64) for k in ("participants", "batch_size")},
                **{k: np.zeros(n) for k in ("sigma", "noise_multiplier", "per_device_noise_var", "received_noise_var",
                                            "convergence_term", "gamma", "rdp_round", "rdp_cumulative",
                                            "rdp_round_sampled", "rdp_round_device", "utility")},
                **({"cost": np.zeros(n)} if self.rdp_budget is not None else {})}

    def next_channel_info(self) -> dict[str, NDArray]:
        """{}: the devices invert their own channels; the server has no CSI."""
        return {}
