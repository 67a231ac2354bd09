"""Training RL schedulers with stable-baselines3 on the native vector env (``otagym train``).

Hyperparameters come from rl_zoo3-format YAML files (``agents/configs/<algo>.yml``, keyed by the env id), so the same
file drives ``python -m rl_zoo3.train``; ``task`` trains on a benchmark task's env settings exactly, any scheme
(:func:`config_entry` says which entry). A run directory belongs to one run and holds ``model.zip`` (the final
policy), ``run.json`` (algo, hyperparameters, env keyword arguments, seed, package versions, the history of the run's
segments), ``checkpoints/`` (every ``checkpoint_freq`` steps at a rollout boundary, with the replay buffer for
off-policy algorithms and the run's state, :class:`~agents.train.save.RunState`),
``monitor.csv`` (one line per training episode: return, length, the episode's nu, its leakage and EqualAlloc's on the
same channels, the run's step count at its end) and ``tb/`` (TensorBoard, when installed). ``resume=True`` continues
from the newest complete checkpoint with the run's own settings (see :class:`TrainOptions`). ``torch_threads``
(default 1) sets torch's thread count: the small MLP policies train far faster on one thread than on torch's default
on a busy machine.

The package follows a run's steps: :mod:`~agents.train.setup` (settings checked, config and hyperparameters, the run
folder locked and claimed, a resume's conflicts), :mod:`~agents.train.envs` (the monitored env),
:mod:`~agents.train.callbacks` (checkpoints, budget, progress bar), :mod:`~agents.train.learn` (:func:`train`) and
:mod:`~agents.train.save` (checkpoints, ``run.json``, the monitor cut back at a resume, package versions).
"""

from agents.train.envs import MONITOR_KEYS
from agents.train.errors import NoCheckpointError, RunExistsError, RunMismatchError, SettingsError
from agents.train.learn import train
from agents.train.save import OFF_POLICY, checkpoint_files, checkpoint_models, latest_checkpoint, package_versions
from agents.train.setup import (LOCK_NAME, RESUMABLE_KEYS, RUN_ENTRIES, ZOO_KEYS, TrainOptions, config_entry,
                                load_hyperparams, resume_conflicts)

__all__ = ["load_hyperparams", "config_entry", "train", "TrainOptions", "package_versions", "latest_checkpoint",
           "checkpoint_files", "checkpoint_models", "resume_conflicts", "NoCheckpointError", "RunExistsError", "RunMismatchError",
           "SettingsError", "ZOO_KEYS", "MONITOR_KEYS", "LOCK_NAME", "RUN_ENTRIES", "OFF_POLICY", "RESUMABLE_KEYS"]
