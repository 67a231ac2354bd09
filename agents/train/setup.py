"""The first step of a run: its settings checked before anything is written (the arguments, the config and its
hyperparameters, the env built from them), then the run folder claimed (locked, its run refused, replaced or checked
against the settings asked for its continuation) and the run's record (``run.json``'s fields) made."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import yaml

from agents import ALGOS, CONFIG_DIR, CONSTRAINED_ALGOS
from agents.lagrangian import nu_bin_edges
from agents.train.errors import NoCheckpointError, RunExistsError, RunMismatchError, SettingsError
from agents.train.save import comparable, latest_checkpoint, package_versions, read_run_json
from otagym import ENV_ID
from otagym._io import remove_stale_temporaries
from otagym.wrappers.sb3 import OTAPrivacySB3VecEnv
from otagym.schemes import DEFAULT_SCHEME, SCHEMES
from otagym.tasks import TASKS, constrained

#: Keys of the rl_zoo3 format that are not arguments of the algorithm's constructor.
ZOO_KEYS = ("n_envs", "n_timesteps", "policy", "env_kwargs", "normalize", "lagrange_init", "lagrange_lr",
            "lagrange_kp", "lagrange_kd", "lagrange_nu_bins", "lagrange_quantile", "noise_type", "noise_std",
            "env_wrapper")
#: The lock file that the process training into a run folder holds (:func:`lock_run_folder`).
LOCK_NAME = ".otagym-train.lock"
#: What a run folder holds (the run's own files; anything else in the folder is left alone).
RUN_ENTRIES = ("run.json", "model.zip", "checkpoints", "monitor.csv", "tb", "lagrange.json")
#: Hyperparameters that may change between the segments of a run (the others must match to resume).
RESUMABLE_KEYS = ("n_timesteps",)


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


@dataclass(frozen=True, kw_only=True)
class TrainOptions:
    """The options of a run of :func:`agents.train.train` beside the algorithm, checked once, when the struct is
    made (``ValueError`` for a value no config can make valid). ``train`` takes one, or its fields as keyword
    arguments.

    Attributes:
        config: rl_zoo3-format YAML (default ``agents/configs/<algo>.yml``).
        run_dir: where the model, checkpoints, monitor CSV and TensorBoard logs go.
        seed: seeds the env's generator and the learner.
        total_timesteps: env steps (default: the config's ``n_timesteps``); with ``resume``, the total including the
            steps already done. Training stops there exactly (at the first multiple of ``n_envs`` at or above it),
            also for on-policy algorithms whose rollouts would overshoot it.
        checkpoint_freq: env steps between checkpoints (each at the first rollout boundary at or after a multiple
            of it: PPO's every ``n_envs * n_steps`` steps, SAC's and TD3's every ``n_envs`` steps).
        resume: continue from the newest complete checkpoint of ``run_dir``, exactly as the run would have gone on
            (the checkpoint's :class:`~agents.train.save.RunState`), or from step 0 when the run stopped before its
            first checkpoint (its ``run.json`` exists); raises :class:`NoCheckpointError` (a ``FileNotFoundError``)
            before any work when the folder holds neither, and :class:`RunMismatchError` when the
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

    config: str | Path | None = None
    run_dir: str | Path = "runs/ppo"
    seed: int = 0
    total_timesteps: int | None = None
    checkpoint_freq: int = 100_000
    resume: bool = False
    overwrite: bool = False
    max_minutes: float | None = None
    env_overrides: dict[str, Any] | None = None
    task: str | None = None
    progress: bool = True
    verbose: int = 0
    torch_threads: int | None = 1

    def __post_init__(self) -> None:
        total, every, threads = self.total_timesteps, self.checkpoint_freq, self.torch_threads
        if (total is not None and total < 1) or every < 1:
            raise ValueError(f"total_timesteps and checkpoint_freq must be >= 1; got {total}, {every}")
        if threads is not None and (not isinstance(threads, (int, np.integer)) or isinstance(threads, bool)
                                    or threads < 1):
            raise ValueError(f"torch_threads must be an integer >= 1 or None; got {threads!r}")
        if self.resume and self.overwrite:
            raise ValueError("resume and overwrite exclude each other: continue the run, or replace it")


class Settings(NamedTuple):
    """A run's checked settings (:func:`checked_settings`)."""

    #: The config entry's hyperparameters (a task's run: with the task's ``env_kwargs``).
    hyperparams: dict[str, Any]
    #: The env keyword arguments the run trains on.
    env_kwargs: dict[str, Any]
    #: The native vector env built from them (closed by whoever holds the settings).
    native: OTAPrivacySB3VecEnv
    #: The action semantics of those env arguments (recorded in ``run.json``'s ``env_kwargs``).
    semantics: dict[str, Any]
    #: The config's entry (:func:`config_entry`).
    entry: str


def _hyperparams_and_env_kwargs(algo: str, config: str | Path | None, env_overrides: dict[str, Any] | None,
                                task: str | None) -> tuple[dict[str, Any], dict[str, Any], int, str, str]:
    """The hyperparameters, the env keyword arguments, ``n_envs``, the config's entry and the parameter to blame for
    env arguments the env refuses."""
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
    return hp, env_kwargs, n_envs, entry, blame


def checked_settings(algo: str, config: str | Path | None, env_overrides: dict[str, Any] | None,
                     task: str | None) -> Settings:
    """The hyperparameters, the env keyword arguments (the task's, or the config's ``env_kwargs`` under
    ``env_overrides``), the native vector env built from them, their action semantics and the config's entry
    (:func:`config_entry`); :class:`SettingsError` naming the parameter at fault when the task is unknown, the
    config cannot be read or the env refuses its arguments."""
    hp, env_kwargs, n_envs, entry, blame = _hyperparams_and_env_kwargs(algo, config, env_overrides, task)
    try:
        native = OTAPrivacySB3VecEnv(n_envs, **env_kwargs)
    except (TypeError, ValueError) as err:
        raise SettingsError(blame, str(err)) from None
    try:
        if algo == "ppo_lagrangian" and "cost" not in native.info_keys:
            raise ValueError("ppo_lagrangian needs the env's info['cost'], which these env arguments do not report "
                             "(anonymous OTA: give a target_epsilon)")
        semantics = SCHEMES[native.native.scheme].action_semantics(env_kwargs)
    except (TypeError, ValueError) as err:
        native.close()
        raise SettingsError(blame, str(err)) from None
    warn_if_unconstrained(algo, env_kwargs, task)
    return Settings(hp, env_kwargs, native, semantics, entry)


def warn_if_unconstrained(algo: str, env_kwargs: dict[str, Any], task: str | None) -> None:
    """A ``UserWarning`` when an algorithm that optimises the reward alone (not in
    :data:`agents.CONSTRAINED_ALGOS`) trains on a constrained MDP (:func:`otagym.tasks.constrained`): nothing keeps
    its episodes' cost within the limit, and the benchmark suite scores an episode over it below every feasible one."""
    if algo not in CONSTRAINED_ALGOS and constrained(env_kwargs):
        warnings.warn(f"{algo} optimises the reward alone: on {task or 'these env settings'}, a constrained MDP, "
                      "nothing keeps an episode's summed info['cost'] within its limit (T), and an episode over it "
                      "scores below every feasible one on the benchmark suite; train one of "
                      f"{', '.join(CONSTRAINED_ALGOS)}, or wrap the env (otagym.wrappers)", UserWarning, stacklevel=3)


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
                a, b = (comparable(d[sub]) if sub in d else "(default)" for d in (old[key], new[key]))
                if a != b:
                    out.append(f"{key}.{sub}: run has {a}, asked {b}")
        elif comparable(old[key]) != comparable(new[key]):
            out.append(f"{key}: run has {comparable(old[key])}, asked {comparable(new[key])}")
    return out


def claim_run_folder(run: Path, overwrite: bool) -> None:
    """Refuse a folder that holds another run (:class:`RunExistsError`), or with ``overwrite`` remove that run's
    files (:data:`RUN_ENTRIES` and older versions' ``monitor*.csv``), leaving anything else in the folder."""
    held = [run / name for name in RUN_ENTRIES if (run / name).exists()] + sorted(run.glob("monitor.resumed-*.csv"))
    if held and not overwrite:
        raise RunExistsError(f"{run} holds a run ({', '.join(p.name for p in held)}): continue it with --resume "
                             "(resume=True), replace it with --overwrite (overwrite=True), or choose another "
                             "--run-dir")
    for path in held:
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def lock_run_folder(run: Path) -> int:
    """An exclusive lock on the run folder (``fcntl.flock`` on its ``.otagym-train.lock``, which the system releases
    when the process ends, killed too), or :class:`RunExistsError` when another process holds it: two ``train`` into
    one folder cannot both pass the checks of a fresh run or a resume. Returns the lock's file descriptor
    (:func:`release_lock`, which removes the file). A lock taken on a file that its holder removed as it released it
    is not the folder's: the file is opened again. Where ``fcntl`` does not exist (Windows) the folder is not locked
    (-1)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return -1
    path = run / LOCK_NAME
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise RunExistsError(f"{run} is in use by another otagym train (it holds {path}); wait for it "
                                 "to end, or choose another --run-dir") from None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # the holder removed the file between our open and our lock: take the folder's new one


def release_lock(lock: int | None, run: Path | None = None) -> None:
    """Release :func:`lock_run_folder`'s lock (None or -1: none was taken), removing its file from ``run`` (while it
    is still held, so no other process takes a lock on a file that is about to go)."""
    if lock is not None and lock >= 0:
        if run is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(run / LOCK_NAME)
        os.close(lock)


@dataclass(frozen=True)
class RunRequest:
    """What ``train`` was asked for, checked (the arguments of :func:`agents.train.train`, with the step total
    resolved from the config)."""

    algo: str
    config: str | Path | None
    run: Path
    task: str | None
    seed: int
    total: int
    checkpoint_freq: int
    resume: bool
    overwrite: bool
    max_minutes: float | None
    progress: bool
    verbose: int
    torch_threads: int | None


class Claim(NamedTuple):
    """A run folder held by this process (:func:`open_run`)."""

    #: The lock's file descriptor (:func:`lock_run_folder`), released when the run ends.
    lock: int
    #: The checkpoint a resume continues from (its model zip and env steps), or None.
    previous: tuple[Path, int] | None
    #: The run's ``run.json`` as a resume found it ({} for a fresh run).
    recorded: dict[str, Any]
    #: The env steps already trained (the checkpoint's; 0 for a fresh run).
    done_steps: int
    #: The run's record (``run.json``'s fields) so far.
    meta: dict[str, Any]


def run_record(request: RunRequest, settings: Settings, done_steps: int) -> dict[str, Any]:
    """The run's record (``run.json``): what it trains, with what, on what, and from which step."""
    hp, algo, config, task = settings.hyperparams, request.algo, request.config, request.task
    return {
        "algo": algo, "env_id": task or ENV_ID, "task": task, "config": str(config or CONFIG_DIR / f"{algo}.yml"),
        "config_entry": settings.entry, "seed": request.seed, "checkpoint_freq": request.checkpoint_freq,
        "total_timesteps": request.total, "env_kwargs": {**settings.env_kwargs, **settings.semantics},
        "hyperparams": json.loads(comparable({k: v for k, v in hp.items() if not callable(v)})),
        "versions": package_versions(), "resumed_from": done_steps,
        # the observation entries the policy reads (agents.policy refuses a model of another layout)
        "observation_layout": SCHEMES[settings.env_kwargs.get("scheme", DEFAULT_SCHEME)].observation_layout.version,
    }


def open_run(request: RunRequest, settings: Settings) -> Claim:
    """The run folder locked and checked: a resume's checkpoint and record (:class:`NoCheckpointError`,
    :class:`RunMismatchError`), a fresh run's folder claimed (:func:`claim_run_folder`). On any error the env is
    closed, the lock released and a folder made for nothing removed before the error goes on."""
    run, algo, total, resume = request.run, request.algo, request.total, request.resume
    lock = None
    try:
        if total < 1:
            raise SettingsError("config", f"n_timesteps must be >= 1; got {total}")
        if resume and not (run / "run.json").is_file() and latest_checkpoint(run, algo) is None:
            raise NoCheckpointError(f"no complete checkpoint to resume in {run / 'checkpoints'}; "
                                    "run without --resume to start a new run")
        run.mkdir(parents=True, exist_ok=True)
        lock = lock_run_folder(run)  # held until train returns: one process owns the folder
        remove_stale_temporaries(run)  # a killed write of run.json, model.zip, ...
        previous = latest_checkpoint(run) if resume else None  # complete as the run's own algorithm needs
        recorded = read_run_json(run) if resume else {}
        done_steps = previous[1] if previous else 0
        if done_steps > total:
            raise RunMismatchError(f"total_timesteps ({total:,}) is below the {done_steps:,} steps of the checkpoint "
                                   f"to resume in {run}")
        meta = run_record(request, settings, done_steps)
        if resume:
            conflicts = resume_conflicts(recorded, meta)
            if conflicts:
                raise RunMismatchError(f"{run} was trained with other settings; resume with the run's own, or start "
                                       "a new run elsewhere: " + "; ".join(conflicts))
        else:
            claim_run_folder(run, request.overwrite)
    except BaseException:
        settings.native.close()
        release_lock(lock, run)
        if lock is None and not resume:
            with contextlib.suppress(OSError):  # a folder made for nothing (empty: another process may fill it)
                run.rmdir()
        raise
    return Claim(lock, previous, recorded, done_steps, meta)
