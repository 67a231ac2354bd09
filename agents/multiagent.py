"""Independent PPO with parameters shared by the devices (IPPO), trained by Stable-Baselines3 through SuperSuit on a
devices-as-agents task (:mod:`otagym.multiagent`), and the device policy that plays a trained model.

SuperSuit's recipe: ``black_death_v3`` (a device that leaves keeps a zero observation and reward, so that the vector
env keeps one slot per device), ``pettingzoo_env_to_vec_env_v1`` (each device a slot), ``concat_vec_envs_v1`` (copies
of the env side by side, for SB3). SuperSuit 3.11.0's ``black_death_v3`` ends an episode only when every live agent is
terminated *and* truncated (fixed upstream by SuperSuit PR #265, not released yet); :class:`EndBothFlags` marks the
episode's last step both ways so that the released wrapper ends it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pettingzoo.utils.wrappers import BaseParallelWrapper

from otagym._io import atomic_write, write_json
from otagym.multiagent import make_device_env

__all__ = ["EndBothFlags", "device_vec_env", "TeamSettings", "IPPOSettings", "train_ippo", "SharedPolicy",
           "load_shared_policy"]


class EndBothFlags(BaseParallelWrapper):
    """Marks the step that ends the episode for every live agent as terminated and truncated alike (for SuperSuit
    3.11.0's ``black_death_v3``; a device leaving alone keeps its own flags)."""

    def step(self, actions: dict[str, Any]):
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        if not self.env.agents:  # the episode is over for everyone still in it
            terminations = truncations = {a: True for a in terminations}
        return obs, rewards, terminations, truncations, infos


def device_vec_env(task_id: str, copies: int, seed: int, **overrides: Any):
    """An SB3 ``VecEnv`` of ``copies`` envs of a device task, one slot per device (K x copies slots), the copies
    seeded ``seed``, ``seed + 1``, ...."""
    import supersuit as ss

    env = ss.black_death_v3(EndBothFlags(make_device_env(task_id, **overrides)))
    vec = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(env), copies, num_cpus=0,
                                base_class="stable_baselines3")
    vec.venv.reset(seed=seed)  # SuperSuit's VecEnv has no seed(); the copies keep their generators after this reset
    return vec


@dataclass(frozen=True)
class TeamSettings:
    """What every device algorithm's run sets: its length in environment steps counted per device (one round of one
    episode is K), Adam's learning rate, the discount and the hidden layers of its networks."""

    total_timesteps: int = 400_000
    learning_rate: float = 3e-4
    gamma: float = 0.99
    net_arch: tuple[int, ...] = (64, 64)


@dataclass(frozen=True)
class IPPOSettings(TeamSettings):
    """IPPO's run: SB3 PPO's rollout (``copies`` envs of ``n_steps`` rounds) and update."""

    copies: int = 4
    n_steps: int = 128
    batch_size: int = 1280
    n_epochs: int = 5


def train_ippo(task_id: str, seed: int, out_dir: str | Path, settings: IPPOSettings = IPPOSettings(), *,
               force: bool = False) -> Path:
    """Train shared-parameter PPO on a device task with training seed ``seed``; writes ``model.zip`` and
    ``run.json`` into ``out_dir`` atomically and returns the model's path. A finished run is kept (resumable sweeps)
    unless ``force``."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.utils import set_random_seed

    out = Path(out_dir)
    model_path = out / "model.zip"
    if model_path.exists() and not force:
        return model_path
    torch.set_num_threads(1)
    set_random_seed(seed)
    model = PPO("MlpPolicy", device_vec_env(task_id, settings.copies, seed), n_steps=settings.n_steps,
                batch_size=settings.batch_size, n_epochs=settings.n_epochs, learning_rate=settings.learning_rate,
                gamma=settings.gamma, policy_kwargs={"net_arch": list(settings.net_arch)}, verbose=0, device="cpu")
    model.learn(settings.total_timesteps)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(model_path, "wb") as f:
        model.save(f)
    write_json(out / "run.json", {"task": task_id, "seed": seed, "algorithm": "IPPO (SB3 PPO, shared parameters)",
                                  "settings": asdict(settings)})
    return model_path


@dataclass
class SharedPolicy:
    """A trained shared-parameter model as a device policy (:class:`baselines.cdpb.devices.DevicePolicy`):
    deterministic actions, the same network for every device."""

    model: Any

    def act(self, observations: NDArray) -> NDArray:
        n, k, e = observations.shape
        actions, _ = self.model.predict(observations.reshape(n * k, e), deterministic=True)
        return np.asarray(actions, dtype=float).reshape(n, k, -1)


def load_shared_policy(path: str | Path) -> SharedPolicy:
    """The :class:`SharedPolicy` of a saved ``model.zip`` (its ``run.json`` beside it names the task)."""
    from stable_baselines3 import PPO

    json.loads((Path(path).parent / "run.json").read_text())  # a model without its run record is refused
    return SharedPolicy(PPO.load(path, device="cpu"))

