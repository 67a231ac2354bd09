"""What a scheme declares to the registry (:data:`otagym.schemes.SCHEMES`): :class:`SchemeInfo`, its parts loaded
on first use (:class:`SchemeParts`), the batched core's protocol (:class:`Core`) and the observation layout
(:class:`ObservationLayout`). Each scheme package builds its own entry (its ``SCHEME``) from these."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from functools import cached_property
from typing import Any, Callable, ClassVar, Mapping, NamedTuple, Protocol

import numpy as np
from gymnasium import spaces
from numpy.typing import ArrayLike, NDArray

from otagym.validation import AppliesWith, Spec

__all__ = ["Core", "ObservationLayout", "SchemeParts", "SchemeInfo", "Rollout", "RolloutColumn", "RDP_COLUMNS"]


class Core(Protocol):
    """What the env shells (:mod:`otagym.env`) use of a scheme's batched core; ``core(scenario, num_envs, options)``
    or ``core(scenario, num_envs, **env_args)`` (the env's flat keyword arguments) builds one."""

    #: The frozen option struct of the env keyword arguments the core takes (beside the scenario's fields), each a
    #: field declared with :func:`otagym.validation.arg` and checked once, when the struct is made.
    OPTIONS: ClassVar[type]
    #: Those arguments and their specs (the option struct's fields').
    ARGS: ClassVar[dict[str, Spec]]
    #: Batch axis of each ``reset`` option (a single env inserts it).
    OPTION_AXES: ClassVar[dict[str, int]]
    #: Info keys present only at the end of an episode (the vector env masks them by ``terminated``).
    EPISODE_END_KEYS: ClassVar[tuple[str, ...]]
    #: Env arguments that have an effect only under another's value (elsewhere they must keep their defaults).
    APPLIES_WITH: ClassVar[dict[str, AppliesWith]]
    scenario: Any
    num_envs: int
    num_rounds: int
    #: The N episodes' state, one struct of the scheme's (a reset restarts its rows with
    #: :func:`otagym.schemes.episodes.restart_rows`).
    state: Any
    t: NDArray  # (N,) rounds played: ``state.t``
    fading: Any  # None until the first reset

    def reset(self, rng: np.random.Generator, mask: NDArray | None = None, **options: Any) -> None: ...
    def step(self, rng: np.random.Generator, action: ArrayLike) -> tuple[NDArray, NDArray, dict[str, NDArray]]: ...
    def observation(self) -> NDArray: ...
    def observation_space(self) -> spaces.Space: ...
    def action_space(self) -> spaces.Space: ...
    def reset_info(self) -> dict[str, NDArray]: ...
    def option_shapes(self) -> dict[str, tuple[tuple[int, ...], ...]]: ...
    def next_channel_info(self) -> dict[str, NDArray]: ...


@dataclass(frozen=True)
class ObservationLayout:
    """A scheme's observation layout: its entries by name and the version a shipped model records.

    Attributes:
        version: the layout's version, bumped whenever an entry is added, removed, reordered or rescaled (a model
            trained on another version reads garbage, so it is refused, naming both versions).
        entry_names: ``entry_names(scenario)``, the name of every observation entry of a scenario, in order.
    """

    version: str
    entry_names: Callable[[Any], tuple[str, ...]]


def _always_constrained(env_kwargs: Mapping[str, Any]) -> bool:
    """A scheme none of whose formulations meets the constraint of ``info["cost"]`` by construction."""
    return True


def _no_action_semantics(env_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """A scheme whose env arguments do not change what an action means."""
    return {}


@dataclass(frozen=True)
class SchemeParts:
    """The parts of a scheme that load its compiled round, its accounting and scipy: what :class:`SchemeInfo` loads
    the first time one of them is asked for.

    Attributes:
        core: the batched core class (:class:`Core`); its ``ARGS`` are the env keyword arguments the scheme takes.
        sample_realisation: ``sample_realisation(scenario, rng)``, a whole realisation of one episode (its channels,
            and whatever else the episode draws that a replay fixes) as a single env's ``reset`` options: what
            :func:`otagym.tasks.sample_realisation` draws an evaluation realisation with.
        constrained: ``constrained(env_kwargs)``, whether those env keyword arguments make a constrained MDP (a
            policy can break the constraint of ``info["cost"]``); False where the formulation meets it by
            construction (receive scaling's budget mode). :func:`otagym.tasks.constrained` asks it.
        observation_layout: the named observation layout and its version (:class:`ObservationLayout`); None where the
            scheme has not named its entries yet.
        devices: the scheme's device side, where its physics lets each device decide for itself (CDPB:
            :class:`otagym.schemes.cdpb.devices.CDPBDevices`), which :mod:`otagym.multiagent` makes a PettingZoo
            environment of; None where the devices follow the server.
        action_semantics: ``action_semantics(env_kwargs)``, the env arguments that say what an action means, as the
            env resolves them (defaults filled in, modes resolved): what a trained model's ``run.json`` records, so
            that it is played with the actions it learned; {} where no env argument changes an action's meaning.
    """

    core: type
    sample_realisation: Callable[[Any, np.random.Generator], dict[str, NDArray]]
    _: KW_ONLY
    constrained: Callable[[Mapping[str, Any]], bool] = _always_constrained
    observation_layout: ObservationLayout | None = None
    devices: type | None = None
    action_semantics: Callable[[Mapping[str, Any] | None], dict[str, Any]] = _no_action_semantics


class RolloutColumn(NamedTuple):
    """One column of ``otagym rollout``'s table: its header, the step info's entry it shows (the mean over devices
    where the entry is per device) and its number format (a ``format`` spec without width, e.g. ``".3e"``)."""

    header: str
    key: str
    fmt: str


#: The round's RDP and the cumulative RDP (``rdp_round``, ``rdp_cumulative``): the columns every scheme's rollout shows.
RDP_COLUMNS = (RolloutColumn("RDP round", "rdp_round", ".3e"), RolloutColumn("RDP cum", "rdp_cumulative", ".3e"))


@dataclass(frozen=True)
class Rollout:
    """What ``otagym rollout`` plays on a scheme and prints: ``action``, one constant action of the env made with
    ``env_kwargs`` (beside the scenario), every round; what that action is (``about``); and the step info's
    ``columns`` of each round (beside the round and the reward). The default: action 0 of the scheme's default action
    type, rewards only."""

    about: str = "action 0 of the default action type every round"
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    action: float = 0.0
    columns: tuple[RolloutColumn, ...] = ()


@dataclass(frozen=True)
class SchemeInfo:
    """One scheme: what the outer layers (env shells, tasks, command line) need of it. What registering the tasks and
    building the command line read (the scenarios, presets and task settings) is at hand; the rest
    (:class:`SchemeParts`: the core, the realisation sampler, the layout) loads on first use, through ``parts``.

    Attributes:
        name: the ``scheme=`` name.
        scenario_type: its frozen Scenario dataclass.
        get_scenario: ``get_scenario(name_or_scenario, **overrides)``, a preset by name or a scenario, with validated
            field overrides.
        default_preset: the preset ``scenario=None`` picks.
        presets: the preset scenarios by name.
        task_settings: the env keyword arguments every benchmark task of the scheme shares (its preset as
            ``"scenario"``, formulation, action, reward scale), which :mod:`otagym.tasks` builds its tasks from.
        tasks: the scheme's benchmark tasks, declared (its ``tasks`` module's ``TASKS``: name, settings beside
            ``task_settings``, budgets, summary, whether it is on the benchmark suite, and any other
            :class:`otagym.tasks.Task` field), which :mod:`otagym.tasks` builds and registers.
        device_tasks: the scheme's devices-as-agents tasks, declared (its ``tasks`` module's ``DEVICE_TASKS``: name,
            env settings, summary, versions and the references' stored actions), which :mod:`otagym.tasks` builds
            (:class:`otagym.tasks.DeviceTask`) and :mod:`otagym.multiagent` plays; empty where the devices follow
            the server.
        action_key: the entry of a step's info that holds the round's decision (receive scaling's ``"x"``, CDPB's
            ``"rho"``, anonymous OTA's ``"sigma"``): what the env's ``rgb_array`` render plots.
        info_keys: the scalar entries of a step's info that adapters copy into per-env info dicts
            (:class:`otagym.wrappers.sb3.OTAPrivacySB3VecEnv`) and the ``ansi`` render prints, where the settings
            report them.
        rollout: what ``otagym rollout`` plays and prints (:class:`Rollout`).
        action_args: the env arguments that say how an action is expressed, not which task it is: a benchmark task
            made with other values of them is still that task (its episodes scored alike), so ``gym.make`` does not
            warn about them (:func:`otagym.env.warn_if_not_the_task`).
        parts: ``parts()``, the scheme's :class:`SchemeParts` (called once, on first use of one of them).
    """

    name: str
    scenario_type: type
    get_scenario: Callable[..., Any]
    default_preset: str
    presets: Mapping[str, Any]
    _: KW_ONLY
    task_settings: Mapping[str, Any]
    tasks: tuple[Mapping[str, Any], ...]
    action_key: str
    info_keys: tuple[str, ...]
    device_tasks: tuple[Mapping[str, Any], ...] = ()
    rollout: Rollout = Rollout()
    action_args: frozenset[str] = frozenset()
    parts: Callable[[], SchemeParts] = field(repr=False)

    def __post_init__(self) -> None:
        if self.default_preset not in self.presets:
            raise ValueError(f"default_preset must be one of {sorted(self.presets)}; got {self.default_preset!r}")

    @cached_property
    def _loaded(self) -> SchemeParts:
        return self.parts()

    @property
    def core(self) -> type:
        """The batched core class (:attr:`SchemeParts.core`)."""
        return self._loaded.core

    @property
    def sample_realisation(self) -> Callable[[Any, np.random.Generator], dict[str, NDArray]]:
        """The realisation sampler (:attr:`SchemeParts.sample_realisation`)."""
        return self._loaded.sample_realisation

    @property
    def constrained(self) -> Callable[[Mapping[str, Any]], bool]:
        """Whether env keyword arguments make a constrained MDP (:attr:`SchemeParts.constrained`)."""
        return self._loaded.constrained

    @property
    def observation_layout(self) -> ObservationLayout | None:
        """The named observation layout (:attr:`SchemeParts.observation_layout`)."""
        return self._loaded.observation_layout

    @property
    def devices(self) -> type | None:
        """The device side (:attr:`SchemeParts.devices`)."""
        return self._loaded.devices

    @property
    def action_semantics(self) -> Callable[[Mapping[str, Any] | None], dict[str, Any]]:
        """The env arguments that say what an action means (:attr:`SchemeParts.action_semantics`)."""
        return self._loaded.action_semantics

    @property
    def env_args(self) -> Mapping[str, Spec]:
        """The env keyword arguments the scheme takes (its core's ``ARGS``) and their specs."""
        return self.core.ARGS

    def scenario(self, scenario: Any = None, /, **overrides: Any) -> Any:
        """``scenario`` (a preset name or a Scenario; ``None``: the default preset) with validated field overrides."""
        return self.get_scenario(self.default_preset if scenario is None else scenario, **overrides)
