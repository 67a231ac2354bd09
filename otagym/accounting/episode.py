"""The end-of-episode (eps, delta) report of a batch of episodes, from the rounds' mechanisms as a scheme's core gives
them: the RDP summed at ``dp_orders`` and converted by eq. (6) (:func:`~otagym.accounting.rdp_to_dp`), and with
``accountant="pld"`` the rounds composed as a privacy loss distribution (:class:`~otagym.accounting.PLDLedger`). Every
scheme's core reports through it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otagym.accounting.conversion import rdp_to_dp
from otagym.accounting.ledger import RDPLedger
from otagym.accounting.pld import PLDLedger

__all__ = ["EpisodeEpsilon"]


class EpisodeEpsilon:
    """The (eps, delta) report of N episodes of some elements each (clients, examples: ``shape`` = (N, ...)).

    Args:
        shape: the elements of every round, rows (episodes) first.
        dp_orders: the RDP orders of ``dp_epsilon``; ``None``: no RDP report.
        accountant: ``"rdp"``, or ``"pld"`` for ``dp_epsilon_pld`` too.
        sampling_rate: each element's fixed sampling rate (broadcast to ``shape``) when every round is a
            Poisson-subsampled Gaussian mechanism of that rate (:meth:`record_gaussian`): its RDP is then kept by an
            :class:`~otagym.accounting.RDPLedger` (tabulated for large batches); ``None``: rounds of any mechanism
            (:meth:`record`).
    """

    def __init__(self, shape: tuple[int, ...], dp_orders: Sequence[float] | None, accountant: str,
                 sampling_rate: ArrayLike | None = None) -> None:
        self.orders = None if dp_orders is None else np.asarray(dp_orders, dtype=float)
        fixed = None if sampling_rate is None else np.broadcast_to(np.asarray(sampling_rate, dtype=float), shape)
        self.ledger = None if fixed is None or dp_orders is None else RDPLedger(fixed, orders=dp_orders)
        self.rdp_sum = None if self.orders is None or fixed is not None else np.zeros((*shape, self.orders.size))
        self.pld = PLDLedger(np.ones(shape) if fixed is None else fixed) if accountant == "pld" else None
        #: The ledgers' ``record`` that :meth:`record_gaussian` calls (bound once: it runs every round of every env)
        self._gaussian_records = tuple(ledger.record for ledger in (self.ledger, self.pld) if ledger is not None)

    def reset(self, rows: ArrayLike | None = None) -> None:
        """Start new episodes in ``rows`` (a boolean mask), or in every row (None)."""
        if self.rdp_sum is not None:
            self.rdp_sum[slice(None) if rows is None else rows] = 0.0
        for ledger in (self.ledger, self.pld):
            if ledger is not None:
                ledger.reset(rows)

    def record(self, rdp: Callable[[NDArray], NDArray], q: ArrayLike, noise_multiplier: ArrayLike) -> None:
        """One round: ``rdp(orders)`` its RDP at the report's orders (called only if there are any; shape + orders),
        and the sampling rate and noise multiplier of its Gaussian mechanism for the PLD (``shape``)."""
        if self.rdp_sum is not None:
            self.rdp_sum += rdp(self.orders)
        if self.pld is not None:
            self.pld.record(noise_multiplier, q=q)

    def record_gaussian(self, noise_multiplier: ArrayLike) -> None:
        """One round of every element's subsampled Gaussian mechanism at its ``sampling_rate``: its noise multipliers
        (``shape``)."""
        for record in self._gaussian_records:
            record(noise_multiplier)

    def report(self, delta: float, terminated: NDArray) -> dict[str, NDArray]:
        """``dp_epsilon``, ``dp_order``, and ``dp_epsilon_pld`` with ``dp_epsilon_pld_from_rdp`` (True where the RDP
        ledger's ε was the smaller, so ``dp_epsilon_pld`` is it) where they are kept, when an episode ended
        (``terminated``; the PLD of the ended rows only); empty otherwise."""
        info: dict[str, NDArray] = {}
        if not terminated.any():
            return info
        if self.rdp_sum is not None:
            info["dp_epsilon"], info["dp_order"] = rdp_to_dp(self.rdp_sum, self.orders, delta)
        elif self.ledger is not None:
            info["dp_epsilon"], info["dp_order"] = self.ledger.epsilon(delta)
        if self.pld is not None:
            account = self.pld.account(delta, rows=np.flatnonzero(terminated))
            info["dp_epsilon_pld"], info["dp_epsilon_pld_from_rdp"] = account.epsilon, account.from_rdp
        return info
