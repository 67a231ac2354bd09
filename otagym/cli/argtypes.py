"""argparse helpers shared by the ``otagym`` commands: value types that refuse out-of-range input in argparse style
(one line naming the option, exit code 2), and the help formatter of every help page (defaults and examples).

Every numeric option is typed by a spec of :mod:`otagym.validation` (:func:`from_spec`), and an option that sets a
library argument by that argument's own spec (:func:`field_type`): the command line accepts exactly what the library
accepts, so a value it lets through never fails later with a traceback (``--nu 1e300``: the scenario's range,
[1e-30, 1e30], refused at the door)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import os
import re
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any, Callable

from otagym.channel import FadingFields
from otagym.validation import Integer, Real, Spec

__all__ = ["from_spec", "field_type", "positive_int", "positive_float", "non_negative_int", "correlation",
           "writable_dir", "writable_file", "key_value", "HelpFormatter", "TORCH_THREADS", "add_torch_threads_argument",
           "CALLABLE", "import_callable"]


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


def from_spec(spec: Spec) -> Callable[[str], Any]:
    """An argparse type that accepts what the :mod:`otagym.validation` spec ``spec`` (an :class:`Integer` or a
    :class:`Real`) accepts: the text read as an int (an :class:`Integer`: ``1e3`` and ``2.0`` are refused) or a float,
    checked by ``spec``, and refused with "must be <spec's range>; got '<text>'" otherwise (NaN, infinities and
    numbers beyond float64 included). The spec is kept as the type's ``spec``."""
    parse = int if isinstance(spec, Integer) else float

    def convert(text: str) -> Any:
        try:
            return spec("", parse(text))
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"must be {spec.allowed}; got {text!r}") from None

    convert.spec = spec  # type: ignore[attr-defined]
    return convert


def field_type(cls: type, name: str) -> Callable[[str], Any]:
    """The argparse type of an option that sets the field ``name`` of the dataclass ``cls`` (declared with
    :func:`otagym.validation.arg`): that field's own spec (:func:`from_spec`)."""
    spec = next(f for f in dataclasses.fields(cls) if f.name == name).metadata["spec"]
    return from_spec(spec)


#: An integer >= 1 (and <= 2**63 - 1, numpy's int64).
positive_int = from_spec(Integer(1))
#: An integer >= 0 (seeds: numpy and Gymnasium refuse negative ones; <= 2**63 - 1).
non_negative_int = from_spec(Integer(0))
#: A finite number > 0.
positive_float = from_spec(Real(0.0, low_open=True))
#: The Gauss-Markov coefficient, in [0, 1): the scenario field's spec.
correlation = field_type(FadingFields, "correlation")


#: ``--torch-threads``: torch takes a C int; more threads than cores only slow the small MLP policies.
TORCH_THREADS = Integer(0, 1024)


def add_torch_threads_argument(parser: argparse.ArgumentParser, verb: str) -> None:
    """``--torch-threads N`` (:data:`TORCH_THREADS`; default 1) on a command that runs torch models."""
    parser.add_argument("--torch-threads", type=from_spec(TORCH_THREADS), default=1, metavar="N",
                        help=f"torch's thread count (default: 1, the small MLP policies usually {verb} fastest on one; "
                        "0 leaves torch's default)")


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


#: ``module:function``: a policy given as a Python callable (the module importable, from the current folder too).
CALLABLE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def import_callable(text: str) -> tuple[str, Callable[..., Any]]:
    """The name (``module.function``) and the callable of a ``module:function`` policy, its module imported as
    ``python -m`` would find it (the current folder first, as uvicorn and gunicorn do for ``module:app``);
    ``ValueError`` in one line when the import fails or the attribute is not callable."""
    module, _, name = text.partition(":")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        function = getattr(importlib.import_module(module), name)
    except Exception as err:  # noqa: BLE001 - importing the user's module runs its code: any error, in one line
        raise ValueError(f"policy {text!r}: cannot import {name} from {module} ({type(err).__name__}: {err})") from None
    if not callable(function):
        raise ValueError(f"policy {text!r}: {module}.{name} is not callable")
    return f"{module}.{name}", function
