"""Arguments checked at the door: one spec per public argument, one error style.

Every field of a scheme's Scenario (:class:`~otagym.receive_scaling.Scenario`, :class:`~otagym.cdpb.CDPBScenario`,
...) declares its spec where it is declared (:func:`arg`), and :func:`check_dataclass` converts them all in
``__post_init__``; the environments' own arguments go through the same specs in their constructors. A value of the
wrong type raises ``TypeError``, a value of the right type outside its range raises ``ValueError``; both read
``"<argument> must be <allowed>; got <value>"``.

Numbers are Python or numpy integers and floats (``np.float32(0.04)`` is a number); ``bool`` is not a number, strings
are never parsed, NaN and infinities are refused. Integers accept integral floats (``1e3``) and refuse the rest
(nothing is truncated). Flags accept only ``True``/``False``.

Physical quantities are bounded to :data:`PHYSICAL_RANGE` in their unit (W, m, model units): inside it every product
the models form stays well inside float64, so observations, rewards and info stay finite (the fuzz suite,
``tests/test_fuzz.py``, checks this); outside it the argument is refused.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["PHYSICAL_RANGE", "POSITIVE", "Spec", "Real", "Integer", "OneOf", "OfType", "Flag", "Text", "Many",
           "NUM_ENVS", "real_array", "action_array", "arg", "check_args", "check_dataclass", "refuse_unknown_fields",
           "from_preset"]

#: The range (closed) of every positive physical quantity of a scenario in its unit.
PHYSICAL_RANGE = (1e-30, 1e30)


class Spec(Protocol):
    def __call__(self, where: str, value: Any) -> Any:
        """The value, converted (floats, ints, tuples); raises TypeError/ValueError naming ``where``."""


def _fail(error: type[Exception], where: str, allowed: str, value: Any) -> None:
    raise error(f"{where} must be {allowed}; got {value!r}")


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _interval(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if high is None:
        return f"{'>' if low_open else '>='} {low:g}"
    if low is None:
        return f"{'<' if high_open else '<='} {high:g}"
    return f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"


@dataclass(frozen=True)
class Real:
    """A finite real number in an interval (``None`` bound: unbounded on that side)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    optional: bool = False

    @property
    def allowed(self) -> str:
        text = "a finite number" + ("" if self.low is None and self.high is None else " " + _interval(
            self.low, self.high, self.low_open, self.high_open))
        return text + (" or None" if self.optional else "")

    def __call__(self, where: str, value: Any) -> float | None:
        if value is None and self.optional:
            return None
        if not _is_number(value):
            _fail(TypeError, where, self.allowed, value)
        v = float(value)
        lo, hi = self.low, self.high
        if not (math.isfinite(v) and (lo is None or (v > lo if self.low_open else v >= lo))
                and (hi is None or (v < hi if self.high_open else v <= hi))):
            _fail(ValueError, where, self.allowed, value)
        return v


@dataclass(frozen=True)
class Integer:
    """An integer in ``[low, high]``."""

    low: int
    high: int | None = None
    optional: bool = False

    @property
    def allowed(self) -> str:
        bounds = f">= {self.low}" if self.high is None else f"in [{self.low}, {self.high}]"
        return f"an integer {bounds}" + (" or None" if self.optional else "")

    def __call__(self, where: str, value: Any) -> int | None:
        if value is None and self.optional:
            return None
        if not _is_number(value):
            _fail(TypeError, where, self.allowed, value)
        if not (math.isfinite(value) and int(value) == value and value >= self.low
                and (self.high is None or value <= self.high)):
            _fail(ValueError, where, self.allowed, value)
        return int(value)


@dataclass(frozen=True)
class OneOf:
    """One of a few strings."""

    choices: tuple[str, ...]
    optional: bool = False

    @property
    def allowed(self) -> str:
        return "one of " + ", ".join(map(repr, self.choices)) + (" or None" if self.optional else "")

    def __call__(self, where: str, value: Any) -> str | None:
        if value is None and self.optional:
            return None
        if not isinstance(value, str):
            _fail(TypeError, where, self.allowed, value)
        if value not in self.choices:
            _fail(ValueError, where, self.allowed, value)
        return str(value)


@dataclass(frozen=True)
class OfType:
    """A value of one of ``types``, described as ``allowed``, stored as ``convert(value)``."""

    types: tuple[type, ...]
    allowed: str
    convert: Any = None

    def __call__(self, where: str, value: Any) -> Any:
        if not isinstance(value, self.types):
            _fail(TypeError, where, self.allowed, value)
        return value if self.convert is None else self.convert(value)


def Flag() -> OfType:  # noqa: N802 (reads as a spec class at the declaration)
    """``True`` or ``False`` (numpy bools too; no truthy strings or integers), stored as ``bool``."""
    return OfType((bool, np.bool_), "True or False", bool)


def Text() -> OfType:  # noqa: N802
    """A string."""
    return OfType((str,), "a string")


@dataclass(frozen=True)
class Many:
    """A sequence of values of one spec (a tuple is stored), with ``length`` entries if given, else at least one.

    ``scalar=True`` also accepts one value of the element spec, stored as is (per-device fields: one value for all).
    """

    element: Real | Integer
    length: int | None = None
    scalar: bool = False
    optional: bool = False

    @property
    def allowed(self) -> str:
        count = f"{self.length}" if self.length is not None else "a non-empty sequence of"
        text = f"{count} values, each {self.element.allowed}"
        if self.scalar:
            text = f"{self.element.allowed}, or {text}"
        return text + (", or None" if self.optional else "")

    def __call__(self, where: str, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if self.scalar and np.ndim(value) == 0 and not isinstance(value, (str, bytes)):
            return self.element(where, value)
        if isinstance(value, (str, bytes, dict)) or np.ndim(value) != 1:
            _fail(TypeError, where, self.allowed, value)
        items = list(value)
        if (self.length is not None and len(items) != self.length) or not items:
            _fail(ValueError, where, self.allowed, value)
        out = []
        for v in items:
            try:
                out.append(self.element(where, v))
            except (TypeError, ValueError) as err:
                raise type(err)(f"{where} must be {self.allowed}; got {value!r}") from None
        return tuple(out)


#: Spec of ``num_envs`` (the vector envs' batch size).
NUM_ENVS = Integer(1, 1_000_000)
#: A positive physical quantity (W, model units, budget): inside ``PHYSICAL_RANGE``, so every result stays finite.
POSITIVE = Real(*PHYSICAL_RANGE)


def real_array(where: str, value: Any, shapes: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """``value`` as a float64 array of one of ``shapes``: integer or float dtype only (no bool, complex, string or
    object arrays, no masked arrays). Ranges are the caller's to check, NaN and infinities included."""
    allowed = "real numbers (an int or float array) of shape " + " or ".join(map(str, shapes))
    if isinstance(value, np.ma.MaskedArray):
        _fail(TypeError, where, allowed + ", not a masked array", value)
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        arr = np.empty(0, dtype=object)
    if arr.dtype.kind not in "iuf":
        _fail(TypeError, where, allowed, value)
    if arr.shape not in shapes:
        raise ValueError(f"{where} must have shape {' or '.join(map(str, shapes))}; got shape {arr.shape}")
    return arr.astype(float)


def action_array(action: ArrayLike, num_envs: int) -> NDArray:
    """The actions of ``num_envs`` envs as a float64 vector: shape (N, 1) or (N,) (or a scalar for one env), real
    (:func:`real_array`); the caller checks the range (NaN and infinities included)."""
    shapes = ((num_envs, 1), (num_envs,)) + (((),) if num_envs == 1 else ())
    return real_array("action", action, shapes).reshape(num_envs)


def check_args(specs: dict[str, Spec], **values: Any) -> dict[str, Any]:
    """Every keyword argument checked and converted by its spec in ``specs`` (named by its keyword)."""
    return {name: specs[name](name, value) for name, value in values.items()}


def arg(default: Any, spec: Spec) -> Any:
    """A dataclass field with ``default`` whose value :func:`check_dataclass` checks and converts with ``spec``."""
    return dataclasses.field(default=default, metadata={"spec": spec})


def check_dataclass(obj: Any) -> None:
    """Check and convert every field of the (frozen) dataclass ``obj`` that declares a spec with :func:`arg`."""
    owner = type(obj).__name__
    for f in dataclasses.fields(obj):
        spec = f.metadata.get("spec")
        if spec is not None:
            object.__setattr__(obj, f.name, spec(f"{owner}.{f.name}", getattr(obj, f.name)))


def refuse_unknown_fields(cls: type, overrides: dict[str, Any]) -> None:
    """Raise ``TypeError`` (Python's error for an unknown keyword argument, which wrappers such as SB3's
    ``make_vec_env`` and TorchRL's ``GymEnv`` catch to retry without it) if ``overrides`` names a non-field of ``cls``."""
    fields = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(overrides) - set(fields))
    if unknown:
        raise TypeError("; ".join(f"got an unexpected keyword argument {k!r}" for k in unknown)
                        + f" (not an env argument nor a {cls.__name__} field; fields: {fields})")


def from_preset(cls: type, presets: dict[str, Any], name: Any, overrides: dict[str, Any]) -> Any:
    """The preset ``name`` of ``presets`` (or ``name`` itself, an instance of ``cls``) with validated overrides."""
    if not isinstance(name, cls):
        allowed = f"one of {sorted(presets)} or a {cls.__name__}"
        if not isinstance(name, str):
            _fail(TypeError, "scenario", allowed, name)
        if name not in presets:
            _fail(ValueError, "scenario", allowed, name)
        name = presets[name]
    refuse_unknown_fields(cls, overrides)
    return dataclasses.replace(name, **overrides) if overrides else name
