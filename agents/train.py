"""Training RL schedulers with stable-baselines3 on the native vector env (``otagym train``).

Hyperparameters come from rl_zoo3-format YAML files (``agents/configs/<algo>.yml``, keyed by the env id), so the same
file drives ``python -m rl_zoo3.train``. A run directory holds ``model.zip`` (the final policy), ``run.json`` (algo,
hyperparameters, env keyword arguments, seed, package versions), ``checkpoints/`` (every ``checkpoint_freq`` steps,
with the replay buffer for off-policy algorithms), ``monitor*.csv`` (one line per training episode: return, length,
the episode's nu, its leakage and EqualAlloc's on the same channels) and ``tb/`` (TensorBoard, when installed).
``resume=True`` continues from the newest checkpoint (and refuses to start when there is none). ``torch_threads``
(default 1) sets torch's thread count: the small MLP policies train far faster on one thread than on torch's default
on a busy machine.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, CheckpointCallback
from stable_baselines3.common.vec_env import VecMonitor

from agents import ALGOS, CONFIG_DIR
from otagym._io import write_json
from agents.lagrangian import DualAscentCallback, LagrangianVecEnv
from agents.policy import ALGO_CLASSES, action_semantics
from otagym import ENV_ID, __version__
from otagym.sb3 import OTAPrivacySB3VecEnv

__all__ = ["load_hyperparams", "make_vec_env", "train", "latest_checkpoint", "NoCheckpointError"]

#: Keys of the rl_zoo3 format that are not arguments of the algorithm's constructor.
ZOO_KEYS = ("n_envs", "n_timesteps", "policy", "env_kwargs", "normalize", "lagrange_init", "lagrange_lr",
            "noise_type", "noise_std")
#: Per-episode info keys that the monitor writes beside return and length.
MONITOR_KEYS = ("nu", "episode_leakage", "episode_equal_alloc_leakage")


def load_hyperparams(algo: str, config: str | Path | None = None, env_id: str = ENV_ID) -> dict[str, Any]:
    """The hyperparameters of ``env_id`` in an rl_zoo3-format YAML file (default: the packaged one of ``algo``).

    ``policy_kwargs`` may be a string as in rl_zoo3 (``"dict(net_arch=[64, 64])"``); it is evaluated with only
    ``dict`` and ``torch.nn`` in scope. ``lin_<value>`` learning rates become linear schedules, as in rl_zoo3.
    """
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {ALGOS}; got {algo!r}")
    path = Path(config) if config is not None else CONFIG_DIR / f"{algo}.yml"
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist (expected rl_zoo3-format YAML keyed by {env_id})")
    table = yaml.safe_load(path.read_text()) or {}
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


def make_vec_env(n_envs: int, env_kwargs: dict[str, Any], seed: int, monitor_path: Path | None = None):
    """The native vector env as an SB3 ``VecEnv``, wrapped in ``VecMonitor`` (episode stats, optional CSV)."""
    venv = OTAPrivacySB3VecEnv(n_envs, **env_kwargs)
    venv.seed(seed)
    return VecMonitor(venv, filename=None if monitor_path is None else str(monitor_path), info_keywords=MONITOR_KEYS)


class NoCheckpointError(FileNotFoundError):
    """``train(..., resume=True)`` found no checkpoint to continue from."""


def latest_checkpoint(run_dir: Path) -> tuple[Path, int] | None:
    """The newest ``checkpoints/model_<steps>_steps.zip`` of a run and its step count, or None."""
    found = []
    for path in (Path(run_dir) / "checkpoints").glob("model_*_steps.zip"):
        match = re.fullmatch(r"model_(\d+)_steps\.zip", path.name)
        if match:
            found.append((int(match.group(1)), path))
    if not found:
        return None
    steps, path = max(found)
    return path, steps


def train(
    algo: str = "ppo",
    *,
    config: str | Path | None = None,
    run_dir: str | Path = "runs/ppo",
    seed: int = 0,
    total_timesteps: int | None = None,
    checkpoint_freq: int = 100_000,
    resume: bool = False,
    max_minutes: float | None = None,
    env_overrides: dict[str, Any] | None = None,
    progress: bool = True,
    verbose: int = 0,
    torch_threads: int | None = 1,
) -> Path:
    """Train ``algo`` on the native vector env and return the path of ``model.zip``.

    Args:
        algo: one of :data:`ALGOS`.
        config: rl_zoo3-format YAML (default ``agents/configs/<algo>.yml``).
        run_dir: where the model, checkpoints, monitor CSV and TensorBoard logs go.
        seed: seeds the env's generator and the learner.
        total_timesteps: env steps (default: the config's ``n_timesteps``); with ``resume``, the total including the
            steps already done.
        checkpoint_freq: env steps between checkpoints.
        resume: continue from the newest checkpoint of ``run_dir``; raises :class:`NoCheckpointError` (a
            ``FileNotFoundError``) before any work when ``run_dir/checkpoints`` has none.
        max_minutes: stop after this many minutes of wall time (the model trained so far is saved).
        env_overrides: env keyword arguments on top of the config's ``env_kwargs`` (e.g. ``fading``).
        progress: a tqdm progress bar on stderr: env steps out of ``total_timesteps`` or, with ``max_minutes``,
            seconds out of the time budget with the env steps as a postfix. False: silent.
        verbose: SB3's verbosity (0: none, 1: training info).
        torch_threads: ``torch.set_num_threads(torch_threads)`` before the model is built (>= 1; default 1). This is
            process-wide and is not restored afterwards. None leaves torch's setting as it is. run.json records the
            thread count in use as ``torch_threads``.
    """
    hp = load_hyperparams(algo, config)
    env_kwargs = {**(hp.get("env_kwargs") or {}), **(env_overrides or {})}
    total = int(total_timesteps if total_timesteps is not None else hp.get("n_timesteps", 1_000_000))
    if total < 1 or checkpoint_freq < 1:
        raise ValueError(f"total_timesteps and checkpoint_freq must be >= 1; got {total}, {checkpoint_freq}")
    if torch_threads is not None and (not isinstance(torch_threads, (int, np.integer))
                                      or isinstance(torch_threads, bool) or torch_threads < 1):
        raise ValueError(f"torch_threads must be an integer >= 1 or None; got {torch_threads!r}")
    n_envs = int(hp.get("n_envs", 8))
    run = Path(run_dir)
    previous = latest_checkpoint(run) if resume else None
    if resume and previous is None:
        raise NoCheckpointError(f"no checkpoint to resume in {run / 'checkpoints'}; "
                                "run without --resume to start a new run")
    run.mkdir(parents=True, exist_ok=True)
    if torch_threads is not None:
        import torch

        torch.set_num_threads(int(torch_threads))
    done_steps = previous[1] if previous else 0
    monitor = run / ("monitor.csv" if not previous else f"monitor.resumed-{done_steps}.csv")
    venv = make_vec_env(n_envs, env_kwargs, seed + done_steps, monitor)
    callbacks = [CheckpointCallback(max(checkpoint_freq // n_envs, 1), str(run / "checkpoints"), "model",
                                    save_replay_buffer=algo in ("sac", "td3"))]
    if algo == "ppo_lagrangian":
        if env_kwargs.get("reward_mode") != "cmdp":
            raise ValueError("ppo_lagrangian trains on the CMDP formulation: env_kwargs.reward_mode must be 'cmdp'")
        venv = LagrangianVecEnv(venv, initial=float(hp.get("lagrange_init", 1.0)))
        if previous and (run / "lagrange.json").is_file():
            venv.multiplier = float(json.loads((run / "lagrange.json").read_text())["multiplier"])
        callbacks.append(DualAscentCallback(venv, lr=float(hp.get("lagrange_lr", 0.5)), path=run / "lagrange.json"))
    if progress:  # before the time limit: its clock starts first, so it reads the whole budget when the limit stops
        callbacks.append(_ProgressBar(total, None if max_minutes is None else 60.0 * max_minutes, desc=algo))
    if max_minutes is not None:
        callbacks.append(_WallClockLimit(60.0 * max_minutes))
    cls = ALGO_CLASSES[algo]
    tb = str(run / "tb") if _has_tensorboard() else None
    kwargs = {k: v for k, v in hp.items() if k not in ZOO_KEYS}
    if hp.get("noise_type") == "normal":  # rl_zoo3's action-noise keys
        from stable_baselines3.common.noise import NormalActionNoise

        kwargs["action_noise"] = NormalActionNoise(np.zeros(1), float(hp.get("noise_std", 0.1)) * np.ones(1))
    if previous:
        model = cls.load(previous[0], env=venv, tensorboard_log=tb)
        buffer = previous[0].with_name(f"model_replay_buffer_{done_steps}_steps.pkl")
        if hasattr(model, "load_replay_buffer") and buffer.is_file():
            model.load_replay_buffer(buffer)
    else:
        model = cls(hp.get("policy", "MlpPolicy"), venv, seed=seed, tensorboard_log=tb, verbose=verbose, **kwargs)
    write_json(run / "run.json", {
        "algo": algo, "env_id": ENV_ID, "config": str(config or CONFIG_DIR / f"{algo}.yml"), "seed": seed,
        "total_timesteps": total,
        "env_kwargs": {**env_kwargs, **action_semantics(venv.get_attr("scenario")[0], env_kwargs)},
        "hyperparams": {k: v for k, v in hp.items() if not callable(v)}, "versions": _versions(),
        "resumed_from": done_steps, "torch_threads": _torch_threads(),
    })
    start = time.perf_counter()
    model.learn(total_timesteps=max(total - done_steps, 0), callback=CallbackList(callbacks),
                reset_num_timesteps=not previous, tb_log_name=algo)
    final = run / "model.zip"
    tmp = run / "model.tmp.zip"
    model.save(tmp)
    os.replace(tmp, final)
    meta = json.loads((run / "run.json").read_text())
    meta.update(trained_timesteps=int(model.num_timesteps), wall_s=time.perf_counter() - start)
    write_json(run / "run.json", meta)
    venv.close()
    return final


class _WallClockLimit(BaseCallback):
    """Stops ``learn`` once ``seconds`` of wall time have passed since training started."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def _on_training_start(self) -> None:
        self.deadline = time.perf_counter() + self.seconds

    def _on_step(self) -> bool:
        return time.perf_counter() < self.deadline


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


def _versions() -> dict[str, str]:
    import gymnasium
    import stable_baselines3
    import torch

    return {"otagym": __version__, "stable_baselines3": stable_baselines3.__version__, "torch": torch.__version__,
            "gymnasium": gymnasium.__version__, "numpy": np.__version__}
