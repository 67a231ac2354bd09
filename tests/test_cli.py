"""Command-line input is refused before any computing, argparse style: one line naming the option, exit code 2
(issue 9, class 5)."""

import json

import pytest

from experiments.cli import main


@pytest.mark.parametrize("argv,needle", [
    (["compare", "--nu", "0"], "--nu: must be a finite number > 0"),
    (["compare", "--nu", "nan"], "--nu: must be a finite number > 0"),
    (["compare", "--seeds", "0"], "--seeds: must be an integer >= 1"),
    (["compare", "--rounds", "0"], "--rounds: must be an integer >= 1"),
    (["compare", "--correlation", "1.0"], "--correlation: must be a number in [0, 1)"),
    (["compare", "--correlation", "0.5"], "--correlation needs --fading gauss_markov"),
    (["compare", "--scheme", "cdpb", "--nu", "0.1"], "--scheme cdpb does not use --nu"),
    (["compare", "--scheme", "cdpb", "--rounds", "5"], "--scheme cdpb does not use --rounds"),
    (["compare", "--accounting", "sgm"], "--scheme receive_scaling does not use --accounting"),
    (["compare", "--out", "/proc/otagym-cannot-write"], "--out: cannot write into"),
    (["train", "--steps", "0"], "--steps: must be an integer >= 1"),
    (["train", "--minutes", "-1"], "--minutes: must be a finite number > 0"),
    (["rollout", "--nu", "0"], "--nu: must be a finite number > 0"),
])
def test_bad_options_exit_2_with_one_line(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err, err


def test_compare_reads_its_schemes_and_presets_from_the_registry():
    """``--scheme`` offers the registered schemes that have a comparison; ``--scenario`` their presets (issue 11)."""
    import argparse

    from experiments.compare import COMMANDS, add_compare_parser
    from otagym.schemes import SCHEMES

    assert set(COMMANDS) <= set(SCHEMES)
    sub = argparse.ArgumentParser().add_subparsers()
    add_compare_parser(sub)
    actions = {a.dest: a for a in sub.choices["compare"]._actions}
    assert actions["scheme"].choices == [name for name in SCHEMES if name in COMMANDS]
    assert sorted(actions["scenario"].choices) == sorted(p for name in COMMANDS for p in SCHEMES[name].presets)


def test_compare_takes_the_block_coherence_with_block_fading_only(tmp_path, capsys):
    from experiments.cli import main

    with pytest.raises(SystemExit) as err:
        main(["compare", "--coherence-rounds", "5", "--out", str(tmp_path)])
    assert err.value.code == 2 and "--coherence-rounds needs --fading block" in capsys.readouterr().err
    assert main(["compare", "--fading", "block", "--coherence-rounds", "5", "--rounds", "20", "--seeds", "1",
                 "--nu", "0.04", "--policies", "EqualAlloc", "OnlineOptimal", "--out", str(tmp_path)]) == 0
    scenario = json.loads((tmp_path / "compare.json").read_text())["scenario"]
    assert scenario["fading"] == "block" and scenario["coherence_rounds"] == 5
