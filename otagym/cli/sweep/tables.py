"""A sweep's tables, rebuilt from its records after every run (interrupted ones included), each written atomically:
``cells.csv`` (one row per cell; ``cells.parquet`` too when pyarrow is installed) and ``summary.csv`` (mean and 95%
CI over seeds, each scheme's :meth:`baselines.sweep.SchemeSweep.summarize`). A sweep of several schemes has the union
of their columns, each in the order of the first scheme that has it; a row leaves the others' empty."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from otagym._io import atomic_write
from otagym.cli.sweep.config import Plan
from otagym.cli.sweep.records import read_records

__all__ = ["write_tables"]


def _flat(record: Mapping[str, Any], columns: tuple[str, ...]) -> dict[str, Any]:
    """One row of ``cells.csv``: the cell's axes, its status and its scalar results ``columns``."""
    cell, result = record["cell"], record.get("result") or {}
    policy = cell["policy"]
    row = {"key": record["key"], "status": record["status"], "scheme": cell["scheme"], "scenario": cell["scenario"],
           "rounds": cell["rounds"], "fidelity": cell["fidelity"], "policy": policy["name"],
           "policy_class": policy.get("policy", "model"),
           "params": json.dumps(policy.get("params", {}), sort_keys=True), "model": policy.get("model"),
           "nu": cell.get("nu"), "seed": cell["seed"]}
    for k in columns:
        row[k] = result.get(k)
    error = record.get("error") or {}
    row.update(wall_s=record.get("wall_s"), version=record.get("version"), host=record.get("host"),
               error=(f"{error['type']}: {error['message']}".splitlines()[0] if error else None))
    return row


def _union(keys: Iterable[Iterable[str]]) -> tuple[str, ...]:
    """Every key of ``keys``, once, in order of first appearance."""
    return tuple(dict.fromkeys(k for group in keys for k in group))


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    """``rows`` as CSV, the columns the union of their keys (a row's missing ones empty)."""
    import csv

    with atomic_write(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(_union(rows)), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_tables(p: Plan, sweep_dir: Path, records: Mapping[str, dict[str, Any]] | None = None) -> list[Path]:
    """Rebuild ``cells.csv`` (+ ``cells.parquet`` with pyarrow) and ``summary.csv`` from the records of ``p``'s cells,
    in grid order, each written atomically. Cells without a record are left out."""
    from baselines.sweep import scheme_sweep

    sweep_dir = Path(sweep_dir)
    records = read_records(sweep_dir, p.keys).valid if records is None else records
    present = [records[k] for k in p.keys if k in records]
    if not present:
        return []
    schemes = list(dict.fromkeys(r["cell"]["scheme"] for r in present))
    results = {s: [r.get("result") or {} for r in present if r["cell"]["scheme"] == s] for s in schemes}
    columns = _union(scheme_sweep(s).table_columns(results[s]) for s in schemes)
    rows = [_flat(r, columns) for r in present]
    paths = [_write_csv(sweep_dir / "cells.csv", rows)]
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        pass
    else:
        with atomic_write(sweep_dir / "cells.parquet", "wb") as fh:
            pq.write_table(pa.Table.from_pylist(rows), fh)
        paths.append(sweep_dir / "cells.parquet")
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in present:
        if r["status"] == "ok":
            c = r["cell"]
            groups.setdefault((c["scheme"], c["scenario"], c["rounds"], c["fidelity"]), []).append(
                {"policy": c["policy"]["name"], **({"nu": c["nu"]} if "nu" in c else {}), "seed": c["seed"],
                 **r["result"]})
    summary = [{"scheme": g[0], "scenario": g[1], "rounds": g[2], "fidelity": g[3], **row}
               for g, cells in groups.items() for row in scheme_sweep(g[0]).summarize(cells)]
    if summary:
        scalar = [{k: v for k, v in row.items() if not isinstance(v, list)} for row in summary]
        paths.append(_write_csv(sweep_dir / "summary.csv", scalar))
    return paths

