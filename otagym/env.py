"""``OTAPrivacyEnv`` and its natively vectorised twin ``OTAPrivacyVectorEnv`` (model A: channel inversion + receive
scaling, AdaScale paper §IV-V). One step is one federated-learning round.

Both classes are thin shells around :class:`Rounds`, which holds N episodes as numpy arrays and steps them with the
pure functions of :mod:`otagym.receive_scaling`, :mod:`otagym.channel` and :mod:`otagym.privacy`; the single env is
``Rounds`` with N = 1, so the physics exists once.
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from numpy.typing import NDArray

from otagym.cdpb import CDPBScenario, get_cdpb_scenario
from otagym.cdpb_env import CDPBRounds
from otagym.channel import ChannelModel, FadingState, mean_channel_gain
from otagym.privacy import DEFAULT_ORDERS, RDPLedger
from otagym.receive_scaling import ReceiveScalingModel
from otagym.scenario import Scenario, get_scenario

__all__ = ["OTAPrivacyEnv", "OTAPrivacyVectorEnv", "Rounds", "ActionType", "RewardMode", "Scheme", "make_rounds"]

ActionType = Literal["normalized", "x", "eta"]
RewardMode = Literal["lagrangian", "log"]
Scheme = Literal["receive_scaling", "cdpb"]

#: Default Lagrange weight of the reward: about the dual price of the convergence budget that OfflineOptimal finds
#: at nu = 0.04 on paper-mnist, so that maximising the default reward is close to the paper's problem (28).
DEFAULT_REWARD_LAMBDA = 0.01



class Rounds:
    """N independent model-A episodes as arrays; ``step`` advances all of them by one round.

    Args:
        scenario: the deployment.
        num_envs: N.
        action_type: ``"normalized"`` (a in [-1, 1] -> x on a log scale, see :meth:`action_to_x`), ``"x"``
            (x_t in (0, x_max] directly) or ``"eta"`` (eta_t in (0, x_max h_min,t^2]).
        x_min_ratio: floor of the normalised mapping, x(a=-1) = x_min_ratio * x_max, in (0, 1).
        reward_mode: ``"lagrangian"`` or ``"log"`` (see :class:`OTAPrivacyEnv`).
        reward_lambda: the weight lambda of the convergence term in the reward (>= 0).
        dp_orders: RDP orders of the end-of-episode (eps, delta) report; ``None`` turns the all-order ledger off
            (the per-round and cumulative RDP at alpha are always reported).
    """

    #: Batch axis of each ``reset`` option (a single env inserts it).
    OPTION_AXES = {"distances_m": 0, "channel_gains": 1}
    EPISODE_END_KEYS = ("dp_epsilon", "dp_order")

    def __init__(
        self,
        scenario: Scenario,
        num_envs: int,
        *,
        action_type: ActionType = "normalized",
        x_min_ratio: float = 1e-3,
        reward_mode: RewardMode = "lagrangian",
        reward_lambda: float = DEFAULT_REWARD_LAMBDA,
        dp_orders: Sequence[float] | None = DEFAULT_ORDERS,
    ) -> None:
        if action_type not in ("normalized", "x", "eta"):
            raise ValueError(f"action_type must be 'normalized', 'x' or 'eta'; got {action_type!r}")
        if reward_mode not in ("lagrangian", "log"):
            raise ValueError(f"reward_mode must be 'lagrangian' or 'log'; got {reward_mode!r}")
        if not 0.0 < x_min_ratio < 1.0:
            raise ValueError(f"x_min_ratio must lie in (0, 1); got {x_min_ratio}")
        if not (np.isfinite(reward_lambda) and reward_lambda >= 0):
            raise ValueError(f"reward_lambda must be finite and >= 0; got {reward_lambda}")
        if int(num_envs) != num_envs or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1; got {num_envs}")
        self.scenario = scenario
        self.num_rounds = scenario.num_rounds
        self.model = ReceiveScalingModel(scenario)
        self.channel = ChannelModel.from_scenario(scenario)
        self.num_envs = n = int(num_envs)
        self.action_type = action_type
        self.x_min_ratio = float(x_min_ratio)
        self._log_x_min_ratio_half = 0.5 * float(np.log(x_min_ratio))
        self.reward_mode = reward_mode
        self.reward_lambda = float(reward_lambda)
        m, c = scenario.num_devices, self.model.class_q.size
        self.obs_dim = 2 * m + 3
        self.t = np.zeros(n, dtype=np.int64)
        self.cost_sum = np.zeros(n)
        self.class_rdp_sum = np.zeros((n, c))
        self.ledger = (
            RDPLedger(np.broadcast_to(self.model.class_q, (n, c)), orders=dp_orders) if dp_orders is not None else None
        )
        self.distances_m = np.zeros((n, m))
        self.mean_gain = np.zeros((n, m))
        self.fading: FadingState | None = None
        self.gains = np.zeros((n, m))
        self.h_min2 = np.zeros(n)
        self.trace: NDArray | None = None
        self._log10_snr_scale = np.log10(self.model.inv_k2 * self.model.x_max / self.model.cost_scale)
        self._log10_hmin_scale = float(np.log10(self.model.x_max / self.model.cost_scale))
        self._obs = np.zeros((n, self.obs_dim), dtype=np.float32, order="F")  # columns filled from device-major data

    # --- episode boundaries ----------------------------------------------------------------------------------
    def reset(
        self,
        rng: np.random.Generator,
        mask: NDArray | None = None,
        *,
        distances_m: NDArray | None = None,
        channel_gains: NDArray | None = None,
    ) -> None:
        """Start new episodes where ``mask`` is True (all if None).

        ``distances_m`` (N, M) fixes the placement; ``channel_gains`` (T, N, M) replays a channel trace |h|^2 for this
        episode instead of sampling (a full reset only).
        """
        n, m, big_t = self.num_envs, self.scenario.num_devices, self.scenario.num_rounds
        rows = np.ones(n, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        if channel_gains is not None:
            if mask is not None:
                raise ValueError("channel_gains can only be replayed on a full reset")
            g = np.asarray(channel_gains, dtype=float)
            if g.shape != (big_t, n, m):
                raise ValueError(f"channel_gains must have shape (num_rounds, num_envs, M) = {(big_t, n, m)}; "
                                 f"got {g.shape}")
            if not np.all(np.isfinite(g) & (g > 0)):
                raise ValueError("channel_gains must be finite and > 0 (|h|^2, linear)")
            self.trace = g
        elif mask is None:
            self.trace = None
        dist = self.channel.draw_distances(rng, (n,)) if distances_m is None else np.asarray(distances_m, float)
        if dist.shape != (n, m) or not np.all(np.isfinite(dist) & (dist >= 1.0)):
            raise ValueError(f"distances_m must be finite, >= 1 m, with shape {(n, m)}")
        fresh = self.channel.initial(rng, (n,))
        if self.fading is None or mask is None:
            self.fading = fresh
            self.distances_m = dist
        else:
            self.fading = self.fading.where(rows, fresh)
            self.distances_m = np.where(rows[:, None], dist, self.distances_m)
        self.mean_gain = mean_channel_gain(self.distances_m)
        self.t[rows] = 0
        self.cost_sum[rows] = 0.0
        self.class_rdp_sum[rows] = 0.0
        if self.ledger is not None:
            self.ledger.reset(None if mask is None else rows)
        self._set_gains()

    def _set_gains(self) -> None:
        if self.trace is not None:
            self.gains = self.trace[np.minimum(self.t, self.scenario.num_rounds - 1), np.arange(self.num_envs)]
        else:
            self.gains = self.fading.power * self.mean_gain
        self.h_min2 = self.model.h_min2(self.gains)

    # --- actions ---------------------------------------------------------------------------------------------
    def action_to_x(self, action: NDArray) -> NDArray:
        """x_t for each env from the action, validated.

        * normalized: x = x_max * x_min_ratio ** ((1 - a) / 2), a in [-1, 1] (log scale; a = 1 is full power).
        * x: x in (0, x_max]. * eta: x = eta / h_min,t^2 in (0, x_max].
        Values above x_max by less than 1e-9 relative (rounding in a policy) are clipped to x_max.
        """
        a = np.asarray(action, dtype=float).reshape(self.num_envs)
        x_max = self.model.x_max
        if self.action_type == "normalized":
            if not (np.abs(a) <= 1.0).all():  # also catches NaN
                bad = a[~(np.abs(a) <= 1.0)][:3]
                raise ValueError(f"action (normalized) must be finite and lie in [-1, 1]; got {bad}")
            return x_max * np.exp(self._log_x_min_ratio_half * (1.0 - a))
        if not np.all(np.isfinite(a)):
            raise ValueError(f"action must be finite; got {a[~np.isfinite(a)][:3]}")
        x = a if self.action_type == "x" else a / self.h_min2
        bad = ~((x > 0) & (x <= x_max * (1 + 1e-9)))
        if np.any(bad):
            if self.action_type == "x":
                raise ValueError(f"action (x) must lie in (0, x_max={x_max:.6g}]; got {x[bad][:3]}")
            raise ValueError(f"action (eta) must lie in (0, x_max * h_min^2 = {(x_max * self.h_min2)[bad][:3]}]; "
                             f"got {a[bad][:3]}")
        return np.minimum(x, x_max)

    # --- the round -------------------------------------------------------------------------------------------
    def step(self, rng: np.random.Generator, action: NDArray) -> tuple[NDArray, NDArray, dict[str, NDArray]]:
        """One FL round in every env. Returns ``(reward (N,), terminated (N,), info arrays)``; the caller builds obs.

        The info arrays describe the round just played; episode-end entries (``dp_epsilon``, ``dp_order``) are
        present when any env terminated (valid where ``terminated``).
        """
        model, s = self.model, self.scenario
        x = self.action_to_x(action)
        eta = x * self.h_min2
        u = model.class_inverse_noise_var(eta)  # (N, C)
        class_rdp = model.curve.rdp(u)
        class_sigma = u ** -0.5  # u > 0: x > 0 and h_min^2 > 0
        leak = (class_rdp * model.class_counts).sum(axis=-1)  # not @: BLAS order depends on N
        cost = model.convergence_cost(x, self.h_min2)
        if self.reward_mode == "lagrangian":
            reward = -leak - self.reward_lambda * (cost - s.nu)
        else:
            leak_full = model.leakage(model.x_max, self.h_min2)
            reward = -np.log1p(leak / leak_full) - self.reward_lambda * np.log1p(cost / s.nu)
        self.class_rdp_sum += class_rdp
        self.cost_sum += cost
        if self.ledger is not None:
            self.ledger.record(class_sigma)
        self.t += 1
        dc = model.device_class
        info: dict[str, NDArray] = {
            "round": self.t - 1,
            "x": x,
            "receive_scaling": eta,
            "h_min2": self.h_min2,
            "channel_gain": self.gains,
            "noise_multiplier": class_sigma[:, dc],
            "rdp_round": class_rdp[:, dc],
            "rdp_cumulative": self.class_rdp_sum[:, dc],
            "leakage": leak,
            "convergence_cost": cost,
            "convergence_cost_mean": self.cost_sum / self.t,
            "transmit_power_w": model.transmit_power_w(eta, self.gains),
        }
        terminated = self.t >= s.num_rounds
        if self.ledger is not None and terminated.any():
            eps, order = self.ledger.epsilon(s.delta)
            info["dp_epsilon"] = eps[:, dc]
            info["dp_order"] = order[:, dc]
        if self.trace is None:
            self.fading = self.channel.advance(rng, self.fading, self.t)
        self._set_gains()
        return reward, terminated, info

    def observation_space(self) -> spaces.Box:
        return spaces.Box(-np.inf, np.inf, shape=(self.obs_dim,), dtype=np.float32)

    def action_space(self) -> spaces.Box:
        if self.action_type == "normalized":
            return spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        high = self.model.x_max if self.action_type == "x" else np.inf
        return spaces.Box(0.0, high, shape=(1,), dtype=np.float64)

    def observation(self) -> NDArray:
        """Observations (N, 2M + 3), float32 -- see the table in :class:`OTAPrivacyEnv`."""
        m, s = self.scenario.num_devices, self.scenario
        obs = self._obs
        obs[:, :m] = np.log10(self.gains) + self._log10_snr_scale
        obs[:, m] = np.log10(self.h_min2) + self._log10_hmin_scale
        obs[:, m + 1] = self.t / s.num_rounds
        obs[:, m + 2] = (self.cost_sum - s.nu * self.t) / (s.nu * s.num_rounds)
        obs[:, m + 3:] = self.class_rdp_sum[:, self.model.device_class]
        return obs.copy()

    def reset_info(self) -> dict[str, NDArray]:
        """Constants of the new episodes that policies may use (placement, mean gains) and the first channel."""
        return {"distances_m": self.distances_m.copy(), **self.next_channel_info()}

    def next_channel_info(self) -> dict[str, NDArray]:
        """The channel of the round the next action applies to, in float64 (the observation has it log-scaled)."""
        return {"next_channel_gain": self.gains.copy(), "next_h_min2": self.h_min2.copy(),
                "mean_channel_gain": self.mean_gain.copy()}


def make_rounds(scheme: Scheme, scenario: Any, num_envs: int, kwargs: dict[str, Any]) -> "Rounds | CDPBRounds":
    """The batched core of ``scheme`` with env keyword arguments split from scenario overrides.

    ``scenario=None`` picks the scheme's preset (``paper-mnist`` or ``paper-cdpb``).
    """
    if scheme == "receive_scaling":
        core, get, env_keys = Rounds, get_scenario, {"action_type", "x_min_ratio", "reward_mode", "reward_lambda",
                                                    "dp_orders"}
        default = "paper-mnist"
    elif scheme == "cdpb":
        core, get, env_keys = CDPBRounds, get_cdpb_scenario, {"action_type", "rho_min_ratio", "dp_orders"}
        default = "paper-cdpb"
    else:
        raise ValueError(f"scheme must be 'receive_scaling' or 'cdpb'; got {scheme!r}")
    env_kwargs = {k: v for k, v in kwargs.items() if k in env_keys}
    overrides = {k: v for k, v in kwargs.items() if k not in env_keys}
    return core(get(default if scenario is None else scenario, **overrides), num_envs, **env_kwargs)


def _reset_options(rounds: "Rounds | CDPBRounds", options: dict[str, Any] | None, single: bool) -> dict[str, Any]:
    opts = dict(options or {})
    unknown = set(opts) - set(rounds.OPTION_AXES)
    if unknown:
        raise ValueError(f"unknown reset option(s) {sorted(unknown)}; allowed: {sorted(rounds.OPTION_AXES)}")
    if single:
        opts = {k: None if v is None else np.expand_dims(np.asarray(v, float), rounds.OPTION_AXES[k])
                for k, v in opts.items()}
    return opts


class OTAPrivacyEnv(gym.Env[NDArray[np.float32], NDArray]):
    """Privacy-aware receive scaling in over-the-air federated learning (model A of the AdaScale paper).

    Each step is one FedSGD round: M devices invert their Rayleigh channels and transmit clipped, Poisson-batched
    gradients; the server picks its receive scaling eta_t = x_t h_min,t^2 (eq. (23)). The receiver noise is the
    privacy noise: device m's noise multiplier is sigma_m,t = M B_m sigma_n / (sqrt(2 x_t) G h_min,t) (eq. (25)) and
    the round leaks rho_alpha(q_m, sigma_m,t) RDP (eq. (9)); the convergence surrogate of the round is
    c_t = d sigma_n^2 / h_min,t^2 (1/x_t - 1/x_max) (eq. (28b)).

    Observation (``Box(-inf, inf, (2M+3,), float32)``), for the channel of the round about to be played:

    ============  ======================================================================================
    index         meaning
    ============  ======================================================================================
    0..M-1        log10 s_m,t, s_m,t = |h_m,t|^2 x_max / (k_m^2 d sigma_n^2): per-device channel quality
    M             log10 s_t with s_t = h_min,t^2 x_max / (d sigma_n^2) (so c_t(x) = (x_max/x - 1) / s_t)
    M+1           t / T, the fraction of rounds played
    M+2           (sum_{tau<t} c_tau - nu t) / (nu T): convergence budget used beyond nu per round
    M+3..2M+2     cumulative RDP of each device at alpha (nats)
    ============  ======================================================================================

    Action: ``Box(-1, 1, (1,), float32)`` by default, mapped on a log scale to x = x_max * r^((1-a)/2) with floor
    r = ``x_min_ratio`` (1e-3): a = 1 is full power (x_max), a = -1 is x_max / 1000. ``action_type="x"`` takes x_t in
    (0, x_max] directly and ``action_type="eta"`` takes eta_t in (0, x_max h_min,t^2]; both are for analytic policies.

    Reward (``reward_mode``), with L_t = sum_m rho_alpha(q_m, sigma_m,t) (the summand of objective (28a)):

    ==============  =============================================================================================
    ``lagrangian``  -L_t - lambda (c_t - nu): the Lagrangian of problem (28) per round (default)
    ``log``         -log(1 + L_t / L_t^max) - lambda log(1 + c_t / nu), L_t^max the leakage at x_max this round
    ==============  =============================================================================================

    ``info`` (every step): ``round``, ``x``, ``receive_scaling`` (eta), ``h_min2``, ``channel_gain`` (|h_m|^2),
    ``noise_multiplier`` (M), ``rdp_round`` (M, at alpha), ``rdp_cumulative`` (M), ``leakage`` (L_t),
    ``convergence_cost`` (c_t), ``convergence_cost_mean`` (average c so far), ``transmit_power_w`` (M, eq. (14));
    at the last step also ``dp_epsilon`` (M, at delta over all ``dp_orders``) and ``dp_order``; and
    ``next_channel_gain`` / ``next_h_min2``, the channel of the round the *next* action applies to (float64), and
    ``mean_channel_gain`` (1/PL_m of the current placement).
    ``reset`` returns ``distances_m``, ``mean_channel_gain`` (1/PL_m), ``next_channel_gain`` and ``next_h_min2``.

    Episodes terminate after T = ``scenario.num_rounds`` rounds (the FL run ends; t/T is observed).

    Args:
        scenario: preset name (``"paper-mnist"``, ``"paper-cifar10"``) or a :class:`Scenario`.
        action_type, x_min_ratio, reward_mode, reward_lambda, dp_orders: see :class:`Rounds`.
        **overrides: any :class:`Scenario` field (e.g. ``num_rounds=100, nu=0.02``).

    ``reset(options=...)`` accepts ``distances_m`` (M,) and ``channel_gains`` (T, M) to replay a channel realisation.
    """

    metadata = {"render_modes": []}

    def __init__(self, scenario: str | Scenario | CDPBScenario | None = None, render_mode: str | None = None, *,
                 scheme: Scheme = "receive_scaling", **kwargs: Any):
        if render_mode is not None:
            raise ValueError(f"render_mode must be None (no rendering); got {render_mode!r}")
        self.scheme = scheme
        self.rounds = make_rounds(scheme, scenario, 1, kwargs)
        self.scenario = self.rounds.scenario
        self.model = getattr(self.rounds, "model", None)
        self.observation_space = self.rounds.observation_space()
        self.action_space = self.rounds.action_space()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.rounds.reset(self.np_random, **_reset_options(self.rounds, options, single=True))
        return self.rounds.observation()[0], {k: v[0] for k, v in self.rounds.reset_info().items()}

    def step(self, action: NDArray):
        if self.rounds.t[0] >= self.rounds.num_rounds:
            raise RuntimeError("episode is over (T rounds played): call reset()")
        reward, terminated, info = self.rounds.step(self.np_random, action)
        info.update(self.rounds.next_channel_info())
        obs = self.rounds.observation()[0]
        return obs, float(reward[0]), bool(terminated[0]), False, {k: v[0] for k, v in info.items()}


class OTAPrivacyVectorEnv(VectorEnv):
    """Natively vectorised :class:`OTAPrivacyEnv`: N episodes stepped as numpy arrays by the same :class:`Rounds`.

    Autoreset is ``SAME_STEP``: when an episode ends, the returned observation is the first of the next episode, and
    ``info["final_obs"]`` / ``info["final_info"]`` (masked by ``"_final_obs"`` / ``"_final_info"``) hold the last
    observation and the info of the ending step. Every other info entry is an array over envs with an all-True
    ``"_key"`` mask, except the episode-end keys (``dp_epsilon``, ``dp_order``), masked by ``terminated``.
    ``reset(options=...)`` accepts ``distances_m`` (N, M) and ``channel_gains`` (T, N, M).
    """

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, num_envs: int = 8, scenario: str | Scenario | CDPBScenario | None = None,
                 render_mode: str | None = None, *, scheme: Scheme = "receive_scaling", **kwargs: Any):
        if render_mode is not None:
            raise ValueError(f"render_mode must be None (no rendering); got {render_mode!r}")
        self.scheme = scheme
        self.rounds = make_rounds(scheme, scenario, num_envs, kwargs)
        self.scenario = self.rounds.scenario
        self.model = getattr(self.rounds, "model", None)
        self.num_envs = self.rounds.num_envs
        self.single_observation_space = self.rounds.observation_space()
        self.single_action_space = self.rounds.action_space()
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._all = np.ones(self.num_envs, dtype=bool)

    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None):
        if seed is not None and not np.isscalar(seed):
            raise ValueError("seed must be a single int for OTAPrivacyVectorEnv (one generator drives all envs)")
        super().reset(seed=seed)
        self.rounds.reset(self.np_random, **_reset_options(self.rounds, options, single=False))
        info = self.rounds.reset_info()
        info.update({f"_{k}": self._all for k in list(info)})
        return self.rounds.observation(), info

    def step(self, actions: NDArray):
        reward, terminated, info = self.rounds.step(self.np_random, actions)
        masks = {f"_{k}": (terminated if k in self.rounds.EPISODE_END_KEYS else self._all) for k in info}
        if terminated.any():
            final_obs = self.rounds.observation()
            final_info = dict(info, **masks)
            self.rounds.reset(self.np_random, terminated)
            info["final_obs"], masks["_final_obs"] = final_obs, terminated
            info["final_info"], masks["_final_info"] = final_info, terminated
        nxt = self.rounds.next_channel_info()  # after the autoreset: the channel the next actions apply to
        info.update(nxt)
        masks.update({f"_{k}": self._all for k in nxt})
        info.update(masks)
        return self.rounds.observation(), reward, terminated, np.zeros(self.num_envs, dtype=bool), info
