"""The device task's results table: the score's anchors and the columns, from synthetic episodes."""

import numpy as np
import pytest
import scipy.stats

pytest.importorskip("rliable")

from benchmarks.multiagent_results import markdown, summarise  # noqa: E402


def record(returns, left=0):
    return {"returns": list(returns), "worst_privacy_used": [0.5] * len(returns), "devices_left": [left] * len(returns)}


def runs(returns):
    return [{"seed": s, "steps": 10, "train_seconds": 60.0, "validation": record(returns),
             "evaluation": record(returns), "first_round_actions": [-1.0, -0.0]} for s in range(3)]


def test_scores_run_from_the_papers_rule_to_the_ceiling_over_the_typical_room():
    rng = np.random.default_rng(0)
    paper = -1.0 + 0.01 * rng.standard_normal(64)
    ceiling = paper + 0.1 + 0.02 * rng.standard_normal(64)
    paper[0] = -3.76  # every device left under the paper's rule: a room 30 times the typical one
    evaluated = {"PaperRule": record(paper, left=3), "BestCommonConstant": record(paper, left=3),
                 "PerDeviceConstants": record(ceiling), "FullCSIBound": record(paper + 0.5)}
    refs = {"common_action": -1.0, "common_validation_return": -1.0, "per_device_actions": [-1.0] * 10,
            "per_device_validation_return": -0.9, "paper_validation_return": -1.0}
    summary = summarise("otagym/CDPB-Devices-v0", refs, evaluated,
                        {"IPPO": runs(paper + 0.05), "MAPPO": runs(paper + 0.08)})
    stats = summary["statistics"]
    typical = scipy.stats.trim_mean(ceiling - paper, 0.25)  # the score's 100, which the outlier does not move
    assert typical == pytest.approx(0.1, abs=0.01) and np.mean(ceiling - paper) > 0.14
    assert stats["PaperRule"]["mean"] == 0.0 and stats["PerDeviceConstants"]["iqm"] == pytest.approx(100, abs=1.5)
    assert stats["IPPO"]["mean"] == pytest.approx(100 * 0.05 / typical)
    assert stats["MAPPO"]["mean"] == pytest.approx(100 * 0.08 / typical)
    assert stats["FullCSIBound"]["mean"] == pytest.approx(100 * 0.5 / typical)
    assert stats["PaperRule"]["share_over_budget"] == 1.0 and stats["IPPO"]["share_over_budget"] == 0.0
    assert summary["room_return"] == pytest.approx(np.mean(ceiling - paper))
    assert summary["room_return_iqm"] == pytest.approx(typical)
    assert summary["room_points"] == pytest.approx(100 * np.mean(ceiling - paper) / abs(np.mean(paper)))
    assert summary["mappo_over_ippo"][0] == 1.0  # better on every realisation
    table = markdown({"otagym/CDPB-Devices-v0": summary})
    assert "| IPPO | " in table and "| MAPPO | " in table and "weakest device first: -1, 0;" in table
    assert "MAPPO over IPPO: probability of improvement 1.00" in table and ": told apart." in table


def test_a_task_whose_papers_rule_spends_every_budget_scores_from_its_floor():
    """On the fifty devices' task the score's 0 is the best common constant, not the paper's rule (far below it), and
    a task without trained teams still gets its section."""
    rng = np.random.default_rng(1)
    floor = -1.0 + 0.01 * rng.standard_normal(32)
    evaluated = {"PaperRule": record(floor - 7.0, left=50), "BestCommonConstant": record(floor, left=2),
                 "PerDeviceConstants": record(floor + 0.4), "FullCSIBound": record(floor + 0.9)}
    refs = {"common_action": -0.7, "common_validation_return": -1.0, "per_device_actions": [-0.6] * 50,
            "per_device_validation_return": -0.6, "paper_validation_return": -8.0}
    summary = summarise("otagym/CDPB-Devices50-v0", refs, evaluated, {})
    stats = summary["statistics"]
    assert stats["BestCommonConstant"]["mean"] == 0.0 and stats["PerDeviceConstants"]["mean"] == pytest.approx(100)
    assert stats["PaperRule"]["mean"] == pytest.approx(-1750) and summary["room_points"] == pytest.approx(40, rel=0.02)
    table = markdown({"otagym/CDPB-Devices50-v0": summary})
    assert "Score 0: BestCommonConstant; 100: PerDeviceConstants" in table and "No learned team trained yet" in table
    assert "from -0.6 to -0.6 (median -0.6)" in table


def test_a_run_of_another_length_is_not_read_back_as_this_one(tmp_path):
    from benchmarks.multiagent_results import main, other_length

    folder = tmp_path / "CDPB-Devices-v0" / "runs" / "ippo" / "seed_90000"
    folder.mkdir(parents=True)
    assert other_length(folder, 100) is None  # nothing there yet: a fresh run
    (folder / "run.json").write_text('{"settings": {"total_timesteps": 100}}')
    assert other_length(folder, 100) is None  # the same length: resumed
    (folder / "scores.json").write_text('{"steps": 100}')
    assert "holds a run of 100 device steps, not 200: give --steps 100" in other_length(folder, 200)
    with pytest.raises(SystemExit) as stopped:  # before anything is trained or scored
        main(["--task", "otagym/CDPB-Devices-v0", "--steps", "200", "--teams", "ippo", "--out", str(tmp_path)])
    assert stopped.value.code == 2
