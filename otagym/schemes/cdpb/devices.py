"""CDPB with each device an agent: what a device knows, what its action means, its reward and its cost, over the one
core of the scheme (:class:`otagym.schemes.cdpb.core.CDPBCore`, played through
:meth:`~otagym.schemes.cdpb.core.CDPBCore.play_round`); :mod:`otagym.multiagent` is the PettingZoo shell around it.

Client-driven power balancing is decentralised by design (Kim, Seo & Choi, arXiv:2410.05907, Sec. III and IV): the
server broadcasts rho once, and each device decides from its own channel, without sending CSI. The paper's rule is
fixed: send the gradient when h_k >= h_th = rho W^2 / P (7), inverting the channel (4) and filling the rest of the
power with artificial noise (11); below the threshold send noise (CDPB-n), stay silent (CDPB-i) or toss a coin
(CDPB-mixed). Here a device chooses, each round:

* its own participation threshold c_k h_th with c_k in [1, :data:`THRESHOLD_SCALE_MAX`] (it cannot go below h_th,
  where its power no longer allows the inversion (4)); between h_th and c_k h_th it abstains and acts as an
  unreliable device. The accountant keeps the paper's sampled accounting: the device's participation rate is
  exp(-c_k h_th / E[h_k]) (53), exact because c_k is chosen before the round's channel is seen;
* under CDPB-mixed, also the probability that it sends noise when it does not send its gradient (the paper's
  ``portion``, per device).

A device observes what it can know before the round: the round, the server's public broadcasts about the last round
(its share of reliable devices and its received noise), its own channel distribution E[h_k] and its own privacy
loss so far; with ``csi_feedback`` (the accounting then counts realised participation, so it need not be random) also
its channel of the round about to be played. A device whose privacy loss reaches its budget leaves: it transmits
nothing from the next round on. The budget is eps-bar (25c), or a share of it per device (``budget_scale``: devices
that accept different privacy losses, an extension of the paper's common eps-bar); a device then also sees its own.

Receive scaling (Kalarde et al.) admits no per-device decision: its devices' transmit weights are fixed by the
server's receive scaling, a_m,t = sqrt(eta_t) / (M h_m,t) (the paper's Sec. II), so that the signals add up aligned;
a device's own power would bias the aggregate. Anonymous OTA's devices likewise follow the server's public noise
level. Both stay single-agent.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from gymnasium import spaces
from numpy.typing import ArrayLike, NDArray

from otagym.schemes.cdpb.actions import RHO_FLOOR_RATIO, DeviceDecisions
from otagym.schemes.cdpb.core import CDPBCore
from otagym.schemes.cdpb.formulas import round_reward
from otagym.schemes.cdpb.observation import OBS_BOUND
from otagym.schemes.cdpb.scenario import CDPBScenario
from otagym.validation import Flag, Many, OneOf, POSITIVE, Real, Spec, check_args, real_array, refuse_entries

__all__ = ["LAYOUT_VERSION", "DEVICE_ENTRIES", "THRESHOLD_SCALE_MAX", "REWARDS",
           "device_entry_names", "device_action_space", "device_decisions", "DeviceRound", "CDPBDevices"]

#: The version of a device's observation layout (bumped with any change of an entry's meaning, order or scale).
LAYOUT_VERSION = "cdpb-devices/2"
#: A device's observation entries, in order (``log_channel_gain`` follows with ``csi_feedback`` only, then
#: ``log_budget_share`` with budgets given per device):
#: t / tau; the last round's K_t / K and log10(sigma_q^2 / (K P mean E[h])) (0 before the first round), as the server
#: broadcasts them; log10(E[h_k]); the device's cumulative RDP over its budget (eps-bar times its ``budget_scale``).
DEVICE_ENTRIES: tuple[str, ...] = ("round_fraction", "reliable_share", "log_noise_var", "log_mean_gain",
                                   "privacy_used")
#: The largest c_k of a device's threshold c_k h_th: at 100 a device of E[h] = h_th takes part with probability e^-100.
THRESHOLD_SCALE_MAX = 100.0
#: ``"team"``: every device gets the server's reward (the round's share of -G (24), the worst device's RDP);
#: ``"individual"``: each device gets the convergence share and is charged its own RDP.
REWARDS: tuple[str, ...] = ("team", "individual")


def device_entry_names(s: CDPBScenario, per_device_budgets: bool = False) -> tuple[str, ...]:
    """The name of every entry of a device's observation under scenario ``s``, in order: with
    ``per_device_budgets`` (``budget_scale`` given per device) a device also sees its own budget,
    log10(eps-bar_k / eps-bar)."""
    return (DEVICE_ENTRIES + (("log_channel_gain",) if s.csi_feedback else ())
            + (("log_budget_share",) if per_device_budgets else ()))


def device_action_space(s: CDPBScenario) -> spaces.Box:
    """A device's action: ``Box(-1, 1, (1,))`` (its threshold), ``(2,)`` under CDPB-mixed (threshold, noise
    portion); float32."""
    return spaces.Box(-1.0, 1.0, shape=(_action_width(s),), dtype=np.float32)


def _action_width(s: CDPBScenario) -> int:
    """The entries of a device's action: its threshold, and its noise portion under CDPB-mixed."""
    return 1 + (s.strategy == "mixed")


def device_decisions(s: CDPBScenario, actions: ArrayLike, active: NDArray) -> DeviceDecisions:
    """The devices' decisions from their actions (N, K, A) in [-1, 1]: c_k = THRESHOLD_SCALE_MAX^((a + 1) / 2)
    (log-linear, 1 at a = -1), the noise portion (a' + 1) / 2 under CDPB-mixed; ``active`` (N, K)."""
    a = np.asarray(actions, dtype=float)
    width = _action_width(s)
    if a.shape[-2:] != (s.num_clients, width):
        raise ValueError(f"device actions must have shape (N, K={s.num_clients}, {width}); got {a.shape}")
    refuse_entries("device action", "lie in [-1, 1]", a, ~(np.abs(a) <= 1.0))
    portion = 0.5 * (a[..., 1] + 1.0) if width == 2 else None
    return DeviceDecisions(THRESHOLD_SCALE_MAX ** (0.5 * (a[..., 0] + 1.0)), portion, np.asarray(active, dtype=bool))


class DeviceRound(NamedTuple):
    """One round for the K devices of N episodes: each (N, K) but ``done`` (N,) and ``info``."""

    rewards: NDArray
    costs: NDArray  # tau Delta E_k / eps-bar_k: a device's share of its budget (an episode's sum <= tau within it)
    left: NDArray  # bool: the devices that reached their budget this round and leave
    done: NDArray  # bool: the episode's last round (tau) was played
    info: dict[str, NDArray]  # per device (N, K) entries and the round's server-side entries ``server_*`` (N,)


#: The core's info entries that are per device, and those of the server (prefixed ``server_`` in a round's info); at
#: an episode's end the core's (eps, delta) report is passed on too, per device (where the core keeps one:
#: ``dp_orders``, ``accountant``).
DEVICE_INFO = ("channel_gain", "reliable", "sends_noise", "transmit_power_w", "participation", "rdp_round",
               "rdp_cumulative")
SERVER_INFO = ("round", "rho", "num_reliable", "convergence_term", "gamma", "utility", "cost")
#: The smallest share of eps-bar a device's budget may be (``budget_scale``).
BUDGET_SCALE_MIN = 1e-6


class CDPBDevices:
    """The K devices of N CDPB episodes as agents, over a :class:`~otagym.schemes.cdpb.core.CDPBCore` of N envs
    played in step (the PettingZoo env is N = 1; N > 1 evaluates policies on many realisations at once).

    Args:
        scenario: the deployment.
        num_envs: N.
        rho: the server's broadcast rho over P/W^2, in [1e-12, 1] (fixed for the episode; the paper's planner would
            choose it from the channel distributions, :class:`baselines.cdpb.policies.CDPB`; the floor is the single
            env's, :data:`~otagym.schemes.cdpb.actions.RHO_FLOOR_RATIO`, below which the estimate's noise overflows).
        reward: one of :data:`REWARDS`.
        reward_scale: rewards are divided by it (> 0).
        leave_when_spent: a device whose cumulative RDP reaches its budget leaves (True) or stays (False).
        budget_scale: device k's budget is ``budget_scale[k]`` eps-bar (one value for all devices, or K; each in
            [1e-6, 1]: no device may accept more than the deployment's eps-bar, and one that accepts less than a
            millionth of it spends it in its first round; the privacy over the budget stays finite).
        **core_kwargs: the core's other arguments (``dp_orders``, ``accountant``, the training fidelity's).
    """

    ARGS: dict[str, Spec] = {"rho": Real(RHO_FLOOR_RATIO, 1.0), "reward": OneOf(REWARDS),
                             "reward_scale": POSITIVE, "leave_when_spent": Flag(),
                             "budget_scale": Many(Real(BUDGET_SCALE_MIN, 1.0), scalar=True)}

    def __init__(self, scenario: CDPBScenario, num_envs: int = 1, *, rho: float = 1.0, reward: str = "team",
                 reward_scale: float = 1.0, leave_when_spent: bool = True, budget_scale: float | tuple[float, ...] = 1.0,
                 **core_kwargs: Any) -> None:
        args = check_args(self.ARGS, rho=rho, reward=reward, reward_scale=reward_scale,
                          leave_when_spent=leave_when_spent, budget_scale=budget_scale)
        core_args = sorted(set(CDPBCore.ARGS) - {"action_type", "reward_scale"})  # the side sets those two
        unknown = sorted(set(core_kwargs) - set(core_args))
        if unknown:  # TypeError: Python's for an unknown keyword argument
            raise TypeError(f"got unexpected keyword argument(s) {unknown}; the devices' arguments are "
                            f"{sorted(self.ARGS)} and the core's {core_args} (a scenario's fields go in "
                            "scenario_overrides)")
        self.core = CDPBCore(scenario, num_envs, action_type="rho", reward_scale=args["reward_scale"], **core_kwargs)
        self.scenario = s = self.core.scenario
        self.num_envs, self.num_devices = self.core.num_envs, s.num_clients
        self.rho = np.full(self.num_envs, args["rho"] * s.rho_max)
        self.reward, self.leave_when_spent = args["reward"], args["leave_when_spent"]
        self.active = np.ones((self.num_envs, s.num_clients), dtype=bool)
        self.per_device_budgets = bool(np.ndim(args["budget_scale"]))
        if self.per_device_budgets and len(args["budget_scale"]) != s.num_clients:
            raise ValueError(f"budget_scale must be one value or num_clients={s.num_clients} values; got "
                             f"{len(args['budget_scale'])}")
        #: Each device's budget, eps-bar_k = budget_scale_k eps-bar, (K,).
        self.budgets = np.broadcast_to(np.asarray(args["budget_scale"], dtype=float) * s.epsilon_max,
                                       (s.num_clients,)).copy()

    def observation_space(self) -> spaces.Box:
        entries = device_entry_names(self.scenario, self.per_device_budgets)
        return spaces.Box(-OBS_BOUND, OBS_BOUND, shape=(len(entries),), dtype=np.float32)

    def action_space(self) -> spaces.Box:
        return device_action_space(self.scenario)

    def state_space(self) -> spaces.Box:
        """The global state: the server's observation (:mod:`otagym.schemes.cdpb.observation`) and every device's
        observation, flattened."""
        n = self.core.observation_space().shape[0] + self.num_devices * self.observation_space().shape[0]
        return spaces.Box(-OBS_BOUND, OBS_BOUND, shape=(n,), dtype=np.float32)

    def reset(self, rng: np.random.Generator, channel_gains: NDArray | None = None, mask: NDArray | None = None
              ) -> None:
        """New episodes where ``mask`` (N,) is True (all if None); ``channel_gains`` (T, N, K) (or (T, K) for
        N = 1) replays realisations (:func:`~otagym.schemes.cdpb.core.sample_realisation`; a full reset only, which a
        masked reset then replays again, as the core's)."""
        if channel_gains is not None:  # the core's check (range) then sees the env axis it expects
            shapes = ((self.scenario.num_rounds, self.num_envs, self.num_devices),)
            if self.num_envs == 1:
                shapes += ((self.scenario.num_rounds, self.num_devices),)
            channel_gains = real_array("reset option channel_gains", channel_gains, shapes)
            channel_gains = channel_gains.reshape(shapes[0])
        self.core.reset(rng, mask, channel_gains=channel_gains)
        self.active[slice(None) if mask is None else np.asarray(mask, dtype=bool)] = True

    def privacy_used(self) -> NDArray:
        """Each device's cumulative RDP (the scenario's accounting, at alpha) over its budget, (N, K)."""
        return self.core.state.rdp_sum[self.scenario.accounting] / self.budgets

    def observations(self) -> NDArray:
        """Every device's observation (N, K, entries), float32, clipped to [-OBS_BOUND, OBS_BOUND]."""
        s, server = self.scenario, self.core.observation()
        shape = (self.num_envs, s.num_clients)
        cols = [np.broadcast_to(server[:, i:i + 1], shape) for i in range(3)]
        cols += [np.broadcast_to(np.log10(s.mean_gain), shape), self.privacy_used()]
        if s.csi_feedback:
            with np.errstate(divide="ignore"):  # a zero gain only from a replayed realisation; clipped below
                cols.append(np.log10(self.core.state.gains / s.mean_gain))
        if self.per_device_budgets:
            cols.append(np.broadcast_to(np.log10(self.budgets / s.epsilon_max), shape))
        return np.clip(np.stack(cols, axis=-1), -OBS_BOUND, OBS_BOUND).astype(np.float32)

    def state(self) -> NDArray:
        """The global state for a centralised critic (:meth:`state_space`), (N, state)."""
        obs = self.observations()
        return np.concatenate([self.core.observation(), obs.reshape(self.num_envs, -1)], axis=1).astype(np.float32)

    def step(self, rng: np.random.Generator, actions: ArrayLike) -> DeviceRound:
        """One round in every episode: ``actions`` (N, K, A) in [-1, 1]; a departed device's row is ignored."""
        s = self.scenario
        a = np.asarray(actions, dtype=float).reshape(self.num_envs, s.num_clients, -1)
        decisions = device_decisions(s, np.where(self.active[..., None], a, -1.0), self.active.copy())
        before = self.core.state.rdp_sum[s.accounting].copy()
        team, done, info = self.core.play_round(rng, self.rho, decisions)
        spent = self.core.state.rdp_sum[s.accounting] - before
        left = self.active & (self.privacy_used() >= 1.0) if self.leave_when_spent else np.zeros_like(self.active)
        self.active &= ~left
        info = {**{key: info[key] for key in DEVICE_INFO}, "threshold_scale": decisions.threshold_scale,
                **{f"server_{key}": info[key] for key in SERVER_INFO},
                **{key: info[key] for key in self.core.EPISODE_END_KEYS if key in info}}
        return DeviceRound(self._rewards(team, info["server_convergence_term"], spent),
                           s.num_rounds * spent / self.budgets, left, done, info)

    def _rewards(self, team: NDArray, term: NDArray, spent: NDArray) -> NDArray:
        """Each device's reward (N, K) from the server's (N,), the round's convergence term (N,) and each device's
        RDP increase (N, K)."""
        if self.reward == "team":
            return np.repeat(team[:, None], self.num_devices, axis=1)
        return round_reward(self.scenario, term[:, None], spent, self.core.reward_scale)

    def finish(self, rng: np.random.Generator) -> NDArray:
        """Play the episodes' remaining rounds with every device gone (K_t = 0: the estimate is noise); their rewards
        summed, (N, K): an episode may not end early by its devices leaving (the PettingZoo env calls this when its
        last agent leaves)."""
        total = np.zeros((self.num_envs, self.num_devices))
        silent = np.full((self.num_envs, self.num_devices, _action_width(self.scenario)), -1.0)
        self.active[:] = False
        while (self.core.t < self.scenario.num_rounds).any():
            total += self.step(rng, silent).rewards
        return total
