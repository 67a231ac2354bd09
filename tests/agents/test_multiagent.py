"""Shared-parameter IPPO on a device task: a short run writes its model and record, is kept on a rerun, and plays
as a device policy."""

import dataclasses
import json

import numpy as np
import pytest

pytest.importorskip("supersuit")
pytest.importorskip("stable_baselines3")

from agents.multiagent import IPPOSettings, device_vec_env, load_shared_policy, train_ippo  # noqa: E402
from otagym.tasks import DEVICE_TASKS  # noqa: E402

TASK = "otagym/CDPB-Devices-v0"


def test_the_vec_env_has_a_slot_per_device_and_copy():
    venv = device_vec_env(TASK, 2, seed=3)
    assert venv.num_envs == 20 and venv.observation_space.shape == (5,)
    venv = device_vec_env("otagym/CDPB-Devices50-v0", 1, seed=3)  # its devices see their channel and budget
    assert venv.num_envs == 50 and venv.observation_space.shape == (7,)


def test_otagym_train_trains_for_the_tasks_steps_unless_told(monkeypatch, tmp_path):
    """Without ``--steps`` a task that needs more than the algorithm's default trains for its ``train_steps``."""
    from agents import teams
    from otagym.cli.commands import main

    seen = []

    class Recorder:
        model_file = "model.zip"

        def settings(self):
            return IPPOSettings()

        def train(self, task, seed, run_dir, settings, force):
            seen.append((task, settings.total_timesteps))
            return run_dir / "model.zip"

    monkeypatch.setitem(teams.DEVICE_TRAINERS, "ippo", Recorder)
    large = "otagym/CDPB-Devices50-v0"
    for task, argv, steps in ((large, [], 6_000_000), (large, ["--steps", "7"], 7), (TASK, [], 4_500_000)):
        assert main(["train", "--algo", "ippo", "--task", task, "--run-dir", str(tmp_path / "r"), *argv]) == 0
        assert seen[-1] == (task, steps)
    monkeypatch.setitem(DEVICE_TASKS, TASK, dataclasses.replace(DEVICE_TASKS[TASK], train_steps=None))
    assert main(["train", "--algo", "ippo", "--task", TASK, "--run-dir", str(tmp_path / "r")]) == 0
    assert seen[-1] == (TASK, IPPOSettings().total_timesteps)  # a task that sets none: the algorithm's default


@pytest.mark.slow
def test_a_short_run_is_saved_kept_and_played(tmp_path):
    settings = IPPOSettings(total_timesteps=2560, copies=1, n_steps=128, batch_size=640, n_epochs=1)
    path = train_ippo(TASK, 90_000, tmp_path / "run", settings)
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["task"] == TASK and record["seed"] == 90_000 and record["settings"]["total_timesteps"] == 2560
    stamp = path.stat().st_mtime_ns
    assert train_ippo(TASK, 90_000, tmp_path / "run", settings) == path and path.stat().st_mtime_ns == stamp
    actions = load_shared_policy(path).act(np.zeros((3, 10, 5), dtype=np.float32))
    assert actions.shape == (3, 10, 1) and np.all(np.abs(actions) <= 1)


def test_otagym_train_refuses_a_task_its_algorithm_does_not_train_on(capsys):
    """``--algo ippo`` needs a devices-as-agents task and the others a benchmark task, each named with the allowed
    ones; an option the device trainer does not take is named too."""
    from otagym.cli.commands import main

    for argv, said in ((["--algo", "ippo"], "devices-as-agents task, one of otagym/CDPB-Devices-v0, "),
                       (["--algo", "ippo", "--task", "otagym/ReceiveScalingCMDP-v1"], "devices-as-agents task"),
                       (["--algo", "ppo", "--task", TASK], "a benchmark task, one of otagym/AnonymousOTA-v0"),
                       (["--algo", "ippo", "--task", TASK, "--resume"], "argument --resume: not with --algo ippo")):
        with pytest.raises(SystemExit) as stop:
            main(["train", *argv, "--run-dir", "unused"])
        assert stop.value.code == 2 and said in capsys.readouterr().err


@pytest.mark.slow
def test_otagym_train_trains_a_team_on_a_device_task(tmp_path):
    """``otagym train --algo ippo --task otagym/CDPB-Devices-v0`` writes the shared model and its record (trained on
    the task's training realisations from training_seeds[--seed]), says where it is, and refuses to replace the run
    without --overwrite."""
    import subprocess
    import sys

    from otagym.multiagent import DEVICE_TASKS

    cli = [sys.executable, "-m", "otagym.cli", "train", "--algo", "ippo", "--task", TASK, "--steps", "5120", "--seed",
           "2", "--run-dir", str(tmp_path / "run")]
    done = subprocess.run(cli, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["task"] == TASK and record["seed"] == DEVICE_TASKS[TASK].training_seeds[0] + 2
    assert record["settings"]["total_timesteps"] == 5120 and f"saved {tmp_path / 'run' / 'model.zip'}" in done.stdout
    again = subprocess.run(cli, capture_output=True, text=True, check=False)
    assert again.returncode == 2 and "--overwrite" in again.stderr
