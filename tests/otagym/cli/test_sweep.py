"""``otagym sweep`` and ``otagym compare`` on it: config errors before any cell runs, the same numbers in-process and on
a process pool, resume, a failing cell, a killed sweep, worker or driver, records checked before they are trusted, a
full disk, and compare's outputs as one generation.

Grids are tiny (T = 20, two seeds); the Ray executor is tested in ``tests/otagym/cli/test_sweep_ray.py`` (CI's rllib
venv)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from baselines.receive_scaling.compare import POLICIES, PolicySpec, compare
from otagym.cli import sweep
from otagym.cli.commands import main
from otagym import _io
from otagym._io import atomic_write, write_json

ROOT = Path(__file__).resolve().parents[3]
#: 3 policies x 1 nu x 2 seeds = 6 cells (two calibrated), about 2 s in-process.
TINY = {"name": "tiny", "scenarios": ["paper-mnist"], "rounds": 20,
        "policies": ["EqualAlloc", "AdaScale", "LiuSimeone"], "nu": [0.04], "seeds": [0, 1]}
N = 6
#: What may differ between two runs of the same cell: where and how long it ran.
VOLATILE = ("wall_s", "host", "pid", "started", "finished")


def numbers(sweep_dir: Path) -> dict[str, dict]:
    """Every record's result without its wall time, by key."""
    out = {}
    for path in sorted((Path(sweep_dir) / "cells").glob("*.json")):
        rec = json.loads(path.read_text())
        out[rec["key"]] = {k: v for k, v in (rec["result"] or {}).items() if k != "wall_s"}
    return out


def cells_table(sweep_dir: Path) -> list[list[str]]:
    """cells.csv without the volatile columns."""
    import csv

    with open(Path(sweep_dir) / "cells.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [[v for k, v in r.items() if k not in VOLATILE] for r in rows]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The tiny sweep, uninterrupted, in-process."""
    out = tmp_path_factory.mktemp("reference") / "tiny"
    outcome = sweep.run(sweep.plan(TINY), out, progress=False, log=None)
    assert outcome.complete and outcome.computed == N
    return out


def _write_config(tmp_path: Path, config: dict) -> Path:
    path = tmp_path / f"{config.get('name', 'cfg')}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


# --- config errors: named, and before any cell runs ------------------------------------------------------------------
@pytest.mark.parametrize("change,needle", [
    ({"policies": ["EqualAlloc", "Nope"]}, "policies[1] must be one of ['AdaScale'"),
    ({"policies": [{"policy": "Nope"}]}, "policies[0].policy must be one of"),
    ({"nu": [0.04, 0.0]}, "nu must be a non-empty sequence of values, each a finite number in [1e-30"),
    ({"nu": -1}, "nu must be a finite number in [1e-30"),
    ({"policies": ["PPO:runs/no-such/model.zip"]}, "policies[0].model must be an existing file"),
    ({"policies": [{"name": "PPO", "model": "missing.zip"}]}, "policies[0].model must be an existing file"),
    ({"policies": [{"policy": "AdaScale", "params": {"W": 1.0}}]}, "policies[0].params must be a mapping with keys"),
    ({"policies": [{"policy": "AdaScale", "params": {"V": -1.0}}]}, "policies[0].params.V must be a finite number"),
    ({"policies": [{"policy": "LiuSimeone", "params": {"delta": 2.0}}]}, "policies[0].params: delta must lie in"),
    ({"policies": ["AdaScale", "AdaScale"]}, "policies must be distinct by name"),
    ({"seeds": [0, -1]}, "seeds must be a non-empty sequence of values, each an integer in [0"),
    ({"seeds": {"start": 0}}, "seeds must be a list of integers >= 0 or {start: S, count: N}"),
    ({"rounds": 0}, "rounds must be an integer in [1, 1000000]; got 0"),
    ({"rounds": []}, "rounds must be an integer in [1, 1000000] or a non-empty list of them; got []"),
    ({"scheme": "nope"}, "scheme must be one of 'receive_scaling', 'cdpb', 'anonymous'; got 'nope'"),
    ({"scenarios": ["paper-nope"]}, "scenarios[0].preset must be one of ['paper-cifar10', 'paper-mnist']"),
    ({"scenarios": [{"preset": "paper-mnist", "num_devices": 0}]}, "scenarios[0]: Scenario.num_devices must be"),
    ({"scenarios": [{"preset": "paper-mnist", "fadding": "iid"}]}, "scenarios[0]: got an unexpected keyword"),
    ({"fidelity": "exact"}, "fidelity must be one of 'analytic', 'train'; got 'exact'"),
    ({"dataset": "mnist"}, "dataset must be absent unless fidelity includes 'train'"),
    ({"eval_samples": 100}, "eval_samples must be absent unless fidelity includes 'train'"),
    ({"fidelity": "train", "eval_samples": 0}, "eval_samples must be an integer >= 1"),
    ({"fidelity": "train", "dataset": "mnist"}, "data_dir must be an existing folder holding the mnist files"),
    ({"training_options": {"weight_decay": 1e-4}}, "training_options must be absent unless fidelity includes 'train'"),
    ({"fidelity": "train", "training_options": {"decay": 1e-4}},
     "training_options must be a mapping of ['momentum', 'weight_decay'] for scheme 'receive_scaling'"),
    ({"fidelity": "train", "training_options": {"weight_decay": 2}},
     "training_options.weight_decay must be a finite number in [0, 1]"),
    ({"polices": ["AdaScale"]}, "config keys must be among ['name'"),
    ({"name": "../up"}, "name must be a folder name"),
])
def test_a_bad_config_names_its_field_before_any_cell_runs(tmp_path, capsys, change, needle):
    path = _write_config(tmp_path, {**TINY, **change} if "name" in change else {**TINY, **change, "name": "bad"})
    assert main(["sweep", str(path), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err, err
    assert not list((tmp_path / "out").rglob("*.json"))  # nothing ran, nothing was written


def test_fashion_mnist_needs_no_data_dir_once_its_package_is_installed(tmp_path, monkeypatch):
    """``dataset: fashion-mnist`` without ``data_dir`` reads Debian's folder (the cells name no folder, so they are the
    same cells on every machine) and is refused before any cell runs, naming the apt-get line, where it is missing;
    ``eval_samples`` goes into the cells only when the config sets it."""
    from otagym.datasets import DATA_PACKAGES, MNIST_FILES

    folder = tmp_path / "pkg"
    folder.mkdir()
    monkeypatch.setitem(DATA_PACKAGES, "fashion-mnist", DATA_PACKAGES["fashion-mnist"]._replace(folder=folder))
    config = {**TINY, "fidelity": "train", "dataset": "fashion-mnist", "eval_samples": 500}
    with pytest.raises(sweep.ConfigError, match=r"^data_dir: .*apt-get install dataset-fashion-mnist.*data_dir"):
        sweep.plan(config)
    for name in MNIST_FILES.values():
        (folder / (name + ".gz")).write_bytes(b"")
    cells = sweep.plan(config).cells
    assert {(c["dataset"], c["data_dir"], c["eval_samples"]) for c in cells} == {("fashion-mnist", None, 500)}
    assert "eval_samples" not in sweep.plan({**TINY, "fidelity": "train"}).cells[0]


def test_training_options_reach_the_models_update(tmp_path, monkeypatch):
    """``training_options: {weight_decay: ...}`` goes into each training cell (a config without it keeps its cells'
    keys) and into the env's model update: the engine is built with it."""
    from otagym.training.federation import Federation

    built = []
    engine = Federation.engine
    monkeypatch.setattr(Federation, "engine", lambda self, *a, **kw: built.append(kw) or engine(self, *a, **kw))
    config = {**TINY, "policies": ["EqualAlloc"], "seeds": [0], "rounds": 2, "fidelity": "train",
              "training_options": {"weight_decay": 1e-4}}
    plan = sweep.plan(config)
    assert [c["training_options"] for c in plan.cells] == [{"weight_decay": 1e-4}]
    plain = sweep.plan({**config, "training_options": None})
    assert "training_options" not in plain.cells[0] and plain.keys != plan.keys
    assert sweep.run(plan, tmp_path / "out").complete
    assert built and {kw["weight_decay"] for kw in built} == {1e-4}


def test_a_training_cell_shows_its_rounds_below_the_sweeps_bar_in_process_only(tmp_path, capsys):
    """A training cell's rounds take seconds each on a real dataset: in-process with the progress bar on they show
    on a bar of their own; without the bar, and for analytic cells, nothing."""
    config = {**TINY, "policies": ["EqualAlloc"], "seeds": [0], "rounds": 3, "fidelity": "train"}
    assert sweep.run(sweep.plan(config), tmp_path / "shown", log=None).complete
    assert "training cell" in capsys.readouterr().err
    assert sweep.run(sweep.plan(config), tmp_path / "quiet", log=None, progress=False).complete
    assert sweep.run(sweep.plan({**TINY, "seeds": [0]}), tmp_path / "analytic", log=None).complete
    assert "training cell" not in capsys.readouterr().err


def test_yaml_numbers_in_e_notation_are_numbers(tmp_path):
    """PyYAML reads 1e4 as a string (YAML 1.1); the sweep's loader reads it as the number it looks like."""
    path = tmp_path / "e.yaml"
    path.write_text("policies: [{policy: AdaScale, name: V1e4, params: {V: 1e4}}]\nnu: 1.6e-1\n")
    config = sweep.load_config(path)
    assert config["policies"][0]["params"]["V"] == 1e4 and config["nu"] == 0.16 and config["name"] == "e"


# --- the same numbers everywhere, resume, failures --------------------------------------------------------------------
@pytest.mark.slow
def test_a_process_pool_gives_the_in_process_numbers(reference, tmp_path):
    outcome = sweep.run(sweep.plan(TINY), tmp_path / "tiny", workers=2, progress=False, log=None)
    assert outcome.complete and outcome.computed == N
    assert numbers(tmp_path / "tiny") == numbers(reference)
    assert cells_table(tmp_path / "tiny") == cells_table(reference)


def test_compare_is_the_same_cells(reference):
    """``baselines.receive_scaling.compare.compare`` loops over the very cells the sweep runs: same per-seed numbers."""
    rows = compare("paper-mnist", (0.04,), (0, 1), ("EqualAlloc", "AdaScale", "LiuSimeone"), progress=False,
                   num_rounds=20)
    recs = [json.loads(p.read_text()) for p in (reference / "cells").glob("*.json")]
    for row in rows:
        mine = sorted((r for r in recs
                       if r["cell"]["policy"]["name"] == row["policy"] and r["cell"]["nu"] == row["nu"]),
                      key=lambda r: r["cell"]["seed"])
        assert row["rdp_seeds"] == [r["result"]["rdp"] for r in mine]
        assert row["score_seeds"] == [r["result"]["score"] for r in mine]


def test_a_rerun_computes_only_the_missing_cells(reference, tmp_path):
    shutil.copytree(reference, tmp_path / "tiny")
    removed = sorted((tmp_path / "tiny" / "cells").glob("*.json"))[:3]
    for path in removed:
        path.unlink()
    outcome = sweep.run(sweep.plan(TINY), tmp_path / "tiny", progress=False, log=None)
    assert (outcome.computed, outcome.skipped) == (3, N - 3) and outcome.complete
    assert numbers(tmp_path / "tiny") == numbers(reference)
    again = sweep.run(sweep.plan(TINY), tmp_path / "tiny", progress=False, log=None)
    assert (again.computed, again.skipped) == (0, N)


def test_a_rerun_removes_what_killed_writers_left_in_every_folder_the_sweep_writes(reference, tmp_path):
    """A run killed while writing sweep.json, cells.csv or a record leaves a temporary file beside it; the next run
    removes those of dead writers in the sweep's folder as in cells/, and leaves a live writer's."""
    shutil.copytree(reference, tmp_path / "tiny")
    dead = f"{_io._host()}-999999999.abcdefgh.tmp"
    left = [tmp_path / "tiny" / f".sweep.json.{dead}", tmp_path / "tiny" / f".cells.csv.{dead}",
            tmp_path / "tiny" / "cells" / f".{sweep.plan(TINY).keys[0]}.json.{dead}"]
    live = tmp_path / "tiny" / f".summary.csv.{_io._host()}-{os.getpid()}.abcdefgh.tmp"
    for path in [*left, live]:
        path.write_text("left by a SIGKILL")
    outcome = sweep.run(sweep.plan(TINY), tmp_path / "tiny", progress=False, log=None)
    assert outcome.complete and outcome.computed == 0
    assert [p for p in left if p.exists()] == [] and live.exists()


def test_a_cell_that_raises_is_recorded_with_its_traceback_and_the_others_finish(monkeypatch, tmp_path):
    def explode(nu, p):
        raise RuntimeError("boom in a cell")

    monkeypatch.setitem(POLICIES, "Boom", PolicySpec(explode))
    p = sweep.plan({**TINY, "policies": ["EqualAlloc", "Boom"], "nu": [0.04]})
    outcome = sweep.run(p, tmp_path / "tiny", progress=False, log=None)
    assert outcome.computed == 4 and len(outcome.failed) == 2 and len(outcome.records) == 2
    assert sweep.exit_code(outcome) == 1
    rec = json.loads((tmp_path / "tiny" / "cells" / f"{outcome.failed[0]}.json").read_text())
    assert rec["status"] == "error" and rec["error"]["type"] == "RuntimeError"
    assert "boom in a cell" in rec["error"]["traceback"] and "explode" in rec["error"]["traceback"]
    assert rec["cell"]["policy"]["name"] == "Boom" and rec["version"] and rec["seed"] in (0, 1)
    statuses = [r[1] for r in cells_table(tmp_path / "tiny")]
    assert statuses == ["ok", "ok", "error", "error"]
    assert "failed: Boom nu=0.04" in sweep.report(outcome, tmp_path / "tiny")
    retry = sweep.run(p, tmp_path / "tiny", progress=False, log=None)  # failed cells are retried, ok ones skipped
    assert (retry.computed, retry.skipped) == (2, 2)


def _sweep_process(config_path: Path, out: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-m", "otagym.cli", "sweep", str(config_path), "--out", str(out),
                             "--no-progress", *extra], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for_records(out: Path, proc: subprocess.Popen, at_least: int, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while len(list((out / "cells").glob("*.json"))) < at_least:
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "the sweep wrote no record in time"
        time.sleep(0.02)


def _pool_workers(pid: int) -> list[int]:
    """The spawn workers among the children of ``pid`` (not multiprocessing's resource tracker)."""
    listing = Path(f"/proc/{pid}/task/{pid}/children")
    if not listing.exists():
        pytest.skip("this kernel does not list a process's children in /proc")
    children = listing.read_text().split()
    return [int(c) for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc to find the pool's workers")
def test_pool_workers_die_with_a_killed_driver(tmp_path):
    config = _write_config(tmp_path, {**TINY, "rounds": 2000, "seeds": list(range(8))})
    proc = _sweep_process(config, tmp_path, "--workers", "2")
    try:
        deadline = time.monotonic() + 60
        while len(workers := _pool_workers(proc.pid)) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "no pool workers"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)  # the driver only, as the OOM killer would: no cleanup runs
        proc.wait()
        deadline = time.monotonic() + 10 * sweep.DRIVER_POLL_S + 5
        while any(Path(f"/proc/{w}").exists() and b"spawn_main" in Path(f"/proc/{w}/cmdline").read_bytes()
                  for w in workers):
            assert time.monotonic() < deadline, "pool workers outlived their killed driver"
            time.sleep(0.05)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc to find the pool's workers")
def test_a_killed_worker_loses_no_finished_cell_and_a_rerun_completes(reference, tmp_path):
    config = _write_config(tmp_path, TINY)
    proc = _sweep_process(config, tmp_path, "--workers", "2")
    try:
        _wait_for_records(tmp_path / "tiny", proc, 1)
        os.kill(_pool_workers(proc.pid)[0], signal.SIGKILL)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1 and "a worker process died" in output and "rerun" in output, output
    finished = numbers(tmp_path / "tiny")
    assert 1 <= len(finished) < N and all(finished[k] == numbers(reference)[k] for k in finished)
    outcome = sweep.run(sweep.plan(TINY), tmp_path / "tiny", progress=False, log=None)
    assert outcome.skipped == len(finished) and outcome.computed == N - len(finished) and outcome.complete
    assert cells_table(tmp_path / "tiny") == cells_table(reference)


@pytest.mark.slow
def test_a_sweep_killed_mid_run_loses_no_finished_cell_and_a_rerun_equals_an_uninterrupted_run(reference, tmp_path):
    config = _write_config(tmp_path, TINY)
    proc = _sweep_process(config, tmp_path)
    try:
        _wait_for_records(tmp_path / "tiny", proc, 2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole sweep, as a crash or an OOM kill would
        proc.communicate()
    finished = numbers(tmp_path / "tiny")  # every record present parses: written atomically
    assert 2 <= len(finished) < N
    outcome = sweep.run(sweep.plan(TINY), tmp_path / "tiny", progress=False, log=None)
    assert (outcome.skipped, outcome.computed) == (len(finished), N - len(finished))
    assert numbers(tmp_path / "tiny") == numbers(reference)
    assert cells_table(tmp_path / "tiny") == cells_table(reference)
    assert not list((tmp_path / "tiny" / "cells").glob(".*.tmp"))


# --- otagym compare on the sweep ------------------------------------------------------------------------------------
COMPARE = ["compare", "--rounds", "20", "--seeds", "2", "--nu", "0.04", "--no-progress", "--policies"]


@pytest.mark.slow
def test_compare_resumes_its_cells_and_replaces_another_comparison_only_when_it_can_be_rebuilt(
        reference, tmp_path, capsys, monkeypatch):
    same = COMPARE + TINY["policies"] + ["--out", str(tmp_path)]
    other = COMPARE + ["EqualAlloc", "--out", str(tmp_path)]
    assert main(same) == 0
    first = json.loads((tmp_path / "compare.json").read_text())
    assert (tmp_path / "compare.png").stat().st_size > 0 and len(first["cells"]) == N
    assert numbers(tmp_path / "compare") == numbers(reference)  # the sweep's cells, same numbers
    capsys.readouterr()
    assert main(same) == 0  # the same comparison again: nothing recomputed
    assert f"0 cells computed, {N} reused" in capsys.readouterr().out
    before = {p.name: p.read_bytes() for p in tmp_path.glob("compare.*")}

    def broken_savefig(self, *args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("matplotlib.figure.Figure.savefig", broken_savefig)
    with pytest.raises(OSError, match="disk full"):  # a write that fails leaves the earlier file whole
        main(other)
    assert (tmp_path / "compare.png").read_bytes() == before["compare.png"]
    assert not list(tmp_path.glob(".*.tmp"))
    monkeypatch.undo()
    capsys.readouterr()
    # another configuration replaces the outputs: the earlier comparison's cells are all kept, so nothing is lost
    assert main(other) == 0
    out = capsys.readouterr().out
    assert f"replacing the comparison of another configuration in {tmp_path}: its {N} cells stay" in out
    assert len(json.loads((tmp_path / "compare.json").read_text())["cells"]) == 2
    assert main(same) == 0  # ... and its command rebuilds it from them, as it was
    assert f"0 cells computed, {N} reused" in capsys.readouterr().out
    assert (tmp_path / "compare.csv").read_bytes() == before["compare.csv"]

    # an earlier comparison whose cells are gone cannot be rebuilt: refused without --overwrite
    for key in first["cells"][:1]:
        (tmp_path / "compare" / "cells" / f"{key}.json").unlink()
    with pytest.raises(SystemExit) as exc:
        main(other)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "already holds an earlier comparison" in err and "--overwrite" in err
    assert (tmp_path / "compare.csv").read_bytes() == before["compare.csv"]
    assert main(other + ["--overwrite"]) == 0
    assert len(json.loads((tmp_path / "compare.json").read_text())["cells"]) == 2


def test_compare_cdpb_refuses_to_overwrite_without_the_flag(tmp_path, capsys):
    write_json(tmp_path / "compare_cdpb.json", {"rows": []})
    assert_exit = pytest.raises(SystemExit)
    with assert_exit as exc:
        main(["compare", "--scheme", "cdpb", "--out", str(tmp_path), "--no-progress"])
    assert exc.value.code == 2 and "pass --overwrite" in capsys.readouterr().err


def test_compare_refuses_executor_options_for_cdpb(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--scheme", "cdpb", "--workers", "2"])
    assert exc.value.code == 2 and "--scheme cdpb does not use --workers" in capsys.readouterr().err


def test_ray_without_ray_installed_is_refused_before_any_work(tmp_path, capsys):
    try:
        import ray  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("Ray is installed here (tests/otagym/cli/test_sweep_ray.py runs it)")
    with pytest.raises(SystemExit) as exc:
        main(["sweep", str(_write_config(tmp_path, TINY)), "--ray", "--out", str(tmp_path / "out")])
    assert exc.value.code == 2 and "--ray needs Ray, an optional extra" in capsys.readouterr().err
    assert not (tmp_path / "out" / "tiny").exists()


def test_atomic_write_leaves_the_old_file_when_the_writer_fails(tmp_path):
    path = write_json(tmp_path / "r.json", {"a": 1})
    with pytest.raises(RuntimeError):
        with atomic_write(path) as fh:
            fh.write('{"a": 2, "trunc')
            raise RuntimeError("killed mid-write")
    assert json.loads(path.read_text()) == {"a": 1} and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    np.testing.assert_equal(json.loads(write_json(path, {"a": [1, 2]}).read_text()), {"a": [1, 2]})


# --- records are checked before they are trusted; a full disk stops a run cleanly -------------------------------------
def _tamper(record: dict, how: str):
    """A record that is valid JSON but must not be trusted, as a harsh user or a bad disk makes it."""
    if how == "negative rdp":
        record["result"]["rdp"] = -1.0
        record["checksum"] = sweep.record_checksum(record)  # even with a matching checksum
    elif how == "epsilon 1e9":
        record["result"]["epsilon"] = 1e9
    elif how == "nan":
        record["result"]["leakage"] = float("nan")
        record["checksum"] = sweep.record_checksum(record)
    elif how == "garbage epsilon":
        record["result"]["epsilon"] = "garbage"
        record["checksum"] = sweep.record_checksum(record)
    elif how == "no result":
        del record["result"]
    elif how in ("list", "null"):
        return [] if how == "list" else None
    return record


@pytest.mark.parametrize("how,reason", [
    ("negative rdp", "result rdp = -1.0 < 0"), ("epsilon 1e9", "checksum does not match"),
    ("nan", "result leakage = nan is not finite"), ("garbage epsilon", "result epsilon = 'garbage' is not a number"),
    ("no result", "no result"), ("list", "not a record (a JSON list)"), ("null", "not a record (a JSON NoneType)"),
    ("another cell's", "it is the record of another cell")])
def test_a_bad_record_is_named_and_recomputed(reference, tmp_path, how, reason):
    shutil.copytree(reference, tmp_path / "tiny")
    keys = sweep.plan(TINY).keys
    bad = tmp_path / "tiny" / "cells" / f"{keys[2]}.json"
    record = json.loads(bad.read_text())
    if how == "another cell's":
        bad.write_text((tmp_path / "tiny" / "cells" / f"{keys[3]}.json").read_text())
    else:
        bad.write_text(json.dumps(_tamper(record, how)))
    said = []
    outcome = sweep.run(sweep.plan(TINY), tmp_path / "tiny", progress=False, log=said.append)
    assert list(outcome.invalid) == [keys[2]] and reason in outcome.invalid[keys[2]]
    assert any(f"recomputing cells/{keys[2]}.json: " in line and reason in line for line in said), said
    assert (outcome.skipped, outcome.computed) == (N - 1, 1) and outcome.complete
    assert numbers(tmp_path / "tiny") == numbers(reference)
    assert cells_table(tmp_path / "tiny") == cells_table(reference)


@pytest.mark.parametrize("failure", ["disk full", "read-only"])
def test_a_full_disk_or_read_only_folder_stops_the_run_in_one_line_keeping_every_record(reference, tmp_path,
                                                                                       monkeypatch, capsys, failure):
    import errno

    config = _write_config(tmp_path, {**TINY, "policies": ["EqualAlloc"], "seeds": [0, 1, 2, 3]})
    assert main(["sweep", str(config), "--out", str(tmp_path), "--no-progress"]) == 0
    first = {p.name: p.read_bytes() for p in (tmp_path / "tiny" / "cells").glob("*.json")}
    config.write_text(yaml.safe_dump(TINY))  # three policies now: the new cells cannot be written
    real_fsync, real_mkstemp = _io.os.fsync, _io.tempfile.mkstemp

    def fsync(fd):  # the disk fills up while a record is written (no file name in the error)
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path / "tiny" / "cells")):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    def mkstemp(*args, **kwargs):  # cells/ made read-only (root ignores chmod, so the error is raised here)
        if str(kwargs["dir"]).endswith("cells"):
            raise PermissionError(errno.EACCES, "Permission denied", str(kwargs["dir"]))
        return real_mkstemp(*args, **kwargs)

    if failure == "disk full":
        if not Path("/proc/self/fd").is_dir():
            pytest.skip("needs Linux /proc to tell which file a descriptor writes")
        monkeypatch.setattr(_io.os, "fsync", fsync)
    else:
        monkeypatch.setattr(_io.tempfile, "mkstemp", mkstemp)
    capsys.readouterr()
    assert main(["sweep", str(config), "--out", str(tmp_path), "--no-progress"]) == 1
    out = capsys.readouterr().out
    stopped = [line for line in out.splitlines() if line.startswith("stopped: ")]
    strerror = "No space left on device" if failure == "disk full" else "Permission denied"
    assert len(stopped) == 1 and f"cannot write {tmp_path / 'tiny' / 'cells'}" in stopped[0], out
    assert strerror in stopped[0] and "rerun the same command to resume" in stopped[0]
    assert {p.name: p.read_bytes() for p in (tmp_path / "tiny" / "cells").glob("*.json")} == first
    assert not list((tmp_path / "tiny" / "cells").glob(".*.tmp"))
    monkeypatch.undo()
    assert main(["sweep", str(config), "--out", str(tmp_path), "--no-progress"]) == 0  # a rerun resumes
    expected, found = numbers(reference), numbers(tmp_path / "tiny")
    assert {k: found[k] for k in expected} == expected


@pytest.mark.slow
def test_compare_writes_one_generation_and_says_when_a_killed_run_mixed_two(tmp_path, capsys, monkeypatch):
    from baselines import report

    first = COMPARE + ["EqualAlloc", "--out", str(tmp_path)]
    assert main(first) == 0
    assert report.mismatched_outputs(tmp_path / "compare.json") == []
    assert set(json.loads((tmp_path / "compare.json").read_text())["outputs"]) == {"compare.csv", "compare.png"}
    before = (tmp_path / "compare.json").read_bytes()

    def killed(*args, **kwargs):  # the run dies after its CSV and PNG, before its JSON
        raise KeyboardInterrupt
    monkeypatch.setattr(report, "write_json", killed)
    assert main(COMPARE + ["EqualAlloc", "AdaScale", "--out", str(tmp_path), "--overwrite"]) == 130  # Ctrl-C's code
    monkeypatch.undo()
    assert (tmp_path / "compare.json").read_bytes() == before  # the JSON of the first run ...
    assert report.mismatched_outputs(tmp_path / "compare.json") == ["compare.csv", "compare.png"]  # ... is told apart
    (tmp_path / f".compare.csv.{_io._host()}-999999999.abcdefgh.tmp").write_text("left by a SIGKILL")
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(COMPARE + ["LiuSimeone", "--out", str(tmp_path)])
    assert "(its compare.csv, compare.png are of yet another run)" in capsys.readouterr().err
    assert not list(tmp_path.glob(".*.tmp"))  # a dead writer's temporary file is cleaned
    assert main(first) == 0 and report.mismatched_outputs(tmp_path / "compare.json") == []


@pytest.mark.slow
@pytest.mark.parametrize("earlier", [None, ["LiuSimeone"]], ids=["first-run", "over-another-comparison"])
def test_compare_killed_while_writing_its_json_resumes_when_rerun(tmp_path, capsys, monkeypatch, earlier):
    """A run killed while writing compare.json (its CSV and plot written, its JSON not) left torn outputs; the same
    command run again is that run's own and finishes it from its stored cells, over no comparison or another one."""
    from baselines import report

    if earlier:
        assert main(COMPARE + earlier + ["--out", str(tmp_path)]) == 0
    command = COMPARE + ["EqualAlloc", "--out", str(tmp_path)]

    def killed(path, *args, **kwargs):  # SIGKILL while compare.json is written: its temporary file stays
        (Path(path).parent / f".{Path(path).name}.{_io._host()}-999999999.abcdefgh.tmp").write_text('{"rows": [')
        raise KeyboardInterrupt
    monkeypatch.setattr(report, "write_json", killed)
    assert main(command) == 130  # Ctrl-C's exit code, one line
    monkeypatch.undo()
    capsys.readouterr()
    assert main(command) == 0
    out = capsys.readouterr().out
    assert "holds this comparison already" in out and "0 cells computed, 2 reused" in out
    assert len(json.loads((tmp_path / "compare.json").read_text())["cells"]) == 2
    assert report.mismatched_outputs(tmp_path / "compare.json") == [] and not list(tmp_path.glob(".*.tmp"))
