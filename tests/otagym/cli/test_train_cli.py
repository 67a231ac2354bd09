"""``otagym train`` / :func:`agents.train.train`: torch's thread count, a progress bar whose total is what bounds the
run (env steps, or the ``--minutes`` budget in seconds), and ``--resume`` refusing a run folder with no checkpoint."""

import json
import re

import pytest

pytest.importorskip("stable_baselines3")
torch = pytest.importorskip("torch")

from agents.train import NoCheckpointError, train  # noqa: E402
from agents.train.callbacks import ProgressBar  # noqa: E402
from otagym.cli.commands import main  # noqa: E402

SHORT = {"num_rounds": 25}


@pytest.fixture
def small_ppo(tmp_path):
    """A PPO config that trains 512 steps in about a second (4 envs x 64 steps per rollout)."""
    cfg = tmp_path / "small.yml"
    cfg.write_text("otagym/OTAPrivacy-v0:\n  n_envs: 4\n  n_steps: 64\n  batch_size: 128\n  n_epochs: 1\n"
                   "  gamma: 1.0\n  policy_kwargs: \"dict(net_arch=[16])\"\n  env_kwargs:\n    dp_orders: null\n")
    return cfg


@pytest.fixture
def torch_threads():
    """torch's thread count before the test, restored after it (train sets it process-wide)."""
    before = torch.get_num_threads()
    yield before
    torch.set_num_threads(before)


def test_resume_without_a_checkpoint_is_refused_before_any_work(tmp_path, small_ppo, capsys):
    run = tmp_path / "fresh"
    with pytest.raises(FileNotFoundError,
                       match="no complete checkpoint to resume in .*checkpoints; run without --resume"):
        train("ppo", config=small_ppo, run_dir=run, total_timesteps=512, env_overrides=SHORT, progress=False,
              resume=True)
    assert not run.exists()
    (run / "checkpoints").mkdir(parents=True)  # an empty checkpoints/ (e.g. a run killed before its first one)
    with pytest.raises(NoCheckpointError, match=re.escape(str(run / "checkpoints"))):
        train("ppo", config=small_ppo, run_dir=run, total_timesteps=512, env_overrides=SHORT, progress=False,
              resume=True)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["train", "--config", str(small_ppo), "--run-dir", str(run), "--steps", "512", "--resume",
              "--no-progress", "--env", "num_rounds=25"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err == (f"otagym train: error: no complete checkpoint to resume in {run / 'checkpoints'}; "
                   "run without --resume to start a new run\n")
    assert sorted(p.name for p in run.iterdir()) == ["checkpoints"]


def test_resume_alone_continues_the_run_with_its_own_steps_seed_config_and_env(tmp_path, small_ppo, capsys,
                                                                               torch_threads):
    """``otagym train --run-dir R --resume``, nothing else: the run's steps, seed, config and env arguments are its
    run.json's (the config's 6M steps were trained instead), and a run resumed from its last checkpoint ends with the
    parameters it ended with."""
    from stable_baselines3 import PPO

    run = tmp_path / "run"
    assert main(["train", "--config", str(small_ppo), "--run-dir", str(run), "--steps", "1024", "--seed", "3",
                 "--checkpoint-freq", "256", "--no-progress", "--env", "num_rounds=25", "--torch-threads", "1"]) == 0
    first = PPO.load(run / "model.zip").policy.state_dict()
    assert main(["train", "--run-dir", str(run), "--resume", "--no-progress", "--torch-threads", "1"]) == 0
    for algo in ("budget_ppo", "ippo"):  # they keep no checkpoints: refused for --resume, not for the run's --config
        with pytest.raises(SystemExit) as exc:
            main(["train", "--algo", algo, "--task", "otagym/ReceiveScalingCMDP-v1" if algo == "budget_ppo" else
                  "otagym/CDPB-Devices-v0", "--run-dir", str(run), "--resume"])
        assert exc.value.code == 2 and "argument --resume: not with --algo" in capsys.readouterr().err
    meta = json.loads((run / "run.json").read_text())
    assert (meta["total_timesteps"], meta["seed"], meta["trained_timesteps"]) == (1024, 3, 1024)
    assert meta["segments"][-1]["start_steps"] == 768  # the last checkpoint's
    again = PPO.load(run / "model.zip").policy.state_dict()
    assert all(torch.equal(first[k], again[k]) for k in first)


def test_resume_without_algo_is_the_runs_algorithm(tmp_path):
    from otagym.cli.commands import build_parser

    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"algo": "trpo"}))
    for argv, algo in ((["--resume"], "trpo"), ([], "ppo"), (["--resume", "--algo", "sac"], "sac")):
        args = build_parser(("train",)).parse_args(["train", "--run-dir", str(run), *argv])
        args.check(args.command_parser, args)
        assert args.algo == algo, argv
    (run / "run.json").write_text("[]")  # not a record: the default
    args = build_parser(("train",)).parse_args(["train", "--run-dir", str(run), "--resume"])
    args.check(args.command_parser, args)
    assert args.algo == "ppo"


def test_a_device_team_refuses_a_folder_that_holds_another_algorithms_run(tmp_path, capsys):
    run = tmp_path / "ppo"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"algo": "ppo"}))
    with pytest.raises(SystemExit) as exc:
        main(["train", "--algo", "mappo", "--task", "otagym/CDPB-Devices-v0", "--steps", "100", "--run-dir", str(run)])
    assert exc.value.code == 2
    assert capsys.readouterr().err == (f"otagym train: error: {run} holds a run (run.json): replace it with "
                                       "--overwrite, or choose another --run-dir\n")
    assert json.loads((run / "run.json").read_text()) == {"algo": "ppo"}


def test_an_unwritable_run_dir_is_refused_before_any_training(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    for algo in ("ppo", "ippo", "budget_apg"):
        with pytest.raises(SystemExit) as exc:
            main(["train", "--algo", algo, "--run-dir", str(tmp_path / "afile")])
        assert exc.value.code == 2 and "is a file, not a folder" in capsys.readouterr().err


def test_torch_threads_are_set_and_recorded(tmp_path, small_ppo, torch_threads):
    torch.set_num_threads(2)
    train("ppo", config=small_ppo, run_dir=tmp_path / "one", total_timesteps=512, env_overrides=SHORT,
          progress=False, torch_threads=1)
    assert torch.get_num_threads() == 1
    assert json.loads((tmp_path / "one" / "run.json").read_text())["torch_threads"] == 1
    torch.set_num_threads(2)  # --torch-threads 0: torch's setting is left alone, and recorded as it is
    assert main(["train", "--config", str(small_ppo), "--run-dir", str(tmp_path / "default"), "--steps", "512",
                 "--no-progress", "--env", "num_rounds=25", "--torch-threads", "0"]) == 0
    assert torch.get_num_threads() == 2
    assert json.loads((tmp_path / "default" / "run.json").read_text())["torch_threads"] == 2
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="torch_threads"):
            train("ppo", config=small_ppo, run_dir=tmp_path / "bad", total_timesteps=512, torch_threads=bad)
    assert not (tmp_path / "bad").exists()


def test_train_takes_its_options_as_a_struct_or_as_keywords_and_names_itself_in_errors(tmp_path, small_ppo):
    from agents.train import TrainOptions

    with pytest.raises(TypeError, match=r"train\(\) got an unexpected keyword argument 'total_steps'"):
        train("ppo", config=small_ppo, total_steps=512)
    options = TrainOptions(config=small_ppo, run_dir=tmp_path / "run", total_timesteps=64, progress=False)
    with pytest.raises(TypeError, match=r"give train\(\) a TrainOptions or its keyword arguments, not both"):
        train("ppo", options, seed=1)
    with pytest.raises(TypeError, match="options must be a TrainOptions; got str"):
        train("ppo", "config.yml")
    with pytest.raises(ValueError, match="resume and overwrite exclude each other"):
        TrainOptions(resume=True, overwrite=True)
    assert not (tmp_path / "run").exists()


def test_cli_refuses_a_negative_thread_count(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train", "--torch-threads", "-1"])
    assert exc.value.code == 2 and "--torch-threads: must be an integer in [0, 1024]" in capsys.readouterr().err


def test_progress_bar_total_is_the_steps_asked_or_the_time_budget():
    steps = ProgressBar(6_000_000)
    assert steps.total == 6_000_000 and steps.unit == "step"
    timed = ProgressBar(6_000_000, seconds=180.0)
    assert timed.total == 180.0 and timed.unit == "s" and timed.total_steps == 6_000_000


def test_progress_bar_counts_steps_without_minutes(tmp_path, small_ppo, torch_threads, capsys):
    train("ppo", config=small_ppo, run_dir=tmp_path / "run", total_timesteps=512, env_overrides=SHORT)
    err = capsys.readouterr().err
    assert "512/512" in err and " s [" not in err


@pytest.mark.slow
def test_progress_bar_counts_seconds_with_minutes_and_shows_the_steps(tmp_path, small_ppo, torch_threads, capsys):
    # 3 s budget, far fewer steps than asked: the bar ends at the budget, the postfix at the steps done
    train("ppo", config=small_ppo, run_dir=tmp_path / "run", total_timesteps=10_000_000, env_overrides=SHORT,
          max_minutes=0.05)
    err = capsys.readouterr().err
    final = err.replace("\r", "\n").strip().splitlines()[-1]
    assert re.search(r"\| 3/3 s \[", final), final
    done = json.loads((tmp_path / "run" / "run.json").read_text())["trained_timesteps"]
    assert f"{done:,}/10,000,000 steps" in final, final
