"""The env driven by the RL tools users have, their own way: SB3's make_vec_env with the string id, rl_zoo3's train
script with our YAML, TorchRL's GymEnv / GymWrapper with check_env_specs, RLlib (where ray is installed: the second CI
environment, gymnasium 1.2.2)."""

import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import otagym
from otagym import ENV_ID, OTAPrivacyEnv, OTAPrivacyVectorEnv

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


@pytest.mark.slow
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

    env = GymWrapper(OTAPrivacyVectorEnv(4, num_rounds=10, dp_orders=None, autoreset_mode=AutoresetMode.SAME_STEP))
    check_env_specs(env)
    td = env.rollout(25, break_when_any_done=False)
    t_index = 2 * 10 + 1  # t/T in the observation
    assert td["next", "done"][:, 9].all()
    np.testing.assert_allclose(td["next", "observation"][:, 9, t_index].numpy(), 1.0)  # the episode's last obs
    np.testing.assert_allclose(td["observation"][:, 10, t_index].numpy(), 0.0)  # the next episode's first


@pytest.mark.slow
def test_module_prefixed_ids_resolve_in_a_process_that_never_imported_otagym():
    """Gymnasium 1.x loads no plugin entry points (``load_plugin_envs`` and the ``gymnasium.envs`` group went in 1.0;
    1.2.2 and 1.4.0 have neither), so a bare id resolves only in a process that imported otagym. ``"otagym:ID"``
    makes ``gym.make`` / ``gym.make_vec`` import otagym (which registers every id) first: every id works in a fresh
    process, as on RLlib's remote env runners."""
    ids = [ENV_ID, *otagym.TASKS]
    code = f"""
import sys
import gymnasium as gym
assert "otagym" not in sys.modules
env = gym.make("otagym:{ENV_ID}", num_rounds=5, dp_orders=None)
assert "otagym" in sys.modules and env.spec.id == "{ENV_ID}"
env.reset(seed=0)
for _ in range(5):
    terminated = env.step(env.action_space.sample())[2]
assert terminated
for env_id in {ids!r}:
    assert gym.make("otagym:" + env_id).spec.id == env_id
    venv = gym.make_vec("otagym:" + env_id, num_envs=2, vectorization_mode="vector_entry_point")
    assert venv.reset(seed=0)[0].shape[0] == 2
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout[-2000:] + done.stderr[-2000:]


class _EnvContext(dict):
    """What RLlib passes an env class: a dict subclass with the runner's indices as attributes."""

    worker_index, vector_index, num_workers, remote = 1, 0, 1, False


@pytest.mark.parametrize("as_config", [dict, _EnvContext], ids=["dict", "dict_subclass"])
def test_a_mapping_as_the_only_positional_argument_is_read_as_keyword_arguments(as_config):
    """RLlib builds an env class as ``cls(env_config)``: the mapping lands in ``scenario`` and holds the keyword
    arguments, ``scenario``, ``scheme`` and ``render_mode`` among them."""
    kwargs = {"num_rounds": 20, "nu": 0.02, "dp_orders": None}
    env = OTAPrivacyEnv(as_config(kwargs, scenario="paper-cifar10", render_mode="ansi"))
    ref = OTAPrivacyEnv("paper-cifar10", "ansi", **kwargs)
    assert env.scenario == ref.scenario and env.render_mode == "ansi" and env.scheme == "receive_scaling"
    np.testing.assert_array_equal(env.reset(seed=3)[0], ref.reset(seed=3)[0])
    cdpb = OTAPrivacyEnv(as_config(scheme="cdpb", num_rounds=7))
    assert cdpb.scheme == "cdpb" and cdpb.scenario == otagym.get_cdpb_scenario("paper-cdpb", num_rounds=7)
    assert OTAPrivacyEnv(as_config(num_rounds=9), dp_orders=None).scenario.num_rounds == 9  # merged with keywords
    assert gym.make(ENV_ID, scenario=as_config(num_rounds=11)).unwrapped.scenario.num_rounds == 11
    assert OTAPrivacyEnv(as_config()).scenario == OTAPrivacyEnv().scenario


@pytest.mark.parametrize("make, match", [
    (lambda: OTAPrivacyEnv({"num_rounds": 20}, num_rounds=30), "num_rounds given both"),
    (lambda: OTAPrivacyEnv({"scheme": "cdpb"}, scheme="anonymous"), "scheme given both"),
    (lambda: OTAPrivacyEnv({"render_mode": "ansi"}, "rgb_array"), "render_mode given both"),
    (lambda: OTAPrivacyEnv({"scenario": {"num_rounds": 20}}), "put its keys in the outer mapping"),
    (lambda: OTAPrivacyEnv({1: 2}), "keyword-argument names"),
    (lambda: OTAPrivacyEnv({"num_round": 20}), "num_round"),
], ids=["field", "scheme", "render_mode", "nested", "non_str_key", "unknown"])
def test_a_mapping_mixed_with_conflicting_keyword_arguments_is_refused(make, match):
    with pytest.raises(TypeError, match=match):
        make()


@pytest.mark.parametrize("env", ["otagym:" + ENV_ID, OTAPrivacyEnv], ids=["module_prefixed_id", "class"])
def test_rllib_remote_env_runner_builds_the_env_with_env_config(env):
    """The README's RLlib examples: a remote env runner (a process that never imported otagym) builds the env from
    ``"otagym:otagym/OTAPrivacy-v0"`` (``env_config`` as ``gym.make`` keyword arguments) or from the class
    (``OTAPrivacyEnv(env_config)``) (ray[rllib] pins gymnasium 1.2.2: CI runs this in its second environment)."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.rllib")
    import os

    from ray.rllib.algorithms.ppo import PPOConfig

    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    try:
        config = (PPOConfig()
                  .environment(env, env_config={"scenario": "paper-mnist", "num_rounds": 20, "nu_range": (0.01, 0.16),
                                                "dp_orders": None})
                  .env_runners(num_env_runners=1)
                  .training(train_batch_size=200, minibatch_size=100, num_epochs=1))
        algo = config.build_algo()
        result = algo.train()
        remote = algo.env_runner_group.foreach_env_runner(
            lambda r: (os.getpid(), type(r.env.unwrapped.envs[0].unwrapped).__name__), local_env_runner=False)
        algo.stop()
    finally:
        ray.shutdown()
    assert [name for _, name in remote] == ["OTAPrivacyEnv"] and remote[0][0] != os.getpid()
    assert result["env_runners"]["num_env_steps_sampled"] >= 200
    assert result["env_runners"]["episode_len_mean"] == 20  # env_config reached the env


def test_rllib_trains_one_iteration():
    """RLlib with an env creator registered by name (the local env runner; ray[rllib] pins gymnasium 1.2.2: CI runs
    this in its second environment)."""
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


@pytest.mark.slow  # starts three pairs of worker processes: about 20 s
def test_sb3_subprocesses_see_the_bare_id_from_a_script_but_not_from_python_c(tmp_path):
    """What docs/environment/integrations.md says: SubprocVecEnv's workers re-import the main script, so from a script
    that imports otagym the bare id works; from ``python -c`` nothing imports it there, the workers fail with
    ``Namespace otagym not found`` and the parent sees ``ConnectionResetError``; the id with its module works."""
    pytest.importorskip("stable_baselines3")
    body = ("from stable_baselines3.common.env_util import make_vec_env\n"
            "from stable_baselines3.common.vec_env import SubprocVecEnv\n"
            "if __name__ == '__main__':\n"
            "    venv = make_vec_env({id!r}, n_envs=2, vec_env_cls=SubprocVecEnv)\n"
            "    print('ok', venv.reset().shape)\n"
            "    venv.close()\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                              env=env)

    script = tmp_path / "train.py"
    script.write_text("import otagym  # noqa: F401\n" + body.format(id="otagym/ReceiveScalingIID-v0"))
    assert "ok (2, 36)" in run(str(script)).stdout
    bare = run("-c", "import otagym\n" + body.format(id="otagym/ReceiveScalingIID-v0"))
    assert (bare.returncode != 0 and "ConnectionResetError" in bare.stderr
            and "Namespace otagym not found" in bare.stderr)
    assert "ok (2, 36)" in run("-c", body.format(id="otagym:otagym/ReceiveScalingIID-v0")).stdout


def test_the_integrations_pages_sb3_block_with_vector_wrappers_runs():
    """docs/environment/integrations.md's SAC on the natively stepped env with the relative-spend wrapper runs as
    written, and SB3 saw the wrapper's action space through the adapter."""
    pytest.importorskip("stable_baselines3")
    import re

    page = (ROOT / "docs" / "environment" / "integrations.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)\n```", page, re.S) if "vector_wrappers" in b)
    namespace: dict = {}
    exec(compile(block, "integrations.md", "exec"), namespace)
    model, venv = namespace["model"], namespace["venv"]
    assert model.num_timesteps >= 2048 and type(venv.venv).__name__ == "RelativeSpendVector"
