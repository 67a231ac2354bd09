"""The device task's results table: the score's anchors and the columns, from synthetic episodes."""

import numpy as np
import pytest

pytest.importorskip("rliable")

from benchmarks.multiagent_results import markdown, summarise  # noqa: E402


def record(returns, left=0):
    return {"returns": list(returns), "worst_privacy_used": [0.5] * len(returns), "devices_left": [left] * len(returns)}


def test_scores_run_from_the_papers_rule_to_the_ceiling_over_the_mean_room():
    rng = np.random.default_rng(0)
    paper = -1.0 + 0.01 * rng.standard_normal(64)
    ceiling = paper + 0.1 + 0.02 * rng.standard_normal(64)
    evaluated = {"PaperRule": record(paper, left=3), "BestCommonConstant": record(paper, left=3),
                 "PerDeviceConstants": record(ceiling), "FullCSIBound": record(paper + 0.5)}
    halfway = paper + 0.05
    runs = [{"seed": s, "steps": 10, "train_seconds": 1.0, "validation": record(halfway), "evaluation": record(halfway)}
            for s in range(3)]
    refs = {"common_action": -1.0, "common_validation_return": -1.0, "per_device_actions": [-1.0] * 10,
            "per_device_validation_return": -0.9, "paper_validation_return": -1.0}
    summary = summarise(refs, evaluated, runs)
    stats = summary["statistics"]
    assert stats["PaperRule"]["mean"] == 0.0 and stats["PerDeviceConstants"]["mean"] == pytest.approx(100.0)
    assert stats["IPPO"]["mean"] == pytest.approx(100 * 0.05 / np.mean(ceiling - paper))
    assert stats["FullCSIBound"]["mean"] == pytest.approx(100 * 0.5 / np.mean(ceiling - paper))
    assert stats["PaperRule"]["share_over_budget"] == 1.0 and stats["IPPO"]["share_over_budget"] == 0.0
    assert summary["room_return"] == pytest.approx(np.mean(ceiling - paper))
    table = markdown({**summary, "ippo_first_round_actions": [[-1.0, -0.0]]})
    assert "| IPPO | " in table and "weakest device first: -1, 0)" in table
