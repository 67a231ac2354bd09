"""benchmarks/accuracy_under_privacy.py: its sweeps are the grid the docs state, its rows are means and Student-t
intervals over seeds, and a rerun reuses every finished cell."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from otagym.cli import sweep
from otagym.datasets import DATA_PACKAGES, MNIST_FILES

from benchmarks import accuracy_under_privacy as script  # noqa: E402 (run from the repository root: python -m pytest)


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Fashion-MNIST's package folder holding (empty) files: enough for a config to plan."""
    folder = tmp_path / "pkg"
    folder.mkdir()
    for name in MNIST_FILES.values():
        (folder / (name + ".gz")).write_bytes(b"")
    monkeypatch.setitem(DATA_PACKAGES, "fashion-mnist", DATA_PACKAGES["fashion-mnist"]._replace(folder=folder))


def test_the_default_sweeps_are_the_papers_grid_with_the_stated_reduction(installed):
    pytest.importorskip("stable_baselines3")
    configs = {c["name"]: c for c in script.sweep_configs(script.parse_args([]))}
    plans = {name: sweep.plan(config) for name, config in configs.items()}
    model_a = plans["receive_scaling"].cells
    assert len(model_a) == 7 * 3 * 3 and {c["nu"] for c in model_a} == {0.01, 0.04, 0.16}
    assert {c["policy"]["name"] for c in model_a} == {"OfflineOptimal", "AdaScale", "EqualAlloc", "BestConstant",
                                                      "AdaScaleTrained", "OnlineOptimal", "LinearCRN"}
    assert all(c["rounds"] == 200 and c["preset"] == "paper-mnist" and c["dataset"] == "fashion-mnist"
               and c["data_dir"] is None and c["eval_samples"] == 2000 and "train_samples" not in c
               and c["seed"] in (0, 1, 2) for c in model_a)
    assert {c["nu"] for c in plans["beyond"].cells} == set(script.BEYOND_NUS) and len(plans["beyond"].cells) == 9
    cdpb = plans["cdpb"].cells
    assert len(cdpb) == 6 * 3 and all(c["overrides"] == {"accounting": "theorem1"} and c["train_samples"] == 2000
                                      for c in cdpb)


def _cells(values, nu=0.04, policy="EqualAlloc"):
    return [{"policy": policy, "nu": nu, "seed": i, "accuracy": a, "epsilon": 2.0 * a, "rdp": 3.0 * a,
             "cost_mean": nu, "matched": True, "accuracy_rounds": [0, 5, 10], "accuracy_curve": [0.1, a / 2, a]}
            for i, a in enumerate(values)]


def test_rows_are_means_and_student_t_intervals_over_seeds():
    values = [0.70, 0.74, 0.71]
    row, = script.model_a_rows(_cells(values))
    half = stats.t.ppf(0.975, 2) * np.std(values, ddof=1) / np.sqrt(3)
    assert row["accuracy"]["mean"] == pytest.approx(np.mean(values)) and row["accuracy"]["ci95"] == pytest.approx(half)
    assert row["accuracy"]["seeds"] == values and row["epsilon"]["mean"] == pytest.approx(2 * np.mean(values))
    assert row["accuracy_curve"] == pytest.approx([0.1, np.mean(values) / 2, np.mean(values)])
    two = script.model_a_rows(_cells([0.5], nu=0.01) + _cells([0.6], nu=0.16))
    assert [(r["nu"], r["accuracy"]["mean"], r["accuracy"]["ci95"]) for r in two] == [(0.01, 0.5, 0.0),
                                                                                      (0.16, 0.6, 0.0)]


@pytest.mark.slow  # trains the paper's CNN for 3 rounds on generated images, twice
def test_a_rerun_reuses_the_finished_cells(tmp_path, one_torch_thread):
    import gzip
    import struct

    rng = np.random.default_rng(0)
    for (split, kind), name in MNIST_FILES.items():
        n = 700 if split == "train" else 60
        array = rng.integers(0, 256, (n, 28, 28)) if kind == "images" else rng.integers(0, 10, n)
        raw = bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
        (tmp_path / (name + ".gz")).write_bytes(gzip.compress(raw + array.astype(np.uint8).tobytes()))
    config = {"name": "tiny", "scheme": "receive_scaling", "scenarios": ["paper-mnist"], "rounds": 3,
              "fidelity": "train", "dataset": "fashion-mnist", "data_dir": str(tmp_path), "eval_samples": 20,
              "policies": ["EqualAlloc"], "nu": [0.04], "seeds": [0]}
    first, computed = script.run_sweeps([config], tmp_path / "out", None)
    assert computed == 1 and (tmp_path / "out" / "tiny.yaml").is_file()
    again, computed = script.run_sweeps([config], tmp_path / "out", None)
    assert computed == 0 and again["tiny"][0]["accuracy"] == first["tiny"][0]["accuracy"]
    assert first["tiny"][0]["accuracy_rounds"] == [0, 1, 2, 3] and 0.0 <= first["tiny"][0]["accuracy"] <= 1.0


def test_mnist_runs_need_their_folder_and_stay_out_of_the_docs(tmp_path):
    from benchmarks.accuracy_under_privacy import parse_args, sweep_configs

    with pytest.raises(SystemExit):
        parse_args(["--dataset", "mnist"])
    with pytest.raises(SystemExit):
        parse_args(["--dataset", "mnist", "--data-dir", str(tmp_path), "--docs"])
    args = parse_args(["--dataset", "mnist", "--data-dir", str(tmp_path)])
    assert all(c["dataset"] == "mnist" and c["data_dir"] == str(tmp_path) for c in sweep_configs(args))
