"""Devices-as-agents tasks in the task registry: declared by their scheme, listed without PettingZoo, scored with a
normaliser that one realisation cannot move."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from otagym.tasks import DEVICE_TASKS, TASKS, registered_task, robust_score

TASK = "otagym/CDPB-Devices-v0"
ROOT = Path(__file__).resolve().parents[2]


def test_the_device_task_is_registered_from_its_schemes_declaration():
    from otagym.schemes.cdpb.tasks import DEVICE_TASK_SETTINGS

    task = DEVICE_TASKS[TASK]
    assert task.scheme == "cdpb" and task.kwargs == DEVICE_TASK_SETTINGS and task.eval_nus == (20.0,)
    assert task.anchors == ("PaperRule", "PerDeviceConstants") and task.floor in task.reference_actions
    assert len(task.reference_actions["PerDeviceConstants"]) == 10 and task.constrained
    assert registered_task(TASK) is task and registered_task("otagym/CDPB-v1") is TASKS["otagym/CDPB-v1"]
    with pytest.raises(ValueError, match="devices-as-agents task .*CDPB-Devices-v0.*got 'otagym/Nope-v0'"):
        registered_task("otagym/Nope-v0")


def test_device_task_ids_are_known_without_pettingzoo():
    """The command line lists and checks them before anything heavy is imported."""
    code = ("import sys, otagym.tasks as t; assert 'otagym/CDPB-Devices-v0' in t.DEVICE_TASKS; "
            "print(sorted(m for m in ('pettingzoo', 'supersuit', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.01, 1.0), min_size=4, max_size=40), st.floats(1.0, 1e4))
def test_one_realisations_room_cannot_move_the_others_scores(rooms, blow_up):
    """The score's 100 is the IQM of the rooms: making the largest room any larger (every device leaving under the
    paper's rule) leaves every other realisation's score as it was; the mean room would move with it."""
    rooms = np.array(rooms)
    zero = -1.0 - np.arange(rooms.size) / 100
    returns = zero + 0.5 * rooms.mean()
    wider = rooms.copy()
    wider[np.argmax(rooms)] *= blow_up
    np.testing.assert_allclose(robust_score(returns, zero, zero + wider), robust_score(returns, zero, zero + rooms),
                               rtol=1e-9)
    scores = robust_score(zero + rooms, zero, zero + rooms)
    assert scipy.stats.trim_mean(scores, 0.25) == pytest.approx(100.0)
    np.testing.assert_allclose(robust_score(zero, zero, zero + rooms), 0.0)


def test_a_room_that_is_not_positive_is_refused():
    with pytest.raises(ValueError, match="room must be positive"):
        robust_score([0.0, 0.0], [0.0, 0.0], [-1.0, -1.0])


@pytest.mark.slow
@pytest.mark.parametrize("task_id", list(DEVICE_TASKS))
def test_the_stored_references_reproduce_the_searchs_validation_returns(task_id):
    """The stored actions played on the validation realisations give the returns the search reported
    (docs/multiagent_results.json), the per-device ceiling above the common floor."""
    pytest.importorskip("pettingzoo")
    from baselines.cdpb.devices import device_references, evaluate_devices

    found = json.loads((ROOT / "docs" / "multiagent_results.json").read_text())[task_id]["references"]
    refs, seeds = device_references(task_id), DEVICE_TASKS[task_id].validation_seeds
    for name, key in (("BestCommonConstant", "common_validation_return"),
                      ("PerDeviceConstants", "per_device_validation_return")):
        assert evaluate_devices(task_id, refs[name], seeds).returns.mean() == pytest.approx(found[key], rel=1e-9)
    assert found["per_device_validation_return"] > found["common_validation_return"]


def test_every_task_but_the_first_was_kept_for_its_room():
    """A device task added after the first is kept only with 20 points or more between its floor and its ceiling
    (in points of the floor's |return|, on the evaluation realisations: docs/multiagent_results.json)."""
    found = json.loads((ROOT / "docs" / "multiagent_results.json").read_text())
    assert set(found) == set(DEVICE_TASKS)
    for task_id in list(DEVICE_TASKS)[1:]:
        assert found[task_id]["room_points"] >= 20.0, task_id
