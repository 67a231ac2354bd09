"""Privacy accounting: pure, array-first functions and a thin running ledger.

Everything here is batched: ``q`` and ``noise_multiplier`` broadcast against each other (any leading shape, e.g.
envs x devices), and ``orders`` adds a trailing axis when it is a sequence.

Modules (each module's docstring cites the equations it implements):

* :mod:`~otagym.accounting.orders`: the order grids (:data:`DEFAULT_ORDERS`, :data:`OPACUS_ORDERS`), the spec of an
  ``orders`` argument (:data:`ORDERS`, :data:`DP_ORDERS`), the checks of q, sigma and orders.
* :mod:`~otagym.accounting.sgm`: :func:`rdp_sgm`, the RDP of one round of the Sampled Gaussian Mechanism: edge cases,
  then :mod:`~otagym.accounting.integer` (eq. (9) at integer orders, in log space) and
  :mod:`~otagym.accounting.fractional` (the certified series of Mironov, Talwar & Zhang at fractional orders), both
  upper bounds under the rounding model of :mod:`~otagym.accounting.rounding`.
* :mod:`~otagym.accounting.conversion`: :func:`rdp_to_dp`, RDP -> (eps, delta)-DP by eq. (6).
* :mod:`~otagym.accounting.tail_bound`: Liu & Simeone's ``R_dp(eps, delta)``.
* :mod:`~otagym.accounting.curve`: :class:`SGMCurve` and the compiled eq. (9) at one order
  (:func:`~otagym.accounting.curve.curve_log_a`, :func:`~otagym.accounting.curve.curve_derivatives`) that the
  environments' round kernels call.
* :mod:`~otagym.accounting.tables` (with :mod:`~otagym.accounting.interpolation`): tabulated curves for large ledgers.
* :mod:`~otagym.accounting.ledger`: :class:`RDPLedger`, running totals over rounds.
* :mod:`~otagym.accounting.pld`: :func:`pld_epsilon` and :class:`PLDLedger`, (eps, delta) of a schedule of rounds
  from their privacy loss distribution (tighter than RDP -> (eps, delta)), with :func:`pld_account`; one round's
  distribution is :mod:`~otagym.accounting.loss_distribution`'s.
* :mod:`~otagym.accounting.episode`: :class:`EpisodeEpsilon`, a core's end-of-episode report from both.
"""

from otagym._exports import lazy_exports

#: Each public name by the module it lives in: imported on first use (:func:`otagym._exports.lazy_exports`), so that
#: a command's parser reads the names of the accountants without loading scipy or compiling a kernel.
_EXPORTS = {
    "orders": ("DEFAULT_ORDERS", "OPACUS_ORDERS", "ORDERS", "DP_ORDERS", "ACCOUNTANTS"),
    "curve": ("SGMCurve",),
    "ledger": ("RDPLedger",),
    "sgm": ("rdp_sgm",),
    "conversion": ("rdp_to_dp",),
    "tail_bound": ("tail_bound_budget", "tail_bound_epsilon", "tail_bound_c_inverse"),
    "pld": ("PLDLedger", "pld_epsilon", "pld_account", "PLDAccount"),
    "episode": ("EpisodeEpsilon",),
}

__all__ = [name for names in _EXPORTS.values() for name in names]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=(
    "conversion", "curve", "episode", "fractional", "integer", "interpolation", "ledger", "loss_distribution",
    "orders", "pld", "rounding", "sgm", "spectra", "tables", "tail_bound"))
