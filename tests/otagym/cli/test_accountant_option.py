"""The PLD accountant, opt-in in ``otagym compare --accountant pld`` and a sweep's ``accountant: pld`` (issue 37): the
comparison's table and JSON gain ``epsilon_pld`` beside ``epsilon`` only when asked for, a sweep records
``epsilon_pld`` for receive scaling and CDPB cells, a default config's cell keys stay theirs, bad values are refused
naming the key or option, and CDPB's comparison refuses the option.

Tiny grids: 20 rounds, 2 seeds."""

from __future__ import annotations

import csv
import json

import pytest

from otagym.cli import sweep
from otagym.cli.commands import main

COMPARE = ["compare", "--rounds", "20", "--seeds", "2", "--nu", "0.04", "--no-progress", "--policies", "EqualAlloc",
           "AdaScale"]
RECEIVE_SCALING = {"name": "tiny", "scenarios": ["paper-mnist"], "rounds": 20,
                   "policies": ["EqualAlloc", {"policy": "AdaScale", "params": {"V": 2.0}}], "nu": [0.04],
                   "seeds": [0, 1]}
CDPB = {"name": "cdpb", "scheme": "cdpb", "rounds": 20, "policies": ["hmin-based"], "seeds": [0, 1]}


def _csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
def test_compare_reports_the_pld_epsilon_beside_the_rdp_one_only_when_asked(tmp_path, capsys):
    assert main(COMPARE + ["--out", str(tmp_path / "rdp")]) == 0
    plain = capsys.readouterr().out
    assert main(COMPARE + ["--accountant", "pld", "--out", str(tmp_path / "pld")]) == 0
    pld = capsys.readouterr().out
    head = next(line for line in pld.splitlines() if line.startswith("policy"))
    assert "eps PLD" not in plain and head.index("eps PLD") > head.index("eps (delta")
    rows = {name: json.loads((tmp_path / name / "compare.json").read_text())["rows"] for name in ("rdp", "pld")}
    assert all("epsilon_pld" not in r for r in rows["rdp"])
    for without, with_pld in zip(rows["rdp"], rows["pld"]):
        keys = list(with_pld)
        assert keys.index("epsilon_pld") == keys.index("epsilon_ci95") + 1 and "epsilon_pld_ci95" in keys
        assert 0 < with_pld["epsilon_pld"] < with_pld["epsilon"]  # tighter than the RDP conversion
        # the option adds columns and changes no other number
        assert {k: v for k, v in with_pld.items() if "pld" not in k and k != "wall_s"} == \
            {k: v for k, v in without.items() if k != "wall_s"}
    assert "epsilon_pld" in _csv(tmp_path / "pld" / "compare.csv")[0]
    assert "epsilon_pld" not in _csv(tmp_path / "rdp" / "compare.csv")[0]


def test_compare_refuses_the_accountant_for_cdpb_and_a_bad_value(tmp_path, capsys):
    for argv, needle in ((["--scheme", "cdpb", "--accountant", "pld"], "--scheme cdpb does not use --accountant"),
                         (["--accountant", "prv"], "argument --accountant: invalid choice: 'prv'")):
        with pytest.raises(SystemExit) as err:
            main(["compare", *argv, "--out", str(tmp_path)])
        assert err.value.code == 2 and needle in capsys.readouterr().err


@pytest.mark.slow
def test_a_pld_sweep_records_epsilon_pld_for_receive_scaling_and_cdpb(tmp_path):
    default = sweep.plan(RECEIVE_SCALING)
    p = sweep.plan({**RECEIVE_SCALING, "accountant": "pld"})
    assert all("accountant" not in c for c in default.cells) and all(c["accountant"] == "pld" for c in p.cells)
    assert not set(p.keys) & set(default.keys)  # a pld cell is another cell
    assert sweep.plan({**RECEIVE_SCALING, "accountant": "rdp"}).keys == default.keys
    for config in (p, sweep.plan({**CDPB, "accountant": "pld"})):
        outcome = sweep.run(config, tmp_path / config.name, progress=False, log=None)
        assert outcome.complete
        cells = _csv(tmp_path / config.name / "cells.csv")
        columns = list(cells[0])
        assert columns.index("epsilon_pld") == columns.index("epsilon") + 1
        assert all(0 < float(c["epsilon_pld"]) <= float(c["epsilon"]) for c in cells)
        assert "epsilon_pld_ci95" in _csv(tmp_path / config.name / "summary.csv")[0]
    plain = sweep.plan(CDPB)
    assert sweep.run(plain, tmp_path / "plain", progress=False, log=None).complete
    assert "epsilon_pld" not in _csv(tmp_path / "plain" / "cells.csv")[0]
    assert "epsilon_pld" not in _csv(tmp_path / "plain" / "summary.csv")[0]


@pytest.mark.parametrize("value", ["prv", ["rdp", "pld"], 1, None])
def test_a_bad_accountant_is_refused_naming_the_key(value):
    with pytest.raises(sweep.ConfigError, match=r"^accountant must be one of 'rdp', 'pld'; got"):
        sweep.plan({**RECEIVE_SCALING, "accountant": value})


def test_a_pld_sweep_of_anonymous_ota_needs_its_sampled_accounting():
    config = {"name": "anon", "scheme": "anonymous", "rounds": 20, "seeds": [0], "accountant": "pld"}
    assert sweep.plan(config).cells[0]["accountant"] == "pld"
    with pytest.raises(sweep.ConfigError, match=r"^accountant must suit scenarios\[0\] of scheme 'anonymous'"):
        sweep.plan({**config, "scenarios": [{"preset": "paper-anonymous", "accounting": "device"}]})
