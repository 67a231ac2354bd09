"""Receive scaling's cells of ``otagym sweep``: the matched-nu comparison of the AdaScale paper's §VII
(:func:`baselines.receive_scaling.compare.evaluate_cells`), one cell a (policy, nu, seed), analytic or training
fidelity, trained models included. A cell's result is :func:`~baselines.receive_scaling.compare.evaluate_cell`'s
(``rdp``, ``epsilon``, ``cost_mean``, the leakages and the paired ``score``, whether it ``matched`` nu, the calibrated
``param_value``; ``accuracy`` and its curve under the training fidelity; ``epsilon_pld`` for a cell of
``accountant: pld``); the summary is
:func:`~baselines.receive_scaling.compare.summarize`'s.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from baselines.receive_scaling.compare import DEFAULT_POLICIES, POLICIES, PolicySpec, evaluate_cells, summarize
from baselines.receive_scaling.evaluation import CellTraining, training_scenario
from baselines.sweep import CellResult, SchemeSweep, cell_accountant, cell_subsets, cell_training_options
from otagym.schemes.receive_scaling.core import ReceiveScalingCore
from otagym.validation import POSITIVE, Spec

__all__ = ["ReceiveScalingSweep", "SWEEP"]


@functools.lru_cache(maxsize=16)
def _training_scenario(scenario: Any, dataset: str, data_dir: str | None, subsets: tuple[tuple[str, int], ...]) -> Any:
    return training_scenario(scenario, dataset, data_dir, dict(subsets))


class ReceiveScalingSweep(SchemeSweep):
    """Receive scaling's sweep: :data:`~baselines.receive_scaling.compare.POLICIES` at each nu, each settable option a
    finite number > 0."""

    nu_axis = True
    fidelities = ("analytic", "train")
    trained_models = True
    result_columns = ("rdp", "epsilon", "cost_mean", "leakage", "equal_alloc_leakage", "optimal_leakage", "score",
                      "matched", "param", "param_value", "calibrated", "accuracy")
    default_policies = DEFAULT_POLICIES
    training_options = {k: ReceiveScalingCore.ARGS[k] for k in ("momentum", "weight_decay")}

    def policy_names(self) -> list[str]:
        return list(POLICIES)

    def param_specs(self, name: str) -> Mapping[str, Spec]:
        return dict.fromkeys(POLICIES[name].options, POSITIVE)

    def check_params(self, name: str, params: Mapping[str, Any], scenario: Any, nus: Sequence[float | None]) -> None:
        """Build the policy with ``params`` and reset it once (an unset tuned parameter at its bracket's low end)."""
        if not params:
            return
        spec = POLICIES[name]
        options = dict(params)
        value = np.array([options.pop(spec.param)]) if spec.param in options else (
            None if spec.param is None else np.array([spec.bracket[0]]))
        spec.build(np.array([nus[0]]), value, **options).reset(scenario, 0)

    def run_cells(self, scenario: Any, cells: Sequence[Mapping[str, Any]], *,
                  trained: Callable[[np.ndarray], Any] | None = None) -> list[CellResult]:
        """:func:`~baselines.receive_scaling.compare.evaluate_cells` of the batch (the same numbers as one at a
        time); under the training fidelity on :func:`~baselines.receive_scaling.evaluation.training_scenario`'s."""
        cell = cells[0]
        subsets = cell_subsets(cell)
        if cell["fidelity"] == "train":
            scenario = _training_scenario(scenario, cell["dataset"], cell["data_dir"], tuple(subsets.items()))
        options: dict[str, float] = {}
        if trained is not None:
            spec = PolicySpec(lambda nu, p: trained(nu))
        else:
            spec, options = POLICIES[cell["policy"]["policy"]], dict(cell["policy"]["params"])
        training = CellTraining(cell["fidelity"], cell.get("dataset") or "digits", cell.get("data_dir"),
                                args={**subsets, **cell_training_options(cell)})
        results = evaluate_cells(scenario, spec, [(c["nu"], c["seed"]) for c in cells], options=options,
                                 training=training, accountant=cell_accountant(cell))
        return [(result, scenario.to_dict()) for result in results]

    def summarize(self, cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return summarize(cells)


SWEEP = ReceiveScalingSweep()
