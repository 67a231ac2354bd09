"""A sweep's record store: ``<sweep>/cells/<key>.json``, one record per cell, written atomically by the driver with a
checksum of its content (:func:`record_checksum`) and read back checked (:func:`read_records`,
:func:`record_problem`): a record that cannot be trusted is recomputed like a missing one.

A record holds the cell (its config and seed), the package version, the resolved scenario, the result or the error
with its traceback, the host and the wall time; nothing in it names a module, so records outlive code moves.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from otagym.cli.sweep.cells import cell_key, content_sha256

__all__ = ["TEXT_RESULTS", "NON_NEGATIVE", "record_checksum", "record_problem", "Records", "read_records"]

#: Result fields that hold text (the name of a policy's calibrated parameter); all others hold numbers.
TEXT_RESULTS = ("param",)
#: Result fields that are non-negative wherever a record has them (privacy loss, cost, leakage).
NON_NEGATIVE = ("rdp", "epsilon", "epsilon_pld", "cost_mean", "cost", "leakage", "equal_alloc_leakage",
                "optimal_leakage")


def record_checksum(record: Mapping[str, Any]) -> str:
    """SHA-256 of a record's content (all but its ``checksum``), as canonical JSON: what the driver stores in the
    record and what a reader recomputes, so that a record edited or mixed up after it was written is not trusted."""
    return content_sha256({k: v for k, v in record.items() if k != "checksum"})


def record_problem(record: Any, key: str) -> str | None:
    """Why ``record`` cannot be trusted as the record of cell ``key``, or None: not an object, a missing field, a
    status other than ok/error, a cell whose content hash is not ``key`` (another cell's record), an ``ok`` result that
    is not an object of finite numbers (privacy loss, cost and leakage >= 0), or a checksum that does not match."""
    if not isinstance(record, dict):
        return f"not a record (a JSON {type(record).__name__})"
    missing = [k for k in ("key", "cell", "status", "result", "error", "checksum") if k not in record]
    if missing:
        return f"no {', '.join(missing)}"
    if record["status"] not in ("ok", "error"):
        return f"status {record['status']!r} is neither 'ok' nor 'error'"
    try:
        own = cell_key(record["cell"])
    except Exception as err:  # noqa: BLE001 - any malformed cell is a bad record
        return f"its cell is malformed ({type(err).__name__}: {err})"
    if record["key"] != key or own != key:
        return f"it is the record of another cell ({own})"
    if record["status"] == "ok":
        result = record["result"]
        if not isinstance(result, dict):
            return "an ok record without a result object"
        for name, value in result.items():
            bad = None if name in TEXT_RESULTS and isinstance(value, str) else _bad_number(value)
            if bad:
                return f"result {name} {bad}"
            if name in NON_NEGATIVE and value is not None and not isinstance(value, bool) and value < 0:
                return f"result {name} = {value} < 0"
    if record["checksum"] != record_checksum(record):
        return "its checksum does not match its content (edited after it was written)"
    return None


def _bad_number(value: Any) -> str | None:
    """What is wrong with a result value (None, a bool, a finite number, or a list/object of them), or None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return None if math.isfinite(value) else f"= {value} is not finite"
    if isinstance(value, list):
        return next((bad for bad in map(_bad_number, value) if bad), None)
    if isinstance(value, dict):
        return next((bad for bad in map(_bad_number, value.values()) if bad), None)
    return f"= {value!r} is not a number"


@dataclass
class Records:
    """The records of a sweep's cells found on disk: ``valid`` ones by key, and for each record that exists but cannot
    be trusted, why (``invalid``: key -> reason); both are recomputed by a run like a missing one."""

    valid: dict[str, dict[str, Any]] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)


def read_records(sweep_dir: Path, keys: Iterable[str]) -> Records:
    """The records of ``keys`` in ``sweep_dir/cells``, each checked by :func:`record_problem` (a missing one is left
    out; an unreadable or untrustworthy one is listed with its reason)."""
    out = Records()
    for key in keys:
        path = Path(sweep_dir) / "cells" / f"{key}.json"
        try:
            record = json.loads(path.read_text())
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as err:
            out.invalid[key] = f"unreadable ({type(err).__name__}: {err})"
            continue
        problem = record_problem(record, key)
        if problem:
            out.invalid[key] = problem
        else:
            out.valid[key] = record
    return out

