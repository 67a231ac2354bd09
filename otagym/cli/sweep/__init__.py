"""``otagym sweep CONFIG.yaml``: a grid of comparison cells declared in a file, run in-process, on a local process
pool or on Ray, kept as one record per cell so that a rerun resumes and a crash loses no finished cell.

**Cells.** A sweep is the product scheme x scenario x rounds x fidelity x policy x nu x seed; each element is a cell,
a JSON-able dict, computed into a record. A cell's numbers are a pure function of the cell: its channels come from
its seed, and nothing depends on which other cells run beside it or where. Cells of one analytic policy and scenario
that differ only in nu and seed (:func:`batch_key`) are computed as one batch in one vector env (:func:`run_cells`,
:func:`baselines.compare.evaluate_cells`), which gives the same bits as one at a time (tested) in a fraction of the
time. So in-process, ``--workers N``, ``--ray`` and a resumed run give the same numbers.

**Records.** ``<out>/<name>/cells/<key>.json``, where ``key`` is a content hash of the cell and of the scenario it
resolves to (a preset changed in the code is a new cell). Each record holds the cell (its config and seed), the
package version, the resolved scenario, the result or the error with its traceback, the host and the wall time, and
is written atomically by the driver as soon as the cell finishes. A rerun skips cells with an ``ok`` record (resume)
and retries those that failed. ``cells.csv`` (and ``cells.parquet`` when pyarrow is installed) and ``summary.csv``
(mean and 95% CI over seeds, :func:`baselines.compare.summarize`) are rebuilt from the records after every run,
interrupted ones included. ``sweep.json`` holds the normalised config and the cell keys of the latest run.
A run first removes the temporary files that runs killed mid-write left in the sweep's folder and in ``cells/``
(:func:`otagym._io.remove_stale_temporaries`).

**Executors.** In-process (a progress bar), a ``ProcessPoolExecutor`` with the spawn context (``--workers N``), or
Ray tasks (``--ray [ADDRESS]``; ``ray.init()`` locally, with ``num_cpus=N`` when ``--workers N`` is given). Ray tasks
rather than Ray Tune: a cell is a short pure function with no intermediate results to report, no scheduler or search
algorithm to drive and its own content-addressed store; Tune would add a second experiment state and result folder
(``~/ray_results``) with a resume of its own, and would run cells through a trainable wrapper instead of the very
function the other two executors call. The driver writes every record (workers need no shared filesystem).

This module sits in ``experiments`` (it uses ``baselines``, and ``agents`` for trained models, lazily).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import functools
import hashlib
import json
import math
import os
import re
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from otagym import __version__
from otagym._io import atomic_write, file_sha256, remove_stale_temporaries, write_json
from otagym.schemes import SCHEMES
from otagym.validation import POSITIVE, Integer, Many, OneOf

__all__ = ["ConfigError", "Plan", "Outcome", "Records", "load_config", "plan", "cell_key", "run_cell", "run_cells",
           "batch_key", "batches", "run", "write_tables", "read_records", "record_problem", "record_checksum",
           "add_sweep_parser", "SWEEP_SCHEMES"]

#: The schemes a sweep can run: those whose cell is computed here (model A's matched-nu comparison).
SWEEP_SCHEMES = ("receive_scaling",)
#: The keys of a sweep config.
CONFIG_KEYS = ("name", "scheme", "scenarios", "rounds", "fidelity", "dataset", "data_dir", "policies", "nu", "seeds")
#: The number of seeds ``seeds: {start, count}`` (and ``otagym compare --seeds``) may ask for: each is a cell per
#: policy and nu, and the plan lists every cell before the first runs.
SEED_COUNT = Integer(1, 100_000)
FIDELITIES = ("analytic", "train")
DATASETS = ("digits", "mnist", "cifar10")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class ConfigError(ValueError):
    """A sweep config that cannot run; the message names the field: ``"<field> must be <allowed>; got <value>"``."""


# --- the config -------------------------------------------------------------------------------------------------------
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
        _load_model(str(resolved), file_sha256(resolved))
    except (OSError, ValueError) as err:
        raise ConfigError(f"{where}.model must be an SB3 model (PPO, SAC, TD3 or TRPO); got {path!r}: {err}") \
            from None
    return {"name": name, "model": str(resolved), "sha256": file_sha256(resolved),
            "env_kwargs": run_metadata(resolved).get("env_kwargs")}


def _policies(config: Mapping[str, Any], nus: list[float], scenario: Any) -> list[dict[str, Any]]:
    from baselines.compare import DEFAULT_POLICIES, POLICIES

    entries = config.get("policies", list(DEFAULT_POLICIES))
    allowed = (f"one of {sorted(POLICIES)}, NAME:PATH/TO/model.zip, {{policy: NAME, name: ..., params: {{...}}}} "
               "or {name: NAME, model: PATH}")
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
            if "params" in entry:
                _fail(f"{where}.params", "absent for a trained model (its settings travel in its run.json)",
                      entry["params"])
            out.append(_model_policy(where, entry.get("name"), entry["model"]))
            continue
        name = entry["policy"]
        if name not in POLICIES:
            _fail(f"{where}.policy" if isinstance(entries[i], dict) else where,
                  f"one of {sorted(POLICIES)} or NAME:PATH/TO/model.zip", name)
        spec = POLICIES[name]
        params = entry.get("params") or {}
        if not isinstance(params, dict):
            _fail(f"{where}.params", f"a mapping with keys among {list(spec.options)}", params)
        for key in params:
            if key not in spec.options:
                _fail(f"{where}.params", f"a mapping with keys among {list(spec.options)} ({name}'s settable "
                      "arguments)", key)
        params = {k: _spec(POSITIVE, f"{where}.params.{k}", v) for k, v in params.items()}
        if params:
            _trial(where, spec, params, nus, scenario)
        label = entry.get("name", name)
        if not isinstance(label, str) or not label:
            _fail(f"{where}.name", "a non-empty string", label)
        out.append({"name": label, "policy": name, "params": params})
    return _distinct("policies", out, "name", "distinct by name (give a repeated policy a name:)")


def _trial(where: str, spec: Any, params: dict[str, float], nus: list[float], scenario: Any) -> None:
    """Build the policy with ``params`` and reset it once, so that values it refuses fail now, not in a cell."""
    import numpy as np

    options = dict(params)
    value = np.array([options.pop(spec.param)]) if spec.param in options else (
        None if spec.param is None else np.array([spec.bracket[0]]))
    try:
        spec.build(np.array([nus[0]]), value, **options).reset(scenario, 0)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{where}.params: {err}") from None


def plan(config: Mapping[str, Any]) -> Plan:
    """Validate a whole sweep config and expand its grid; a :class:`ConfigError` names the first bad field.

    Keys: ``name`` (the results folder), ``scheme`` (one or a list; :data:`SWEEP_SCHEMES`), ``scenarios`` (presets,
    or mappings ``{preset, label, FIELD: VALUE}`` of scenario field overrides), ``rounds`` (T, one or a list; default
    the scenario's), ``fidelity`` (``analytic``/``train``, one or a list) with ``dataset``/``data_dir``,
    ``policies`` (names, ``NAME:PATH`` of trained models, ``{policy, name, params}`` or ``{name, model}``), ``nu``
    (one or a list, each > 0; default the scenario's ``nu_grid``), ``seeds`` (a list of integers >= 0, or
    ``{start, count}``).
    """
    if not isinstance(config, Mapping):
        _fail("config", f"a mapping of {list(CONFIG_KEYS)}", config)
    unknown = sorted(set(config) - set(CONFIG_KEYS))
    if unknown:
        _fail("config keys", f"among {list(CONFIG_KEYS)}", unknown[0] if len(unknown) == 1 else unknown)
    name = config.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        _fail("name", "a folder name (letters, digits, '.', '_', '-')", name)
    schemes = _axis("scheme", config.get("scheme", SWEEP_SCHEMES[0]), OneOf(SWEEP_SCHEMES))
    rounds = _axis("rounds", config["rounds"], Integer(1, 10**6)) if config.get("rounds") is not None else [None]
    fidelities = _axis("fidelity", config.get("fidelity", "analytic"), OneOf(FIDELITIES))
    dataset, data_dir = config.get("dataset"), config.get("data_dir")
    if "train" not in fidelities and (dataset is not None or data_dir is not None):
        _fail("dataset and data_dir", "absent unless fidelity includes 'train'", {"dataset": dataset,
                                                                                 "data_dir": data_dir})
    if "train" in fidelities:
        dataset = _spec(OneOf(DATASETS), "dataset", dataset or "digits")
        if dataset != "digits" and not (isinstance(data_dir, str) and Path(data_dir).expanduser().is_dir()):
            _fail("data_dir", f"an existing folder holding the {dataset} files (nothing is downloaded)", data_dir)
        data_dir = None if data_dir is None else str(Path(data_dir).expanduser().resolve())
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

    cells: list[dict[str, Any]] = []
    normalised: dict[str, Any] = {"name": name, "scheme": schemes, "rounds": rounds, "fidelity": fidelities,
                                  "dataset": dataset, "data_dir": data_dir, "seeds": seeds}
    for scheme in schemes:
        info = SCHEMES[scheme]
        scenarios = _scenarios(config, scheme)
        first = info.scenario(scenarios[0]["preset"], **scenarios[0]["overrides"])
        nus_in = config.get("nu", list(first.nu_grid))
        nus = list(_spec(Many(POSITIVE), "nu", nus_in) if not isinstance(nus_in, (int, float))
                   else [_spec(POSITIVE, "nu", nus_in)])
        if len(set(nus)) != len(nus):
            _fail("nu", "distinct values", nus)
        policies = _policies(config, nus, first)
        normalised.update(scenarios=scenarios, policies=policies, nu=nus)
        for scen in scenarios:
            for t in rounds:
                resolved = info.scenario(scen["preset"], **scen["overrides"], **({} if t is None else
                                                                               {"num_rounds": t}))
                for fidelity in fidelities:
                    for policy in policies:
                        for nu in nus:
                            for seed in seeds:
                                cell = {"scheme": scheme, "scenario": scen["label"], "preset": scen["preset"],
                                        "overrides": scen["overrides"], "rounds": resolved.num_rounds,
                                        "fidelity": fidelity, "policy": policy, "nu": float(nu), "seed": int(seed)}
                                if fidelity == "train":
                                    cell.update(dataset=dataset, data_dir=data_dir)
                                cells.append(cell)
    keys = tuple(cell_key(c) for c in cells)
    return Plan(name, normalised, tuple(cells), keys)


def _scenario_of(cell: Mapping[str, Any]) -> Any:
    return SCHEMES[cell["scheme"]].scenario(cell["preset"], **cell["overrides"], num_rounds=cell["rounds"])


def _content_sha256(data: Any) -> str:
    """SHA-256 (hex) of ``data`` as canonical JSON (sorted keys, no spaces, ``str`` for what JSON cannot hold)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def cell_key(cell: Mapping[str, Any]) -> str:
    """The content hash naming a cell's record: SHA-256 of the cell and of the scenario it resolves to."""
    return _content_sha256({"cell": cell, "scenario": _scenario_of(cell).to_dict()})[:24]


# --- one cell ---------------------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=16)
def _load_model(path: str, sha256: str) -> Any:
    from agents.policy import load_model

    return load_model(path)


@functools.lru_cache(maxsize=16)
def _training_scenario(scenario: Any, dataset: str, data_dir: str | None) -> Any:
    from baselines.evaluation import training_scenario

    return training_scenario(scenario, dataset, data_dir)


def _receive_scaling_cells(cells: list[Mapping[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The results of cells that differ only in nu and seed (:func:`batch_key`), computed as one batch
    (:func:`baselines.compare.evaluate_cells`: the same numbers as one at a time)."""
    from baselines.compare import POLICIES, PolicySpec, evaluate_cells

    cell = cells[0]
    scenario = _scenario_of(cell)
    train = cell["fidelity"] == "train"
    if train:
        scenario = _training_scenario(scenario, cell["dataset"], cell["data_dir"])
    policy = cell["policy"]
    options: dict[str, float] = {}
    if "model" in policy:
        found = file_sha256(Path(policy["model"]))
        if found != policy["sha256"]:
            raise RuntimeError(f"policy {policy['name']}: {policy['model']} on {socket.gethostname()} has SHA-256 "
                               f"{found[:12]}..., not the planned {policy['sha256'][:12]}... (a changed or different "
                               "file)")
        from agents.policy import AgentPolicy

        model, kw = _load_model(policy["model"], policy["sha256"]), policy["env_kwargs"]
        spec = PolicySpec(lambda nu, p: AgentPolicy(model, nu=nu, env_kwargs=kw))
    else:
        spec, options = POLICIES[policy["policy"]], dict(policy["params"])
    results = evaluate_cells(scenario, spec, [(c["nu"], c["seed"]) for c in cells], options=options,
                             fidelity=cell["fidelity"], dataset=cell.get("dataset") or "digits",
                             data_dir=cell.get("data_dir"))
    return [(result, scenario.to_dict()) for result in results]


#: The computation of a batch of cells (:func:`batch_key`-equal), by scheme.
CELLS: dict[str, Callable[[list[Mapping[str, Any]]], list[tuple[dict[str, Any], dict[str, Any]]]]] = {
    "receive_scaling": _receive_scaling_cells,
}
#: The most cells computed as one batch (one vector env). Batching changes no number, only the wall time: an episode
#: of 9 envs costs about what one of 1 does.
BATCH_CELLS = 64


def batch_key(cell: Mapping[str, Any]) -> str | None:
    """Cells with the same key may be computed as one batch: those of one analytic policy and scenario, differing in
    nu and seed. ``None`` for cells that run alone: the training fidelity (a batch would share one generator) and
    trained models (a network's forward pass over a batch may round differently from one over a single observation).
    """
    if cell["fidelity"] != "analytic" or "model" in cell["policy"]:
        return None
    return json.dumps({k: v for k, v in cell.items() if k not in ("nu", "seed")}, sort_keys=True, default=str)


def batches(tasks: list[tuple[str, dict[str, Any]]], size: int = BATCH_CELLS) -> list[list[tuple[str, dict[str, Any]]]]:
    """``tasks`` ((key, cell) pairs) as batches of at most ``size`` :func:`batch_key`-equal cells, in the order of
    their first cell."""
    groups: dict[Any, list[tuple[str, dict[str, Any]]]] = {}
    for i, (key, cell) in enumerate(tasks):
        groups.setdefault(batch_key(cell) or i, []).append((key, cell))
    return [g[i:i + size] for g in groups.values() for i in range(0, len(g), size)]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def run_cell(cell: Mapping[str, Any], key: str) -> dict[str, Any]:
    """Compute one cell into its record; an exception is recorded (type, message, traceback), never raised."""
    return run_cells([(key, dict(cell))])[0]


def run_cells(batch: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Compute a batch of :func:`batch_key`-equal cells ((key, cell) pairs) into their records, as one computation;
    an exception is recorded in every cell's record (type, message, traceback), never raised. Each record's
    ``wall_s`` is the batch's wall time divided by its cells."""
    start, started = time.perf_counter(), _now()
    records = [{"key": key, "cell": dict(cell), "seed": cell["seed"], "version": __version__,
                "host": socket.gethostname(), "pid": os.getpid(), "started": started} for key, cell in batch]
    try:
        outputs = CELLS[batch[0][1]["scheme"]]([cell for _, cell in batch])
        for record, (result, scenario) in zip(records, outputs):
            record.update(status="ok", result=result, scenario=scenario, error=None)
    except Exception as err:  # noqa: BLE001 - a failing cell is recorded and the sweep goes on
        error = {"type": type(err).__name__, "message": str(err), "traceback": traceback.format_exc()}
        for record in records:
            record.update(status="error", result=None, scenario=None, error=error)
    wall, finished = (time.perf_counter() - start) / len(batch), _now()
    for record in records:
        record.update(wall_s=wall, finished=finished)
    return records


def _lost_record(cell: Mapping[str, Any], key: str, err: BaseException) -> dict[str, Any]:
    """The record of a cell whose worker failed outside the cell (e.g. a Ray worker that died on every retry)."""
    return {"key": key, "cell": dict(cell), "seed": cell["seed"], "version": __version__, "host": None, "pid": None,
            "started": None, "status": "error", "result": None, "scenario": None,
            "error": {"type": type(err).__name__, "message": str(err).splitlines()[0] if str(err) else "",
                      "traceback": "".join(traceback.format_exception(type(err), err, err.__traceback__))},
            "wall_s": None, "finished": _now()}


# --- executors: each yields records as cells finish -----------------------------------------------------------------
#: Seconds between a pool worker's checks that its driver is still alive.
DRIVER_POLL_S = 0.5


def _worker_init(driver: int) -> None:
    """A pool worker leaves Ctrl-C to the driver, which stops it, and dies with the driver: a daemon thread exits the
    worker once its parent is no longer ``driver`` (a driver killed by SIGKILL or the OOM killer runs no cleanup)."""
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == driver:
            time.sleep(DRIVER_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="otagym-driver-watch", daemon=True).start()


def _in_process(work: list[list[tuple[str, dict[str, Any]]]]) -> Iterator[dict[str, Any]]:
    for batch in work:
        yield from run_cells(batch)


def _pool(work: list[list[tuple[str, dict[str, Any]]]], workers: int) -> Iterator[dict[str, Any]]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    executor = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
                                   initargs=(os.getpid(),))
    try:
        futures = [executor.submit(run_cells, batch) for batch in work]
        for future in as_completed(futures):
            yield from future.result()
    finally:
        processes = list((getattr(executor, "_processes", None) or {}).values())
        executor.shutdown(wait=False, cancel_futures=True)
        for process in processes:  # batches still running are abandoned (they have no record yet)
            with contextlib.suppress(Exception):
                process.terminate()


def _ray(work: list[list[tuple[str, dict[str, Any]]]], address: str | None,
         num_cpus: int | None) -> Iterator[dict[str, Any]]:
    import logging

    import ray

    started = not ray.is_initialized()
    if started:
        if address:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
        else:
            ray.init(num_cpus=num_cpus, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    # A worker that dies is retried by Ray (max_retries); a cell's own exception never leaves run_cells.
    remote = ray.remote(num_cpus=1, max_retries=3)(run_cells)
    window = max(4, 2 * int(ray.cluster_resources().get("CPU", 1)))
    pending: dict[Any, list[tuple[str, dict[str, Any]]]] = {}
    queue = iter(work)
    try:
        while True:
            for batch in queue:
                pending[remote.remote(batch)] = batch
                if len(pending) >= window:
                    break
            if not pending:
                return
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                batch = pending.pop(ref)
                try:
                    yield from ray.get(ref)
                except ray.exceptions.RayError as err:
                    for key, cell in batch:
                        yield _lost_record(cell, key, err)
    finally:
        for ref in pending:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        if started:
            ray.shutdown()


# --- the store --------------------------------------------------------------------------------------------------------
#: Result fields that hold text (the name of a policy's calibrated parameter); all others hold numbers.
TEXT_RESULTS = ("param",)
#: Result fields that are non-negative wherever a record has them (privacy loss, cost, leakage).
NON_NEGATIVE = ("rdp", "epsilon", "cost_mean", "leakage", "equal_alloc_leakage", "optimal_leakage")


def record_checksum(record: Mapping[str, Any]) -> str:
    """SHA-256 of a record's content (all but its ``checksum``), as canonical JSON: what the driver stores in the
    record and what a reader recomputes, so that a record edited or mixed up after it was written is not trusted."""
    return _content_sha256({k: v for k, v in record.items() if k != "checksum"})


def record_problem(record: Any, key: str) -> str | None:
    """Why ``record`` cannot be trusted as the record of cell ``key``, or None: not an object, a missing field, a
    status other than ok/error, a cell whose content hash is not ``key`` (another cell's record), an ``ok`` result that
    is not an object of finite numbers (privacy loss, cost and leakage >= 0), or a checksum that does not match."""
    if not isinstance(record, dict):
        return f"not a record (a JSON {type(record).__name__})"
    missing = [k for k in ("key", "cell", "status", "result", "error", "checksum") if k not in record]
    if missing:
        return f"no {', '.join(missing)}"
    if record["status"] not in ("ok", "error"):
        return f"status {record['status']!r} is neither 'ok' nor 'error'"
    try:
        own = cell_key(record["cell"])
    except Exception as err:  # noqa: BLE001 - any malformed cell is a bad record
        return f"its cell is malformed ({type(err).__name__}: {err})"
    if record["key"] != key or own != key:
        return f"it is the record of another cell ({own})"
    if record["status"] == "ok":
        result = record["result"]
        if not isinstance(result, dict):
            return "an ok record without a result object"
        for name, value in result.items():
            bad = None if name in TEXT_RESULTS and isinstance(value, str) else _bad_number(value)
            if bad:
                return f"result {name} {bad}"
            if name in NON_NEGATIVE and value is not None and not isinstance(value, bool) and value < 0:
                return f"result {name} = {value} < 0"
    if record["checksum"] != record_checksum(record):
        return "its checksum does not match its content (edited after it was written)"
    return None


def _bad_number(value: Any) -> str | None:
    """What is wrong with a result value (None, a bool, a finite number, or a list/object of them), or None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return None if math.isfinite(value) else f"= {value} is not finite"
    if isinstance(value, list):
        return next((bad for bad in map(_bad_number, value) if bad), None)
    if isinstance(value, dict):
        return next((bad for bad in map(_bad_number, value.values()) if bad), None)
    return f"= {value!r} is not a number"


@dataclass
class Records:
    """The records of a sweep's cells found on disk: ``valid`` ones by key, and for each record that exists but cannot
    be trusted, why (``invalid``: key -> reason); both are recomputed by a run like a missing one."""

    valid: dict[str, dict[str, Any]] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)


def read_records(sweep_dir: Path, keys: Iterable[str]) -> Records:
    """The records of ``keys`` in ``sweep_dir/cells``, each checked by :func:`record_problem` (a missing one is left
    out; an unreadable or untrustworthy one is listed with its reason)."""
    out = Records()
    for key in keys:
        path = Path(sweep_dir) / "cells" / f"{key}.json"
        try:
            record = json.loads(path.read_text())
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as err:
            out.invalid[key] = f"unreadable ({type(err).__name__}: {err})"
            continue
        problem = record_problem(record, key)
        if problem:
            out.invalid[key] = problem
        else:
            out.valid[key] = record
    return out


def _flat(record: Mapping[str, Any]) -> dict[str, Any]:
    """One row of ``cells.csv``: the cell's axes, its status and the scalar results."""
    cell, result = record["cell"], record.get("result") or {}
    policy = cell["policy"]
    row = {"key": record["key"], "status": record["status"], "scheme": cell["scheme"], "scenario": cell["scenario"],
           "rounds": cell["rounds"], "fidelity": cell["fidelity"], "policy": policy["name"],
           "policy_class": policy.get("policy", "model"),
           "params": json.dumps(policy.get("params", {}), sort_keys=True), "model": policy.get("model"),
           "nu": cell["nu"], "seed": cell["seed"]}
    for k in ("rdp", "epsilon", "cost_mean", "leakage", "equal_alloc_leakage", "optimal_leakage", "score", "matched",
              "param", "param_value", "calibrated", "accuracy"):
        row[k] = result.get(k)
    error = record.get("error") or {}
    row.update(wall_s=record.get("wall_s"), version=record.get("version"), host=record.get("host"),
               error=(f"{error['type']}: {error['message']}".splitlines()[0] if error else None))
    return row


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    import csv

    with atomic_write(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_tables(p: Plan, sweep_dir: Path, records: Mapping[str, dict[str, Any]] | None = None) -> list[Path]:
    """Rebuild ``cells.csv`` (+ ``cells.parquet`` with pyarrow) and ``summary.csv`` from the records of ``p``'s cells,
    in grid order, each written atomically. Cells without a record are left out."""
    from baselines.compare import summarize

    sweep_dir = Path(sweep_dir)
    records = read_records(sweep_dir, p.keys).valid if records is None else records
    present = [records[k] for k in p.keys if k in records]
    if not present:
        return []
    rows = [_flat(r) for r in present]
    paths = [_write_csv(sweep_dir / "cells.csv", rows)]
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        pass
    else:
        with atomic_write(sweep_dir / "cells.parquet", "wb") as fh:
            pq.write_table(pa.Table.from_pylist(rows), fh)
        paths.append(sweep_dir / "cells.parquet")
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in present:
        if r["status"] == "ok":
            c = r["cell"]
            groups.setdefault((c["scheme"], c["scenario"], c["rounds"], c["fidelity"]), []).append(
                {"policy": c["policy"]["name"], "nu": c["nu"], "seed": c["seed"], **r["result"]})
    summary = [{"scheme": g[0], "scenario": g[1], "rounds": g[2], "fidelity": g[3], **row}
               for g, cells in groups.items() for row in summarize(cells)]
    if summary:
        scalar = [{k: v for k, v in row.items() if not isinstance(v, list)} for row in summary]
        paths.append(_write_csv(sweep_dir / "summary.csv", scalar))
    return paths


# --- the driver -------------------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    """What a run did: cells computed now, skipped (finished earlier), failed now, records found invalid (key ->
    reason; recomputed), and why it stopped early if it did (``"interrupted"`` by Ctrl-C, a worker process that
    died, or ``"cannot write PATH: REASON"``)."""

    total: int
    skipped: int = 0
    computed: int = 0
    failed: list[str] = field(default_factory=list)
    stopped: str | None = None
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)
    tables: list[Path] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def complete(self) -> bool:
        """Every cell has an ``ok`` record."""
        return self.stopped is None and not self.failed and len(self.records) == self.total


def run(p: Plan, sweep_dir: str | os.PathLike, *, workers: int | None = None, ray: str | bool | None = None,
        progress: bool = True, log: Callable[[str], None] | None = print) -> Outcome:
    """Run the cells of ``p`` that have no ``ok`` record in ``sweep_dir``, writing each record as it finishes.

    ``workers``: a process pool of that size (spawn), or with ``ray`` the local Ray's ``num_cpus``. ``ray``: ``True``
    (or ``"local"``) starts a local Ray (``ray.init()``), a string is a cluster address (``"auto"``, ``"ray://..."``);
    an already initialised Ray is used as it is. Ctrl-C stops the run (finished cells are kept; the
    outcome says ``stopped="interrupted"``); the tables are rebuilt from the records in every case.
    """
    from tqdm.auto import tqdm

    start = time.perf_counter()
    sweep_dir = Path(sweep_dir)
    cells_dir = sweep_dir / "cells"
    cells_dir.mkdir(parents=True, exist_ok=True)
    for folder in (sweep_dir, cells_dir):  # every folder this run writes into: what killed runs left mid-write
        remove_stale_temporaries(folder)
    write_json(sweep_dir / "sweep.json", {"name": p.name, "config": p.config, "version": __version__,
                                          "cells": len(p.cells), "keys": list(p.keys), "written": _now()})
    found = read_records(sweep_dir, p.keys)
    records = {k: r for k, r in found.valid.items() if r["status"] == "ok"}
    outcome = Outcome(total=len(p.cells), skipped=len(records), invalid=found.invalid)
    tasks = [(k, c) for k, c in zip(p.keys, p.cells) if k not in records]
    parallel = 2 * (workers or 1) if (ray or (workers and workers > 1)) else 1  # enough batches to keep them busy
    work = batches(tasks, max(1, min(BATCH_CELLS, -(-len(tasks) // parallel))))
    if not tasks:
        where, source = "", iter(())
    elif ray:
        where = "on Ray" + ("" if ray in (True, "local") else f" at {ray}")
        source = _ray(work, None if ray in (True, "local") else str(ray), workers)
    elif workers and workers > 1:
        where, source = f"on {workers} worker processes", _pool(work, workers)
    else:
        where, source = "in-process", _in_process(work)
    if log:
        log(f"sweep {p.name}: {len(p.cells)} cells, {len(records)} already done, {len(tasks)} to run"
            f"{' ' + where if where else ''}; records in {cells_dir}")
        for key, why in found.invalid.items():
            log(f"  recomputing cells/{key}.json: {why}")
    bar = tqdm(total=len(tasks), desc=f"sweep {p.name}", disable=not progress or not tasks, unit="cell")
    try:
        with contextlib.closing(source) if hasattr(source, "close") else contextlib.nullcontext():
            for record in source:
                write_json(cells_dir / f"{record['key']}.json", {**record, "checksum": record_checksum(record)})
                outcome.computed += 1
                if record["status"] == "ok":
                    records[record["key"]] = record
                else:
                    outcome.failed.append(record["key"])
                bar.update(1)
                if outcome.failed:
                    bar.set_postfix(failed=len(outcome.failed))
    except KeyboardInterrupt:
        outcome.stopped = "interrupted"
    except OSError as err:  # a full disk, a read-only or vanished folder: stop, keeping every record written
        if err.filename is None:
            raise
        outcome.stopped = f"cannot write {err.filename}: {err.strerror}"
    except Exception as err:  # BrokenProcessPool: a worker process died; its cell and the queued ones have no record
        from concurrent.futures.process import BrokenProcessPool

        if not isinstance(err, BrokenProcessPool):
            raise
        outcome.stopped = f"a worker process died ({err})"
    finally:
        bar.close()
    outcome.records = records
    try:
        outcome.tables = write_tables(p, sweep_dir, {**read_records(sweep_dir, p.keys).valid, **records})
    except OSError as err:
        if err.filename is None:
            raise
        outcome.stopped = outcome.stopped or f"cannot write {err.filename}: {err.strerror}"
    outcome.wall_s = time.perf_counter() - start
    return outcome


def report(outcome: Outcome, sweep_dir: Path) -> str:
    """What a person reads after a run: counts, failures with their first line, and what to do next."""
    lines = [f"{outcome.computed} cells computed, {outcome.skipped} reused, {len(outcome.failed)} failed, "
             f"{outcome.total - len(outcome.records) - len(outcome.failed)} not run, in {outcome.wall_s:.1f} s"]
    for key in outcome.failed[:10]:
        rec = json.loads((Path(sweep_dir) / "cells" / f"{key}.json").read_text())
        c, e = rec["cell"], rec["error"]
        lines.append(f"  failed: {c['policy']['name']} nu={c['nu']:g} seed={c['seed']} ({c['scenario']}): "
                     f"{e['type']}: {e['message'].splitlines()[0] if e['message'] else ''} "
                     f"[traceback in cells/{key}.json]")
    if len(outcome.failed) > 10:
        lines.append(f"  ... and {len(outcome.failed) - 10} more (status=error in cells.csv)")
    others = sorted({r.get("version") for r in outcome.records.values()} - {__version__}, key=str)
    if others:
        lines.append(f"note: some records were computed by otagym {', '.join(map(str, others))} (this is "
                     f"{__version__}); delete them from cells/ to recompute them")
    if outcome.stopped:
        lines.append(f"stopped: {outcome.stopped}; finished cells are stored, rerun the same command to resume")
    elif outcome.failed:
        lines.append("rerun the same command to retry the failed cells (finished ones are skipped)")
    if outcome.tables:
        lines.append("wrote " + ", ".join(str(t) for t in outcome.tables))
    return "\n".join(lines)


def exit_code(outcome: Outcome) -> int:
    """0: every cell done; 130: interrupted; 1: failed cells or a dead worker."""
    if outcome.stopped == "interrupted":
        return 130
    return 0 if outcome.complete else 1


# --- the command line -------------------------------------------------------------------------------------------------
def add_executor_options(p: argparse.ArgumentParser) -> None:
    """``--workers N`` and ``--ray [ADDRESS]``, shared by ``sweep`` and ``compare``."""
    from experiments.argtypes import positive_int

    p.add_argument("--workers", type=positive_int, default=None,
                   help="run cells on N local processes (with --ray: the local Ray's num_cpus)")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run cells as Ray tasks: a local Ray (ray.init()) without ADDRESS, else the cluster at "
                        "ADDRESS ('auto' or 'ray://HOST:10001'); needs the ray extra")


def check_ray(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse ``--ray`` before any work when Ray is not installed, and ``--workers`` with a cluster address."""
    if args.ray is None:
        return
    try:
        import ray  # noqa: F401
    except ImportError:
        parser.error("--ray needs Ray, an optional extra: pip install -c constraints-rllib.txt -e '.[ray]'")
    if args.ray != "local" and args.workers is not None:
        parser.error("--workers sets the CPUs of a local Ray; with --ray ADDRESS the cluster has its own")


def _sweep(args: argparse.Namespace) -> int:
    try:
        p = plan({**load_config(args.config), **({"name": args.name} if args.name else {})})
    except ConfigError as err:
        print(f"otagym sweep: error: {err}", file=sys.stderr)
        return 2
    sweep_dir = Path(args.out) / p.name
    outcome = run(p, sweep_dir, workers=args.workers, ray=args.ray, progress=not args.no_progress)
    print(report(outcome, sweep_dir))
    return exit_code(outcome)


def add_sweep_parser(sub: argparse._SubParsersAction) -> None:
    from experiments.argtypes import writable_dir

    p = sub.add_parser("sweep", help="run a grid of cells declared in a YAML file (resumable; pool or Ray)")
    p.add_argument("config", help="the sweep's YAML file (see examples/sweep_paper.yaml)")
    p.add_argument("--out", type=writable_dir, default="results",
                   help="results folder; the sweep writes OUT/NAME/ (cells/<key>.json, cells.csv, summary.csv)")
    p.add_argument("--name", default=None, help="override the config's name (the folder under --out)")
    add_executor_options(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_sweep, check=check_ray)
