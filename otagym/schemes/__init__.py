"""The registry of transmission schemes: a scheme's name -> its parts and everything outer layers need of it.

A scheme is one package, ``otagym/schemes/<scheme>/``: ``scenario`` (its frozen Scenario, the presets and their
getter, its task's settings), ``formulas`` (pure, batched, with the paper's equation numbers), ``actions`` (the action
types and the one decoder), ``observation`` (the named layout and its version) and ``core`` (the batched core, N
episodes as arrays: :class:`Core`, and ``sample_realisation``). :data:`SCHEMES` names those parts and what the outer
layers would otherwise branch on (:class:`SchemeInfo`); :func:`otagym.env.make_core` (so
``gym.make("otagym/OTAPrivacy-v0", scheme=NAME)``), the tasks, the command line and anything else that lists schemes
or presets read them here, and never compare a scheme's name. Adding a scheme is its package, one :class:`SchemeInfo`
entry in :data:`SCHEMES` and its name in :data:`Scheme` (``tests/otagym/schemes/test_schemes.py`` checks that the two
agree and that the parts are laid out as above).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any, Callable, ClassVar, Literal, Mapping, Protocol

import numpy as np
from gymnasium import spaces
from numpy.typing import ArrayLike, NDArray

from otagym.schemes import anonymous, cdpb, receive_scaling
from otagym.validation import AppliesWith, OneOf, Spec

__all__ = ["Scheme", "DEFAULT_SCHEME", "SchemeInfo", "ObservationLayout", "SCHEMES", "get_scheme", "Core"]

#: The registered scheme names, for type checkers (the registry is :data:`SCHEMES`; a test checks that they agree).
Scheme = Literal["receive_scaling", "cdpb", "anonymous"]
#: The scheme an env runs when ``scheme`` is not given (and that a task's kwargs without ``"scheme"`` run).
DEFAULT_SCHEME: Scheme = "receive_scaling"


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
    t: NDArray
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


@dataclass(frozen=True)
class SchemeInfo:
    """One scheme's parts, and what the outer layers (env shells, tasks, command line) need of it.

    Attributes:
        name: the ``scheme=`` name.
        scenario_type: its frozen Scenario dataclass.
        get_scenario: ``get_scenario(name_or_scenario, **overrides)``, a preset by name or a scenario, with validated
            field overrides.
        default_preset: the preset ``scenario=None`` picks.
        presets: the preset scenarios by name.
        core: the batched core class (:class:`Core`); its ``ARGS`` are the env keyword arguments the scheme takes.
        sample_realisation: ``sample_realisation(scenario, rng)``, a whole realisation of one episode (its channels,
            and whatever else the episode draws that a replay fixes) as a single env's ``reset`` options: what
            :func:`otagym.tasks.sample_realisation` draws an evaluation realisation with.
        task_settings: the env keyword arguments every benchmark task of the scheme shares (its preset as
            ``"scenario"``, formulation, action, reward scale), which :mod:`otagym.tasks` builds its tasks from.
        constrained: ``constrained(env_kwargs)``, whether those env keyword arguments make a constrained MDP (a
            policy can break the constraint of ``info["cost"]``); False where the formulation meets it by
            construction (receive scaling's budget mode). :func:`otagym.tasks.constrained` asks it.
        observation_layout: the named observation layout and its version (:class:`ObservationLayout`); None where the
            scheme has not named its entries yet.
        devices: the scheme's device side, where its physics lets each device decide for itself (CDPB:
            :class:`otagym.schemes.cdpb.devices.CDPBDevices`), which :mod:`otagym.multiagent` makes a PettingZoo
            environment of; None where the devices follow the server.
    """

    name: str
    scenario_type: type
    get_scenario: Callable[..., Any]
    default_preset: str
    presets: Mapping[str, Any]
    core: type
    _: KW_ONLY
    sample_realisation: Callable[[Any, np.random.Generator], dict[str, NDArray]]
    task_settings: Mapping[str, Any]
    constrained: Callable[[Mapping[str, Any]], bool] = _always_constrained
    observation_layout: ObservationLayout | None = None
    devices: type | None = None

    def __post_init__(self) -> None:
        if self.default_preset not in self.presets:
            raise ValueError(f"default_preset must be one of {sorted(self.presets)}; got {self.default_preset!r}")

    @property
    def env_args(self) -> Mapping[str, Spec]:
        """The env keyword arguments the scheme takes (its core's ``ARGS``) and their specs."""
        return self.core.ARGS

    def scenario(self, scenario: Any = None, /, **overrides: Any) -> Any:
        """``scenario`` (a preset name or a Scenario; ``None``: the default preset) with validated field overrides."""
        return self.get_scenario(self.default_preset if scenario is None else scenario, **overrides)


# --- receive scaling's entries until its package (otagym/schemes/receive_scaling/) holds them ----------------------
#: Every scheme by name, in the order the command line lists them.
SCHEMES: dict[str, SchemeInfo] = {s.name: s for s in (
    SchemeInfo("receive_scaling", receive_scaling.ReceiveScalingScenario, receive_scaling.get_scenario, "paper-mnist",
               receive_scaling.PRESETS, receive_scaling.ReceiveScalingCore,
               sample_realisation=receive_scaling.sample_realisation, task_settings=receive_scaling.TASK_SETTINGS,
               constrained=receive_scaling.constrained,
               observation_layout=ObservationLayout(receive_scaling.observation.LAYOUT_VERSION,
                                                    receive_scaling.observation.entry_names)),
    SchemeInfo("cdpb", cdpb.CDPBScenario, cdpb.get_cdpb_scenario, "paper-cdpb", cdpb.CDPB_PRESETS, cdpb.CDPBCore,
               sample_realisation=cdpb.sample_realisation, task_settings=cdpb.TASK_SETTINGS,
               observation_layout=ObservationLayout(cdpb.observation.LAYOUT_VERSION, cdpb.observation.entry_names),
               devices=cdpb.devices.CDPBDevices),
    SchemeInfo("anonymous", anonymous.AnonymousScenario, anonymous.get_anonymous_scenario, "paper-anonymous",
               anonymous.ANONYMOUS_PRESETS, anonymous.AnonymousCore,
               sample_realisation=anonymous.sample_realisation, task_settings=anonymous.TASK_SETTINGS,
               observation_layout=ObservationLayout(anonymous.observation.LAYOUT_VERSION,
                                                    anonymous.observation.entry_names)),
)}


def get_scheme(name: Any) -> SchemeInfo:
    """The registry entry of ``name``; a name that is not registered raises ``ValueError`` (``TypeError`` for a
    non-string) naming ``scheme`` and the registered names."""
    return SCHEMES[OneOf(tuple(SCHEMES))("scheme", name)]

