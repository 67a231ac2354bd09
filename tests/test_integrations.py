"""The env driven by the RL tools users have, their own way: SB3's make_vec_env with the string id, rl_zoo3's train
script with our YAML, TorchRL's GymEnv / GymWrapper with check_env_specs, RLlib (where ray is installed: the second CI
environment, gymnasium 1.2.2)."""

import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import otagym
from otagym import ENV_ID, OTAPrivacyVectorEnv

ROOT = Path(__file__).resolve().parents[1]


def test_gymnasium_version_is_supported():
    major, minor = (int(v) for v in gym.__version__.split(".")[:2])
    assert (major, minor) >= (1, 1)


def test_sb3_make_vec_env_with_the_string_id():
    """SB3 passes render_mode="rgb_array" first; the env supports it (an image of the episode so far)."""
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env(ENV_ID, n_envs=4, seed=0, env_kwargs={"num_rounds": 10, "dp_orders": None})
    obs = venv.reset()
    assert obs.shape == (4, 36)
    assert venv.get_attr("render_mode") == ["rgb_array"] * 4
    PPO("MlpPolicy", venv, n_steps=16, batch_size=32, n_epochs=1, seed=0).learn(64)
    venv.reset()
    for _ in range(10):
        obs, reward, done, infos = venv.step(np.zeros((4, 1), np.float32))
    assert done.all() and infos[0]["terminal_observation"].shape == (36,)
    assert venv.render().ndim == 3


def test_rl_zoo3_trains_from_our_yaml(tmp_path):
    pytest.importorskip("rl_zoo3")
    cmd = [sys.executable, "-m", "rl_zoo3.train", "--algo", "ppo", "--env", ENV_ID, "--gym-packages", "otagym",
           "--conf-file", str(ROOT / "agents" / "configs" / "ppo.yml"), "-n", "8192", "--eval-freq", "-1",
           "--seed", "0", "-f", str(tmp_path), "--env-kwargs", "num_rounds:20", "nu_range:[0.01,0.16]",
           "dp_orders:None"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    saved = list(tmp_path.glob("ppo/*/*.zip"))
    assert saved, done.stdout[-2000:]


def test_torchrl_gym_env_and_check_env_specs():
    pytest.importorskip("torchrl")
    from torchrl.envs import GymEnv
    from torchrl.envs.utils import check_env_specs

    env = GymEnv(ENV_ID, num_rounds=12, dp_orders=None)  # TorchRL passes frameskip first and retries on TypeError
    check_env_specs(env)
    td = env.rollout(12)
    assert td["next", "done"][-1].item() and td["next", "observation"].shape == (12, 36)


def test_torchrl_gym_wrapper_around_the_native_vector_env_keeps_terminal_observations():
    pytest.importorskip("torchrl")
    from torchrl.envs import GymWrapper
    from torchrl.envs.utils import check_env_specs

    env = GymWrapper(OTAPrivacyVectorEnv(4, num_rounds=10, dp_orders=None))
    check_env_specs(env)
    td = env.rollout(25, break_when_any_done=False)
    t_index = 2 * 10 + 1  # t/T in the observation
    assert td["next", "done"][:, 9].all()
    np.testing.assert_allclose(td["next", "observation"][:, 9, t_index].numpy(), 1.0)  # the episode's last obs
    np.testing.assert_allclose(td["observation"][:, 10, t_index].numpy(), 0.0)  # the next episode's first


def test_rllib_trains_one_iteration():
    """The README's RLlib example (ray[rllib] pins gymnasium 1.2.2: CI runs this in its second environment)."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.rllib")
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.tune.registry import register_env

    register_env("otagym", lambda cfg: otagym.OTAPrivacyEnv(**cfg))
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    try:
        config = (PPOConfig()
                  .environment("otagym", env_config={"nu_range": (0.01, 0.16), "dp_orders": None})
                  .env_runners(num_env_runners=0)
                  .training(train_batch_size=200, minibatch_size=100, num_epochs=1))
        algo = config.build_algo()
        result = algo.train()
        algo.stop()
    finally:
        ray.shutdown()
    assert result["env_runners"]["num_env_steps_sampled"] >= 200
