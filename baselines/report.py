"""What every comparison reports and writes: mean and 95% confidence interval over seeds, numbers a person can read,
one colour per policy name, and the rows as CSV/JSON.

Shared by :mod:`baselines.receive_scaling.compare` (model A) and :mod:`baselines.cdpb.compare` (model B), which import
it and not each other.
"""

from __future__ import annotations

import csv
import json
import math
import zlib
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from numpy.typing import NDArray

from otagym._io import atomic_write, file_sha256, write_json

__all__ = ["ci95", "readable", "POLICY_COLOURS", "policy_colour", "write_rows", "mismatched_outputs"]

#: The colour of every built-in policy and reference, in every plot and every run (matplotlib's tab10/tab20 colours;
#: OfflineOptimal, the reference of the paired comparison, in black).
POLICY_COLOURS: dict[str, str] = {
    "OfflineOptimal": "#000000", "AdaScale": "#1f77b4", "EstimFuture": "#ff7f0e", "EqualAlloc": "#2ca02c",
    "LiuSimeone": "#d62728", "LyapunovDPBudget": "#9467bd", "LyapunovDPP": "#8c564b", "FullPower": "#e377c2",
    "OnlineOptimal": "#7f7f7f", "BestConstant": "#bcbd22", "AdaScaleTrained": "#17becf",
    # CDPB's comparison
    "CDPB-n": "#1f77b4", "CDPB-i": "#aec7e8", "CDPB-mixed": "#ff7f0e", "gamma-based": "#2ca02c",
    "hmin-based": "#d62728", "IS-based": "#9467bd", "noise-free": "#000000",
}
#: Colours of other names (trained agents, callables), chosen by a hash of the name: the same name, the same colour.
_OTHER_COLOURS = ("#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#008080", "#9a6324", "#800000",
                  "#808000", "#000075")


def ci95(values: NDArray) -> tuple[float, float]:
    """Mean and half-width of the 95% Student-t confidence interval (0 for one value)."""
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return float(v.mean()), 0.0
    from scipy import stats  # here: the command line's parsers read this module, and scipy.stats takes 0.5 s

    return float(v.mean()), float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))


def readable(value: float, decimals: int = 1, limit: float = 1e5) -> str:
    """``value`` with ``decimals`` decimals, or in scientific notation (3 significant digits) at or beyond ``limit`` in
    magnitude, so that no number is wider than a column: ``-5076888.9`` -> ``"-5.08e+06"``."""
    if not math.isfinite(value):
        return str(value)
    return f"{value:.2e}" if abs(value) >= limit else f"{value:.{decimals}f}"


def policy_colour(name: str) -> str:
    """The colour of policy ``name`` in every plot: :data:`POLICY_COLOURS`, else one of a fixed list chosen by the
    CRC-32 of the name (stable across runs and processes, unlike ``hash``)."""
    return POLICY_COLOURS.get(name) or _OTHER_COLOURS[zlib.crc32(name.encode()) % len(_OTHER_COLOURS)]


def write_rows(rows: list[dict[str, Any]], extra: dict[str, Any], out_dir: Path, stem: str,
               figures: Sequence[Path] = ()) -> list[Path]:
    """``<stem>.csv`` (scalar columns of ``rows``) and ``<stem>.json`` (``extra`` plus all rows) in ``out_dir``, each
    written atomically, the JSON last: its ``outputs`` holds the SHA-256 of the CSV and of ``figures`` (written
    before), so the outputs of one run are one generation, checkable with :func:`mismatched_outputs` (a run killed
    between two files leaves an earlier JSON whose hashes do not match). Returns [csv, json]."""
    csv_path, json_path = out_dir / f"{stem}.csv", out_dir / f"{stem}.json"
    keys = [k for k in rows[0] if not isinstance(rows[0][k], list) and k != "param_values"]
    with atomic_write(csv_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    outputs = {p.name: file_sha256(p) for p in (csv_path, *figures)}
    write_json(json_path, {**extra, "outputs": outputs, "rows": rows})
    return [csv_path, json_path]


def mismatched_outputs(json_path: Path) -> list[str]:
    """The files named in a comparison JSON's ``outputs`` that are missing or differ from what that run wrote (empty:
    the folder holds one run's outputs)."""
    json_path = Path(json_path)
    outputs = json.loads(json_path.read_text()).get("outputs") or {}
    return [name for name, digest in outputs.items()
            if not (json_path.parent / name).is_file() or file_sha256(json_path.parent / name) != digest]
