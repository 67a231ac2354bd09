"""A sweep's cells: what names a cell (:func:`cell_key`, a content hash), which cells are computed together
(:func:`batch_key`, :func:`batches`) and what a batch of cells computes into its records (:func:`run_cells`).

A cell is a JSON-able dict (scheme, scenario, rounds, fidelity, policy, nu where the scheme has a budget axis, seed);
its numbers are a pure function of the cell: its channels come from its seed, and nothing depends on which other cells
run beside it or where. Cells of one analytic policy and scenario that differ only in nu and seed (:func:`batch_key`)
are computed as one batch by their scheme's sweep (:func:`compute_cells`, :func:`baselines.sweep.scheme_sweep`),
which gives the same bits as one at a time (tested) in a fraction of the time.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import os
import socket
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Mapping

from otagym import __version__
from otagym._io import file_sha256
from otagym.schemes import SCHEMES

__all__ = ["scenario_of", "content_sha256", "cell_key", "cached_model", "compute_cells", "BATCH_CELLS", "batch_key",
           "batches", "utc_now", "run_cell", "run_cells", "lost_record"]


def scenario_of(cell: Mapping[str, Any]) -> Any:
    """The scenario a cell resolves to: its scheme's preset with the cell's field overrides and rounds."""
    return SCHEMES[cell["scheme"]].scenario(cell["preset"], **cell["overrides"], num_rounds=cell["rounds"])


def content_sha256(data: Any) -> str:
    """SHA-256 (hex) of ``data`` as canonical JSON (sorted keys, no spaces, ``str`` for what JSON cannot hold)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def cell_key(cell: Mapping[str, Any]) -> str:
    """The content hash naming a cell's record: SHA-256 of the cell and of the scenario it resolves to."""
    return content_sha256({"cell": cell, "scenario": scenario_of(cell).to_dict()})[:24]


@functools.lru_cache(maxsize=16)
def cached_model(path: str, sha256: str) -> Any:
    """The SB3 model at ``path``, loaded once per process for each ``(path, sha256)`` (a changed file: anew)."""
    from agents.policy import load_model

    return load_model(path)


def _trained_policy(policy: Mapping[str, Any]) -> Callable[[Any], Any]:
    """The policy of a trained model's entry for per-env budgets ``nu``, once its file is checked to be the planned
    one (its SHA-256)."""
    found = file_sha256(Path(policy["model"]))
    if found != policy["sha256"]:
        raise RuntimeError(f"policy {policy['name']}: {policy['model']} on {socket.gethostname()} has SHA-256 "
                           f"{found[:12]}..., not the planned {policy['sha256'][:12]}... (a changed or different file)")
    from agents.policy import AgentPolicy

    model, kw = cached_model(policy["model"], policy["sha256"]), policy["env_kwargs"]
    return lambda nu: AgentPolicy(model, nu=nu, env_kwargs=kw)


def compute_cells(cells: list[Mapping[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The results of :func:`batch_key`-equal cells, each with the scenario it ran on, as their scheme's sweep
    computes them (:func:`baselines.sweep.scheme_sweep`: ``baselines/<scheme>/sweep.py``)."""
    from baselines.sweep import scheme_sweep

    cell = cells[0]
    trained = _trained_policy(cell["policy"]) if "model" in cell["policy"] else None
    return scheme_sweep(cell["scheme"]).run_cells(scenario_of(cell), cells, trained=trained)


#: The most cells computed as one batch (one vector env). Batching changes no number, only the wall time: an episode
#: of 9 envs costs about what one of 1 does.
BATCH_CELLS = 64


def batch_key(cell: Mapping[str, Any]) -> str | None:
    """Cells with the same key may be computed as one batch: those of one analytic policy and scenario, differing in
    nu and seed. ``None`` for cells that run alone: the training fidelity (a batch would share one generator) and
    trained models (a network's forward pass over a batch may round differently from one over a single observation).
    """
    if cell["fidelity"] != "analytic" or "model" in cell["policy"]:
        return None
    return json.dumps({k: v for k, v in cell.items() if k not in ("nu", "seed")}, sort_keys=True, default=str)


def batches(tasks: list[tuple[str, dict[str, Any]]], size: int = BATCH_CELLS) -> list[list[tuple[str, dict[str, Any]]]]:
    """``tasks`` ((key, cell) pairs) as batches of at most ``size`` :func:`batch_key`-equal cells, in the order of
    their first cell."""
    groups: dict[Any, list[tuple[str, dict[str, Any]]]] = {}
    for i, (key, cell) in enumerate(tasks):
        groups.setdefault(batch_key(cell) or i, []).append((key, cell))
    return [g[i:i + size] for g in groups.values() for i in range(0, len(g), size)]


def utc_now() -> str:
    """The time now in UTC, ISO 8601 to the second (records' ``started``/``finished``, ``sweep.json``'s ``written``)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def run_cell(cell: Mapping[str, Any], key: str) -> dict[str, Any]:
    """Compute one cell into its record; an exception is recorded (type, message, traceback), never raised."""
    return run_cells([(key, dict(cell))])[0]


def run_cells(batch: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Compute a batch of :func:`batch_key`-equal cells ((key, cell) pairs) into their records, as one computation;
    an exception is recorded in every cell's record (type, message, traceback), never raised. Each record's
    ``wall_s`` is the batch's wall time divided by its cells."""
    start, started = time.perf_counter(), utc_now()
    records = [{"key": key, "cell": dict(cell), "seed": cell["seed"], "version": __version__,
                "host": socket.gethostname(), "pid": os.getpid(), "started": started} for key, cell in batch]
    try:
        outputs = compute_cells([cell for _, cell in batch])
        for record, (result, scenario) in zip(records, outputs):
            record.update(status="ok", result=result, scenario=scenario, error=None)
    except Exception as err:  # noqa: BLE001 - a failing cell is recorded and the sweep goes on
        error = {"type": type(err).__name__, "message": str(err), "traceback": traceback.format_exc()}
        for record in records:
            record.update(status="error", result=None, scenario=None, error=error)
    wall, finished = (time.perf_counter() - start) / len(batch), utc_now()
    for record in records:
        record.update(wall_s=wall, finished=finished)
    return records


def lost_record(cell: Mapping[str, Any], key: str, err: BaseException) -> dict[str, Any]:
    """The record of a cell whose worker failed outside the cell (e.g. a Ray worker that died on every retry)."""
    return {"key": key, "cell": dict(cell), "seed": cell["seed"], "version": __version__, "host": None, "pid": None,
            "started": None, "status": "error", "result": None, "scenario": None,
            "error": {"type": type(err).__name__, "message": str(err).splitlines()[0] if str(err) else "",
                      "traceback": "".join(traceback.format_exception(type(err), err, err.__traceback__))},
            "wall_s": None, "finished": utc_now()}

