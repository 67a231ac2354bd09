"""``otagym evaluate`` with trained models and callables: all realisations of a budget in one vector env, with the
numbers of ``otagym compare``'s one-at-a-time play; mistakes of the user's policy in one line."""

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("rliable")

from baselines.receive_scaling.compare import PolicySpec, evaluate_cells  # noqa: E402
from otagym.cli.commands import main  # noqa: E402
from otagym.cli.evaluate import evaluate, resolve_policy  # noqa: E402
from otagym.tasks import EVALUATION_SEEDS, TASKS, task_scenario  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
ZOO_PPO = ROOT / "agents" / "zoo" / "iid" / "ppo" / "model.zip"
IID = "otagym/ReceiveScalingIID-v0"


@pytest.mark.slow
def test_a_trained_model_plays_batched_with_the_scores_of_compares_one_at_a_time_play(one_torch_thread):
    from agents.policy import AgentPolicy, load_model, run_metadata

    seeds = EVALUATION_SEEDS[:3]
    name, spec = resolve_policy(str(ZOO_PPO), IID)
    assert name == "ppo" and not isinstance(spec, PolicySpec)
    scores, costs = evaluate(IID, spec, seeds)
    assert costs is None  # budget mode meets nu by construction
    model, kw = load_model(ZOO_PPO), run_metadata(ZOO_PPO)["env_kwargs"]
    one = PolicySpec(lambda nu, p: AgentPolicy(model, nu=nu, env_kwargs=kw))  # otagym compare's PPO:PATH
    for nu in TASKS[IID].eval_nus:
        alone = [evaluate_cells(task_scenario(IID), one, [(nu, s)])[0]["score"] for s in seeds]
        np.testing.assert_allclose(scores[str(nu)], alone, rtol=0, atol=1e-6)
        assert min(alone) > 90.0  # a trained agent near the offline optimum, not a degenerate zero


def test_a_model_plays_on_the_torch_threads_asked_one_by_default(tmp_path, one_torch_thread):
    """A small MLP plays its 384 envs a step 2-3x faster on one thread than on torch's default on a busy 2-core
    machine (benchmarks/bench_evaluate.py), so evaluate sets torch's thread count once it has loaded a model."""
    import torch

    torch.set_num_threads(3)
    for i, (flag, threads) in enumerate((([], 1), (["--torch-threads", "2"], 2), (["--torch-threads", "0"], 2))):
        out = tmp_path / f"{i}.json"
        assert main(["evaluate", IID, str(ZOO_PPO), "--seeds", "2", "--reps", "10", "--out", str(out), *flag]) == 0
        assert torch.get_num_threads() == threads, flag


def test_an_existing_result_is_replaced_only_with_force(tmp_path, capsys):
    out = tmp_path / "r.json"
    out.write_text("a user's file")
    code = main(["evaluate", IID, "EqualAlloc", "--seeds", "2", "--reps", "10", "--out", str(out)])
    assert code == 2 and "exists; give --force" in capsys.readouterr().err and out.read_text() == "a user's file"
    assert main(["evaluate", IID, "EqualAlloc", "--seeds", "2", "--reps", "10", "--out", str(out), "--force"]) == 0
    assert json.loads(out.read_text())["name"] == "EqualAlloc"
    said = capsys.readouterr().out  # an analytic policy trained for no steps: nothing to state
    assert "an analytic policy is a reference" in said and "env_steps" not in said and "run(s)" not in said
    assert json.loads(out.read_text())["env_steps"] == 0
    assert main(["report", str(out)]) == 0  # the report reads it the same way
    said = capsys.readouterr().out
    assert "an analytic policy is a reference" in said and "env_steps unknown" not in said and "run(s)" not in said


def test_a_model_of_another_task_is_refused_in_one_line_naming_the_observation_shape(tmp_path, capsys):
    code = main(["evaluate", "otagym/CDPB-v1", str(ZOO_PPO), "--seeds", "2", "--out", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"otagym evaluate: error: policy {str(ZOO_PPO)!r}")
    assert "observation shape is (36,) and otagym/CDPB-v1's is (5,)" in err
    assert not (tmp_path / "o.json").exists()


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    """Two modules with a function ``act`` each (a the zero action, b the largest) and one whose ``act`` raises."""
    (tmp_path / "pol_a.py").write_text("import numpy as np\ndef act(obs):\n    return np.zeros(len(obs))\n")
    (tmp_path / "pol_b.py").write_text("import numpy as np\ndef act(obs):\n    return np.ones(len(obs))\n")
    (tmp_path / "pol_bad.py").write_text(textwrap.dedent("""
        import numpy as np

        def act(obs):
            raise RuntimeError("no policy here")

        def unclipped(obs):
            return np.full(len(obs), 5.0)

        def undefined(obs):
            return np.full(len(obs), np.nan)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_raising_callable_ends_in_one_line_naming_the_policy_and_the_error(user_modules, capsys):
    code = main(["evaluate", "otagym/CDPB-v1", "pol_bad:act", "--seeds", "2"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert err == "otagym evaluate: error: policy 'pol_bad:act' raised RuntimeError: no policy here\n"
    assert not (user_modules / "results").exists()


@pytest.mark.parametrize("function, words", [
    ("unclipped", "returned actions outside the env's action space [-1, 1]: from 5 to 5 (clip them, as SB3's "
                  "predict does)"),
    ("undefined", "returned NaN actions (the env's actions lie in [-1, 1])")])
def test_actions_outside_the_space_end_in_one_line_naming_the_policy(user_modules, capsys, function, words):
    code = main(["evaluate", "otagym/ReceiveScalingCMDP-v1", f"pol_bad:{function}", "--seeds", "2"])
    err = capsys.readouterr().err
    assert code == 1 and err == f"otagym evaluate: error: policy 'pol_bad:{function}' {words}\n"


def test_callables_are_named_after_module_and_function(user_modules, capsys):
    for module in ("pol_a", "pol_b"):
        assert main(["evaluate", "otagym/CDPB-v1", f"{module}:act", "--seeds", "2", "--reps", "50"]) == 0
    out = user_modules / "results" / "evaluate" / "CDPB-v1"
    assert sorted(p.name for p in out.iterdir()) == ["pol_a.act.json", "pol_b.act.json"]
    a, b = (json.loads((out / f"pol_{m}.act.json").read_text()) for m in "ab")
    assert (a["name"], b["name"]) == ("pol_a.act", "pol_b.act")
    # b's action is rho = P/W^2 every round, MaxRho, the score's 0; a's is the middle of the range
    np.testing.assert_allclose(b["scores"]["1.0"], 0.0, atol=1e-9)
    assert np.all(np.abs(a["scores"]["1.0"]) > 1.0)


@pytest.fixture
def no_evaluation(monkeypatch):
    """``otagym evaluate``'s computation, replaced by one that fails the test if it runs."""
    import otagym.cli.evaluate as module

    def run(*args, **kwargs):
        raise AssertionError("evaluate computed before checking --out")
    monkeypatch.setattr(module, "evaluate", run)


@pytest.mark.parametrize("where,reason", [
    ("folder", "'{out}' is a folder; give the path of the file to write"),
    ("file.txt/o.json", "cannot write '{out}': '{parent}' is a file, not a folder"),
    ("file.txt/sub/o.json", "cannot write '{out}': Not a directory")])
def test_evaluate_checks_out_before_any_work_naming_the_users_path(tmp_path, no_evaluation, where, reason, capsys):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file.txt").write_text("not a folder")
    out = tmp_path / where
    with pytest.raises(SystemExit) as exc:
        main(["evaluate", IID, "EqualAlloc", "--out", str(out)])
    err = capsys.readouterr().err  # argparse's usage, then one line naming the path
    assert exc.value.code == 2 and "Traceback" not in err and ".write-check" not in err
    assert err.splitlines()[-1] == ("otagym evaluate: error: argument --out: "
                                    + reason.format(out=out, parent=out.parent))


def test_evaluate_checks_its_default_out_before_any_work(tmp_path, no_evaluation, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").write_text("a file where the results folder goes")
    assert main(["evaluate", IID, "EqualAlloc"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("otagym evaluate: error: argument --out: cannot write "
                          "'results/evaluate/ReceiveScalingIID-v0/EqualAlloc.json'") and err.count("\n") == 1


def test_ctrl_c_ends_evaluate_in_one_line_with_exit_code_130(tmp_path, monkeypatch, capsys):
    import otagym.cli.evaluate as module

    monkeypatch.setattr(module, "evaluate", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    code = main(["evaluate", IID, "EqualAlloc", "--out", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert code == 130 and err.strip() == "otagym evaluate: interrupted; nothing was written"
    assert not (tmp_path / "o.json").exists()


def test_evaluate_removes_a_dead_writers_temporary_beside_its_out(tmp_path):
    """A temporary an evaluation killed mid-write left beside --out (its writer a process of this host that no longer
    exists) is removed; a live writer's stays."""
    import os

    from otagym import _io

    dead = tmp_path / f".e.json.{_io._host()}-999999999.abcdefgh.tmp"
    live = tmp_path / f".e.json.{_io._host()}-{os.getpid()}.abcdefgh.tmp"
    dead.write_text("{")
    live.write_text("{")
    assert main(["evaluate", "otagym/CDPB-v1", "MaxRho", "--seeds", "2", "--reps", "50",
                 "--out", str(tmp_path / "e.json")]) == 0
    assert not dead.exists() and live.exists() and (tmp_path / "e.json").is_file()


def _plain_loop_return(task_id, seed, action):
    """A constant env action's return on the realisation of ``seed``, played as a plain Gymnasium user plays it."""
    import gymnasium as gym

    from otagym.tasks import evaluation_options

    env = gym.make(task_id)
    env.reset(seed=5, options=evaluation_options(task_id, TASKS[task_id].eval_nus[0], seed))
    total, done = 0.0, False
    while not done:
        _, reward, terminated, truncated, _ = env.step(np.array([action]))  # float64, as the batched play
        total, done = total + float(reward), terminated or truncated
    return total


@pytest.mark.slow
def test_any_seeds_are_scored_against_anchors_played_there_and_cached(user_modules, capsys, monkeypatch):
    """``--seeds A:B`` off the frozen set: CDPB's anchors are constant actions (MaxRho = +1, 0; BestConstant, 100),
    so the score of the zero action is computed here by hand, from three plain Gymnasium loops per seed."""
    from baselines.benchmark import best_constant_action

    monkeypatch.setenv("OTAGYM_CACHE_DIR", str(user_modules / "cache"))
    task, seeds = "otagym/CDPB-v1", (500, 501, 502)
    assert main(["evaluate", task, "pol_a:act", "--seeds", "500:503", "--reps", "50", "--out", "a.json"]) == 0
    out = capsys.readouterr().out
    assert "realisations: seeds 500..502, not the frozen evaluation set" in out
    got = json.loads((user_modules / "a.json").read_text())
    assert got["seeds"] == list(seeds) and got["frozen_seeds"] is False
    best = best_constant_action(task)
    by_hand = [100 * (_plain_loop_return(task, s, 0.0) - _plain_loop_return(task, s, 1.0))
               / (_plain_loop_return(task, s, best) - _plain_loop_return(task, s, 1.0)) for s in seeds]
    np.testing.assert_allclose(got["scores"]["1.0"], [by_hand], rtol=1e-9)  # one run x three realisations
    cached = list((user_modules / "cache" / "references").glob("CDPB-v1-500-502-3-*.json"))
    assert len(cached) == 1 and json.loads(cached[0].read_text())["seeds"] == list(seeds)
    cached[0].write_text(json.dumps({**json.loads(cached[0].read_text()), "seeds": [1, 2, 3]}))  # not these seeds'
    assert main(["evaluate", task, "pol_a:act", "--seeds", "500:503", "--reps", "50", "--out", "b.json"]) == 0
    assert json.loads((user_modules / "b.json").read_text())["scores"] == got["scores"]
    assert json.loads(cached[0].read_text())["seeds"] == list(seeds)  # recomputed, not trusted


@pytest.mark.parametrize("text", ["0", "129", "5:5", "7:3", "-1:4", "1:5000", "a:b", "1.5"])
def test_a_bad_seed_set_is_refused_naming_both_forms(text, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["evaluate", "otagym/CDPB-v1", "MaxRho", f"--seeds={text}"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "argument --seeds: must be K, an integer in [1, 128]" in err and "A:B" in err
