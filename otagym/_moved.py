"""The module paths of the earlier layout, kept importable until :data:`REMOVED_IN` by one import hook.

Each old path in :data:`MOVED` is built on import as a module that re-exports its new module's public names (its
``__all__``, plus any old names listed) and warns with a ``DeprecationWarning`` naming the new path and the release
that removes the old one. ``import otagym`` installs the hook (:func:`install`); the old paths under ``baselines`` and
``experiments`` import otagym first, so they resolve in any process. One table replaces a file per old path.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import NamedTuple

__all__ = ["REMOVED_IN", "Moved", "MOVED", "RENAMED", "deprecation", "renamed", "install"]

#: The release that removes every path of :data:`MOVED`.
REMOVED_IN = "0.2.0"


class Moved(NamedTuple):
    """Where an old module went: ``new``, the module whose ``__all__`` the old path re-exports, and ``renamed``, old
    names the new layout spells differently (old name -> ``"module:name"``)."""

    new: str
    renamed: dict[str, str] = {}


#: Every old module path and where it went.
MOVED: dict[str, Moved] = {
    "otagym.privacy": Moved("otagym.accounting", {"_curve_log_a": "otagym.accounting.curve:curve_log_a",
                                                  "_curve_derivatives": "otagym.accounting.curve:curve_derivatives"}),
    "otagym.receive_scaling": Moved("otagym.schemes.receive_scaling"),
    "otagym.receive_scaling_env": Moved("otagym.schemes.receive_scaling"),
    "otagym.cdpb": Moved("otagym.schemes.cdpb"),
    "otagym.cdpb_env": Moved("otagym.schemes.cdpb", {"CDPBRounds": "otagym.schemes.cdpb.core:CDPBCore"}),
    "otagym.anonymous": Moved("otagym.schemes.anonymous"),
    "otagym.anonymous_env": Moved("otagym.schemes.anonymous",
                                  {"AnonymousRounds": "otagym.schemes.anonymous.core:AnonymousCore"}),
    "otagym.training.cdpb": Moved("otagym.schemes.cdpb.training"),
    "otagym.training.power_balancing": Moved("otagym.schemes.cdpb.training"),
    "otagym.training.fadmm": Moved("benchmarks.fadmm"),
    "otagym.sb3": Moved("otagym.wrappers.sb3"),
    "otagym.safety": Moved("otagym.wrappers.safety"),
    "baselines.policies": Moved("baselines.receive_scaling.policies"),
    "baselines.references": Moved("baselines.receive_scaling.references"),
    "baselines.core": Moved("baselines.receive_scaling.core"),
    "baselines.evaluation": Moved("baselines.receive_scaling.evaluation",
                                  {"normalized_score": "baselines.receive_scaling.evaluation:leakage_score"}),
    "baselines.compare": Moved("baselines.receive_scaling.compare"),
    "baselines.cdpb_compare": Moved("baselines.cdpb.compare"),
    "experiments.cli": Moved("otagym.cli.commands"),
    "experiments.compare": Moved("otagym.cli.compare"),
    "experiments.evaluate": Moved("otagym.cli.evaluate"),
    "experiments.sweep": Moved("otagym.cli.sweep"),
    "experiments.argtypes": Moved("otagym.cli.argtypes"),
}


#: Old names inside the new modules (module -> old name -> ``"module:name"``), which their ``__getattr__`` serves
#: through :func:`renamed`; the shells' attribute ``rounds`` is ``core`` (a property of :mod:`otagym.env`'s).
RENAMED: dict[str, dict[str, str]] = {
    "otagym.schemes.receive_scaling": {
        "Rounds": "otagym.schemes.receive_scaling.core:ReceiveScalingCore",
        **{name: f"otagym.schemes.receive_scaling.model:ReceiveScalingModel.{name}"  # model first, as they took it
           for name in ("cost_slope_of_leakage", "reference_price", "price_spend")}},
    "otagym.schemes.cdpb": {"CDPBRounds": "otagym.schemes.cdpb.core:CDPBCore"},
    "otagym.schemes.anonymous": {"AnonymousRounds": "otagym.schemes.anonymous.core:AnonymousCore"},
    "otagym.env": {"make_rounds": "otagym.env:make_core"},
    "otagym.training": {"CDPBTraining": "otagym.schemes.cdpb.training:CDPBTraining",
                        "clip_to_norm": "otagym.schemes.cdpb.training:clip_to_norm"},
}


def deprecation(old: str, new: str) -> str:
    """The warning an old path or name gives."""
    return f"{old} is deprecated and removed in otagym {REMOVED_IN}; use {new}"


def renamed(package: str, name: str) -> object:
    """``package``'s old ``name`` (:data:`RENAMED`), with a ``DeprecationWarning``: the body of the package's module
    ``__getattr__``; any other name raises ``AttributeError``."""
    where = RENAMED.get(package, {}).get(name)
    if where is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    warnings.warn(deprecation(f"{package}.{name}", where.replace(":", ".")), DeprecationWarning, stacklevel=3)
    return _attribute(where)


def _attribute(qualified: str) -> object:
    """``module:name``'s object; a dotted name walks attributes (``Class.method``)."""
    module, name = qualified.split(":")
    return functools.reduce(getattr, name.split("."), importlib.import_module(module))


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths of :data:`MOVED` and builds each as a module of its new module's names."""

    def find_spec(self, fullname: str, path: object = None, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        return importlib.machinery.ModuleSpec(fullname, self) if fullname in MOVED else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module

    def exec_module(self, module: ModuleType) -> None:
        moved = MOVED[module.__name__]
        warnings.warn(deprecation(module.__name__, moved.new), DeprecationWarning, stacklevel=2)
        new = importlib.import_module(moved.new)
        names = list(new.__all__)
        module.__dict__.update({name: getattr(new, name) for name in names})
        module.__dict__.update({old: _attribute(where) for old, where in moved.renamed.items()})
        module.__all__ = names + [old for old in moved.renamed if not old.startswith("_")]
        module.__doc__ = f"Deprecated: {deprecation(module.__name__, moved.new)}."


def install() -> None:
    """Put the hook on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
