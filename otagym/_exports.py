"""A package's public names loaded on first use (PEP 562), so that importing the package costs only what it needs.

``import otagym`` registers the environments and the tasks from the schemes' scenarios and settings alone; a
scheme's compiled round, its accounting and scipy load when an env, a formula or an accountant is first used. The
command line's ``--help`` and argument errors are answered without them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence

from otagym._moved import renamed

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, Sequence[str]], submodules: Sequence[str] = ()
                 ) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``'s namespace: each name of ``exports[module]`` is that submodule's
    attribute and each of ``submodules`` a submodule, imported on first use and kept in the namespace; any other name
    is an old name of the earlier layout (:func:`otagym._moved.renamed`: a ``DeprecationWarning``) or an
    ``AttributeError``."""
    home = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> object:
        if name in home:
            value = getattr(importlib.import_module(f"{package}.{home[name]}"), name)
        elif name in submodules:
            value = importlib.import_module(f"{package}.{name}")
        else:
            return renamed(package, name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *home, *submodules})

    return __getattr__, __dir__
