"""The earlier layout's module paths and names (otagym._moved): each old path imports, warns naming its new path and
the release that removes it, and gives the new module's objects; the old core names inside the scheme packages too."""

from __future__ import annotations

import functools
import importlib
import subprocess
import sys
import warnings

import pytest

from otagym._moved import MOVED, REMOVED_IN, RENAMED, deprecation

#: Old paths whose new module needs an optional dependency.
NEEDS = {"otagym.training.cdpb": "torch", "otagym.sb3": "stable_baselines3"}


def _fresh_import(name: str, monkeypatch: pytest.MonkeyPatch) -> tuple[object, list[str]]:
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        monkeypatch.delitem(sys.modules, loaded)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(name)
    return module, [str(w.message) for w in caught if w.category is DeprecationWarning]


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_naming_its_new_path_and_gives_the_new_objects(old, monkeypatch):
    if old in NEEDS:
        pytest.importorskip(NEEDS[old])
    module, said = _fresh_import(old, monkeypatch)
    moved = MOVED[old]
    assert f"{old} is deprecated and removed in otagym {REMOVED_IN}; use {moved.new}" in said, said
    new = importlib.import_module(moved.new)
    assert new.__all__ and set(new.__all__) <= set(module.__all__)
    for name in new.__all__:
        assert getattr(module, name) is getattr(new, name), name
    for name, where in moved.renamed.items():
        path, attr = where.split(":")
        assert getattr(module, name) is getattr(importlib.import_module(path), attr), name


@pytest.mark.parametrize(("old", "names"), [
    ("otagym.privacy", ["RDPLedger", "rdp_sgm", "_curve_log_a", "_curve_derivatives"]),
    ("otagym.receive_scaling_env", ["ActionType", "RewardMode", "OBS_BOUND"]),
    ("otagym.cdpb_env", ["CDPBRounds", "RhoActionType"]),
    ("otagym.anonymous_env", ["AnonymousRounds", "SigmaActionType"]),
    ("baselines.evaluation", ["normalized_score"]),
    ("experiments.cli", ["main"]),
])
def test_the_names_old_code_imported_are_there(old, names, monkeypatch):
    module, _ = _fresh_import(old, monkeypatch)
    assert all(hasattr(module, name) for name in names)


def test_an_old_path_also_imports_as_a_statement_and_reloads():
    code = ("import warnings; warnings.simplefilter('error')\nimport otagym\n"
            "try:\n    import otagym.privacy\nexcept DeprecationWarning as w:\n    print(w)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == deprecation("otagym.privacy", "otagym.accounting")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = importlib.import_module("otagym.privacy")
    with pytest.warns(DeprecationWarning, match=r"otagym\.privacy is deprecated"):
        assert importlib.reload(module) is module


def test_the_experiments_package_warns_and_gives_the_command_line(monkeypatch):
    module, said = _fresh_import("experiments", monkeypatch)
    assert deprecation("experiments", "otagym.cli") in said
    assert module.main is importlib.import_module("otagym.cli").main


@pytest.mark.parametrize(("package", "old"), [(p, n) for p, names in sorted(RENAMED.items()) for n in names])
def test_an_old_name_in_a_package_warns_and_is_the_new_object(package, old):
    module = importlib.import_module(package)
    path, attr = RENAMED[package][old].split(":")
    new = functools.reduce(getattr, attr.split("."), importlib.import_module(path))  # Class.method: its function
    with pytest.warns(DeprecationWarning, match=rf"{package}\.{old} is deprecated and removed in otagym"):
        assert getattr(module, old) is new
    assert old not in module.__all__
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        module.Nothing  # noqa: B018


def test_the_formulas_that_took_a_model_are_its_methods_and_keep_their_old_call():
    """``reference_price(model, ...)`` of the earlier layout still computes ``model.reference_price(...)``."""
    from otagym.schemes.receive_scaling import ReceiveScalingModel, get_scenario

    model = ReceiveScalingModel(get_scenario())
    with pytest.warns(DeprecationWarning):
        from otagym.schemes.receive_scaling import reference_price
    assert reference_price(model, 20.0, 500, 1e-9, 1.0) == model.reference_price(20.0, 500, 1e-9, 1.0) > 0


def test_no_file_is_left_at_an_old_path():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    assert [old for old in MOVED if root.joinpath(*old.split(".")).with_suffix(".py").exists()] == []


@pytest.mark.parametrize("shell", ["OTAPrivacyEnv", "OTAPrivacyVectorEnv"])
def test_the_shells_first_name_for_their_core_warns_and_is_the_core(shell):
    import otagym.env

    env = getattr(otagym.env, shell)(**({"num_envs": 2} if "Vector" in shell else {}), num_rounds=3)
    with pytest.warns(DeprecationWarning, match=rf"{shell}\.rounds is deprecated and removed in otagym {REMOVED_IN}; "
                                                rf"use {shell}\.core"):
        assert env.rounds is env.core
