"""MAPPO on a devices-as-agents task with TorchRL's multi-agent modules (its MAPPO recipe, as in TorchRL's
multi-agent PPO tutorial and BenchMARL): one actor shared by the devices, acting on its own observation, and a
centralised critic that sees every device's observation (``MultiAgentMLP(centralised=True)``), trained with
``ClipPPOLoss`` and GAE over the batched env (:class:`otagym.multiagent.torchrl_env.DevicesTorchRLEnv`), all its
episodes in step; and the device policy that plays a trained actor.

Steps are counted per device as IPPO's (:class:`agents.multiagent.IPPOSettings`): one round of one episode is K; a
run plays whole batches (``num_envs`` episodes), at least one, and its ``run.json`` records the steps it played.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from numpy.typing import NDArray

from agents.multiagent import TeamSettings
from otagym._io import atomic_write, write_json

__all__ = ["MAPPOSettings", "train_mappo", "MAPPOPolicy", "load_mappo_policy"]

#: The algorithm's name in a run's ``run.json``.
ALGORITHM = "MAPPO (TorchRL: shared actor, centralised critic)"


@dataclass(frozen=True)
class MAPPOSettings(TeamSettings):
    """MAPPO's run: ``num_envs`` episodes a batch, ``epochs`` passes over it in minibatches of about
    ``minibatch_device_steps`` device steps (whole rounds: that many over K, at least one), GAE's ``lmbda``, PPO's clip
    and the entropy bonus. The defaults give IPPO's update budget (:class:`agents.multiagent.IPPOSettings`) whatever
    K: minibatches of 1,280 device steps (IPPO's), 5 epochs, so as many gradient steps for the same device steps
    (a batch: 4 episodes, 4,000 device steps with ten devices; IPPO's 5,120)."""

    num_envs: int = 4
    epochs: int = 5
    minibatch_device_steps: int = 1280
    lmbda: float = 0.95
    clip_epsilon: float = 0.2
    entropy_coef: float = 1e-3


def _modules(env: Any, settings: MAPPOSettings) -> tuple[Any, Any]:
    """The shared actor (a TanhNormal on [-1, 1] per device) and the centralised critic."""
    from tensordict.nn import NormalParamExtractor, TensorDictModule
    from torch import nn
    from torchrl.modules import MultiAgentMLP, ProbabilisticActor, TanhNormal

    from otagym.multiagent.torchrl_env import GROUP

    k, entries = env.observation_spec[GROUP, "observation"].shape[-2:]
    width = env.action_spec[GROUP, "action"].shape[-1]

    def mlp(out: int, centralised: bool) -> MultiAgentMLP:
        return MultiAgentMLP(entries, out, n_agents=k, centralised=centralised, share_params=True,
                             depth=len(settings.net_arch), num_cells=list(settings.net_arch),
                             activation_class=nn.Tanh)

    actor = ProbabilisticActor(
        TensorDictModule(nn.Sequential(mlp(2 * width, False), NormalParamExtractor()),
                         in_keys=[(GROUP, "observation")], out_keys=[(GROUP, "loc"), (GROUP, "scale")]),
        spec=env.full_action_spec[GROUP, "action"], in_keys=[(GROUP, "loc"), (GROUP, "scale")],
        out_keys=[(GROUP, "action")], distribution_class=TanhNormal, distribution_kwargs={"low": -1.0, "high": 1.0},
        return_log_prob=True, log_prob_key=(GROUP, "sample_log_prob"))
    critic = TensorDictModule(mlp(1, True), in_keys=[(GROUP, "observation")], out_keys=[(GROUP, "state_value")])
    return actor, critic


def _loss(actor: Any, critic: Any, settings: MAPPOSettings) -> Any:
    from torchrl.objectives import ClipPPOLoss, ValueEstimators

    from otagym.multiagent.torchrl_env import GROUP

    loss = ClipPPOLoss(actor, critic, clip_epsilon=settings.clip_epsilon, entropy_coeff=settings.entropy_coef,
                       normalize_advantage=True)  # over the minibatch's devices and rounds together, as SB3's IPPO
    loss.set_keys(reward=(GROUP, "reward"), action=(GROUP, "action"), sample_log_prob=(GROUP, "sample_log_prob"),
                  value=(GROUP, "state_value"), done=(GROUP, "done"), terminated=(GROUP, "terminated"))
    loss.make_value_estimator(ValueEstimators.GAE, gamma=settings.gamma, lmbda=settings.lmbda)
    return loss


def _update(loss: Any, optimiser: Any, batch: Any, settings: MAPPOSettings, k: int) -> None:
    """PPO's update on one batch of rounds of ``k`` devices: GAE with the critic, then ``epochs`` passes in
    minibatches of rounds."""
    import torch

    with torch.no_grad():
        loss.value_estimator(batch, params=loss.critic_network_params, target_params=loss.target_critic_network_params)
    flat = batch.reshape(-1)
    with warnings.catch_warnings():  # normalising the advantages across the devices too is meant
        warnings.filterwarnings("ignore", "You requested advantage normalization", UserWarning)
        for _ in range(settings.epochs):
            for part in torch.randperm(flat.shape[0]).split(max(1, settings.minibatch_device_steps // k)):
                terms = loss(flat[part])
                optimiser.zero_grad()
                (terms["loss_objective"] + terms["loss_critic"] + terms["loss_entropy"]).backward()
                torch.nn.utils.clip_grad_norm_(loss.parameters(), 1.0)
                optimiser.step()


def train_mappo(task_id: str, seed: int, out_dir: str | Path, settings: MAPPOSettings = MAPPOSettings(), *,
                force: bool = False) -> Path:
    """Train MAPPO on a device task with training seed ``seed`` (the episodes' channels drawn from it); writes
    ``model.pt`` (the actor's weights) and ``run.json`` into ``out_dir`` atomically and returns the model's path. A
    finished run is kept (resumable sweeps) unless ``force``."""
    import torch
    from torchrl.collectors import Collector

    from otagym.multiagent.torchrl_env import DevicesTorchRLEnv

    out = Path(out_dir)
    model_path = out / "model.pt"
    if model_path.exists() and not force:
        return model_path
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    env = DevicesTorchRLEnv(task_id, settings.num_envs, seed=seed)
    actor, critic = _modules(env, settings)
    loss = _loss(actor, critic, settings)
    optimiser = torch.optim.Adam(loss.parameters(), settings.learning_rate)
    k, tau = env.side.num_devices, env.side.scenario.num_rounds
    rounds = settings.num_envs * tau
    frames = max(settings.total_timesteps // k, rounds)
    frames = -(-frames // rounds) * rounds  # whole batches, as TorchRL rounds it up (without its warning)
    collector = Collector(env, actor, frames_per_batch=rounds, total_frames=frames, auto_register_policy_transforms=False)
    played = 0
    for batch in collector:
        played += rounds * k
        _update(loss, optimiser, batch, settings, k)
        collector.update_policy_weights_()
    collector.shutdown()
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(model_path, "wb") as f:
        torch.save(actor.state_dict(), f)
    write_json(out / "run.json", {"task": task_id, "seed": seed, "algorithm": ALGORITHM, "settings": asdict(settings),
                                  "env_steps": played})
    return model_path


@dataclass
class MAPPOPolicy:
    """A trained MAPPO actor as a device policy (:class:`baselines.cdpb.devices.DevicePolicy`): each device's
    deterministic action (the mode of its TanhNormal) from its own observation."""

    actor: Any

    def act(self, observations: NDArray) -> NDArray:
        import torch
        from tensordict import TensorDict
        from torchrl.envs.utils import ExplorationType, set_exploration_type

        from otagym.multiagent.torchrl_env import GROUP

        n, k = observations.shape[:2]
        td = TensorDict({GROUP: TensorDict({"observation": torch.as_tensor(observations, dtype=torch.float32)},
                                           batch_size=(n, k))}, batch_size=(n,))
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            return self.actor(td)[GROUP, "action"].numpy().astype(float)


def load_mappo_policy(path: str | Path) -> MAPPOPolicy:
    """The :class:`MAPPOPolicy` of a saved ``model.pt`` (its ``run.json`` beside it names the task and settings)."""
    import torch

    from otagym.multiagent.torchrl_env import DevicesTorchRLEnv

    record = json.loads((Path(path).parent / "run.json").read_text())
    settings = MAPPOSettings(net_arch=tuple(record["settings"]["net_arch"]))  # the actor's shape: all it needs
    actor, _ = _modules(DevicesTorchRLEnv(record["task"], 1), settings)
    actor.load_state_dict(torch.load(path, weights_only=True))
    return MAPPOPolicy(actor)
