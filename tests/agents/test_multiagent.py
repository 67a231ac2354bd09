"""Shared-parameter IPPO on a device task: a short run writes its model and record, is kept on a rerun, and plays
as a device policy."""

import json

import numpy as np
import pytest

pytest.importorskip("supersuit")
pytest.importorskip("stable_baselines3")

from agents.multiagent import IPPOSettings, device_vec_env, load_shared_policy, train_ippo  # noqa: E402

TASK = "otagym/CDPB-Devices-v0"


def test_the_vec_env_has_a_slot_per_device_and_copy():
    venv = device_vec_env(TASK, 2, seed=3)
    assert venv.num_envs == 20 and venv.observation_space.shape == (5,)


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
