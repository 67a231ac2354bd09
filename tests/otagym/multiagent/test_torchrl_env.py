"""The batched TorchRL env of a device task against the PettingZoo env played realisation by realisation (an
independent path: the parallel API's dicts, one realisation at a time)."""

import numpy as np
import pytest

pytest.importorskip("torchrl")
pytest.importorskip("pettingzoo")

import torch  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

from otagym.multiagent import device_evaluation_options, make_device_env  # noqa: E402
from otagym.multiagent.torchrl_env import GROUP, DevicesTorchRLEnv  # noqa: E402
from otagym.tasks import DEVICE_TASKS  # noqa: E402

TASK = "otagym/CDPB-Devices-v0"
SEEDS = DEVICE_TASKS[TASK].validation_seeds[:3]
#: A tight budget, so that devices leave (and, on some realisations, all of them) within the episode.
TIGHT = {"scenario_overrides": {"epsilon_max": 2.0}}


def policy(obs: np.ndarray) -> np.ndarray:
    """Actions that read the observation (the round, the last noise, the device's gain and privacy used)."""
    return np.clip(-1.0 + 0.3 * obs[..., 0:1] + 0.05 * obs[..., 3:4] - 0.2 * obs[..., 4:5], -1.0, 1.0)


def pettingzoo_episode(seed: int) -> tuple[list[dict], float]:
    """Each round's live devices' observations and rewards, and the team's return, through the PettingZoo env."""
    env = make_device_env(TASK, **TIGHT)
    obs, _ = env.reset(seed=0, options=device_evaluation_options(TASK, seed))
    rounds, total = [], 0.0
    while env.agents:
        actions = {a: policy(obs[a]) for a in env.agents}
        live_obs = {a: obs[a] for a in env.agents}  # an agent that left last round still has its last observation
        obs, rewards, _, _, _ = env.step(actions)
        rounds.append({"obs": live_obs, "rewards": rewards})
        total += next(iter(rewards.values()))
    return rounds, total


def test_the_batched_env_equals_the_pettingzoo_env_realisation_by_realisation():
    """The live devices' observations and rewards at every round the PettingZoo env plays, the masks its live agents,
    and the team's return (the rounds after every device left included)."""
    env = DevicesTorchRLEnv(TASK, len(SEEDS), realisations=SEEDS, **TIGHT)
    td = env.reset()
    batched = []
    while True:
        td[GROUP, "action"] = torch.as_tensor(policy(td[GROUP, "observation"].numpy()), dtype=torch.float32)
        batched.append((td[GROUP, "observation"].numpy().copy(), td[GROUP, "mask"].numpy().copy()))
        td = env.step(td)
        batched[-1] += (td["next", GROUP, "reward"][..., 0].numpy().astype(float),)
        if td["next", "done"].all():
            break
        td = td["next"]
    emptied = 0
    for i, seed in enumerate(SEEDS):
        rounds, total = pettingzoo_episode(seed)
        for t, played in enumerate(rounds):
            obs, mask, rewards = (b[i] for b in batched[t])
            live = [int(a.split("_")[1]) for a in played["obs"]]
            assert list(np.flatnonzero(mask)) == live, t
            np.testing.assert_array_equal(obs[live], np.stack(list(played["obs"].values())))
            if t < len(rounds) - 1 or len(rounds) == len(batched):  # the last one holds the rounds left, charged
                np.testing.assert_allclose(rewards[live], list(played["rewards"].values()), rtol=1e-6)
        emptied += len(rounds) < len(batched)
        np.testing.assert_allclose(sum(r[i][0] for *_, r in batched), total, rtol=1e-5)
    assert emptied >= 1  # a realisation on which every device left before the end: its rounds after, compared too


def test_torchrls_checks_pass_and_a_rollout_keeps_the_batch_in_step():
    env = DevicesTorchRLEnv(TASK, 4, seed=0)
    check_env_specs(env, seed=0)
    torch.manual_seed(0)
    rollout = env.rollout(200, break_when_any_done=True)
    tau = env.side.scenario.num_rounds
    assert rollout.batch_size == (4, tau) and rollout["next", "done"][:, -1].all()
    assert not rollout["next", "done"][:, :-1].any()
    assert rollout["state"].shape == (4, tau, env.side.state_space().shape[0])
    assert rollout["next", GROUP, "reward"].shape == (4, tau, 10, 1)
    with pytest.raises(ValueError, match="one seed per env"):
        DevicesTorchRLEnv(TASK, 2, realisations=SEEDS)



def test_on_the_fifty_devices_task_departed_devices_stay_in_both_envs():
    """``keep_departed``: the PettingZoo env keeps every agent to the end; the batched env masks the devices that
    left; both give every device the same observations and the team's reward at every round."""
    task = "otagym/CDPB-Devices50-v0"
    seeds = DEVICE_TASKS[task].validation_seeds[:2]
    check_env_specs(DevicesTorchRLEnv(task, 2, seed=0), seed=0)
    env = DevicesTorchRLEnv(task, len(seeds), realisations=seeds)
    td = env.reset()
    pz = [make_device_env(task) for _ in seeds]
    pz_obs = [e.reset(seed=0, options=device_evaluation_options(task, s))[0] for e, s in zip(pz, seeds)]
    for t in range(env.side.scenario.num_rounds):
        obs = td[GROUP, "observation"].numpy()
        actions = np.clip(-0.7 + 0.2 * obs[..., 6:7] - 0.3 * obs[..., 4:5], -1.0, 1.0)  # budget and privacy used
        td[GROUP, "action"] = torch.as_tensor(actions, dtype=torch.float32)
        mask = td[GROUP, "mask"].numpy()
        td = env.step(td)
        for i, e in enumerate(pz):
            assert len(e.agents) == 50
            np.testing.assert_array_equal(mask[i], e.side.active[0])  # the devices still sending
            np.testing.assert_array_equal(obs[i], np.stack([pz_obs[i][a] for a in e.possible_agents]))
            pz_obs[i], rewards, *_ = e.step({a: actions[i, k] for k, a in enumerate(e.possible_agents)})
            np.testing.assert_allclose(td["next", GROUP, "reward"][i, :, 0].numpy(), list(rewards.values()), rtol=1e-6)
        td = td["next"]
    assert td["done"].all() and all(not e.agents for e in pz)
    assert (~env.side.active).any()  # devices left on the way
