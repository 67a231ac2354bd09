"""Atomic file writes: the one helper every result, record and figure of the project is written with.

A file is written to a temporary file in its own folder, flushed to disk, then renamed over the target
(:func:`os.replace`, atomic on POSIX and Windows): a reader, or a run killed mid-write, sees the old file or the new
one, never half of one. The file gets the permissions of a file made by ``open`` (0666 less the umask), not the
0600 of a temporary file. Temporary files are named ``.<name>.<host>-<pid>.<random>.tmp``: hidden from readers
globbing for ``*.json`` or ``*.csv``, and owned by one writer process. A killed writer may leave one behind;
:func:`remove_stale_temporaries` removes only those whose writer provably is gone (a process of this host that no
longer exists), so two runs sharing a folder never delete each other's files in flight.

It sits in ``otagym`` (the bottom of the dependency graph) so that ``baselines``, ``agents``, ``experiments``, the
examples and the benchmarks all use this one copy.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import socket
import tempfile
import time
from pathlib import Path
from typing import IO, Any, Iterator

__all__ = ["atomic_write", "write_json", "write_text", "file_sha256", "copy_file", "save_figure",
           "remove_stale_temporaries"]


#: The process's umask, read once (reading it means setting it).
_UMASK = os.umask(0)
os.umask(_UMASK)
#: ``.<name>.<host>-<pid>.<random>.tmp``, as :func:`atomic_write` names its temporary files.
_TEMPORARY = re.compile(r"\.(?P<name>.+)\.(?P<host>[^.]*)-(?P<pid>\d+)\.[^.]+\.tmp")
#: Temporary files of the format before the writer was named in them count as stale after this many seconds.
UNNAMED_STALE_S = 86_400.0


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", **open_kwargs: Any) -> Iterator[IO]:
    """Open a temporary file beside ``path`` for writing (``mode`` ``"w"`` or ``"wb"``); on a clean exit it replaces
    ``path``, on an exception it is removed and ``path`` is left as it was. The folder is created if needed. An
    ``OSError`` of the file system (a full disk, a read-only folder) names ``path`` as its ``filename``."""
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb'; got {mode!r}")
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{_host()}-{os.getpid()}.", suffix=".tmp")
    except OSError as err:
        raise _naming(err, path) from err
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, mode, **open_kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        if isinstance(err, OSError) and err.errno is not None and err.filename is None:
            raise _naming(err, path) from err
        raise


def _naming(err: OSError, path: Path) -> OSError:
    """``err`` as the same kind of ``OSError`` with ``path`` as its filename (for one-line messages)."""
    return OSError(err.errno, err.strerror or str(err), str(path))


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    with atomic_write(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return Path(path)


def write_json(path: str | os.PathLike, data: Any, *, indent: int | None = 1) -> Path:
    """Write ``data`` as JSON atomically (values JSON cannot hold are written with ``str``)."""
    return write_text(path, json.dumps(data, indent=indent, default=str))


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes, hex (what records and manifests name files by)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def copy_file(source: str | os.PathLike, path: str | os.PathLike) -> Path:
    """Copy the bytes of ``source`` to ``path`` atomically."""
    with atomic_write(path, "wb") as fh:
        fh.write(Path(source).read_bytes())
    return Path(path)


def save_figure(fig: Any, path: str | os.PathLike, **savefig_kwargs: Any) -> Path:
    """``fig.savefig`` to ``path`` atomically (the format from the suffix, as matplotlib reads it)."""
    path = Path(path)
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format=path.suffix.lstrip(".") or None, **savefig_kwargs)
    return path


def remove_stale_temporaries(folder: str | os.PathLike) -> int:
    """Remove the temporary files (``.*.tmp``) in ``folder`` that writers killed mid-write left behind: those whose
    writer was a process of this host that no longer exists, and those without a writer in their name (an older
    format) untouched for :data:`UNNAMED_STALE_S`. Files of live writers, or of other hosts, stay. Their count."""
    count = 0
    for tmp in Path(folder).glob(".*.tmp"):
        if _is_stale(tmp):
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
                count += 1
    return count


def _is_stale(tmp: Path) -> bool:
    match = _TEMPORARY.fullmatch(tmp.name)
    if match is None:
        with contextlib.suppress(FileNotFoundError):
            return time.time() - tmp.stat().st_mtime > UNNAMED_STALE_S
        return False
    if match["host"] != _host():
        return False
    return not _process_exists(int(match["pid"]))


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True
