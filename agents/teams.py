"""The device algorithms of ``otagym train --algo`` (:data:`agents.DEVICE_ALGOS`) as one table: how each trains a
team on a devices-as-agents task and how ``otagym evaluate`` plays what it saved."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, NamedTuple

__all__ = ["DeviceAlgorithm", "DEVICE_TRAINERS", "load_team"]


class DeviceAlgorithm(NamedTuple):
    """How ``otagym train`` trains a team and ``otagym evaluate`` plays it: the settings' class (its
    ``total_timesteps`` in device steps, :class:`agents.multiagent.TeamSettings`), ``train(task_id, seed, out_dir,
    settings, force=)``, the model file it writes and the loader of that file as a device policy."""

    settings: type
    train: Callable[..., Path]
    model_file: str
    load: Callable[[str | Path], Any]


def _ippo() -> DeviceAlgorithm:
    from agents.multiagent import IPPOSettings, load_shared_policy, train_ippo

    return DeviceAlgorithm(IPPOSettings, train_ippo, "model.zip", load_shared_policy)


def _mappo() -> DeviceAlgorithm:
    from agents.mappo import MAPPOSettings, load_mappo_policy, train_mappo

    return DeviceAlgorithm(MAPPOSettings, train_mappo, "model.pt", load_mappo_policy)


#: The device algorithms by ``--algo`` name, each built on first use (its library imported then): IPPO through SB3
#: and SuperSuit (:mod:`agents.multiagent`), MAPPO through TorchRL (:mod:`agents.mappo`).
DEVICE_TRAINERS: dict[str, Callable[[], DeviceAlgorithm]] = {"ippo": _ippo, "mappo": _mappo}


def load_team(path: str | Path) -> Any:
    """The device policy of a model that ``otagym train`` wrote for a device task, by its file (``run.json`` beside
    it): IPPO's ``model.zip`` or MAPPO's ``model.pt``; ``ValueError`` for another file."""
    suffix = {".zip": "ippo", ".pt": "mappo"}.get(Path(path).suffix)
    if suffix is None:
        raise ValueError(f"policy {str(path)!r}: a team model is the model.zip (ippo) or model.pt (mappo) of otagym "
                         "train")
    return DEVICE_TRAINERS[suffix]().load(path)
