"""``train``: the named steps of a run (setup, envs, callbacks, learn, save) in order, and the learner itself, built
fresh or loaded from the run's checkpoint."""

from __future__ import annotations

import dataclasses
import pickle
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import CallbackList
from stable_baselines3.common.vec_env import VecEnv

from agents.policy import ALGO_CLASSES
from agents.train.callbacks import AtomicCheckpoint, run_callbacks
from agents.train.envs import TrainingEnv, training_env
from agents.train.save import OFF_POLICY, checkpoint_files, kept_segments, record_end, save_final
from agents import ALGOS
from agents.train.setup import (ZOO_KEYS, Claim, RunRequest, Settings, TrainOptions, checked_settings, open_run,
                                release_lock)
from otagym._io import remove_stale_temporaries, write_json
from otagym.validation import options_of


def train(algo: str = "ppo", options: TrainOptions | None = None, **kwargs: Any) -> Path:
    """Train ``algo`` on the native vector env and return the path of ``model.zip``.

    A run folder belongs to one run, and to one process at a time: ``train`` holds a lock on it from its checks to
    its end (:func:`~agents.train.setup.lock_run_folder`; a second ``train`` into the folder raises
    :class:`RunExistsError`). A fresh run refuses a folder that holds another (:class:`RunExistsError`) unless
    ``overwrite``; ``resume`` continues the run in the folder only with the settings it was trained with
    (:class:`RunMismatchError` lists every difference). Temporary files that killed writes left in the folder are
    removed. ``run.json`` keeps the run's history: one entry per segment (``segments``: first and last env step, wall
    time, start time, versions), updated at every checkpoint, so that after a kill it says how far the run got;
    ``trained_timesteps`` and ``wall_s`` (all segments) are written when the run ends. Checkpoints, the final model
    and every JSON are written atomically, the model last, so a checkpoint whose model exists is complete. Every
    setting is checked before the run folder is touched: a config that cannot be read or env keyword arguments the
    env refuses raise :class:`SettingsError` (a ``ValueError`` naming the parameter) and leave no folder behind.

    Args:
        algo: one of :data:`ALGOS`.
        options: the run's options (:class:`~agents.train.setup.TrainOptions`: the config, run folder, seed, step
            total, checkpoints, resume or overwrite, time budget, env settings or task, progress and threads); or
            give its fields as keyword arguments (``train("ppo", task=..., total_timesteps=...)``), not both.
    """
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {ALGOS}; got {algo!r}")
    unknown = sorted(set(kwargs) - {f.name for f in dataclasses.fields(TrainOptions)})
    if unknown:
        raise TypeError(f"train() got an unexpected keyword argument {unknown[0]!r} (its options are the fields of "
                        f"TrainOptions: {[f.name for f in dataclasses.fields(TrainOptions)]})")
    opts = options_of(TrainOptions, options, kwargs, owner="train()")
    # every setting is checked (the env built) before the run folder is touched: a mistake leaves nothing behind
    settings = checked_settings(algo, opts.config, opts.env_overrides, opts.task)
    total = int(opts.total_timesteps if opts.total_timesteps is not None
                else settings.hyperparams.get("n_timesteps", 1_000_000))
    request = RunRequest(algo, opts.config, Path(opts.run_dir), opts.task, opts.seed, total, opts.checkpoint_freq,
                         opts.resume, opts.overwrite, opts.max_minutes, opts.progress, opts.verbose,
                         opts.torch_threads)
    claim = open_run(request, settings)
    try:
        return _learn(request, settings, claim)
    finally:
        settings.native.close()
        release_lock(claim.lock, request.run)


def _learn(request: RunRequest, settings: Settings, claim: Claim) -> Path:
    """A claimed run from its checkpoint (or its start) to the request's total env steps: the segment opened in its
    record, its env and callbacks, ``learn``, the final model and the record closed; the path of ``model.zip``."""
    meta, hp, done_steps = claim.meta, settings.hyperparams, claim.done_steps
    run, algo, seed, total = request.run, request.algo, request.seed, request.total
    _open_segment(meta, claim, request.torch_threads)
    write_json(run / "run.json", meta)  # first: the folder is a run's (resumable from its start) before it has files
    settings.native.seed(seed)
    remove_stale_temporaries(run / "checkpoints")
    env = training_env(settings.native, run, algo, hp, settings.env_kwargs, done_steps, meta["env_id"],
                       resumed=bool(claim.previous))
    checkpoint = AtomicCheckpoint(request.checkpoint_freq, run, meta, env.state, done_steps)
    callbacks = run_callbacks(request, checkpoint, env.lagrangian, hp, claim.previous)
    model = _model(algo, hp, env, run, seed, claim, request.verbose)
    write_json(run / "run.json", meta)
    model.learn(total_timesteps=total - done_steps, callback=CallbackList(callbacks),
                reset_num_timesteps=not claim.previous, tb_log_name=algo)
    final = save_final(model, run)
    checkpoint.record_segment(model.num_timesteps)
    record_end(meta, run, model.num_timesteps)
    return final


def _open_segment(meta: dict[str, Any], claim: Claim, torch_threads: int | None) -> None:
    """torch's thread count set (and recorded), and the run's history up to its checkpoint followed by a new
    segment that starts there."""
    if torch_threads is not None:
        import torch

        torch.set_num_threads(int(torch_threads))
    meta["torch_threads"] = _torch_threads()
    meta["segments"] = kept_segments(claim.recorded.get("segments") or [], claim.done_steps) + [{
        "start_steps": claim.done_steps, "end_steps": claim.done_steps, "wall_s": 0.0,
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "versions": meta["versions"]}]


def _model(algo: str, hp: dict[str, Any], env: TrainingEnv, run: Path, seed: int, claim: Claim,
           verbose: int) -> BaseAlgorithm:
    """The learner: built from the hyperparameters for a fresh run, or loaded from the checkpoint a resume continues
    with the run's state as it was there (an older version's checkpoint without one: a fresh stream of channels)."""
    cls = ALGO_CLASSES[algo]
    tb = str(run / "tb") if _has_tensorboard() else None
    venv: VecEnv = env.venv
    if not claim.previous:
        return cls(hp.get("policy", "MlpPolicy"), venv, seed=seed, tensorboard_log=tb, verbose=verbose,
                   **_constructor_kwargs(hp))
    files = checkpoint_files(run, claim.done_steps)
    exact = files["state"].is_file()
    # SB3's load seeds the env with the run's seed (its _setup_model): the env and the generators are set after it
    model = cls.load(claim.previous[0], env=venv, tensorboard_log=tb, force_reset=not exact)
    if algo in OFF_POLICY:
        model.load_replay_buffer(files["replay_buffer"])
    if exact:  # the episodes in progress, the env's generator, the learner's: as the run had them
        env.state.restore(pickle.loads(files["state"].read_bytes()))
    else:  # an older version's checkpoint: a fresh stream of channels, not the run's first episodes again
        env.state.native.seed(seed + claim.done_steps)
    return model


def _constructor_kwargs(hp: dict[str, Any]) -> dict[str, Any]:
    """The hyperparameters that are arguments of the algorithm's constructor, with rl_zoo3's action noise."""
    kwargs = {k: v for k, v in hp.items() if k not in ZOO_KEYS}
    if hp.get("noise_type") == "normal":  # rl_zoo3's action-noise keys
        from stable_baselines3.common.noise import NormalActionNoise

        kwargs["action_noise"] = NormalActionNoise(np.zeros(1), float(hp.get("noise_std", 0.1)) * np.ones(1))
    return kwargs


def _has_tensorboard() -> bool:
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return False
    return True


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())
