"""The scheme registry (issue 11): every scheme is laid out the same way and found by name in one place."""

from __future__ import annotations

import dataclasses
from typing import get_args

import gymnasium as gym
import pytest

from otagym import ENV_ID, OTAPrivacyEnv
from otagym.env import make_rounds
from otagym.schemes import SCHEMES, Core, Scheme, get_scheme


def test_scheme_literal_agrees_with_the_registry():
    assert get_args(Scheme) == tuple(SCHEMES)
    assert all(name == info.name for name, info in SCHEMES.items())


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_each_scheme_is_its_two_modules(name):
    """``otagym/<scheme>.py``: the frozen Scenario, its presets and their getter; ``otagym/<scheme>_env.py``: the
    batched core with the interface the env shells use."""
    info = SCHEMES[name]
    # the two modules, or the scheme's package otagym/schemes/<scheme>/ (scenario.py, core.py)
    assert info.scenario_type.__module__ in (f"otagym.{name}", f"otagym.schemes.{name}.scenario")
    assert info.get_scenario.__module__ in (f"otagym.{name}", f"otagym.schemes.{name}.scenario")
    assert info.core.__module__ in (f"otagym.{name}_env", f"otagym.schemes.{name}.core")
    assert dataclasses.is_dataclass(info.scenario_type) and info.scenario_type.__dataclass_params__.frozen
    assert info.presets and all(isinstance(s, info.scenario_type) for s in info.presets.values())
    assert info.scenario() == info.presets[info.default_preset] == info.get_scenario(info.default_preset)
    for attr in ("ARGS", "OPTION_AXES", "EPISODE_END_KEYS"):
        assert hasattr(info.core, attr), attr
    assert info.env_args is info.core.ARGS
    methods = [k for k, v in vars(Core).items() if callable(v) and not k.startswith("_")]
    assert all(callable(getattr(info.core, m, None)) for m in methods), methods


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_make_rounds_builds_the_registered_core_on_the_default_preset(name):
    info = SCHEMES[name]
    rounds = make_rounds(name, None, 2, {})
    assert type(rounds) is info.core and rounds.num_envs == 2
    assert rounds.scenario == info.presets[info.default_preset]
    env = gym.make(ENV_ID, scheme=name)
    assert type(env.unwrapped.rounds) is info.core


def test_unknown_scheme_is_refused_naming_scheme_and_the_registered_names():
    with pytest.raises(ValueError, match="scheme must be one of 'receive_scaling', 'cdpb', 'anonymous'; got 'nope'"):
        get_scheme("nope")
    with pytest.raises(ValueError, match="scheme must be one of .*; got 'nope'"):
        OTAPrivacyEnv(scheme="nope")
    with pytest.raises(TypeError, match="scheme must be"):
        make_rounds(None, None, 1, {})
