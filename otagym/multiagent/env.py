"""The devices-as-agents environment: a PettingZoo ``ParallelEnv`` shell around a scheme's device side
(:attr:`otagym.schemes.SchemeInfo.devices`, e.g. :class:`otagym.schemes.cdpb.devices.CDPBDevices`), which plays the
scheme's one core with per-device decisions."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from numpy.typing import NDArray
from pettingzoo import ParallelEnv

from otagym.schemes import SCHEMES, get_scheme
from otagym.validation import Flag, Integer, bound, real_array, refuse_entries

__all__ = ["DevicesParallelEnv", "agent_name", "MULTIAGENT_SCHEMES"]

#: The schemes whose devices can act as agents (their :attr:`~otagym.schemes.SchemeInfo.devices` is set).
MULTIAGENT_SCHEMES: tuple[str, ...] = tuple(name for name, info in SCHEMES.items() if info.devices is not None)


def agent_name(k: int) -> str:
    """The PettingZoo name of device ``k``: ``"client_k"`` (the CDPB paper's word; TorchRL groups agents by the name's
    prefix, and a group called ``"device"`` would collide with its specs' ``device`` attribute)."""
    return f"client_{k}"


class DevicesParallelEnv(ParallelEnv):
    """Each device of an over-the-air FL deployment an agent (PettingZoo's parallel API).

    Every agent (``"client_0"`` ... ``"client_{K-1}"``) observes what its device can know and chooses its own
    decision each round; the server's side (aggregation, its broadcast) and the physics and accounting are the
    scheme's single-agent ones. ``infos[agent]["cost"]`` is the device's share of its privacy budget in the round
    (an episode's sum is at most tau within it, Safety-Gymnasium's convention); a device whose budget is spent leaves
    (``terminations[agent]`` True, removed from :attr:`agents`), or with ``keep_departed`` stays an agent until the
    episode ends, silent. The episode ends after the scenario's tau rounds
    (every remaining agent terminated) or at ``max_cycles`` rounds (truncated). :meth:`state` is the global state
    for centralised critics. ``step`` takes an action for every live agent (an agent's action is checked against
    its space); actions of agents that have left are ignored, as PettingZoo's conversions do.

    Args:
        scheme: one of :data:`MULTIAGENT_SCHEMES`.
        scenario: a preset name or a Scenario of the scheme (None: its default preset).
        scenario_overrides: validated field overrides of the scenario.
        max_cycles: rounds after which the episode is truncated (default: the scenario's tau), in [1, tau].
        keep_departed: a device that spent its budget stays an agent until the episode ends: it transmits nothing,
            its actions are ignored and it gets its reward as before (the team's, under ``reward="team"``), so that
            every agent's return is the team's and leaving early is no escape from the rounds it makes worse (SMAC's
            convention for the dead units of a team). Default False: it is terminated and removed.
        render_mode: None (no rendering).
        **kwargs: the scheme's device-side arguments (CDPB: :class:`~otagym.schemes.cdpb.devices.CDPBDevices`).

    ``reset(seed=..., options={"channel_gains": (T, K)})`` replays a channel realisation.
    """

    metadata = {"name": "otagym_devices_v0", "render_modes": [], "is_parallelizable": True}
    #: The ``reset`` options the env reads.
    RESET_OPTIONS: tuple[str, ...] = ("channel_gains",)
    #: The arguments of this shell, not of the scheme's device side.
    SHELL_ARGS: tuple[str, ...] = ("max_cycles", "keep_departed", "render_mode")

    def __init__(self, scheme: str = "cdpb", scenario: Any = None, *, scenario_overrides: dict | None = None,
                 max_cycles: int | None = None, keep_departed: bool = False, render_mode: str | None = None,
                 **kwargs: Any) -> None:
        info = get_scheme(scheme)
        if info.devices is None:
            raise ValueError(f"scheme={scheme!r} has no per-device decisions; the schemes whose devices act as agents: "
                             f"{', '.join(MULTIAGENT_SCHEMES)}")
        if render_mode is not None:
            raise ValueError(f"render_mode must be None (the env does not render); got {render_mode!r}")
        self.render_mode = render_mode
        try:
            self.side = info.devices(info.scenario(scenario, **(scenario_overrides or {})), **kwargs)
        except TypeError as err:  # an unknown argument: name this env's own beside the side's
            if "unexpected keyword argument" not in str(err):
                raise
            raise TypeError(f"{err}; this env's own: {['scenario', 'scenario_overrides', *self.SHELL_ARGS]}") from None
        tau = self.side.scenario.num_rounds
        self.max_cycles = tau if max_cycles is None else Integer(1, tau)("max_cycles", max_cycles)
        self.keep_departed = Flag()("keep_departed", keep_departed)
        self.possible_agents = [agent_name(k) for k in range(self.side.num_devices)]
        self.agents: list[str] = []
        self.observation_spaces = dict.fromkeys(self.possible_agents, self.side.observation_space())
        self.action_spaces = dict.fromkeys(self.possible_agents, self.side.action_space())
        self.state_space: spaces.Box = self.side.state_space()
        self.np_random, _ = seeding.np_random(None)
        self.cycles = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, NDArray], dict[str, dict[str, Any]]]:
        if seed is not None:
            self.np_random, _ = seeding.np_random(seed)
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(f"options must be a dict of reset options (this env's: {list(self.RESET_OPTIONS)}) or "
                            f"None; got {type(options).__name__}")
        options = dict(options or {})
        ignored = sorted(set(options) - set(self.RESET_OPTIONS))
        if ignored:  # PettingZoo's API test passes options of its own; an env ignores the ones it does not know
            warnings.warn(f"reset options {ignored} are ignored (this env's: {list(self.RESET_OPTIONS)})",
                          stacklevel=2)
        self.side.reset(self.np_random, **{key: options[key] for key in self.RESET_OPTIONS if key in options})
        self.agents = list(self.possible_agents)
        self.cycles = 0
        obs = self.side.observations()[0]
        return {a: obs[k] for k, a in enumerate(self.possible_agents)}, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, NDArray], dict[str, float], dict[str, bool],
                                                    dict[str, bool], dict[str, dict[str, Any]]]:
        if not self.agents:
            raise RuntimeError("step() called with no live agents (before the first reset() or after the episode "
                               "ended); call reset() first")
        if not isinstance(actions, Mapping):
            raise TypeError(f"actions must be a dict of each live agent's action ({self.agents[0]!r}: ...); got "
                            f"{type(actions).__name__}")
        stacked = self._stacked_actions(actions)[None]
        played = self.side.step(self.np_random, stacked)
        rewards_all, done = played.rewards[0], bool(played.done[0])
        if not self.side.active.any() and not done and not self.keep_departed:  # the last left: charged to them now
            rewards_all, done = rewards_all + self.side.finish(self.np_random)[0], True
        self.cycles += 1
        truncate = self.cycles >= self.max_cycles and not done
        obs = self.side.observations()[0]
        live = [(k, a) for k, a in enumerate(self.possible_agents) if a in self.agents]
        observations = {a: obs[k] for k, a in live}
        rewards = {a: float(rewards_all[k]) for k, a in live}
        terminations = {a: bool(done or (played.left[0, k] and not self.keep_departed)) for k, a in live}
        truncations = {a: bool(truncate) for _, a in live}
        infos = {a: {"cost": float(played.costs[0, k]),
                     **{key: value[0, k] if np.ndim(value) == 2 else value[0] for key, value in played.info.items()}}
                 for k, a in live}
        self.agents = [a for _, a in live if not (terminations[a] or truncations[a])]
        return observations, rewards, terminations, truncations, infos

    def _stacked_actions(self, actions: dict[str, Any]) -> NDArray:
        """The live agents' actions as a (K, A) array (a departed device's row -1, which the device side ignores),
        each checked against its agent's action space; actions of departed agents are ignored (TorchRL's
        ``PettingZooWrapper`` passes one for every agent of a group), an unknown name or a missing live agent is
        refused."""
        unknown = sorted(set(actions) - set(self.possible_agents))
        if unknown:
            raise ValueError(f"actions has unknown agents {unknown}; the agents are {self.possible_agents}")
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"actions must hold an action for every live agent; missing {missing}")
        stacked = np.full((self.side.num_devices,) + self.action_spaces[self.possible_agents[0]].shape, -1.0)
        for k, agent in enumerate(self.possible_agents):
            if agent in self.agents:
                where, space = f"actions[{agent!r}]", self.action_spaces[agent]
                shapes = (space.shape,) + (((),) if space.shape == (1,) else ())  # a scalar for a 1-entry action
                a = real_array(where, actions[agent], shapes).reshape(space.shape)
                refuse_entries(where, f"lie in the action space [{bound(space.low.min())}, "
                               f"{bound(space.high.max())}]", a, ~((a >= space.low) & (a <= space.high)))
                stacked[k] = a
        return stacked

    def state(self) -> NDArray:
        return self.side.state()[0]

    def render(self) -> None:
        return None

    def close(self) -> None:
        return None
