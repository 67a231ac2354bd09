"""argparse helpers shared by the ``otagym`` commands: value types that refuse out-of-range input in argparse style
(one line naming the option, exit code 2), and the help formatter of every help page (defaults and examples)."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import tempfile
import textwrap
from pathlib import Path

__all__ = ["positive_int", "positive_float", "non_negative_int", "correlation", "writable_dir", "writable_file",
           "key_value", "HelpFormatter"]


def _ranged(parse, accept, allowed: str):
    """An argparse type: ``parse(text)``, refused unless ``accept(value)``, with "must be <allowed>" as the error."""
    def convert(text: str):
        try:
            value = parse(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {text!r}")
        return value
    return convert


#: An integer >= 1.
positive_int = _ranged(int, lambda v: v >= 1, "an integer >= 1")
#: An integer >= 0 (seeds: numpy and Gymnasium refuse negative ones).
non_negative_int = _ranged(int, lambda v: v >= 0, "an integer >= 0")
#: A finite number > 0.
positive_float = _ranged(float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0")
#: A number in [0, 1) (the Gauss-Markov coefficient).
correlation = _ranged(float, lambda v: 0.0 <= v < 1.0, "a number in [0, 1)")


def _folder_problem(path: Path) -> str | None:
    """Why a file cannot be written into the folder ``path``, or None: it is a file, or it cannot be made or written
    into (the system's reason). Folders made for the check are removed again (deepest first), so a command that
    fails later leaves no empty folder behind; the command's writers make them when they write
    (:func:`otagym._io.atomic_write`)."""
    if path.exists() and not path.is_dir():
        return f"{os.fspath(path)!r} is a file, not a folder"
    made = [p for p in (path, *path.parents) if not p.exists()]  # deepest first
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as err:
        return str(err.strerror or err)
    finally:
        for folder in made:
            with contextlib.suppress(OSError):  # not made after all, or filled meanwhile by another process
                folder.rmdir()
    return None


def writable_dir(text: str) -> str:
    """A folder that exists or can be made, and that a file can be written into, checked now, before any work
    (:func:`_folder_problem`)."""
    problem = _folder_problem(Path(text))
    if problem is not None:
        raise argparse.ArgumentTypeError(f"cannot write into {text!r}: {problem}")
    return os.fspath(Path(text))


def writable_file(text: str) -> str:
    """The path of a file to write: not an existing folder, in a folder that exists or can be made and that a file
    can be written into, checked now, before any work (:func:`_folder_problem`). Errors name ``text``."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; give the path of the file to write")
    problem = _folder_problem(path.parent)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: {problem}")
    return os.fspath(path)


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` as ``(KEY, VALUE)``: KEY a Python identifier, VALUE the unparsed text after the first ``=``."""
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"must be KEY=VALUE (a YAML value), e.g. fading=gauss_markov; got {text!r}")
    return key, value


class HelpFormatter(argparse.HelpFormatter):
    """Every help page's formatter: an option's help ends with its default (``(default: X)``) unless it states one
    already or has none worth printing (None, False, an empty list); in the description and the epilog, lines that
    start with two spaces (the examples) are kept as they are and the others are wrapped."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "(default" in text or not action.option_strings:
            return text
        if action.default is None or action.default is False or action.default == [] \
                or action.default is argparse.SUPPRESS:
            return text
        return f"{text} (default: %(default)s)"

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(indent + line if line.startswith("  ") else
                         textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent)
                         for line in text.splitlines())
