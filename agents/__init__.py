"""RL agents for otagym: stable-baselines3 training on the native vector env (:mod:`agents.train`, ``otagym
train``), rl_zoo3-format hyperparameters (``agents/configs``), PPO-Lagrangian for the CMDP formulation
(:mod:`agents.lagrangian`), the linear price policy of nine observation features as an SB3 (ARS) policy
(:mod:`agents.linear`) and trained models as policies of the ``baselines`` protocol (:mod:`agents.policy`), which
``baselines.receive_scaling.evaluation`` and ``otagym compare`` score on held-out channels."""

from pathlib import Path

CONFIG_DIR = Path(__file__).parent / "configs"
#: Algorithms ``otagym train`` knows: SB3 and sb3-contrib classes by name; ``ppo_lagrangian`` is PPO on the CMDP
#: formulation with dual ascent (:mod:`agents.lagrangian`).
ALGOS = ("ppo", "sac", "td3", "trpo", "ppo_lagrangian")
#: Algorithms ``otagym train`` runs with a batched trainer of its own instead of SB3's loop, on a benchmark task
#: (``--task``): ``budget_ppo``, PPO over the native vector env with the action relative to the budget left
#: (:mod:`agents.budget_ppo`).
BATCHED_ALGOS = ("budget_ppo",)
#: Algorithms ``otagym train`` runs on a devices-as-agents task (``--task`` of
#: :data:`otagym.tasks.DEVICE_TASKS`, the multiagent extra): ``ippo``, PPO with one network shared by every device
#: (:func:`agents.multiagent.train_ippo`), and ``mappo``, its shared actor with a centralised critic (TorchRL,
#: :func:`agents.mappo.train_mappo`).
DEVICE_ALGOS = ("ippo", "mappo")
#: Algorithms that learn the cost limit of a constrained task (the others optimise the reward alone, and
#: ``otagym train`` warns when they train on one).
CONSTRAINED_ALGOS = ("ppo_lagrangian", "budget_ppo")
