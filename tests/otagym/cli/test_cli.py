"""Command-line input is refused before any computing, argparse style: one line naming the option, exit code 2
(issue 9, class 5)."""

import argparse
import json

import numpy as np
import pytest

from otagym.cli import sweep
from otagym.cli.argtypes import key_value, writable_dir
from otagym.cli.commands import build_parser, main
from otagym.schemes import SCHEMES


@pytest.mark.parametrize("argv,needle", [
    (["compare", "--nu", "0"], "--nu: must be a finite number in [1e-30, 1e+30]; got '0'"),
    (["compare", "--nu", "nan"], "--nu: must be a finite number in [1e-30, 1e+30]"),
    (["compare", "--seeds", "0"], "--seeds: must be an integer in [1, 100000]"),
    (["compare", "--rounds", "0"], "--rounds: must be an integer in [1, 1000000]"),
    (["compare", "--correlation", "1.0"], "--correlation: must be a finite number in [0, 1)"),
    (["compare", "--correlation", "0.5"], "--correlation needs --fading gauss_markov"),
    (["compare", "--scheme", "cdpb", "--nu", "0.1"], "--scheme cdpb does not use --nu"),
    (["compare", "--scheme", "cdpb", "--rounds", "5"], "--scheme cdpb does not use --rounds"),
    (["compare", "--eval-samples", "100"], "--eval-samples need --fidelity train"),
    (["compare", "--fidelity", "train", "--train-samples", "0"], "--train-samples: must be an integer >= 1"),
    (["compare", "--accounting", "sgm"], "--scheme receive_scaling does not use --accounting"),
    (["compare", "--out", "/proc/otagym-cannot-write"], "--out: cannot write into"),
    (["train", "--steps", "0"], "--steps: must be an integer >= 1"),
    (["train", "--minutes", "-1"], "--minutes: must be a finite number in (0, 1e+07]"),
    (["rollout", "--nu", "0"], "--nu: must be a finite number in [1e-30, 1e+30]"),
    (["rollout", "--nu", "1e300"], "--nu: must be a finite number in [1e-30, 1e+30]; got '1e300'"),
    (["rollout", "--nu", "1e-300"], "--nu: must be a finite number in [1e-30, 1e+30]; got '1e-300'"),
    (["compare", "--seeds", "100000000000"], "--seeds: must be an integer in [1, 100000]"),
    (["train", "--seed", str(2**32)], "--seed: must be an integer in [0, 4294967295]"),
    (["train", "--torch-threads", str(2**31)], "--torch-threads: must be an integer in [0, 1024]"),
    (["train", "--minutes", "1e308"], "--minutes: must be a finite number in (0, 1e+07]"),
])
def test_bad_options_exit_2_with_one_line(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err, err


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_rollout_plays_every_scheme_and_prints_its_columns_a_row_a_round_and_the_episodes_eps(scheme, capsys):
    """The columns are the scheme's declaration (:attr:`~otagym.schemes.SchemeInfo.rollout`); the last line is the
    end-of-episode report of the env itself (the worst device's where it reports one per device)."""
    from otagym.env import OTAPrivacyEnv

    assert main(["rollout", "--scheme", scheme, "--rounds", "3", "--seed", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rollout = SCHEMES[scheme].rollout
    assert lines[1].split()[:2] == ["round", "reward"] and all(c.header in lines[1] for c in rollout.columns)
    assert [line.split()[0] for line in lines[2:5]] == ["0", "1", "2"] and len(lines) == 6
    info = SCHEMES[scheme]
    env = OTAPrivacyEnv(info.get_scenario(info.default_preset, num_rounds=3), scheme=scheme, **rollout.env_kwargs)
    env.reset(seed=5)
    for _ in range(3):
        step = env.step(np.full(env.action_space.shape, rollout.action, dtype=env.action_space.dtype))[4]
    eps = np.ravel(step["dp_epsilon"])
    assert lines[-1].endswith(f"eps {eps[0]:.4g}" if eps.size == 1 else f"worst {eps.max():.4g})")


def test_rollout_into_a_reader_that_leaves_stops_quietly():
    """``otagym rollout | head -3``: the broken pipe ends the command, exit code 1, without a traceback."""
    import subprocess
    import sys

    done = subprocess.run(f"{sys.executable} -m otagym.cli rollout --rounds 2000 | head -3", shell=True,
                          capture_output=True, text=True, timeout=120)
    assert len(done.stdout.splitlines()) == 3 and "Traceback" not in done.stderr, done.stderr


def test_a_commands_warnings_are_one_line_each():
    """Without the file and the source line that warned (Python's default), which say nothing to a user."""
    import subprocess
    import sys

    code = ("import argparse, warnings\nfrom otagym.cli import commands\n"  # a command that warns, through main
            "args = argparse.Namespace(command='rollout', func=lambda a: warnings.warn('the budget is spent') or 0)\n"
            "commands.build_parser = lambda *_: argparse.Namespace(parse_args=lambda argv: args)\n"
            "raise SystemExit(commands.main(['rollout']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == "UserWarning: the budget is spent\n", done.stderr


def test_python_dash_m_otagym_is_the_command():
    import subprocess
    import sys

    import otagym

    done = subprocess.run([sys.executable, "-m", "otagym", "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and otagym.__version__ in done.stdout, done.stderr


def test_rollout_refuses_a_preset_of_another_scheme_and_a_budget_its_scheme_has_not(capsys):
    for argv, needle in ((["--scheme", "cdpb", "--nu", "0.1"], "--scheme cdpb does not use --nu"),
                         (["--scheme", "anonymous", "--scenario", "paper-mnist"],
                          "'paper-mnist' is not a preset of --scheme anonymous")):
        with pytest.raises(SystemExit) as exc:
            main(["rollout", *argv])
        assert exc.value.code == 2 and needle in capsys.readouterr().err


def test_compare_reads_its_schemes_and_presets_from_the_registry():
    """``--scheme`` offers the registered schemes that have a comparison; ``--scenario`` their presets (issue 11)."""
    import argparse

    from baselines.comparison import scheme_comparisons
    from otagym.cli.compare import add_compare_parser
    from otagym.schemes import SCHEMES

    COMMANDS = scheme_comparisons()
    assert set(COMMANDS) <= set(SCHEMES) and COMMANDS
    sub = argparse.ArgumentParser().add_subparsers()
    add_compare_parser(sub, "compare")
    actions = {a.dest: a for a in sub.choices["compare"]._actions}
    assert actions["scheme"].choices == [name for name in SCHEMES if name in COMMANDS]
    assert sorted(actions["scenario"].choices) == sorted(p for name in COMMANDS for p in SCHEMES[name].presets)


def test_compare_takes_the_block_coherence_with_block_fading_only(tmp_path, capsys):
    from otagym.cli.commands import main

    with pytest.raises(SystemExit) as err:
        main(["compare", "--coherence-rounds", "5", "--out", str(tmp_path)])
    assert err.value.code == 2 and "--coherence-rounds needs --fading block" in capsys.readouterr().err
    assert main(["compare", "--fading", "block", "--coherence-rounds", "5", "--rounds", "20", "--seeds", "1",
                 "--nu", "0.04", "--policies", "EqualAlloc", "OnlineOptimal", "--out", str(tmp_path)]) == 0
    scenario = json.loads((tmp_path / "compare.json").read_text())["scenario"]
    assert scenario["fading"] == "block" and scenario["coherence_rounds"] == 5


#: Numbers at and beyond every range an option could have: zero, negative, fractional, the physical range's bounds
#: and far beyond them, beyond float64, not numbers at all, an integer beyond int64.
EXTREMES = ("0", "-1", "1.5", "1e-300", "1e-30", "1e30", "1e300", "1e400", "nan", "inf", "9" * 40)
#: What an option needs beside it to be read at all.
NEEDS = {"--correlation": ["--fading", "gauss_markov"], "--coherence-rounds": ["--fading", "block"]}
#: Each command's cheapest run, and what stands in for its computation (reached after every check).
RUNS = {"rollout": ["rollout", "--rounds", "2"],
        "compare": ["compare", "--policies", "EqualAlloc", "--no-progress"]}


def _numeric_options(command: str) -> list[str]:
    """Every option of ``command`` that reads a number (a type other than text, a folder or KEY=VALUE; no choices)."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return [a.option_strings[-1] for a in sub.choices[command]._actions
            if a.option_strings and a.type not in (None, str, writable_dir, key_value) and a.choices is None]


class _Reached(Exception):
    """The command got past every check to its computation."""


@pytest.mark.parametrize("command,option", [(c, o) for c in RUNS for o in _numeric_options(c)])
def test_a_number_the_command_line_accepts_runs_and_any_other_is_refused_in_one_line(command, option, tmp_path,
                                                                                      monkeypatch, capsys):
    """The class of ``rollout --nu 1e300``: a number an option lets through must not fail later with a traceback.
    Every numeric option of every command, at every extreme: the command runs (compare up to its cells), or stops
    with exit code 2 and one line naming the option and its range."""
    def reached(*args, **kwargs):
        raise _Reached
    monkeypatch.setattr(sweep, "run", reached)
    for text in EXTREMES:
        argv = RUNS[command] + (["--out", str(tmp_path)] if command == "compare" else []) + NEEDS.get(option, [])
        try:
            assert main(argv + [option, text]) == 0
        except _Reached:
            pass
        except SystemExit as exc:
            err = capsys.readouterr().err
            assert exc.code == 2 and "Traceback" not in err, (text, err)
            assert err.splitlines()[-1].startswith(f"otagym {command}: error: argument {option}: must be "), (text, err)
        capsys.readouterr()


def test_the_training_fidelitys_data_subsets_reach_the_comparisons_cells():
    from otagym.cli import sweep
    from baselines.receive_scaling.command import sweep_config as _sweep_config

    args = build_parser().parse_args(["compare", "--fidelity", "train", "--train-samples", "300", "--eval-samples",
                                      "50", "--rounds", "2"])
    args.seeds = 1
    plan = sweep.plan(_sweep_config(args))
    assert {(c["train_samples"], c["eval_samples"]) for c in plan.cells} == {(300, 50)}
