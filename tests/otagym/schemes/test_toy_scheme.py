"""Adding a scheme touches its package, its baselines package and one registry line, nothing else: a toy scheme
written here as its two packages would be (its Scenario and presets, its task declaration, its core behind
``SchemeParts``; its ``SchemeBenchmark``) and registered with one line, as the name in :data:`otagym.schemes.Scheme`
does at import. The env, the vector env, Gymnasium's checker, the SB3 adapter, the render, the task builder and the
scoring then find it (docs/environment/layout.md, "Adding a scheme")."""

from __future__ import annotations

import dataclasses
import sys
import types
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

from otagym.env import OTAPrivacyEnv, OTAPrivacyVectorEnv
from otagym.schemes import SCHEMES, ObservationLayout, SchemeInfo, SchemeParts
from otagym.schemes.episodes import restart_rows
from otagym.validation import check_dataclass


# --- the toy's package: otagym/schemes/toy/ ----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ToyScenario:
    """A round draws a level in [0, 1]; the action guesses it; the reward is minus the squared miss."""

    num_rounds: int = 6


PRESETS = {"toy": ToyScenario(), "toy-long": ToyScenario(num_rounds=12)}


def get_toy_scenario(scenario: Any, **overrides: Any) -> ToyScenario:
    base = PRESETS[scenario] if isinstance(scenario, str) else scenario
    return dataclasses.replace(base, **overrides)


@dataclasses.dataclass(frozen=True)
class ToyOptions:
    """No env arguments beside the scenario's."""

    def __post_init__(self) -> None:
        check_dataclass(self)


@dataclasses.dataclass
class ToyEpisodes:
    t: Any
    level: Any
    rdp: Any


class ToyCore:
    OPTIONS: ClassVar[type] = ToyOptions
    ARGS: ClassVar[dict] = {}
    OPTION_AXES: ClassVar[dict] = {}
    EPISODE_END_KEYS: ClassVar[tuple[str, ...]] = ()
    APPLIES_WITH: ClassVar[dict] = {}

    def __init__(self, scenario: ToyScenario, num_envs: int, **env_args: Any) -> None:
        self.scenario, self.num_envs, self.num_rounds = scenario, num_envs, scenario.num_rounds
        self.state = ToyEpisodes(np.zeros(num_envs, dtype=np.int64), np.zeros(num_envs), np.zeros(num_envs))
        self.fading = None

    @property
    def t(self) -> Any:
        return self.state.t

    def reset(self, rng: np.random.Generator, mask: Any = None, **options: Any) -> None:
        rows = np.ones(self.num_envs, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        restart_rows(rows, self.state.t, self.state.rdp)
        self.state.level[rows] = rng.random(int(rows.sum()))
        self.fading = True

    def step(self, rng: np.random.Generator, action: Any) -> tuple[Any, Any, dict[str, Any]]:
        guess = np.clip(np.asarray(action, dtype=float).reshape(self.num_envs), 0.0, 1.0)
        state = self.state
        reward = -((guess - state.level) ** 2)
        state.t += 1
        state.rdp += 0.1
        info = {"round": state.t - 1, "guess": guess, "cost": np.full(self.num_envs, 0.5),
                "rdp_cumulative": state.rdp[:, None].copy()}
        state.level = rng.random(self.num_envs)
        return reward, state.t >= self.num_rounds, info

    def observation(self) -> Any:
        return np.stack([self.state.level, self.state.t / self.num_rounds], axis=1).astype(np.float32)

    def observation_space(self) -> spaces.Box:
        return spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)

    def action_space(self) -> spaces.Box:
        return spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)

    def reset_info(self) -> dict[str, Any]:
        n = self.num_envs
        return {"round": np.full(n, -1), "guess": np.zeros(n), "cost": np.zeros(n), "rdp_cumulative": np.zeros((n, 1))}

    def option_shapes(self) -> dict[str, Any]:
        return {}

    def next_channel_info(self) -> dict[str, Any]:
        return {}


def _sample_realisation(scenario: ToyScenario, rng: np.random.Generator) -> dict[str, Any]:
    return {}


SCHEME = SchemeInfo(
    "toy", ToyScenario, get_toy_scenario, "toy", PRESETS,
    task_settings={"scenario": "toy"},
    tasks=(dict(name="Toy", settings={}, eval_nus=(1.0,), budget="none", anchors=("Zero", "Half"),
                summary="Guess the round's level."),),
    action_key="guess", info_keys=("guess", "cost"),
    parts=lambda: SchemeParts(ToyCore, _sample_realisation,
                              observation_layout=ObservationLayout("toy/1", lambda scenario: ("level", "progress"))))


# --- the toy's baselines package: baselines/toy/benchmark.py ------------------------------------------------------
def _benchmark_module() -> types.ModuleType:
    from baselines.benchmark import ConstantAction, SchemeBenchmark

    class ToyBenchmark(SchemeBenchmark):
        def references(self, task_id: str) -> dict[str, Any]:
            return {"Zero": (lambda: ConstantAction(0.0), {}), "Half": (lambda: ConstantAction(0.5), {})}

    module = types.ModuleType("baselines.toy.benchmark")
    module.BENCHMARK = ToyBenchmark()
    return module


@pytest.fixture
def toy(monkeypatch):
    """The toy registered: one line (its packages stand in sys.modules, where Python would find their files)."""
    monkeypatch.setitem(SCHEMES, "toy", SCHEME)
    monkeypatch.setitem(sys.modules, "baselines.toy", types.ModuleType("baselines.toy"))
    monkeypatch.setitem(sys.modules, "baselines.toy.benchmark", _benchmark_module())
    return SCHEME


def test_a_new_scheme_runs_in_both_shells_and_passes_gymnasiums_checker(toy):
    env = OTAPrivacyEnv(scheme="toy", render_mode="ansi")
    check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=3)
    total, steps, done = 0.0, 0, False
    while not done:
        obs, reward, done, _, info = env.step(np.array([0.5], dtype=np.float32))
        total, steps = total + reward, steps + 1
    assert steps == 6 and info["episode_cost"] == pytest.approx(3.0) and info["cost_limit"] == 6.0
    assert "guess=0.5" in env.render()
    env_long = gym.make("otagym/OTAPrivacy-v0", scheme="toy", scenario="toy-long")
    env_long.reset(seed=0)
    assert env_long.unwrapped.core.num_rounds == 12
    venv = OTAPrivacyVectorEnv(4, scheme="toy")
    venv.reset(seed=3)
    for _ in range(7):  # past an episode's end: the vector env autoresets the toy's rows
        obs, reward, terminated, truncated, info = venv.step(np.full((4, 1), 0.5, dtype=np.float32))
    assert obs.shape == (4, 2) and reward.shape == (4,)


def test_a_new_scheme_reaches_the_sb3_adapter_the_tasks_and_the_scoring(toy):
    from baselines.benchmark import scheme_benchmark
    from otagym.tasks import build_task
    from otagym.wrappers.sb3 import OTAPrivacySB3VecEnv

    venv = OTAPrivacySB3VecEnv(2, scheme="toy")
    venv.reset()
    _, _, _, infos = venv.step(np.full((2, 1), 0.5, dtype=np.float32))
    assert venv.info_keys == ("guess", "cost") and infos[0]["guess"] == 0.5
    task = build_task(toy, toy.tasks[0])
    assert task.id == "otagym/Toy-v0" and task.kwargs == {"scheme": "toy", "scenario": "toy"}
    assert task.max_episode_steps == 6 and task.scheme == "toy" and task.constrained
    assert set(scheme_benchmark("toy").references(task.id)) == {"Zero", "Half"}
