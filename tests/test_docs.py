"""The README and the documentation site: the README's commands and code, its reference scores against the stored
file, the site's navigation, and the build hook that generates the task pages (docs/hooks/otagym_docs.py).

CI builds the site itself with ``mkdocs build --strict`` (.ci/run); these tests check what a build cannot: that the
facts on the pages are the package's."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import otagym  # noqa: F401  (registers the tasks)
from otagym.tasks import BENCHMARK, COST_TOLERANCE, TASKS, feasible_score, reference_scores

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
TEST_COMMAND = 'pip install -q -c constraints.txt -e ".[all]" && python -m pytest -q'
MAIN_COMMAND = 'pip install -q -c constraints.txt -e ".[all]" && otagym compare'


def _hook():
    spec = importlib.util.spec_from_file_location("otagym_docs_hook", ROOT / "docs" / "hooks" / "otagym_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hook = _hook()


# ---------------------------------------------------------------------------------------------------------- README

def test_readme_is_short_and_starts_with_the_two_commands():
    lines = README.splitlines()
    assert len(lines) < 150
    blocks = re.findall(r"```bash\n(.*?)\n```", README, re.S)
    assert blocks[:2] == [MAIN_COMMAND, TEST_COMMAND]
    assert TEST_COMMAND in (ROOT / ".ci" / "run").read_text().splitlines()


def test_readme_has_no_history_or_internal_references():
    for pattern in (r"\bissue\b", r"\bSPEC\b", r"seed 00\d", r"\bbefore (the|this) (change|issue)"):
        assert not re.search(pattern, README, re.I), pattern


def test_readme_relative_links_exist():
    targets = re.findall(r"\]\(((?!https?:)[^)#]+)(?:#[^)]*)?\)", README)
    assert targets
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing


@pytest.mark.slow
def test_readme_python_blocks_run(tmp_path):
    blocks = re.findall(r"```python\n(.*?)\n```", README, re.S)
    assert blocks
    for code in blocks:
        script = tmp_path / "block.py"
        script.write_text(code)
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr


# ------------------------------------------------------------------------------------------------------- the site

def _nav_files(items) -> list[str]:
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            for value in item.values():
                out += _nav_files(value) if isinstance(value, list) else [value]
    return out


def test_every_nav_page_exists_or_is_generated():
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    generated = set(hook.generated_page_paths())
    files = _nav_files(config["nav"])
    assert hook.TASKS_INDEX in files and "cli.md" in files
    missing = [f for f in files if f not in generated and not (ROOT / "docs" / f).is_file()]
    assert not missing


def test_on_config_lists_every_task_under_the_tasks_section():
    config = {"nav": [{"Home": "index.md"}, {"Benchmark tasks": [{"The benchmark suite": "benchmark.md"},
                                                                 hook.TASKS_INDEX]}]}
    hook.on_config(config)
    hook.on_config(config)  # idempotent (mkdocs serve rebuilds)
    section = config["nav"][1]["Benchmark tasks"]
    assert section[:2] == [{"The benchmark suite": "benchmark.md"}, hook.TASKS_INDEX]  # the section's own page kept
    assert [next(iter(e)) for e in section[2:]] == list(TASKS)
    assert all(Path("docs", next(iter(e.values()))).parent.name == "tasks" for e in section[2:])


@pytest.mark.parametrize("task_id", list(TASKS))
def test_task_page_states_the_envs_spaces_and_stored_scores(task_id):
    page = hook.task_page(TASKS[task_id])
    env = gym.make(task_id)
    assert f"`{env.action_space}`" in page and f"`{env.observation_space}`" in page
    for section in ("Description", "Action space", "Observation space", "Rewards", "Starting state", "Episode end",
                    "Arguments", "Vectorised environment", "Evaluation and reference scores", "Version history"):
        assert f"\n## {section}\n" in page
    stored = reference_scores(task_id)
    for name, per_nu in stored["scores"].items():
        row = next(line for line in page.splitlines() if line.startswith(f"| `{name}` |"))
        for nu, scores in per_nu.items():
            if task_id in BENCHMARK:  # the suite's feasible score, with the cost and the share over the limit
                costs = np.asarray(stored["cost_ratios"][name][nu])
                scores = feasible_score(scores, costs, stored["scores"][TASKS[task_id].violation_floor][nu])
                assert (f"{hook.iqm(scores):.2f} ({np.mean(scores):.2f}); cost {np.mean(costs):.2f}, "
                        f"{100 * np.mean(costs > 1 + COST_TOLERANCE):.0f}% over") in row
            else:
                assert f"{hook.iqm(scores):.2f} ({np.mean(scores):.2f})" in row


@pytest.mark.parametrize("task_id", list(TASKS))
def test_task_page_observation_table_covers_every_entry(task_id):
    """The observation table, taken from the scheme's docstring, names each entry of the task's Box exactly once."""
    page = hook.task_page(TASKS[task_id])
    section = page.split("\n## Observation space\n")[1].split("\n## ")[0]
    covered = []
    for line in section.splitlines():
        m = re.match(r"\| `(\d+)(?:\.\.(\d+))?` \|", line)
        if m:
            covered += range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1)
    assert covered == list(range(gym.make(task_id).observation_space.shape[0]))


def test_generated_pages_write_formulas_in_unicode_and_every_table_has_a_header():
    """The task pages and the tasks index write their formulas (docstrings' ASCII: ``sigma_n^2 <= nu``) as the
    hand-written pages do (``σ_n² ≤ ν``), outside code, and no table starts with an empty header row."""
    pages = {path: page for path, page in hook.generated_pages().items() if path != "cli.md"}
    ascii_math = re.compile(r"(?<![A-Za-z])(nu|sigma|rho|alpha|eps|epsilon|eta|mu|lambda|tau|sqrt)(?![A-Za-z])|<=|>=|"
                            r"\^2(?![0-9])")
    for path, page in pages.items():
        prose = hook._VERBATIM.sub("", page)
        assert not ascii_math.search(prose), (path, ascii_math.search(prose).group(0))
        assert not [line for line in page.splitlines() if re.fullmatch(r"\|(\s*\|)+", line)], path
    assert "ν" in pages[f"{hook.TASKS_DIR}/ReceiveScalingIID-v0.md"]


def test_unicode_math_leaves_code_comments_and_links_as_they_are():
    text = "sigma_n^2 <= nu -> inf, `nu_range <= 1` and ``rho``, <!-- a -> b -->, [rho](../rho.md), a - b"
    assert hook.unicode_math(text) == ("σ_n² ≤ ν → ∞, `nu_range <= 1` and ``rho``, <!-- a -> b -->, [ρ](../rho.md), "
                                       "a − b")
    assert hook.unicode_math("```python\nnu = 0.04  # sigma^2\n```") == "```python\nnu = 0.04  # sigma^2\n```"


def test_the_omnisafe_caveat_comes_before_its_recipe():
    page = (ROOT / "docs" / "tutorials" / "constrained-rl.md").read_text()
    section = page.split("\n## OmniSafe\n")[1]
    assert section.index("installs only beside gymnasium 0.28") < section.index("```python")


def test_cli_page_has_every_command():
    page = hook.cli_page()
    assert {"rollout", "compare", "evaluate", "report", "sweep", "train"} <= set(hook.cli_commands())
    for command in hook.cli_commands():
        assert f"## otagym {command}" in page and f"usage: otagym {command}" in page


# ------------------------------------------------------------------------------------------ the hook's functions

def test_rst_table_with_header_and_continuation_lines():
    lines = ["intro", "", "=====  =========", "index  meaning", "=====  =========", "0      first", "       more",
             "1      second", "=====  =========", "after"]
    rows, start, end = hook.rst_table_to_md(lines)
    assert rows == [["index", "meaning"], ["0", "first more"], ["1", "second"]]
    assert (start, end) == (2, 9)


def test_rst_table_without_header():
    text = "x\n\n====  ====\na     b c\n      d\nee    f\n====  ====\ny"
    assert hook.rst_tables_to_md(text).splitlines() == ["x", "", "", "|  |  |", "|---|---|", "| a | b c d |",
                                                        "| ee | f |", "", "y"]


def test_roles_become_code_spans():
    assert hook.rst_to_md(":class:`~otagym.env.OTAPrivacyEnv` and :func:`otagym.accounting.rdp_sgm`") == (
        "`OTAPrivacyEnv` and `otagym.accounting.rdp_sgm`")


def test_indexed_items_splits_entries_and_notes():
    intro, items, notes = hook.indexed_items("Start: 0: t / T; 1: b (x; y); 2: c, d (e). Clipped to [-1, 1].")
    assert intro == "Start:"
    assert items == [("0", "t / T"), ("1", "b (x; y)"), ("2", "c, d (e).")]
    assert notes == "Clipped to [-1, 1]."
    assert hook.indexed_items("no entries here") is None


def test_google_section_reads_multi_name_entries():
    doc = "Summary.\n\nArgs:\n    a: first\n        continued.\n    b, c: shared.\n\nReturns:\n    x"
    assert hook.google_section(doc, "Args") == {"a": "first continued.", "b": "shared.", "c": "shared."}
    assert hook.google_section(doc, "Attributes") == {}


def test_concrete_indices():
    assert hook._concrete("M..2M-1", {"M": 10}) == "10..19"
    assert hook._concrete("3M+5", {"M": 10}) == "35"
    assert hook._concrete("K (with csi)", {"M": 10}) == "K (with csi)"


def test_iqm_is_the_mean_of_the_middle_half():
    rng = np.random.default_rng(0)
    x = rng.normal(size=32)
    middle = np.sort(x)[8:24]
    assert hook.iqm(x) == pytest.approx(middle.mean(), rel=1e-12)


# ------------------------------------------------------------------------------------- devices as agents (PettingZoo)

MULTIAGENT_PAGE = (ROOT / "docs" / "environment" / "multiagent.md").read_text()
MULTIAGENT_BLOCKS = re.findall(r"```python\n(.*?)\n```", MULTIAGENT_PAGE, re.S)


def _imported_packages(code: str) -> set[str]:
    return set(re.findall(r"^(?:from|import) (\w+)", code, re.M))


@pytest.mark.slow
@pytest.mark.parametrize("code", MULTIAGENT_BLOCKS, ids=[f"block{i}" for i in range(len(MULTIAGENT_BLOCKS))])
def test_multiagent_page_python_blocks_run(code, tmp_path):
    """Each block of the devices-as-agents page runs as written (a block whose client is not installed here, e.g.
    RLlib outside its gymnasium 1.2.2 environment, is skipped)."""
    missing = sorted(p for p in _imported_packages(code) if importlib.util.find_spec(p) is None)
    if missing:
        pytest.skip(f"not installed: {missing}")
    script = tmp_path / "block.py"
    script.write_text("import torch\ntorch.set_num_threads(1)\n" * ("torch" in code or "stable_baselines3" in code)
                      + code)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's otagym, not an installed one
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=env)
    assert done.returncode == 0, done.stderr


def test_multiagent_page_states_the_task_envs_spaces():
    pytest.importorskip("pettingzoo")
    from otagym.multiagent import DEVICE_TASKS, make_device_env
    from otagym.schemes.cdpb.devices import device_entry_names

    env = make_device_env("otagym/CDPB-Devices-v0")
    rows = dict(re.findall(r"^\| ([A-Z][a-z ]+?) +\| (.+?) +\|$", MULTIAGENT_PAGE, re.M))
    assert rows["Action shape"].startswith(f"`{env.action_space('client_0').shape}`")
    assert rows["Observation shape"].startswith(f"`{env.observation_space('client_0').shape}`")
    assert rows["State shape"].startswith(f"`{env.state_space.shape}`")
    sizes = " or ".join(str(make_device_env(task).side.num_devices) for task in DEVICE_TASKS)
    assert f"K: {sizes} on the tasks" in rows["Number of agents"]
    assert rows["Action values"] == "[-1, 1]" and rows["Observation values"] == rows["State values"] == "[-10, 10]"
    entries = re.findall(r"^\| \d(?: or \d)? \| `(\w+)` \|", MULTIAGENT_PAGE, re.M)
    assert tuple(entries) == device_entry_names(env.side.scenario.replace(csi_feedback=True), per_device_budgets=True)


# ----------------------------------------------------------------------------------------- constrained RL tutorial

CONSTRAINED_BLOCKS = [b for b in re.findall(r"```python\n(.*?)\n```",
                                            (ROOT / "docs" / "tutorials" / "constrained-rl.md").read_text(), re.S)
                      if "from otagym.wrappers import" in b]


@pytest.mark.parametrize("code", CONSTRAINED_BLOCKS, ids=[f"block{i}" for i in range(len(CONSTRAINED_BLOCKS))])
def test_constrained_tutorial_wrapper_blocks_run(code):
    """The wrappers' blocks of the constrained-RL tutorial (the budget wrappers, the shaping) run as written and say
    what they print: a = 0 spends the fair share (cost 1) and, shaped, leaves the fair-share potential unchanged."""
    assert len(CONSTRAINED_BLOCKS) == 2
    namespace: dict = {}
    exec(compile(code, "constrained-rl.md", "exec"), namespace)  # noqa: S102 - the page's own code
    assert abs(float(namespace["info"]["cost"]) - 1.0) < 1e-5
    if "PotentialShaping" in code:  # EqualAlloc's round: reward 0, and g(1; nu) = 0 at every rounds left
        assert abs(float(namespace["reward"])) < 1e-9
