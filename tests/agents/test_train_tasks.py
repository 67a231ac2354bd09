"""``otagym train --task``: every registered task trains (its env arguments exactly, the config's entry of the task
or the default one), PPO-Lagrangian on the constrained task of every scheme, and the SB3 adapter on every scheme."""

import json

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")
torch = pytest.importorskip("torch")

from agents.train import SettingsError, train  # noqa: E402
from agents.train.setup import checked_settings  # noqa: E402
from otagym.cli.commands import main  # noqa: E402
from otagym import ENV_ID  # noqa: E402
from otagym.env import OTAPrivacyVectorEnv  # noqa: E402
from otagym.wrappers.sb3 import OTAPrivacySB3VecEnv  # noqa: E402
from otagym.tasks import BENCHMARK, TASKS  # noqa: E402

#: One task of each scheme that has one (the first registered), read from the registry.
SCHEME_TASKS = {t.scheme: t.id for t in reversed(list(TASKS.values()))}
#: The constrained task of each scheme that has one.
CONSTRAINED_TASKS = {t.scheme: t.id for t in reversed(list(TASKS.values())) if t.constrained}

SMALL = ("  n_envs: 4\n  n_steps: 32\n  batch_size: 64\n  n_epochs: 1\n  gamma: 1.0\n"
         "  policy_kwargs: \"dict(net_arch=[16])\"\n  lagrange_nu_bins: 4\n")


@pytest.fixture
def small(tmp_path):
    """A PPO / PPO-Lagrangian config with only the default entry: 4 envs x 32 steps per rollout."""
    cfg = tmp_path / "small.yml"
    cfg.write_text(f"{ENV_ID}:\n{SMALL}  env_kwargs:\n    nu_range: [0.01, 0.16]\n    dp_orders: null\n")
    return cfg


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_every_task_builds_its_training_settings(task_id):
    """Every task's env (its kwargs exactly) builds for PPO, and for PPO-Lagrangian where it is constrained (else
    the Lagrangian is refused naming --task)."""
    hp, env_kwargs, native, _, entry = checked_settings("ppo", None, None, task_id)
    native.close()
    assert env_kwargs == dict(TASKS[task_id].kwargs) and hp["env_kwargs"] == env_kwargs
    assert entry == task_id  # the packaged ppo.yml has an entry per task
    if TASKS[task_id].constrained:
        *_, native, _, entry = checked_settings("ppo_lagrangian", None, None, task_id)
        native.close()
        assert entry == (task_id if task_id in BENCHMARK else ENV_ID) and "cost" in native.info_keys
    else:
        with pytest.raises(SettingsError, match="ppo_lagrangian trains on the CMDP formulation") as err:
            checked_settings("ppo_lagrangian", None, None, task_id)
        assert err.value.argument == "task"


@pytest.mark.parametrize("scheme", sorted(SCHEME_TASKS))
def test_train_task_runs_on_every_scheme_and_names_the_task(tmp_path, small, scheme, one_torch_thread, capsys):
    task = TASKS[SCHEME_TASKS[scheme]]
    run = tmp_path / "run"
    assert main(["train", "--config", str(small), "--task", task.id, "--steps", "256", "--run-dir", str(run),
                 "--no-progress"]) == 0
    meta = json.loads((run / "run.json").read_text())
    assert meta["task"] == meta["env_id"] == task.id
    assert meta["config_entry"] == ENV_ID  # the small config has no entry of the task: its default one
    assert {k: meta["env_kwargs"][k] for k in task.kwargs} == json.loads(json.dumps(dict(task.kwargs)))
    assert "nu_range" not in meta["env_kwargs"] or task.scheme == "receive_scaling"  # the config's replaced
    assert meta["trained_timesteps"] == 256 and meta["hyperparams"]["n_envs"] == 4
    out = capsys.readouterr().out
    assert f"otagym evaluate {task.id} {run / 'model.zip'}" in out
    assert ("otagym compare --policies OnlineOptimal BestConstant EqualAlloc" in out) == (scheme == "receive_scaling")


@pytest.mark.slow
@pytest.mark.parametrize("scheme", sorted(CONSTRAINED_TASKS))
def test_lagrangian_trains_on_the_constrained_task_of_every_scheme(tmp_path, small, scheme, one_torch_thread):
    """One multiplier where the task has no nu (CDPB, anonymous OTA), one per log-nu bin where it has one; the
    config's entry of the task is used when it has one."""
    task = TASKS[CONSTRAINED_TASKS[scheme]]
    small.write_text(small.read_text() + f"{task.id}:\n{SMALL.replace('n_envs: 4', 'n_envs: 2')}")
    run = tmp_path / "lag"
    train("ppo_lagrangian", config=small, task=task.id, run_dir=run, total_timesteps=2 * task.max_episode_steps + 64,
          progress=False)
    meta = json.loads((run / "run.json").read_text())
    assert meta["task"] == task.id and meta["config_entry"] == task.id and meta["hyperparams"]["n_envs"] == 2
    state = json.loads((run / "lagrange.json").read_text())  # an update after the first episodes ended
    assert len(state["multipliers"]) == (4 if "nu_range" in task.kwargs else 1)
    assert state["multipliers"] != [1.0] * len(state["multipliers"])  # dual ascent moved them


def test_train_refuses_env_overrides_with_a_task(tmp_path, small, capsys):
    with pytest.raises(SettingsError, match="fixes every env argument") as err:
        train("ppo", config=small, task="otagym/CDPB-v1", env_overrides={"num_rounds": 5}, run_dir=tmp_path / "r")
    assert err.value.argument == "env_overrides" and not (tmp_path / "r").exists()
    with pytest.raises(SystemExit) as exc:
        main(["train", "--task", "otagym/CDPB-v1", "--env", "num_rounds=5", "--run-dir", str(tmp_path / "r")])
    assert exc.value.code == 2 and "argument --env: not allowed with argument --task" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["cdpb", "anonymous"])
def test_sb3_adapter_on_other_schemes_reports_what_the_native_env_does(scheme):
    kwargs = dict(TASKS[SCHEME_TASKS[scheme]].kwargs)
    rounds = 100 if scheme == "cdpb" else 1000
    sb3 = OTAPrivacySB3VecEnv(3, **kwargs)
    native = OTAPrivacyVectorEnv(3, **kwargs, autoreset_mode="SameStep")
    sb3.seed(7)
    obs = sb3.reset()
    native_obs, _ = native.reset(seed=7)
    np.testing.assert_array_equal(obs, native_obs)
    actions = np.random.default_rng(0).uniform(-1, 1, (rounds, 3, 1))
    action_key = "rho" if scheme == "cdpb" else "sigma"
    assert sb3.info_keys == (action_key, "cost") and sb3.episode_keys == ("episode_rdp", "episode_cost", "cost_limit")
    total = np.zeros(3)
    for a in actions:
        obs, reward, dones, infos = sb3.step(a)
        native_obs, native_reward, terminated, _, info = native.step(a)
        np.testing.assert_array_equal(obs, native_obs)
        np.testing.assert_allclose(reward, native_reward.astype(np.float32))
        assert [i[action_key] for i in infos] == info[action_key].tolist()
        assert [i["cost"] for i in infos] == info["cost"].tolist()
        total += info["cost"]
    assert dones.all() and terminated.all()
    final = info["final_info"]
    for i in range(3):
        np.testing.assert_array_equal(infos[i]["terminal_observation"], info["final_obs"][i])
        assert infos[i]["episode_rdp"] == pytest.approx(float(np.mean(final["rdp_cumulative"][i])), rel=1e-12)
        assert infos[i]["episode_cost"] == pytest.approx(total[i], rel=1e-12) and infos[i]["cost_limit"] == rounds
    assert 0.1 < total.mean() / rounds < 10.0  # a random policy spends about the limit (tasks: 1.0 and 1.5)
