"""RL agents for otagym: stable-baselines3 training on the native vector env (:mod:`agents.train`, ``otagym
train``), rl_zoo3-format hyperparameters (``agents/configs``), PPO-Lagrangian for the CMDP formulation
(:mod:`agents.lagrangian`), the linear price policy of nine observation features as an SB3 (ARS) policy
(:mod:`agents.linear`) and trained models as policies of the ``baselines`` protocol (:mod:`agents.policy`), which
``baselines.receive_scaling.evaluation`` and ``otagym compare`` score on held-out channels."""

from importlib import import_module
from pathlib import Path
from typing import Any

CONFIG_DIR = Path(__file__).parent / "configs"
#: Algorithms ``otagym train`` knows: SB3 and sb3-contrib classes by name; ``ppo_lagrangian`` is PPO on the CMDP
#: formulation with dual ascent (:mod:`agents.lagrangian`).
ALGOS = ("ppo", "sac", "td3", "trpo", "ppo_lagrangian")
#: Algorithms ``otagym train`` runs with a batched trainer of its own instead of SB3's loop, on a benchmark task
#: (``--task``), each with the action relative to the budget left: ``budget_ppo``, PPO over the native vector env
#: (:mod:`agents.budget_ppo`), and ``budget_apg``, the pathwise policy gradient through the episode's rounds
#: (:mod:`agents.budget_apg`).
BATCHED_ALGOS = ("budget_ppo", "budget_apg")
#: Algorithms ``otagym train`` runs on a devices-as-agents task (``--task`` of
#: :data:`otagym.tasks.DEVICE_TASKS`, the multiagent extra): ``ippo``, PPO with one network shared by every device
#: (:func:`agents.multiagent.train_ippo`), and ``mappo``, its shared actor with a centralised critic (TorchRL,
#: :func:`agents.mappo.train_mappo`).
DEVICE_ALGOS = ("ippo", "mappo")
#: Algorithms that learn the cost limit of a constrained task (the others optimise the reward alone, and
#: ``otagym train`` warns when they train on one).
CONSTRAINED_ALGOS = ("ppo_lagrangian", "budget_ppo", "budget_apg")


def batched_trainer(algo: str) -> Any:
    """The training function of a batched algorithm (:data:`BATCHED_ALGOS`), imported on demand: its arguments are
    :func:`agents.budget_ppo.train_budget_ppo`'s."""
    if algo not in BATCHED_ALGOS:
        raise ValueError(f"algo must be one of {BATCHED_ALGOS}; got {algo!r}")
    return getattr(import_module(f"agents.{algo}"), f"train_{algo}")
