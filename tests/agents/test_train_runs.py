"""A training run's folder belongs to one run, its files are written atomically, and a resume continues exactly that
run: what a harsh user found (a fresh run destroying an old one, truncated checkpoints picked for resume, resumes
with other settings accepted, overshooting step counts, monitor files of discarded segments), each reproduced."""

import json
import os
import signal
import subprocess
import sys
import time
import zipfile

import pytest

pytest.importorskip("stable_baselines3")
torch = pytest.importorskip("torch")

from stable_baselines3.common import base_class, save_util  # noqa: E402
from stable_baselines3.common.monitor import load_results  # noqa: E402

from agents.policy import load_model  # noqa: E402
from agents.train import (RunExistsError, RunMismatchError, checkpoint_files, latest_checkpoint,  # noqa: E402
                          train)
from otagym.cli.commands import main  # noqa: E402

ROUNDS = 25  # episodes of 25 rounds: with 4 envs, 4 episodes end every 100 env steps
SHORT = {"num_rounds": ROUNDS}
# PPO's rollouts are 4 x 60 = 240 steps: checkpoints (at rollout boundaries) fall on the multiples of 240 asked for
PPO_YML = ("otagym/OTAPrivacy-v0:\n  n_envs: 4\n  n_steps: 60\n  batch_size: 120\n  n_epochs: 1\n  gamma: 1.0\n"
           "  policy_kwargs: \"dict(net_arch=[16])\"\n  env_kwargs:\n    dp_orders: null\n")
SAC_YML = ("otagym/OTAPrivacy-v0:\n  n_envs: 4\n  learning_starts: 16\n  batch_size: 16\n  buffer_size: 2000\n"
           "  gamma: 0.99\n  policy_kwargs: \"dict(net_arch=[16])\"\n  env_kwargs:\n    dp_orders: null\n")


@pytest.fixture(autouse=True)
def _torch_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture
def configs(tmp_path):
    (tmp_path / "ppo.yml").write_text(PPO_YML)
    (tmp_path / "sac.yml").write_text(SAC_YML)
    return {"ppo": tmp_path / "ppo.yml", "sac": tmp_path / "sac.yml"}


def _train(algo, configs, run, steps, **kw):
    return train(algo, config=configs[algo], run_dir=run, total_timesteps=steps, env_overrides=SHORT,
                 progress=False, **{"checkpoint_freq": 480, **kw})


def _snapshot(run):
    return {p.relative_to(run): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file() and "tb" not in p.parts}


def test_a_fresh_run_refuses_a_folder_holding_another_and_overwrite_replaces_only_the_runs_files(tmp_path, configs,
                                                                                                   capsys):
    run = tmp_path / "run"
    _train("ppo", configs, run, 1000)
    (run / "notes.txt").write_text("mine")
    before = _snapshot(run)
    with pytest.raises(RunExistsError, match=r"holds a run \(run.json, model.zip, checkpoints, monitor.csv"):
        _train("ppo", configs, run, 500, seed=1)
    assert _snapshot(run) == before  # nothing truncated, replaced or removed
    with pytest.raises(SystemExit) as exc:
        main(["train", "--config", str(configs["ppo"]), "--run-dir", str(run), "--steps", "500", "--no-progress",
              "--env", f"num_rounds={ROUNDS}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"otagym train: error: {run} holds a run") and "--overwrite" in err and err.count("\n") == 1
    assert _snapshot(run) == before
    _train("ppo", configs, run, 500, seed=1, overwrite=True)
    meta = json.loads((run / "run.json").read_text())
    assert meta["seed"] == 1 and meta["trained_timesteps"] == 500
    # the old 960 is gone
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["model_480_steps.zip",
                                                                        "model_state_480_steps.pkl"]
    assert (run / "notes.txt").read_text() == "mine"
    with pytest.raises(ValueError, match="resume and overwrite exclude each other"):
        _train("ppo", configs, run, 500, resume=True, overwrite=True)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_a_checkpoint_interrupted_mid_write_leaves_no_file_and_resume_takes_the_newest_complete(tmp_path, configs,
                                                                                                monkeypatch, algo):
    run = tmp_path / "run"
    calls = {"n": 0}
    real_zip, real_save = base_class.save_to_zip_file, save_util.th.save

    def interrupted_zip(*args, **kwargs):  # the second checkpoint is interrupted half-way through its zip
        calls["n"] += 1
        if calls["n"] == 2:
            monkeypatch.setattr(save_util.th, "save", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
        return real_zip(*args, **kwargs)

    monkeypatch.setattr(base_class, "save_to_zip_file", interrupted_zip)
    with pytest.raises(KeyboardInterrupt):
        _train(algo, configs, run, 2000, checkpoint_freq=240)
    monkeypatch.setattr(save_util.th, "save", real_save)
    zips = sorted((run / "checkpoints").glob("model_*_steps.zip"))
    assert [p.name for p in zips] == ["model_240_steps.zip"]  # the interrupted one is not there, not even in part
    assert all(zipfile.is_zipfile(p) for p in zips) and not list((run / "checkpoints").glob(".*.tmp"))
    _train(algo, configs, run, 1000, checkpoint_freq=240, resume=True)
    meta = json.loads((run / "run.json").read_text())
    assert meta["resumed_from"] == 240 and meta["trained_timesteps"] == 1000


@pytest.mark.slow
def test_a_truncated_or_bufferless_checkpoint_is_skipped_loudly(tmp_path, configs):
    run = tmp_path / "run"
    _train("sac", configs, run, 1000)
    assert latest_checkpoint(run) == (checkpoint_files(run, 960)["model"], 960)
    checkpoint_files(run, 960)["replay_buffer"].unlink()  # SAC without its buffer is not a checkpoint
    with pytest.warns(UserWarning, match=r"skipping incomplete checkpoint .*model_960_steps.zip \(replay_buffer"):
        assert latest_checkpoint(run) == (checkpoint_files(run, 480)["model"], 480)
    model = checkpoint_files(run, 480)["model"]
    model.write_bytes(model.read_bytes()[:100])  # what a kill mid-write used to leave
    with pytest.warns(UserWarning) as warned:  # no complete checkpoint: the run starts again from step 0
        _train("sac", configs, run, 200, resume=True)
    assert [str(w.message).split("/")[-1] for w in warned][:2] == ["model_960_steps.zip (replay_buffer missing)",
                                                                  "model_480_steps.zip (model unreadable)"]
    meta = json.loads((run / "run.json").read_text())
    assert meta["resumed_from"] == 0 and meta["trained_timesteps"] == 200
    assert [(s["start_steps"], s["end_steps"]) for s in meta["segments"]] == [(0, 200)]


def test_resume_refuses_other_settings_by_name(tmp_path, configs, capsys):
    run = tmp_path / "run"
    _train("ppo", configs, run, 500)
    before = _snapshot(run)
    with pytest.raises(RunMismatchError, match=r"algo: run has \"ppo\", asked \"sac\""):
        _train("sac", configs, run, 1000, resume=True)
    with pytest.raises(RunMismatchError, match=r"env_kwargs.fading: run has \(default\), asked \"gauss_markov\""):
        train("ppo", config=configs["ppo"], run_dir=run, total_timesteps=1000, resume=True, progress=False,
              env_overrides={**SHORT, "fading": "gauss_markov", "correlation": 0.9}, checkpoint_freq=480)
    with pytest.raises(RunMismatchError, match="seed: run has 0, asked 3"):
        _train("ppo", configs, run, 1000, resume=True, seed=3)
    with pytest.raises(RunMismatchError, match="below the 480 steps"):
        _train("ppo", configs, run, 400, resume=True)
    meta = json.loads((run / "run.json").read_text())
    meta["versions"]["otagym"] = "0.0.1"
    (run / "run.json").write_text(json.dumps(meta))
    before[type(run)("run.json")] = (run / "run.json").read_bytes()
    with pytest.raises(SystemExit) as exc:
        main(["train", "--config", str(configs["ppo"]), "--run-dir", str(run), "--steps", "1000", "--resume",
              "--no-progress", "--env", f"num_rounds={ROUNDS}"])
    assert exc.value.code == 2
    assert 'otagym version: run has "0.0.1"' in capsys.readouterr().err
    assert _snapshot(run) == before  # a refused resume touches nothing


def test_resume_ends_at_the_steps_asked_keeps_one_monitor_and_the_runs_history(tmp_path, configs):
    run = tmp_path / "run"
    _train("ppo", configs, run, 1000)  # PPO's rollouts are 240 steps: without the budget it would stop at 1200
    assert json.loads((run / "run.json").read_text())["trained_timesteps"] == 1000
    checkpoint_files(run, 960)["model"].unlink()  # continue from 480: the episodes that ended after it are discarded
    _train("ppo", configs, run, 2000, resume=True)
    meta = json.loads((run / "run.json").read_text())
    assert meta["trained_timesteps"] == 2000 and load_model(run / "model.zip").num_timesteps == 2000
    assert [(s["start_steps"], s["end_steps"]) for s in meta["segments"]] == [(0, 480), (480, 2000)]
    assert meta["wall_s"] == pytest.approx(sum(s["wall_s"] for s in meta["segments"]))
    assert sorted(p.name for p in run.glob("*monitor*")) == ["monitor.csv"]
    episodes = load_results(str(run))
    # 4 episodes every 100 steps: those ended by step 480 of the first segment, then the resumed segment's, the
    # episodes in progress at the checkpoint continuing (they end at 500, as in a run never stopped)
    assert len(episodes) == 4 * (2000 // 100)
    assert episodes["total_timesteps"].tolist() == [100 * (k // 4 + 1) for k in range(80)]
    assert episodes["total_timesteps"].tolist() == sorted(episodes["total_timesteps"])
    assert episodes["total_timesteps"].max() <= 2000 and (episodes["l"] == ROUNDS).all()


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_a_resumed_run_continues_the_stream_of_a_run_never_stopped_to_the_bit(tmp_path, configs, algo):
    """A run stopped at 600 steps and resumed from its checkpoint at 480 plays the channels, budgets and actions of
    the run never stopped, and ends with its parameters (torch on one thread, CPU)."""
    whole, cut = tmp_path / "whole", tmp_path / "cut"

    def run(folder, steps, **kw):  # nu drawn per episode, as the packaged configs do
        train(algo, config=configs[algo], run_dir=folder, total_timesteps=steps, checkpoint_freq=480, progress=False,
              env_overrides={**SHORT, "nu_range": [0.01, 0.16]}, **kw)

    run(whole, 1200)
    run(cut, 600)  # as if killed at 600: the newest checkpoint is at 480
    run(cut, 1200, resume=True)
    columns = ["r", "l", "nu", "episode_leakage", "episode_equal_alloc_leakage", "total_timesteps"]
    first, resumed = load_results(str(whole))[columns], load_results(str(cut))[columns]
    assert len(first) == 4 * 1200 // 100
    assert resumed.to_dict("list") == first.to_dict("list")
    # the episodes after the checkpoint are new channels and budgets, not the run's first ones again
    assert set(resumed["nu"][resumed["total_timesteps"] > 500]).isdisjoint(resumed["nu"][:20])
    ours, theirs = (load_model(run / "model.zip").policy.state_dict() for run in (cut, whole))
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_sigkill_at_any_moment_leaves_a_resumable_run(tmp_path, configs, algo):
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "otagym.cli", "train", "--algo", algo, "--config", str(configs[algo]),
           "--run-dir", str(run), "--steps", "100000", "--checkpoint-freq", "40", "--no-progress",
           "--env", f"num_rounds={ROUNDS}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while len(list((run / "checkpoints").glob("model_*_steps.zip"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    newest = latest_checkpoint(run)
    assert newest is not None, proc.stderr.read().decode()
    assert all(zipfile.is_zipfile(p) for p in (run / "checkpoints").glob("model_*_steps.zip"))
    meta = json.loads((run / "run.json").read_text())
    assert "wall_s" not in meta and meta["segments"][-1]["end_steps"] >= newest[1]  # the record says how far it got
    target = newest[1] + 200
    _train(algo, configs, run, target, checkpoint_freq=40, resume=True)
    assert json.loads((run / "run.json").read_text())["trained_timesteps"] == target


def test_a_full_disk_ends_training_in_one_line_naming_the_file_and_keeps_the_checkpoints_written(tmp_path, configs,
                                                                                                 monkeypatch, capsys):
    import errno

    from otagym import _io

    run, real = tmp_path / "run", _io.tempfile.mkstemp
    written = []

    def mkstemp(*args, **kwargs):  # the disk fills up at the third checkpoint's model
        model = kwargs["prefix"].startswith(".model_") and "_steps.zip." in kwargs["prefix"]
        if model and len(written) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        if model:
            written.append(kwargs["prefix"])
        return real(*args, **kwargs)

    monkeypatch.setattr(_io.tempfile, "mkstemp", mkstemp)
    code = main(["train", "--config", str(configs["ppo"]), "--run-dir", str(run), "--steps", "2000",
                 "--checkpoint-freq", "240", "--no-progress", "--env", f"num_rounds={ROUNDS}"])
    err = capsys.readouterr().err
    assert code == 1 and err == (f"otagym train: error: {checkpoint_files(run, 720)['model']}: "
                                 "No space left on device\n")
    assert latest_checkpoint(run) == (checkpoint_files(run, 480)["model"], 480)
    monkeypatch.undo()
    _train("ppo", configs, run, 1000, checkpoint_freq=240, resume=True)  # and the run resumes from there


def _dead_writer_temporary(folder, name):
    """A temporary file as a write of ``name`` killed mid-way leaves it (:func:`otagym._io.atomic_write`'s name,
    with the pid of a process that has ended)."""
    from otagym._io import _host

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    tmp = folder / f".{name}.{_host()}-{proc.pid}.x1y2.tmp"
    tmp.write_bytes(b"half a file")
    return tmp


@pytest.mark.slow
@pytest.mark.parametrize("how", ["resume", "overwrite"])
def test_temporaries_of_killed_writes_do_not_survive_a_resume_or_an_overwrite(tmp_path, configs, how):
    run = tmp_path / "run"
    _train("sac", configs, run, 500)
    left = [_dead_writer_temporary(run, "run.json"), _dead_writer_temporary(run, "model.zip"),
            _dead_writer_temporary(run / "checkpoints", "model_replay_buffer_500_steps.pkl")]
    _train("sac", configs, run, 600, **{how: True})
    assert not any(p.exists() for p in left)
    assert not list(run.rglob("*.tmp"))
    assert json.loads((run / "run.json").read_text())["trained_timesteps"] == 600


def test_a_run_killed_before_its_first_checkpoint_is_resumed_from_its_start(tmp_path, configs, monkeypatch, capsys):
    """Not a loop of messages (the fresh run pointing to --resume, --resume to a fresh run): --resume continues it
    from step 0, with its own settings, as the run it would have been."""
    from agents.train import callbacks

    run, whole = tmp_path / "run", tmp_path / "whole"

    def killed(self):  # the process dies at step 200, before the first checkpoint (480)
        if self.model.num_timesteps >= 200:
            raise KeyboardInterrupt
        return True

    with monkeypatch.context() as m:
        m.setattr(callbacks.Budget, "_on_step", killed)
        with pytest.raises(KeyboardInterrupt):
            _train("ppo", configs, run, 1000)
    assert (run / "run.json").is_file() and latest_checkpoint(run) is None
    with pytest.raises(RunExistsError, match="continue it with --resume"):
        _train("ppo", configs, run, 1000)
    main(["train", "--config", str(configs["ppo"]), "--run-dir", str(run), "--steps", "1000", "--resume",
          "--checkpoint-freq", "480", "--env", f"num_rounds={ROUNDS}"])
    assert "resuming " + str(run) + " from its start" in capsys.readouterr().err
    meta = json.loads((run / "run.json").read_text())
    assert meta["resumed_from"] == 0 and meta["trained_timesteps"] == 1000
    assert [(s["start_steps"], s["end_steps"]) for s in meta["segments"]] == [(0, 1000)]
    _train("ppo", configs, whole, 1000)  # the run never stopped: the same episodes and parameters
    assert load_results(str(run))["r"].tolist() == load_results(str(whole))["r"].tolist()
    ours, theirs = (load_model(r / "model.zip").policy.state_dict() for r in (run, whole))
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)


def test_a_folder_in_use_by_another_process_is_refused_whatever_the_flags(tmp_path, configs, capsys):
    """Two trainings into one folder: the second one, in another process, is refused (fresh, --overwrite and
    --resume alike) while the first holds the folder, and proceeds once it has ended."""
    from agents.train import LOCK_NAME

    run = tmp_path / "run"
    run.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               f"fd = os.open({str(run / LOCK_NAME)!r}, os.O_RDWR | os.O_CREAT)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        for flags in ([], ["--overwrite"], ["--resume"]):
            (run / "run.json").write_text("{}") if flags == ["--resume"] else None
            with pytest.raises(SystemExit) as exc:
                main(["train", "--config", str(configs["ppo"]), "--run-dir", str(run), "--steps", "240",
                      "--no-progress", "--env", f"num_rounds={ROUNDS}", *flags])
            assert exc.value.code == 2
            assert capsys.readouterr().err == (f"otagym train: error: {run} is in use by another otagym train (it "
                                               f"holds {run / LOCK_NAME}); wait for it to end, or choose another "
                                               "--run-dir\n")
        assert sorted(p.name for p in run.iterdir()) == [LOCK_NAME, "run.json"]  # nothing touched
    finally:
        holder.kill()
        holder.wait()
    (run / "run.json").unlink()
    assert main(["train", "--config", str(configs["ppo"]), "--run-dir", str(run), "--steps", "240", "--no-progress",
                 "--env", f"num_rounds={ROUNDS}"]) == 0


def _compiled_kernel_interrupted():
    """What Ctrl-C inside a numba kernel raises: a SystemError from the KeyboardInterrupt."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as err:
        raise SystemError("CPUDispatcher(<function _channel>) returned a result with an exception set") from err


def _save_interrupted():
    """What Ctrl-C inside a checkpoint's torch.save raises: its zip writer fails on closing while the
    KeyboardInterrupt is handled (seen in CI: the SIGINT test below, once)."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 4462 vs 4432")


@pytest.mark.parametrize("raised", [KeyboardInterrupt, _compiled_kernel_interrupted, _save_interrupted])
def test_ctrl_c_ends_train_in_one_line_with_exit_code_130(tmp_path, configs, monkeypatch, capsys, raised):
    from agents.train import callbacks

    def interrupted(self):
        if raised is KeyboardInterrupt:
            raise KeyboardInterrupt
        raised()
    monkeypatch.setattr(callbacks.Budget, "_on_step", interrupted)
    code = main(["train", "--config", str(configs["ppo"]), "--run-dir", str(tmp_path / "run"), "--steps", "1000",
                 "--no-progress", "--env", f"num_rounds={ROUNDS}"])
    err = capsys.readouterr().err
    assert code == 130 and "Traceback" not in err
    assert err.strip() == ("otagym train: interrupted; the run's checkpoints are kept: continue it with the same "
                           "command and --resume")


@pytest.mark.slow
def test_sigint_ends_train_in_one_line_and_the_run_resumes(tmp_path, configs):
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "otagym.cli", "train", "--config", str(configs["ppo"]), "--run-dir", str(run),
           "--steps", "100000", "--checkpoint-freq", "240", "--no-progress", "--env", f"num_rounds={ROUNDS}"]
    # Ctrl-C in a terminal: SIGINT at its default disposition, whatever this process inherited (a job started in the
    # background by a non-interactive shell, as a CI runner may be, ignores SIGINT, and its children inherit that)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while len(list((run / "checkpoints").glob("model_*_steps.zip"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == ("otagym train: interrupted; the run's checkpoints are kept: continue it "
                                            "with the same command and --resume")
    newest = latest_checkpoint(run)
    _train("ppo", configs, run, newest[1] + 240, checkpoint_freq=240, resume=True)
    assert json.loads((run / "run.json").read_text())["trained_timesteps"] == newest[1] + 240
