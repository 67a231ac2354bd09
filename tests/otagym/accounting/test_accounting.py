"""Accounting against independent references: Opacus (rtol 1e-9), mpmath (eq. 9 at 60 digits, the SGM's definition
integrated at 50), scipy closed forms."""

import math
import os

import mpmath as mp
import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from opacus.accountants.analysis import rdp as opacus_rdp
from scipy import optimize, stats

from otagym.accounting import (
    DEFAULT_ORDERS,
    RDPLedger,
    SGMCurve,
    rdp_sgm,
    rdp_to_dp,
    tail_bound_budget,
    tail_bound_c_inverse,
    tail_bound_epsilon,
)

# Opacus's own float64 log-add loses absolute precision ~1e-16 in log A; below RDP ~1e-7 that dominates a relative
# comparison (mpmath shows Opacus 1.6% off at RDP 1e-15 while we are within 4e-15), hence the absolute floor.
RTOL, ATOL = 1e-9, 1e-15

q_strategy = st.one_of(st.just(0.0), st.just(1.0), st.floats(1e-6, 1.0, exclude_max=True),
                       st.floats(1e-6, 1e-3))
sigma_strategy = st.one_of(st.floats(0.05, 100.0), st.floats(1e-3, 0.05))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(q=q_strategy, sigma=sigma_strategy, alpha=st.integers(2, 256))
def test_integer_orders_match_opacus(q, sigma, alpha):
    ref = opacus_rdp.compute_rdp(q=q, noise_multiplier=sigma, steps=1, orders=[alpha])[0]
    got = rdp_sgm(q=q, noise_multiplier=sigma, orders=alpha)
    np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL)


# --- Fractional orders: upper bounds, against the SGM's definition integrated in mpmath ---------------------------

#: Deeper runs: ``OTAGYM_FUZZ_SCALE=20 python -m pytest tests/otagym/accounting/test_accounting.py`` multiplies the
#: mpmath examples.
SCALE = int(os.environ.get("OTAGYM_FUZZ_SCALE", "1"))


def _mp_excess(t, a):
    """(1 + t)^a - 1 - a t in mpmath, by its binomial series where |t| < 1e-3 (the direct form cancels there)."""
    if abs(t) >= mp.mpf("1e-3"):
        return mp.power(1 + t, a) - 1 - a * t
    total, term, k = mp.mpf(0), a * (a - 1) / 2 * t * t, 2
    while abs(term) > mp.eps * abs(total) / 8 or k < 4:
        total, term, k = total + term, term * t * (a - k) / (k + 1), k + 1
    return total


def _peaks(q, sigma, alpha):
    """Breakpoints for the quadrature (0, 1, 2, z0, alpha and the integrand's highest points, each +-6 sigma) and the
    log of its largest value, from the log-integrand on a float grid (its bumps sit at integers and alpha - j, width
    sigma). Only where the integrator looks, not what it finds."""
    z0 = sigma**2 * (math.log1p(-q) - math.log(q)) + 0.5
    lo, hi = -12 * sigma, max(alpha, 2.0, z0) + 12 * sigma
    ints = np.arange(0.0, min(hi, 2e5) + 1)
    z = np.concatenate([np.linspace(lo, hi, 4001), ints, alpha - ints, [z0]])
    z = z[(z >= lo) & (z <= hi)]
    e = (2 * z - 1) / (2 * sigma**2)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        log_t = math.log(q) + np.where(e > 0, e + np.log1p(-np.exp(-e)), np.log(-np.expm1(e)))  # log |t|
        log_1pt = np.where(e > 0, np.logaddexp(0, log_t), np.log1p(-np.exp(log_t)))
        t = np.sign(e) * np.exp(log_t)
        direct = np.log(np.abs(np.expm1(alpha * log_1pt) - alpha * t))
        log_g = np.where(log_t < math.log(1e-3), math.log(alpha * (alpha - 1) / 2) + 2 * log_t,
                         np.where(alpha * log_1pt > 40, alpha * log_1pt, direct))
        h = np.where(np.isfinite(log_g), log_g - z * z / (2 * sigma**2), -np.inf)
    top = h.max()
    centres = {0.0, 1.0, 2.0, z0, alpha} | {float(z[i]) for i in np.argsort(-h)[:4] if h[i] > top - 60}
    points = {lo, hi} | {c + m * sigma for c in centres for m in (-6, 0, 6) if lo < c + m * sigma < hi}
    return sorted(points), top


def _mp_sgm_rdp(q, sigma, alpha, dps=50):
    """The SGM's RDP from its definition (Mironov, Talwar, Zhang 2019, Sec. 3): mu0 = N(0, s^2), mu1 = N(1, s^2),
    mu = (1-q) mu0 + q mu1, A = E_{z~mu0}[(mu(z)/mu0(z))^alpha], RDP = log(A) / (alpha - 1), by ``mpmath.quad`` at
    ``dps`` digits. A - 1 is integrated directly, E[(1 + t)^alpha - 1 - alpha t] with t = q (mu1/mu0 - 1) (E[t] = 0),
    so that A - 1 ~ q^2 survives down to q = 1e-300; the integrand is scaled by its largest value (quad's tolerance
    is absolute). Exact to ~45 digits where it can be checked (integer orders, against eq. 9)."""
    if q == 1:
        return mp.mpf(alpha) / (2 * mp.mpf(sigma) ** 2)
    points, top = _peaks(q, sigma, alpha)
    with mp.workdps(dps):
        q, s, a, shift = mp.mpf(q), mp.mpf(sigma), mp.mpf(alpha), mp.mpf(top)

        def integrand(z):
            e = (2 * z - 1) / (2 * s * s)
            t = q * (mp.exp(e) - 1 if abs(e) > 0.25 else mp.expm1(e))
            return _mp_excess(t, a) * mp.exp(-z * z / (2 * s * s) - shift)

        d = mp.quad(integrand, [-mp.inf] + [mp.mpf(p) for p in points] + [mp.inf])
        return mp.log1p(d * mp.exp(shift) / (s * mp.sqrt(2 * mp.pi))) / (a - 1)


def _mp_eq9(q, sigma, alpha, dps=50):
    """Eq. (9) at an integer order in mpmath, as log1p of sum_{k>=2} C(alpha,k) (1-q)^(alpha-k) q^k expm1(x_k)."""
    with mp.workdps(dps):
        q, s = mp.mpf(q), mp.mpf(sigma)
        a_minus_1 = mp.fsum(mp.binomial(alpha, k) * (1 - q) ** (alpha - k) * q**k * mp.expm1((k * k - k) / (2 * s * s))
                            for k in range(2, alpha + 1))
        return mp.log1p(a_minus_1) / (alpha - 1)


def _excess_allowed(q, sigma, alpha):
    """How far above the exact RDP the fractional bound may lie (relative): 1e-6, plus 1e-12 sigma^2 / (alpha - 1) where
    |q - 1/2| < 3 / sigma -- float64's cancellation there (the README's numbers: 1e-13 typically, 7e-4 at worst)."""
    return 1e-6 + (1e-12 * sigma**2 / (alpha - 1) if abs(q - 0.5) * sigma < 3 else 0.0)


def _assert_upper_bound(got, q, sigma, alpha):
    exact = _mp_sgm_rdp(q, sigma, alpha)
    assert mp.mpf(got) >= exact, f"under-reports: {got!r} < {mp.nstr(exact, 20)}"
    # below the smallest floats the bound is the smallest positive float, a few of its units above
    assert mp.mpf(got) <= exact * (1 + _excess_allowed(q, sigma, alpha)) + mp.mpf("1e-320")


@pytest.mark.slow
@pytest.mark.parametrize("q,sigma,alpha", [(0.01, 1.0, 2), (1e-300, 0.05, 3), (0.5, 1e3, 2), (1 - 1e-16, 1e3, 3),
                                           (1e-5, 50.0, 7), (0.9, 0.3, 11), (1e-100, 0.2, 30)])
def test_mpmath_reference_reproduces_eq9_at_integer_orders(q, sigma, alpha):
    """The quadrature reference of the fractional tests, where an exact finite sum exists (q from 1e-300 to
    1 - 1e-16, sigma from 0.05 to 1000): agreement to 40 digits."""
    exact = _mp_eq9(q, sigma, alpha)
    assert abs(_mp_sgm_rdp(q, sigma, alpha) / exact - 1) < mp.mpf("1e-40")


fractional_q = st.one_of(st.floats(-300.0, 0.0).map(lambda x: 10.0**x), st.floats(0.0, 1.0, exclude_min=True),
                         st.floats(-16.0, -1.0).map(lambda x: 1 - 10.0**x))
fractional_alpha = st.floats(-4.0, 4.0).map(lambda x: 1 + 10.0**x if x < 0 else 10.0**x).filter(
    lambda a: 1.0001 <= a <= 1e4 and not a.is_integer())


@pytest.mark.slow
@settings(max_examples=10 * SCALE, deadline=None)
@given(q=fractional_q, log_sigma=st.floats(-3.0, 3.0), alpha=fractional_alpha)
def test_fractional_orders_are_upper_bounds_on_the_exact_rdp(q, log_sigma, alpha):
    """Never below the SGM's RDP from its definition (50-digit mpmath), and at most :func:`_excess_allowed` above,
    over q in [1e-300, 1], sigma in [1e-3, 1e3], alpha in [1.0001, 1e4]."""
    sigma = 10.0**log_sigma
    _assert_upper_bound(rdp_sgm(q=q, noise_multiplier=sigma, orders=[alpha])[0], q, sigma, alpha)


@pytest.mark.slow
@pytest.mark.parametrize("q,sigma,alpha", [
    (0.00013252475502562695, 0.3806164016269688, 1.1569456778846001),  # Opacus's series, cut at e^-30: -1.0e-7
    (6.614355539617609e-06, 1.0057584097928998, 1.002672036366722),  # log A of O(1) terms, alpha ~ 1: -6.4e-4
    (1 - 1e-16, 1e3, 1.5),  # z0 from log(1/q - 1) with 1/q - 1 rounded: -1.9e-9
    (1e-300, 0.05, 3.3),  # A - 1 ~ 1e-331 vanishes next to 1: RDP 0
    (0.5054000368589197, 28.08682237840748, 1.1349917268490346),  # q near 1/2: a tail ~ i^-2, cut at e^-30: -3.8e-9
])
def test_fractional_orders_do_not_under_report_where_the_series_did(q, sigma, alpha):
    """The issue's points (found against the quadrature reference): Opacus's series under-reported at each."""
    _assert_upper_bound(rdp_sgm(q=q, noise_multiplier=sigma, orders=[alpha])[0], q, sigma, alpha)


def test_fractional_rdp_is_monotone_in_q_up_to_one():
    """RDP is non-decreasing in q; at sigma = 1e3, alpha = 1.5 it fell between q = 1 - 1e-16 and 1 (z0 rounded)."""
    q = np.append(1 - 10.0 ** -np.arange(1.0, 17.0), 1.0)
    got = rdp_sgm(q=q, noise_multiplier=1e3, orders=1.5)
    assert np.all(got[1:] >= got[:-1] * (1 - 1e-12))
    assert mp.mpf(got[-2]) >= _mp_sgm_rdp(q[-2], 1e3, 1.5) and mp.mpf(got[-1]) >= _mp_sgm_rdp(1.0, 1e3, 1.5)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(q=st.tuples(fractional_q, fractional_q).map(sorted), sigma=st.tuples(st.floats(-3.0, 3.0),
       st.floats(-3.0, 3.0)).map(lambda s: sorted(10.0 ** np.array(s))), alpha=fractional_alpha)
def test_fractional_rdp_is_monotone_in_q_and_sigma(q, sigma, alpha):
    """RDP is non-decreasing in q and non-increasing in sigma; an upper bound within a relative e of exact keeps that
    to within e: rdp(q1) <= exact(q1)(1 + e) <= exact(q2)(1 + e) <= rdp(q2)(1 + e)."""
    (q1, q2), (s1, s2) = q, sigma
    at_q = rdp_sgm(q=np.array([q1, q2]), noise_multiplier=s1, orders=[alpha])[:, 0]
    assert at_q[0] <= at_q[1] * (1 + _excess_allowed(q1, s1, alpha)) + 1e-320
    at_s = rdp_sgm(q=q1, noise_multiplier=np.array([s1, s2]), orders=[alpha])[:, 0]
    assert at_s[1] <= at_s[0] * (1 + _excess_allowed(q1, s2, alpha)) + 1e-320


@pytest.mark.slow
@settings(max_examples=30 * SCALE, deadline=None)
@given(q=st.floats(1e-5, 0.5), sigma=st.floats(0.3, 50.0), alpha=st.floats(1.05, 64.0))
def test_fractional_orders_match_opacus(q, sigma, alpha):
    """Opacus's values to RTOL where its series is accurate; where it is not (its e^-30 cut, its log-space sum of
    the alternating tail: q = 1e-3, sigma = 0.524, alpha = 1.1 is 5.9e-8 too high), ours bounds the exact value."""
    assume(not float(alpha).is_integer())
    try:
        ref = opacus_rdp.compute_rdp(q=q, noise_multiplier=sigma, steps=1, orders=[alpha])[0]
    except ValueError:  # Opacus's series lost precision: not a reference
        assume(False)
    got = rdp_sgm(q=q, noise_multiplier=sigma, orders=[alpha])[0]
    if not np.isclose(got, ref, rtol=RTOL, atol=ATOL):
        _assert_upper_bound(got, q, sigma, alpha)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.floats(-300.0, -0.001), st.floats(-1e-12, -1e-16)),
                          st.floats(-3.0, 4.0)), min_size=1, max_size=40),
       st.lists(st.integers(2, 600), min_size=1, max_size=25))
def test_all_order_integer_path_matches_the_per_order_path(pairs, orders):
    """The shared-exponential, pruned evaluation of eq. (9) over a batch of (q, sigma) against SGMCurve, which sums
    eq. (9) order by order (checked against Opacus and mpmath above): q from 1e-300 to 1 - 1e-16, sigma from 1e-3 to
    1e4, orders to 600, the batch spanning regimes so that pruning and sub-batches see mixed elements. Both are upper
    bounds raised by their own rounding bounds; near q = 1 the all-order path's k lambda + alpha log(1-q) cancels
    (magnitudes alpha |log(1-q)| ~ 2e4 at order 600), and its bound lies up to 2e-10 above the per-order one."""
    q, sigma = 10.0 ** np.array(pairs).T
    got = rdp_sgm(q=q, noise_multiplier=sigma, orders=orders)
    ref = np.stack([SGMCurve(q, a).rdp(sigma**-2.0) for a in orders], axis=-1)
    np.testing.assert_allclose(got, ref, rtol=3e-10, atol=1e-300)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.floats(-8.0, np.log10(0.5)), st.floats(-0.5, 1.7)), min_size=2, max_size=30),
       st.lists(st.floats(1.01, 40.0).filter(lambda a: not a.is_integer()), min_size=1, max_size=12))
@example(pairs=[(-1.0, 0.0), (-1.0, 0.0)], orders=[1.5, 2.5])
def test_fractional_orders_batched_equal_one_at_a_time(pairs, orders):
    """Entries of one batch stop at different terms and share the passes over i: each equals its own evaluation with
    the same orders, to the bit (the passes are the same for every entry: a batched sweep cell gets the bits of the
    cell alone). An order evaluated with other orders may differ from it alone in the last bit (hypothesis found
    q = 0.1, sigma = 1, orders (1.5, 2.5): 1 ulp), so across order sets the test asks 1e-14."""
    q, sigma = 10.0 ** np.array(pairs).T
    got = rdp_sgm(q=q, noise_multiplier=sigma, orders=orders)
    alone = np.array([rdp_sgm(q=qi, noise_multiplier=si, orders=orders) for qi, si in zip(q, sigma)])
    np.testing.assert_array_equal(got, alone)
    each = np.array([[rdp_sgm(q=qi, noise_multiplier=si, orders=[a])[0] for a in orders] for qi, si in zip(q, sigma)])
    np.testing.assert_allclose(got, each, rtol=1e-14, atol=0)


def _mp_rdp(q, sigma, alpha):
    mp.mp.dps = 60
    q, s = mp.mpf(q), mp.mpf(sigma)
    a = mp.fsum(mp.binomial(alpha, k) * (1 - q) ** (alpha - k) * q**k * mp.e ** ((k * k - k) / (2 * s * s))
                for k in range(alpha + 1))
    return float(mp.log(a) / (alpha - 1))


@pytest.mark.parametrize("q,sigma,alpha", [(2.5e-6, 75.0, 2), (1e-3, 67.0, 2), (0.01, 1.3, 3), (0.01, 0.7, 32),
                                           (0.3, 0.05, 256), (1e-4, 5.0, 128), (0.9, 2.0, 7)])
def test_integer_orders_match_mpmath_to_1e12(q, sigma, alpha):
    np.testing.assert_allclose(rdp_sgm(q=q, noise_multiplier=sigma, orders=alpha), _mp_rdp(q, sigma, alpha),
                               rtol=1e-12)


integer_q = st.one_of(st.floats(-300.0, -1.0).map(lambda x: 10.0**x), st.floats(0.0, 1.0, exclude_min=True,
                                                                                   exclude_max=True),
                     st.floats(-16.0, -1.0).map(lambda x: 1 - 10.0**x))


def _integer_excess_allowed(q, sigma, alpha, exact):
    """How far above eq. (9) an integer order's bound may lie (relative): 5e-12 (the log-gammas of C(alpha, k) at
    alpha = 256), plus 1e-14 alpha |log(1-q)| near q = 1, where the all-order path's k lambda + alpha log(1-q)
    cancels, plus 8 ulp of M = alpha |log q| + alpha (alpha-1) / (2 sigma^2) in log S where the term k = alpha takes
    over at a tiny q: its log, alpha log q + alpha (alpha-1) / (2 sigma^2), is a difference of two magnitudes M
    (q = 2.3e-22, sigma = 1, alpha = 99: M = 9,800, 7e-12); an error in log S is relative in S, and relative to
    log S once S > 1, hence the division by max(1, (alpha-1) eps(alpha))."""
    m = alpha * abs(math.log(q)) + alpha * (alpha - 1) / (2.0 * sigma**2)
    return 5e-12 + 1e-14 * alpha * abs(math.log1p(-q)) + 8 * 2.0**-53 * m / max(1.0, (alpha - 1) * float(exact))


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(q=integer_q, log_sigma=st.floats(-2.0, 3.0), alpha=st.integers(2, 256))
@example(q=1e-4, log_sigma=math.log10(5.0), alpha=128)
@example(q=1 - 1e-12, log_sigma=3.0, alpha=256)
@example(q=2.2929392996032355e-22, log_sigma=0.0, alpha=99)  # the term k = alpha takes over at a tiny q
def test_integer_orders_are_upper_bounds_within_a_small_margin_of_eq9(q, log_sigma, alpha):
    """Never below eq. (9) at 60 digits, and at most :func:`_integer_excess_allowed` above (where eq. (9) exceeds
    1e-290), over q in [1e-300, 1 - 1e-16], sigma in [1e-2, 1e3], alpha in [2, 256]: both the all-order path of
    ``rdp_sgm`` and the compiled one-order kernel of SGMCurve, which every env's step calls. (Before their rounding was
    bounded and added, they were below at about half of such points, by up to 1.5e-13.)"""
    sigma = 10.0**log_sigma
    exact = _mp_eq9(q, sigma, alpha, dps=60)
    assume(exact > mp.mpf("1e-290"))  # nearer the smallest floats, what subnormal numbers lose is added
    for got in (rdp_sgm(q=q, noise_multiplier=sigma, orders=alpha), SGMCurve([q], alpha).rdp(sigma**-2.0)[0]):
        assert mp.mpf(float(got)) >= exact, f"under-reports: {float(got)!r} < {mp.nstr(exact, 20)}"
        allowed = _integer_excess_allowed(q, sigma, alpha, exact)
        assert mp.mpf(float(got)) <= exact * (1 + allowed), (float(got), mp.nstr(exact, 20))


def test_edge_cases_are_inf_or_closed_form_never_nan():
    orders = [2, 3.5, 256]
    out = rdp_sgm(q=[0.0, 0.5, 0.5, 1.0, 0.5], noise_multiplier=[1.0, 0.0, 1e-200, 2.0, np.inf], orders=orders)
    np.testing.assert_array_equal(out[0], 0.0)
    assert np.all(np.isposinf(out[1])) and np.all(np.isposinf(out[2]))
    np.testing.assert_allclose(out[3], np.array(orders) / (2 * 2.0**2))
    np.testing.assert_array_equal(out[4], 0.0)
    tiny = rdp_sgm(q=0.01, noise_multiplier=np.array([1e-3, 1e-6, 1e-9]), orders=DEFAULT_ORDERS)
    assert not np.any(np.isnan(tiny)) and np.all(tiny > 0)


def test_batched_shapes_envs_devices_orders():
    q = np.full((4, 3), 0.01)
    sigma = np.linspace(0.5, 3, 12).reshape(4, 3)
    out = rdp_sgm(q=q, noise_multiplier=sigma, orders=DEFAULT_ORDERS)
    assert out.shape == (4, 3, len(DEFAULT_ORDERS))
    ref = opacus_rdp.compute_rdp(q=0.01, noise_multiplier=sigma[2, 1], steps=1, orders=list(DEFAULT_ORDERS))
    np.testing.assert_allclose(out[2, 1], ref, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("kwargs,match", [
    (dict(q=1.5, noise_multiplier=1.0, orders=2), "q"),
    (dict(q=-0.1, noise_multiplier=1.0, orders=2), "q"),
    (dict(q=0.1, noise_multiplier=-1.0, orders=2), "noise_multiplier"),
    (dict(q=0.1, noise_multiplier=np.nan, orders=2), "noise_multiplier"),
    (dict(q=0.1, noise_multiplier=1.0, orders=1.0), "orders"),
])
def test_bad_input_names_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        rdp_sgm(**kwargs)


@settings(max_examples=60, deadline=None)
@given(scale=st.floats(1e-3, 50.0), delta=st.floats(1e-10, 1e-2))
def test_rdp_to_dp_matches_opacus_get_privacy_spent(scale, delta):
    orders = np.array(DEFAULT_ORDERS, dtype=float)
    rdp = scale * rdp_sgm(q=0.02, noise_multiplier=1.1, orders=orders)
    eps_ref, order_ref = opacus_rdp.get_privacy_spent(orders=orders, rdp=rdp, delta=delta)
    eps, order = rdp_to_dp(rdp, orders, delta)
    np.testing.assert_allclose(eps, eps_ref, rtol=1e-12)
    assert order == order_ref


def test_rdp_to_dp_is_batched_and_handles_inf():
    orders = np.array([2.0, 8.0, 32.0])
    rdp = np.array([[0.1, 0.5, 3.0], [np.inf, np.inf, np.inf]])
    eps, _ = rdp_to_dp(rdp, orders, 1e-5)
    assert np.isfinite(eps[0]) and np.isposinf(eps[1])


def test_tail_bound_c_inverse_solves_its_equation():
    delta = np.array([1e-2, 1e-5, 1e-10])
    c = tail_bound_c_inverse(delta)
    np.testing.assert_allclose(np.sqrt(np.pi) * c * np.exp(c**2), 1 / delta, rtol=1e-12)


def _exact_gaussian_epsilon(mu, delta):
    """Exact eps of a Gaussian mechanism with sensitivity/std = mu (Balle & Wang 2018, Thm. 8)."""
    def gap(eps):
        return stats.norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * stats.norm.cdf(-mu / 2 - eps / mu) - delta
    return optimize.brentq(gap, 0.0, 700.0)


@settings(max_examples=60, deadline=None)
@given(sum_sq=st.floats(1e-3, 50.0), delta=st.floats(1e-9, 1e-3))
def test_tail_bound_is_a_valid_dp_bound_and_inverts_r_dp(sum_sq, delta):
    eps = tail_bound_epsilon(sum_sq, delta)
    # Composition of Gaussians with ratios r_t is one Gaussian with ratio sqrt(sum r_t^2): exact eps below the bound.
    assert eps >= _exact_gaussian_epsilon(math.sqrt(sum_sq), delta) * (1 - 1e-9)
    np.testing.assert_allclose(tail_bound_budget(eps, delta), sum_sq / 2, rtol=1e-9)


def test_sgm_curve_matches_rdp_sgm_and_its_slope_matches_finite_differences():
    q = np.array([0.01, 0.3])
    curve = SGMCurve(q, 5)
    u = np.array([[0.2, 1.5], [3.0, 40.0]])
    np.testing.assert_allclose(curve.rdp(u), rdp_sgm(q=q, noise_multiplier=u**-0.5, orders=5), rtol=1e-13)
    h = 1e-6 * u
    fd = (curve.rdp(u + h) - curve.rdp(u - h)) / (2 * h)
    np.testing.assert_allclose(curve.slope(u), fd, rtol=1e-6)
    assert np.isposinf(curve.rdp(np.array([[np.inf, np.inf]]))).all()
    slope, curvature = curve.slope_and_curvature(u)
    np.testing.assert_allclose(slope, curve.slope(u), rtol=1e-12)
    np.testing.assert_allclose(curvature, (curve.slope(u + h) - curve.slope(u - h)) / (2 * h), rtol=1e-5)


def test_ledger_composes_varying_sigma_across_chunks_and_resets_rows():
    rng = np.random.default_rng(3)
    sigmas = rng.uniform(0.6, 3.0, size=(300, 2, 3))
    q = np.array([[0.01, 0.02, 0.05], [0.01, 0.02, 0.05]])
    ledger = RDPLedger(q, orders=DEFAULT_ORDERS, chunk=64)
    for s in sigmas:
        ledger.record(s)
    ref = sum(rdp_sgm(q=q, noise_multiplier=s, orders=DEFAULT_ORDERS) for s in sigmas)
    np.testing.assert_allclose(ledger.rdp, ref, rtol=1e-11)
    ledger.record(sigmas[0])
    ledger.reset(np.array([True, False]))
    np.testing.assert_array_equal(ledger.rdp[0], 0.0)
    np.testing.assert_allclose(ledger.rdp[1], ref[1] + rdp_sgm(q=q[1], noise_multiplier=sigmas[0, 1],
                                                                orders=DEFAULT_ORDERS), rtol=1e-11)
    eps, order = ledger.epsilon(1e-5)
    eps_ref, order_ref = opacus_rdp.get_privacy_spent(orders=list(DEFAULT_ORDERS), rdp=ledger.rdp[1, 2], delta=1e-5)
    assert eps.shape == (2, 3) and eps[1, 2] == pytest.approx(eps_ref, rel=1e-12) and order[1, 2] == order_ref


@pytest.mark.parametrize("bad", [np.nan, np.inf, -1.0, [1.0, -0.5, 1.0]])
def test_ledger_refuses_a_bad_noise_multiplier_when_recorded(bad):
    """NaN, inf or negative noise multipliers are refused by ``record`` itself, naming the argument and its range
    (they used to be buffered and fail, or count as no leakage, only at the next read)."""
    ledger = RDPLedger(np.full(3, 0.01))
    with pytest.raises(ValueError, match=r"noise_multiplier must be finite and >= 0 .*\[0, inf\)"):
        ledger.record(bad)
    ledger.record(np.zeros(3))  # 0 is allowed: no noise, infinite RDP
    assert np.isposinf(ledger.rdp).all()


@pytest.mark.slow
def test_ledger_results_do_not_depend_on_chunk():
    """Bit-identical totals whatever ``chunk``, with reads and a row reset along the way: the evaluation blocks are
    the ledger's own (a round's RDP at integer orders can differ in its last bits with the rounds evaluated beside
    it, 3e-14 relative, so folding ``chunk`` rounds at a time made the totals depend on it)."""
    rng = np.random.default_rng(7)
    q = np.array([[0.01, 0.02, 0.05], [0.001, 0.3, 0.5]])
    sigmas = rng.uniform(0.5, 4.0, size=(300, 2, 3))
    orders = list(DEFAULT_ORDERS) + [2.5]
    results = []
    for chunk in (1, 5, 64, 128, 129, 1000):
        ledger = RDPLedger(q, orders=orders, chunk=chunk)
        for t, s in enumerate(sigmas):
            ledger.record(s)
            if t in (40, 41, 250):
                ledger.epsilon(1e-5)
            if t == 200:
                ledger.reset(np.array([True, False]))
        results.append(ledger.rdp.copy())
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])
    ref = sum(rdp_sgm(q=q[1], noise_multiplier=s[1], orders=orders) for s in sigmas)
    np.testing.assert_allclose(results[0][1], ref, rtol=1e-11)


@pytest.mark.slow
def test_ledger_buffer_grows_with_the_rounds_within_a_byte_budget():
    """A ledger for 256 envs x 10,000 devices held 128 rounds of noise multipliers from the start (2.4 GiB for
    chunk=128, whatever the number of rounds): now its buffer holds what was recorded, within 64 MiB."""
    big = RDPLedger(np.full((256, 10_000), 0.01))
    assert big._pending.nbytes == 0
    for _ in range(3):  # a 4th round would fold the buffer: 3 rounds x 2.56e6 elements x 20 orders, 10 s
        big.record(np.full((256, 10_000), 1.0))
        assert big._pending.nbytes <= 2**26
    small = RDPLedger(np.full((4, 3), 0.01), chunk=128)
    for _ in range(3):
        small.record(np.ones((4, 3)))
    assert small._pending.nbytes <= 4 * 12 * 8  # 3 rounds recorded: the buffer holds 4


def test_default_order_grid_is_a_valid_bound_within_its_documented_tightness():
    all_orders = np.arange(2, 257)
    losses = []
    for sigma in np.geomspace(0.7, 30, 40):
        rdp_all = 500 * rdp_sgm(q=0.01, noise_multiplier=sigma, orders=all_orders)
        eps_all, _ = rdp_to_dp(rdp_all, all_orders, 1e-5)
        eps_grid, _ = rdp_to_dp(rdp_all[np.array(DEFAULT_ORDERS) - 2], DEFAULT_ORDERS, 1e-5)
        losses.append(eps_grid / eps_all)
    assert min(losses) >= 1.0  # a subset of orders can only give a larger (still valid) epsilon
    assert np.median(losses) < 1.005 and max(losses) < 1.10  # the numbers DEFAULT_ORDERS documents


def test_accounting_edges_raise_or_stay_valid():
    """Issue 9, class 4: rdp_to_dp refuses negative RDP and never returns a negative epsilon; the ledger checks q at
    construction. Opacus's fractional series returns a negative RDP where ours lies between the integer orders."""
    from otagym.accounting import RDPLedger, rdp_sgm, rdp_to_dp

    assert opacus_rdp.compute_rdp(q=0.3, noise_multiplier=50.0, steps=1, orders=[100.5])[0] < 0
    got = rdp_sgm(q=0.3, noise_multiplier=50.0, orders=[100.0, 100.5, 101.0])
    assert got[0] < got[1] < got[2]
    eps, order = rdp_to_dp(np.array([0.0, 0.0]), np.array([2.0, 3.0]), 0.5)
    assert eps == 0.0
    with pytest.raises(ValueError, match="rdp must be >= 0"):
        rdp_to_dp(np.array([-0.1]), np.array([2.0]), 1e-5)
    with pytest.raises(ValueError, match="q"):
        RDPLedger(q=[2.0])


@settings(max_examples=60, deadline=None)
@given(log_q=st.floats(-6.0, -0.01), log_sigma=st.floats(-0.5, 2.0), order=st.integers(2, 5000))
def test_fractional_orders_lie_between_integer_orders(log_q, log_sigma, order):
    """RDP is non-decreasing in the order (van Erven & Harremoes), so a half-integer order lies between its integer
    neighbours (integer path checked against mpmath above) -- up to order 5000, where the fractional series used to
    overflow its binomials or stop before the binomial bulk (Opacus's stopping rule)."""
    q, sigma = 10.0**log_q, 10.0**log_sigma
    lo, mid, hi = rdp_sgm(q=q, noise_multiplier=sigma, orders=[order, order + 0.5, order + 1])
    assert lo * (1 - 1e-9) - 1e-15 <= mid <= hi * (1 + 1e-9) + 1e-15


@pytest.mark.parametrize("sigma", [1.4e154, 1e160, 1e300])
@pytest.mark.parametrize("q", [0.01, 1.0])
def test_a_noise_multiplier_whose_square_overflows_gets_an_upper_bound_not_nan(q, sigma):
    """1/sigma^2 underflows to 0 above sigma ~ 1.3e154, where eq. (9) took the log of 0 (NaN) and q = 1 gave 0, below
    the exact RDP: the full Gaussian's alpha / (2 sigma^2), at least the smallest float, bounds it (mpmath)."""
    orders = [2, 3, 2.5]
    got = rdp_sgm(q=q, noise_multiplier=sigma, orders=orders)
    assert np.all(np.isfinite(got)) and np.all(got > 0)
    smallest = mp.mpf(np.nextafter(0.0, 1.0))
    with mp.workdps(60):
        u = 1 / mp.mpf(sigma) ** 2
        for order, value in zip(orders, got):
            gaussian = order * u / 2  # the full Gaussian's RDP, at least the subsampled one's
            if order == int(order) and q < 1:  # eq. (9) exactly
                a = mp.fsum(mp.binomial(order, k) * (1 - mp.mpf(q)) ** (order - k) * mp.mpf(q) ** k
                            * mp.exp((k * k - k) * u / 2) for k in range(int(order) + 1))
                assert mp.mpf(value) >= mp.log(a) / (order - 1)
            assert gaussian <= mp.mpf(value) or q < 1
            assert mp.mpf(value) <= gaussian * (1 + 1e-12) + 4 * smallest  # subnormals: a few units of the last place


@pytest.mark.parametrize("order", [2, 3, 8, 32])
@pytest.mark.parametrize("u", [1e-6, 0.3, 1.0, 5.0])
def test_sgm_curve_at_full_sampling_is_the_gaussian_mechanism(order, u):
    """q = 1 (a batch as large as the data): the sampled Gaussian mechanism is the Gaussian mechanism, RDP
    alpha / (2 sigma^2) = alpha u / 2 (Mironov 2017, Prop. 7), never NaN; its derivatives are u's coefficient and 0."""
    from otagym.accounting.curve import SGMCurve

    curve = SGMCurve([1.0], order)
    assert curve.rdp(u)[0] == pytest.approx(order * u / 2, rel=1e-12)
    slope, curvature = curve.slope_and_curvature(u)
    assert slope[0] == pytest.approx(order / 2, rel=1e-12) and curvature[0] == pytest.approx(0.0, abs=1e-12)


def test_a_batch_as_large_as_the_data_plays_finite_rounds_charged_as_the_gaussian():
    """q = B / n = 1: reward, observation and leakage finite, each device charged alpha / (2 sigma^2) at alpha = 3."""
    import gymnasium as gym

    import otagym  # noqa: F401

    env = gym.make("otagym/OTAPrivacy-v0", num_rounds=3, batch_size=60, dataset_size=60)
    env.reset(seed=0)
    for _ in range(3):
        obs, reward, _, _, info = env.step(np.zeros(1, dtype=np.float32))
        assert np.isfinite(reward) and np.isfinite(obs).all() and np.isfinite(info["leakage"])
        np.testing.assert_allclose(info["rdp_round"], 3 / (2 * info["noise_multiplier"] ** 2), rtol=1e-12)
