"""Compiled kernels of the PLD accountant's composition (:mod:`otagym.accounting.pld`): each schedule's product of
its groups' discrete Fourier transforms, each to the power of its count, and each group's log moment generating
function. Both are loops a numpy expression would run as several passes over arrays of a batch's size (the products
as exponentials of logs and arctangents, 40 ns a point; here a multiplication, about 1 ns); nothing here is a
formula of a paper.
"""

from __future__ import annotations

import math

from numba import njit
from numpy.typing import NDArray

from otagym.jit import JIT_NO_ALLOC

__all__ = ["BLOCK", "multiply_powers", "log_mgfs"]

#: Frequencies handled at a time by :func:`multiply_powers`: every group's block of the spectra (16 bytes a
#: frequency) stays in the cache (a few MiB) while the rows multiply it in.
BLOCK = 256
#: ln 1e200, the rescaling of :func:`log_mgfs`.
_LN_1E200 = 200.0 * math.log(10.0)
#: The largest |lam| (per grid step) :func:`log_mgfs` takes by Horner's rule: 1e200 e^|lam| stays finite below 248.
_STEEPEST = 200.0


@njit(**JIT_NO_ALLOC)
def multiply_powers(spectra: NDArray, indptr: NDArray, indices: NDArray, counts: NDArray, out: NDArray,
                    power: NDArray) -> None:
    """out[r] *= prod_p spectra[indices[p]] ** counts[p] over row r's entries p in [indptr[r], indptr[r + 1]) (a CSR
    matrix of rows x groups), in place: complex ``spectra`` (groups, frequencies), ``out`` (rows, frequencies). A
    power is taken by repeated squaring (log2 of the count multiplications) in ``power`` (complex, :data:`BLOCK`)."""
    frequencies = spectra.shape[1]
    for start in range(0, frequencies, BLOCK):
        stop = min(start + BLOCK, frequencies)
        base = power[:stop - start]
        for r in range(len(indptr) - 1):
            row = out[r, start:stop]
            for p in range(indptr[r], indptr[r + 1]):
                g, count = indices[p], counts[p]
                if count == 1:
                    _multiply(row, spectra[g, start:stop])
                    continue
                for f in range(stop - start):
                    base[f] = spectra[g, start + f]
                while count > 0:
                    if count & 1:
                        _multiply(row, base)
                    count >>= 1
                    if count:
                        _multiply(base, base)


@njit(inline="always", **JIT_NO_ALLOC)
def _multiply(a: NDArray, b: NDArray) -> None:
    """a *= b elementwise (1-D complex slices of one length; ``b`` may be ``a``)."""
    for f in range(len(a)):
        a[f] *= b[f]


@njit(**JIT_NO_ALLOC)
def log_mgfs(probs: NDArray, lowest: NDArray, first: NDArray, lam: float, out: NDArray) -> None:
    """out[g] = ln sum_i probs[i] exp(lam (lowest[g] + i - first[g])) over group g's points i in [first[g],
    first[g + 1]) (the last group's to the end): each group's log moment generating function at lam per grid step,
    -inf for a group of no mass. Horner's rule in m = e^|lam| >= 1, from the group's end of the largest weight (its
    top for lam > 0) to the other, so that a point costs one multiply-add and no exponential; the sum is rescaled by
    1e-200 whenever it passes 1e200 (the points still to come scaled alike, those then below the sum's rounding).
    Beyond |lam| = :data:`_STEEPEST`, by exponentials."""
    groups = len(first)
    m = math.exp(abs(lam))
    for g in range(groups):
        begin, end = first[g], first[g + 1] if g + 1 < groups else len(probs)
        if abs(lam) > _STEEPEST:
            out[g] = _log_mgf_exp(probs[begin:end], lowest[g], lam)
            continue
        total, scale, offset = 0.0, 1.0, 0.0
        for j in range(end - begin):
            total = total * m + probs[end - 1 - j if lam > 0 else begin + j] * scale
            if total > 1e200:
                total *= 1e-200
                scale *= 1e-200
                offset += _LN_1E200
        last = lowest[g] if lam > 0 else lowest[g] + end - 1 - begin  # the smallest weight's step
        out[g] = lam * last + offset + math.log(total) if total > 0.0 else -math.inf


@njit(**JIT_NO_ALLOC)
def _log_mgf_exp(probs: NDArray, lowest: int, lam: float) -> float:
    """ln sum_i probs[i] exp(lam (lowest + i)) by exponentials of the terms less the largest (any lam)."""
    top = -math.inf
    for i in range(len(probs)):
        if probs[i] > 0.0:
            top = max(top, math.log(probs[i]) + lam * (lowest + i))
    if top == -math.inf:
        return -math.inf
    total = 0.0
    for i in range(len(probs)):
        if probs[i] > 0.0:
            total += math.exp(math.log(probs[i]) + lam * (lowest + i) - top)
    return top + math.log(total)
