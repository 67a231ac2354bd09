"""MkDocs hook: pages generated at build time from the code, so that they never drift from it.

- ``tasks/index.md`` and one page per benchmark task of :data:`otagym.tasks.TASKS`, in Gymnasium's environment-page
  format (description, action space, observation, rewards, starting state, episode end, arguments, vectorised use,
  reference scores, version history). Everything on them comes from the task registry, the env's spaces, the stored
  reference scores (:func:`otagym.tasks.reference_scores`) and the scheme's docstrings, so a new task appears without
  editing the docs; a new *scheme* needs one :data:`SCHEME_PAGES` entry.
- ``cli.md``: the ``--help`` page of every ``otagym`` command.
- In every rendered page (the API reference included), the Sphinx roles of the docstrings
  (``:class:`~otagym.env.OTAPrivacyEnv```) become code spans linked to the API reference where it documents them.

The pure functions below (``rst_to_md``, ``rst_table_to_md``, ``indexed_items``, ``google_section``, ``iqm``) are
tested in ``tests/test_docs.py``.
"""

from __future__ import annotations

import contextlib
import html
import inspect
import io
import os
import re
from typing import Any, Iterable

import numpy as np

TASKS_DIR = "tasks"
TASKS_INDEX = f"{TASKS_DIR}/index.md"

# --------------------------------------------------------------------------------------------------------------------
# Text conversion (pure)
# --------------------------------------------------------------------------------------------------------------------

_ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|obj|exc|const):`(~?)([\w.]+)`")


def rst_to_md(text: str) -> str:
    """Sphinx roles -> Markdown code spans (``~`` keeps the last component, as Sphinx shows it). Double-backtick
    literals are already Markdown code spans."""
    return _ROLE.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text)


#: Greek letters the docstrings spell out (``nu``, ``sigma_m,t``, ``rho_alpha``), as the hand-written pages write them.
_GREEK = {"alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "eps": "ε", "eta": "η",
          "theta": "θ", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν", "rho": "ρ", "sigma": "σ", "tau": "τ",
          "phi": "φ"}
_GREEK_WORD = re.compile(r"(?<![A-Za-z])(" + "|".join(sorted(_GREEK, key=len, reverse=True)) + r")(?![A-Za-z])")
#: ASCII notation -> the hand-written pages' symbols (applied after the Greek letters).
_SYMBOLS = [(re.compile(r"\^2(?![0-9])"), "²"), (re.compile(r"\^3(?![0-9])"), "³"), (re.compile(r"<="), "≤"),
            (re.compile(r">="), "≥"), (re.compile(r"!="), "≠"), (re.compile(r"->"), "→"),
            (re.compile(r"(?<![A-Za-z_])sqrt\("), "√("), (re.compile(r"(?<![A-Za-z_])sum_"), "Σ_"),
            (re.compile(r"(?<![A-Za-z_])inf(?![A-Za-z_])"), "∞"), (re.compile(r"(?<=\s)-(?=\s)"), "−")]
#: What keeps its characters: fenced code, HTML comments, code spans, link targets.
_VERBATIM = re.compile(r"(```.*?```|<!--.*?-->|(`+).+?\2|\]\([^)]*\))", re.DOTALL)


def unicode_math(text: str) -> str:
    """The ASCII formulas of Markdown ``text`` (from docstrings: ``sigma_n^2 <= nu``) in the Unicode of the
    hand-written pages (``σ_n² ≤ ν``): Greek letters spelled out as words (``rho_alpha`` -> ``ρ_α``), squares and
    cubes, ``<=``, ``>=``, ``!=``, ``->``, ``sqrt(``, ``sum_``, ``inf`` and a minus between spaces. Code (fenced or
    in spans), HTML comments and link targets are left as they are."""
    def convert(part: str) -> str:
        part = _GREEK_WORD.sub(lambda m: _GREEK[m.group(1)], part)
        for pattern, symbol in _SYMBOLS:
            part = pattern.sub(symbol, part)
        return part

    out, at = [], 0
    for m in _VERBATIM.finditer(text):
        out += [convert(text[at:m.start()]), m.group(0)]
        at = m.end()
    return "".join(out + [convert(text[at:])])


_RULE = re.compile(r"^\s*=+(\s+=+)+\s*$")


def rst_table_to_md(lines: list[str]) -> tuple[list[list[str]], int, int] | None:
    """The first reStructuredText simple table in ``lines``: ``(rows, start, end)`` with rows[0] the header (empty
    cells for a table without one) and ``lines[start:end]`` the table; a line whose first column is blank continues
    the row above. None if there is none."""
    rules = [i for i, line in enumerate(lines) if _RULE.match(line)]
    if len(rules) < 2:
        return None
    first, second = rules[:2]
    spans = [m.span() for m in re.finditer(r"=+", lines[first])]
    headed = second == first + 2 and len(rules) >= 3
    if headed:
        third = rules[2]
    else:  # a table without a header row: two rules
        first, second, third = first - 1, first, second

    def cells(line: str) -> list[str]:
        out = []
        for k, (a, _) in enumerate(spans):
            b = spans[k + 1][0] if k + 1 < len(spans) else len(line)
            out.append(line[a:b].strip())
        return out

    rows = [cells(lines[first + 1]) if headed else [""] * len(spans)]
    for line in lines[second + 1:third]:
        if not line.strip():
            continue
        row = cells(line)
        if not row[0] and len(rows) > 1:
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], row)]
        else:
            rows.append(row)
    return rows, (first if headed else second), third + 1


def indexed_items(text: str) -> tuple[str, list[tuple[str, str]], str] | None:
    """``"intro 0: a; 1: b; 2: c. Notes."`` -> ``(intro, [("0", "a"), ("1", "b"), ("2", "c")], "Notes.")``: the
    observation entries of a docstring written as a list of ``index: meaning``. The last entry ends at its first
    ``;`` or sentence end; the rest is returned as notes. None if the text has fewer than two entries."""
    text = " ".join(text.split())
    matches = list(re.finditer(r"(?:^|(?<=[;:.]) )(\d+(?:\.\.\d+)?): ", text))
    if len(matches) < 2:
        return None
    intro = text[:matches[0].start()].strip()
    items = []
    for k, m in enumerate(matches):
        end = matches[k + 1].start() if k + 1 < len(matches) else len(text)
        items.append((m.group(1), text[m.end():end].strip().rstrip(";").strip()))
    last_index, last = items[-1]
    cut = re.search(r";\s|(?<=[\w)\]])\.\s+(?=[A-Z])", last)
    notes = ""
    if cut:
        notes = last[cut.end():].strip()
        last = last[:cut.start()].rstrip(".") if last[cut.start()] == ";" else last[:cut.start() + 1]
    items[-1] = (last_index, last.strip())
    if notes:
        notes = notes[0].upper() + notes[1:]
    return intro, items, notes


def google_section(doc: str, title: str) -> dict[str, str]:
    """The entries of a Google-style section (``Args:``, ``Attributes:``) of a docstring: ``{name: description}``;
    an entry naming several (``a, b: ...``) is returned under each name."""
    lines = (doc or "").splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == f"{title}:")
    except StopIteration:
        return {}
    base = len(lines[start]) - len(lines[start].lstrip())
    entries: dict[str, str] = {}
    names: list[str] = []
    indent = None
    for line in lines[start + 1:]:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if depth <= base:
            break
        if indent is None:
            indent = depth
        m = re.match(r"\s*([\w*, ]+?):(\s|$)(.*)", line) if depth == indent else None
        if m:
            names = [n.strip().lstrip("*") for n in m.group(1).split(",") if n.strip()]
            for n in names:
                entries[n] = m.group(3).strip()
        else:
            for n in names:
                entries[n] = f"{entries[n]} {line.strip()}".strip()
    return entries


def iqm(scores: Iterable[float]) -> float:
    """The interquartile mean (rliable's ``aggregate_iqm``: the mean of the middle 50%, scipy's ``trim_mean``)."""
    from scipy.stats import trim_mean

    return float(trim_mean(np.asarray(list(scores), dtype=float), 0.25, axis=None))


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table (``|`` in cells escaped)."""
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(header), "|" + "---|" * len(header)] + [line(r) for r in rows])


def _doc(obj: Any) -> str:
    return inspect.getdoc(obj) or ""


def _first_paragraph(doc: str) -> str:
    return " ".join(doc.split("\n\n", 1)[0].split())


def _body(doc: str) -> str:
    """A docstring less its first line (the summary) and its Google sections."""
    parts = doc.split("\n\n")[1:]
    keep = [p for p in parts if not re.match(r"\s*(Args|Attributes|Returns|Raises):", p)]
    return "\n\n".join(" ".join(p.split()) for p in keep)


# --------------------------------------------------------------------------------------------------------------------
# Per-scheme pages (where the prose of each section comes from)
# --------------------------------------------------------------------------------------------------------------------

#: The receive-scaling guide, whose "One round" and "Observation" sections the generated pages quote.
RECEIVE_SCALING_GUIDE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "environment",
                                     "receive-scaling.md")


def _guide_section(path: str, title: str) -> list[str]:
    """The paragraphs of a Markdown page's ``## title`` section."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    return [p.strip() for p in section.strip().split("\n\n") if p.strip()]


def _receive_scaling_observation(scenario: Any) -> str:
    """The guide's observation table with each index also written out for the scenario's M devices."""
    intro, table = _guide_section(RECEIVE_SCALING_GUIDE, "Observation")[:2]
    m = scenario.num_devices
    rows = [[c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])] for line in table.splitlines()[2:]]
    body = [[f"`{_concrete(r[0].replace('−', '-'), {'M': m})}`", f"`{r[0]}`", r[1].replace("\\|", "|")]
            for r in rows]
    return " ".join(intro.split()) + f" Here M = {m} devices.\n\n" + md_table(["index", "symbolic", "meaning"], body)


def _concrete(index: str, symbols: dict[str, int]) -> str:
    """``"M..2M-1"`` with M = 10 -> ``"10..19"``; an expression that is not simple arithmetic of the symbols is
    returned as it is."""
    def value(expr: str) -> str:
        e = expr.strip()
        for name, v in symbols.items():
            e = re.sub(rf"(\d)({name})", rf"\1*{v}", e)
            e = e.replace(name, str(v))
        if not re.fullmatch(r"[\d+\-* ]+", e):
            raise ValueError(expr)
        return str(eval(e, {"__builtins__": {}}))  # digits and + - * only (checked above)

    try:
        return "..".join(value(p) for p in index.split(".."))
    except (ValueError, SyntaxError):
        return index


def _layout_observation(module: Any, scenario: Any) -> str:
    """A scheme's observation from its layout module (``otagym.schemes.<scheme>.observation``): the entry table of its
    docstring with each entry's indices in the scenario's observation (``module.entry_names(scenario)``; an entry the
    scenario does not have is left out), its notes and the layout version."""
    lines = _doc(module).splitlines()
    found = rst_table_to_md(lines)
    if found is None:
        return rst_to_md(" ".join(_doc(module).split()))
    rows, start, end = found
    names = module.entry_names(scenario)
    body = []
    for row in rows[1:]:
        entry = row[0].strip("`")
        at = [i for i, n in enumerate(names) if n == entry or n.startswith(entry + "[")]
        if at:
            index = f"{at[0]}" if len(at) == 1 else f"{at[0]}..{at[-1]}"
            body.append([f"`{index}`", f"`{entry}`", rst_to_md(row[1])])
    notes = " ".join(" ".join(lines[end:]).split())
    return (md_table(["index", "entry", "meaning"], body) + ("\n\n" + rst_to_md(notes) if notes else "")
            + f"\n\nLayout version `{module.LAYOUT_VERSION}` (`{module.__name__}.LAYOUT_VERSION`).")


def _paragraphs(doc: str, *which: int) -> str:
    parts = [p for p in doc.split("\n\n") if p.strip()]
    return "\n\n".join(rst_to_md(" ".join(parts[i].split())) for i in which if i < len(parts))


def _step_reward(core: type) -> str:
    return rst_to_md(_body(_doc(core.step)))


RECEIVE_SCALING_REWARD = """\
With L_t = Σ_m ρ_α(q_m, σ_m,t) the round's RDP leakage (the summand of objective (28a)) and L_t^EA EqualAlloc's
leakage on the same round's channel:

| `reward_mode` | reward | constraint |
|---|---|---|
| `budget` | −(L_t − L_t^EA) / H | (28b) holds with equality for every policy, by construction |
| `cmdp` | −(L_t − L_t^EA) / H | `info["cost"]` = c_t / ν, mean ≤ 1 (an episode cost limit of T) |
| `lagrangian` | −(L_t − L_t^EA + λ(c_t − ν)) / H | only through λ = `reward_lambda` (required) |

H = T (E[L^EA] − E[L at the stationary water level]) is the expected headroom between EqualAlloc and the best
schedule of one receive scaling, for the episode's placement and ν (both observed). Neither term changes which policy
is optimal: Σ_t L_t^EA depends on the channels only, and H on what the agent observes. EqualAlloc earns exactly 0,
and in budget mode the return is about the normalised score / 100. [The RL formulation](../rl.md) derives it."""

RECEIVE_SCALING_START = """\
`reset` draws the device placement (distances d_m ~ U[`distance_min_m`, `distance_max_m`]), the first round's
channel, and ν log-uniformly from `nu_range` (ν is observed). `reset(options=...)` takes `distances_m` (M,),
`channel_gains` (T, M) to replay a channel realisation, and `nu`; the evaluation set is played this way
(`otagym.tasks.evaluation_options`). The first observation has t/T = 0, the whole budget left and zero cumulative
RDP."""

CDPB_START = """\
`reset` starts a new episode: round 0, no accumulated convergence error or RDP, and the first round's channels drawn
from each client's Rayleigh law (power gains h_k ~ Exponential(mean 2σ_k²))."""

ANONYMOUS_START = """\
`reset` starts a new episode at round 0 with no accumulated RDP and draws the first round's channels (each device's
normalised channel power ~ Exponential(1))."""

#: How each kind of task budget reads on a page.
BUDGET_LABELS = {"nu": "ν", "epsilon_max": "ε̄", "target_epsilon": "target ε"}

#: What the score's 100 means, where a sentence helps (by the anchor that scores 100).
ANCHOR_NOTES = {
    "OfflineOptimal": "the offline optimum on the same channels, which knows the future and which no online policy "
                      "reaches",
    "BestConstant": "the best constant action, tuned on training realisations; the rounds are i.i.d. and the server "
                    "sees none of the next round's channel, so the online optimum is a constant action and 100 is it, "
                    "up to its tuning",
}


def score_text(task: Any) -> str:
    """What a score of 0 and 100 mean on ``task`` (its anchor policies, :attr:`otagym.tasks.Task.anchors`)."""
    zero, hundred = getattr(task, "anchors", ("EqualAlloc", "OfflineOptimal"))
    note = ANCHOR_NOTES.get(hundred)
    return (f"Scores are paired on each evaluation realisation, D4RL-style: 100 (R − R_0) / (R_100 − R_0), with R_0 "
            f"and R_100 the returns of `{zero}` (score 0) and `{hundred}` (score 100"
            + (f": {note}" if note else "") + ") on the same realisation. A negative score is worse than "
            f"`{zero}`.")


def _scheme_pages() -> dict[str, dict[str, Any]]:
    from otagym.schemes.receive_scaling import ReceiveScalingCore
    from otagym.schemes.anonymous import AnonymousCore
    from otagym.schemes.anonymous import observation as anonymous_observation
    from otagym.schemes.cdpb import CDPBCore, formulas
    from otagym.schemes.cdpb import observation as cdpb_observation

    return {
        "receive_scaling": {
            "title": "receive scaling (model A)", "core": ReceiveScalingCore,
            "describe": " ".join(_guide_section(RECEIVE_SCALING_GUIDE, "One round")[0].split()),
            "observation": _receive_scaling_observation, "reward": lambda core: RECEIVE_SCALING_REWARD,
            "start": RECEIVE_SCALING_START, "derivation": "../rl.md", "guide": "../environment/receive-scaling.md",
            "paper": "Kalarde, Liang, Dong, Ahmed & Cheng, *Privacy Enhancement in Over-the-Air Federated Learning "
                     "via Adaptive Receive Scaling* (arXiv:2510.03860, 2025)"},
        "cdpb": {
            "title": "client-driven power balancing (model B)", "core": CDPBCore,
            "describe": _paragraphs(_doc(formulas), 2),
            "observation": lambda scenario: _layout_observation(cdpb_observation, scenario), "reward": _step_reward,
            "start": CDPB_START, "derivation": "../cdpb.md", "guide": "../environment/cdpb.md",
            "paper": "Kim, Seo & Choi, *Privacy-Enhanced Over-the-Air Federated Learning via Client-Driven Power "
                     "Balancing* (arXiv:2410.05907, 2024)"},
        "anonymous": {
            "title": "anonymous over-the-air computation (model C)", "core": AnonymousCore,
            "describe": _paragraphs(_doc(AnonymousCore), 1, 2),
            "observation": lambda scenario: _layout_observation(anonymous_observation, scenario),
            "reward": _step_reward,
            "start": ANONYMOUS_START, "derivation": "../anonymous.md", "guide": "../environment/anonymous.md",
            "paper": "Hasırcıoğlu & Gündüz, *Private Wireless Federated Learning with Anonymous Over-the-Air "
                     "Computation* (IEEE ICASSP 2021)"},
    }


# --------------------------------------------------------------------------------------------------------------------
# Task pages
# --------------------------------------------------------------------------------------------------------------------

def task_slug(task_id: str) -> str:
    """``otagym/ReceiveScalingIID-v0`` -> ``ReceiveScalingIID-v0``."""
    return task_id.rsplit("/", 1)[-1]


def _stored_references(task_id: str) -> dict[str, Any] | None:
    from otagym.tasks import reference_scores

    try:
        return reference_scores(task_id)
    except ValueError:
        return None


def reference_table(task_id: str, budget_label: str = "ν") -> str:
    """The stored reference scores of a task as a Markdown table: IQM (mean) over the evaluation realisations."""
    stored = _stored_references(task_id)
    if stored is None or not stored.get("scores"):
        return "No reference scores are stored for this task yet."
    from otagym.tasks import BENCHMARK, COST_TOLERANCE, TASKS, feasible_score

    columns = list(next(iter(stored["scores"].values())))
    if task_id not in BENCHMARK:
        rows = [[f"`{policy}`"] + [f"{iqm(per[c]):.2f} ({np.mean(per[c]):.2f})" for c in columns]
                for policy, per in stored["scores"].items()]
        return md_table(["reference"] + [f"{budget_label} = {float(c):g}" for c in columns], rows)
    rows = []
    for policy, per in stored["scores"].items():
        cells = []
        for c in columns:
            costs = np.asarray(stored["cost_ratios"][policy][c])
            score = feasible_score(per[c], costs, stored["scores"][TASKS[task_id].violation_floor][c])
            cells.append(f"{iqm(score):.2f} ({np.mean(score):.2f}); cost {np.mean(costs):.2f}, "
                         f"{100 * np.mean(costs > 1 + COST_TOLERANCE):.0f}% over")
        rows.append([f"`{policy}`"] + cells)
    return ("The feasible score (an episode over its cost limit scores below every feasible one: FullPower's score on "
            "its realisation less 100 x its cost over the limit), the mean episode cost over the limit and the share "
            "of realisations over it:\n\n"
            + md_table(["reference"] + [f"{budget_label} = {float(c):g}" for c in columns], rows))


def _settings_rows(task: Any, scheme: str, pages: dict[str, dict[str, Any]]) -> list[list[str]]:
    from otagym.schemes import get_scheme

    info = get_scheme(scheme)
    core_args = google_section(_doc(pages[scheme]["core"]), "Args") if scheme in pages else {}
    fields = google_section(_doc(info.scenario_type), "Attributes")
    rows = []
    for key, value in task.kwargs.items():
        text = {"scenario": "the deployment preset: every setting not listed here is the preset's",
                "scheme": "the transmission scheme"}.get(key) or core_args.get(key) or fields.get(key, "")
        rows.append([f"`{key}`", f"`{value!r}`", rst_to_md(" ".join(text.split()))])
    return rows


def task_page(task: Any) -> str:
    """The Gymnasium-format page of one benchmark task."""
    import gymnasium as gym

    pages = _scheme_pages()
    scheme = getattr(task, "scheme", task.kwargs.get("scheme", "receive_scaling"))
    page = pages.get(scheme, {})
    env = gym.make(task.id)
    try:
        scenario = env.unwrapped.scenario
        obs_space, act_space = env.observation_space, env.action_space
    finally:
        env.close()
    eval_nus = getattr(task, "eval_nus", ())
    budget = getattr(task, "budget", "nu")
    label = BUDGET_LABELS.get(budget, f"`{budget}`")
    seeds = f"{task.eval_seeds[0]}–{task.eval_seeds[-1]}"
    cost_limit = getattr(task, "cost_limit", None)
    core_args = google_section(_doc(page["core"]), "Args") if page else {}
    action_type = task.kwargs.get("action_type")
    action_text = rst_to_md(" ".join(core_args.get("action_type", "").split())) if page else ""

    out = [f"# {task.id}", "",
           "<!-- Generated at build time by docs/hooks/otagym_docs.py from otagym.tasks.TASKS; do not edit. -->", "",
           md_table(["Scheme", f"[{page.get('title', scheme)}]({page['guide']})" if page else f"`{scheme}`"], [
               ["Action space", f"`{act_space}`"],
               ["Observation space", f"`{obs_space}`"],
               ["Episode length", f"T = {task.max_episode_steps} rounds (`max_episode_steps`)"],
               ["Make", f'`gym.make("{task.id}")`'],
               ["Vectorised", f'`gym.make_vec("{task.id}", num_envs=N)` (native)'],
           ]), "",
           "## Description", "", task.summary, ""]
    if page:
        out += [page["describe"], "",
                f"The scheme follows {page['paper']}; [its derivation]({page['derivation']}) lists the equations and "
                "where the implementation deviates from the paper.", ""]
    out += ["## Action space", "", f"`{act_space}`" + (f", `action_type={action_type!r}`" if action_type else "")
            + ".", ""]
    if action_text:
        out += [f"`action_type`: {action_text}", ""]
    out += ["## Observation space", "", f"`{obs_space}`.", ""]
    if page:
        out += [page["observation"](scenario), ""]
    out += ["## Rewards", ""]
    if page:
        reward = page["reward"](page["core"])
        mode = task.kwargs.get("reward_mode")
        out += ([f"This task uses `reward_mode={mode!r}`.", ""] if mode else []) + [reward, ""]
    if cost_limit is not None:
        out += ["**Constraint.** `info[\"cost\"]` is a per-round cost whose episode sum is at most the task's cost "
                f"limit, {cost_limit:g} (= T), exactly when the task's constraint holds (Safety-Gymnasium's "
                "convention). " + ("Budget mode meets it by construction." if task.kwargs.get("reward_mode") == "budget"
                                  else ""), ""]
    out += ["## Starting state", "", page.get("start", "`reset(seed=...)` starts a new episode."), "",
            "## Episode end", "",
            f"An episode terminates after T = {task.max_episode_steps} rounds: the federated training run ends "
            "(t/T is observed). The task is registered with `max_episode_steps` = T, so Gymnasium's `TimeLimit` "
            "also reports `truncated=True` on that last step; nothing ends an episode earlier.", "",
            "## Arguments", "",
            f'`gym.make("{task.id}")` fixes these settings (every other setting is the preset\'s):', "",
            md_table(["argument", "value", "meaning"], _settings_rows(task, scheme, pages)), "",
            "`gym.make` accepts the env's other keyword arguments as overrides (e.g. `render_mode=\"ansi\"`), but an "
            "env with a changed setting is no longer the task and its scores are not comparable (a UserWarning "
            "says so); `otagym/OTAPrivacy-v0` is the configurable env. A changed episode length keeps the task's "
            "cost limit and time limit unless `cost_limit` and `max_episode_steps` are given too.", "",
            "## Vectorised environment", "",
            f'`gym.make_vec("{task.id}", num_envs=N)` builds the native vector env (`OTAPrivacyVectorEnv`: N '
            "episodes stepped as arrays, the same arithmetic as the single env). It takes `autoreset_mode` as "
            "Gymnasium's `SyncVectorEnv` does (default `NEXT_STEP`); `vectorization_mode=\"sync\"` or `\"async\"` "
            "wraps single envs instead.", "",
            "```python", "import gymnasium as gym", "import otagym  # registers the tasks", "",
            f'envs = gym.make_vec("{task.id}", num_envs=64)',
            "obs, info = envs.reset(seed=0)",
            "obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())", "```", "",
            "## Evaluation and reference scores", "",
            f"The task is scored on a frozen evaluation set: the channel realisations of seeds {seeds}"
            + (f", at {label} ∈ {{{', '.join(f'{n:g}' for n in eval_nus)}}}" if eval_nus else "") + ". "
            + score_text(task) + " The table gives the interquartile mean (IQM) over the "
            f"{len(task.eval_seeds)} realisations and, in brackets, the mean; the references never saw these "
            "channels.", "",
            reference_table(task.id, label), "",
            "```bash", f"otagym evaluate {task.id} BestConstant           # a reference policy by name",
            f"otagym evaluate {task.id} path/to/model.zip      # an SB3 model, an rl_zoo3 log folder or "
            "module:function", "```", "",
            "[Evaluate on the benchmark](../tutorials/evaluate.md) explains the score and how any client plays the "
            "evaluation set.", "",
            "## Version history", ""]
    out += [f"- {v}" for v in task.versions] + [""]
    return unicode_math("\n".join(out))


def tasks_index() -> str:
    """The overview of every registered task."""
    from otagym.tasks import BENCHMARK, TASKS

    pages = _scheme_pages()
    rows = []
    for task in TASKS.values():
        scheme = task.kwargs.get("scheme", "receive_scaling")
        rows.append([f"[`{task.id}`]({task_slug(task.id)}.md)", pages.get(scheme, {}).get("title", scheme),
                     "benchmark suite" if task.id in BENCHMARK else "formulation", str(task.max_episode_steps),
                     task.summary])
    return unicode_math("\n".join([
        "# Benchmark tasks", "",
        "<!-- Generated at build time by docs/hooks/otagym_docs.py from otagym.tasks.TASKS; do not edit. -->", "",
        "A task is a registered, versioned Gymnasium id that fixes every setting that changes what is learned "
        "(scheme, deployment, horizon, fading, formulation, action, the budgets it is trained over), so that one "
        "number on it means the same in every paper. `import otagym` registers them; `gym.make(task_id)` and "
        "`gym.make_vec(task_id, num_envs=N)` build them. A task's version is bumped whenever anything that changes "
        "learning changes. `otagym/OTAPrivacy-v0` stays the configurable env: a task's id made with keyword "
        "arguments that change its settings (`gym.make(task_id, num_rounds=100)`) is another env, and a UserWarning "
        "names the settings that changed.", "",
        "The tasks of [the benchmark suite](../benchmark.md) are those an RL algorithm is ranked on: each has a "
        "floor, a computable ceiling and at least 20 normalised points between them. The formulation tasks "
        "are the papers' settings, where a constant action comes within about a point of the ceiling.", "",
        md_table(["task", "scheme", "set", "T", "what there is to learn"], rows), "",
        "Each task is scored with `otagym evaluate` on a frozen set of channel realisations, against stored "
        "reference scores: see each task's page and [Evaluate on the benchmark](../tutorials/evaluate.md).", ""]))


# --------------------------------------------------------------------------------------------------------------------
# Command line page
# --------------------------------------------------------------------------------------------------------------------

def cli_help(args: list[str]) -> str:
    """``otagym ARGS --help`` as printed (80 columns)."""
    from otagym.cli.commands import main

    buffer = io.StringIO()
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
            main([*args, "--help"])
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return buffer.getvalue().rstrip()


def cli_commands() -> list[str]:
    """The ``otagym`` commands, as the parser has them."""
    import argparse

    from otagym.cli.commands import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def cli_page() -> str:
    """Every command's help page."""
    out = ["# Command line", "",
           "<!-- Generated at build time by docs/hooks/otagym_docs.py from the argument parsers; do not edit. -->", "",
           "`pip install -e .` installs the `otagym` command. These are its help pages as `otagym COMMAND --help` "
           "prints them.", "", "```text", cli_help([]), "```", ""]
    for command in cli_commands():
        out += [f"## otagym {command}", "", "```text", cli_help([command]), "```", ""]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------------------------------
# MkDocs events
# --------------------------------------------------------------------------------------------------------------------

def generated_page_paths() -> list[str]:
    """The paths under docs/ of the pages :func:`generated_pages` builds."""
    from otagym.tasks import TASKS

    return [TASKS_INDEX, "cli.md"] + [f"{TASKS_DIR}/{task_slug(t.id)}.md" for t in TASKS.values()]


def generated_pages() -> dict[str, str]:
    """Every generated page by its path under docs/."""
    from otagym.tasks import TASKS

    pages = {TASKS_INDEX: tasks_index(), "cli.md": cli_page()}
    pages.update({f"{TASKS_DIR}/{task_slug(t.id)}.md": task_page(t) for t in TASKS.values()})
    return pages


def on_config(config: Any) -> Any:
    """Put every task page under the nav section that lists ``tasks/index.md``."""
    from otagym.tasks import TASKS

    entries = [TASKS_INDEX] + [{t.id: f"{TASKS_DIR}/{task_slug(t.id)}.md"} for t in TASKS.values()]

    def visit(items: list[Any]) -> bool:
        for item in items:
            if isinstance(item, dict):
                for value in item.values():
                    if isinstance(value, list):
                        if TASKS_INDEX in value:  # the section's own pages first, then the index and the tasks
                            value[:] = [v for v in value if v not in entries] + entries
                            return True
                        if visit(value):
                            return True
        return False

    if config.get("nav"):
        visit(config["nav"])
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, content in generated_pages().items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=content))
    return files


_HTML_ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|obj|exc|const):<code>(~?)([\w.]+)</code>")


def on_page_content(html_text: str, page: Any, config: Any, files: Any) -> str:
    """Sphinx roles left in rendered docstrings -> code spans, cross-referenced by mkdocs-autorefs where the API
    reference documents the name (no link and no warning elsewhere)."""
    def repl(m: re.Match[str]) -> str:
        ident = m.group(2)
        shown = ident.rsplit(".", 1)[-1] if m.group(1) else ident
        return (f'<autoref identifier="{html.escape(ident)}" optional><code>{html.escape(shown)}</code>'
                "</autoref>")

    return _HTML_ROLE.sub(repl, html_text)


def rst_tables_to_md(text: str) -> str:
    """Every reStructuredText simple table in ``text`` as a Markdown table (the rest unchanged)."""
    lines = text.splitlines()
    out: list[str] = []
    while True:
        found = rst_table_to_md(lines)
        if found is None:
            return "\n".join(out + lines)
        rows, start, end = found
        out += lines[:start] + ["", md_table(rows[0], rows[1:]), ""]
        lines = lines[end:]


try:  # the griffe extension mkdocstrings loads (mkdocs.yml: extensions: docs/hooks/otagym_docs.py:RstTables)
    import griffe

    class RstTables(griffe.Extension):
        """Docstring tables written in reStructuredText render as Markdown tables in the API reference."""

        def on_object(self, *, obj: Any, **kwargs: Any) -> None:
            if obj.docstring is not None and "==" in obj.docstring.value:
                obj.docstring.value = rst_tables_to_md(obj.docstring.value)
except ImportError:  # griffe comes with mkdocstrings (the docs extra); the page generation does not need it
    pass
