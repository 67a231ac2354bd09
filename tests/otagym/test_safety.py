"""Constrained RL on the tasks: the cost's scale against the limit, Safety-Gymnasium's 6-tuple view and back, and the
OmniSafe registration recipe (examples/omnisafe_cmdp.py) run against a minimal stand-in of ``omnisafe.envs.core``
(OmniSafe 0.5 cannot be installed beside gymnasium >= 1)."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import ClipAction

import otagym  # noqa: F401 - registers the tasks
from otagym.env import OTAPrivacyEnv
from otagym.wrappers.safety import Gymnasium2SafetyGymnasium, SafetyGymnasium2Gymnasium
from otagym.tasks import TASKS

ROOT = Path(__file__).resolve().parents[2]
CDPB = "otagym/CDPB-v1"


@pytest.mark.slow
@pytest.mark.parametrize("task_id,low,high", [
    ("otagym/ReceiveScalingIID-v0", 1.0 - 1e-9, 1.0 + 1e-9),  # budget mode meets nu exactly: cost T per episode
    ("otagym/AnonymousOTA-v0", 0.5, 5.0),  # the action range is chosen for it (1.5x)
    (CDPB, 0.5, 2.0)])  # eps-bar = 1 is chosen for it (1.1x)
def test_a_random_policys_episode_cost_against_the_limit(task_id, low, high):
    task = TASKS[task_id]
    env = gym.make_vec(task_id, num_envs=16)
    env.reset(seed=0)
    rng, cost = np.random.default_rng(0), np.zeros(16)
    for _ in range(task.max_episode_steps):
        cost += env.step(rng.uniform(-1, 1, (16, 1)).astype(np.float32))[4]["cost"]
    assert low <= np.median(cost) / task.cost_limit <= high


def play(env, actions, six: bool):
    out = [env.reset(seed=4)]
    for a in actions:
        out.append(env.step(a))
    return out


def test_the_six_tuple_view_and_back_change_nothing_but_where_the_cost_is():
    actions = np.random.default_rng(0).uniform(-1.2, 1.2, (100, 1)).astype(np.float32)
    plain = play(ClipAction(gym.make(CDPB)), actions, False)
    safe = play(Gymnasium2SafetyGymnasium(ClipAction(gym.make(CDPB))), actions, True)
    back = play(SafetyGymnasium2Gymnasium(ClipAction(Gymnasium2SafetyGymnasium(gym.make(CDPB)))), actions, False)
    for p, s, b in zip(plain[1:], safe[1:], back[1:]):
        obs, reward, terminated, truncated, info = p
        assert len(s) == 6 and s[2] == info["cost"] and isinstance(s[2], float)
        np.testing.assert_array_equal(s[0], obs)
        assert (s[1], s[3], s[4]) == (reward, terminated, truncated)
        np.testing.assert_array_equal(b[0], obs)
        assert b[1:4] == (reward, terminated, truncated) and b[4]["cost"] == info["cost"]
    assert plain[-1][2]  # the episode ended at T
    with pytest.raises(KeyError, match="no info\\['cost'\\]"):
        env = Gymnasium2SafetyGymnasium(OTAPrivacyEnv(scheme="anonymous", num_rounds=3))
        env.reset(seed=0)
        env.step(np.zeros(1, dtype=np.float32))


@pytest.fixture
def omnisafe_stand_in(monkeypatch):
    """``omnisafe.envs.core`` as far as the recipe uses it: a ``CMDP`` base and ``env_register``/``make``."""
    registry: dict[str, type] = {}

    class CMDP:
        @property
        def observation_space(self):
            return self._observation_space

        @property
        def action_space(self):
            return self._action_space

    def env_register(cls):
        for env_id in cls._support_envs:
            registry[env_id] = cls
        return cls

    def make(env_id, num_envs=1, device="cpu", **kwargs):
        return registry[env_id](env_id, num_envs=num_envs, device=device, **kwargs)

    core = types.ModuleType("omnisafe.envs.core")
    core.CMDP, core.env_register, core.make = CMDP, env_register, make
    for name, module in (("omnisafe", types.ModuleType("omnisafe")),
                         ("omnisafe.envs", types.ModuleType("omnisafe.envs")), ("omnisafe.envs.core", core)):
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.spec_from_file_location("omnisafe_cmdp", ROOT / "examples" / "omnisafe_cmdp.py")
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    return core, registry


def test_the_omnisafe_recipe_registers_every_task_and_steps_torch_tensors(omnisafe_stand_in):
    torch = pytest.importorskip("torch")
    core, registry = omnisafe_stand_in
    assert set(registry) == set(TASKS)
    env = core.make(CDPB)
    assert env.max_episode_steps == 100 and env.cost_limit == 100.0
    obs, _ = env.reset(seed=7)
    assert obs.dtype == torch.float32 and obs.shape == env.observation_space.shape
    plain = gym.make(CDPB)
    plain.reset(seed=7)
    total = 0.0
    for t in range(100):
        a = torch.full((1,), -0.5 + 0.2 * np.sin(t))  # rho about P / (4 W^2): within eps-bar
        obs, reward, cost, terminated, truncated, info = env.step(a)
        _, r, term, _, i = plain.step(a.numpy())
        assert reward.item() == pytest.approx(r, rel=1e-6) and cost.item() == pytest.approx(i["cost"], rel=1e-6)
        total += cost.item()
    assert bool(terminated) and "final_observation" in info and 0.5 * env.cost_limit < total < env.cost_limit
    with pytest.raises(ValueError, match="num_envs must be 1"):
        core.make(CDPB, num_envs=2)
