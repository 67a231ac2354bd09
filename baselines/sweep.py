"""What ``otagym sweep`` computes for each scheme: its sweepable analytic policies, its grid's axes, a batch of cells
and the summary over seeds. Each scheme's is ``baselines/<scheme>/sweep.py``'s ``SWEEP`` (:func:`scheme_sweep`), as
its scoring is ``baselines/<scheme>/benchmark.py``'s ``BENCHMARK``, so that the sweep never names a scheme.

A *cell* here is the sweep's JSON-able dict (:mod:`otagym.cli.sweep.cells`): ``scheme``, ``preset``, ``overrides``,
``rounds``, ``fidelity``, ``policy`` (``{name, policy, params}`` of an analytic policy, or ``{name, model, ...}`` of a
trained model), ``seed``, ``nu`` where the scheme has a budget axis, ``dataset``/``data_dir`` (and the data subsets
it sets: :func:`cell_subsets`, and the training options: :func:`cell_training_options`) under the training fidelity,
and ``accountant`` where it is ``"pld"``
(:func:`cell_accountant`: the cell also records ``epsilon_pld``). :meth:`SchemeSweep.run_cells` computes cells that
differ only in nu and seed (one batch) on their resolved scenario; a cell's numbers never depend on the batch it runs
in.

Two kinds of scheme: receive scaling's cell is the matched-nu comparison of its paper
(:mod:`baselines.receive_scaling.sweep`); CDPB's and anonymous OTA's cell is one episode of a policy in the scheme's
env (:class:`EpisodeSweep`), their privacy budget fixed by the scenario.
"""

from __future__ import annotations

import contextvars
import importlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from baselines.play import play
from baselines.report import ci95
from otagym.env import OTAPrivacyVectorEnv
from otagym.fidelity import SUBSET_KEYS
from otagym.schemes import get_scheme
from otagym.validation import Spec

__all__ = ["SweepPolicy", "SchemeSweep", "EpisodeSweep", "EpisodeColumns", "scheme_sweep", "mean_ci_rows",
           "cell_accountant", "cell_subsets", "cell_training_options", "OPTIONAL_COLUMNS", "SHOW_ROUNDS", "CELL_TRAINING_ARGS",
           "training_rounds"]

#: One computed cell: its result (JSON-able numbers) and the scenario it ran on (``to_dict()``).
CellResult = tuple[dict[str, Any], dict[str, Any]]
#: Result fields that only some cells record (``epsilon_pld``: those of ``accountant: pld``), listed after ``epsilon``
#: in a table only where a cell has them (:meth:`SchemeSweep.table_columns`), so that other sweeps' tables keep theirs.
OPTIONAL_COLUMNS = ("epsilon_pld",)
#: Whether a training cell computed in this context shows its rounds on a progress bar below the sweep's (set by
#: ``otagym sweep`` and ``otagym compare`` for the cells they compute in-process with their progress bar on).
SHOW_ROUNDS: contextvars.ContextVar[bool] = contextvars.ContextVar("SHOW_ROUNDS", default=False)
#: The env arguments of every training cell: a cell records the test accuracy only, so its env does not measure
#: ||grad f||^2 over the devices' data (most of an evaluation's time on a real dataset).
CELL_TRAINING_ARGS: Mapping[str, Any] = {"eval_gradient": False}


def training_rounds(total: int, fidelity: str) -> Iterable[int]:
    """``range(total)``, the rounds of a cell's episode: on a progress bar (removed when done) for a training cell
    where :data:`SHOW_ROUNDS` is set (its rounds take seconds each on a real dataset)."""
    if fidelity != "train" or not SHOW_ROUNDS.get():
        return range(total)
    from tqdm.auto import tqdm

    return tqdm(range(total), desc="  training cell", unit="round", leave=False)


def cell_accountant(cell: Mapping[str, Any]) -> str:
    """The accountant of a cell's end-of-episode eps: its ``accountant`` (``"pld"``: ``epsilon_pld`` beside the RDP
    ledger's ``epsilon``), ``"rdp"`` where it names none."""
    return cell.get("accountant", "rdp")


def cell_subsets(cell: Mapping[str, Any]) -> dict[str, int]:
    """The data subsets a training cell names (``train_samples``, ``eval_samples``: :data:`SUBSET_KEYS`), as env
    arguments; empty where it names none."""
    return {k: cell[k] for k in SUBSET_KEYS if cell.get(k) is not None}


def cell_training_options(cell: Mapping[str, Any]) -> dict[str, Any]:
    """The options of the model's update a training cell names (its scheme's
    :attr:`SchemeSweep.training_options`, e.g. ``weight_decay``), as env arguments; empty where it names none."""
    return dict(cell.get("training_options") or {})


@dataclass(frozen=True)
class SweepPolicy:
    """An analytic policy a sweep config can name (``{policy: NAME, params: {...}}``).

    Attributes:
        build: ``build(**params) -> policy`` (``reset(scenario, seed)``, ``act(obs, info)``).
        params: the keyword arguments a config may set, and their specs.
        defaults: the values of ``params`` a config leaves out, beside ``build``'s own defaults (an argument with
            neither is refused before any cell runs).
        scenario: scenario fields the policy plays with (CDPB's ``strategy``), set before its ``configure``.
        env_params: the ``params`` that are also env arguments (anonymous OTA's ``target_epsilon``: the budget of the
            env's ``info["cost"]``).
    """

    build: Callable[..., Any]
    params: Mapping[str, Spec] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    scenario: Mapping[str, Any] = field(default_factory=dict)
    env_params: tuple[str, ...] = ()


class SchemeSweep:
    """How one scheme's sweep cells are computed and summarised; each scheme's is ``baselines/<scheme>/sweep.py``'s
    ``SWEEP``.

    Attributes:
        nu_axis: whether cells have a budget nu (a config's ``nu``); without one, a config that gives ``nu`` is
            refused.
        fidelities: the fidelities its cells can run (``analytic``, ``train``).
        trained_models: whether a config may name a trained model (``NAME:PATH``) among its policies.
        result_columns: the scalar result fields of a cell, in the order ``cells.csv`` lists them.
        default_policies: the policies of a config that names none.
        training_options: the env arguments of its training fidelity's model update a config may set
            (``training_options: {NAME: VALUE}``, e.g. ``weight_decay``), and their specs.
    """

    nu_axis: bool = False
    fidelities: tuple[str, ...] = ("analytic",)
    trained_models: bool = False
    result_columns: tuple[str, ...] = ()
    default_policies: tuple[str, ...] = ()
    training_options: Mapping[str, Spec] = {}

    def table_columns(self, results: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """:attr:`result_columns` with those of :data:`OPTIONAL_COLUMNS` that one of ``results`` has, after
        ``epsilon``: the columns of these results in ``cells.csv``."""
        optional = [c for c in OPTIONAL_COLUMNS if any(c in r for r in results)]
        return tuple(c for column in self.result_columns for c in ([column, *optional] if column == "epsilon"
                                                                   else [column]))

    def policy_names(self) -> list[str]:
        """The analytic policies a config can name."""
        raise NotImplementedError

    def param_specs(self, name: str) -> Mapping[str, Spec]:
        """The settable arguments of policy ``name`` and their specs."""
        raise NotImplementedError

    def check_params(self, name: str, params: Mapping[str, Any], scenario: Any, nus: Sequence[float | None]) -> None:
        """Raise ``ValueError`` when policy ``name`` refuses ``params`` (already checked by their specs) on
        ``scenario`` at the first budget of ``nus``, so that a config fails before any cell runs."""
        raise NotImplementedError

    def run_cells(self, scenario: Any, cells: Sequence[Mapping[str, Any]], *,
                  trained: Callable[[np.ndarray], Any] | None = None) -> list[CellResult]:
        """The results of ``cells`` (differing only in nu and seed) on their resolved ``scenario``, in order, each with
        the scenario it ran on. ``trained``: the policy of a trained model for per-cell budgets (only where
        :attr:`trained_models`)."""
        raise NotImplementedError

    def summarize(self, cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows of mean and 95% CI over seeds from cells (each ``policy``, ``seed``, ``nu`` where the scheme has one,
        and the cell's result)."""
        raise NotImplementedError


def scheme_sweep(scheme: str) -> SchemeSweep:
    """The :class:`SchemeSweep` of a registered scheme (:func:`otagym.schemes.get_scheme` checks the name):
    ``baselines.<scheme>.sweep.SWEEP``, each scheme's baselines being one package named as the scheme."""
    return importlib.import_module(f"baselines.{get_scheme(scheme).name}.sweep").SWEEP


def mean_ci_rows(cells: list[dict[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    """One row per policy in order of first appearance: ``seeds``, the summed ``wall_s``, and for each of ``keys``
    found in the cells the mean and the half-width of its 95% CI over the seeds (:func:`baselines.report.ci95`;
    ``<key>_ci95``)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for c in cells:
        groups.setdefault(c["policy"], []).append(c)
    rows = []
    for name, group in groups.items():
        row: dict[str, Any] = {"policy": name, "seeds": len(group)}
        for key in keys:
            values = [c.get(key) for c in group]
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                row[key], row[f"{key}_ci95"] = ci95(np.array(values, dtype=float))
        row["wall_s"] = float(sum(c.get("wall_s") or 0.0 for c in group))
        rows.append(row)
    return rows


@dataclass(frozen=True)
class EpisodeColumns:
    """What an :class:`EpisodeSweep` cell records from its episode beside its return, cost and rounds.

    Attributes:
        final: result field -> info key, read at the episode's last step.
        means: result field -> info key, averaged over the episode's rounds.
    """

    final: Mapping[str, str]
    means: Mapping[str, str] = field(default_factory=dict)


class EpisodeSweep(SchemeSweep):
    """A scheme whose cell is one episode of an analytic policy in the scheme's env (``OTAPrivacyVectorEnv(1,
    scenario, scheme=<the cell's>)``, reset with the cell's seed), its privacy budget fixed by the scenario: no nu.

    Each cell runs in an env of its own: a vector env's envs share one generator, so a cell beside others would draw
    other channels. The policy is built and planned once per batch (its plan depends on the scenario only).

    A cell's result: ``return`` (the episode return), ``cost`` (the sum of ``info["cost"]`` where the env reports
    one), ``rounds_played`` (the episode's length: the cell's rounds, or the policy's own horizon where it plans
    one), ``rdp`` (the worst device's cumulative RDP at alpha under the scenario's accounting, nats), ``epsilon`` and
    ``dp_order`` (the worst device's eps at the scenario's delta and its best RDP order), :attr:`columns`, ``wall_s``
    (the batch's wall time over its cells), under the training fidelity ``accuracy`` (the last test accuracy) and,
    for a cell of ``accountant: pld`` (the env built with ``accountant="pld"``), ``epsilon_pld`` (the worst device's
    eps at delta from its privacy loss distribution, the env's ``dp_epsilon_pld``).
    """

    #: The env arguments of every cell (the action the policies play).
    env_kwargs: Mapping[str, Any] = {}
    #: The scheme's own result fields.
    columns: EpisodeColumns = EpisodeColumns({})
    #: The policies by name.
    policies: Mapping[str, SweepPolicy] = {}

    @property
    def result_columns(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("return", "cost", "rounds_played", "rdp", "epsilon", "dp_order", *self.columns.final,
                *self.columns.means, "accuracy")

    def policy_names(self) -> list[str]:
        return list(self.policies)

    def param_specs(self, name: str) -> Mapping[str, Spec]:
        return self.policies[name].params

    def check_params(self, name: str, params: Mapping[str, Any], scenario: Any, nus: Sequence[float | None]) -> None:
        """The policy built with ``params`` (a ``TypeError`` names an argument it needs and the config leaves out)."""
        spec = self.policies[name]
        spec.build(**{**spec.defaults, **params})

    def configure(self, policy: Any, scenario: Any) -> Any:
        """The scenario ``policy`` plays: ``policy.configure(scenario)`` where it has one (CDPB's planners choose
        their horizon), else ``scenario``."""
        configure = getattr(policy, "configure", None)
        return scenario if configure is None else configure(scenario)

    def run_cells(self, scenario: Any, cells: Sequence[Mapping[str, Any]], *,
                  trained: Callable[[np.ndarray], Any] | None = None) -> list[CellResult]:
        start = time.perf_counter()
        cell = cells[0]
        spec = self.policies[cell["policy"]["policy"]]
        params = {**spec.defaults, **cell["policy"]["params"]}
        policy = spec.build(**params)
        played = self.configure(policy, scenario.replace(**spec.scenario) if spec.scenario else scenario)
        env_kwargs = {**self.env_kwargs, **{k: params[k] for k in spec.env_params}}
        if cell["fidelity"] == "train":
            env_kwargs.update(fidelity="train", dataset=cell.get("dataset") or "digits", data_dir=cell.get("data_dir"),
                              **CELL_TRAINING_ARGS, **cell_subsets(cell))
        if cell_accountant(cell) != "rdp":
            env_kwargs["accountant"] = cell_accountant(cell)
        outs = [self.play_episode(policy, played, int(c["seed"]), cell["scheme"], env_kwargs) for c in cells]
        wall = (time.perf_counter() - start) / len(cells)
        return [(dict(result, wall_s=wall), ran) for result, ran in outs]

    def play_episode(self, policy: Any, scenario: Any, seed: int, scheme: str,
                     env_kwargs: Mapping[str, Any]) -> CellResult:
        """One episode of ``policy`` on ``scenario`` in an env of its own reset with ``seed``: the result (less
        ``wall_s``) and the scenario the env ran (under the training fidelity its d follows the model)."""
        env = OTAPrivacyVectorEnv(1, scenario, scheme=scheme, **env_kwargs)
        sums = dict.fromkeys(self.columns.means, 0.0)

        def add_means(t: int, info: dict[str, Any]) -> None:
            if t < 0:  # the reset's info
                return
            for key, name in self.columns.means.items():
                sums[key] += float(np.mean(info[name][0]))

        played = play(policy, env, {}, training_rounds(env.scenario.num_rounds, env_kwargs.get("fidelity", "analytic")),
                      seed=seed, on_round=add_means)
        info, total = played.final_info, float(played.returns[0])
        cost = None if played.cost_ratios is None else float(played.cost_ratios[0])
        rounds = env.scenario.num_rounds
        eps, order = np.ravel(info["dp_epsilon"][0]), np.ravel(info["dp_order"][0])  # per device where the env has
        worst = int(np.argmax(eps))
        result: dict[str, Any] = {"return": total, "cost": cost, "rounds_played": rounds,
                                  "rdp": float(np.max(info["rdp_cumulative"][0])),
                                  "epsilon": float(eps[worst]), "dp_order": float(order[worst])}
        if "dp_epsilon_pld" in info:
            result["epsilon_pld"] = float(np.max(info["dp_epsilon_pld"][0]))
        result.update({key: float(info[name][0]) for key, name in self.columns.final.items()})
        result.update({key: value / rounds for key, value in sums.items()})
        if "test_accuracy" in info:
            result["accuracy"] = float(info["test_accuracy"][0])
        return result, env.scenario.to_dict()

    def summarize(self, cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return mean_ci_rows(cells, self.table_columns(cells))
