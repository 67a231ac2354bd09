"""Where a sweep's cells run; each executor yields the cells' records as they finish, and the driver writes them
(workers need no shared filesystem).

In-process (:func:`in_process`), a ``ProcessPoolExecutor`` with the spawn context (:func:`process_pool`,
``--workers N``), or Ray tasks (:func:`ray_tasks`, ``--ray [ADDRESS]``; ``ray.init()`` locally, with ``num_cpus=N``
when ``--workers N`` is given). Ray tasks rather than Ray Tune: a cell is a short pure function with no intermediate
results to report, no scheduler or search algorithm to drive and its own content-addressed store; Tune would add a
second experiment state and result folder (``~/ray_results``) with a resume of its own, and would run cells through
a trainable wrapper instead of the very function the other two executors call
(:func:`~otagym.cli.sweep.cells.run_cells`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Any, Iterator

from otagym.cli.sweep.cells import lost_record, run_cells

__all__ = ["DRIVER_POLL_S", "in_process", "process_pool", "ray_tasks"]

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


def in_process(work: list[list[tuple[str, dict[str, Any]]]]) -> Iterator[dict[str, Any]]:
    """The records of ``work`` (batches of (key, cell) pairs), computed one batch after another in this process."""
    for batch in work:
        yield from run_cells(batch)


def process_pool(work: list[list[tuple[str, dict[str, Any]]]], workers: int) -> Iterator[dict[str, Any]]:
    """The records of ``work``, each batch a task of a pool of ``workers`` spawned processes, as batches finish;
    closing the generator (Ctrl-C, a failed write) terminates the batches still running."""
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


def ray_tasks(work: list[list[tuple[str, dict[str, Any]]]], address: str | None,
              num_cpus: int | None) -> Iterator[dict[str, Any]]:
    """The records of ``work``, each batch a Ray task (at most max(4, twice the cluster CPUs) in flight), as batches
    finish: on the cluster at ``address``, else on a local Ray of ``num_cpus`` (one already initialised is used as
    it is, and left running). A batch whose worker died on every retry gets :func:`~otagym.cli.sweep.cells.lost_record`
    records."""
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
                        yield lost_record(cell, key, err)
    finally:
        for ref in pending:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        if started:
            ray.shutdown()

