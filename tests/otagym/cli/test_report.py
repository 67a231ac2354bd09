"""Result files: ``otagym evaluate`` writes what the schema describes, ``otagym report`` checks them (the schema,
the task's budgets and realisations, numbers that are their scores') and prints one number per task and the suite's."""

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

pytest.importorskip("rliable")
pytest.importorskip("jsonschema")

from otagym import __version__  # noqa: E402
from otagym.cli.commands import main  # noqa: E402
from otagym.cli.report import SCHEMA, check_result, pooled_table, task_score  # noqa: E402
from otagym.tasks import BENCHMARK, TASKS, reference_scores  # noqa: E402


def _result(task_id, runs=5, seed=0):
    """A result of ``runs`` runs on the task's frozen set, its scores and costs drawn at random, its numbers its."""
    rng, task = np.random.default_rng(seed), TASKS[task_id]
    keys = [str(float(nu)) for nu in task.eval_nus]
    scores = {k: rng.normal(60, 30, (runs, len(task.eval_seeds))).tolist() for k in keys}
    costs = {k: rng.uniform(0.9, 1.02, (runs, len(task.eval_seeds))).tolist() for k in keys}
    return {"schema": SCHEMA, "otagym_version": __version__, "task": task_id, "name": "agent",
            "policies": [f"runs/s{i}/model.zip" for i in range(runs)], "runs": runs, "env_steps": 5_000_000,
            "seeds": list(task.eval_seeds), "frozen_seeds": True, "scores": scores, "cost_ratios": costs,
            "summary": {}, "task_score": task_score(*pooled_table(task_id, scores, costs, task.eval_seeds), reps=50)}


def test_a_suite_submission_gets_one_number_per_task_and_the_suites_pooled_iqm(tmp_path, capsys):
    paths = []
    for i, task_id in enumerate(BENCHMARK):
        paths.append(tmp_path / f"{i}.json")
        paths[-1].write_text(json.dumps(_result(task_id, seed=i)))
    assert main(["report", *map(str, paths), "--reps", "50"]) == 0
    out = capsys.readouterr().out
    assert "not a submission" not in out
    pooled = []
    for i, task_id in enumerate(BENCHMARK):  # by hand: the feasible score, scipy's 25% trimmed mean of the pool
        r = _result(task_id, seed=i)
        for k in r["scores"]:
            s, c = np.array(r["scores"][k]), np.array(r["cost_ratios"][k])
            floor = np.array(reference_scores(task_id)["scores"]["FullPower"][k])
            pooled.append(np.where(c > 1 + 1e-6, floor - 100 * (c - 1), s))
    suite = [line for line in out.splitlines() if line.startswith("suite (4 tasks pooled)")]
    assert len(suite) == 1 and f"{stats.trim_mean(np.concatenate(pooled, axis=1), 0.25, axis=None):.1f} [" in suite[0]


def test_runs_of_another_task_or_one_training_seed_are_not_a_submission_and_each_file_is_a_row(tmp_path, capsys):
    from otagym.cli.report import submission_gaps

    task_id = BENCHMARK[0]
    own = [{"task": task_id, "seed": s} for s in range(5)]
    assert submission_gaps({**_result(task_id), "trained": own}) == []
    other = [*own[:4], {"task": BENCHMARK[1], "seed": 4}]
    assert submission_gaps({**_result(task_id), "trained": other}) == [f"runs trained on another task ({BENCHMARK[1]})"]
    copies = [{"task": task_id, "seed": 4}] * 5
    assert submission_gaps({**_result(task_id), "trained": copies}) == [
        "runs share a training seed: a submission pools independent ones"]
    with pytest.raises(ValueError, match=r"trained: must have one entry a run \(5\); got 4"):
        check_result({**_result(task_id), "trained": own[:4]})
    paths = [tmp_path / f"{name}.json" for name in ("ippo", "mappo")]
    for path in paths:
        path.write_text(json.dumps({**_result(task_id), "name": path.stem, "trained": own}))
    assert main(["report", *map(str, paths), "--reps", "50"]) == 0
    rows = capsys.readouterr().out.splitlines()
    short = task_id.split("/")[-1]
    assert rows[1].startswith(f"{short}: ippo ") and rows[2].startswith(f"{short}: mappo ")


def test_evaluate_refuses_a_run_given_twice_and_states_each_runs_training_budget_task_and_seed(tmp_path, capsys):
    folder = Path(__file__).resolve().parents[3] / "agents" / "zoo" / "ReceiveScalingCMDP-v1" / "budget_apg"
    model, record = str(folder / "model.zip"), json.loads((folder / "run.json").read_text())
    out = tmp_path / "r.json"
    for again in (f"{folder}/./model.zip", str(folder)):  # the same file spelled otherwise, the folder it is in
        assert main(["evaluate", "otagym/ReceiveScalingCMDP-v1", model, again, "--seeds", "2", "--out",
                     str(out)]) == 2
        assert f"policy {again!r} is given twice (as {model!r})" in capsys.readouterr().err and not out.exists()
    assert main(["evaluate", "otagym/ReceiveScalingCMDP-v1", model, "--seeds", "2", "--reps", "10", "--out",
                 str(out)]) == 0
    result = json.loads(out.read_text())
    assert record["selected"]["steps"] < record["total_timesteps"]  # a checkpoint before the run's end
    assert result["env_steps"] == record["total_timesteps"]  # the run's steps (whole batches), not the checkpoint's
    assert result["trained"] == [{"task": "otagym/ReceiveScalingCMDP-v1", "seed": record["seed"]}]


def test_a_trained_model_whose_steps_nobody_counted_is_not_called_a_reference():
    """A CMA-ES search's linear policy is saved with num_timesteps 0: its steps are unknown (or its record's
    episodes of its task's rounds), never 0, which is an analytic policy's."""
    from otagym.cli.evaluate import _run_record

    zoo = Path(__file__).resolve().parents[3] / "agents" / "zoo"
    assert _run_record(str(zoo / "iid" / "linear_crn" / "model.zip"))["env_steps"] is None
    record = json.loads((zoo / "ReceiveScalingCMDP-v1" / "linear_crn" / "run.json").read_text())
    assert (_run_record(str(zoo / "ReceiveScalingCMDP-v1" / "linear_crn" / "model.zip"))["env_steps"]
            == record["episodes"] * TASKS["otagym/ReceiveScalingCMDP-v1"].max_episode_steps)


def test_the_suites_number_is_each_agents_own(tmp_path, capsys):
    """Two agents' submissions on the four tasks, reported together: one suite line each, never one pooling both."""
    paths = []
    for agent, seed in (("a", 0), ("b", 10)):
        for i, task_id in enumerate(BENCHMARK):
            paths.append(tmp_path / f"{agent}{i}.json")
            paths[-1].write_text(json.dumps({**_result(task_id, seed=seed + i), "name": agent}))
    assert main(["report", *map(str, paths), "--reps", "50"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("suite (4 tasks pooled)")]
    assert [line.split()[4] for line in lines] == ["a", "b"]
    pooled = [np.concatenate([pooled_table(t, r["scores"], r["cost_ratios"], r["seeds"])[0] for t, r in
                              ((t, _result(t, seed=seed + i)) for i, t in enumerate(BENCHMARK))], axis=1)
              for seed in (0, 10)]
    for line, table in zip(lines, pooled):
        assert f"{stats.trim_mean(table, 0.25, axis=None):.1f} [" in line


def test_results_that_are_not_their_scores_or_the_schemas_are_refused_naming_the_field(tmp_path, capsys):
    good = _result(BENCHMARK[0], runs=2)
    check_result(good)
    bad = {**good, "task_score": {**good["task_score"], "iqm": good["task_score"]["iqm"] + 1}}
    with pytest.raises(ValueError, match="task_score/iqm: the scores give"):
        check_result(bad)
    with pytest.raises(ValueError, match="otagym-result/1 capped an episode .* run otagym evaluate again"):
        check_result({**good, "schema": "otagym-result/1"})
    with pytest.raises(ValueError, match="result.schema.json: .*'env_steps' is a required property"):
        check_result({k: v for k, v in good.items() if k != "env_steps"})
    with pytest.raises(ValueError, match=r"scores/0.01: must be runs x realisations \(2, 128\)"):
        check_result({**good, "scores": {**good["scores"], "0.01": good["scores"]["0.01"][:1]}})
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    assert main(["report", str(path)]) == 2
    assert capsys.readouterr().err.startswith(f"otagym report: error: {path}: task_score/iqm")


@pytest.mark.slow
def test_evaluate_writes_a_result_the_checker_accepts_and_says_what_a_submission_misses(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["evaluate", "otagym/CDPB-v1", "MaxRho", "BestConstant", "--name", "two", "--seeds", "3",
                 "--reps", "50", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    check_result(result)
    assert result["runs"] == 2 and np.shape(result["scores"]["1.0"]) == (2, 3)
    np.testing.assert_allclose(result["scores"]["1.0"][0], 0.0, atol=1e-9)  # MaxRho is the score's 0
    np.testing.assert_allclose(result["scores"]["1.0"][1], 100.0, atol=1e-9)  # BestConstant its 100
    printed = capsys.readouterr().out
    assert "not a submission: otagym/CDPB-v1 is not a task of the benchmark suite" in printed
    assert main(["report", str(out)]) == 0


def test_an_interval_wider_than_ten_points_either_side_is_marked_wide():
    from otagym.cli.report import interval

    assert interval({"iqm": 50.0, "iqm_ci": [39.0, 61.0]}) == "50.0 [39.0, 61.0] (wide)"
    assert interval({"iqm": 50.0, "iqm_ci": [41.0, 60.5]}, digits=2) == "50.00 [41.00, 60.50]"


def test_the_table_sizes_its_columns_to_their_widest_cell(tmp_path, capsys):
    """A score of -4,372,422 with a wide interval once pushed every column right."""
    task_id = BENCHMARK[0]
    result = {**_result(task_id), "task_score": {**_result(task_id)["task_score"], "iqm": -4372422.0,
                                                 "iqm_ci": [-5000000.0, -4000000.0]}}
    from otagym.cli.report import _cells, _table

    lines = _table([["task: agent", "IQM [95% CI]", "CVaR 10%", "worst", "over", "runs", "env steps"],
                    _cells("a: b", result["task_score"], 5, 1000), _cells("a: c", _result(task_id)["task_score"], 5,
                                                                          None)])
    ends = {len(line) for line in lines}
    assert len(ends) == 1  # every row ends in the same column
    assert lines[1].split()[2:6] == ["-4372422.0", "[-5000000.0,", "-4000000.0]", "(wide)"]
