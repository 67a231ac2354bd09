"""What a run writes and reads back: its checkpoints (:func:`checkpoint_files`, :class:`RunState`), its record
``run.json`` (with the history of its segments), its monitor file cut back to a checkpoint, its final model and the
package versions it records. Every file is written atomically."""

from __future__ import annotations

import csv
import json
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import VecMonitor

from agents.lagrangian import LagrangianVecEnv
from agents.train.errors import RunMismatchError
from otagym import __version__
from otagym._io import atomic_write, write_json
from otagym.wrappers.sb3 import OTAPrivacySB3VecEnv

#: Algorithms whose checkpoint is complete only with its replay buffer.
OFF_POLICY = ("sac", "td3")


def checkpoint_files(run_dir: str | Path, steps: int) -> dict[str, Path]:
    """The files of the checkpoint at ``steps`` env steps: ``model`` (SB3 zip), ``replay_buffer`` (off-policy
    algorithms), ``lagrange`` (PPO-Lagrangian's multipliers) and ``state`` (:class:`RunState`: the env and random
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
        algo = read_run_json(run).get("algo")
    for steps, path in reversed(checkpoint_models(run)):
        files = checkpoint_files(run, steps)
        missing = [part for part in _needed_parts(algo) if not files[part].is_file()]
        if not missing and zipfile.is_zipfile(files["model"]):
            return path, steps
        warnings.warn(f"skipping incomplete checkpoint {path} ({', '.join(missing) or 'model'} "
                      f"{'missing' if missing else 'unreadable'})", stacklevel=2)
    return None


def read_run_json(run: Path) -> dict[str, Any]:
    """The run's record, or :class:`~agents.train.RunMismatchError` when it cannot be read as one."""
    try:
        meta = json.loads((run / "run.json").read_text())
    except (OSError, ValueError) as err:
        raise RunMismatchError(f"{run / 'run.json'} cannot be read ({err}); the run cannot be resumed: replace it "
                               "with --overwrite (overwrite=True)") from None
    if not isinstance(meta, dict):
        raise RunMismatchError(f"{run / 'run.json'} is not a run record (a JSON object); the run cannot be resumed: "
                               "replace it with --overwrite (overwrite=True)")
    return meta


def comparable(value: Any) -> str:
    """``value`` as JSON with sorted keys (what is not JSON by its ``str``), as run records compare and store it."""
    return json.dumps(value, sort_keys=True, default=str)


def kept_segments(segments: list[dict[str, Any]], steps: int) -> list[dict[str, Any]]:
    """The segments of a run's history up to the checkpoint at ``steps`` that it resumes from: later ones are
    dropped, and the last kept one ends at the checkpoint (its wall time then covers what was discarded too)."""
    kept = [dict(s) for s in segments if s.get("start_steps", 0) < steps]
    if kept and (kept[-1].get("end_steps") or 0) > steps:
        kept[-1]["end_steps"] = steps
    return kept


class RunState:
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


def truncate_monitor(path: Path, steps: int) -> float | None:
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


def save_final(model: BaseAlgorithm, run: Path) -> Path:
    """The trained model as the run's ``model.zip`` (written atomically); its path."""
    final = run / "model.zip"
    with atomic_write(final, "wb") as fh:
        model.save(fh)
    return final


def record_end(meta: dict[str, Any], run: Path, trained_timesteps: int) -> None:
    """The run's record as it ends: ``trained_timesteps`` and ``wall_s`` (all segments), written to ``run.json``."""
    meta.update(trained_timesteps=int(trained_timesteps),
                wall_s=float(sum(s["wall_s"] or 0.0 for s in meta["segments"])))
    write_json(run / "run.json", meta)


def package_versions() -> dict[str, str]:
    """The versions of the packages a run depends on, recorded in its ``run.json``."""
    import gymnasium
    import sb3_contrib
    import stable_baselines3
    import torch

    return {"otagym": __version__, "stable_baselines3": stable_baselines3.__version__,
            "sb3_contrib": sb3_contrib.__version__, "torch": torch.__version__, "gymnasium": gymnasium.__version__,
            "numpy": np.__version__}
