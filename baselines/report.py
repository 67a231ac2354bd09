"""What every comparison reports and writes: mean and 95% confidence interval over seeds, and the rows as CSV/JSON.

Shared by :mod:`baselines.compare` (model A) and :mod:`baselines.cdpb_compare` (model B), which import it and not
each other.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from otagym._io import atomic_write, write_json

__all__ = ["ci95", "write_rows"]


def ci95(values: NDArray) -> tuple[float, float]:
    """Mean and half-width of the 95% Student-t confidence interval (0 for one value)."""
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return float(v.mean()), 0.0
    return float(v.mean()), float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))


def write_rows(rows: list[dict[str, Any]], extra: dict[str, Any], out_dir: Path, stem: str) -> list[Path]:
    """``<stem>.csv`` (scalar columns of ``rows``) and ``<stem>.json`` (``extra`` plus all rows) in ``out_dir``, each
    written atomically."""
    csv_path, json_path = out_dir / f"{stem}.csv", out_dir / f"{stem}.json"
    keys = [k for k in rows[0] if not isinstance(rows[0][k], list) and k != "param_values"]
    with atomic_write(csv_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    write_json(json_path, {**extra, "rows": rows})
    return [csv_path, json_path]
