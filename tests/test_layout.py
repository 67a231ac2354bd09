"""The package layout of ARCHITECTURE.md (issue 11): what each package exports, and which way its imports point."""

from __future__ import annotations

import importlib

import pytest

import baselines


@pytest.mark.parametrize("module", ["baselines.policies", "baselines.cdpb", "baselines.anonymous"])
def test_baselines_exports_every_schemes_policies_from_its_top_level(module):
    """Every public policy class (one with ``act``) of each scheme's module is importable from ``baselines``."""
    mod = importlib.import_module(module)
    policies = [n for n in mod.__all__ if isinstance(getattr(mod, n), type) and hasattr(getattr(mod, n), "act")]
    assert policies
    for name in policies:
        assert name in baselines.__all__ and getattr(baselines, name) is getattr(mod, name), name


def test_baselines_all_is_importable():
    assert all(hasattr(baselines, name) for name in baselines.__all__)
    from baselines import CDPB, CDPB_POLICIES, ConstantSigma  # noqa: F401  (issue 11: this failed)
