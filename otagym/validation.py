"""Arguments checked at the door: one spec per public argument, one error style.

Every field of a scheme's Scenario (:class:`~otagym.schemes.receive_scaling.scenario.Scenario`,
:class:`~otagym.schemes.cdpb.scenario.CDPBScenario`, ...) declares its spec where it is declared (:func:`arg`), and
:func:`check_dataclass` converts them all in ``__post_init__``; the environments' own arguments go through the same
specs in their constructors. A value of the wrong type raises ``TypeError``, a value of the right type outside its range
raises ``ValueError``; both read ``"<argument> must be <allowed>; got <value>"``.

Numbers are Python or numpy integers and floats (``np.float32(0.04)`` is a number); ``bool`` is not a number, strings
are never parsed, NaN and infinities are refused, and so are Python ints beyond float64 (``10**400``) or, for integers,
beyond int64: all with the same ``ValueError`` naming the range. Integers accept integral floats (``1e3``) and refuse
the rest (nothing is truncated). Flags accept only ``True``/``False``. Messages quote numbers in full (the shortest
repr that reads back the same float: a bound and a value just past it never print alike), huge ints abbreviated.

A setting that has an effect only under another setting's value (``correlation`` only with
``fading="gauss_markov"``, the training options only with ``fidelity="train"``, ...) declares it
(:class:`AppliesWith`); set to anything but its default elsewhere, it is refused (:func:`refuse_without_effect`)
rather than silently ignored.

Physical quantities are bounded to :data:`PHYSICAL_RANGE` in their unit (W, m, model units): inside it every product
the models form stays well inside float64, so observations, rewards and info stay finite (the fuzz suite,
``tests/otagym/test_fuzz.py``, checks this); outside it the argument is refused.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["PHYSICAL_RANGE", "POSITIVE", "INT64_MAX", "Spec", "Real", "Integer", "OneOf", "OfType", "Flag", "Text",
           "Many", "NUM_ENVS", "shown", "bound", "refuse_entries", "real_array", "action_array", "AppliesWith", "arg",
           "check_args", "check_dataclass", "refuse_without_effect", "refuse_unknown_fields", "from_preset",
           "field_specs", "field_defaults", "field_conditions", "options_of"]

#: The range (closed) of every positive physical quantity of a scenario in its unit.
PHYSICAL_RANGE = (1e-30, 1e30)
#: The largest integer any integer argument may take (numpy's int64), whatever its spec says.
INT64_MAX = 2**63 - 1
#: Python ints beyond this do not fit float64 (``float(value)`` raises ``OverflowError``).
_FLOAT_MAX = float(np.finfo(np.float64).max)


class Spec(Protocol):
    def __call__(self, where: str, value: Any) -> Any:
        """The value, converted (floats, ints, tuples); raises TypeError/ValueError naming ``where``."""


def _is_huge_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)) and abs(value) > _FLOAT_MAX


def shown(value: Any) -> str:
    """``value`` as an error message quotes it: ``repr``, with floats (numpy's too, and float arrays entry by entry) in
    full precision, so that a value just past a bound does not print as the bound, and Python ints beyond float64
    abbreviated (``~1e400``) rather than printed in hundreds of digits."""
    if _is_huge_int(value):
        return _huge(value) + " (an int beyond float64)"
    if isinstance(value, np.floating):
        return repr(float(value))
    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf" and value.ndim <= 1:
        return "[" + ", ".join(map(repr, value.tolist())) + "]"
    if isinstance(value, (list, tuple)) and any(map(_is_huge_int, value)):
        inner = ", ".join(_huge(v) if _is_huge_int(v) else repr(v) for v in value)
        return f"({inner}{',' if len(value) == 1 else ''})" if isinstance(value, tuple) else f"[{inner}]"
    return repr(value)


def _huge(value: int) -> str:
    return f"{'-' if value < 0 else ''}~1e{int(math.log10(abs(value)))}"


def bound(x: float) -> str:
    """A bound for a message: ``:g`` where that is exact (``1e-30``, ``1``), else in full (``518967.72916133993``)."""
    text = f"{x:g}"
    return text if float(text) == x else repr(float(x))


def _fail(error: type[Exception], where: str, allowed: str, value: Any) -> None:
    raise error(f"{where} must be {allowed}; got {shown(value)}")


def refuse_entries(where: str, allowed: str, values: NDArray, bad: NDArray) -> None:
    """Raise ``ValueError`` ``"<where> must <allowed>; got <the first bad entries, in full>"`` if any of ``bad``
    (a mask over ``values``, e.g. a batch of actions) is True. ``allowed`` reads after "must" ("lie in [0, 1]")."""
    if np.any(bad):
        raise ValueError(f"{where} must {allowed}; got {shown(np.asarray(values)[bad].ravel()[:3])}")


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _interval(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if high is None:
        return f"{'>' if low_open else '>='} {bound(low)}"
    if low is None:
        return f"{'<' if high_open else '<='} {bound(high)}"
    return f"in {'(' if low_open else '['}{bound(low)}, {bound(high)}{')' if high_open else ']'}"


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
        try:
            v = float(value)
        except OverflowError:  # a Python int (or Fraction) beyond float64
            _fail(ValueError, where, self.allowed, value)
        lo, hi = self.low, self.high
        if not (math.isfinite(v) and (lo is None or (v > lo if self.low_open else v >= lo))
                and (hi is None or (v < hi if self.high_open else v <= hi))):
            _fail(ValueError, where, self.allowed, value)
        return v


def _is_integral(value: Any) -> bool:
    """Whether a number is a whole number (an int of any size, or an integral float; NaN, inf: no)."""
    if isinstance(value, numbers.Integral):
        return True
    try:
        return math.isfinite(value) and int(value) == value
    except OverflowError:  # a Fraction beyond float64
        return False


@dataclass(frozen=True)
class Integer:
    """An integer in ``[low, high]`` (``high=None``: up to :data:`INT64_MAX`, so that it fits numpy's int64)."""

    low: int
    high: int | None = None
    optional: bool = False

    @property
    def allowed(self) -> str:
        bounds = f">= {self.low} (and <= 2**63 - 1)" if self.high is None else f"in [{self.low}, {self.high}]"
        return f"an integer {bounds}" + (" or None" if self.optional else "")

    def __call__(self, where: str, value: Any) -> int | None:
        if value is None and self.optional:
            return None
        if not _is_number(value):
            _fail(TypeError, where, self.allowed, value)
        high = INT64_MAX if self.high is None else min(self.high, INT64_MAX)
        if not (_is_integral(value) and self.low <= value <= high):
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
                raise type(err)(f"{where} must be {self.allowed}; got {shown(value)}") from None
        return tuple(out)


#: Spec of ``num_envs`` (the vector envs' batch size).
NUM_ENVS = Integer(1, 1_000_000)
#: A positive physical quantity (W, model units, budget): inside ``PHYSICAL_RANGE``, so every result stays finite.
POSITIVE = Real(*PHYSICAL_RANGE)


def _as_float(value: Any) -> float:
    """A real number as a float; a Python int beyond float64 as +-inf (which every range check refuses)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def real_array(where: str, value: Any, shapes: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """``value`` as a float64 array of one of ``shapes``: integer or float dtype only (no bool, complex, string or
    masked arrays; an object array only of numbers, i.e. Python ints beyond int64, which become floats and, beyond
    float64, +-inf). Ranges are the caller's to check, NaN and infinities included."""
    allowed = "real numbers (an int or float array) of shape " + " or ".join(map(str, shapes))
    if isinstance(value, np.ma.MaskedArray):
        _fail(TypeError, where, allowed + ", not a masked array", value)
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        arr = np.empty(0, dtype=object)
    if arr.dtype == object and arr.size and all(map(_is_number, arr.flat)):
        arr = np.array([_as_float(v) for v in arr.flat]).reshape(arr.shape)
    if arr.dtype.kind not in "iuf":
        _fail(TypeError, where, allowed, value)
    if arr.shape not in shapes:
        raise ValueError(f"{where} must have shape {' or '.join(map(str, shapes))}; got shape {arr.shape}")
    return arr.astype(float)


def option_array(name: str, value: ArrayLike, shapes: tuple[tuple[int, ...], ...],
                 bounds: tuple[float, float]) -> NDArray:
    """A ``reset`` option as a float array of one of ``shapes`` with every entry in ``bounds`` (closed)."""
    arr = real_array(f"reset option {name}", value, shapes)
    refuse_entries(f"reset option {name}", f"lie in [{bound(bounds[0])}, {bound(bounds[1])}]", arr,
                   ~((arr >= bounds[0]) & (arr <= bounds[1])))
    return arr


def replayed_trace(name: str, given: ArrayLike | None, kept: NDArray | None, shapes: tuple[tuple[int, ...], ...],
                   mask: NDArray | None) -> NDArray | None:
    """The channel trace a core's ``reset`` keeps: ``given`` (reset option ``name``) checked, on a full reset only
    (``ValueError`` on an autoreset, ``mask`` given); none on a full reset without it; else ``kept``, which an
    autoreset replays."""
    if given is not None:
        if mask is not None:
            raise ValueError(f"{name} can only be replayed on a full reset")
        return option_array(name, given, shapes, PHYSICAL_RANGE)
    return None if mask is None else kept


def action_array(action: ArrayLike, num_envs: int) -> NDArray:
    """The actions of ``num_envs`` envs as a float64 vector: shape (N, 1) or (N,) (or a scalar for one env), real
    (:func:`real_array`); the caller checks the range (NaN and infinities included). A float ndarray of one of those
    shapes (what agents pass every step) is converted without the general checks."""
    if type(action) is np.ndarray and action.dtype.kind == "f" and action.shape in ((num_envs, 1), (num_envs,)):
        return action.reshape(num_envs).astype(np.float64)
    shapes = ((num_envs, 1), (num_envs,)) + (((),) if num_envs == 1 else ())
    return real_array("action", action, shapes).reshape(num_envs)


@dataclass(frozen=True)
class AppliesWith:
    """Where a setting has an effect: only while the setting ``setting`` is one of ``values``. Elsewhere the setting
    must keep its default (:func:`refuse_without_effect`), which is what "not set" means.

    Declared per field with :func:`arg` (``applies_with=``): a scenario's fields and a core's option struct's
    (whose conditions are the core's ``APPLIES_WITH``).
    """

    setting: str
    values: tuple[Any, ...]

    def holds(self, settings: Mapping[str, Any]) -> bool:
        """Whether a setting under this condition has an effect given every setting's value (``settings``)."""
        return settings[self.setting] in self.values

    @property
    def where(self) -> str:
        """The condition as a message reads it: ``fading='block'``."""
        return " or ".join(f"{self.setting}={v!r}" for v in self.values)


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # arrays and such: not a default
        return False


def refuse_without_effect(settings: Mapping[str, Any], defaults: Mapping[str, Any],
                          applies: Mapping[str, AppliesWith], owner: str = "") -> None:
    """Raise ``ValueError`` for a setting of ``applies`` that differs from its default in ``defaults`` while its
    condition does not hold (it would be silently ignored), naming it, where it applies and both values.
    ``settings`` holds every setting's (checked) value; ``owner`` prefixes the names (``"Scenario"``)."""
    prefix = f"{owner}." if owner else ""
    for name, condition in applies.items():
        value, default = settings[name], defaults[name]
        if not condition.holds(settings) and not _equal(value, default):
            raise ValueError(f"{prefix}{name} applies only with {condition.where} (elsewhere it has no effect: leave "
                             f"it at its default, {shown(default)}); got {name}={shown(value)} with "
                             f"{condition.setting}={settings[condition.setting]!r}")


def check_args(specs: dict[str, Spec], **values: Any) -> dict[str, Any]:
    """Every keyword argument checked and converted by its spec in ``specs`` (named by its keyword)."""
    return {name: specs[name](name, value) for name, value in values.items()}


def arg(default: Any, spec: Spec, applies_with: AppliesWith | None = None) -> Any:
    """A dataclass field with ``default`` whose value :func:`check_dataclass` checks and converts with ``spec``;
    ``applies_with``: the condition under which it has an effect (elsewhere it must keep ``default``)."""
    return dataclasses.field(default=default, metadata={"spec": spec, "applies_with": applies_with})


def check_dataclass(obj: Any, owner: str | None = None) -> None:
    """Check and convert every field of the (frozen) dataclass ``obj`` that declares a spec with :func:`arg`, then
    refuse the fields set where they have no effect (their ``applies_with``). Errors name a field
    ``owner.field`` (default owner: the class's name; ``""``: the field alone, as a keyword argument)."""
    owner = type(obj).__name__ if owner is None else owner
    prefix = f"{owner}." if owner else ""
    fields = dataclasses.fields(obj)
    for f in fields:
        spec = f.metadata.get("spec")
        if spec is not None:
            object.__setattr__(obj, f.name, spec(f"{prefix}{f.name}", getattr(obj, f.name)))
    applies = field_conditions(type(obj))
    if applies:
        refuse_without_effect({f.name: getattr(obj, f.name) for f in fields}, field_defaults(type(obj)), applies,
                              owner)


def field_specs(cls: type) -> dict[str, Spec]:
    """The spec of every field of the dataclass ``cls`` that declares one (:func:`arg`), by name, in field order."""
    return {f.name: f.metadata["spec"] for f in dataclasses.fields(cls) if f.metadata.get("spec") is not None}


def field_defaults(cls: type) -> dict[str, Any]:
    """The default of every field of the dataclass ``cls``, by name."""
    return {f.name: f.default for f in dataclasses.fields(cls)}


def field_conditions(cls: type) -> dict[str, AppliesWith]:
    """The condition of every field of the dataclass ``cls`` that has an effect only under another's value."""
    return {f.name: f.metadata["applies_with"] for f in dataclasses.fields(cls)
            if f.metadata.get("applies_with") is not None}


def options_of(cls: type, options: Any, env_args: Mapping[str, Any], owner: str = "the core") -> Any:
    """An option struct: ``options`` (an instance of ``cls``, checked when it was made) or ``cls(**env_args)`` (the
    flat keyword arguments, checked once there); ``TypeError`` when both are given, naming ``owner`` (who takes
    them)."""
    if options is None:
        return cls(**env_args)
    if env_args:
        raise TypeError(f"give {owner} a {cls.__name__} or its keyword arguments, not both; got options and "
                        f"{sorted(env_args)}")
    if not isinstance(options, cls):
        raise TypeError(f"options must be a {cls.__name__}; got {type(options).__name__}")
    return options


def refuse_unknown_fields(cls: type, overrides: dict[str, Any]) -> None:
    """Raise ``TypeError`` (Python's error for an unknown keyword argument, which wrappers such as SB3's
    ``make_vec_env`` and TorchRL's ``GymEnv`` catch to retry without it) if ``overrides`` names a non-field of
    ``cls``."""
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
