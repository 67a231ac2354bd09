"""``otagym sweep CONFIG.yaml``: a grid of comparison cells declared in a file, run in-process, on a local process
pool or on Ray, kept as one record per cell so that a rerun resumes and a crash loses no finished cell.

**Cells** (:mod:`~otagym.cli.sweep.cells`). A sweep is the product scheme x scenario x rounds x fidelity x policy x
nu x seed (:mod:`~otagym.cli.sweep.config`: the YAML file, its validation and the :class:`Plan`; nu only for a scheme
with a budget axis); each element is a cell, a JSON-able dict, computed into a record by its scheme's sweep
(:func:`baselines.sweep.scheme_sweep`: every registered scheme has one in ``baselines/<scheme>/sweep.py``, which says
its policies, its axes and what a cell computes). A cell's numbers are a pure function of the cell: its channels come
from its seed, and nothing depends on which other cells run beside it or where. Cells of one analytic policy and
scenario that differ only in nu and seed (:func:`batch_key`) are computed as one batch (:func:`run_cells`; receive
scaling: in one vector env, :func:`baselines.receive_scaling.compare.evaluate_cells`), which gives the same bits as
one at a time (tested) in a fraction of the time. So in-process, ``--workers N``, ``--ray`` and a resumed run give the
same numbers.

**Records** (:mod:`~otagym.cli.sweep.records`). ``<out>/<name>/cells/<key>.json``, where ``key`` is a content hash
of the cell and of the scenario it resolves to (a preset changed in the code is a new cell). Each record holds the
cell (its config and seed), the package version, the resolved scenario, the result or the error with its traceback,
the host and the wall time, and is written atomically by the driver (:mod:`~otagym.cli.sweep.driver`) as soon as the
cell finishes. A rerun skips cells with an ``ok`` record (resume) and retries those that failed. ``cells.csv`` (and
``cells.parquet`` when pyarrow is installed) and ``summary.csv`` (mean and 95% CI over seeds, each scheme's
:meth:`baselines.sweep.SchemeSweep.summarize`) are rebuilt from the records after every run, interrupted ones
included (:mod:`~otagym.cli.sweep.tables`). ``sweep.json`` holds the normalised config (each scheme's scenarios,
policies and budgets under ``schemes``) and the cell keys of the latest run. A run first removes the temporary
files that runs killed mid-write left in the sweep's folder and in ``cells/``
(:func:`otagym._io.remove_stale_temporaries`).

**Executors** (:mod:`~otagym.cli.sweep.executors`). In-process (a progress bar), a ``ProcessPoolExecutor`` with the
spawn context (``--workers N``), or Ray tasks (``--ray [ADDRESS]``); the driver writes every record (workers need no
shared filesystem). The command line's parser is :mod:`~otagym.cli.sweep.command`.

This package sits in ``otagym.cli`` (it uses ``baselines``, and ``agents`` for trained models, lazily).
"""

from otagym.cli.sweep.cells import BATCH_CELLS, batch_key, batches, cell_key, run_cell, run_cells
from otagym.cli.sweep.command import add_executor_options, add_sweep_parser, check_ray
from otagym.cli.sweep.config import (CONFIG_KEYS, DATASETS, FIDELITIES, SEED_COUNT, SWEEP_SCHEMES, ConfigError, Plan,
                                     load_config, plan)
from otagym.cli.sweep.driver import Outcome, exit_code, report, run
from otagym.cli.sweep.executors import DRIVER_POLL_S
from otagym.cli.sweep.records import NON_NEGATIVE, TEXT_RESULTS, Records, read_records, record_checksum, record_problem
from otagym.cli.sweep.tables import write_tables

__all__ = ["ConfigError", "Plan", "Outcome", "Records", "load_config", "plan", "cell_key", "run_cell", "run_cells",
           "batch_key", "batches", "run", "report", "exit_code", "write_tables", "read_records", "record_problem",
           "record_checksum", "add_sweep_parser", "add_executor_options", "check_ray", "SWEEP_SCHEMES", "CONFIG_KEYS",
           "SEED_COUNT", "FIDELITIES", "DATASETS", "BATCH_CELLS", "DRIVER_POLL_S", "TEXT_RESULTS",
           "NON_NEGATIVE"]
