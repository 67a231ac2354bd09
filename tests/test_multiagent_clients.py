"""The devices-as-agents env (otagym.multiagent) driven by MARL clients their own way: RLlib's multi-agent PPO through
its PettingZoo wrapper (where ray is installed: CI's second environment, gymnasium 1.2.2), TorchRL's
PettingZooWrapper, SB3's PPO through SuperSuit, and a CleanRL-style shared-parameter loop over the parallel API. In
each the devices leave (eps-bar 0.5 on the task, 20 rounds), so each client's handling of agents that leave is
exercised."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from otagym.multiagent import make_device_env  # noqa: E402

TASK = "otagym/CDPB-Devices-v0"
#: The task, 20 rounds, an eps-bar that devices reach within them under random actions (3 to 9 of the 10 leave).
SHORT = {"max_cycles": 20, "scenario_overrides": {"epsilon_max": 0.5}}


@pytest.mark.slow  # starts Ray: about 20 s
def test_rllib_multi_agent_ppo_with_one_shared_policy_trains_an_iteration(ray_session):
    """``ParallelPettingZooEnv`` registered by name, every device mapped to one policy; the devices that leave take
    fewer steps, all of them through the shared module."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
    from ray.tune.registry import register_env

    register_env("otagym_devices", lambda config: ParallelPettingZooEnv(make_device_env(TASK, **config)))
    algo = (PPOConfig()
            .environment("otagym_devices", env_config=SHORT)
            .multi_agent(policies={"shared"}, policy_mapping_fn=lambda agent_id, episode, **kwargs: "shared")
            .env_runners(num_env_runners=0)
            .training(train_batch_size=200, minibatch_size=100, num_epochs=1)).build_algo()
    try:
        result = algo.train()
    finally:
        algo.stop()
    runners = result["env_runners"]
    per_agent = runners["num_agent_steps_sampled"]
    assert sorted(per_agent) == [f"client_{k}" for k in range(10)]
    assert runners["num_module_steps_sampled"] == {"shared": sum(per_agent.values())}
    assert runners["num_env_steps_sampled"] >= 200 and min(per_agent.values()) < runners["num_env_steps_sampled"]
    assert "shared" in result["learners"]


@pytest.mark.filterwarnings("ignore:PettingZoo in TorchRL is tested")  # 1.24.3 there; 1.27.0 here
def test_torchrl_pettingzoo_wrapper_masks_the_devices_that_leave():
    """``use_mask=True`` (agents leave) and ``done_on_any=False`` (the episode goes on without them); TorchRL's default
    grouping by name prefix puts every device in one group, ``"client"``. The mask is the env's live agents; the
    episode ends at tau or when all have left."""
    pytest.importorskip("torchrl")
    import torch
    from torchrl.envs.libs.pettingzoo import PettingZooWrapper
    from torchrl.envs.utils import check_env_specs

    env = PettingZooWrapper(env=make_device_env(TASK, **SHORT), use_mask=True, done_on_any=False, return_state=True,
)
    check_env_specs(env, seed=0)
    torch.manual_seed(0)  # the rollout's random actions
    rollout = env.rollout(20, break_when_any_done=True)
    mask = rollout["next", "client", "mask"]
    assert mask.shape == (len(rollout), 10)
    assert rollout["next", "state"].shape[-1] == env.observation_spec["state"].shape[-1] == 5 + 10 * 5
    assert mask.sum() < mask.numel() and (mask[1:] <= mask[:-1]).all()  # devices leave and never come back
    assert rollout["next", "done"][-1].item() and not rollout["next", "done"][:-1].any()
    live = rollout["next", "client", "reward"][..., 0][mask]
    assert torch.isfinite(live).all() and (live < 0).all()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:The `render_mode` attribute is not defined")
def test_sb3_ppo_through_supersuit_learns_with_one_policy_for_every_device(one_torch_thread):
    """black_death_v3 (devices leave: zero observations and rewards), pettingzoo_env_to_vec_env_v1 (a device a vector
    env slot) and concat_vec_envs_v1 for SB3: PPO's MlpPolicy, its parameters shared by the devices, learns over 80
    rounds per slot, the episodes ended (at 20 rounds or when every device has left); a departed device's slot is
    zero."""
    ss = pytest.importorskip("supersuit")
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor

    from agents.multiagent import EndBothFlags

    venv = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(ss.black_death_v3(EndBothFlags(
        make_device_env(TASK, **SHORT)))), 2, num_cpus=0, base_class="stable_baselines3")
    venv = VecMonitor(venv)
    assert venv.num_envs == 20
    venv.venv.venv.reset(seed=0)  # SuperSuit's vector env has no seed() for PPO(seed=...): seeded by its reset
    model = PPO("MlpPolicy", venv, n_steps=40, batch_size=200, n_epochs=2, device="cpu")
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(1600)
    assert model.num_timesteps == 1600
    assert any(not np.allclose(b, p.detach()) for b, p in zip(before, model.policy.parameters()))
    lengths = [e["l"] for e in model.ep_info_buffer]  # 80 steps per slot, episodes of at most 20
    assert len(lengths) >= 60 and max(lengths) <= 20
    obs = venv.reset()
    departed, ended, seen = np.zeros(20, dtype=bool), np.zeros(20, dtype=bool), 0
    for _ in range(19):  # the paper's rule: every device leaves within 19 rounds, and its episode ends early
        obs, rewards, dones, _ = venv.step(-np.ones((20, 1), np.float32))
        zero, dones = (obs == 0).all(axis=1), dones.astype(bool)  # SuperSuit's dones are uint8
        assert (rewards[departed & ~dones] == 0).all() and zero[departed & ~dones].all()
        assert not zero[dones].any()  # an ended episode's slots hold the next episode's first observations
        seen += (zero & ~departed).sum()
        departed, ended = (departed | zero) & ~dones, ended | dones
    assert seen > 0 and ended.all()


def test_cleanrl_style_shared_parameter_ppo_over_the_parallel_api(one_torch_thread):
    """A CleanRL-style loop: one torch actor-critic shared by the devices reads the parallel API's dicts as they come
    (a departed device's trajectory ends at its termination), three updates of the clipped PPO objective."""
    import torch

    env = make_device_env(TASK, **SHORT)
    torch.manual_seed(0)
    obs_dim = env.observation_space("client_0").shape[0]
    body = torch.nn.Sequential(torch.nn.Linear(obs_dim, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))
    log_std = torch.nn.Parameter(torch.full((1,), -0.5))
    optimizer = torch.optim.Adam([*body.parameters(), log_std], lr=3e-3)
    start = [p.detach().clone() for p in body.parameters()]
    for update in range(3):
        obs, _ = env.reset(seed=update)
        trajectories = {agent: [] for agent in env.agents}  # (obs, action, log-prob, reward) per device
        while env.agents:
            live = list(env.agents)
            x = torch.as_tensor(np.stack([obs[a] for a in live]))
            with torch.no_grad():
                dist = torch.distributions.Normal(body(x)[:, :1], log_std.exp())
                action = dist.sample()
                log_prob = dist.log_prob(action).sum(-1)
            obs, rewards, terminations, truncations, _ = env.step(
                {a: action[i].clamp(-1, 1).numpy() for i, a in enumerate(live)})
            for i, a in enumerate(live):
                trajectories[a].append((x[i], action[i], log_prob[i], rewards[a]))
        assert sum(map(len, trajectories.values())) < 10 * 20  # devices left before the 20 rounds
        xs, actions, old_log_probs, returns = [], [], [], []
        for steps in trajectories.values():
            ret = np.cumsum([r for *_, r in steps][::-1])[::-1].copy()  # undiscounted reward-to-go
            xs += [s[0] for s in steps]
            actions += [s[1] for s in steps]
            old_log_probs += [s[2] for s in steps]
            returns += list(ret)
        x, action, old = torch.stack(xs), torch.stack(actions), torch.stack(old_log_probs)
        out = body(x)
        value, ret = out[:, 1], torch.as_tensor(np.array(returns), dtype=torch.float32)
        advantage = (ret - value).detach()
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        ratio = (torch.distributions.Normal(out[:, :1], log_std.exp()).log_prob(action).sum(-1) - old).exp()
        policy_loss = -torch.min(ratio * advantage, ratio.clamp(0.8, 1.2) * advantage).mean()
        loss = policy_loss + 0.5 * ((value - ret) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        assert torch.isfinite(loss) and ratio.detach().allclose(torch.ones_like(ratio), atol=1e-5)
    assert any(not torch.equal(s, p) for s, p in zip(start, body.parameters()))
