"""A random rollout of otagym/OTAPrivacy-v0, reading the per-round and end-of-episode privacy from info."""

import gymnasium as gym
import numpy as np

import otagym  # noqa: F401  (registers the env)

env = gym.make("otagym/OTAPrivacy-v0", num_rounds=100, nu=0.04)
obs, info = env.reset(seed=0)
total_reward = 0.0
for t in range(100):
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    total_reward += reward
print(f"return {total_reward:.3f}; mean c_t {info['convergence_cost_mean']:.3f} (nu = 0.04)")
print(f"RDP per device at alpha=3: {np.round(info['rdp_cumulative'], 3)}")
print(f"(eps, 1e-5)-DP per device: {np.round(info['dp_epsilon'], 3)}")
