"""Training RL schedulers with stable-baselines3 on the native vector env (``otagym train``).

Hyperparameters come from rl_zoo3-format YAML files (``agents/configs/<algo>.yml``, keyed by the env id), so the same
file drives ``python -m rl_zoo3.train``; ``task`` trains on a benchmark task's env settings exactly, any scheme
(:func:`config_entry` says which entry). A run directory belongs to one run and holds ``model.zip`` (the final
policy), ``run.json`` (algo, hyperparameters, env keyword arguments, seed, package versions, the history of the run's
segments), ``checkpoints/`` (every ``checkpoint_freq`` steps at a rollout boundary, with the replay buffer for
off-policy algorithms and the run's state, :class:`_RunState`),
``monitor.csv`` (one line per training episode: return, length, the episode's nu, its leakage and EqualAlloc's on the
same channels, the run's step count at its end) and ``tb/`` (TensorBoard, when installed). ``resume=True`` continues
from the newest complete checkpoint with the run's own settings (see :func:`train`). ``torch_threads``
(default 1) sets torch's thread count: the small MLP policies train far faster on one thread than on torch's default
on a busy machine.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import pickle
import re
import shutil
import sys
import time
import warnings
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.monitor import ResultsWriter
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecMonitor

from agents import ALGOS, CONFIG_DIR
from agents.lagrangian import DualAscentCallback, LagrangianVecEnv, nu_bin_edges
from agents.policy import ALGO_CLASSES
from baselines.policies import action_semantics
from otagym import ENV_ID, __version__
from otagym._io import atomic_write, remove_stale_temporaries, write_json
from otagym.sb3 import OTAPrivacySB3VecEnv
from otagym.tasks import TASKS, constrained

__all__ = ["load_hyperparams", "config_entry", "train", "package_versions", "latest_checkpoint", "checkpoint_files",
           "checkpoint_models", "resume_conflicts", "NoCheckpointError", "RunExistsError", "RunMismatchError", "SettingsError"]

#: Keys of the rl_zoo3 format that are not arguments of the algorithm's constructor.
ZOO_KEYS = ("n_envs", "n_timesteps", "policy", "env_kwargs", "normalize", "lagrange_init", "lagrange_lr",
            "lagrange_kp", "lagrange_kd", "lagrange_nu_bins", "noise_type", "noise_std")
#: Per-episode info keys that the monitor writes beside return and length, those the env reports (receive scaling:
#: all; CDPB and anonymous OTA: ``episode_rdp``).
MONITOR_KEYS = ("nu", "episode_leakage", "episode_equal_alloc_leakage", "episode_rdp")


def _config_table(algo: str, config: str | Path | None, env_id: str) -> tuple[Path, dict[str, Any]]:
    """The path of the rl_zoo3-format YAML of ``algo`` (``config``, default the packaged one) and its entries."""
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {ALGOS}; got {algo!r}")
    path = Path(config) if config is not None else CONFIG_DIR / f"{algo}.yml"
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist (expected rl_zoo3-format YAML keyed by {env_id})")
    table = yaml.safe_load(path.read_text()) or {}
    if not isinstance(table, dict):
        raise ValueError(f"config {path} is not a mapping of env ids to hyperparameters")
    return path, table


def config_entry(algo: str, config: str | Path | None = None, task: str | None = None) -> str:
    """The entry of the config that a run on ``task`` (a task id, or None: the default env) trains with: the
    task's own when the config has one, else :data:`otagym.ENV_ID`'s (whose ``env_kwargs`` the task's replace)."""
    _, table = _config_table(algo, config, task or ENV_ID)
    return task if task is not None and task in table else ENV_ID


def load_hyperparams(algo: str, config: str | Path | None = None, env_id: str = ENV_ID) -> dict[str, Any]:
    """The hyperparameters of ``env_id`` in an rl_zoo3-format YAML file (default: the packaged one of ``algo``).

    ``policy_kwargs`` may be a string as in rl_zoo3 (``"dict(net_arch=[64, 64])"``); it is evaluated with only
    ``dict`` and ``torch.nn`` in scope. ``lin_<value>`` learning rates become linear schedules, as in rl_zoo3.
    """
    path, table = _config_table(algo, config, env_id)
    if env_id not in table:
        raise ValueError(f"config {path} has no entry for {env_id!r}; keys: {sorted(table)}")
    hp = dict(table[env_id])
    if isinstance(hp.get("policy_kwargs"), str):
        import torch

        hp["policy_kwargs"] = eval(hp["policy_kwargs"], {"__builtins__": {}}, {"dict": dict, "nn": torch.nn})
    for key in ("learning_rate", "clip_range"):
        value = hp.get(key)
        if isinstance(value, str) and value.startswith("lin_"):
            start = float(value[4:])
            hp[key] = lambda progress, start=start: progress * start
    if hp.get("normalize"):
        raise ValueError("normalize is not supported: the observation is of order one by construction")
    return hp


class NoCheckpointError(FileNotFoundError):
    """``train(..., resume=True)`` found no complete checkpoint to continue from."""


class RunExistsError(FileExistsError):
    """A fresh ``train`` was pointed at a folder that holds another run."""


class RunMismatchError(ValueError):
    """``train(..., resume=True)`` was asked for settings other than those the run was trained with."""


class SettingsError(ValueError):
    """A setting of :func:`train` that cannot run, found before the run folder is touched: ``argument`` names the
    parameter at fault (``"config"``: the config file or its entry; ``"env_overrides"``: the env keyword
    arguments), ``message`` says why."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"{argument}: {message}")
        self.argument, self.message = argument, message


#: The lock file that the process training into a run folder holds (:func:`_lock_run_folder`).
LOCK_NAME = ".otagym-train.lock"
#: What a run folder holds (the run's own files; anything else in the folder is left alone).
RUN_ENTRIES = ("run.json", "model.zip", "checkpoints", "monitor.csv", "tb", "lagrange.json")
#: Algorithms whose checkpoint is complete only with its replay buffer.
OFF_POLICY = ("sac", "td3")
#: Hyperparameters that may change between the segments of a run (the others must match to resume).
RESUMABLE_KEYS = ("n_timesteps",)


def checkpoint_files(run_dir: str | Path, steps: int) -> dict[str, Path]:
    """The files of the checkpoint at ``steps`` env steps: ``model`` (SB3 zip), ``replay_buffer`` (off-policy
    algorithms), ``lagrange`` (PPO-Lagrangian's multipliers) and ``state`` (:class:`_RunState`: the env and random
    generators, so that a resume continues the run exactly; checkpoints of older versions have none). The model is
    written last, so it marks the rest."""
    folder = Path(run_dir) / "checkpoints"
    return {"model": folder / f"model_{steps}_steps.zip",
            "replay_buffer": folder / f"model_replay_buffer_{steps}_steps.pkl",
            "lagrange": folder / f"model_lagrange_{steps}_steps.json",
            "state": folder / f"model_state_{steps}_steps.pkl"}


def _needed_parts(algo: str | None) -> tuple[str, ...]:
    return ("model",) + (("replay_buffer",) if algo in OFF_POLICY else ()) + (
        ("lagrange",) if algo == "ppo_lagrangian" else ())


def checkpoint_models(run_dir: str | Path) -> list[tuple[int, Path]]:
    """(env steps, model zip) of every checkpoint model in the run's ``checkpoints/``, by steps; complete or not
    (:func:`latest_checkpoint` checks)."""
    found = []
    for path in (Path(run_dir) / "checkpoints").glob("model_*_steps.zip"):
        match = re.fullmatch(r"model_(\d+)_steps\.zip", path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def latest_checkpoint(run_dir: str | Path, algo: str | None = None) -> tuple[Path, int] | None:
    """The newest *complete* checkpoint of a run (model zip readable as a zip, with its replay buffer for SAC/TD3
    and its multiplier for PPO-Lagrangian) and its step count, or None. ``algo`` defaults to the one in the run's
    ``run.json``. Incomplete checkpoints (a run killed by an older version mid-write, a deleted buffer) are skipped
    with a warning naming them."""
    run = Path(run_dir)
    if algo is None and (run / "run.json").is_file():
        algo = _read_run_json(run).get("algo")
    for steps, path in reversed(checkpoint_models(run)):
        files = checkpoint_files(run, steps)
        missing = [part for part in _needed_parts(algo) if not files[part].is_file()]
        if not missing and zipfile.is_zipfile(files["model"]):
            return path, steps
        warnings.warn(f"skipping incomplete checkpoint {path} ({', '.join(missing) or 'model'} "
                      f"{'missing' if missing else 'unreadable'})", stacklevel=2)
    return None


def _read_run_json(run: Path) -> dict[str, Any]:
    try:
        meta = json.loads((run / "run.json").read_text())
    except (OSError, ValueError) as err:
        raise RunMismatchError(f"{run / 'run.json'} cannot be read ({err}); the run cannot be resumed: replace it "
                               "with --overwrite (overwrite=True)") from None
    if not isinstance(meta, dict):
        raise RunMismatchError(f"{run / 'run.json'} is not a run record (a JSON object); the run cannot be resumed: "
                               "replace it with --overwrite (overwrite=True)")
    return meta


def _comparable(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def resume_conflicts(recorded: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """What differs between a run's ``run.json`` and the settings asked for its continuation: the algorithm, the
    task, the seed, the env keyword arguments (as the env resolves them), the hyperparameters (all but
    :data:`RESUMABLE_KEYS`) and the otagym version. Each difference as ``"key: run has X, asked Y"``."""
    def fields(meta: dict[str, Any]) -> dict[str, Any]:
        hp = {k: v for k, v in (meta.get("hyperparams") or {}).items() if k not in RESUMABLE_KEYS}
        return {"algo": meta.get("algo"), "task": meta.get("task"), "seed": meta.get("seed"),
                "env_kwargs": meta.get("env_kwargs"),
                "hyperparams": hp, "otagym version": (meta.get("versions") or {}).get("otagym")}

    old, new = fields(recorded), fields(wanted)
    out = []
    for key in old:
        if isinstance(old[key], dict) and isinstance(new[key], dict):
            for sub in sorted(set(old[key]) | set(new[key])):
                a, b = (_comparable(d[sub]) if sub in d else "(default)" for d in (old[key], new[key]))
                if a != b:
                    out.append(f"{key}.{sub}: run has {a}, asked {b}")
        elif _comparable(old[key]) != _comparable(new[key]):
            out.append(f"{key}: run has {_comparable(old[key])}, asked {_comparable(new[key])}")
    return out


def _claim_run_folder(run: Path, overwrite: bool) -> None:
    """Refuse a folder that holds another run (:class:`RunExistsError`), or with ``overwrite`` remove that run's
    files (:data:`RUN_ENTRIES` and older versions' ``monitor*.csv``), leaving anything else in the folder."""
    held = [run / name for name in RUN_ENTRIES if (run / name).exists()] + sorted(run.glob("monitor.resumed-*.csv"))
    if held and not overwrite:
        raise RunExistsError(f"{run} holds a run ({', '.join(p.name for p in held)}): continue it with --resume "
                             "(resume=True), replace it with --overwrite (overwrite=True), or choose another "
                             "--run-dir")
    for path in held:
        shutil.rmtree(path) if path.is_dir() else path.unlink()


class _StepStamp(VecEnvWrapper):
    """Adds ``info["total_timesteps"]`` (env steps of the run so far, all envs together) to each finished episode's
    info, so that the monitor file says where in the run each episode ended."""

    def __init__(self, venv: VecEnv, start: int) -> None:
        super().__init__(venv)
        self.steps = int(start)

    def reset(self):
        return self.venv.reset()

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        self.steps += self.num_envs
        for i in np.flatnonzero(dones):
            infos[i]["total_timesteps"] = self.steps
        return obs, rewards, dones, infos


class _RunMonitor(VecMonitor):
    """SB3's ``VecMonitor`` writing the run's one ``monitor.csv`` (readable by ``load_results``), with the run's step
    count at each episode's end. Resumed from a checkpoint at ``resumed_steps``, it first drops the episodes that
    ended after the checkpoint (their training was discarded) and appends to the same file and clock."""

    def __init__(self, venv: OTAPrivacySB3VecEnv, path: Path, resumed_steps: int = 0, env_id: str = ENV_ID) -> None:
        reported = venv.info_keys + venv.episode_keys
        keys = tuple(k for k in MONITOR_KEYS if k in reported) + ("total_timesteps",)
        super().__init__(_StepStamp(venv, resumed_steps), info_keywords=keys)
        kept = _truncate_monitor(path, resumed_steps) if resumed_steps else None
        if kept is not None:
            self.t_start = kept
        self.results_writer = ResultsWriter(str(path), header={"t_start": self.t_start, "env_id": env_id},
                                            extra_keys=self.info_keywords, override_existing=kept is None)


def _truncate_monitor(path: Path, steps: int) -> float | None:
    """Keep the rows of a monitor file that ended at or before ``steps`` (written atomically); its ``t_start``, or
    None when there is no readable monitor file with a step column (then a new one is started)."""
    try:
        with open(path, newline="") as fh:
            header = json.loads(fh.readline().lstrip("#"))
            reader = csv.DictReader(fh)
            columns = reader.fieldnames or []
            rows = [row for row in reader if _ended_by(row, steps)]
    except (OSError, ValueError):
        return None
    if "total_timesteps" not in columns or not isinstance(header, dict) or "t_start" not in header:
        return None
    with atomic_write(path, "w", newline="") as fh:
        fh.write(f"#{json.dumps(header)}\n")
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return float(header["t_start"])


def _ended_by(row: dict[str, str | None], steps: int) -> bool:
    try:
        return None not in row.values() and int(row["total_timesteps"]) <= steps
    except (KeyError, TypeError, ValueError):
        return False


def train(
    algo: str = "ppo",
    *,
    config: str | Path | None = None,
    run_dir: str | Path = "runs/ppo",
    seed: int = 0,
    total_timesteps: int | None = None,
    checkpoint_freq: int = 100_000,
    resume: bool = False,
    overwrite: bool = False,
    max_minutes: float | None = None,
    env_overrides: dict[str, Any] | None = None,
    task: str | None = None,
    progress: bool = True,
    verbose: int = 0,
    torch_threads: int | None = 1,
) -> Path:
    """Train ``algo`` on the native vector env and return the path of ``model.zip``.

    A run folder belongs to one run, and to one process at a time: ``train`` holds a lock on it from its checks to
    its end (:func:`_lock_run_folder`; a second ``train`` into the folder raises :class:`RunExistsError`). A fresh
    run refuses a folder that holds another (:class:`RunExistsError`) unless ``overwrite``; ``resume`` continues the
    run in the folder only with the settings it was trained with (:class:`RunMismatchError` lists every difference).
    Temporary files that killed writes left in the folder are removed. ``run.json`` keeps the run's history: one
    entry per segment (``segments``: first and last env step, wall time, start time, versions), updated at every
    checkpoint, so that after a kill it says how far the run got; ``trained_timesteps`` and ``wall_s`` (all
    segments) are written when the run ends. Checkpoints, the final model and every JSON are written atomically, the
    model last, so a checkpoint whose model exists is complete. Every setting is checked before the run folder is
    touched: a config that cannot be read or env keyword arguments the env refuses raise :class:`SettingsError` (a
    ``ValueError`` naming the parameter) and leave no folder behind.

    Args:
        algo: one of :data:`ALGOS`.
        config: rl_zoo3-format YAML (default ``agents/configs/<algo>.yml``).
        run_dir: where the model, checkpoints, monitor CSV and TensorBoard logs go.
        seed: seeds the env's generator and the learner.
        total_timesteps: env steps (default: the config's ``n_timesteps``); with ``resume``, the total including the
            steps already done. Training stops there exactly (at the first multiple of ``n_envs`` at or above it),
            also for on-policy algorithms whose rollouts would overshoot it.
        checkpoint_freq: env steps between checkpoints (each at the first rollout boundary at or after a multiple
            of it: PPO's every ``n_envs * n_steps`` steps, SAC's and TD3's every ``n_envs`` steps).
        resume: continue from the newest complete checkpoint of ``run_dir``, exactly as the run would have gone on
            (the checkpoint's :class:`_RunState`), or from step 0 when the run stopped before its first checkpoint
            (its ``run.json`` exists); raises :class:`NoCheckpointError` (a ``FileNotFoundError``) before any work
            when the folder holds neither, and :class:`RunMismatchError` when the
            algorithm, seed, env settings, hyperparameters (but ``n_timesteps``) or otagym version differ from
            ``run.json``'s. The monitor file then loses the episodes that ended after that checkpoint.
        overwrite: a fresh run may replace the run in ``run_dir`` (its files in :data:`RUN_ENTRIES` are removed).
        max_minutes: stop after this many minutes of wall time (the model trained so far is saved).
        env_overrides: env keyword arguments on top of the config's ``env_kwargs`` (e.g. ``fading``); not with
            ``task``.
        task: a benchmark task id (:data:`otagym.tasks.TASKS`): the run trains on exactly the task's env keyword
            arguments (:attr:`~otagym.tasks.Task.kwargs`), with the config's entry of the task when it has one, else
            its entry of :data:`otagym.ENV_ID` with the task's env arguments in place of its ``env_kwargs``
            (:func:`config_entry`; ``run.json`` names the task, ``"task"``, and the entry, ``"config_entry"``).
        progress: a tqdm progress bar on stderr: env steps out of ``total_timesteps`` or, with ``max_minutes``,
            seconds out of the time budget with the env steps as a postfix; a resumed run says which checkpoint
            it continues. False: silent.
        verbose: SB3's verbosity (0: none, 1: training info).
        torch_threads: ``torch.set_num_threads(torch_threads)`` before the model is built (>= 1; default 1). This is
            process-wide and is not restored afterwards. None leaves torch's setting as it is. run.json records the
            thread count in use as ``torch_threads``.
    """
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {ALGOS}; got {algo!r}")
    if (total_timesteps is not None and total_timesteps < 1) or checkpoint_freq < 1:
        raise ValueError(f"total_timesteps and checkpoint_freq must be >= 1; got {total_timesteps}, {checkpoint_freq}")
    if torch_threads is not None and (not isinstance(torch_threads, (int, np.integer))
                                      or isinstance(torch_threads, bool) or torch_threads < 1):
        raise ValueError(f"torch_threads must be an integer >= 1 or None; got {torch_threads!r}")
    if resume and overwrite:
        raise ValueError("resume and overwrite exclude each other: continue the run, or replace it")
    # every setting is checked (the env built) before the run folder is touched: a mistake leaves nothing behind
    hp, env_kwargs, native, semantics, entry = _checked_settings(algo, config, env_overrides, task)
    total = int(total_timesteps if total_timesteps is not None else hp.get("n_timesteps", 1_000_000))
    run, lock = Path(run_dir), None
    try:
        if total < 1:
            raise SettingsError("config", f"n_timesteps must be >= 1; got {total}")
        if resume and not (run / "run.json").is_file() and latest_checkpoint(run, algo) is None:
            raise NoCheckpointError(f"no complete checkpoint to resume in {run / 'checkpoints'}; "
                                    "run without --resume to start a new run")
        run.mkdir(parents=True, exist_ok=True)
        lock = _lock_run_folder(run)  # held until train returns: one process owns the folder
        remove_stale_temporaries(run)  # a killed write of run.json, model.zip, ...
        previous = latest_checkpoint(run) if resume else None  # complete as the run's own algorithm needs
        recorded = _read_run_json(run) if resume else {}
        done_steps = previous[1] if previous else 0
        if done_steps > total:
            raise RunMismatchError(f"total_timesteps ({total:,}) is below the {done_steps:,} steps of the checkpoint "
                                   f"to resume in {run}")
        meta = {
            "algo": algo, "env_id": task or ENV_ID, "task": task, "config": str(config or CONFIG_DIR / f"{algo}.yml"),
            "config_entry": entry, "seed": seed,
            "total_timesteps": total, "env_kwargs": {**env_kwargs, **semantics},
            "hyperparams": json.loads(_comparable({k: v for k, v in hp.items() if not callable(v)})),
            "versions": package_versions(), "resumed_from": done_steps,
        }
        if resume:
            conflicts = resume_conflicts(recorded, meta)
            if conflicts:
                raise RunMismatchError(f"{run} was trained with other settings; resume with the run's own, or start "
                                       "a new run elsewhere: " + "; ".join(conflicts))
        else:
            _claim_run_folder(run, overwrite)
    except BaseException:
        native.close()
        _release(lock)
        if lock is None and not resume:
            with contextlib.suppress(OSError):  # a folder made for nothing (empty: another process may fill it)
                run.rmdir()
        raise
    try:
        if torch_threads is not None:
            import torch

            torch.set_num_threads(int(torch_threads))
        meta["torch_threads"] = _torch_threads()
        meta["segments"] = _kept_segments(recorded.get("segments") or [], done_steps) + [{
            "start_steps": done_steps, "end_steps": done_steps, "wall_s": 0.0,
            "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "versions": meta["versions"]}]
        native.seed(seed)
        remove_stale_temporaries(run / "checkpoints")
        venv = monitor = _RunMonitor(native, run / "monitor.csv", done_steps, env_id=meta["env_id"])
        lagrangian = None
        if algo == "ppo_lagrangian":
            edges = nu_bin_edges(env_kwargs.get("nu_range"), hp.get("lagrange_nu_bins", 1))
            venv = lagrangian = LagrangianVecEnv(venv, initial=float(hp.get("lagrange_init", 1.0)), nu_edges=edges)
            if previous:
                saved = json.loads(checkpoint_files(run, done_steps)["lagrange"].read_text())
                venv.load_state(saved)
        state = _RunState(native, monitor, lagrangian)
        callbacks: list[BaseCallback] = [_AtomicCheckpoint(checkpoint_freq, run, meta, state, done_steps)]
        if lagrangian is not None:
            callbacks.append(DualAscentCallback(lagrangian, lr=float(hp.get("lagrange_lr", 0.5)),
                                                path=run / "lagrange.json", kp=float(hp.get("lagrange_kp", 0.0)),
                                                kd=float(hp.get("lagrange_kd", 0.0))))
        if progress:  # before the budget: its clock starts first, so it reads the whole budget when the limit stops
            if resume:
                print(f"resuming {run} from " + (f"{previous[0].name} ({done_steps:,} env steps)" if previous else
                      "its start (it stopped before its first checkpoint)"), file=sys.stderr)
            callbacks.append(_ProgressBar(total, None if max_minutes is None else 60.0 * max_minutes, desc=algo))
        callbacks.append(_Budget(total, None if max_minutes is None else 60.0 * max_minutes))
        cls = ALGO_CLASSES[algo]
        tb = str(run / "tb") if _has_tensorboard() else None
        kwargs = {k: v for k, v in hp.items() if k not in ZOO_KEYS}
        if hp.get("noise_type") == "normal":  # rl_zoo3's action-noise keys
            from stable_baselines3.common.noise import NormalActionNoise

            kwargs["action_noise"] = NormalActionNoise(np.zeros(1), float(hp.get("noise_std", 0.1)) * np.ones(1))
        if previous:
            saved_state = checkpoint_files(run, done_steps)["state"]
            exact = saved_state.is_file()
            # SB3's load seeds the env with the run's seed (its _setup_model): the env and the generators are set
            # after it
            model = cls.load(previous[0], env=venv, tensorboard_log=tb, force_reset=not exact)
            if algo in OFF_POLICY:
                model.load_replay_buffer(checkpoint_files(run, done_steps)["replay_buffer"])
            if exact:  # the episodes in progress, the env's generator, the learner's: as the run had them
                state.restore(pickle.loads(saved_state.read_bytes()))
            else:  # an older version's checkpoint: a fresh stream of channels, not the run's first episodes again
                native.seed(seed + done_steps)
        else:
            model = cls(hp.get("policy", "MlpPolicy"), venv, seed=seed, tensorboard_log=tb, verbose=verbose, **kwargs)
        write_json(run / "run.json", meta)
        model.learn(total_timesteps=total - done_steps, callback=CallbackList(callbacks),
                    reset_num_timesteps=not previous, tb_log_name=algo)
        final = run / "model.zip"
        with atomic_write(final, "wb") as fh:
            model.save(fh)
        callbacks[0].record_segment(model.num_timesteps)
        meta.update(trained_timesteps=int(model.num_timesteps),
                    wall_s=float(sum(s["wall_s"] or 0.0 for s in meta["segments"])))
        write_json(run / "run.json", meta)
    finally:
        native.close()
        _release(lock)
    return final


def _lock_run_folder(run: Path) -> int:
    """An exclusive lock on the run folder (``fcntl.flock`` on its ``.otagym-train.lock``, which the system releases
    when the process ends, killed too), or :class:`RunExistsError` when another process holds it: two ``train`` into
    one folder cannot both pass the checks of a fresh run or a resume. Returns the lock's file descriptor
    (:func:`_release`). Where ``fcntl`` does not exist (Windows) the folder is not locked (-1)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return -1
    fd = os.open(run / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise RunExistsError(f"{run} is in use by another otagym train (it holds {run / LOCK_NAME}); wait for it "
                             "to end, or choose another --run-dir") from None
    return fd


def _release(lock: int | None) -> None:
    """Release :func:`_lock_run_folder`'s lock (None or -1: none was taken)."""
    if lock is not None and lock >= 0:
        os.close(lock)


def _checked_settings(algo: str, config: str | Path | None, env_overrides: dict[str, Any] | None, task: str | None
                      ) -> tuple[dict[str, Any], dict[str, Any], OTAPrivacySB3VecEnv, dict[str, Any], str]:
    """The hyperparameters, the env keyword arguments (the task's, or the config's ``env_kwargs`` under
    ``env_overrides``), the native vector env built from them, their action semantics and the config's entry
    (:func:`config_entry`); :class:`SettingsError` naming the parameter at fault when the task is unknown, the
    config cannot be read or the env refuses its arguments."""
    if task is not None and task not in TASKS:
        raise SettingsError("task", f"must be one of {sorted(TASKS)}; got {task!r}")
    if task is not None and env_overrides:
        raise SettingsError("env_overrides", f"{task} fixes every env argument: train on the task, or on env "
                            "arguments without it")
    try:
        entry = config_entry(algo, config, task)
        hp = load_hyperparams(algo, config, entry)
        n_envs = int(hp.get("n_envs", 8))
    except (OSError, ValueError, TypeError, NameError, SyntaxError, yaml.YAMLError) as err:
        raise SettingsError("config", str(err).replace("\n", " ")) from None
    if task is not None:
        env_kwargs = dict(TASKS[task].kwargs)
        hp["env_kwargs"] = env_kwargs
        blame = "task"
    else:
        env_kwargs = {**(hp.get("env_kwargs") or {}), **(env_overrides or {})}
        blame = "env_overrides" if env_overrides else "config"
    if algo == "ppo_lagrangian" and not constrained(env_kwargs):
        raise SettingsError("task" if task else "env_overrides" if "reward_mode" in (env_overrides or {}) else
                            "config", "ppo_lagrangian trains on the CMDP formulation: a constrained task, or "
                            "reward_mode 'cmdp' on receive scaling")
    if algo == "ppo_lagrangian":
        try:
            nu_bin_edges(env_kwargs.get("nu_range"), hp.get("lagrange_nu_bins", 1))
        except ValueError as err:
            raise SettingsError("config", str(err)) from None
    try:
        native = OTAPrivacySB3VecEnv(n_envs, **env_kwargs)
    except (TypeError, ValueError) as err:
        raise SettingsError(blame, str(err)) from None
    try:
        if algo == "ppo_lagrangian" and "cost" not in native.info_keys:
            raise ValueError("ppo_lagrangian needs the env's info['cost'], which these env arguments do not report "
                             "(anonymous OTA: give a target_epsilon)")
        semantics = action_semantics(native.venv.scenario, env_kwargs)
    except (TypeError, ValueError) as err:
        native.close()
        raise SettingsError(blame, str(err)) from None
    return hp, env_kwargs, native, semantics, entry


def _kept_segments(segments: list[dict[str, Any]], steps: int) -> list[dict[str, Any]]:
    """The segments of a run's history up to the checkpoint at ``steps`` that it resumes from: later ones are
    dropped, and the last kept one ends at the checkpoint (its wall time then covers what was discarded too)."""
    kept = [dict(s) for s in segments if s.get("start_steps", 0) < steps]
    if kept and (kept[-1].get("end_steps") or 0) > steps:
        kept[-1]["end_steps"] = steps
    return kept


class _RunState:
    """What a checkpoint holds beyond SB3's zip (which has the parameters, the optimiser, the step count and the last
    observation), so that a resumed run continues exactly where the run was: the native vector env (its episodes in
    progress and its generator: the channels, budgets nu and batches still to come), the monitor's and the
    Lagrangian's sums over the episodes in progress, and the generators of python, numpy and torch (the policy's
    sampled actions, PPO's minibatches, the replay buffer's draws, TD3's action noise)."""

    def __init__(self, native: OTAPrivacySB3VecEnv, monitor: VecMonitor,
                 lagrangian: LagrangianVecEnv | None = None) -> None:
        self.native, self.monitor, self.lagrangian = native, monitor, lagrangian

    def capture(self) -> dict[str, Any]:
        import random

        import torch

        out = {"env": self.native.venv, "rng": (random.getstate(), np.random.get_state(), torch.get_rng_state()),
               "monitor": (self.monitor.episode_returns, self.monitor.episode_lengths, self.monitor.episode_count)}
        if self.lagrangian is not None:
            out["lagrangian"] = (self.lagrangian._cost_sum, self.lagrangian.finished)
        return out

    def restore(self, state: dict[str, Any]) -> None:
        import random

        import torch

        self.native.venv = state["env"]
        self.native.seed(None)
        random.setstate(state["rng"][0])
        np.random.set_state(state["rng"][1])
        torch.set_rng_state(state["rng"][2])
        self.monitor.episode_returns, self.monitor.episode_lengths, self.monitor.episode_count = state["monitor"]
        if self.lagrangian is not None:
            self.lagrangian._cost_sum, self.lagrangian.finished = state["lagrangian"]


class _AtomicCheckpoint(BaseCallback):
    """A checkpoint every ``every`` env steps, at the first rollout boundary at or after each multiple (after the
    update of the rollout before, so that the run's state is the parameters, the env and the generators: nothing of
    a rollout in progress): the run's current segment in ``run.json`` is brought up to the steps trained, then the
    replay buffer (SAC/TD3), PPO-Lagrangian's multiplier, the run's state (:class:`_RunState`) and the model are
    written, each atomically (:func:`checkpoint_files`). A kill between them leaves a record at least as far as the
    newest complete checkpoint (which a resume continues from, trimming the record to it)."""

    def __init__(self, every: int, run: Path, meta: dict[str, Any], state: _RunState, start: int = 0) -> None:
        super().__init__()
        self.every, self.run, self.meta, self.state = int(every), run, meta, state
        self.next_at = (int(start) // self.every + 1) * self.every

    def _on_training_start(self) -> None:
        self.start = time.perf_counter()

    def _on_step(self) -> bool:
        return True

    def _on_rollout_start(self) -> None:
        steps = int(self.model.num_timesteps)
        if steps < self.next_at:
            return
        self.next_at = (steps // self.every + 1) * self.every
        files = checkpoint_files(self.run, steps)
        self.record_segment(steps)  # first: a kill while the checkpoint is written leaves a record of the steps
        if self.meta["algo"] in OFF_POLICY:
            with atomic_write(files["replay_buffer"], "wb") as fh:
                self.model.save_replay_buffer(fh)
        if self.meta["algo"] == "ppo_lagrangian":
            write_json(files["lagrange"], self.training_env.state(steps))
        try:
            state = pickle.dumps(self.state.capture(), protocol=pickle.HIGHEST_PROTOCOL)
        except (TypeError, AttributeError, pickle.PicklingError) as err:  # an env that cannot be pickled
            state = None
            warnings.warn(f"checkpoint {files['model'].name} without the run's state ({err}): a resume from it "
                          "continues on a fresh stream of channels", stacklevel=2)
        if state is not None:
            with atomic_write(files["state"], "wb") as fh:
                fh.write(state)
        with atomic_write(files["model"], "wb") as fh:
            self.model.save(fh)

    def record_segment(self, steps: int) -> None:
        """The current segment ends at ``steps`` after the wall time so far (written to ``run.json``)."""
        self.meta["segments"][-1].update(end_steps=int(steps), wall_s=time.perf_counter() - self.start)
        write_json(self.run / "run.json", self.meta)


class _Budget(BaseCallback):
    """Stops ``learn`` once ``total_steps`` env steps are done (a rollout in progress is dropped, so on-policy
    algorithms end where asked, not at the next rollout boundary) or ``seconds`` of wall time have passed."""

    def __init__(self, total_steps: int, seconds: float | None = None) -> None:
        super().__init__()
        self.total_steps, self.seconds = int(total_steps), seconds

    def _on_training_start(self) -> None:
        self.deadline = None if self.seconds is None else time.perf_counter() + self.seconds

    def _on_step(self) -> bool:
        return self.model.num_timesteps < self.total_steps and (
            self.deadline is None or time.perf_counter() < self.deadline)


class _ProgressBar(BaseCallback):
    """A tqdm bar on stderr that shows what bounds the run.

    Without a time budget: env steps out of ``total_steps`` (a resumed run starts at the steps already done). With one:
    seconds of wall time out of ``seconds`` (the budget; the run may also end earlier, at ``total_steps``), with the
    env steps done out of ``total_steps`` as a postfix.

    Args:
        total_steps: env steps asked for, including those of a resumed run.
        seconds: the wall-time budget in seconds, or None.
        desc: the bar's label.
    """

    def __init__(self, total_steps: int, seconds: float | None = None, desc: str = "train") -> None:
        super().__init__()
        self.total_steps = int(total_steps)
        self.seconds = seconds
        self.desc = desc
        #: The bar's total and unit: steps, or the time budget in seconds.
        self.total: float = float(seconds) if seconds is not None else self.total_steps
        self.unit = "s" if seconds is not None else "step"
        self.bar = None

    def _on_training_start(self) -> None:
        from tqdm.auto import tqdm

        if self.seconds is None:
            self.bar = tqdm(total=self.total, initial=self.model.num_timesteps, desc=self.desc, unit=self.unit,
                            unit_scale=True)
        else:
            self.start = time.perf_counter()
            self.bar = tqdm(total=self.total, desc=self.desc, unit=self.unit,
                            bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s [{elapsed}<{remaining}{postfix}]")
            self._postfix()

    def _postfix(self) -> None:
        self.bar.set_postfix_str(f"{self.model.num_timesteps:,}/{self.total_steps:,} steps", refresh=False)

    def _on_step(self) -> bool:
        if self.seconds is None:
            self.bar.update(self.model.num_timesteps - self.bar.n)
        else:
            self._postfix()
            self.bar.update(min(time.perf_counter() - self.start, self.total) - self.bar.n)
        return True

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self._on_step()
            self.bar.refresh()
            self.bar.close()


def _has_tensorboard() -> bool:
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return False
    return True


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


def package_versions() -> dict[str, str]:
    """The versions of the packages a run depends on, recorded in its ``run.json``."""
    import gymnasium
    import sb3_contrib
    import stable_baselines3
    import torch

    return {"otagym": __version__, "stable_baselines3": stable_baselines3.__version__,
            "sb3_contrib": sb3_contrib.__version__, "torch": torch.__version__, "gymnasium": gymnasium.__version__,
            "numpy": np.__version__}
