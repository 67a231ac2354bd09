"""``otagym evaluate`` on a devices-as-agents task: the references, a callable team and a trained IPPO model scored
with the robust score against the anchors played on the same realisations, written as a result ``otagym report``
accepts; mistakes in one line."""

import json

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("rliable")
pytest.importorskip("jsonschema")

from baselines.cdpb.devices import device_references, evaluate_devices  # noqa: E402
from otagym.cli.commands import main  # noqa: E402
from otagym.cli.report import check_result, submission_gaps  # noqa: E402
from otagym.tasks import DEVICE_TASKS, robust_score  # noqa: E402

TASK = "otagym/CDPB-Devices-v0"
SEEDS = DEVICE_TASKS[TASK].eval_seeds[:6]
TEAM = '''
import numpy as np

def strong_raise(obs):
    """The stored ceiling's actions, from the observation batch."""
    a = np.full(obs.shape[:2] + (1,), -1.0)
    a[:, -3:, 0] = (-0.9, -0.7, -0.5)
    return a

def flat(obs):
    return np.zeros(obs.shape[:2])

def loud(obs):
    raise RuntimeError("boom")

def unclipped(obs):
    return np.full(obs.shape[:2] + (1,), 5.0)

def undefined(obs):
    return np.full(obs.shape[:2] + (1,), np.nan)
'''


def _evaluate(tmp_path, policy, *flags):
    out = tmp_path / f"{policy.replace('/', '_').replace(':', '_')}.json"
    code = main(["evaluate", TASK, policy, "--seeds", str(len(SEEDS)), "--reps", "50", "--out", str(out), *flags])
    return code, (json.loads(out.read_text()) if out.exists() else None)


def test_the_references_and_a_callable_team_score_against_the_anchors_on_the_same_realisations(tmp_path, capsys,
                                                                                                   monkeypatch):
    """PaperRule scores 0 and is over its budget (a device leaves) on every realisation; a callable from the current
    folder playing the ceiling's stored actions scores what robust_score gives the ceiling's returns there, an IQM
    of 100 up to the outer quartiles; both files pass the result schema and the check of their numbers."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "team.py").write_text(TEAM)
    code, paper = _evaluate(tmp_path, "PaperRule")
    assert code == 0 and paper["scores"] == {"20.0": [[0.0] * len(SEEDS)]}
    assert min(paper["cost_ratios"]["20.0"][0]) > 1.0 and paper["task_score"]["over_limit_share"] == 1.0
    code, team = _evaluate(tmp_path, "team:strong_raise", "--env-steps", "0")
    assert code == 0 and team["name"] == "team.strong_raise"
    refs = device_references(TASK)
    zero, hundred = (evaluate_devices(TASK, refs[n], SEEDS).returns for n in ("PaperRule", "PerDeviceConstants"))
    np.testing.assert_allclose(team["scores"]["20.0"][0], robust_score(hundred, zero, hundred), rtol=1e-12)
    assert max(team["cost_ratios"]["20.0"][0]) < 1.0 and team["task_score"]["over_limit_share"] == 0.0
    for result in (paper, team):
        check_result(result)
        assert any("frozen evaluation set" in gap for gap in submission_gaps(result))
        assert not any("benchmark suite" in gap for gap in submission_gaps(result))  # a benchmark of its own
    assert main(["report", str(tmp_path / "PaperRule.json"), str(tmp_path / "team_strong_raise.json")]) == 0
    assert "CDPB-Devices-v0" in capsys.readouterr().out


def test_mistakes_are_named_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "team.py").write_text(TEAM)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "model.zip").write_bytes(b"not a model")
    (tmp_path / "other" / "run.json").write_text(json.dumps({"task": "otagym/CDPB-v1"}))
    for policy, code, words in (("team:flat", 1, "must return actions (N, K, A)"),
                                ("team:loud", 1, "policy 'team:loud' raised RuntimeError: boom"),
                                ("team:unclipped", 1, "policy 'team:unclipped' returned actions outside the env's "
                                 "action space [-1, 1]: from 5 to 5"),
                                ("team:undefined", 1, "policy 'team:undefined' returned NaN actions"),
                                ("team:missing", 2, "cannot import missing from team"),
                                ("Nobody", 2, "must be a reference of otagym/CDPB-Devices-v0"),
                                (str(tmp_path / "other" / "model.zip"), 2, "naming otagym/CDPB-Devices-v0; found "
                                 "'otagym/CDPB-v1'")):
        assert _evaluate(tmp_path, policy)[0] == code, policy
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and words in err and "Traceback" not in err, err


@pytest.mark.slow
def test_a_trained_team_is_evaluated_from_its_model(tmp_path, one_torch_thread):
    """``otagym train --algo ippo`` then ``otagym evaluate`` on its model.zip: the shared network plays every device,
    the result states the device steps it trained for."""
    pytest.importorskip("supersuit")
    run = tmp_path / "ippo"
    assert main(["train", "--algo", "ippo", "--task", TASK, "--steps", "2560", "--run-dir", str(run)]) == 0
    code, result = _evaluate(tmp_path, str(run / "model.zip"))
    assert code == 0 and result["name"] == "ippo" and result["env_steps"] >= 2560
    assert np.shape(result["scores"]["20.0"]) == (1, len(SEEDS)) and np.isfinite(result["scores"]["20.0"]).all()
    check_result(result)


def test_on_the_fifty_devices_task_the_floor_is_the_score_s_zero(tmp_path):
    """Where the paper's rule spends every budget the score runs from the best common constant: it scores 0 on every
    realisation and the paper's rule far below it."""
    task = "otagym/CDPB-Devices50-v0"
    out = tmp_path / "floor.json"
    assert main(["evaluate", task, "BestCommonConstant", "--seeds", "4", "--reps", "50", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["scores"] == {"5.0": [[0.0] * 4]}
    check_result(result)
    refs = device_references(task)
    seeds = DEVICE_TASKS[task].eval_seeds[:4]
    floor, paper, ceiling = (evaluate_devices(task, refs[n], seeds).returns
                             for n in ("BestCommonConstant", "PaperRule", "PerDeviceConstants"))
    assert (paper < floor).all() and (ceiling > floor).all()
