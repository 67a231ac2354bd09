"""The registry of transmission schemes: a scheme's name -> its parts and everything outer layers need of it.

A scheme is one package, ``otagym/schemes/<scheme>/``: ``scenario`` (its frozen Scenario, the presets and their
getter, its task's settings), ``formulas`` (pure, batched, with the paper's equation numbers), ``actions`` (the action
types and the one decoder), ``observation`` (the named layout and its version) and ``core`` (the batched core, N
episodes as arrays: :class:`Core`, and ``sample_realisation``). :data:`SCHEMES` names those parts and what the outer
layers would otherwise branch on (:class:`SchemeInfo`); :func:`otagym.env.make_core` (so
``gym.make("otagym/OTAPrivacy-v0", scheme=NAME)``), the tasks, the command line and anything else that lists schemes
or presets read them here, and never compare a scheme's name. Adding a scheme is its package, whose ``SCHEME`` is its
:class:`SchemeInfo`, and its name in :data:`Scheme` (``tests/otagym/schemes/test_schemes.py`` checks that the parts
are laid out as above). A package's ``__init__`` imports its scenario alone; its core, formulas and accounting load
on first use (:class:`SchemeParts`), so ``import otagym`` registers every task without compiling or importing scipy.
"""

from __future__ import annotations

import importlib
from typing import Any, Literal, get_args

from otagym.schemes.info import Core, ObservationLayout, Rollout, RolloutColumn, SchemeInfo, SchemeParts
from otagym.validation import OneOf

__all__ = ["Scheme", "DEFAULT_SCHEME", "SchemeInfo", "SchemeParts", "ObservationLayout", "SCHEMES", "get_scheme",
           "Core", "Rollout", "RolloutColumn"]

#: The registered scheme names, in the order the command line lists them: the registry (each names its package,
#: ``otagym.schemes.<name>``, whose ``SCHEME`` is the entry).
Scheme = Literal["receive_scaling", "cdpb", "anonymous"]
#: The scheme an env runs when ``scheme`` is not given (and that a task's kwargs without ``"scheme"`` run).
DEFAULT_SCHEME: Scheme = "receive_scaling"

#: Every scheme by name, in the order the command line lists them.
SCHEMES: dict[str, SchemeInfo] = {name: importlib.import_module(f"{__name__}.{name}").SCHEME
                                  for name in get_args(Scheme)}


def get_scheme(name: Any) -> SchemeInfo:
    """The registry entry of ``name``; a name that is not registered raises ``ValueError`` (``TypeError`` for a
    non-string) naming ``scheme`` and the registered names."""
    return SCHEMES[OneOf(tuple(SCHEMES))("scheme", name)]
