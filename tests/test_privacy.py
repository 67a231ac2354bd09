"""Accounting against independent references: Opacus (rtol 1e-9), mpmath at 60 digits, scipy closed forms."""

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from opacus.accountants.analysis import rdp as opacus_rdp
from scipy import optimize, stats

from otagym.privacy import (
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


@settings(max_examples=300, deadline=None)
@given(q=q_strategy, sigma=sigma_strategy, alpha=st.integers(2, 256))
def test_integer_orders_match_opacus(q, sigma, alpha):
    ref = opacus_rdp.compute_rdp(q=q, noise_multiplier=sigma, steps=1, orders=[alpha])[0]
    got = rdp_sgm(q=q, noise_multiplier=sigma, orders=alpha)
    np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL)


@settings(max_examples=150, deadline=None)
@given(q=st.floats(1e-5, 0.5), sigma=st.floats(0.3, 50.0), alpha=st.floats(1.05, 64.0))
def test_fractional_orders_match_opacus(q, sigma, alpha):
    assume(not float(alpha).is_integer())
    try:
        ref = opacus_rdp.compute_rdp(q=q, noise_multiplier=sigma, steps=1, orders=[alpha])[0]
    except ValueError:  # Opacus's series lost precision: not a reference
        assume(False)
    got = rdp_sgm(q=q, noise_multiplier=sigma, orders=[alpha])[0]
    if not np.isclose(got, ref, rtol=RTOL, atol=ATOL):
        # The fractional series alternates in sign past alpha; where it cancels, Opacus's term-by-term log-space sum
        # drifts by ~1e-14 in log A, which is > 1e-9 relative when alpha is near 1 and the RDP small. There ours must
        # be the exact value of the same series (mpmath), which Opacus approximates.
        series = _mp_frac_series(q, sigma, alpha)
        assume(series is not None)  # a tail too long for mpmath in a test
        _assert_is_series_value(got, *series, alpha)


def _mp_frac_series(q, sigma, alpha, max_terms=3000):
    """Opacus's fractional series (Mironov, Talwar, Zhang 2019, Sec. 3.3) in 50 digits, stopped where ours stops
    (both terms below e^-30 and i > alpha): ``(rdp, sum |terms| / A)``, or None past ``max_terms`` terms."""
    mp.mp.dps = 50
    q, s, a = mp.mpf(q), mp.mpf(sigma), mp.mpf(alpha)
    z0 = s * s * mp.log(1 / q - 1) + mp.mpf(1) / 2
    total = absolute = mp.mpf(0)
    for i in range(max_terms):
        j = a - i
        coef = mp.binomial(a, i)
        t0 = coef * q**i * (1 - q) ** j * mp.exp((i * i - i) / (2 * s * s)) * mp.erfc((i - z0) / (mp.sqrt(2) * s)) / 2
        t1 = coef * q**j * (1 - q) ** i * mp.exp((j * j - j) / (2 * s * s)) * mp.erfc((z0 - j) / (mp.sqrt(2) * s)) / 2
        total += t0 + t1
        absolute += abs(t0) + abs(t1)
        if max(abs(t0), abs(t1)) < mp.exp(-30) and i > a:
            return float(mp.log(total) / (a - 1)), float(absolute / total)
    return None


def _assert_is_series_value(got, rdp, cancellation, alpha):
    """Each float64 term carries ~1e-15 relative error, so the sum is exact to ~1e-14 x sum|terms| (the cancellation
    factor); that absolute error in log A is what separates ours from the 50-digit value."""
    assert abs(got - rdp) <= 1e-10 * abs(rdp) + 2e-14 * cancellation / (alpha - 1)


@settings(max_examples=150, deadline=None)
@given(log_q=st.floats(-12.0, np.log10(0.6)), log_sigma=st.floats(-0.7, 2.0),
       alpha=st.floats(1.01, 300.0).filter(lambda a: not a.is_integer()))
def test_fractional_path_sums_the_series_exactly(log_q, log_sigma, alpha):
    """The vectorised series (every order and element on one shared i, linear-space sums) against the same series in
    mpmath, over q down to 1e-12, sigma from 0.2 to 100 and orders to 300."""
    q, sigma = 10.0**log_q, 10.0**log_sigma
    series = _mp_frac_series(q, sigma, alpha)
    assume(series is not None)
    got = rdp_sgm(q=q, noise_multiplier=sigma, orders=[alpha])[0]
    if series[0] > 0:  # a non-positive series value means it lost precision: rdp_sgm bounds it by ceil(alpha)
        _assert_is_series_value(got, *series, alpha)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.floats(-300.0, -0.001), st.floats(-1e-12, -1e-16)),
                          st.floats(-3.0, 4.0)), min_size=1, max_size=40),
       st.lists(st.integers(2, 600), min_size=1, max_size=25))
def test_all_order_integer_path_matches_the_per_order_path(pairs, orders):
    """The shared-exponential, pruned evaluation of eq. (9) over a batch of (q, sigma) against SGMCurve, which sums
    eq. (9) order by order (checked against Opacus and mpmath above): q from 1e-300 to 1 - 1e-16, sigma from 1e-3 to
    1e4, orders to 600, the batch spanning regimes so that pruning and sub-batches see mixed elements."""
    q, sigma = 10.0 ** np.array(pairs).T
    got = rdp_sgm(q=q, noise_multiplier=sigma, orders=orders)
    ref = np.stack([SGMCurve(q, a).rdp(sigma**-2.0) for a in orders], axis=-1)
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-300)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.floats(-8.0, np.log10(0.5)), st.floats(-0.5, 1.7)), min_size=2, max_size=30),
       st.lists(st.floats(1.01, 40.0).filter(lambda a: not a.is_integer()), min_size=1, max_size=12))
def test_fractional_orders_batched_equal_one_at_a_time(pairs, orders):
    """Entries of one batch stop at different terms and share the passes over i: each equals its own evaluation,
    to the bit (the passes are the same for every entry)."""
    q, sigma = 10.0 ** np.array(pairs).T
    got = rdp_sgm(q=q, noise_multiplier=sigma, orders=orders)
    alone = np.array([[rdp_sgm(q=qi, noise_multiplier=si, orders=[a])[0] for a in orders] for qi, si in zip(q, sigma)])
    np.testing.assert_array_equal(got, alone)


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
    from otagym.privacy import RDPLedger, rdp_sgm, rdp_to_dp

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
