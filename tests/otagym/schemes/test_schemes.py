"""The scheme registry (issues 11 and 36): every scheme is one package laid out the same way, found by name in one
place with everything the outer layers need of it."""

from __future__ import annotations

import dataclasses
import importlib
import subprocess
import sys
from pathlib import Path
from typing import get_args

import gymnasium as gym
import numpy as np
import pytest

from otagym import ENV_ID, OTAPrivacyEnv
from otagym.env import make_core
from otagym.schemes import DEFAULT_SCHEME, SCHEMES, Core, Scheme, get_scheme
from otagym.tasks import TASKS, constrained


def test_scheme_literal_agrees_with_the_registry():
    assert get_args(Scheme) == tuple(SCHEMES)
    assert DEFAULT_SCHEME in SCHEMES
    assert all(name == info.name for name, info in SCHEMES.items())
    assert all(info is importlib.import_module(f"otagym.schemes.{name}").SCHEME for name, info in SCHEMES.items())


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_a_schemes_public_names_load_on_first_use_from_their_modules(name):
    """A scheme package's ``__init__`` imports its scenario alone; each other public name is its module's own object,
    loaded on first use (``otagym._exports.lazy_exports``), and ``dir()`` lists them before they are loaded."""
    package = importlib.import_module(f"otagym.schemes.{name}")
    home = {n: module for module, names in package._EXPORTS.items() for n in names}
    assert set(package.__all__) <= {*home, *dir(package)} and set(home) <= set(dir(package))
    for n in package.__all__:
        value = getattr(package, n)
        if n in home:
            assert value is getattr(importlib.import_module(f"{package.__name__}.{home[n]}"), n), n
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        package.not_a_name


def test_import_otagym_loads_no_compiled_round_nor_scipy():
    """``import otagym`` registers the envs and every task from the schemes' scenarios and settings: numba, scipy,
    torch, the cores and the accounting load on first use; a scheme's parts load when one is asked for."""
    code = ("import sys, gymnasium as gym, otagym\n"
            "loaded = lambda: sorted(m for m in ('numba', 'scipy', 'torch', 'otagym.accounting', 'baselines', "
            "'otagym.schemes.receive_scaling.core') if m in sys.modules)\n"
            "print(loaded(), 'otagym/ReceiveScalingCMDP-v1' in gym.registry)\n"
            "otagym.schemes.SCHEMES['receive_scaling'].core\n"
            "print(loaded())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "[] True"
    assert "otagym.schemes.receive_scaling.core" in out[1] and "numba" in out[1]


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_each_scheme_is_one_package_of_its_parts(name):
    """``otagym/schemes/<scheme>/``: ``scenario`` (the frozen Scenario, its presets and their getter, its task
    settings), ``formulas``, ``actions``, ``observation`` and ``core`` (the batched core with the interface the env
    shells use, and ``sample_realisation``)."""
    info = SCHEMES[name]
    package = importlib.import_module(f"otagym.schemes.{name}")
    parts = {part: importlib.import_module(f"{package.__name__}.{part}")
             for part in ("scenario", "formulas", "actions", "observation", "core")}
    assert info.scenario_type.__module__ == info.get_scenario.__module__ == parts["scenario"].__name__
    assert info.core.__module__ == parts["core"].__name__ and info.core.__name__.endswith("Core")
    assert info.sample_realisation is parts["core"].sample_realisation
    assert info.task_settings is parts["scenario"].TASK_SETTINGS
    assert info.observation_layout.version == parts["observation"].LAYOUT_VERSION
    assert info.observation_layout.version.startswith(f"{name}/")  # a run.json says which scheme's layout it read
    assert info.observation_layout.entry_names is parts["observation"].entry_names
    assert parts["actions"].ACTION_TYPES and all(isinstance(a, str) for a in parts["actions"].ACTION_TYPES)
    for module in parts.values():
        assert all(hasattr(module, n) for n in module.__all__), module.__name__
        assert len(Path(module.__file__).read_text().splitlines()) <= 600, module.__name__


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_each_scheme_registers_its_parts(name):
    info = SCHEMES[name]
    assert dataclasses.is_dataclass(info.scenario_type) and info.scenario_type.__dataclass_params__.frozen
    assert info.presets and all(isinstance(s, info.scenario_type) for s in info.presets.values())
    assert info.scenario() == info.presets[info.default_preset] == info.get_scenario(info.default_preset)
    for attr in ("OPTIONS", "ARGS", "OPTION_AXES", "EPISODE_END_KEYS"):
        assert hasattr(info.core, attr), attr
    assert info.env_args is info.core.ARGS
    methods = [k for k, v in vars(Core).items() if callable(v) and not k.startswith("_")]
    assert all(callable(getattr(info.core, m, None)) for m in methods), methods
    assert info.task_settings["scenario"] in info.presets
    assert set(info.task_settings) - {"scenario"} <= set(info.env_args) | {f.name for f in
                                                                          dataclasses.fields(info.scenario_type)}
    assert isinstance(info.constrained({}), bool)
    # what the adapters and the render read of a step's info: the scheme's own entries, the decision among them
    env = OTAPrivacyEnv(scheme=name, render_mode="ansi", **({"target_epsilon": 8.0} if name == "anonymous" else {}))
    env.reset(seed=0)
    step_info = env.step(env.action_space.sample())[-1]
    assert info.action_key in info.info_keys and set(info.info_keys) <= set(step_info), set(info.info_keys) - set(
        step_info)
    assert all(np.ndim(step_info[k]) == 0 for k in info.info_keys)
    assert f"{info.action_key}=" in env.render()


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_a_cores_env_arguments_are_one_frozen_struct_checked_once(name):
    """The core's arguments are its option struct's fields (their specs ``ARGS``, their conditions
    ``APPLIES_WITH``); the struct is frozen and refuses a bad value by the keyword's own name, as ``gym.make`` does;
    a core built from the struct is the core built from the same flat keyword arguments, and not from both."""
    info = SCHEMES[name]
    options_type = info.core.OPTIONS
    names = [f.name for f in dataclasses.fields(options_type)]
    assert names == list(info.core.ARGS) and set(info.core.APPLIES_WITH) <= set(names)
    defaults = options_type()
    with pytest.raises(dataclasses.FrozenInstanceError):
        defaults.accountant = "pld"
    with pytest.raises(ValueError, match="^accountant must be one of"):
        options_type(accountant="nope")
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        options_type(nope=1)
    scenario = info.scenario(num_rounds=3)
    flat = info.core(scenario, 2, dp_orders=None)
    built = info.core(scenario, 2, options_type(dp_orders=None))
    assert flat.options == built.options and flat.options != defaults
    for core in (flat, built):
        core.reset(np.random.default_rng(0))
    assert np.array_equal(flat.observation(), built.observation())
    with pytest.raises(TypeError, match="not both"):
        info.core(scenario, 2, defaults, dp_orders=None)


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_the_realisation_sampler_is_what_a_reset_replays(name):
    """``sample_realisation(scenario, rng)`` draws a single env's ``reset`` options; a pure function of the
    scenario, so the same generator state gives the same realisation, and the core's method is the same draw."""
    info = SCHEMES[name]
    scenario = info.scenario(num_rounds=3)
    first = info.sample_realisation(scenario, np.random.default_rng(7))
    again = info.sample_realisation(scenario, np.random.default_rng(7))
    assert first.keys() == again.keys() and all(np.array_equal(first[k], again[k]) for k in first)
    core = make_core(name, scenario, 1, {})
    assert set(first) <= set(core.OPTION_AXES)
    if hasattr(core, "sample_realisation"):
        from_core = core.sample_realisation(np.random.default_rng(7))
        assert all(np.array_equal(first[k], from_core[k]) for k in first)
    env = OTAPrivacyEnv(scenario, scheme=name)
    env.reset(seed=0, options=first)


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_the_observation_is_written_through_its_named_layout(name):
    info = SCHEMES[name]
    core = make_core(name, None, 2, {})
    core.reset(np.random.default_rng(0))
    names = info.observation_layout.entry_names(core.scenario)
    assert len(set(names)) == len(names) == core.observation_space().shape[0] == core.observation().shape[1]


def test_the_cdpb_layout_adds_its_per_client_blocks():
    from otagym.schemes.cdpb import observation

    s = SCHEMES["cdpb"].scenario(num_clients=3, csi_feedback=True, client_sampling=0.5)
    names = observation.entry_names(s)
    assert names[:len(observation.ENTRIES)] == observation.ENTRIES
    assert names[len(observation.ENTRIES):] == ("log_channel_gain[0]", "log_channel_gain[1]", "log_channel_gain[2]",
                                                "sampled[0]", "sampled[1]", "sampled[2]")
    assert make_core("cdpb", s, 1, {}).observation_space().shape == (len(names),)


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_the_core_decodes_actions_with_its_schemes_decoder(name, monkeypatch):
    """A step decodes its action with the scheme's one decoder (``actions.action_to_rho`` / ``action_to_sigma``; receive
    scaling: the compiled ``actions.decide``, which its round kernel inlines and ``decode_actions`` applies to arrays),
    which a policy can call without building a core."""
    info = SCHEMES[name]
    package = importlib.import_module(f"otagym.schemes.{name}")
    if hasattr(package, "kernel"):  # a compiled round: its kernel calls the decoder, not Python
        assert package.kernel.decide is package.actions.decide
        return
    decoders = [n for n in package.actions.__all__ if n.startswith("action_to_")]
    assert len(decoders) == 1 and getattr(package, decoders[0]) is getattr(package.actions, decoders[0])
    calls = []
    decoder = getattr(package.actions, decoders[0])
    monkeypatch.setattr(sys.modules[info.core.__module__], decoders[0],
                        lambda *args, **kwargs: calls.append(kwargs) or decoder(*args, **kwargs))
    core = make_core(name, None, 2, {})
    core.reset(np.random.default_rng(0))
    core.step(np.random.default_rng(1), np.zeros((2, 1), dtype=np.float32))
    assert len(calls) == 1 and calls[0]["action_type"] in package.actions.ACTION_TYPES


def test_task_defaults_and_constraint_come_from_the_registry():
    for task in TASKS.values():
        info = get_scheme(task.scheme)
        assert set(info.task_settings) <= set(task.kwargs)
        assert task.constrained == info.constrained(task.kwargs)
    assert not constrained({}) and constrained({"reward_mode": "cmdp"})
    assert constrained({"scheme": "cdpb"}) and constrained({"scheme": "anonymous"})


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_make_rounds_builds_the_registered_core_on_the_default_preset(name):
    info = SCHEMES[name]
    rounds = make_core(name, None, 2, {})
    assert type(rounds) is info.core and rounds.num_envs == 2
    assert rounds.scenario == info.presets[info.default_preset]
    env = gym.make(ENV_ID, scheme=name)
    assert type(env.unwrapped.core) is info.core


def test_unknown_scheme_is_refused_naming_scheme_and_the_registered_names():
    with pytest.raises(ValueError, match="scheme must be one of 'receive_scaling', 'cdpb', 'anonymous'; got 'nope'"):
        get_scheme("nope")
    with pytest.raises(ValueError, match="scheme must be one of .*; got 'nope'"):
        OTAPrivacyEnv(scheme="nope")
    with pytest.raises(TypeError, match="scheme must be"):
        make_core(None, None, 1, {})
