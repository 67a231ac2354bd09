"""The research scripts that ship models (benchmarks/: rl_results, crn_search, constrained_search, train_suite) take
the zoo as ``--zoo [DIR]`` and never replace a model there without ``--force``, refused before any work."""

import argparse

import pytest

from benchmarks.zoo import ZOO, add_zoo_arguments, refuse_shipped


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="script")
    add_zoo_arguments(parser, "<task>/<algo>")
    return parser


def test_zoo_is_off_by_default_the_checkout_zoo_bare_and_a_folder_when_named(tmp_path):
    assert _parser().parse_args([]).zoo is None
    assert _parser().parse_args(["--zoo"]).zoo == ZOO
    assert ZOO.name == "zoo" and ZOO.parent.name == "agents"
    args = _parser().parse_args(["--zoo", str(tmp_path), "--force"])
    assert args.zoo == tmp_path and args.force


def test_a_shipped_model_is_replaced_only_with_force(tmp_path, capsys):
    held, free = tmp_path / "iid" / "ppo", tmp_path / "iid" / "trpo"
    held.mkdir(parents=True)
    (held / "model.zip").write_bytes(b"")
    refuse_shipped(_parser(), [free], force=False)
    refuse_shipped(_parser(), [held, free], force=True)
    with pytest.raises(SystemExit) as exc:
        refuse_shipped(_parser(), [held, free], force=False)
    assert exc.value.code == 2
    assert f"the zoo already holds {held / 'model.zip'}: give --force" in capsys.readouterr().err


def test_constrained_search_refuses_a_held_zoo_before_searching(tmp_path, capsys):
    pytest.importorskip("stable_baselines3")
    from benchmarks import constrained_search

    task = "otagym/ReceiveScalingCMDP-v1"
    target = constrained_search.zoo_folder(tmp_path / "zoo", task)
    target.mkdir(parents=True)
    (target / "model.zip").write_bytes(b"")
    with pytest.raises(SystemExit):
        constrained_search.main(["--tasks", task, "--seeds", "1", "--generations", "10", "--out",
                                 str(tmp_path / "out"), "--zoo", str(tmp_path / "zoo")])
    assert "--force" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
