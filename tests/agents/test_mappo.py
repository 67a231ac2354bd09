"""MAPPO (TorchRL's recipe: a shared actor, a centralised critic) on a device task: a short run writes its actor and
record, is kept on a rerun, plays as a device policy (the same actions batched or one realisation at a time), and
``otagym train`` / ``otagym evaluate`` drive it."""

import json

import numpy as np
import pytest

pytest.importorskip("torchrl")
pytest.importorskip("pettingzoo")

from agents.mappo import MAPPOSettings, load_mappo_policy, train_mappo  # noqa: E402
from agents.teams import load_team  # noqa: E402
from benchmarks.zoo import ZOO  # noqa: E402
from otagym.cli.commands import main  # noqa: E402
from otagym.tasks import DEVICE_TASKS  # noqa: E402

TASK = "otagym/CDPB-Devices-v0"


def test_a_short_run_is_saved_kept_and_played(tmp_path, one_torch_thread):
    settings = MAPPOSettings(total_timesteps=8_000, num_envs=4)
    path = train_mappo(TASK, 90_000, tmp_path / "run", settings)
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["task"] == TASK and record["seed"] == 90_000 and record["env_steps"] == 8_000
    stamp = path.stat().st_mtime_ns
    assert train_mappo(TASK, 90_000, tmp_path / "run", settings) == path and path.stat().st_mtime_ns == stamp
    policy = load_mappo_policy(path)
    obs = np.random.default_rng(0).uniform(-1, 1, (3, 10, 5)).astype(np.float32)
    actions = policy.act(obs)
    assert actions.shape == (3, 10, 1) and np.all(np.abs(actions) <= 1) and np.ptp(actions) > 0
    np.testing.assert_allclose(np.concatenate([policy.act(obs[i:i + 1]) for i in range(3)]), actions, rtol=1e-6,
                               atol=1e-6)  # float32 rounding of a batch against one row
    assert isinstance(load_team(path), type(policy))


@pytest.mark.slow
def test_otagym_train_and_evaluate_a_mappo_team(tmp_path, one_torch_thread, capsys):
    run = tmp_path / "mappo"
    assert main(["train", "--algo", "mappo", "--task", TASK, "--steps", "6000", "--run-dir", str(run)]) == 0
    assert f"saved {run / 'model.pt'}" in capsys.readouterr().out
    out = tmp_path / "r.json"
    assert main(["evaluate", TASK, str(run / "model.pt"), "--seeds", "4", "--reps", "20", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["name"] == "mappo" and np.isfinite(result["scores"]["20.0"]).all()
    assert result["env_steps"] == 8_000  # whole batches: 4 episodes of 100 rounds of 10 devices
    with pytest.raises(SystemExit) as stop:
        main(["train", "--algo", "mappo", "--task", TASK, "--steps", "6000", "--run-dir", str(run)])
    assert stop.value.code == 2 and "--overwrite" in capsys.readouterr().err


SHIPPED = sorted(p for task in DEVICE_TASKS for p in (ZOO / task.split("/")[1]).glob("*/model.*"))


@pytest.mark.parametrize("model_path", SHIPPED, ids=lambda p: "/".join(p.parts[-3:-1]))
def test_the_zoos_teams_play_on_their_task(model_path):
    """agents/zoo/<device task>/<algo>/: the team loads by its file, its run.json names the task and the selection,
    and it acts for every device within the action range."""
    from otagym.multiagent import device_side

    record = json.loads((model_path.parent / "run.json").read_text())
    assert record["task"] == f"otagym/{model_path.parent.parent.name}" and "selected" in record
    side = device_side(record["task"], 2)
    observations = np.zeros((2, side.num_devices) + side.observation_space().shape, dtype=np.float32)
    actions = load_team(model_path).act(observations)
    assert actions.shape == (2, side.num_devices, 1) and np.all(np.abs(actions) <= 1)
