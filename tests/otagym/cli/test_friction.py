"""The first hour of a new user: help pages with defaults and examples that parse, ``--version``, mistakes that end in
one line naming the argument (exit code 2) and leave nothing behind, a comparison table that says what its columns
are and prints every row readably, a plot of the paired comparison with a fixed colour per policy and a note for the
rows it leaves out, examples that write outside the tracked files, one held-out seed convention."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest

from baselines.receive_scaling import compare as compare_module
from baselines.receive_scaling.compare import format_table, save, summarize
from baselines.report import POLICY_COLOURS, policy_colour, readable
from otagym.cli import commands as cli
from otagym.cli.commands import EXAMPLES, build_parser, main
from otagym import __version__, get_scenario
from otagym.tasks import EVALUATION_SEEDS

ROOT = Path(__file__).resolve().parents[3]


def _commands() -> dict:
    return build_parser()._subparsers._group_actions[0].choices


# --- help pages ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["otagym", "rollout", "compare", "evaluate", "sweep", "train"])
def test_every_help_page_shows_the_defaults_and_examples_that_parse(command, tmp_path, monkeypatch):
    parser = build_parser() if command == "otagym" else _commands()[command]
    text = parser.format_help()
    assert "examples:\n" in text
    for action in parser._actions:
        if not action.option_strings or action.dest in ("help", "version"):
            continue
        assert action.help, f"{command} {action.option_strings[0]} has no help"
        if not (action.default is None or action.default is False or action.default == []):
            assert f"(default: {action.default})" in parser._get_formatter()._expand_help(action) \
                or "(default" in action.help, f"{command} {action.option_strings[0]} does not show its default"
    monkeypatch.chdir(tmp_path)  # an example's --out is checked (not written) as it parses
    for line in EXAMPLES[command]:
        argv = shlex.split(line.split("  #")[0])[1:]
        args = build_parser().parse_args(argv)
        if hasattr(args, "check"):
            args.check(args.command_parser, args)
    assert list(tmp_path.iterdir()) == []


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"otagym {__version__}"


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["bogus"], [], ["evaluate", "--help"],
                                  ["evaluate", "otagym/NoSuchTask-v0", "EqualAlloc"], ["report", "--reps"]])
def test_help_version_and_argument_errors_import_no_command_nor_numba_scipy_or_torch(argv):
    """Each in a fresh process, as ``benchmarks/bench_cli.py`` times them: the commands are listed from
    :data:`~otagym.cli.commands.COMMAND_TABLE`, their modules imported only for the one that runs, and the benchmark's
    commands (evaluate, report) import what they compute with only once their arguments are parsed."""
    from benchmarks.bench_cli import heavy_modules

    assert heavy_modules(argv) == []


@pytest.mark.parametrize("argv", [["compare", "--help"], ["sweep", "--help"]])
def test_the_comparisons_help_reads_their_declarations_only(argv):
    """compare's and sweep's parsers read the schemes' declarations (``baselines/<scheme>/command.py``, the
    accountants' names), not the computations: no numba, scipy or torch."""
    from benchmarks.bench_cli import heavy_modules

    assert set(heavy_modules(argv)) <= {"baselines"}


def test_the_comparisons_declared_policy_names_are_their_computations():
    from baselines.cdpb.command import POLICY_NAMES as CDPB_NAMES
    from baselines.cdpb.policies import CDPB_POLICIES
    from baselines.receive_scaling.command import POLICY_NAMES
    from baselines.receive_scaling.compare import POLICIES

    assert POLICY_NAMES == tuple(POLICIES) and CDPB_NAMES == tuple(CDPB_POLICIES)


def test_the_top_level_help_lists_every_command_with_its_line():
    text = build_parser(()).format_help()
    for name, command in cli.COMMAND_TABLE.items():
        assert re.search(rf"^\s+{name}\s+{re.escape(command.help[:30])}", text, re.M), name
    full = build_parser()._subparsers._group_actions[0]
    assert [a.dest for a in full._choices_actions] == list(cli.COMMAND_TABLE)
    assert [a.help for a in full._choices_actions] == [c.help for c in cli.COMMAND_TABLE.values()]


# --- mistakes: one line naming the argument, exit code 2, nothing left behind ------------------------------------
def _refused(argv: list[str], needle: str, capsys) -> None:
    try:
        code = main(argv)  # a command may return its exit code ...
    except SystemExit as exc:  # ... or argparse exits
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    last = err.strip().splitlines()[-1]
    assert needle in last and last.startswith("otagym") and "Traceback" not in err, err


@pytest.mark.parametrize("argv,needle", [
    (["compare", "--scheme", "cdpb", "--scenario", "paper-mnist"],
     "argument --scenario: 'paper-mnist' is not a preset of --scheme cdpb; choose from ['paper-cdpb']"),
    (["compare", "--scenario", "paper-cdpb"],
     "argument --scenario: 'paper-cdpb' is not a preset of --scheme receive_scaling"),
    (["compare", "--scheme", "cdpb", "--policies", "AdaScale"], "argument --policies: --scheme cdpb plays"),
    (["compare", "--policies", "Adascale", "--out", "new/deeper"], "argument --policies: policies[0] must be one of"),
    (["compare", "--seed-start", "-1"], "argument --seed-start: must be an integer >= 0"),
    (["rollout", "--seed", "-1"], "argument --seed: must be an integer >= 0"),
    (["sweep", "missing.yaml", "--out", "new"], "config must be a readable YAML file"),
])
def test_mistakes_end_in_one_line_and_leave_no_folder(argv, needle, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _refused(argv, needle, capsys)
    assert list(tmp_path.iterdir()) == []  # not even the default results/ or the --out folder


@pytest.mark.parametrize("argv,needle", [
    (["--env", "fading=gausian_markov"],
     "argument --env: Scenario.fading must be one of 'iid', 'block', 'gauss_markov'; got 'gausian_markov'"),
    (["--env", "num_round=100"], "argument --env: got an unexpected keyword argument 'num_round'"),
    (["--env", "nu=-1"], "argument --env: Scenario.nu must be"),
    (["--env", "fading"], "argument --env: must be KEY=VALUE"),
    (["--env", "fading=[iid,"], "argument --env: fading=[iid,: not a YAML value"),
    (["--algo", "ppo_lagrangian", "--env", "reward_mode=budget"],
     "argument --env: ppo_lagrangian trains on the CMDP formulation"),
    (["--config", "missing.yml"], "argument --config: config file missing.yml does not exist"),
    (["--seed", "-1"], "argument --seed: must be an integer in [0, 4294967295]"),
])
def test_train_mistakes_end_in_one_line_and_leave_no_run_folder(argv, needle, tmp_path, monkeypatch, capsys):
    pytest.importorskip("stable_baselines3")
    monkeypatch.chdir(tmp_path)
    _refused(["train", "--no-progress"] + argv, needle, capsys)
    assert list(tmp_path.iterdir()) == []  # no runs/<algo>


def test_a_refused_overwrite_keeps_the_run_it_would_have_replaced(tmp_path, capsys):
    pytest.importorskip("stable_baselines3")
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    (run / "model.zip").write_bytes(b"a model")
    _refused(["train", "--run-dir", str(run), "--overwrite", "--no-progress", "--env", "fading=rayleigh"],
             "argument --env: Scenario.fading", capsys)
    assert sorted(p.name for p in run.iterdir()) == ["model.zip", "run.json"]


def test_train_without_the_rl_extra_says_how_to_install_it(monkeypatch, capsys):
    monkeypatch.setattr(cli, "TRAIN_MODULES", ("yaml", "otagym_not_installed_module"))
    _refused(["train"], "needs the rl extra (missing: otagym_not_installed_module): pip install", capsys)


# --- the comparison's table and plot -------------------------------------------------------------------------------
def test_numbers_are_readable():
    assert readable(-5076888.9) == "-5.08e+06" and readable(21844449.8) == "2.18e+07"
    assert readable(99.74) == "99.7" and readable(-99999.94) == "-99999.9" and readable(1e5) == "1.00e+05"
    assert readable(float("nan")) == "nan"


def _cells() -> list[dict]:
    """Two realisations of four policies at two budgets; LyapunovDPP misses nu."""
    out = []
    for policy, factor, matched in (("LyapunovDPP", 30.0, False), ("EqualAlloc", 4.0, True),
                                    ("OfflineOptimal", 1.0, True), ("AdaScale", 1.5, True)):
        for nu in (0.01, 0.04):
            for seed, (optimal, equal) in enumerate(((2.0, 8.0), (10.0, 40.0))):
                leakage = optimal * factor * (2.0 if seed else 1.0) ** (policy == "AdaScale")
                out.append({"policy": policy, "nu": nu, "seed": seed, "rdp": leakage, "epsilon": leakage / 2,
                            "cost_mean": nu * (3.0 if not matched else 1.0), "leakage": leakage,
                            "equal_alloc_leakage": equal, "optimal_leakage": optimal,
                            "score": 100.0 * (equal - leakage) / (equal - optimal) - (5e6 if factor > 10 else 0),
                            "matched": matched, "param": None, "param_value": None, "wall_s": 0.1})
    return out


def test_the_table_explains_its_columns_and_prints_every_row_readably():
    rows = summarize(_cells())
    adascale = next(r for r in rows if r["policy"] == "AdaScale")
    # leakage over OfflineOptimal's on the same realisation: 1.5 and 3.0, geometric mean sqrt(4.5)
    assert adascale["leakage_ratio_seeds"] == [1.5, 3.0]
    assert adascale["leakage_ratio"] == pytest.approx(np.sqrt(4.5), rel=1e-12)
    table = format_table(rows, get_scenario("paper-mnist"))
    for column in ("score ", "mean c_t ", "L/L_opt ", "± "):
        assert any(line.startswith(column) for line in table.splitlines()), column
    assert "over the 2 channel realisations" in table
    dpp = [line for line in table.splitlines() if line.startswith("LyapunovDPP")]
    assert dpp and all("-5.00e+06 ±" in line for line in dpp), dpp
    assert not re.search(r"\d{7}", table)  # no number of 7 digits or more before its point


@pytest.mark.slow
def test_one_seed_is_accepted_and_its_table_says_it_has_no_interval(tmp_path, capsys):
    """``--seeds K`` as the docs write it, K = 1 included: compare runs one realisation, and its table says that one
    realisation has no confidence interval instead of explaining a "± 0" as one; a sweep takes one seed too."""
    table = format_table(summarize([c for c in _cells() if c["seed"] == 0]), get_scenario("paper-mnist"))
    assert "one channel realisation (seed) has no confidence interval" in table and "over the 1 channel" not in table
    assert main(["compare", "--seeds", "1", "--rounds", "5", "--nu", "0.04", "--policies", "EqualAlloc",
                 "--out", str(tmp_path), "--no-progress"]) == 0
    assert "one channel realisation (seed) has no confidence interval" in capsys.readouterr().out
    from otagym.cli import sweep
    assert len(sweep.plan({"name": "one", "rounds": 5, "policies": ["EqualAlloc"], "nu": 0.04,
                           "seeds": {"start": 7, "count": 1}}).cells) == 1


def _figure(rows, tmp_path, monkeypatch):
    """The figure save() draws (still written, as save() hashes it)."""
    shown = {}
    real = compare_module.save_figure

    def keep(fig, path, **kwargs):
        shown["fig"] = fig
        return real(fig, path, **kwargs)

    monkeypatch.setattr(compare_module, "save_figure", keep)
    save(rows, get_scenario("paper-mnist"), tmp_path)
    return shown["fig"]


def _drawn(ax):
    """The policies drawn on a panel: name -> the line through their interquartile means (errorbar's data line)."""
    return {c.get_label(): c.lines[0] for c in ax.containers if not c.get_label().startswith("_")}


@pytest.mark.slow
def test_the_plot_is_paired_with_intervals_and_fixed_colours_and_clips_nothing(tmp_path, monkeypatch):
    rows = summarize(_cells())
    fig = _figure(rows, tmp_path, monkeypatch)
    excess, score = fig.axes[:2]
    lines = _drawn(excess)
    assert set(lines) == {"EqualAlloc", "OfflineOptimal", "AdaScale"}  # LyapunovDPP is not matched to nu
    # the paired comparison: each policy's leakage over OfflineOptimal's on the same realisation, in %, its IQM (of
    # two realisations: their mean)
    adascale = next(r for r in rows if r["policy"] == "AdaScale")
    np.testing.assert_allclose(lines["EqualAlloc"].get_ydata(), [300.0, 300.0], rtol=1e-12)
    np.testing.assert_allclose(lines["AdaScale"].get_ydata(),
                               np.mean(100 * (np.array(adascale["leakage_ratio_seeds"]) - 1)), rtol=1e-12)
    np.testing.assert_allclose(lines["OfflineOptimal"].get_ydata(), [0.0, 0.0], atol=1e-12)
    assert excess.get_yscale() == score.get_yscale() == "symlog"  # every value drawn: nothing clipped
    scores = {name: line.get_ydata() for name, line in _drawn(score).items()}
    np.testing.assert_allclose(scores["EqualAlloc"], [0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(scores["AdaScale"], np.mean(adascale["score_seeds"]), rtol=1e-12)
    dots = np.concatenate([c.get_offsets()[:, 1] for c in score.collections if len(c.get_offsets())])
    assert np.isin(np.asarray(adascale["score_seeds"]), dots).all()
    # a paper's figure: panel labels, no title or footnotes inside it (the caption explains)
    assert [t.get_text() for t in excess.texts + score.texts] == ["(a)", "(b)"]
    assert not fig.texts and fig._suptitle is None
    assert fig.legends and not excess.get_legend()  # the legend covers no data
    # a colour per name, whatever the order of the rows
    colours = {name: line.get_color() for name, line in lines.items()}
    reordered = _figure(summarize(_cells()[::-1]), tmp_path, monkeypatch)
    assert {name: line.get_color() for name, line in _drawn(reordered.axes[0]).items()} == colours
    assert colours["EqualAlloc"] == POLICY_COLOURS["EqualAlloc"]


def test_the_plots_interval_is_the_bootstrap_of_the_interquartile_mean():
    """scipy's 25% trimmed mean and a percentile bootstrap over the realisations, seeded; one value has none."""
    from scipy import stats

    from baselines.receive_scaling.compare import iqm_interval

    values = np.random.default_rng(3).standard_t(2, 16) * 40
    iqm, low, high = iqm_interval(values)
    assert iqm == pytest.approx(stats.trim_mean(values, 0.25), rel=1e-12) and low < iqm < high
    assert iqm_interval(values) == (iqm, low, high)
    resampled = [stats.trim_mean(values[np.random.default_rng(k).integers(0, 16, 16)], 0.25) for k in range(400)]
    assert np.percentile(resampled, 2.5) == pytest.approx(low, abs=0.2 * (high - low))
    assert iqm_interval([5.0]) == (5.0, 5.0, 5.0)


@pytest.mark.slow
def test_every_built_in_policy_has_its_own_colour_and_others_a_stable_one():
    from baselines.cdpb.policies import CDPB_POLICIES
    from baselines.receive_scaling.compare import POLICIES

    assert set(POLICIES) <= set(POLICY_COLOURS) and set(CDPB_POLICIES) <= set(POLICY_COLOURS)
    assert len({POLICY_COLOURS[name] for name in POLICIES}) == len(POLICIES)
    assert policy_colour("PPO") == policy_colour("PPO") and policy_colour("PPO").startswith("#")
    # not Python's salted hash: the same colour in another process
    other = subprocess.run(["python", "-c", "from baselines.report import policy_colour; print(policy_colour('PPO'))"],
                           capture_output=True, text=True, cwd=ROOT, check=True).stdout.strip()
    assert other == policy_colour("PPO")


# --- files: examples write outside the tracked files; runs/ and results/ are ignored -------------------------------
def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT, check=False)


def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["fadmm", "anonymous_fig1"])
def test_examples_write_their_figures_outside_the_tracked_files(name):
    if name == "fadmm":
        pytest.importorskip("torch")
    out = _example(name).build_parser().get_default("out")
    assert Path(out).parts[0] == "results", out
    if _git("rev-parse", "--git-dir").returncode != 0:
        pytest.skip("not a git checkout")
    assert _git("ls-files", "--error-unmatch", str(out)).returncode != 0  # not tracked
    assert _git("check-ignore", "-q", str(out)).returncode == 0  # and ignored


def test_runs_and_results_are_ignored_by_git():
    if _git("rev-parse", "--git-dir").returncode != 0:
        pytest.skip("not a git checkout")
    for path in ("runs/ppo/model.zip", "results/compare.png"):
        assert _git("check-ignore", "-q", path).returncode == 0, path


# --- one held-out seed convention ------------------------------------------------------------------------------------
def test_one_held_out_seed_convention():
    start = EVALUATION_SEEDS[0]
    assert cli.HELD_OUT_SEED == start == 10_000
    yaml_starts = re.findall(r"start:\s*(\d+)", (ROOT / "examples" / "sweep_paper.yaml").read_text())
    assert yaml_starts and all(int(s) == start for s in yaml_starts), yaml_starts
    held_out = [line for lines in EXAMPLES.values() for line in lines if "model.zip" in line and "compare" in line]
    assert held_out and all(f"--seed-start {start}" in line for line in held_out)
    compare_help = _commands()["compare"].format_help()
    assert f"from {start}" in re.sub(r"\s+", " ", compare_help)
    train_ppo = (ROOT / "examples" / "train_ppo.py").read_text()
    assert re.search(r"range\((\d[\d_]*)", train_ppo).group(1).replace("_", "") == str(start)


def test_compare_json_is_unchanged_in_shape(tmp_path, monkeypatch):
    """save() still writes the CSV, the plot and the JSON of one generation, with the paired ratios in the JSON."""
    from baselines.report import mismatched_outputs

    rows = summarize(_cells())
    paths = save(rows, get_scenario("paper-mnist"), tmp_path)
    assert [p.name for p in paths] == ["compare.csv", "compare.json", "compare.png"]
    assert mismatched_outputs(tmp_path / "compare.json") == []
    stored = json.loads((tmp_path / "compare.json").read_text())["rows"]
    assert [r["leakage_ratio_seeds"] for r in stored] == [r["leakage_ratio_seeds"] for r in rows]
