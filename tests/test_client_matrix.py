"""Every benchmark task driven by every RL client the way its users drive it, for one or two full episodes (T rounds),
with the episode returns each client reports checked against an independent sum of the rewards it handed over and,
where the client shows the env's info, against the closed form of the return: receive scaling's budget mode
-(L - L_EqualAlloc) / (T x the placement's stationary headroom) (docs/rl.md §3); CDPB's and anonymous OTA's
-(the episode's utility) / the task's reward scale. RLlib runs in CI's second environment
(tests/test_integrations.py); rl_zoo3 trains briefly on one task per distinct config entry."""

import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import otagym  # noqa: F401 - registers the tasks
from otagym.schemes.receive_scaling import ReceiveScalingModel
from otagym.tasks import TASKS

pytestmark = pytest.mark.slow  # full episodes through every client: CI runs it, the unit lane skips it
ROOT = Path(__file__).resolve().parents[1]
TASK_IDS = sorted(TASKS)


def closed_form_return(env: gym.Env, info: dict) -> float:
    """The episode's return from the last step's info (and, for receive scaling, the reset info's placement),
    independent of the rewards the env summed: -(L - L_EqualAlloc) / S, S recomputed from the placement
    (``mean_channel_gain``) and nu; or -utility / the task's reward scale."""
    task = TASKS[env.spec.id]
    if task.scheme != "receive_scaling":
        return -float(info["utility"]) / task.kwargs["reward_scale"]
    model = ReceiveScalingModel(env.unwrapped.scenario)
    mean_h = model.expected_h_min2(np.asarray(info["reset_mean_channel_gain"], dtype=float))
    scale = env.unwrapped.scenario.num_rounds * model.stationary_headroom(float(info["nu"]), mean_h)
    return -(float(info["leakage_total"]) - float(info["equal_alloc_leakage"])) / float(scale)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_gymnasium_wrappers_and_check_env(task_id):
    from gymnasium.utils.env_checker import check_env
    from gymnasium.wrappers import (ClipAction, NormalizeObservation, RecordEpisodeStatistics,
                                    TimeAwareObservation)

    check_env(gym.make(task_id).unwrapped, skip_render_check=True)
    env = RecordEpisodeStatistics(NormalizeObservation(TimeAwareObservation(ClipAction(gym.make(task_id)))))
    obs, info = env.reset(seed=1)
    T = TASKS[task_id].max_episode_steps
    mean_gain, total, rng = info.get("mean_channel_gain"), 0.0, np.random.default_rng(0)
    for t in range(T):
        obs, reward, terminated, truncated, info = env.step(rng.uniform(-0.3, 0.3, 1).astype(np.float32))
        total += reward
        assert np.all(np.isfinite(obs)) and (terminated or truncated) == (t == T - 1)
    assert info["episode"]["l"] == T and info["episode"]["r"] == pytest.approx(total, rel=1e-6)
    assert total == pytest.approx(closed_form_return(env, {**info, "reset_mean_channel_gain": mean_gain}), rel=1e-9)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_sb3_make_vec_env_with_subprocesses(task_id):
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    # SB3's workers are forkserver processes that never import otagym: the id names its module (Gymnasium imports it)
    venv = make_vec_env(f"otagym:{task_id}", n_envs=2, seed=0, vec_env_cls=SubprocVecEnv)
    T = TASKS[task_id].max_episode_steps
    try:
        venv.reset()
        sums, rng = np.zeros(2), np.random.default_rng(0)
        for t in range(T):
            _, rewards, dones, infos = venv.step(rng.uniform(-0.3, 0.3, (2, 1)).astype(np.float32))
            sums += rewards
        assert dones.all() and [i["episode"]["l"] for i in infos] == [T, T]
        np.testing.assert_allclose([i["episode"]["r"] for i in infos], sums, rtol=1e-5)
    finally:
        venv.close()


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_cleanrl_style_loop_with_vector_episode_statistics(task_id):
    envs = gym.wrappers.vector.RecordEpisodeStatistics(gym.make_vec(task_id, num_envs=4))
    envs.reset(seed=3)
    T = TASKS[task_id].max_episode_steps
    sums, recorded, rng = np.zeros(4), [], np.random.default_rng(1)
    for _ in range(2 * T + 1):  # two episodes and the NEXT_STEP reset step between them
        _, rewards, terminated, truncated, infos = envs.step(rng.uniform(-0.3, 0.3, (4, 1)).astype(np.float32))
        sums += rewards
        if "episode" in infos:
            done = infos["_episode"]
            recorded += list(zip(infos["episode"]["l"][done], infos["episode"]["r"][done], sums[done]))
            sums[done] = 0.0
    assert len(recorded) == 8
    for length, ret, independent in recorded:
        assert length == T and ret == pytest.approx(independent, rel=1e-5)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_torchrl_gym_env_specs_and_rollout(task_id):
    pytest.importorskip("torchrl")
    from torchrl.envs import GymEnv
    from torchrl.envs.utils import check_env_specs

    env = GymEnv(task_id)
    check_env_specs(env)
    T = TASKS[task_id].max_episode_steps
    rollout = env.rollout(T, break_when_any_done=True)
    assert rollout.shape[0] == T and bool(rollout["next", "done"][-1])
    assert np.isfinite(rollout["next", "reward"].numpy()).all()


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_tianshou_vector_envs(task_id):
    pytest.importorskip("tianshou")
    from tianshou.env import DummyVectorEnv, SubprocVectorEnv

    T = TASKS[task_id].max_episode_steps
    # fork, Tianshou's default on Linux, explicitly: importing TorchRL (another test's) sets multiprocessing's start
    # method to spawn, which cannot send these lambdas to the workers
    for make in (DummyVectorEnv, lambda fns: SubprocVectorEnv(fns, context="fork")):
        envs = make([lambda: gym.make(task_id) for _ in range(2)])
        try:
            envs.seed(5)
            envs.reset()
            sums, rng = np.zeros(2), np.random.default_rng(2)
            for t in range(T):
                _, rewards, terminated, truncated, infos = envs.step(
                    rng.uniform(-0.3, 0.3, (2, 1)).astype(np.float32))
                sums += rewards
            assert (terminated | truncated).all() and np.all(np.isfinite(sums))
            if TASKS[task_id].scheme == "receive_scaling":
                closed = [-(i["leakage_total"] - i["equal_alloc_leakage"]) for i in infos]
                assert np.all(np.sign(closed) == np.sign(sums))  # the return is that sum over a positive scale
            else:
                scale = TASKS[task_id].kwargs["reward_scale"]
                np.testing.assert_allclose(sums, [-i["utility"] / scale for i in infos], rtol=1e-9)
        finally:
            envs.close()


@pytest.mark.parametrize("task_id", ["otagym/ReceiveScalingBlock-v0", "otagym/ReceiveScalingCMDP-v1", "otagym/CDPB-v1",
                                     "otagym/AnonymousOTA-v0"])
def test_rl_zoo3_trains_on_a_task_with_the_shipped_config(task_id, tmp_path):
    """One task per distinct config entry or formulation (the receive-scaling tasks share their entry)."""
    pytest.importorskip("rl_zoo3")
    cmd = [sys.executable, "-m", "rl_zoo3.train", "--algo", "ppo", "--env", task_id,
           "--gym-packages", "otagym", "--conf-file", str(ROOT / "agents" / "configs" / "ppo.yml"), "-n", "1024",
           "--log-folder", str(tmp_path), "--seed", "0", "--eval-freq", "-1", "--n-eval-envs", "1",
           "--hyperparams", "n_envs:2", "n_steps:512", "batch_size:256", "n_epochs:1", "--no-optim-plots"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert list(tmp_path.rglob(task_id.replace("/", "-") + ".zip"))


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_rllib_samples_an_episode_of_the_task_by_its_module_prefixed_id(task_id, ray_session):
    """RLlib's env runner builds the task from ``"otagym:<id>"`` (ray[rllib] pins gymnasium 1.2.2: CI runs this in its
    second environment) and one sampled episode's return is the closed form of the env's info."""
    from ray.rllib.algorithms.ppo import PPOConfig

    T = TASKS[task_id].max_episode_steps
    algo = (PPOConfig().environment("otagym:" + task_id).env_runners(num_env_runners=0)
            .training(train_batch_size=T, minibatch_size=T, num_epochs=1)).build_algo()
    try:
        (episode,) = algo.env_runner.sample(num_episodes=1, explore=True)
    finally:
        algo.stop()
    infos = episode.get_infos()
    assert len(episode) == T and episode.is_terminated
    assert episode.get_return() == pytest.approx(float(np.sum(episode.get_rewards())), rel=1e-6)
    last = {**infos[-1], "reset_mean_channel_gain": infos[0].get("mean_channel_gain")}
    assert episode.get_return() == pytest.approx(closed_form_return(gym.make(task_id), last), rel=1e-5)
