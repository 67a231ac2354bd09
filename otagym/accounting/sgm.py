"""The RDP of one round of the Sampled Gaussian Mechanism, batched (:func:`rdp_sgm`): the edge cases, then one
dispatch to eq. (9) at integer orders (:mod:`otagym.accounting.integer`) and to the series at fractional orders
(:mod:`otagym.accounting.fractional`)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otagym.accounting.fractional import _rdp_frac
from otagym.accounting.integer import _rdp_int
from otagym.accounting.orders import _validate_orders, _validate_q_sigma
from otagym.accounting.rounding import _SMALLEST, _U

__all__ = ["rdp_sgm"]

def rdp_sgm(*, q: ArrayLike, noise_multiplier: ArrayLike, orders: ArrayLike) -> NDArray:
    """RDP of one round of the Sampled Gaussian Mechanism, batched.

    Integer orders use eq. (9) (Lemma 1 of the AdaScale paper), all orders from one shared set of exponentials per
    element (:func:`~otagym.accounting.integer._log_s_int`), raised by a bound on its rounding error: an upper bound on
    the exact RDP, 5e-15 above it typically, ~1e-12 where the terms near k = alpha take over, up to 2e-11 near q = 1
    (where k lambda + alpha log(1-q) cancels). Fractional orders use the series of Mironov, Talwar & Zhang (2019, Sec.
    3.3; Opacus's ``_compute_log_a_frac``) rearranged to sum A - 1, with its alternating tail summed by Cohen-Rodriguez
    Villegas-Zagier and every rounding and truncation error bounded
    (:func:`~otagym.accounting.fractional._rdp_frac_upper`): the value returned is an upper bound on the exact RDP,
    never below it -- typically 1e-13 above it, up to ~1e-13 sigma^2 / (alpha - 1) above where |q - 1/2| < ~1/sigma
    (float64 cancellation); where that bound is looser than 2^-30 the chord of (alpha - 1) RDP between the integer
    orders around alpha (it is convex in alpha, :func:`~otagym.accounting.fractional._chord_upper`) is taken if smaller.
    Values below the smallest float are rounded up to it. Edge cases follow Opacus: ``q == 0`` -> 0;
    ``noise_multiplier == 0`` -> inf; ``q == 1`` -> alpha / (2 sigma^2) (rounded up at fractional orders);
    ``noise_multiplier == inf`` -> 0.

    Args:
        q: Poisson sampling rate(s) in [0, 1].
        noise_multiplier: noise std / L2 sensitivity (dimensionless), >= 0, ``inf`` allowed.
        orders: a scalar order (> 1) or a sequence of orders (adds a trailing axis to the result).

    Returns:
        RDP in nats, shape ``broadcast(q, noise_multiplier).shape (+ (len(orders),))``; never NaN. An element's value
        does not depend on the other elements at fractional orders (at integer orders, its last bits can).
    """
    q_arr = np.asarray(q, dtype=float)
    sigma_arr = np.asarray(noise_multiplier, dtype=float)
    _validate_q_sigma(q_arr, sigma_arr)
    scalar_order = np.ndim(orders) == 0
    orders_arr = np.atleast_1d(np.asarray(orders, dtype=float))
    _validate_orders(orders_arr)
    q_b, s_b = np.broadcast_arrays(q_arr, sigma_arr)
    shape = q_b.shape
    qf, sf = q_b.reshape(-1), s_b.reshape(-1)
    is_int = orders_arr == np.round(orders_arr)
    out, u, generic = _edge_cases(qf, sf, orders_arr, is_int)
    if generic.any():
        res = _rdp_generic(qf[generic], sf[generic], u[generic], orders_arr, is_int)
        if generic.all():
            out = res
        else:
            out[generic] = res
    out = out.reshape(shape + (orders_arr.size,))
    return out[..., 0] if scalar_order else out


def _edge_cases(q: NDArray, sigma: NDArray, orders: NDArray, is_int: NDArray) -> tuple[NDArray, NDArray, NDArray]:
    """The RDP of the edge cases, in Opacus's order of precedence (q == 0: 0; sigma == 0: inf; sigma == inf: 0;
    q == 1: alpha u / 2, rounded up at fractional orders; 1/sigma^2 overflowing to inf: inf; 1/sigma^2 underflowing
    to 0 for a finite sigma: alpha / (2 sigma^2), the full Gaussian's RDP, which bounds the subsampled one, rounded up
    and at least the smallest float), for flat ``q`` and ``sigma`` at ``orders`` (``is_int``: which are integers).

    Returns:
        ``(rdp, u, generic)``: the RDP, shape (elements, orders), zero where ``generic``; u = 1/sigma^2; which elements
        are none of the edge cases.
    """
    out = np.zeros((q.size, orders.size))
    zero_q = q == 0
    inf_rdp = ~zero_q & (sigma == 0)
    no_leak = ~zero_q & ~inf_rdp & np.isinf(sigma)  # infinite noise: the output is independent of the data
    full_q = ~zero_q & ~inf_rdp & ~no_leak & (q == 1)
    generic = ~(zero_q | inf_rdp | no_leak | full_q)
    out[inf_rdp] = np.inf
    with np.errstate(divide="ignore", over="ignore"):
        u = 1.0 / sigma**2
    out[full_q] = orders[None, :] * u[full_q, None] / 2
    out[np.ix_(full_q, ~is_int)] = np.nextafter(out[np.ix_(full_q, ~is_int)] * (1 + 4 * _U), np.inf)  # 3 roundings
    # 1/sigma^2 overflowing to inf (sigma < ~1e-154) is "no privacy" too.
    overflow = generic & np.isinf(u)
    out[overflow] = np.inf
    underflow = (generic | full_q) & (u == 0)  # sigma > ~1.3e154: eq. (9) would take the log of 0
    gaussian = orders[None, :] / 2 / sigma[underflow, None] / sigma[underflow, None]
    out[underflow] = np.maximum(np.nextafter(gaussian * (1 + 4 * _U), np.inf), _SMALLEST)
    generic &= ~(overflow | underflow)
    return out, u, generic


def _rdp_generic(q: NDArray, sigma: NDArray, u: NDArray, orders: NDArray, is_int: NDArray) -> NDArray:
    """The RDP (nats) of flat ``q`` in (0, 1) and finite ``sigma`` > 0 (``u = 1/sigma^2`` finite) at ``orders``:
    eq. (9) at the integer ones (``is_int``, :func:`~otagym.accounting.integer._rdp_int`), the fractional series at
    the others (:func:`~otagym.accounting.fractional._rdp_frac`); never below 0. Shape (elements, orders)."""
    if is_int.all():
        res = _rdp_int(q, u, orders)
    else:
        res = np.empty((q.size, orders.size))
        if is_int.any():
            res[:, is_int] = _rdp_int(q, u, orders[is_int])
    frac_idx = np.flatnonzero(~is_int)
    if frac_idx.size:
        res[:, frac_idx] = _rdp_frac(q, sigma, u, orders[frac_idx])
    np.maximum(res, 0.0, out=res)  # RDP >= 0; rounding can give -1e-17
    return res
