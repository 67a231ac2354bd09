"""A sweep's driver: :func:`run` runs the cells of a :class:`~otagym.cli.sweep.config.Plan` that have no ``ok``
record on an executor, writes each record as it finishes and rebuilds the tables; :func:`report` says what it did and
:func:`exit_code` what it ends in.

A run first removes the temporary files that runs killed mid-write left in the sweep's folder and in ``cells/``
(:func:`otagym._io.remove_stale_temporaries`) and writes ``sweep.json`` (the normalised config and the cell keys of
the latest run). A rerun skips cells with an ``ok`` record (resume) and retries those that failed.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from otagym import __version__
from otagym._io import remove_stale_temporaries, write_json
from otagym.cli.sweep.cells import BATCH_CELLS, batches, utc_now
from otagym.cli.sweep.config import Plan
from otagym.cli.sweep.executors import in_process, process_pool, ray_tasks
from otagym.cli.sweep.records import read_records, record_checksum
from otagym.cli.sweep.tables import write_tables

__all__ = ["Outcome", "run", "report", "exit_code"]


@dataclass
class Outcome:
    """What a run did: cells computed now, skipped (finished earlier), failed now, records found invalid (key ->
    reason; recomputed), and why it stopped early if it did (``"interrupted"`` by Ctrl-C, a worker process that
    died, or ``"cannot write PATH: REASON"``)."""

    total: int
    skipped: int = 0
    computed: int = 0
    failed: list[str] = field(default_factory=list)
    stopped: str | None = None
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)
    tables: list[Path] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def complete(self) -> bool:
        """Every cell has an ``ok`` record."""
        return self.stopped is None and not self.failed and len(self.records) == self.total



def run(p: Plan, sweep_dir: str | os.PathLike, *, workers: int | None = None, ray: str | bool | None = None,
        progress: bool = True, log: Callable[[str], None] | None = print) -> Outcome:
    """Run the cells of ``p`` that have no ``ok`` record in ``sweep_dir``, writing each record as it finishes.

    ``workers``: a process pool of that size (spawn), or with ``ray`` the local Ray's ``num_cpus``. ``ray``: ``True``
    (or ``"local"``) starts a local Ray (``ray.init()``), a string is a cluster address (``"auto"``, ``"ray://..."``);
    an already initialised Ray is used as it is. Ctrl-C stops the run (finished cells are kept; the
    outcome says ``stopped="interrupted"``); the tables are rebuilt from the records in every case.
    """
    from tqdm.auto import tqdm

    start = time.perf_counter()
    sweep_dir = Path(sweep_dir)
    cells_dir = _prepare(p, sweep_dir)
    found = read_records(sweep_dir, p.keys)
    records = {k: r for k, r in found.valid.items() if r["status"] == "ok"}
    outcome = Outcome(total=len(p.cells), skipped=len(records), invalid=found.invalid)
    tasks = [(k, c) for k, c in zip(p.keys, p.cells) if k not in records]
    where, source = _executor(tasks, workers, ray)
    if log:
        log(f"sweep {p.name}: {len(p.cells)} cells, {len(records)} already done, {len(tasks)} to run"
            f"{' ' + where if where else ''}; records in {cells_dir}")
        for key, why in found.invalid.items():
            log(f"  recomputing cells/{key}.json: {why}")
    from baselines.sweep import SHOW_ROUNDS

    bar = tqdm(total=len(tasks), desc=f"sweep {p.name}", disable=not progress or not tasks, unit="cell")
    shown = SHOW_ROUNDS.set(progress and bool(tasks) and where == "in-process")  # a worker's bar would garble ours
    try:
        _store(source, cells_dir, outcome, records, bar)
    finally:
        SHOW_ROUNDS.reset(shown)
        bar.close()
    outcome.records = records
    _rebuild_tables(p, sweep_dir, outcome)
    outcome.wall_s = time.perf_counter() - start
    return outcome


def _prepare(p: Plan, sweep_dir: Path) -> Path:
    """Make the sweep's ``cells/`` folder (returned), clear what killed runs left mid-write and write ``sweep.json``."""
    cells_dir = sweep_dir / "cells"
    cells_dir.mkdir(parents=True, exist_ok=True)
    for folder in (sweep_dir, cells_dir):  # every folder this run writes into: what killed runs left mid-write
        remove_stale_temporaries(folder)
    write_json(sweep_dir / "sweep.json", {"name": p.name, "config": p.config, "version": __version__,
                                          "cells": len(p.cells), "keys": list(p.keys), "written": utc_now()})
    return cells_dir


def _executor(tasks: list[tuple[str, dict[str, Any]]], workers: int | None,
              ray: str | bool | None) -> tuple[str, Iterable[dict[str, Any]]]:
    """Where ``tasks`` ((key, cell) pairs) run, in words for the log, and the records they yield there, in batches
    (:func:`~otagym.cli.sweep.cells.batches`) small enough to keep every worker busy."""
    parallel = 2 * (workers or 1) if (ray or (workers and workers > 1)) else 1  # enough batches to keep them busy
    work = batches(tasks, max(1, min(BATCH_CELLS, -(-len(tasks) // parallel))))
    if not tasks:
        return "", iter(())
    if ray:
        where = "on Ray" + ("" if ray in (True, "local") else f" at {ray}")
        return where, ray_tasks(work, None if ray in (True, "local") else str(ray), workers)
    if workers and workers > 1:
        return f"on {workers} worker processes", process_pool(work, workers)
    return "in-process", in_process(work)


def _store(source: Iterable[dict[str, Any]], cells_dir: Path, outcome: Outcome, records: dict[str, dict[str, Any]],
           bar: Any) -> None:
    """Write each record ``source`` yields to ``cells_dir`` with its checksum, counting it in ``outcome`` (an ``ok``
    one also into ``records``) and on the progress ``bar``. Ctrl-C, a failed write (a full disk, a read-only or
    vanished folder) and a dead pool worker stop the run, said in ``outcome.stopped``; every record written is kept."""
    try:
        with contextlib.closing(source) if hasattr(source, "close") else contextlib.nullcontext():
            for record in source:
                write_json(cells_dir / f"{record['key']}.json", {**record, "checksum": record_checksum(record)})
                outcome.computed += 1
                if record["status"] == "ok":
                    records[record["key"]] = record
                else:
                    outcome.failed.append(record["key"])
                bar.update(1)
                if outcome.failed:
                    bar.set_postfix(failed=len(outcome.failed))
    except KeyboardInterrupt:
        outcome.stopped = "interrupted"
    except OSError as err:  # a full disk, a read-only or vanished folder: stop, keeping every record written
        if err.filename is None:
            raise
        outcome.stopped = f"cannot write {err.filename}: {err.strerror}"
    except Exception as err:  # BrokenProcessPool: a worker process died; its cell and the queued ones have no record
        from concurrent.futures.process import BrokenProcessPool

        if not isinstance(err, BrokenProcessPool):
            raise
        outcome.stopped = f"a worker process died ({err})"


def _rebuild_tables(p: Plan, sweep_dir: Path, outcome: Outcome) -> None:
    """Rebuild the tables from every valid record on disk and the run's ``ok`` ones into ``outcome.tables``; a
    failed write is said in ``outcome.stopped`` unless the run had stopped already."""
    try:
        outcome.tables = write_tables(p, sweep_dir, {**read_records(sweep_dir, p.keys).valid, **outcome.records})
    except OSError as err:
        if err.filename is None:
            raise
        outcome.stopped = outcome.stopped or f"cannot write {err.filename}: {err.strerror}"


def report(outcome: Outcome, sweep_dir: Path) -> str:
    """What a person reads after a run: counts, failures with their first line, and what to do next."""
    lines = [f"{outcome.computed} cells computed, {outcome.skipped} reused, {len(outcome.failed)} failed, "
             f"{outcome.total - len(outcome.records) - len(outcome.failed)} not run, in {outcome.wall_s:.1f} s"]
    for key in outcome.failed[:10]:
        rec = json.loads((Path(sweep_dir) / "cells" / f"{key}.json").read_text())
        c, e = rec["cell"], rec["error"]
        nu = f" nu={c['nu']:g}" if "nu" in c else ""
        lines.append(f"  failed: {c['policy']['name']}{nu} seed={c['seed']} ({c['scenario']}): "
                     f"{e['type']}: {e['message'].splitlines()[0] if e['message'] else ''} "
                     f"[traceback in cells/{key}.json]")
    if len(outcome.failed) > 10:
        lines.append(f"  ... and {len(outcome.failed) - 10} more (status=error in cells.csv)")
    others = sorted({r.get("version") for r in outcome.records.values()} - {__version__}, key=str)
    if others:
        lines.append(f"note: some records were computed by otagym {', '.join(map(str, others))} (this is "
                     f"{__version__}); delete them from cells/ to recompute them")
    if outcome.stopped:
        lines.append(f"stopped: {outcome.stopped}; finished cells are stored, rerun the same command to resume")
    elif outcome.failed:
        lines.append("rerun the same command to retry the failed cells (finished ones are skipped)")
    if outcome.tables:
        lines.append("wrote " + ", ".join(str(t) for t in outcome.tables))
    return "\n".join(lines)


def exit_code(outcome: Outcome) -> int:
    """0: every cell done; 130: interrupted; 1: failed cells or a dead worker."""
    if outcome.stopped == "interrupted":
        return 130
    return 0 if outcome.complete else 1

