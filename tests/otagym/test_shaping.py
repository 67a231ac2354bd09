"""Potential-based shaping (otagym.wrappers.shaping): each shaped reward is r_t + gamma Phi(s_t+1) - Phi(s_t) recomputed
from the unshaped play, an episode's shaped return telescopes to its return less Phi(s_0), truncation keeps Phi of
the last observation, and the vector form (over Gymnasium's SyncVectorEnv) equals the single one episode by episode in both autoreset modes;
on otagym's native vector env, agents.budget_ppo trains through it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from otagym.env import OTAPrivacyEnv
from otagym.wrappers import PotentialShaping, PotentialShapingVector

SETTINGS = {"num_rounds": 7, "reward_mode": "cmdp", "action_type": "spend", "dp_orders": None}


def phi(obs: np.ndarray) -> np.ndarray:
    """Any function of the observation: a weighted sum, so each step's value differs."""
    obs = np.asarray(obs, dtype=float)
    return obs @ np.linspace(0.5, 2.0, obs.shape[1])


def _actions(n: int, steps: int) -> np.ndarray:
    return np.random.default_rng(5).uniform(-1, 1, size=(steps, n, 1)).astype(np.float32)


def _play(env: gym.Env, actions: np.ndarray) -> tuple[list[np.ndarray], list[float], list[bool], list[bool]]:
    obs, _ = env.reset(seed=3)
    seen, rewards, terms, truncs = [obs], [], [], []
    for a in actions:
        obs, r, term, trunc, _ = env.step(a)
        seen.append(obs)
        rewards.append(float(r))
        terms.append(term)
        truncs.append(trunc)
        if term or trunc:
            break
    return seen, rewards, terms, truncs


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_each_shaped_reward_is_the_reward_plus_the_potentials_difference(gamma):
    actions = _actions(1, 7)[:, 0]
    seen, rewards, terms, _ = _play(OTAPrivacyEnv(**SETTINGS), actions)
    _, shaped, _, _ = _play(PotentialShaping(OTAPrivacyEnv(**SETTINGS), phi, gamma=gamma), actions)
    assert terms[-1] and len(rewards) == 7
    values = phi(np.stack(seen))
    values[-1] = 0.0  # the episode terminated
    expected = np.asarray(rewards) + gamma * values[1:] - values[:-1]
    np.testing.assert_allclose(shaped, expected, rtol=1e-12, atol=1e-12)
    if gamma == 1.0:
        assert sum(shaped) == pytest.approx(sum(rewards) - values[0], rel=1e-12, abs=1e-12)


def test_a_truncated_episode_keeps_the_potential_of_its_last_observation():
    actions = _actions(1, 7)[:, 0]
    env = gym.wrappers.TimeLimit(OTAPrivacyEnv(**SETTINGS), max_episode_steps=3)
    seen, rewards, terms, truncs = _play(env, actions)
    _, shaped, _, _ = _play(PotentialShaping(gym.wrappers.TimeLimit(OTAPrivacyEnv(**SETTINGS), 3), phi), actions)
    assert truncs[-1] and not terms[-1] and len(rewards) == 3
    values = phi(np.stack(seen))
    np.testing.assert_allclose(shaped, np.asarray(rewards) + values[1:] - values[:-1], rtol=1e-12, atol=1e-12)


def _env(limit: int | None) -> gym.Env:
    env = OTAPrivacyEnv(**SETTINGS)
    return env if limit is None else gym.wrappers.TimeLimit(env, max_episode_steps=limit)


@pytest.mark.parametrize("limit", [None, 3])  # episodes that terminate, or are truncated (final_obs's Phi)
@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP])
def test_the_vector_form_equals_the_single_one_across_episode_ends(mode, limit):
    n, steps = 3, 16  # two episodes of 7 rounds and the start of a third, or five of 3
    actions = _actions(n, steps)
    sync = gym.vector.SyncVectorEnv([lambda: _env(limit)] * n, autoreset_mode=mode)
    vec = PotentialShapingVector(sync, phi, gamma=0.95)
    vec.reset(seed=[3, 4, 5])
    got = [[] for _ in range(n)]
    restarting = np.zeros(n, dtype=bool)
    for a in actions:
        _, r, term, trunc, _ = vec.step(a)
        for i in np.flatnonzero(~restarting):
            got[i].append(float(r[i]))
        assert np.all(r[restarting] == 0.0)  # a NEXT_STEP reset step: no round, no shaping
        if mode == AutoresetMode.NEXT_STEP:
            restarting = np.logical_or(term, trunc)
    for i in range(n):
        single = PotentialShaping(_env(limit), phi, gamma=0.95)
        single.reset(seed=3 + i)
        length = limit or 7  # NEXT_STEP: every (length + 1)-th step only resets
        played = [a for j, a in enumerate(actions[:, i])
                  if mode == AutoresetMode.SAME_STEP or (j + 1) % (length + 1)]
        want = []
        for a in played[:len(got[i])]:
            _, r, term, trunc, _ = single.step(a)
            want.append(float(r))
            if term or trunc:
                single.reset()
        np.testing.assert_allclose(got[i], want, rtol=1e-12, atol=1e-12)


def test_a_potential_that_is_not_a_callable_is_refused():
    with pytest.raises(TypeError, match="potential must be a callable"):
        PotentialShaping(OTAPrivacyEnv(**SETTINGS), None)


@pytest.mark.parametrize("gamma", [-0.1, 1.5, float("nan"), "1"])
def test_a_discount_outside_zero_one_is_refused_naming_gamma(gamma):
    with pytest.raises(ValueError, match=r"gamma must be a number in \[0, 1\]"):
        PotentialShaping(OTAPrivacyEnv(**SETTINGS), phi, gamma=gamma)
