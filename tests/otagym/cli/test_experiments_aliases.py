"""The deprecated ``experiments`` package (issue 36): each of its modules warns, naming its new path under
:mod:`otagym.cli`, and re-exports that module's public names, for one release."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

#: Each deprecated module and the module it became.
MOVED = {"experiments": "otagym.cli", "experiments.cli": "otagym.cli.commands", "experiments.compare":
         "otagym.cli.compare", "experiments.evaluate": "otagym.cli.evaluate", "experiments.sweep": "otagym.cli.sweep",
         "experiments.argtypes": "otagym.cli.argtypes"}


@pytest.mark.parametrize("old,new", sorted(MOVED.items()))
def test_a_deprecated_module_warns_with_its_new_path_and_reexports_its_names(old, new, monkeypatch):
    for name in [m for m in sys.modules if m == "experiments" or m.startswith("experiments.")]:
        monkeypatch.delitem(sys.modules, name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alias = importlib.import_module(old)
    said = [str(w.message) for w in caught if w.category is DeprecationWarning]
    assert f"{old} is deprecated; import {new} instead" in said, said
    target = importlib.import_module(new)
    assert alias.__all__ == target.__all__ and target.__all__
    for name in target.__all__:
        assert getattr(alias, name) is getattr(target, name), name
