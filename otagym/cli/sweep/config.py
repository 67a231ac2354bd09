"""A sweep's config: its schema (:data:`CONFIG_KEYS`), its YAML file (:func:`load_config`) and its validation into a
:class:`Plan`, the grid scheme x scenario x rounds x fidelity x policy x nu x seed of cells with their keys
(:func:`plan`). A :class:`ConfigError` names the first bad field before any cell runs.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple

from otagym._io import file_sha256
from otagym.cli.sweep.cells import cached_model, cell_key
from otagym.accounting import ACCOUNTANTS
from otagym.datasets import DATASET_NAMES, data_folder
from otagym.fidelity import SUBSET_KEYS, TRAINING_ARGS
from otagym.schemes import SCHEMES
from otagym.validation import POSITIVE, Integer, Many, OneOf

__all__ = ["SWEEP_SCHEMES", "CONFIG_KEYS", "SEED_COUNT", "FIDELITIES", "DATASETS", "ConfigError", "load_config", "Plan",
           "plan"]

#: The schemes a sweep can run: every registered scheme, each computed by its ``baselines/<scheme>/sweep.py``
#: (:func:`baselines.sweep.scheme_sweep`).
SWEEP_SCHEMES = tuple(SCHEMES)
#: The keys of a sweep config.
CONFIG_KEYS = ("name", "scheme", "scenarios", "rounds", "fidelity", "dataset", "data_dir", *SUBSET_KEYS,
               "training_options", "policies", "nu", "seeds", "accountant")
#: The number of seeds ``seeds: {start, count}`` (and ``otagym compare --seeds``) may ask for: each is a cell per
#: policy and nu, and the plan lists every cell before the first runs.
SEED_COUNT = Integer(1, 100_000)
FIDELITIES = ("analytic", "train")
#: The datasets of ``fidelity: train`` (:data:`otagym.datasets.DATASET_NAMES`).
DATASETS = DATASET_NAMES
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class ConfigError(ValueError):
    """A sweep config that cannot run; the message names the field: ``"<field> must be <allowed>; got <value>"``."""


def _yaml_loader() -> Any:
    """PyYAML's safe loader that also reads ``1e4`` and ``1.0e4`` as floats (YAML 1.2; PyYAML's YAML 1.1 rule reads
    them as strings unless written ``1.0e+4``)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(
        r"^[-+]?(?:[0-9][0-9_]*\.?[0-9_]*(?:[eE][-+]?[0-9]+)?|\.[0-9_]+(?:[eE][-+]?[0-9]+)?)$"),
        list("-+0123456789."))
    return Loader


def load_config(path: str | os.PathLike) -> dict[str, Any]:
    """The YAML file at ``path`` as a dict (``name`` defaults to the file's stem)."""
    import yaml

    path = Path(path)
    try:
        data = yaml.load(path.read_text(), Loader=_yaml_loader())  # noqa: S506 - a SafeLoader subclass
    except OSError as err:
        raise ConfigError(f"config must be a readable YAML file; got {str(path)!r} ({err.strerror or err})") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"config must be valid YAML; got {str(path)!r}: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config must be a mapping of {list(CONFIG_KEYS)}; got {data!r}")
    data.setdefault("name", path.stem)
    return data


def _distinct(field: str, entries: list[dict[str, Any]], key: str, allowed: str) -> list[dict[str, Any]]:
    """``entries`` if their ``key`` values are distinct, else a :class:`ConfigError` naming ``field``."""
    values = [e[key] for e in entries]
    if len(set(values)) != len(values):
        _fail(field, allowed, values)
    return entries


def _fail(where: str, allowed: str, value: Any) -> None:
    raise ConfigError(f"{where} must be {allowed}; got {value!r}")


def _spec(spec: Callable[[str, Any], Any], where: str, value: Any) -> Any:
    """``spec(where, value)`` with its TypeError/ValueError turned into a :class:`ConfigError`."""
    try:
        return spec(where, value)
    except (TypeError, ValueError) as err:
        raise ConfigError(str(err)) from None


def _axis(where: str, value: Any, spec: Any) -> list[Any]:
    """A grid axis given as one value or a non-empty list of values, each checked by ``spec``."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        _fail(where, f"{spec.allowed} or a non-empty list of them", value)
    out = [_spec(spec, where, v) for v in values]
    if len(set(out)) != len(out):
        _fail(where, "distinct values", value)
    return out


@dataclass(frozen=True)
class Plan:
    """A validated sweep: its name, its normalised config, and its cells with their keys, in grid order."""

    name: str
    config: dict[str, Any]
    cells: tuple[dict[str, Any], ...]
    keys: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(set(self.keys)) != len(self.keys):
            raise ConfigError("cells must be distinct; got the same cell twice (a repeated nu, seed or policy)")


def _scenarios(config: Mapping[str, Any], scheme: str) -> list[dict[str, Any]]:
    info = SCHEMES[scheme]
    entries = config.get("scenarios", [info.default_preset])
    if not isinstance(entries, list) or not entries:
        _fail("scenarios", "a non-empty list of presets or mappings {preset: NAME, label: ..., FIELD: VALUE}",
              entries)
    out = []
    for i, entry in enumerate(entries):
        where = f"scenarios[{i}]"
        if isinstance(entry, str):
            entry = {"preset": entry}
        if not isinstance(entry, dict):
            _fail(where, f"a preset in {sorted(info.presets)} or a mapping {{preset: NAME, FIELD: VALUE}}", entry)
        entry = dict(entry)
        preset = entry.pop("preset", info.default_preset)
        label = entry.pop("label", None)
        if preset not in info.presets:
            _fail(f"{where}.preset", f"one of {sorted(info.presets)}", preset)
        if "num_rounds" in entry:
            raise ConfigError(f"{where}.num_rounds must not be set; got {entry['num_rounds']!r} (use the top-level "
                              "rounds: for T)")
        try:
            info.scenario(preset, **entry)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"{where}: {err}") from None
        if label is None:
            label = preset + ("" if not entry else "[" + ",".join(f"{k}={v}" for k, v in entry.items()) + "]")
        if not isinstance(label, str) or not label:
            _fail(f"{where}.label", "a non-empty string", label)
        out.append({"preset": preset, "label": label, "overrides": entry})
    return _distinct("scenarios", out, "label", "distinct (give each a label:)")


def _model_policy(where: str, name: Any, path: Any) -> dict[str, Any]:
    """A trained model's policy entry: the file must exist and load; its hash and action semantics are recorded."""
    if not isinstance(name, str) or not name:
        _fail(f"{where}.name", "a non-empty string (the row's name)", name)
    if not isinstance(path, str) or not Path(path).expanduser().is_file():
        _fail(f"{where}.model", "an existing file (an SB3 model.zip written by `otagym train`)", path)
    resolved = Path(path).expanduser().resolve()
    try:
        from agents.policy import run_metadata
    except ImportError as err:
        raise ConfigError(f"{where}.model needs the rl extra (stable-baselines3): pip install -e '.[rl]'; {err}") \
            from None
    try:
        cached_model(str(resolved), file_sha256(resolved))
    except (OSError, ValueError) as err:
        raise ConfigError(f"{where}.model must be an SB3 model (PPO, SAC, TD3 or TRPO); got {path!r}: {err}") \
            from None
    return {"name": name, "model": str(resolved), "sha256": file_sha256(resolved),
            "env_kwargs": run_metadata(resolved).get("env_kwargs")}


def _policies(config: Mapping[str, Any], scheme: str, nus: list[float | None], scenario: Any) -> list[dict[str, Any]]:
    """The policies of ``scheme``'s cells: its sweep's analytic ones (:class:`baselines.sweep.SchemeSweep`) with
    their settable params, and trained models where its sweep takes them."""
    from baselines.sweep import scheme_sweep

    sweeper = scheme_sweep(scheme)
    names = sweeper.policy_names()
    models = ", NAME:PATH/TO/model.zip" if sweeper.trained_models else ""
    entries = config.get("policies", list(sweeper.default_policies))
    allowed = (f"one of {sorted(names)}{models}, {{policy: NAME, name: ..., params: {{...}}}}"
               + (" or {name: NAME, model: PATH}" if sweeper.trained_models else ""))
    if not isinstance(entries, list) or not entries:
        _fail("policies", "a non-empty list, each " + allowed, entries)
    out = []
    for i, entry in enumerate(entries):
        where = f"policies[{i}]"
        if isinstance(entry, str) and ":" in entry:
            entry = dict(zip(("name", "model"), entry.split(":", 1)))
        elif isinstance(entry, str):
            entry = {"policy": entry}
        if not isinstance(entry, dict):
            _fail(where, allowed, entry)
        unknown = sorted(set(entry) - {"policy", "name", "params", "model"})
        if unknown or ("model" in entry) == ("policy" in entry):
            _fail(where, allowed, entries[i])
        if "model" in entry:
            if not sweeper.trained_models:
                _fail(f"{where}.model", f"absent for scheme {scheme!r} (its sweep plays analytic policies only)",
                      entry["model"])
            if "params" in entry:
                _fail(f"{where}.params", "absent for a trained model (its settings travel in its run.json)",
                      entry["params"])
            out.append(_model_policy(where, entry.get("name"), entry["model"]))
            continue
        name = entry["policy"]
        if name not in names:
            _fail(f"{where}.policy" if isinstance(entries[i], dict) else where,
                  f"one of {sorted(names)}" + (" or NAME:PATH/TO/model.zip" if models else ""), name)
        params = _params(where, name, entry.get("params") or {}, sweeper.param_specs(name))
        try:
            sweeper.check_params(name, params, scenario, nus)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"{where}.params: {err}") from None
        label = entry.get("name", name)
        if not isinstance(label, str) or not label:
            _fail(f"{where}.name", "a non-empty string", label)
        out.append({"name": label, "policy": name, "params": params})
    return _distinct("policies", out, "name", "distinct by name (give a repeated policy a name:)")


def _params(where: str, name: str, params: Any, specs: Mapping[str, Any]) -> dict[str, Any]:
    """A policy entry's ``params``: a mapping of its settable arguments, each checked by its spec."""
    if not isinstance(params, dict):
        _fail(f"{where}.params", f"a mapping with keys among {list(specs)}", params)
    for key in params:
        if key not in specs:
            _fail(f"{where}.params", f"a mapping with keys among {list(specs)} ({name}'s settable arguments)", key)
    return {k: _spec(specs[k], f"{where}.params.{k}", v) for k, v in params.items()}


def plan(config: Mapping[str, Any]) -> Plan:
    """Validate a whole sweep config and expand its grid; a :class:`ConfigError` names the first bad field.

    Keys: ``name`` (the results folder), ``scheme`` (one or a list; :data:`SWEEP_SCHEMES`), ``scenarios`` (presets,
    or mappings ``{preset, label, FIELD: VALUE}`` of scenario field overrides), ``rounds`` (T, one or a list; default
    the scenario's), ``fidelity`` (``analytic``/``train``, one or a list, those the scheme's sweep runs) with
    ``dataset``/``data_dir`` (``data_dir`` may be left out for ``fashion-mnist`` once Debian's
    ``dataset-fashion-mnist`` is installed) and the data subsets ``train_samples``/``eval_samples``
    (:data:`otagym.fidelity.SUBSET_KEYS`; each cell then names them) and ``training_options`` (a mapping of the
    model update's env arguments the scheme's sweep lets a config set, e.g. ``weight_decay``: its
    :attr:`~baselines.sweep.SchemeSweep.training_options`; each training cell then names them), ``policies`` (names, ``NAME:PATH`` of trained
    models, ``{policy, name, params}`` or ``{name, model}``; default the scheme's), ``nu`` (one or a list, each > 0;
    default the scenario's ``nu_grid``; only for a scheme with a nu axis), ``seeds`` (a list of integers >= 0, or
    ``{start, count}``), ``accountant`` (one of :data:`otagym.accounting.ACCOUNTANTS`, one value; default ``rdp``:
    ``pld`` also records each cell's ``epsilon_pld``, and is part of its cells, so that a ``rdp`` cell's key is that
    of a config without it). The policies, the settable params and the axes are each scheme's
    :class:`baselines.sweep.SchemeSweep`'s; several schemes share ``scenarios``, ``policies`` and ``nu``, so a config
    of several schemes leaves those to each scheme's defaults.
    """
    name = _name(config)
    schemes = _axis("scheme", config.get("scheme", SWEEP_SCHEMES[0]), OneOf(SWEEP_SCHEMES))
    rounds = _axis("rounds", config["rounds"], Integer(1, 10**6)) if config.get("rounds") is not None else [None]
    fidelities = _axis("fidelity", config.get("fidelity", "analytic"), OneOf(FIDELITIES))
    training_data = _training_data(config, fidelities)
    seeds = _seeds(config)
    accountant = _spec(OneOf(ACCOUNTANTS), "accountant", config.get("accountant", "rdp"))

    axes = _Axes(rounds, fidelities, seeds, training_data, accountant)
    cells: list[dict[str, Any]] = []
    normalised: dict[str, Any] = {"name": name, "scheme": schemes, "rounds": rounds, "fidelity": fidelities,
                                  **training_data, "seeds": seeds, "schemes": {},
                                  **({} if accountant == "rdp" else {"accountant": accountant})}
    for scheme in schemes:
        scenarios, policies, nus = _scheme_axes(config, scheme, fidelities)
        if accountant != "rdp":
            _check_accountant(scheme, scenarios, accountant)
        normalised["schemes"][scheme] = {"scenarios": scenarios, "policies": policies,
                                         **({} if nus == [None] else {"nu": nus})}
        options = _training_options(config, scheme, fidelities)
        if options:
            normalised["schemes"][scheme]["training_options"] = options
        data = {**training_data, "training_options": options} if options else training_data
        cells += _grid(scheme, scenarios, policies, nus, axes._replace(training_data=data))
    keys = tuple(cell_key(c) for c in cells)
    return Plan(name, normalised, tuple(cells), keys)


def _scheme_axes(config: Mapping[str, Any], scheme: str,
                 fidelities: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[float | None]]:
    """``scheme``'s scenarios, policies and budgets (``[None]`` for a scheme without a nu axis, which refuses
    ``nu``), once its sweep is known to run every fidelity asked for."""
    from baselines.sweep import scheme_sweep

    sweeper = scheme_sweep(scheme)
    unsupported = [f for f in fidelities if f not in sweeper.fidelities]
    if unsupported:
        _fail("fidelity", f"among {list(sweeper.fidelities)} for scheme {scheme!r}", unsupported[0])
    scenarios = _scenarios(config, scheme)
    first = SCHEMES[scheme].scenario(scenarios[0]["preset"], **scenarios[0]["overrides"])
    if sweeper.nu_axis:
        nus: list[float | None] = list(_nus(config, first))
    elif "nu" in config:
        _fail("nu", f"absent for scheme {scheme!r} (its privacy budget is fixed by the scenario)", config["nu"])
    else:
        nus = [None]
    return scenarios, _policies(config, scheme, nus, first), nus


def _training_options(config: Mapping[str, Any], scheme: str, fidelities: list[str]) -> dict[str, Any]:
    """The config's ``training_options`` for ``scheme``, checked against its sweep's
    :attr:`~baselines.sweep.SchemeSweep.training_options` (empty where the config sets none)."""
    from baselines.sweep import scheme_sweep

    given = config.get("training_options")
    if given is None or given == {}:
        return {}
    if "train" not in fidelities:
        _fail("training_options", "absent unless fidelity includes 'train'", given)
    specs = scheme_sweep(scheme).training_options
    allowed = f"a mapping of {sorted(specs)} for scheme {scheme!r}" if specs else f"absent for scheme {scheme!r}"
    if not isinstance(given, Mapping) or not specs or set(given) - set(specs):
        _fail("training_options", allowed, given)
    return {k: _spec(specs[k], f"training_options.{k}", v) for k, v in given.items()}


def _check_accountant(scheme: str, scenarios: list[dict[str, Any]], accountant: str) -> None:
    """A :class:`ConfigError` naming ``accountant`` when ``scheme``'s env refuses it on one of ``scenarios`` (anonymous
    OTA's PLD needs its sampled accounting)."""
    from otagym.env import OTAPrivacyVectorEnv

    for i, scen in enumerate(scenarios):
        try:
            OTAPrivacyVectorEnv(1, SCHEMES[scheme].scenario(scen["preset"], **scen["overrides"]), scheme=scheme,
                                accountant=accountant)
        except ValueError as err:
            raise ConfigError(f"accountant must suit scenarios[{i}] of scheme {scheme!r}; got {accountant!r}: {err}") \
                from None


def _name(config: Any) -> str:
    """The sweep's name (its results folder), once ``config`` is a mapping of known keys."""
    if not isinstance(config, Mapping):
        _fail("config", f"a mapping of {list(CONFIG_KEYS)}", config)
    unknown = sorted(set(config) - set(CONFIG_KEYS))
    if unknown:
        _fail("config keys", f"among {list(CONFIG_KEYS)}", unknown[0] if len(unknown) == 1 else unknown)
    name = config.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        _fail("name", "a folder name (letters, digits, '.', '_', '-')", name)
    return name


def _training_data(config: Mapping[str, Any], fidelities: list[str]) -> dict[str, Any]:
    """What a training cell names of its data: ``dataset`` and ``data_dir`` (resolved; None where the dataset needs
    none or is found without one), and the subsets of :data:`otagym.fidelity.SUBSET_KEYS` that the config sets;
    ``{"dataset": None, "data_dir": None}`` without the training fidelity."""
    given = {k: config[k] for k in ("dataset", "data_dir", *SUBSET_KEYS) if config.get(k) is not None}
    if "train" not in fidelities:
        if given:
            _fail(", ".join(given), "absent unless fidelity includes 'train'", given)
        return {"dataset": None, "data_dir": None}
    dataset = _spec(OneOf(DATASETS), "dataset", config.get("dataset") or "digits")
    data_dir = config.get("data_dir")
    if data_dir is not None and not (isinstance(data_dir, str) and Path(data_dir).expanduser().is_dir()):
        _fail("data_dir", f"an existing folder holding the {dataset} files (nothing is downloaded)", data_dir)
    try:
        data_folder(dataset, data_dir)
    except ValueError:
        _fail("data_dir", f"an existing folder holding the {dataset} files (nothing is downloaded)", data_dir)
    except FileNotFoundError as err:
        raise ConfigError(f"data_dir: {err}") from None
    subsets = {k: _spec(TRAINING_ARGS[k], k, config[k]) for k in SUBSET_KEYS if config.get(k) is not None}
    return {"dataset": dataset, "data_dir": None if data_dir is None else str(Path(data_dir).expanduser().resolve()),
            **subsets}


def _seeds(config: Mapping[str, Any]) -> list[int]:
    """The channel seeds: a list of distinct integers >= 0, one integer, or ``{start, count}`` (default 0, 1, 2)."""
    seeds_in = config.get("seeds", [0, 1, 2])
    if isinstance(seeds_in, dict):
        if sorted(seeds_in) != ["count", "start"]:
            _fail("seeds", "a list of integers >= 0 or {start: S, count: N}", seeds_in)
        start = _spec(Integer(0), "seeds.start", seeds_in["start"])
        seeds_in = list(range(start, start + _spec(SEED_COUNT, "seeds.count", seeds_in["count"])))
    seeds = list(_spec(Many(Integer(0, 2**63 - 1)), "seeds", seeds_in) if not isinstance(seeds_in, int)
                 else [_spec(Integer(0, 2**63 - 1), "seeds", seeds_in)])
    if len(set(seeds)) != len(seeds):
        _fail("seeds", "distinct", seeds)
    return seeds


def _nus(config: Mapping[str, Any], first: Any) -> list[float]:
    """The budgets nu: one or a list of distinct values > 0 (default the first scenario's ``nu_grid``)."""
    nus_in = config.get("nu", list(first.nu_grid))
    nus = list(_spec(Many(POSITIVE), "nu", nus_in) if not isinstance(nus_in, (int, float))
               else [_spec(POSITIVE, "nu", nus_in)])
    if len(set(nus)) != len(nus):
        _fail("nu", "distinct values", nus)
    return nus


class _Axes(NamedTuple):
    """The axes and settings a config gives every scheme of its grid."""

    rounds: list[int | None]
    fidelities: list[str]
    seeds: list[int]
    training_data: dict[str, Any]
    accountant: str


def _grid(scheme: str, scenarios: list[dict[str, Any]], policies: list[dict[str, Any]], nus: list[float | None],
          axes: _Axes) -> list[dict[str, Any]]:
    """The cells of one scheme, in grid order (scenario, rounds, fidelity, policy, nu, seed); a training cell also
    names its ``dataset`` and ``data_dir`` (and the data subsets a config sets: ``training_data``), a cell of a scheme
    without a nu axis (``nus == [None]``) has no ``nu``, and a cell names its ``accountant`` only where it is not the
    default ``rdp`` (so that the keys of the cells of before the option stay theirs)."""
    info, (rounds, fidelities, seeds, training_data, accountant) = SCHEMES[scheme], axes
    cells = []
    for scen in scenarios:
        for t in rounds:
            resolved = info.scenario(scen["preset"], **scen["overrides"], **({} if t is None else {"num_rounds": t}))
            for fidelity, policy, nu, seed in itertools.product(fidelities, policies, nus, seeds):
                cell = {"scheme": scheme, "scenario": scen["label"], "preset": scen["preset"],
                        "overrides": scen["overrides"], "rounds": resolved.num_rounds,
                        "fidelity": fidelity, "policy": policy, **({} if nu is None else {"nu": float(nu)}),
                        "seed": int(seed)}
                if fidelity == "train":
                    cell.update(training_data)
                if accountant != "rdp":
                    cell["accountant"] = accountant
                cells.append(cell)
    return cells
