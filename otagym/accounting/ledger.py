"""The running RDP ledger (:class:`RDPLedger`): a thin, batched shell that buffers each round's noise multipliers and
folds them into running totals, by the series (:func:`~otagym.accounting.sgm.rdp_sgm`) or from tabulated curves
(:mod:`otagym.accounting.tables`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otagym.accounting.conversion import rdp_to_dp
from otagym.accounting.orders import DEFAULT_ORDERS, ORDERS, _validate_q_sigma
from otagym.accounting.sgm import rdp_sgm
from otagym.accounting.tables import _LedgerTables

__all__ = ["RDPLedger"]

#: A ledger tabulates its curves from this many elements (envs x device classes) on, if it has at most
#: :data:`~otagym.accounting.tables._TABLE_MAX_RATES` distinct sampling rates in (0, 1) and only integer orders; a
#: smaller one sums eq. (9) until the series has cost about what a table's build does (0.1-1 s per sampling rate, once
#: per process), then tabulates too (rent, then buy: never more than about twice the cheaper of the two). Measured at
#: DEFAULT_ORDERS, the series costs a round about (5 + elements) x 11 us, counted here as 5 + elements units up to
#: _TABLE_AFTER: a single env's ledger (one element per device class; 1 on the paper's presets) tabulates after 5,000
#: rounds (10 episodes of T = 500).
_TABLE_MIN_ELEMENTS = 512
_TABLE_AFTER = 30_000
_SERIES_ROUND_UNITS = 5
#: Rounds per evaluation of the ledger (one :func:`~otagym.accounting.sgm.rdp_sgm` call each), fewer where their
#: evaluation would exceed _LEDGER_EVAL_BYTES: the accounting evaluates its elements in sub-batches of similar noise, so
#: a round's RDP can differ in its last bits with the rounds evaluated beside it, and a ledger's results would depend on
#: its buffering.
_LEDGER_BLOCK = 128
#: Memory budgets (bytes): one block's evaluation (~ 4 arrays of elements x orders), and the buffer of noise
#: multipliers beyond one block.
_LEDGER_EVAL_BYTES = 2**30
_LEDGER_BUFFER_BYTES = 2**26


def _ledger_sizes(batch: int, n_orders: int, chunk: int) -> tuple[int, int]:
    """``(block, capacity)`` of a ledger over ``batch`` elements: rounds per evaluation, and rounds buffered (``chunk``
    rounded up to whole blocks, within the budgets; at least one block, of at least one round)."""
    round_bytes = 8 * max(batch, 1)
    block = int(max(1, min(_LEDGER_BLOCK, _LEDGER_EVAL_BYTES // (round_bytes * (1 + 4 * n_orders)))))
    blocks = max(1, min(-(-chunk // block), _LEDGER_BUFFER_BYTES // (round_bytes * block)))
    return block, blocks * block


def _refuse_invalid_noise(sigma: NDArray) -> None:
    """ValueError naming the first few noise multipliers that are not finite and >= 0, if any."""
    bad = ~((sigma >= 0) & (sigma < np.inf))
    if bad.any():
        raise ValueError("noise_multiplier must be finite and >= 0 (noise std / L2 sensitivity, in [0, inf)); got "
                         f"{sigma[bad].ravel()[:3]}")


class RDPLedger:
    """Running RDP totals at a grid of orders, batched, composing a different noise multiplier every round.

    A ledger with integer orders and at most :data:`~otagym.accounting.tables._TABLE_MAX_RATES` distinct sampling rates
    in (0, 1) adds each round at once from tables of the RDP curves (:class:`~otagym.accounting.tables._CurveTable`,
    built once per sampling rate and order grid in a process, 0.1-1.5 s): a few multiply-adds per element and order,
    each value a certified upper bound on eq. (9), within 1e-12 of it for q in [1e-3, 0.9] (tested against mpmath). A
    large one (at least :data:`_TABLE_MIN_ELEMENTS` elements) does so from its first round; a smaller one sums the
    series until that has cost about a table's build (:data:`_TABLE_AFTER`), then tabulates. Any other ledger sums the
    series (:func:`~otagym.accounting.sgm.rdp_sgm`):

    ``record`` is O(1): it writes the round's noise multipliers into a buffer, grown as rounds arrive up to ``chunk``
    rounds; buffered rounds are folded into the totals in blocks of :data:`_LEDGER_BLOCK` consecutive rounds (one
    vectorised :func:`~otagym.accounting.sgm.rdp_sgm` call each; fewer where a block's evaluation would exceed
    :data:`_LEDGER_EVAL_BYTES`) when the buffer is full, and the rest when ``rdp`` is read or rows are reset. The
    blocks do not depend on ``chunk``, so neither do the results, to the bit. Memory: the totals, O(batch x orders),
    and the buffer, O(batch x min(rounds, chunk)) within :data:`_LEDGER_BUFFER_BYTES` (at least one block), whatever
    the number of rounds -- no history list (see :func:`_ledger_sizes`).

    Args:
        q: sampling rates, shape ``batch_shape`` (e.g. ``(n_envs, n_classes)``), in [0, 1].
        orders: RDP orders (> 1) kept by the ledger.
        chunk: rounds buffered before folding (at least one block); it changes when the work is done, not the results.
    """

    def __init__(self, q: ArrayLike, orders: Sequence[float] = DEFAULT_ORDERS, chunk: int = 128) -> None:
        self.q = np.asarray(q, dtype=float)
        _validate_q_sigma(self.q, np.ones(()))
        self.orders = np.asarray(ORDERS("orders", orders), dtype=float)
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1; got {chunk}")
        self._block, self._capacity = _ledger_sizes(self.q.size, self.orders.size, chunk)
        self._totals = np.zeros(self.q.shape + (self.orders.size,))
        self._by_element = self._totals.reshape(self.q.size, self.orders.size)  # a view: the totals change in place
        self._pending = np.empty((0,) + self.q.shape)  # grown on demand up to _capacity rounds (the series only)
        self._n = 0
        self._tables: _LedgerTables | None = None
        # units of series work left before the ledger tabulates (None: it never will)
        self._series_left: int | None = _TABLE_AFTER if _LedgerTables.possible(self.q, self.orders) else None
        if self._series_left is not None and self.q.size >= _TABLE_MIN_ELEMENTS:
            self._tabulate()

    def _tabulate(self) -> None:
        """Move to tables from the next round on (the buffered rounds are folded by the series first)."""
        self._fold()
        self._tables = _LedgerTables.build(self.q, self.orders)
        self._series_left = None

    def record(self, noise_multiplier: ArrayLike) -> None:
        """Compose one round: ``noise_multiplier`` (noise std / L2 sensitivity, finite and >= 0) broadcastable to the
        ledger's batch shape."""
        sigma = np.asarray(noise_multiplier, dtype=float)
        if self._series_left is not None:
            self._series_left -= _SERIES_ROUND_UNITS + self.q.size
            if self._series_left < 0:
                self._tabulate()
        if self._tables is not None:
            flat = (sigma if sigma.shape == self.q.shape else np.broadcast_to(sigma, self.q.shape)).reshape(-1)
            if not self._tables.add(self._by_element, flat):  # the kernel checks the noise multipliers first
                _refuse_invalid_noise(sigma)
            return
        _refuse_invalid_noise(sigma)
        if self._n == self._capacity:
            self._fold()
        if self._n == self._pending.shape[0]:
            grown = np.empty((min(self._capacity, max(1, 2 * self._n)),) + self.q.shape)
            grown[: self._n] = self._pending[: self._n]
            self._pending = grown
        self._pending[self._n] = sigma
        self._n += 1

    def _fold(self) -> None:
        """Fold the buffered rounds into the totals, block by block, in order (the capacity is whole blocks, so
        only a read or a reset folds a partial one, whatever ``chunk``)."""
        for start in range(0, self._n, self._block):
            block = self._pending[start:min(start + self._block, self._n)]
            self._totals += rdp_sgm(q=self.q, noise_multiplier=block, orders=self.orders).sum(axis=0)
        self._n = 0

    @property
    def rdp(self) -> NDArray:
        """Total RDP (nats) per batch element and order, shape ``batch_shape + (len(orders),)``."""
        self._fold()
        return self._totals

    def epsilon(self, delta: float) -> tuple[NDArray, NDArray]:
        """(eps, best order) of the totals at ``delta`` via :func:`~otagym.accounting.conversion.rdp_to_dp`."""
        return rdp_to_dp(self.rdp, self.orders, delta)

    def reset(self, mask: ArrayLike | None = None) -> None:
        """Zero the totals of the batch elements where ``mask`` is True (all, and the pending rounds, if None).

        With a mask the pending rounds are folded first, as a read would: the other elements keep them."""
        if mask is None:
            self._totals.fill(0.0)
            self._n = 0
        else:
            self._fold()
            self._totals[np.asarray(mask, dtype=bool)] = 0.0
