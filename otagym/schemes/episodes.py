"""The episode bookkeeping every scheme's core shares: a reset restarts rows of its state's running arrays."""

from __future__ import annotations

from numpy.typing import NDArray

__all__ = ["restart_rows"]


def restart_rows(rows: NDArray, *running: NDArray) -> None:
    """Zero the rows ``rows`` (bool (N,), the episodes that start) of each running array (N, ...) in place: their
    round counts, sums and last values."""
    for array in running:
        array[rows] = 0
