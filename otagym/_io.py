"""Atomic file writes: the one helper every result, record and figure of the project is written with.

A file is written to a temporary file in its own folder, flushed to disk, then renamed over the target
(:func:`os.replace`, atomic on POSIX and Windows): a reader, or a run killed mid-write, sees the old file or the new
one, never half of one. Temporary files are named ``.<name>.<random>.tmp`` so that readers globbing for ``*.json`` or
``*.csv`` never see them; a killed writer may leave one behind (:func:`remove_stale_temporaries` clears them).

It sits in ``otagym`` (the bottom of the dependency graph) so that ``baselines``, ``agents``, ``experiments``, the
examples and the benchmarks all use this one copy.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import IO, Any, Iterator

__all__ = ["atomic_write", "write_json", "write_text", "save_figure", "remove_stale_temporaries"]


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", **open_kwargs: Any) -> Iterator[IO]:
    """Open a temporary file beside ``path`` for writing (``mode`` ``"w"`` or ``"wb"``); on a clean exit it replaces
    ``path``, on an exception it is removed and ``path`` is left as it was. The folder is created if needed."""
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb'; got {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, **open_kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    with atomic_write(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return Path(path)


def write_json(path: str | os.PathLike, data: Any, *, indent: int | None = 1) -> Path:
    """Write ``data`` as JSON atomically (values JSON cannot hold are written with ``str``)."""
    return write_text(path, json.dumps(data, indent=indent, default=str))


def save_figure(fig: Any, path: str | os.PathLike, **savefig_kwargs: Any) -> Path:
    """``fig.savefig`` to ``path`` atomically (the format from the suffix, as matplotlib reads it)."""
    path = Path(path)
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format=path.suffix.lstrip(".") or None, **savefig_kwargs)
    return path


def remove_stale_temporaries(folder: str | os.PathLike) -> int:
    """Remove the temporary files (``.*.tmp``) that writers killed mid-write left in ``folder``; their count."""
    count = 0
    for tmp in Path(folder).glob(".*.tmp"):
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            count += 1
    return count
