"""The env a run trains on: the native vector env under the run's monitor (:class:`RunMonitor`, which stamps each
finished episode with the run's step count, :class:`StepStamp`) and, for PPO-Lagrangian, the Lagrangian reward."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from stable_baselines3.common.monitor import ResultsWriter
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecMonitor

from agents.lagrangian import LagrangianVecEnv, nu_bin_edges
from agents.train.save import RunState, checkpoint_files, truncate_monitor
from otagym import ENV_ID
from otagym.wrappers.sb3 import OTAPrivacySB3VecEnv

#: Per-episode info keys that the monitor writes beside return and length, those the env reports (receive scaling:
#: all; CDPB and anonymous OTA: ``episode_rdp`` and, where they report a cost, the last two): the episode's cost
#: and its limit beside its return, as Safety-Gymnasium's loggers have them.
MONITOR_KEYS = ("nu", "episode_leakage", "episode_equal_alloc_leakage", "episode_rdp", "episode_cost", "cost_limit")


class StepStamp(VecEnvWrapper):
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


class RunMonitor(VecMonitor):
    """SB3's ``VecMonitor`` writing the run's one ``monitor.csv`` (readable by ``load_results``), with the run's step
    count at each episode's end. Resumed from a checkpoint at ``resumed_steps``, it first drops the episodes that
    ended after the checkpoint (their training was discarded) and appends to the same file and clock."""

    def __init__(self, venv: OTAPrivacySB3VecEnv, path: Path, resumed_steps: int = 0, env_id: str = ENV_ID) -> None:
        reported = venv.info_keys + venv.episode_keys
        keys = tuple(k for k in MONITOR_KEYS if k in reported) + ("total_timesteps",)
        super().__init__(StepStamp(venv, resumed_steps), info_keywords=keys)
        kept = truncate_monitor(path, resumed_steps) if resumed_steps else None
        if kept is not None:
            self.t_start = kept
        self.results_writer = ResultsWriter(str(path), header={"t_start": self.t_start, "env_id": env_id},
                                            extra_keys=self.info_keywords, override_existing=kept is None)


class TrainingEnv(NamedTuple):
    """The env a run's learner steps (:func:`training_env`) and the run's state over it."""

    #: What the learner steps: the monitor, under the Lagrangian reward for PPO-Lagrangian.
    venv: VecEnv
    #: PPO-Lagrangian's wrapper (its multiplier), or None.
    lagrangian: LagrangianVecEnv | None
    #: What a checkpoint holds beyond SB3's zip.
    state: RunState


def training_env(native: OTAPrivacySB3VecEnv, run: Path, algo: str, hp: dict[str, Any], env_kwargs: dict[str, Any],
                 done_steps: int, env_id: str, resumed: bool) -> TrainingEnv:
    """The monitored env of a run resumed at ``done_steps`` (0: fresh), with PPO-Lagrangian's multiplier (from the
    checkpoint when ``resumed``)."""
    venv = monitor = RunMonitor(native, run / "monitor.csv", done_steps, env_id=env_id)
    lagrangian = None
    if algo == "ppo_lagrangian":
        edges = nu_bin_edges(env_kwargs.get("nu_range"), hp.get("lagrange_nu_bins", 1))
        venv = lagrangian = LagrangianVecEnv(venv, initial=float(hp.get("lagrange_init", 1.0)), nu_edges=edges)
        if resumed:
            saved = json.loads(checkpoint_files(run, done_steps)["lagrange"].read_text())
            venv.load_state(saved)
    return TrainingEnv(venv, lagrangian, RunState(native, monitor, lagrangian))
