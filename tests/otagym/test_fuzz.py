"""Fuzz suite (issue 9, class 6): every input either is refused at construction or ``reset`` with a ``TypeError`` or
``ValueError`` naming the argument, or plays full short episodes with finite observations, rewards and info.

The strategies are derived from the specs the code itself declares (the scenario dataclasses' field metadata and
the cores' ``ARGS``, for every scheme in the registry ``otagym.schemes.SCHEMES``), so a new field, argument or scheme
is fuzzed without touching this file. Valid values span each spec's whole range (hypothesis favours its ends: 1e-30
and 1e30 W, 1 m and 10,000 km, ...); a fifth of the drawn values are invalid ones, huge numbers among them (Python ints
beyond float64 and int64). A valid draw leaves out the settings that would have no effect (``AppliesWith``). Sizes are
capped (``SIZE_CAPS``) so an example is one short episode. Besides: every numeric argument against huge numbers, CDPB's
rho at the edges of its action space (0, subnormals, P/W^2), and reset options of every shape and kind.

On failure hypothesis prints the falsifying example (the seed is one of its arguments) and a ``@reproduce_failure``
blob; ``pytest --hypothesis-seed=N`` replays a whole run. ``OTAGYM_FUZZ_SCALE=20`` multiplies the examples.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from otagym import OTAPrivacyEnv, OTAPrivacyVectorEnv
from otagym.fidelity import NOT_MEASURED_WITHOUT_GRADIENT
from otagym.schemes import SCHEMES as REGISTRY
from otagym.validation import AppliesWith, Integer, Many, OfType, OneOf, Real, field_defaults, field_specs

#: A numerical warning (overflow, divide by zero, invalid) is a failure: nothing may silently become inf or NaN.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def fuzz(examples: int) -> settings:
    """Settings of a fuzz test: ``examples`` per CI run, times ``OTAGYM_FUZZ_SCALE`` (e.g. 20 for a deep run)."""
    return settings(max_examples=examples * int(os.environ.get("OTAGYM_FUZZ_SCALE", "1")), deadline=None,
                    print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
#: Caps on sizes (the specs allow far more) so that one example is a few short episodes.
SIZE_CAPS = {"num_devices": 6, "num_clients": 6, "num_rounds": 4, "max_rounds": 40, "coherence_rounds": 5,
             "rdp_order": 64, "dataset_size": 10**12, "local_steps": 3}
#: Integer dp_orders up to 300: fractional orders are valid, but their series can need 1e5-1e6 terms (q near 1/2,
#: as Opacus's); they are checked against Opacus, mpmath and their integer neighbours in test_privacy.py.
ORDERS_FUZZED = Many(Integer(2, 300), optional=True)
#: Huge numbers: Python ints beyond float64 and int64, the largest floats (issue: 10**400 raised OverflowError).
HUGE_VALUES = [10**400, -10**400, 2**64, -(2**63) - 1, 1.7976931348623157e308, -1.7976931348623157e308]
BAD_VALUES = [None, "1", "iid", True, np.nan, np.inf, -np.inf, 1 + 1j, [], {}, -1, 0, 1e308, -1e-300, (1.0,),
              np.float32(np.nan), np.bool_(False), (10**400,), *HUGE_VALUES]
#: Every registered scheme: its Scenario class and its batched core.
SCHEMES = {name: (info.scenario_type, info.core) for name, info in REGISTRY.items()}
#: The schemes with a training fidelity.
TRAINED_SCHEMES = sorted(k for k, (_, core) in SCHEMES.items() if "fidelity" in core.ARGS)


def valid(spec: Any, cap: int | None = None) -> st.SearchStrategy:
    """Values ``spec`` accepts, over its whole range (integers capped at ``cap``)."""
    if isinstance(spec, Real):
        low = -1e30 if spec.low is None else spec.low
        high = 1e30 if spec.high is None else spec.high
        out = st.floats(low, high, exclude_min=spec.low_open, exclude_max=spec.high_open)
        out = st.one_of(out, out.map(np.float32).filter(lambda v: _accepted(spec, v)))  # numpy scalars too
    elif isinstance(spec, Integer):
        out = st.integers(spec.low, min(x for x in (spec.high, cap, 10**12) if x is not None))
    elif isinstance(spec, OneOf):
        out = st.sampled_from(spec.choices)
    elif isinstance(spec, OfType):  # Flag() or Text()
        out = st.booleans() if bool in spec.types else st.text(max_size=6)
    elif isinstance(spec, Many):
        size = {"min_size": spec.length, "max_size": spec.length} if spec.length else {"min_size": 1, "max_size": 3}
        out = st.lists(valid(spec.element, cap), **size).map(tuple)
        if spec.scalar:
            out = st.one_of(valid(spec.element, cap), valid(spec.element, cap), out)
    else:
        raise TypeError(f"no strategy for {spec!r}")
    return st.one_of(st.none(), out) if getattr(spec, "optional", False) else out


def _accepted(spec: Any, value: Any) -> bool:
    try:
        spec("x", value)
    except (TypeError, ValueError):
        return False
    return True


def fuzzed(specs: dict[str, Any], broken: bool) -> st.SearchStrategy[dict[str, Any]]:
    """A dict of some of ``specs``' arguments: valid values, or (``broken``) valid ones and ``BAD_VALUES`` mixed."""
    def value(name: str, spec: Any) -> st.SearchStrategy:
        good = valid(ORDERS_FUZZED if name == "dp_orders" else spec, SIZE_CAPS.get(name))
        if not broken:
            return good
        return st.one_of(good, st.sampled_from(BAD_VALUES).filter(lambda v: not _accepted(spec, v)))
    return st.fixed_dictionaries({}, optional={k: value(k, spec) for k, spec in specs.items()})


def numeric_arguments() -> list[tuple[str, str, Any]]:
    """(scheme, argument, spec) of every number-valued scenario field and env argument of every scheme."""
    out = []
    for scheme, (scenario_cls, core) in sorted(SCHEMES.items()):
        for name, spec in {**field_specs(scenario_cls), **core.ARGS}.items():
            element = spec.element if isinstance(spec, Many) else spec
            if isinstance(element, (Real, Integer)):
                out.append((scheme, name, spec))
    return out


def conditions(scheme: str) -> tuple[dict[str, AppliesWith], dict[str, Any]]:
    """The settings of ``scheme`` that apply only with another (:class:`~otagym.validation.AppliesWith`: scenario
    fields and env arguments) and every setting's default."""
    scenario_cls, core = SCHEMES[scheme]
    fields = dataclasses.fields(scenario_cls)
    applies = {f.name: f.metadata["applies_with"] for f in fields if f.metadata.get("applies_with") is not None}
    defaults = {f.name: f.default for f in fields}
    return {**applies, **core.APPLIES_WITH}, {**defaults, **field_defaults(core.OPTIONS)}


def without_inapplicable(scheme: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` less the settings that would have no effect (refused, which a valid draw must not be)."""
    applies, defaults = conditions(scheme)
    values = {**defaults, **kwargs}
    return {k: v for k, v in kwargs.items() if k not in applies or applies[k].holds(values)}


def _scheme_kwargs(scheme: str, broken: bool, fidelity: str = "analytic") -> st.SearchStrategy[dict[str, Any]]:
    scenario_cls, core = SCHEMES[scheme]
    fields = field_specs(scenario_cls)
    # T is always drawn (capped): the presets' 100-500 rounds would make an example slow; the training fidelity
    # (a real model per env) has a test of its own with fewer examples.
    fixed = {"num_rounds": valid(fields["num_rounds"], SIZE_CAPS["num_rounds"])}
    if "fidelity" in core.ARGS:
        fixed["fidelity"] = st.just(fidelity)
    if fidelity == "train":  # the embedded digits: MNIST and CIFAR-10 need files (their loaders are tested alone)
        fixed.update(dataset=st.just("digits"), data_dir=st.none())
    merged = st.tuples(fuzzed(fields, broken), fuzzed(core.ARGS, broken), st.fixed_dictionaries(fixed)).map(
        lambda parts: {**parts[0], **parts[1], **parts[2]})
    return merged if broken else merged.map(lambda kwargs: without_inapplicable(scheme, kwargs))


def _finite(name: str, value: Any, not_measured: tuple[str, ...] = ()) -> None:
    """Every number of an info entry is finite, but those of ``not_measured`` (NaN by design)."""
    arr = np.asarray(value)
    if name.split(".")[-1].lstrip("_") in not_measured:
        return
    if arr.dtype.kind in "iufb":
        assert np.isfinite(arr).all(), (name, value)
    elif arr.dtype == object:  # final_info of the vector env
        for k, v in value.items():
            _finite(f"{name}.{k}", v, not_measured)


def _play(env: Any, seed: int, rounds: int, vector: bool, not_measured: tuple[str, ...] = ()) -> None:
    obs, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    for _ in range(rounds + vector):  # the vector env also autoresets once
        assert env.observation_space.contains(obs), obs
        for k, v in info.items():
            _finite(k, v, not_measured)
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert np.isfinite(reward).all(), reward
        if not vector and terminated:
            break
    for k, v in info.items():
        _finite(k, v, not_measured)


def _names_an_argument(err: Exception, kwargs: dict[str, Any]) -> bool:
    msg = str(err)
    return any(k in msg for k in kwargs) or "reward_lambda" in msg


def _make(scheme: str, vector: bool, **kwargs: Any) -> Any:
    if vector:
        return OTAPrivacyVectorEnv(2, scheme=scheme, **kwargs, autoreset_mode=AutoresetMode.SAME_STEP)
    return OTAPrivacyEnv(scheme=scheme, **kwargs)


@pytest.mark.slow  # 600 examples: 13 s
@fuzz(600)
@given(scheme=st.sampled_from(sorted(SCHEMES)), broken=st.booleans(), data=st.data(), seed=st.integers(0, 2**32 - 1),
       vector=st.booleans())
def test_any_arguments_are_refused_naming_one_or_play_finite_episodes(scheme, broken, data, seed, vector):
    kwargs = data.draw(_scheme_kwargs(scheme, broken), label="kwargs")
    try:
        env = (OTAPrivacyVectorEnv(2, scheme=scheme, **kwargs) if vector
               else OTAPrivacyEnv(scheme=scheme, **kwargs))
    except (TypeError, ValueError) as err:
        assert _names_an_argument(err, kwargs), err
        event(f"refused ({'broken' if broken else 'valid values'}): {type(err).__name__}")
        return
    _play(env, seed, env.scenario.num_rounds, vector)
    event(f"played ({'broken' if broken else 'valid values'})")


@pytest.mark.slow  # trains models: 15 s
@fuzz(25)
@given(scheme=st.sampled_from(TRAINED_SCHEMES), broken=st.booleans(), data=st.data(), seed=st.integers(0, 2**32 - 1),
       vector=st.booleans())
def test_training_fidelity_refuses_naming_an_argument_or_plays_finite_episodes(scheme, broken, data, seed, vector):
    kwargs = data.draw(_scheme_kwargs(scheme, broken, fidelity="train"), label="kwargs")
    kwargs["eval_every"] = 1  # evaluate (test accuracy, gradient norm) after every round
    try:
        env = (OTAPrivacyVectorEnv(2, scheme=scheme, **kwargs) if vector
               else OTAPrivacyEnv(scheme=scheme, **kwargs))
    except (TypeError, ValueError) as err:
        assert _names_an_argument(err, kwargs), err
        return
    _play(env, seed, env.scenario.num_rounds, vector,
          not_measured=NOT_MEASURED_WITHOUT_GRADIENT if kwargs.get("eval_gradient") is False else ())


@pytest.mark.slow
@fuzz(200)
@given(nu=st.one_of(valid(Real(1e-30, 1e30)), st.sampled_from(BAD_VALUES)),
       distance=st.one_of(valid(Real(1.0, 1e7)), st.sampled_from(BAD_VALUES)),
       gain=st.one_of(valid(Real(1e-30, 1e30)), st.sampled_from(BAD_VALUES)), seed=st.integers(0, 2**32 - 1))
def test_reset_options_are_refused_naming_one_or_play_finite_episodes(nu, distance, gain, seed):
    env = OTAPrivacyEnv(num_devices=3, num_rounds=3)
    options = {"nu": nu, "distances_m": np.full(3, distance) if np.ndim(distance) == 0 else distance,
               "channel_gains": np.full((3, 3), gain) if np.ndim(gain) == 0 else gain}
    try:
        env.reset(seed=seed, options=options)
    except (TypeError, ValueError) as err:
        assert any(k in str(err) for k in options), err
        event(f"refused: {type(err).__name__}")
        return
    _play(env, seed, 3, vector=False)
    event("played")


BAD_ACTIONS = [np.nan, np.inf, -np.inf, 2.0, -2.0, 0.0, -1e-300, 1e300, "0.1", None, 1j, [0.1, 0.2], [[0.1]] * 3,
               np.ma.masked_array([0.1], mask=[True]), np.zeros((1, 1, 1)), True, [[]]]


@pytest.mark.slow
@fuzz(150)
@given(scheme_action=st.sampled_from([(scheme, a) for scheme, (_, core) in SCHEMES.items()
                                      for a in core.ARGS["action_type"].choices]),
       bad=st.sampled_from(BAD_ACTIONS), seed=st.integers(0, 2**32 - 1), vector=st.booleans())
def test_a_refused_action_names_itself_and_leaves_no_trace(scheme_action, bad, seed, vector):
    """A bad action raises naming the action; the env then plays on exactly as if it had never been sent."""
    scheme, action_type = scheme_action
    make = (lambda: OTAPrivacyVectorEnv(3, scheme=scheme, action_type=action_type, num_rounds=3)) if vector else (
        lambda: OTAPrivacyEnv(scheme=scheme, action_type=action_type, num_rounds=3))
    env, twin = make(), make()
    env.reset(seed=seed)
    twin.reset(seed=seed)
    shaped = bad if not vector or np.ndim(bad) > 0 else np.full((3, 1), bad, dtype=object if bad is None else None)
    try:
        env.step(shaped)
    except (TypeError, ValueError) as err:
        assert "action" in str(err), err
    else:  # some entries are valid for some action types (0 for share/price/normalized, 1e300 for eta)
        return
    env.action_space.seed(seed)
    action = env.action_space.sample()
    got, want = env.step(action), twin.step(action)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("vector", [False, True])
@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_step_before_reset_is_a_runtime_error(scheme, vector):
    env = OTAPrivacyVectorEnv(2, scheme=scheme) if vector else OTAPrivacyEnv(scheme=scheme)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(env.action_space.sample())


# --- huge numbers, rho at its boundary, shapes of reset options ---------------------------------------------------
@pytest.mark.parametrize("value", HUGE_VALUES[:2] + HUGE_VALUES[4:], ids=["1e400", "-1e400", "max", "-max"])
@pytest.mark.parametrize("scheme,name,spec", numeric_arguments(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_numeric_argument_refuses_huge_numbers_naming_itself_and_its_range(scheme, name, spec, value):
    """10**400 fits neither float64 nor int64 (it raised a bare OverflowError); +-1.8e308 lie outside every range."""
    element = spec.element if isinstance(spec, Many) else spec
    given = value if not isinstance(spec, Many) or spec.scalar else (value,) * (spec.length or 1)
    with pytest.raises(ValueError) as info:
        _make(scheme, False, **{name: given})
    msg = str(info.value)
    assert f"{name} must be" in msg and element.allowed in msg and "; got " in msg, msg
    assert len(msg) < 600, msg


@pytest.mark.slow
@fuzz(60)
@given(data=st.data(), rho=st.sampled_from([0.0, 5e-324, 1e-320, 1e-308, 1e-300, 1e-13, 1.0, np.inf]),
       seed=st.integers(0, 2**32 - 1), vector=st.booleans())
def test_rho_at_its_boundary_plays_finite_episodes(data, rho, seed, vector):
    """Every rho of the action space Box(0, P/W^2), the edges and the subnormals included, plays finite rounds (rho
    below the floor 1e-12 P/W^2 is played as the floor); ``inf`` stands for P/W^2 itself."""
    kwargs = data.draw(_scheme_kwargs("cdpb", broken=False), label="kwargs")
    kwargs["action_type"] = "rho"
    try:
        env = _make("cdpb", vector, **kwargs)
    except (TypeError, ValueError) as err:
        assert _names_an_argument(err, kwargs), err
        return
    rho_max = env.scenario.rho_max
    action = np.full(env.action_space.shape, min(rho, rho_max))
    assert env.action_space.contains(action)
    env.reset(seed=seed)
    for _ in range(env.scenario.num_rounds + vector):
        obs, reward, _, _, info = env.step(action)
        assert np.isfinite(reward).all() and env.observation_space.contains(obs)
        assert np.all(info["rho"] >= 1e-12 * rho_max) and np.all(info["rho"] <= rho_max)
        for k, v in info.items():
            _finite(k, v)
    event("played")


@pytest.mark.slow
@fuzz(8)
@given(rho=st.sampled_from([0.0, 1e-320, 1e-308, 1.0]), seed=st.integers(0, 2**32 - 1))
def test_rho_at_its_boundary_trains_with_finite_results(rho, seed):
    env = OTAPrivacyEnv(scheme="cdpb", action_type="rho", fidelity="train", num_clients=3, num_rounds=2,
                        eval_every=1)
    env.reset(seed=seed)
    for _ in range(2):
        obs, reward, _, _, info = env.step(np.array([rho]))
        assert np.isfinite(reward) and np.isfinite(obs).all()
        for k, v in info.items():
            _finite(k, v)


#: Entries of a reset option array: valid ones, ones out of range, and kinds that are not real numbers.
OPTION_DTYPES = [np.float64, np.float32, np.int64, np.bool_, np.complex128, np.str_, object]


def _option_value(shape: tuple[int, ...], dtype: Any, fill: float) -> Any:
    if dtype is object:
        return np.full(shape, None, dtype=object)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN or 1e31 as an int: whatever the cast gives
        return np.full(shape, fill).astype(dtype)


@fuzz(150)
@given(option=st.sampled_from(["distances_m", "channel_gains", "nu"]), vector=st.booleans(),
       shape=st.lists(st.integers(0, 4), max_size=4).map(tuple), right_shape=st.booleans(),
       dtype=st.sampled_from(OPTION_DTYPES), fill=st.sampled_from([50.0, 1e-3, 0.0, -1.0, 1e31, np.nan]),
       as_list=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_reset_options_of_any_shape_and_kind_are_refused_naming_the_accepted_shape(option, vector, shape, right_shape,
                                                                                  dtype, fill, as_list, seed):
    """A reset option of the wrong ndim, shape or kind is refused naming the option and the shapes *this* env accepts
    (the single env's are the batched ones less the batch axis: it named "(T, 1, M)"); a right one plays."""
    n, m, big_t = (2 if vector else 1), 3, 3
    accepted = {"distances_m": ((n, m),) if vector else ((m,),),
                "channel_gains": ((big_t, n, m),) if vector else ((big_t, m),),
                "nu": ((), (n,)) if vector else ((),)}[option]
    shape = accepted[-1] if right_shape else shape
    value = _option_value(shape, dtype, fill)
    value = value.tolist() if as_list and dtype is not object else value
    env = _make("receive_scaling", vector, num_devices=m, num_rounds=big_t)
    try:
        env.reset(seed=seed, options={option: value})
    except (TypeError, ValueError) as err:
        msg = str(err)
        assert f"reset option {option} must" in msg, msg
        if "shape" in msg:
            assert " or ".join(map(str, accepted)) in msg, msg
        event(f"refused: {type(err).__name__}")
        return
    assert np.shape(value) in accepted
    _play(env, seed, big_t, vector)
    event("played")
