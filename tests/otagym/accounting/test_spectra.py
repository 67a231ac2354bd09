"""The PLD accountant's compiled kernels (otagym.accounting.spectra) against numpy and mpmath computed independently."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from scipy import sparse

from otagym.accounting.loss_distribution import round_pld
from otagym.accounting.spectra import BLOCK, log_mgfs, multiply_powers


def test_multiply_powers_is_the_product_of_powers() -> None:
    """Each row's product of its groups' spectra to the power of their counts, counts 1 to 10^6 (squaring), over
    more frequencies than a block, equals numpy's product of powers."""
    rng = np.random.default_rng(3)
    groups, frequencies = 7, 2 * BLOCK + 37
    radius = rng.uniform(0.2, 1.0, (groups, frequencies))
    spectra = radius * np.exp(1j * rng.uniform(-np.pi, np.pi, (groups, frequencies)))
    spectra[3] = np.exp(1j * rng.uniform(-np.pi, np.pi, frequencies))  # |z| = 1: a power of a million stays finite
    counts = sparse.csr_array(np.array([[1, 0, 2, 0, 0, 0, 1], [0, 0, 0, 1_000_000, 0, 3, 0], [0, 0, 0, 0, 0, 0, 0],
                                        [5, 1, 1, 1, 17, 1, 1]], dtype=np.int64))
    out = np.full((4, frequencies), 0.5 + 0.5j)
    multiply_powers(spectra, counts.indptr.astype(np.int64), counts.indices.astype(np.int64),
                    counts.data.astype(np.int64), out, np.empty(BLOCK, dtype=complex))
    dense = counts.toarray()
    expected = 0.5 + 0.5j * np.ones((4, frequencies))
    for r in range(4):
        for g in np.flatnonzero(dense[r]):
            expected[r] *= np.exp(dense[r, g] * np.log(spectra[g]))  # the power through the complex log
    np.testing.assert_allclose(out, expected, rtol=1e-8, atol=0)


@pytest.mark.parametrize("lam", [-300.0, -2.0, -0.05, -1e-6, 0.0, 1e-4, 0.3, 5.0, 150.0, 250.0])
def test_log_mgfs_equal_mpmath(lam: float) -> None:
    """Each group's log moment generating function at lam per grid step (Horner's rule, rescaled; exponentials
    beyond |lam| = 200) equals mpmath's sum of the exact terms, on real rounds' PLD halves and a group of no mass."""
    members = [round_pld(q, s, 0.01, -30.0)[h] for q, s in [(0.01, 0.7), (0.5, 1.3), (1.0, 3.0)] for h in (0, 1)]
    probs = [m.probs for m in members] + [np.zeros(4)]
    lowest = np.array([m.lower for m in members] + [-2], dtype=np.int64)
    first = np.concatenate(([0], np.cumsum([len(p) for p in probs])[:-1])).astype(np.int64)
    out = np.empty(len(probs))
    log_mgfs(np.concatenate(probs), lowest, first, lam, out)
    mpmath.mp.dps = 30
    for g, (p, low) in enumerate(zip(probs[:-1], lowest)):
        exact = mpmath.log(mpmath.fsum(mpmath.mpf(float(v)) * mpmath.exp(lam * (int(low) + i))
                                       for i, v in enumerate(p) if v > 0))
        assert out[g] == pytest.approx(float(exact), rel=1e-11, abs=1e-11)
    assert out[-1] == -np.inf
