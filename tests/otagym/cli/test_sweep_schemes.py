"""``otagym sweep`` for every registered scheme: CDPB and anonymous OTA cells (one episode per seed in the scheme's
env) give records that a rerun reuses, a cell's bits do not depend on its batch, a scheme without a budget axis
refuses ``nu``, a mixed-scheme sweep writes one summary, and receive scaling's cell keys are those of before the
sweep asked each scheme's ``baselines/<scheme>/sweep.py`` (its records stay valid).

Tiny grids: 5 rounds, 2 seeds, policies that play the cell's rounds."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from baselines.sweep import scheme_sweep
from otagym.cli import sweep
from otagym.cli.sweep.cells import run_cells
from otagym.schemes import SCHEMES

CDPB = {"name": "cdpb", "scheme": "cdpb", "rounds": 5, "policies": ["hmin-based", "IS-based"], "seeds": [0, 1]}
ANONYMOUS = {"name": "anonymous", "scheme": "anonymous", "rounds": 5,
             "policies": ["PaperSetting", {"policy": "ConstantSigma", "params": {"sigma": 0.01}}], "seeds": [0, 1]}


def _results(sweep_dir: Path) -> dict[str, dict]:
    out = {}
    for path in sorted((sweep_dir / "cells").glob("*.json")):
        rec = json.loads(path.read_text())
        out[rec["key"]] = {k: v for k, v in rec["result"].items() if k != "wall_s"}
    return out


def test_every_registered_scheme_has_a_sweep():
    assert sweep.SWEEP_SCHEMES == tuple(SCHEMES)
    for name in SCHEMES:
        s = scheme_sweep(name)
        assert set(s.default_policies) <= set(s.policy_names()) and "analytic" in s.fidelities


@pytest.mark.parametrize("config", [CDPB, ANONYMOUS], ids=["cdpb", "anonymous"])
def test_a_sweep_of_an_episode_scheme_gives_records_that_a_rerun_reuses(config, tmp_path):
    p = sweep.plan(config)
    assert len(p.cells) == 4 and all("nu" not in c for c in p.cells)
    first = sweep.run(p, tmp_path / config["name"], progress=False, log=None)
    assert first.complete and first.computed == 4, sweep.report(first, tmp_path / config["name"])
    results = _results(tmp_path / config["name"])
    for result in results.values():
        assert result["rounds_played"] == 5 and result["epsilon"] > 0 and result["rdp"] > 0
        assert set(scheme_sweep(config["scheme"]).result_columns) - {"accuracy"} <= set(result) | {"cost"}
    again = sweep.run(p, tmp_path / config["name"], progress=False, log=None)
    assert (again.computed, again.skipped) == (0, 4) and _results(tmp_path / config["name"]) == results
    with open(tmp_path / config["name"] / "summary.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["policy"] for r in rows] == [c if isinstance(c, str) else c["policy"] for c in config["policies"]]
    assert all(r["seeds"] == "2" and r["return_ci95"] for r in rows)


@pytest.mark.parametrize("config", [CDPB, ANONYMOUS], ids=["cdpb", "anonymous"])
def test_a_cell_alone_and_in_a_batch_gives_the_same_bits(config):
    """IS-based samples clients and anonymous OTA draws batches from the env's generator: each cell has its own."""
    p = sweep.plan({**config, "seeds": [3, 4, 5]})
    batch = [(k, c) for k, c in zip(p.keys, p.cells) if c["policy"]["name"] == p.cells[-1]["policy"]["name"]]
    together = run_cells(batch)
    alone = [run_cells([task])[0] for task in batch]
    assert all(r["status"] == "ok" for r in together + alone)
    strip = [{k: v for k, v in r["result"].items() if k != "wall_s"} for r in together]
    assert strip == [{k: v for k, v in r["result"].items() if k != "wall_s"} for r in alone]
    assert len({json.dumps(r) for r in strip}) == 3  # the seeds differ


@pytest.mark.parametrize("change,needle", [
    ({"nu": [0.04]}, "nu must be absent for scheme 'cdpb'"),
    ({"policies": ["Nope"]}, "policies[0] must be one of ['CDPB-i'"),
    ({"policies": ["PPO:model.zip"]}, "policies[0].model must be absent for scheme 'cdpb'"),
    ({"policies": [{"policy": "IS-based", "params": {"sampling": 2.0}}]}, "policies[0].params.sampling must be"),
    ({"policies": [{"policy": "CDPB-n", "params": {"V": 1.0}}]}, "policies[0].params must be a mapping with keys"),
])
def test_a_cdpb_config_names_its_bad_field(change, needle):
    with pytest.raises(sweep.ConfigError) as err:
        sweep.plan({**CDPB, **change})
    assert needle in str(err.value)


def test_an_anonymous_policy_without_its_required_argument_is_refused():
    with pytest.raises(sweep.ConfigError, match=r"policies\[0\]\.params: .*sigma"):
        sweep.plan({**ANONYMOUS, "policies": ["ConstantSigma"]})
    with pytest.raises(sweep.ConfigError, match="fidelity must be among \\['analytic'\\] for scheme 'anonymous'"):
        sweep.plan({**ANONYMOUS, "fidelity": "train"})


def test_a_mixed_scheme_sweep_writes_one_table_with_each_schemes_columns(tmp_path):
    p = sweep.plan({"name": "mixed", "scheme": ["receive_scaling", "anonymous"], "rounds": 5, "seeds": [0]})
    keep = [i for i, c in enumerate(p.cells) if c["policy"]["name"] in ("EqualAlloc", "PaperSetting")
            and c.get("nu", 0.04) == 0.04]
    small = sweep.Plan(p.name, p.config, tuple(p.cells[i] for i in keep), tuple(p.keys[i] for i in keep))
    outcome = sweep.run(small, tmp_path / "mixed", progress=False, log=None)
    assert outcome.complete and outcome.computed == 2
    with open(tmp_path / "mixed" / "cells.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["scheme"] for r in rows] == ["receive_scaling", "anonymous"]
    assert rows[0]["score"] and not rows[0]["return"] and rows[1]["return"] and not rows[1]["score"]
    assert rows[0]["nu"] == "0.04" and rows[1]["nu"] == ""
    with open(tmp_path / "mixed" / "summary.csv", newline="") as fh:
        summary = list(csv.DictReader(fh))
    assert [(r["scheme"], r["policy"]) for r in summary] == [("receive_scaling", "EqualAlloc"),
                                                             ("anonymous", "PaperSetting")]


def test_receive_scaling_cell_keys_are_unchanged():
    """Keys computed before the sweep went through baselines.<scheme>.sweep: records of earlier runs are reused."""
    p = sweep.plan({"name": "tiny", "scenarios": ["paper-mnist"], "rounds": 20,
                    "policies": ["EqualAlloc", {"policy": "AdaScale", "params": {"V": 2.0}}], "nu": [0.04],
                    "seeds": [0, 1]})
    assert p.keys == ("bb0eacd34cc52106b73a315e", "03236077efcd36242e79f762", "a7622a445a90187e47d50d3a",
                      "0adc0f966c698adff92c8f6c")


@pytest.mark.parametrize("path", sorted(Path(__file__).resolve().parents[3].glob("examples/sweep_*.yaml")),
                         ids=lambda p: p.name)
def test_the_example_configs_plan(path):
    p = sweep.plan(sweep.load_config(path))
    assert p.cells and len(set(p.keys)) == len(p.cells)
