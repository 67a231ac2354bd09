"""The native vector env's autoreset modes (``autoreset_mode``): NEXT_STEP (the default) as Gymnasium defines it,
SAME_STEP, and the Gymnasium vector wrappers a CleanRL-style script puts around ``gym.make_vec``.

Why NEXT_STEP is the default (measured with the loop of the first test, 16 envs, 96 episodes of T = 20): gymnasium
1.2.2's vector ``RecordEpisodeStatistics`` assumes NEXT_STEP whatever the metadata says, so under SAME_STEP it recorded
80 of the 96 episodes with length T - 1 and a return missing the first reward; under NEXT_STEP every episode is right
on 1.2.2 and 1.4.0. The vector observation wrappers (``NormalizeObservation``, ``FlattenObservation``) of both versions
accept NEXT_STEP (or DISABLED) only. These tests run in both CI environments (gymnasium 1.4.0 and 1.2.2).
"""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import vector as vector_wrappers

import otagym
from otagym import ENV_ID, OTAPrivacyVectorEnv
from otagym.channel import ChannelModel

TASK_ID = "otagym/ReceiveScalingIID-v0"
T = 20


def _actions(rng, n, steps):
    return rng.uniform(-1, 1, size=(steps, n, 1)).astype(np.float32)


def _played(info, n):
    """Which envs played a round on this step: ``info["round"]`` is the round played (>= 0); a reset info has none
    or the core's blank -1."""
    return info["round"] >= 0 if "round" in info else np.zeros(n, dtype=bool)


@pytest.mark.parametrize("env_id", [ENV_ID, TASK_ID])
def test_record_episode_statistics_records_every_episode_right(env_id):
    """A CleanRL-style loop over ``gym.make_vec(id, n)`` in its default mode: every episode the wrapper records lasts
    T rounds and its return is the sum of that env's rewards over its rounds 0..T-1 (read off ``info["round"]``, not
    off the autoreset rule) and the closed form -(leakage_total - equal_alloc_leakage) / S of the budget reward."""
    n, cycles = 16, 6
    envs = gym.make_vec(env_id, n, num_rounds=T, dp_orders=None)
    assert isinstance(envs.unwrapped, OTAPrivacyVectorEnv)
    assert envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP and envs.autoreset_mode == AutoresetMode.NEXT_STEP
    envs = vector_wrappers.RecordEpisodeStatistics(envs)
    core = envs.unwrapped.core
    steps = cycles * (T + 1) - 1  # every cycle: T rounds and one reset step; the last cycle without it
    rewards = np.zeros((n, T))
    expected, recorded = [], []
    envs.reset(seed=0)
    for actions in _actions(np.random.default_rng(1), n, steps):
        scale = core.state.reward_scale.copy()  # this episode's S (the reset step replaces it)
        _, reward, terminated, truncated, info = envs.step(actions)
        assert not truncated.any()
        played = _played(info, n)  # none on a reset step, which returns the reset info
        if played.any():
            rewards[played, info["round"][played]] = reward[played]
        assert not reward[~played].any() and not terminated[~played].any()
        for i in np.flatnonzero(terminated):
            assert info["round"][i] == T - 1
            closed_form = -(info["leakage_total"][i] - info["equal_alloc_leakage"][i]) / scale[i]
            expected.append((i, T, rewards[i].sum(), closed_form))
        if "episode" in info:
            for i in np.flatnonzero(info["_episode"]):
                recorded.append((i, int(info["episode"]["l"][i]), float(info["episode"]["r"][i])))
    assert len(expected) == cycles * n and len(recorded) == len(expected)
    for (i, length, total, closed_form), (j, rec_length, rec_return) in zip(expected, recorded, strict=True):
        assert (j, rec_length) == (i, length)
        assert rec_return == pytest.approx(total, rel=1e-12, abs=1e-15)
        assert rec_return == pytest.approx(closed_form, rel=1e-9)
    assert list(envs.length_queue) == [T] * len(expected)


@pytest.mark.parametrize("wrapper", [vector_wrappers.NormalizeObservation, vector_wrappers.FlattenObservation])
@pytest.mark.parametrize("env_id", [ENV_ID, TASK_ID])
def test_vector_observation_wrappers_accept_the_default_env(wrapper, env_id):
    n, t = 4, 5
    envs = wrapper(gym.make_vec(env_id, n, num_rounds=t, dp_orders=None))
    obs, _ = envs.reset(seed=0)
    dim = envs.unwrapped.single_observation_space.shape[0]
    assert obs.shape == (n, dim)
    for step in range(2 * (t + 1)):  # two episodes, each with its reset step
        obs, _, terminated, truncated, _ = envs.step(envs.action_space.sample())
        assert obs.shape == (n, dim) and np.isfinite(obs).all()
        assert terminated.all() == (step % (t + 1) == t - 1) and not truncated.any()
    if wrapper is vector_wrappers.NormalizeObservation:
        assert envs.obs_rms.count > 2 * (t + 1)  # it learned from every step


def test_the_observation_wrappers_refuse_same_step():
    """What makes SAME_STEP unfit as the default: Gymnasium's observation wrappers refuse it (a ValueError on 1.4,
    an AssertionError on 1.2)."""
    envs = gym.make_vec(ENV_ID, 2, num_rounds=3, dp_orders=None, autoreset_mode=AutoresetMode.SAME_STEP)
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    for wrapper in (vector_wrappers.NormalizeObservation, vector_wrappers.FlattenObservation):
        with pytest.raises((ValueError, AssertionError)):
            wrapper(envs)


def _episodes(env, seed, actions, episodes, junk):
    """Play ``episodes`` episodes with ``actions`` (T, n, ...) in every one; per episode the observations o_0..o_T, the
    rewards, the rounds' RDP and the channel reported for its first round (``next_channel_info``'s keys)."""
    mode = env.autoreset_mode
    channel_keys = set(env.core.next_channel_info())
    obs, info = env.reset(seed=seed)
    out = []
    for _ in range(episodes):
        first = {k: info[k].copy() for k in channel_keys}
        observations, rewards, played = [obs], [], []
        for t, a in enumerate(actions):
            obs, reward, terminated, truncated, info = env.step(a)
            assert terminated.all() == (t == len(actions) - 1) and not truncated.any()
            rewards.append(reward)
            played.append(info["rdp_round"])
            if mode == AutoresetMode.SAME_STEP and terminated.any():
                assert info["_final_obs"].all() and info["_final_info"].all()
                observations.append(info["final_obs"])
                last = obs, info
            else:
                observations.append(obs)
        if mode == AutoresetMode.NEXT_STEP:
            assert "final_obs" not in info and "final_info" not in info
            obs, reward, terminated, truncated, info = env.step(junk)  # the reset step ignores the actions
            assert not reward.any() and not terminated.any() and not truncated.any()
            assert not _played(info, len(reward)).any()
            assert all(info[f"_{k}"].all() for k in info if not k.startswith("_"))
        else:
            obs, info = last
        out.append((first, np.stack(observations), np.stack(rewards), np.stack(played)))
    return out


@pytest.mark.parametrize("kwargs", [{}, {"fading": "block", "coherence_rounds": 3, "nu_range": (0.01, 0.16)},
                                    {"scheme": "cdpb"}, {"scheme": "anonymous"}],
                         ids=["receive_scaling", "block", "cdpb", "anonymous"])
def test_next_step_and_same_step_play_the_same_episodes(kwargs):
    """Same seed, same actions: both modes play identical episodes (bit for bit: the same draws in the same order),
    NEXT_STEP one step later per episode; and the same seed replays them."""
    n, t, episodes = 3, 7, 3
    env = OTAPrivacyVectorEnv(n, num_rounds=t, **kwargs)
    actions = _actions(np.random.default_rng(2), n, t)
    junk = np.full((n, 1), np.nan, np.float32)  # would be refused if a round were played with it
    if env.single_action_space.shape != (1,):
        actions = np.stack([np.stack([env.single_action_space.sample() for _ in range(n)]) for _ in range(t)])
        junk = np.full((n, *env.single_action_space.shape), np.nan, env.single_action_space.dtype)
    nxt = _episodes(env, 5, actions, episodes, junk)
    same = _episodes(OTAPrivacyVectorEnv(n, num_rounds=t, autoreset_mode="SameStep", **kwargs), 5, actions, episodes,
                     junk)
    again = _episodes(OTAPrivacyVectorEnv(n, num_rounds=t, **kwargs), 5, actions, episodes, junk)
    for (f1, o1, r1, p1), (f2, o2, r2, p2), (f3, o3, r3, p3) in zip(nxt, same, again, strict=True):
        for k in f1:
            np.testing.assert_array_equal(f1[k], f2[k], err_msg=k)
            np.testing.assert_array_equal(f1[k], f3[k], err_msg=k)
        for a, b, c in ((o1, o2, o3), (r1, r2, r3), (p1, p2, p3)):
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(a, c)
    assert not np.array_equal(nxt[0][2], nxt[1][2])  # the episodes differ from each other (new draws)


def test_next_step_ending_step_reports_what_the_single_env_reports():
    """At the ending step NEXT_STEP returns the episode's own last observation and info (no final_* entries): env i
    of the vector env and a single env given env i's placement and channels agree, episode-end entries included."""
    n, t = 2, 6
    venv = OTAPrivacyVectorEnv(n, num_rounds=t, reward_mode="cmdp")
    rng = np.random.default_rng(4)
    distances, gains = ChannelModel.from_scenario(venv.scenario).sample_trace(rng, t, batch_shape=(n,))
    venv.reset(seed=3, options={"distances_m": distances, "channel_gains": gains})
    actions = _actions(rng, n, t)
    for k in range(t):
        vobs, vrew, vterm, _, vinfo = venv.step(actions[k])
    assert vterm.all()
    for i in range(n):
        single = otagym.OTAPrivacyEnv(num_rounds=t, reward_mode="cmdp")
        single.reset(seed=0, options={"distances_m": distances[i], "channel_gains": gains[:, i]})
        for k in range(t):
            sobs, srew, sterm, _, sinfo = single.step(actions[k, i])
        assert sterm and vinfo["_leakage_total"][i]
        np.testing.assert_allclose(vobs[i], sobs, rtol=1e-6)
        assert vrew[i] == pytest.approx(srew, rel=1e-12)
        for key in ("leakage_total", "equal_alloc_leakage", "rdp_cumulative", "dp_epsilon", "convergence_cost_mean"):
            np.testing.assert_allclose(vinfo[key][i], sinfo[key], rtol=1e-12, err_msg=key)


def test_reset_cancels_a_pending_autoreset():
    env = OTAPrivacyVectorEnv(2, num_rounds=2, dp_orders=None)
    env.reset(seed=0)
    for _ in range(2):
        _, _, terminated, _, _ = env.step(np.zeros((2, 1), np.float32))
    assert terminated.all()
    env.reset(seed=1)
    _, _, _, _, info = env.step(np.zeros((2, 1), np.float32))  # a played round, not a reset step
    np.testing.assert_array_equal(info["round"], [0, 0])


def test_autoreset_mode_is_checked_and_per_instance():
    for value in ("SameStep", AutoresetMode.SAME_STEP, "NextStep", AutoresetMode.NEXT_STEP):
        env = OTAPrivacyVectorEnv(2, num_rounds=3, dp_orders=None, autoreset_mode=value)
        assert env.autoreset_mode == AutoresetMode(value) == env.metadata["autoreset_mode"]
    assert OTAPrivacyVectorEnv.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP  # no instance changed the class
    assert OTAPrivacyVectorEnv(2, num_rounds=3).metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    allowed = r"autoreset_mode must be AutoresetMode\.NEXT_STEP or AutoresetMode\.SAME_STEP \(or 'NextStep' or " \
              r"'SameStep'\); got "
    for value in (AutoresetMode.DISABLED, "Disabled", "same_step"):
        with pytest.raises(ValueError, match=allowed):
            OTAPrivacyVectorEnv(2, autoreset_mode=value)
    with pytest.raises(TypeError, match=allowed + "3"):
        OTAPrivacyVectorEnv(2, autoreset_mode=3)
    with pytest.raises(ValueError, match=allowed):
        gym.make_vec(ENV_ID, 2, autoreset_mode="Disabled")


def test_sb3_adapter_keeps_same_step():
    pytest.importorskip("stable_baselines3")
    from otagym.wrappers.sb3 import OTAPrivacySB3VecEnv

    venv = OTAPrivacySB3VecEnv(3, num_rounds=4, dp_orders=None)
    assert venv.venv.autoreset_mode == AutoresetMode.SAME_STEP
    first = venv.reset()
    for _ in range(4):
        obs, _, done, infos = venv.step(np.zeros((3, 1), np.float32))
    assert done.all() and infos[0]["terminal_observation"].shape == first.shape[1:]
    t_index = 2 * venv.venv.scenario.num_devices + 1  # t/T: the next episode's first observation is returned at once
    np.testing.assert_array_equal(obs[:, t_index], 0.0)
    assert all(info["terminal_observation"][t_index] == 1.0 for info in infos)
    with pytest.raises(ValueError, match="autoreset_mode must be AutoresetMode.SAME_STEP"):
        OTAPrivacySB3VecEnv(2, autoreset_mode=AutoresetMode.NEXT_STEP)


def test_sb3_adapter_steps_the_vector_wrappers_given_as_the_wrapped_env_steps():
    """``vector_wrappers`` are applied to the native env in order: SB3 sees the wrapped env's actions and rewards
    (the relative spend, the shaped reward), the same as stepping the wrapped Gymnasium env itself, and the native
    env's infos (``episode_cost`` at the end)."""
    pytest.importorskip("stable_baselines3")
    from otagym.wrappers import PotentialShapingVector, RelativeSpendVector
    from otagym.wrappers.sb3 import OTAPrivacySB3VecEnv

    kwargs = {"reward_mode": "cmdp", "action_type": "spend", "num_rounds": 5, "dp_orders": None}
    potential = lambda obs: np.asarray(obs)[:, 0] ** 2  # noqa: E731 - any function of the observation
    wrappers = [lambda v: RelativeSpendVector(v, floor=0.5), lambda v: PotentialShapingVector(v, potential)]
    sb3 = OTAPrivacySB3VecEnv(3, vector_wrappers=wrappers, **kwargs)
    direct = OTAPrivacyVectorEnv(3, autoreset_mode=AutoresetMode.SAME_STEP, **kwargs)
    for wrap in wrappers:
        direct = wrap(direct)
    sb3.seed(4)
    np.testing.assert_array_equal(sb3.reset(), direct.reset(seed=4)[0])
    rng = np.random.default_rng(0)
    for t in range(5):
        action = rng.uniform(-1, 1, (3, 1)).astype(np.float32)
        obs, reward, done, infos = sb3.step(action)
        expected_obs, expected_reward, *_ = direct.step(action)
        np.testing.assert_array_equal(obs, expected_obs)
        np.testing.assert_allclose(reward, expected_reward, rtol=1e-6)
    assert done.all() and all(0 < info["episode_cost"] <= info["cost_limit"] * (1 + 1e-6) for info in infos)


def test_torchrl_gym_wrapper_takes_the_native_env_in_same_step():
    """TorchRL's GymWrapper refuses NEXT_STEP (it wants SAME_STEP or DISABLED): the native env given SAME_STEP."""
    pytest.importorskip("torchrl")
    from torchrl.envs import GymWrapper

    with pytest.raises(RuntimeError, match="SAME_STEP"):
        GymWrapper(OTAPrivacyVectorEnv(2, num_rounds=3, dp_orders=None))
    env = GymWrapper(OTAPrivacyVectorEnv(2, num_rounds=3, dp_orders=None, autoreset_mode=AutoresetMode.SAME_STEP))
    td = env.rollout(7, break_when_any_done=False)
    assert td["next", "done"][:, 2].all() and not td["next", "done"][:, 3].any()


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_an_episode_ends_with_its_summed_cost_and_the_cost_limit_in_both_shells(mode):
    """Safety-Gymnasium's convention: the last step's info holds the episode's cost (the sum of every round's
    info["cost"], summed here by hand) and its limit T, which ``cost_limit`` also gives; the vector env masks both by
    the envs that ended, and under SAME_STEP they are in ``final_info``."""
    kwargs = {"reward_mode": "cmdp", "action_type": "spend", "num_rounds": 6, "dp_orders": None}
    single = gym.make("otagym/OTAPrivacy-v0", **kwargs)
    vector = OTAPrivacyVectorEnv(3, autoreset_mode=mode, **kwargs)
    assert single.unwrapped.cost_limit == vector.cost_limit == 6.0
    single.reset(seed=1)
    vector.reset(seed=1)
    actions = np.random.default_rng(0).uniform(-1, 1, (6, 3, 1))
    total, totals = 0.0, np.zeros(3)
    for t in range(6):
        _, _, terminated, _, info = single.step(actions[t, 0])
        _, _, ended, _, vinfo = vector.step(actions[t])
        total, totals = total + info["cost"], totals + (vinfo["final_info"] if mode == AutoresetMode.SAME_STEP and
                                                        ended.any() else vinfo)["cost"]
        assert ("episode_cost" in info) == terminated
        assert vinfo.get("_episode_cost", np.zeros(3, bool)).tolist() == ended.tolist()
    assert info["episode_cost"] == pytest.approx(total, rel=1e-12) and info["cost_limit"] == 6.0
    last = vinfo["final_info"] if mode == AutoresetMode.SAME_STEP else vinfo
    np.testing.assert_allclose(last["episode_cost"], totals, rtol=1e-12)
    if mode == AutoresetMode.NEXT_STEP:  # the next episode starts from zero
        vector.step(actions[0])
        _, _, _, _, vinfo = vector.step(actions[0])
        assert not vinfo.get("_episode_cost", np.zeros(3, bool)).any()


def test_the_cost_limit_is_an_argument_on_every_tasks_spec_and_refused_where_nothing_costs():
    for task_id, task in otagym.TASKS.items():
        assert gym.spec(task_id).kwargs["cost_limit"] == task.cost_limit == gym.make(task_id).unwrapped.cost_limit
    env = OTAPrivacyVectorEnv(2, reward_mode="cmdp", action_type="spend", num_rounds=4, cost_limit=2.0,
                              dp_orders=None)
    env.reset(seed=0)
    for _ in range(4):
        _, _, _, _, info = env.step(np.zeros((2, 1)))
    np.testing.assert_array_equal(info["cost_limit"], [2.0, 2.0])  # a stricter limit, reported as asked
    with pytest.raises(ValueError, match=r"cost_limit must be a finite number > 0 or None; got -1"):
        OTAPrivacyVectorEnv(2, cost_limit=-1)
    with pytest.raises(ValueError, match=r"cost_limit must be None: these settings report no info\['cost'\]"):
        gym.make("otagym/OTAPrivacy-v0", scheme="anonymous", cost_limit=3.0)
    with pytest.warns(UserWarning, match=r"cost_limit=250.0 \(the task's: 500.0\)"):
        gym.make("otagym/ReceiveScalingCMDP-v1", cost_limit=250.0)  # no longer the task
