"""The rounding model of the accounting's certified upper bounds, shared by the integer orders' series
(:mod:`otagym.accounting.integer`), their compiled curve (:mod:`otagym.accounting.curve`), the fractional series and
the tables: the unit roundoff, the error of a term of eq. (9), and how a bound on log S raises log1p(S)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from otagym.jit import JIT_NO_ALLOC

#: The rounding model of the integer orders' upper bounds (:func:`~otagym.accounting.curve.curve_log_a`,
#: :func:`~otagym.accounting.integer._log_s_int`): the unit roundoff u, every elementary operation (numpy's and libm's
#: exp, log, log1p, expm1 included) within 1 ulp (2u) of its exact result.
_U = 2.0**-53
#: A term's log of eq. (9), k log q + (alpha-k) log(1-q) + x_k + log(1 - e^-x_k), per unit of the magnitudes it is
#: made of: log q and log(1-q) (2u each), their difference and its product by k (3u), x_k = tri_k u from
#: u = 1/sigma^2 (3u: two roundings and the product), the sums (u each).
_TERM_U = 6 * _U
_LOG2 = math.log(2.0)
#: The smallest (subnormal) positive float.
_SMALLEST = float(np.nextafter(0.0, 1.0))
#: Below this an integer order's bound gets what its subnormal numbers may have lost added
#: (:func:`~otagym.accounting.curve._floored`); above it that is below the rounding bound, and is not computed
#: (arithmetic on subnormal numbers costs ~100 cycles, which a kernel on every step would pay).
_UNDERFLOW_ZONE = 1e-290
#: The error of one more rounded operation (a shift added back, a product, a logarithm), per unit of the magnitudes
#: it combines: 2 ulp.
_ROUND_U = 4 * _U


def _raise_log1p(log_a: Any, delta: Any) -> Any:
    """An upper bound on log1p(S) from ``log_a``, the computed log1p of an S whose log is within ``delta`` of exact
    (nats; S_exact <= S e^delta): log1p(S e^d) is below both log1p(S) + d and log1p(S) e^d (log1p is concave, zero at
    zero), and e^d - 1 <= d (1 + d) for d <= 1 (where d > 1, d is added instead); (1 + 8u) covers log1p's and this
    sum's roundings and the caller's division by alpha - 1. Plain arithmetic on floats or arrays, without a
    transcendental function: the compiled kernels (:func:`~otagym.accounting.curve.curve_log_a`) and numpy
    (:func:`~otagym.accounting.integer._rdp_int`) share it."""
    return (log_a + np.minimum(delta, log_a * delta * (1.0 + delta) + (delta > 1.0) * delta)) * (1.0 + 8.0 * _U)


_raise_log1p_jit = njit(inline="always", **JIT_NO_ALLOC)(_raise_log1p)


def _order_bound(alpha: Any) -> Any:
    """The part of an integer order's error bound on log S that depends on the order alone: log C(alpha, k) within
    1 ulp (2u) of its magnitude, at most alpha log 2 (:func:`~otagym.accounting.integer._log_binom`); the products
    k log q + (alpha-k) log(1-q) within :data:`_TERM_U` of theirs beyond what the terms' shares count (at most alpha
    log 2 more); 2 _TERM_U for expm1 and log1p; alpha - 1 roundings of the sum."""
    return (_TERM_U + 2 * _U) * _LOG2 * alpha + 2 * _TERM_U + (alpha - 1.0) * _U


_order_bound_jit = njit(inline="always", **JIT_NO_ALLOC)(_order_bound)
