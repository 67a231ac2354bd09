"""The registry of transmission schemes: a scheme's name -> its scenario, presets and batched core.

A scheme is two modules: ``otagym/<scheme>.py`` holds its frozen Scenario, the presets and their getter, and its pure
formulas; ``otagym/<scheme>_env.py`` holds its batched core (N episodes as arrays: :class:`Core`). :data:`SCHEMES`
names those parts; :func:`otagym.env.make_rounds` (so ``gym.make("otagym/OTAPrivacy-v0", scheme=NAME)``), the
command line and anything else that lists schemes or presets read them here. Adding a scheme is its two modules, one
:class:`SchemeInfo` entry in :data:`SCHEMES` and its name in :data:`Scheme` (``tests/test_schemes.py`` checks that the
two agree and that the parts are laid out as above).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Literal, Mapping, Protocol

import numpy as np
from gymnasium import spaces
from numpy.typing import ArrayLike, NDArray

from otagym.anonymous import ANONYMOUS_PRESETS, AnonymousScenario, get_anonymous_scenario
from otagym.anonymous_env import AnonymousRounds
from otagym.cdpb import CDPB_PRESETS, CDPBScenario, get_cdpb_scenario
from otagym.cdpb_env import CDPBRounds
from otagym.schemes.receive_scaling import PRESETS, ReceiveScalingCore, ReceiveScalingScenario, get_scenario
from otagym.validation import AppliesWith, OneOf, Spec

__all__ = ["Scheme", "DEFAULT_SCHEME", "SchemeInfo", "SCHEMES", "get_scheme", "Core"]

#: The registered scheme names, for type checkers (the registry is :data:`SCHEMES`; a test checks that they agree).
Scheme = Literal["receive_scaling", "cdpb", "anonymous"]
#: The scheme of an env made without ``scheme=`` (and of a run whose env arguments name none).
DEFAULT_SCHEME: Scheme = "receive_scaling"


class Core(Protocol):
    """What the env shells (:mod:`otagym.env`) use of a scheme's batched core; ``core(scenario, num_envs, **ARGS)``
    builds one."""

    #: The env keyword arguments the core takes (beside the scenario's fields) and their specs.
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
class SchemeInfo:
    """One scheme's parts.

    Attributes:
        name: the ``scheme=`` name.
        scenario_type: its frozen Scenario dataclass.
        get_scenario: ``get_scenario(name_or_scenario, **overrides)``, a preset by name or a scenario, with validated
            field overrides.
        default_preset: the preset ``scenario=None`` picks.
        presets: the preset scenarios by name.
        core: the batched core class (:class:`Core`); its ``ARGS`` are the env keyword arguments the scheme takes.
    """

    name: str
    scenario_type: type
    get_scenario: Callable[..., Any]
    default_preset: str
    presets: Mapping[str, Any]
    core: type

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


#: Every scheme by name, in the order the command line lists them.
SCHEMES: dict[str, SchemeInfo] = {s.name: s for s in (
    SchemeInfo("receive_scaling", ReceiveScalingScenario, get_scenario, "paper-mnist", PRESETS, ReceiveScalingCore),
    SchemeInfo("cdpb", CDPBScenario, get_cdpb_scenario, "paper-cdpb", CDPB_PRESETS, CDPBRounds),
    SchemeInfo("anonymous", AnonymousScenario, get_anonymous_scenario, "paper-anonymous", ANONYMOUS_PRESETS,
               AnonymousRounds),
)}


def get_scheme(name: Any) -> SchemeInfo:
    """The registry entry of ``name``; a name that is not registered raises ``ValueError`` (``TypeError`` for a
    non-string) naming ``scheme`` and the registered names."""
    return SCHEMES[OneOf(tuple(SCHEMES))("scheme", name)]

