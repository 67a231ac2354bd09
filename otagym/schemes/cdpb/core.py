"""The batched core of ``scheme="cdpb"`` (model B, client-driven power balancing: Kim, Seo & Choi,
*Privacy-Enhanced Over-the-Air Federated Learning via Client-Driven Power Balancing*, arXiv:2410.05907; equation and
algorithm numbers below are the paper's).

:class:`CDPBCore` holds N episodes as arrays and steps them with the pure functions of
:mod:`otagym.schemes.cdpb.formulas`, decodes actions with :func:`~otagym.schemes.cdpb.actions.action_to_rho` and
writes observations through :mod:`otagym.schemes.cdpb.observation`; the single and the vector environment of
:mod:`otagym.env` are thin shells around it (the single env is N = 1). :func:`sample_realisation` draws a whole
channel realisation of a scenario, as an episode draws it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from otagym.channel import ChannelModel, FadingState
from otagym.fidelity import TRAIN_ONLY, TrainingOptions, TrainingRuns
from otagym.accounting import ACCOUNTANTS, DEFAULT_ORDERS, DP_ORDERS, EpisodeEpsilon
from otagym.schemes.cdpb.actions import (ACTION_TYPES, NORMALIZED, RHO_FLOOR_RATIO, DeviceDecisions, RhoActionType,
                                         action_space, action_to_rho)
from otagym.schemes.cdpb.formulas import (RoundPowers, convergence_term, noise_multiplier, participation_probability,
                                          round_powers, round_rdp, round_reward)
from otagym.schemes.cdpb.observation import CDPBObservation, entry_names, observation_space, write_observation
from otagym.schemes.cdpb.scenario import CDPBScenario
from otagym.schemes.episodes import restart_rows
from otagym.validation import (AppliesWith, Integer, NUM_ENVS, OneOf, PHYSICAL_RANGE, POSITIVE, Real, Spec, arg,
                               check_dataclass, field_conditions, field_specs, options_of, replayed_trace)

__all__ = ["CDPBEpisodes", "CDPBOptions", "CDPBCore", "sample_realisation", "channel_model"]


def channel_model(s: CDPBScenario) -> ChannelModel:
    """The fading of the K clients' power gains, normalised (E = 1; the gain of client k is this times E[h_k])."""
    return ChannelModel(s.num_clients, 1.0, 1.0, None, s.fading, s.coherence_rounds, s.correlation)


def sample_realisation(s: CDPBScenario, rng: np.random.Generator) -> dict[str, NDArray]:
    """A whole channel realisation of scenario ``s`` for one env as ``reset`` options (less the batch axis):
    ``{"channel_gains": (T, K)}``, the power gains h_k,t drawn by the same ``initial``/``advance`` steps as an
    episode."""
    channel, mean_gain = channel_model(s), s.mean_gain
    state = channel.initial(rng)
    gains = np.empty((s.num_rounds, s.num_clients))
    for t in range(s.num_rounds):
        gains[t] = state.power * mean_gain
        state = channel.advance(rng, state, t + 1)
    return {"channel_gains": gains}


def _check_noise_floor(scenario: CDPBScenario) -> None:
    """``ValueError`` unless a round always has privacy noise: receiver noise, or every client's artificial noise."""
    if scenario.noise_power_w == 0 and not (scenario.strategy == "noisy" and scenario.artificial_noise
                                            and scenario.num_clients >= 2 and scenario.client_sampling == 1):
        raise ValueError(
            "CDPBScenario.noise_power_w must be > 0 for the environment unless every round has privacy noise "
            "without it (strategy='noisy', artificial_noise=True, num_clients >= 2, client_sampling=1): else a "
            "round in which no other client sends noise leaks infinite RDP; got noise_power_w=0")


@dataclass(frozen=True, kw_only=True)
class CDPBOptions(TrainingOptions):
    """The env arguments of client-driven power balancing beside the scenario's fields (``gym.make``'s flat keyword
    arguments), checked once, at construction: each against its spec (:data:`CDPBCore.ARGS`), the training ones
    against ``fidelity`` (:data:`CDPBCore.APPLIES_WITH`).

    Attributes:
        action_type: ``"normalized"`` (a in [-1, 1] -> rho = rho_max (r + (1 - r)(a + 1)/2), linear, r =
            ``rho_min_ratio``) or ``"rho"`` (rho in [0, P/W^2] directly, the closed action space; a rho below
            :data:`~otagym.schemes.cdpb.actions.RHO_FLOOR_RATIO` P/W^2, 0 included, is played as that floor, and
            ``info["rho"]`` is the rho played; :func:`~otagym.schemes.cdpb.actions.action_to_rho` decodes both).
        rho_min_ratio: rho(a = -1) / rho_max, in [1e-12, 1) (:data:`~otagym.schemes.cdpb.actions.RHO_FLOOR_RATIO`:
            rho = 0 would
            make every client reliable and silent, and the estimate's noise infinite).
        dp_orders: RDP orders of the end-of-episode (eps, delta) report under the SGM accounting; ``None`` turns it
            off (the per-round RDP at alpha under both accountings is always reported).
        accountant: ``"rdp"`` (default) or ``"pld"``: the episode's end also reports ``dp_epsilon_pld``, each client's
            rounds of the SGM accounting (rate = its participation, its noise multiplier) composed by their
            privacy loss distribution (:mod:`otagym.accounting.pld`); ``dp_epsilon_pld_from_rdp`` is True where
            the RDP ledger's ε was the smaller and is reported instead.
        fidelity: ``"analytic"`` (default) or ``"train"``, as for model A
            (:class:`otagym.schemes.receive_scaling.core.ReceiveScalingCore`): under ``"train"`` each round also runs
            Algorithm 1 on a real model (:class:`otagym.schemes.cdpb.training.CDPBTraining`) with the round's channels and powers,
            the scenario's d follows the model, and info adds :data:`otagym.fidelity.TRAIN_KEYS`. The training
            arguments below apply only under ``fidelity="train"`` (:attr:`CDPBCore.APPLIES_WITH`): with
            ``"analytic"`` they must keep their defaults.
        dataset: ``"digits"`` (default), ``"mnist"``, ``"fashion-mnist"`` or ``"cifar10"``, as for model A.
        data_dir: the folder of the dataset's files, as for model A (None finds Fashion-MNIST's Debian package).
        data_split: ``"iid"`` (default) or ``"classes"`` (2 classes per client), as for model A.
        data_seed: the seed of the data split, as for model A.
        eval_every: rounds between evaluations of the model (test loss and accuracy), as for model A.
        train_samples: train on a random subset of this many training samples, as for model A.
        eval_samples: evaluate on random subsets of at most this many samples, as for model A.
        eval_gradient: whether an evaluation also measures ||grad f(w)||^2, as for model A.
        local_steps: L, full-batch gradient steps per round on each reliable client under ``fidelity="train"``.
        local_learning_rate: the step size of those local steps.
        reward_scale: the reward is the round's share of -G divided by this (> 0, utility units): 1 keeps -G (24) as
            the return; a benchmark task sets its reference policy's expected G, so that its return is about -1.
    """

    action_type: RhoActionType = arg(NORMALIZED, OneOf(ACTION_TYPES))
    rho_min_ratio: float = arg(1e-3, Real(RHO_FLOOR_RATIO, 1.0, high_open=True))
    dp_orders: tuple[float, ...] | None = arg(DEFAULT_ORDERS, DP_ORDERS)
    accountant: str = arg("rdp", OneOf(ACCOUNTANTS))
    local_steps: int = arg(1, Integer(1, 10_000), TRAIN_ONLY)
    local_learning_rate: float = arg(0.1, Real(0.0, PHYSICAL_RANGE[1], low_open=True), TRAIN_ONLY)
    reward_scale: float = arg(1.0, POSITIVE)

    def __post_init__(self) -> None:
        check_dataclass(self, owner="")


@dataclass
class CDPBEpisodes:
    """The N episodes' state, the core's one struct of it: the running arrays a reset restarts, the observed last
    round, and the round's channel and sampled clients (new arrays each round: the last step's info keeps the old
    ones)."""

    t: NDArray  # (N,) int64, rounds played
    term_sum: NDArray  # (N,) sum of the convergence terms B_t
    rdp_sum: dict[str, NDArray]  # (N, K) each client's cumulative RDP at alpha, by accounting ("sgm", "theorem1")
    last_reliable: NDArray  # (N,) the share of clients reliable in the last round
    last_noise_var: NDArray  # (N,) the last round's received noise variance
    gains: NDArray  # (N, K) the power gains h_k,t of the round about to be played
    sampled: NDArray  # (N, K) bool, the clients sampled for it


class CDPBCore:
    """N independent CDPB episodes as arrays; ``step`` plays one OTA-FL round (Algorithm 1) in each.

    Args:
        scenario: the deployment (:class:`~otagym.schemes.cdpb.scenario.CDPBScenario`).
        num_envs: N.
        options: the env arguments (:class:`CDPBOptions`), checked once; or give them as keyword arguments
            (``env_args``), as ``gym.make`` does.

    ``info["cost"]`` is the round's share of the privacy budget (25c), T (E_t - E_t-1) / eps-bar with E_t the worst
    client's cumulative RDP at alpha: an episode's cost is T E_T / eps-bar, at most T exactly when (25c) holds (a mean
    cost of at most 1 per round, as model A's ``info["cost"]``).
    ``reset(options={"channel_gains": (T, N, K)})`` replays a channel realisation (power gains h_k,t, W/W), on a full
    reset; a later autoreset replays it again. Coins of ``strategy="mixed"`` and client sampling still come from the
    env's generator.
    """

    #: The env arguments (beside the scenario's fields) and their specs, checked at construction.
    #: The option struct whose fields are the env arguments (:class:`CDPBOptions`).
    OPTIONS = CDPBOptions
    ARGS: dict[str, Spec] = field_specs(CDPBOptions)
    #: The env arguments that have an effect only under another's value (elsewhere they must keep their defaults).
    APPLIES_WITH: dict[str, AppliesWith] = field_conditions(CDPBOptions)
    #: Batch axis of each ``reset`` option (a single env inserts it).
    OPTION_AXES: dict[str, int] = {"channel_gains": 1}
    EPISODE_END_KEYS = ("dp_epsilon", "dp_order", "dp_epsilon_pld", "dp_epsilon_pld_from_rdp")

    def __init__(self, scenario: CDPBScenario, num_envs: int, options: CDPBOptions | None = None,
                 **env_args: Any) -> None:
        self.options = args = options_of(CDPBOptions, options, env_args)
        num_envs = NUM_ENVS("num_envs", num_envs)
        self.reward_scale, self.fidelity = args.reward_scale, args.fidelity
        self._local = {"local_steps": args.local_steps, "learning_rate": args.local_learning_rate}
        self.training = TrainingRuns.create(args, scenario.num_clients, num_envs, scenario.num_rounds)
        if self.training is not None:  # the powers spread over the d coordinates of the model that is trained
            scenario = scenario.replace(model_dim=self.training.federation.model_dim)
        _check_noise_floor(scenario)
        self.scenario, self.num_envs, self.num_rounds = scenario, num_envs, scenario.num_rounds
        self.action_type, self.rho_min_ratio = args.action_type, float(args.rho_min_ratio)
        self.channel, self.mean_gain = channel_model(scenario), scenario.mean_gain
        self.obs_dim = len(entry_names(scenario))
        self._noise_ref = scenario.num_clients * scenario.power_max_w * float(self.mean_gain.mean())
        self._allocate_episodes(args.dp_orders, args.accountant)

    def _allocate_episodes(self, dp_orders: Sequence[float] | None, accountant: str) -> None:
        """The N episodes' state (:attr:`state`, at its zero: a reset fills it), ledger and channel process."""
        n, k = self.num_envs, self.scenario.num_clients
        #: The episodes' state, one struct (:class:`CDPBEpisodes`).
        self.state = CDPBEpisodes(t=np.zeros(n, dtype=np.int64), term_sum=np.zeros(n),
                                  rdp_sum={acc: np.zeros((n, k)) for acc in ("sgm", "theorem1")},
                                  last_reliable=np.zeros(n), last_noise_var=np.zeros(n), gains=np.zeros((n, k)),
                                  sampled=np.ones((n, k), dtype=bool))
        self.episode_epsilon = EpisodeEpsilon((n, k), dp_orders, accountant)
        self.fading: FadingState | None = None
        self.trace: NDArray | None = None

    @property
    def t(self) -> NDArray:
        """(N,) rounds played in each episode (``state.t``)."""
        return self.state.t

    # --- spaces ----------------------------------------------------------------------------------------------
    def observation_space(self) -> spaces.Box:
        return observation_space(self.scenario)

    def action_space(self) -> spaces.Box:
        return action_space(self.action_type, self.scenario.rho_max)

    def option_shapes(self) -> dict[str, tuple[tuple[int, ...], ...]]:
        """The shapes of each ``reset`` option: ``channel_gains`` (T, N, K)."""
        return {"channel_gains": ((self.num_rounds, self.num_envs, self.scenario.num_clients),)}

    # --- episode boundaries ----------------------------------------------------------------------------------
    def reset(self, rng: np.random.Generator, mask: NDArray | None = None, *,
              channel_gains: NDArray | None = None) -> None:
        """Start new episodes where ``mask`` is True (all if None); ``channel_gains`` (T, N, K) replays the power
        gains h_k,t of a realisation (a full reset only; an autoreset replays it again)."""
        n = self.num_envs
        rows = np.ones(n, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        self.trace = replayed_trace("channel_gains", channel_gains, self.trace, self.option_shapes()["channel_gains"],
                                    mask)
        fresh = self.channel.initial(rng, (n,))
        self.fading = fresh if (self.fading is None or mask is None) else self.fading.where(rows, fresh)
        state = self.state
        restart_rows(rows, state.t, state.term_sum, *state.rdp_sum.values(), state.last_reliable, state.last_noise_var)
        self.episode_epsilon.reset(rows)
        self._draw_round_state(rng, rows)
        if self.training is not None:  # a fresh model per new episode (Algorithm 1)
            from otagym.schemes.cdpb.training import CDPBTraining

            w, local = self.scenario.grad_bound, self._local
            self.training.reset(rng, rows, lambda fed, child: CDPBTraining(
                fed.fresh_model(child), fed.device_data, w, local["local_steps"], local["learning_rate"],
                test_data=fed.test_data, eval_data=fed.eval_data))

    def _draw_round_state(self, rng: np.random.Generator, rows: NDArray | None = None) -> None:
        """The next round's channel (new arrays: the last step's info keeps the old ones) and sampled clients."""
        state = self.state
        if self.trace is None:
            state.gains = self.fading.power * self.mean_gain
        else:
            state.gains = self.trace[np.minimum(state.t, self.num_rounds - 1), np.arange(self.num_envs)]
        s = self.scenario
        if s.client_sampling < 1.0:
            fresh = rng.random((s.num_clients, self.num_envs)).T < s.client_sampling
            state.sampled = fresh if rows is None else np.where(rows[:, None], fresh, state.sampled)

    def sample_realisation(self, rng: np.random.Generator) -> dict[str, NDArray]:
        """:func:`sample_realisation` of the core's scenario."""
        return sample_realisation(self.scenario, rng)

    # --- actions ---------------------------------------------------------------------------------------------
    def action_to_rho(self, action: NDArray) -> NDArray:
        """rho for each env from the action, validated (:func:`~otagym.schemes.cdpb.actions.action_to_rho` with the
        core's action type and range)."""
        return action_to_rho(action, self.num_envs, action_type=self.action_type, rho_max=self.scenario.rho_max,
                             rho_min_ratio=self.rho_min_ratio)

    def participation(self, rho: NDArray, reliable: NDArray, devices: DeviceDecisions | None = None) -> NDArray:
        """The sampling rate the accountant may use per client (N, K): p_k(rho) times the client sampling rate when
        the server cannot see who transmits and fading is i.i.d. over rounds (p_k at the device's own threshold
        c_k h_th where ``devices`` decide); the realised 0/1 participation with CSI feedback; 1 for correlated fading
        (participation is then not independent across rounds: no amplification); 0 for a device that has left."""
        s = self.scenario
        if s.csi_feedback:
            return reliable.astype(float)
        if s.fading != "iid":
            q = np.ones(reliable.shape)
        else:
            scale = 1.0 if devices is None else devices.threshold_scale
            q = s.client_sampling * participation_probability(s, rho, threshold_scale=scale)
        return q if devices is None else np.where(devices.active, q, 0.0)

    # --- the round -------------------------------------------------------------------------------------------
    def step(self, rng: np.random.Generator, action: NDArray) -> tuple[NDArray, NDArray, dict[str, NDArray]]:
        """One round in every env: ``(reward (N,), terminated (N,), info arrays)``; the caller builds obs.

        reward = -(lambda_1 * 6 B_t / tau^2 + lambda_2 (max_k E_k,t - max_k E_k,t-1)) / ``reward_scale``, with E the
        cumulative RDP of the scenario's accounting, so the return of an episode of tau rounds is -G (24) /
        ``reward_scale`` with gamma = 6 mean(B)/tau.
        """
        return self.play_round(rng, self.action_to_rho(action))

    def play_round(self, rng: np.random.Generator, rho: NDArray, devices: DeviceDecisions | None = None
                   ) -> tuple[NDArray, NDArray, dict[str, NDArray]]:
        """:meth:`step` at the server's ``rho`` (N,), each device following the paper's rule or, with ``devices``,
        its own decisions (:class:`~otagym.schemes.cdpb.actions.DeviceDecisions`: its threshold, its noise portion,
        whether it is still in): the one round both the single env and the devices' env
        (:mod:`otagym.multiagent`) play."""
        s, state = self.scenario, self.state
        pw = self._powers(rng, rho, devices)
        k_t = pw.num_reliable
        term = convergence_term(s, k_t, pw.noise_var, rho)
        q = self.participation(rho, pw.reliable, devices)
        rdp, before, after = self._account(rho, pw, q, devices)
        state.term_sum += term
        if self.training is not None:  # the round of Algorithm 1 on the real model, with these channels and powers
            gains = state.gains
            self.training.round(state.t + 1, lambda i, engine, g: engine.round(g, s, float(rho[i]), gains[i],
                                                                               pw.row(i)))
        reward = round_reward(s, term, after - before, self.reward_scale)
        state.t += 1
        gamma = 6.0 * state.term_sum / (state.t * state.t)  # convergence error after t rounds (6 mean B / t)
        info = self._round_info(rho, pw, term, q, rdp, gamma, (before, after))
        if self.training is not None:
            info.update(self.training.info())
        state.last_reliable = k_t / s.num_clients
        state.last_noise_var = pw.noise_var.copy()  # info keeps pw.noise_var; an autoreset zeroes this one
        terminated = state.t >= s.num_rounds
        info.update(self.episode_epsilon.report(s.delta, terminated))
        self.fading = self.channel.advance(rng, self.fading, self.t)
        self._draw_round_state(rng)
        return reward, terminated, info

    def _powers(self, rng: np.random.Generator, rho: NDArray, devices: DeviceDecisions | None) -> RoundPowers:
        """The round's transmit powers (:func:`~otagym.schemes.cdpb.formulas.round_powers`): each client's coin
        (noisy or not: its strategy, or a device's own noise portion) and who may transmit (client sampling, devices
        still in)."""
        s = self.scenario
        portion = s.portion if devices is None or devices.noise_portion is None else devices.noise_portion
        if s.strategy == "mixed" or (devices is not None and devices.noise_portion is not None):
            coins = rng.random((s.num_clients, self.num_envs)).T < portion
        else:
            coins = np.full((self.num_envs, s.num_clients), s.strategy == "noisy")
        sampled = None if s.client_sampling == 1.0 else self.state.sampled
        if devices is not None:
            sampled = devices.active if sampled is None else sampled & devices.active
        return round_powers(s, rho, self.state.gains, coins, sampled, None if devices is None else devices.threshold_scale)

    def _account(self, rho: NDArray, pw: RoundPowers, q: NDArray, devices: DeviceDecisions | None
                 ) -> tuple[dict[str, NDArray], NDArray, NDArray]:
        """The round's RDP per client under each accounting, added to the running sums and the episode's privacy
        report; with the worst client's cumulative RDP (the scenario's accounting) before and after it."""
        s = self.scenario
        total = pw.noise_var[:, None]
        others = pw.noise_var_others(s.noise_power_w)
        rdp = {acc: round_rdp(s, rho, q, others, total, accounting=acc) for acc in ("sgm", "theorem1")}
        if devices is not None:  # a device that has left leaks nothing (Theorem 1 as printed charges p = 0 log 2/(a-1))
            rdp = {acc: np.where(devices.active, r, 0.0) for acc, r in rdp.items()}
        rdp_sum = self.state.rdp_sum
        before = rdp_sum[s.accounting].max(axis=-1)
        for acc, r in rdp.items():
            rdp_sum[acc] += r
        after = rdp_sum[s.accounting].max(axis=-1)
        self.episode_epsilon.record(  # the mechanism of round_rdp's SGM accounting, per client
            lambda orders: round_rdp(s, rho, q, others, total, accounting="sgm", orders=orders), q,
            noise_multiplier(s, rho[:, None], others))
        return rdp, before, after

    def _round_info(self, rho: NDArray, pw: RoundPowers, term: NDArray, q: NDArray, rdp: dict[str, NDArray],
                    gamma: NDArray, worst_rdp: tuple[NDArray, NDArray]) -> dict[str, NDArray]:
        """``step``'s info about the round just played (``worst_rdp``: the worst client's cumulative RDP under the
        scenario's accounting before and after it)."""
        s, tau, (before, after) = self.scenario, self.scenario.num_rounds, worst_rdp
        k_t, rdp_sum = pw.num_reliable, self.state.rdp_sum
        return {
            "round": self.t - 1,
            "rho": rho,
            "h_threshold": rho * s.grad_bound**2 / s.power_max_w,
            "channel_gain": self.state.gains,
            "reliable": pw.reliable,
            "num_reliable": k_t,
            "sends_noise": pw.sends_noise,
            "transmit_power_w": pw.transmit_power_w,
            "signal_power_w": pw.signal_power_w,
            "noise_power_w": pw.noise_power_w,
            "noise_var": pw.noise_var,
            "estimate_noise_var": pw.noise_var / (rho * np.maximum(k_t, 1) ** 2),
            "convergence_term": term,
            "gamma": gamma,
            "participation": q,
            "rdp_round": rdp[s.accounting],
            "rdp_cumulative": rdp_sum[s.accounting].copy(),
            "rdp_round_sgm": rdp["sgm"],
            "rdp_round_theorem1": rdp["theorem1"],
            "epsilon_sgm": rdp_sum["sgm"].max(axis=-1),
            "epsilon_theorem1": rdp_sum["theorem1"].max(axis=-1),
            "utility": s.lambda_convergence * gamma + s.lambda_privacy * after,
            "cost": tau * (after - before) / s.epsilon_max,
        }

    def observation(self) -> NDArray:
        """Observations (N, entries), float32, in the layout of :mod:`otagym.schemes.cdpb.observation` (its entry
        names: :func:`~otagym.schemes.cdpb.observation.entry_names`)."""
        s, state = self.scenario, self.state
        log_gain = sampled = None
        if s.csi_feedback:
            with np.errstate(divide="ignore"):  # a zero gain only from a replayed realisation; clipped when written
                log_gain = np.log10(state.gains / self.mean_gain)
            if s.client_sampling < 1.0:
                sampled = state.sampled.astype(float)
        return write_observation(CDPBObservation(
            round_fraction=state.t / s.num_rounds,
            reliable_share=state.last_reliable,
            log_noise_var=np.where(state.last_noise_var > 0,
                                   np.log10(np.maximum(state.last_noise_var / self._noise_ref, 1e-300)), 0.0),
            log_convergence=np.log10(1.0 + 6.0 * state.term_sum / (s.num_rounds**2 * s.gamma_max)),
            log_privacy=np.log10(1.0 + state.rdp_sum[s.accounting].max(axis=-1) / s.epsilon_max),
            log_channel_gain=log_gain, sampled=sampled))

    def reset_info(self) -> dict[str, NDArray]:
        """:meth:`next_channel_info` (the mean gains; with CSI feedback the first round's channel), under the training
        fidelity the initial model's metrics, and :meth:`blank_round_info`. Its keys are those of every ``step``'s
        info (less :attr:`EPISODE_END_KEYS`)."""
        return {**self.blank_round_info(), **self.next_channel_info(),
                **(self.training.info() if self.training is not None else {})}

    def blank_round_info(self) -> dict[str, NDArray]:
        """``step``'s entries about the round just played, before the first round: ``round`` -1 and 0 (False)
        elsewhere, for ``reset``'s info (:meth:`otagym.schemes.receive_scaling.core.ReceiveScalingCore.blank_round_info`
        says why)."""
        n, k = self.num_envs, self.scenario.num_clients
        return {"round": self.t - 1, "num_reliable": np.zeros(n, dtype=np.int64),
                **{key: np.zeros((n, k), dtype=bool) for key in ("reliable", "sends_noise")},
                **{key: np.zeros(n) for key in ("rho", "h_threshold", "noise_var", "estimate_noise_var",
                                                "convergence_term", "gamma", "epsilon_sgm", "epsilon_theorem1",
                                                "utility", "cost")},
                **{key: np.zeros((n, k)) for key in ("channel_gain", "transmit_power_w", "signal_power_w",
                                                     "noise_power_w", "participation", "rdp_round", "rdp_cumulative",
                                                     "rdp_round_sgm", "rdp_round_theorem1")}}

    def next_channel_info(self) -> dict[str, NDArray]:
        """What the server knows of the round the next action applies to: the clients' mean gains E[h_k] (the channel
        distribution) and, with ``csi_feedback``, their gains (and the sampled clients)."""
        info = {"mean_channel_gain": np.broadcast_to(self.mean_gain, (self.num_envs, self.mean_gain.size)).copy()}
        if self.scenario.csi_feedback:
            info.update(next_channel_gain=self.state.gains.copy(), next_sampled=self.state.sampled.copy())
        return info
