"""``otagym sweep --ray`` on a local Ray with two CPUs (issue 13): a two-cell sweep gives the in-process numbers, and
a rerun reuses both cells. Skipped where Ray is not installed; CI installs it in its rllib environment and runs this
file there (``.ci/run``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

ray = pytest.importorskip("ray")

from otagym.cli import sweep  # noqa: E402
from otagym.cli.commands import main  # noqa: E402

#: One calibrated policy, one nu, two seeds: two cells at T = 20.
TWO_CELLS = {"name": "two", "scenarios": ["paper-mnist"], "rounds": 20, "policies": ["AdaScale"], "nu": [0.04],
             "seeds": [0, 1]}


def numbers(sweep_dir: Path) -> dict[str, dict]:
    out = {}
    for path in sorted((sweep_dir / "cells").glob("*.json")):
        rec = json.loads(path.read_text())
        assert rec["status"] == "ok", rec["error"]
        out[rec["key"]] = {k: v for k, v in rec["result"].items() if k != "wall_s"}
    return out


def test_a_two_cell_sweep_on_a_local_ray_gives_the_in_process_numbers_and_resumes(tmp_path, capsys):
    config = tmp_path / "two.yaml"
    config.write_text(yaml.safe_dump(TWO_CELLS))
    in_process = sweep.run(sweep.plan(TWO_CELLS), tmp_path / "local" / "two", progress=False, log=None)
    assert in_process.complete and in_process.computed == 2

    # ray.init(num_cpus=2) by the command itself, ray.shutdown() when it is done
    argv = ["sweep", str(config), "--ray", "--workers", "2", "--out", str(tmp_path / "ray"), "--no-progress"]
    assert main(argv) == 0
    assert "2 cells computed, 0 reused, 0 failed" in capsys.readouterr().out
    assert not ray.is_initialized()
    assert numbers(tmp_path / "ray" / "two") == numbers(tmp_path / "local" / "two")
    assert (tmp_path / "ray" / "two" / "cells.csv").is_file()

    assert main(argv) == 0  # the rerun finds both records (and starts no Ray: nothing to run)
    assert "0 cells computed, 2 reused" in capsys.readouterr().out
