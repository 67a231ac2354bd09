"""The PLD accountant (otagym.accounting.pld) against independent computations: dp_accounting's own PLD accountant on
the same events, Opacus's PRV accountant within its stated error bounds, the closed form of composed Gaussians
(full participation: exact), the RDP ledger it must never exceed, and monotonicity in rounds and noise."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from otagym import OTAPrivacyEnv, OTAPrivacyVectorEnv
from otagym.accounting import DEFAULT_ORDERS, PLDLedger, pld_epsilon, rdp_sgm, rdp_to_dp
from otagym.accounting.loss_distribution import loss_sd, round_pld
from otagym.accounting.pld import TAIL_SHARE, _epsilon_for_delta, pld_account

dp_accounting = pytest.importorskip("dp_accounting")

DELTA = 1e-5


def schedule(seed: int, rounds: int = 40, low: float = 0.8, high: float = 3.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, rounds)


def dp_accounting_epsilon(q: float | np.ndarray, sigma: np.ndarray, delta: float, discretization: float,
                          *deltas: float) -> float | list[float]:
    """dp_accounting's PLDAccountant on the events of the schedule, composed as it composes them (its ε at each of
    ``deltas`` too, if given)."""
    from dp_accounting.pld import pld_privacy_accountant

    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=discretization)
    rates = np.broadcast_to(q, np.shape(sigma))
    accountant.compose(dp_accounting.ComposedDpEvent(
        [dp_accounting.PoissonSampledDpEvent(float(r), dp_accounting.GaussianDpEvent(float(s)))
         for r, s in zip(rates, sigma)]))
    return [accountant.get_epsilon(d) for d in (delta, *deltas)] if deltas else accountant.get_epsilon(delta)


@pytest.mark.parametrize("q", [0.01, 0.2, 1.0, "per round"])
def test_without_the_grids_it_is_dp_accountings_own_accountant_up_to_its_tail_share(q):
    """The same events, the same discretisation: ε between dp_accounting's at delta and at delta less the share of
    it the window's tails may take (TAIL_SHARE: the composition's only departure from the library's)."""
    sigma = schedule(1)
    q = np.linspace(0.01, 0.3, len(sigma)) if q == "per round" else q
    ours = pld_epsilon(q=q, noise_multiplier=sigma, delta=DELTA, value_discretization=1e-2, sigma_resolution=0)
    at_delta, at_less = dp_accounting_epsilon(q, sigma, DELTA, 1e-2, DELTA * (1 - TAIL_SHARE))
    assert at_delta - 1e-12 <= ours <= at_less + 1e-12


@pytest.mark.parametrize("q", [1e-4, 0.01, 0.5, 0.99, 1.0])
@pytest.mark.parametrize("sigma, d", [(0.01, 10.0), (0.3, 1e-2), (1.0, 1e-3), (5.0, 1e-4), (50.0, 1e-4)])
def test_a_rounds_pld_is_dp_accountings_connect_the_dots_pld(q, sigma, d):
    """Both halves of one round (same first point, masses within 1e-10, same mass at infinity) against
    dp_accounting's from_gaussian_mechanism, which evaluates the hockey-stick divergence one point at a time
    (sigma = 0.01: losses of 5,000 nats, whose inverse overflows a naive e^loss)."""
    from dp_accounting.pld import privacy_loss_distribution

    reference = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=sigma, sampling_prob=q, value_discretization_interval=d)
    for ours, theirs in zip(round_pld(q, sigma, d, -50.0), (reference._pmf_remove, reference._pmf_add)):
        theirs = theirs.to_dense_pmf()
        assert ours.lower == theirs._lower_loss and len(ours.probs) == theirs.size
        np.testing.assert_allclose(ours.probs, theirs._probs, rtol=0, atol=1e-10)
        assert ours.infinity_mass == pytest.approx(theirs._infinity_mass, abs=1e-15)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**20), size=st.integers(1, 300), lower=st.integers(-200, 400),
       infinity=st.sampled_from([0.0, 1e-9, 1e-6]), delta=st.sampled_from([1e-10, 1e-5, 1e-2]))
def test_epsilon_for_delta_is_dp_accountings(seed, size, lower, infinity, delta):
    """ε of a discrete PLD at delta: the vectorised search equals dp_accounting's walk down from the top loss."""
    from dp_accounting.pld import pld_pmf

    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(size, 0.3)) * (1 - infinity)
    theirs = pld_pmf.DensePLDPmf(1e-2, lower, probs, infinity, True).get_epsilon_for_delta(delta)
    ours = _epsilon_for_delta(lower, probs, infinity, 1e-2, delta)
    assert ours == pytest.approx(max(theirs, 0.0), rel=1e-9, abs=1e-12)


def fine_grid(q: float, sigma: float, coarsest: float = 1e-4) -> float:
    """A grid fine for the round: ``coarsest``, or a twentieth of its privacy loss's standard deviation where that is
    finer (dp_accounting at 1e-4 is loose where one round's loss is narrower than the grid: q = 0.001, sigma = 5).
    Ours is a tenth of it."""
    return min(coarsest, loss_sd(q, sigma) / 20)


@pytest.mark.parametrize("q, sigma, rounds", [(0.001, 1.0, 500),
                                              pytest.param(0.5, 2.0, 100, marks=pytest.mark.slow),
                                              pytest.param(0.01, 0.5, 1000, marks=pytest.mark.slow),
                                              pytest.param(1.0, 1.0, 1000, marks=pytest.mark.slow),
                                              pytest.param(0.5, 0.5, 2000, marks=pytest.mark.slow)])
def test_within_one_percent_of_dp_accounting_at_a_fine_grid_and_above_its_lower_bound(q, sigma, rounds,
                                                                                       coarsest=1e-4):
    """Constant schedules: ε at most 1% above dp_accounting's pessimistic PLD at 1e-4 (or finer, see fine_grid),
    and above its optimistic PLD there (a lower bound on the exact ε). (0.5, 0.5, 2000) needed a PLD too large for
    the former accountant's arrays, which returned the RDP ledger's 5,344; (0.001, 1, 500) was 0.209 on its 5 / T
    grid, coarser than one round's loss; the exact ε is 0.108."""
    from dp_accounting.pld import privacy_loss_distribution

    grid = fine_grid(q, sigma, coarsest)
    bounds = [privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=sigma, sampling_prob=q, value_discretization_interval=grid, pessimistic_estimate=pessimistic,
        use_connect_dots=pessimistic).self_compose(rounds).get_epsilon_for_delta(DELTA)
        for pessimistic in (False, True)]
    account = pld_account(q=q, noise_multiplier=np.full(rounds, sigma), delta=DELTA)
    assert not account.from_rdp
    assert bounds[0] <= account.epsilon <= 1.01 * bounds[1]


@pytest.mark.slow
@pytest.mark.parametrize("q", [0.001, 0.01, 0.1, 0.5, 1.0])
def test_the_grid_of_the_goal_within_one_percent(q):
    """q x sigma in {0.5, 1, 2, 5} x rounds in {1, 100, 1,000}: as above, every point, against references at 1e-3
    or a twentieth of a round's loss's spread, whichever is finer (10,000 rounds against 1e-4: measured too, at most
    0.5% above; those references take minutes)."""
    for sigma in (0.5, 1.0, 2.0, 5.0):
        for rounds in (1, 100, 1_000):
            test_within_one_percent_of_dp_accounting_at_a_fine_grid_and_above_its_lower_bound(q, sigma, rounds, 1e-3)


@pytest.mark.slow
def test_a_random_heterogeneous_schedule_within_one_percent_of_dp_accounting():
    """Rates and noise drawn per round (40 rounds): within 1% above dp_accounting's accountant at 1e-4 on the same
    events, and above it (its grid on these rounds is fine: their loss is wider than 1e-4)."""
    rng = np.random.default_rng(0)
    q, sigma = rng.uniform(0.01, 0.2, 40), rng.uniform(0.8, 3.0, 40)
    reference = dp_accounting_epsilon(q, sigma, DELTA, 1e-4)
    assert reference <= pld_epsilon(q=q, noise_multiplier=sigma, delta=DELTA) <= 1.01 * reference


def test_a_tiny_delta_below_the_ffts_rounding_gets_the_rdp_bound_and_says_so():
    """At delta = 1e-16 the composition's rounding (about 1e-16 of its largest mass per point) is above delta: ε is
    the RDP ledger's, and the account says so."""
    account = pld_account(q=0.01, noise_multiplier=np.ones(500), delta=1e-16)
    rdp = rdp_to_dp(500 * rdp_sgm(q=0.01, noise_multiplier=1.0, orders=DEFAULT_ORDERS), DEFAULT_ORDERS, 1e-16)[0]
    assert account.from_rdp and account.epsilon == pytest.approx(rdp, rel=1e-12)


def test_a_batch_shares_one_grid_the_finest_its_elements_ask_for():
    sigma = np.stack([np.full(50, 1.0), np.full(50, 4.0)], axis=1)
    batch = pld_account(q=0.01, noise_multiplier=sigma, delta=DELTA)
    alone = [pld_account(q=0.01, noise_multiplier=sigma[:, j], delta=DELTA) for j in range(2)]
    assert batch.discretization[0] == batch.discretization[1] == min(a.discretization for a in alone)
    assert batch.epsilon[1] == alone[1].epsilon  # the less noisy element asks for the finer grid


def test_a_batch_composes_each_element_as_it_would_alone_on_the_same_grid():
    """The batch's groups are built and transformed once for all its elements: each element's ε equals its own
    account on the same grid (shared groups, groups of one element, windows of different lengths, an element that
    leaks nothing), up to where the window's edge falls (a batch's band of windows may be longer than an element's
    own: the mass beyond the Chernoff edges, at most 0.1% of delta, wraps elsewhere)."""
    rng = np.random.default_rng(4)
    sigma = np.stack([rng.choice([0.9, 1.3, 2.0], 60), rng.choice([1.3, 2.0, 4.0], 60), rng.uniform(0.7, 3, 60),
                      np.full(60, 6.0), np.full(60, np.inf)], axis=1)
    q = np.stack([np.full(60, 0.02), np.full(60, 0.02), rng.uniform(0.01, 0.3, 60), np.full(60, 0.5),
                  np.full(60, 0.1)], axis=1)
    batch = pld_account(q=q, noise_multiplier=sigma, delta=DELTA, value_discretization=2e-3)
    for j in range(sigma.shape[1]):
        alone = pld_account(q=q[:, j], noise_multiplier=sigma[:, j], delta=DELTA, value_discretization=2e-3)
        assert batch.epsilon[j] == pytest.approx(float(alone.epsilon), rel=1e-6)
        assert batch.from_rdp[j] == alone.from_rdp
    assert batch.epsilon[4] == 0.0 and np.all(batch.epsilon[:4] > 0)


def test_where_the_rdp_ledger_is_smaller_its_epsilon_is_that_of_the_rounds_as_they_are():
    """The RDP ledger's ε is first bounded below on the sigma grid (rounds rounded to leak less); where it may be the
    smaller it is computed on the rounds as they are, not rounded: at delta = 1e-16 (the PLD falls back) with
    noise off the grid, it equals the ledger's on the same rounds."""
    sigma = schedule(8, 50)
    account = pld_account(q=0.01, noise_multiplier=sigma, delta=1e-16)
    rdp = rdp_to_dp(rdp_sgm(q=0.01, noise_multiplier=sigma, orders=DEFAULT_ORDERS).sum(axis=0), DEFAULT_ORDERS,
                    1e-16)[0]
    assert account.from_rdp and float(account.epsilon) == pytest.approx(float(rdp), rel=1e-12)


def test_the_sigma_grid_only_raises_epsilon_and_by_little():
    """sigma rounded down leaks more (an upper bound still), by under 1% at the default resolution here."""
    sigma = schedule(2)
    exact = pld_epsilon(q=0.05, noise_multiplier=sigma, delta=DELTA, sigma_resolution=0)
    rounded = pld_epsilon(q=0.05, noise_multiplier=sigma, delta=DELTA)
    assert exact <= rounded <= exact * 1.01


def test_full_participation_gaussians_are_within_a_discretisation_of_the_closed_form():
    """q = 1: the rounds compose into one Gaussian mechanism of mu = sqrt(sum 1/sigma_t^2), whose exact ε at δ solves
    δ = Φ(-ε/mu + mu/2) - e^ε Φ(-ε/mu - mu/2) (Balle & Wang 2018, Thm. 8). The PLD's is above it (pessimistic) and
    within its discretisation."""
    sigma = schedule(3, low=2.0, high=8.0)
    mu = math.sqrt(float(np.sum(sigma ** -2.0)))

    def delta_of(eps: float) -> float:
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)

    exact = optimize.brentq(lambda e: delta_of(e) - DELTA, 0.0, 100.0, xtol=1e-12)
    ours = pld_epsilon(q=1.0, noise_multiplier=sigma, delta=DELTA, sigma_resolution=0)
    assert exact <= ours <= exact + 1e-2


@pytest.mark.slow
def test_within_opacus_prv_accountants_error_bounds():
    """Opacus's PRV accountant (Gopi, Lee & Wutschitz 2021) bounds the exact ε from both sides (eps_error 0.02);
    the PLD's lies between them."""
    from opacus.accountants import PRVAccountant

    sigma, q = schedule(4), 0.05
    accountant = PRVAccountant()
    for s in sigma:
        accountant.step(noise_multiplier=float(s), sample_rate=q)
    low, _, high = accountant._get_dprv(eps_error=0.02, delta_error=DELTA / 1000).compute_epsilon(
        DELTA, DELTA / 1000, 0.02)
    ours = pld_epsilon(q=q, noise_multiplier=sigma, delta=DELTA)
    assert low <= ours <= high


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**16), q=st.sampled_from([0.01, 0.1, 0.5]), rounds=st.integers(1, 30))
def test_tighter_than_the_rdp_ledger_and_monotone_in_rounds_and_noise(seed, q, rounds):
    """pld_epsilon returns the smaller of the PLD's and the RDP ledger's epsilon, so "not above the ledger" cannot
    fail: here the PLD's own is asserted at least 5% below the ledger's (measured: at most 0.92 of it over these
    schedules), so a fallback to the ledger, or a PLD as loose as it, fails."""
    sigma = schedule(seed, rounds, 0.6, 6.0)
    eps = pld_epsilon(q=q, noise_multiplier=sigma, delta=DELTA)
    rdp = rdp_sgm(q=q, noise_multiplier=sigma, orders=DEFAULT_ORDERS).sum(axis=0)
    assert eps <= 0.95 * rdp_to_dp(rdp, DEFAULT_ORDERS, DELTA)[0]
    assert pld_epsilon(q=q, noise_multiplier=sigma[:-1], delta=DELTA) <= eps if rounds > 1 else True
    assert pld_epsilon(q=q, noise_multiplier=sigma * 1.25, delta=DELTA) <= eps


def test_edge_cases_and_bad_input():
    assert pld_epsilon(q=[0.0, 0.0], noise_multiplier=[1.0, 2.0], delta=DELTA) == 0.0  # nobody sampled
    assert pld_epsilon(q=0.1, noise_multiplier=[np.inf, np.inf], delta=DELTA) == 0.0  # infinite noise
    assert pld_epsilon(q=0.1, noise_multiplier=[1.0, 0.0], delta=DELTA) == math.inf  # a round without noise
    assert pld_epsilon(q=0.1, noise_multiplier=np.full((3, 2), 2.0), delta=DELTA).shape == (2,)
    with pytest.raises(ValueError, match="delta must be"):
        pld_epsilon(q=0.1, noise_multiplier=[1.0], delta=0.0)
    with pytest.raises(ValueError, match="noise_multiplier must be >= 0"):
        pld_epsilon(q=0.1, noise_multiplier=[-1.0], delta=DELTA)
    with pytest.raises(ValueError, match="sigma_resolution must be"):
        pld_epsilon(q=0.1, noise_multiplier=[1.0], delta=DELTA, sigma_resolution=1.5)
    with pytest.raises(ValueError, match="value_discretization must be"):
        pld_epsilon(q=0.1, noise_multiplier=[1.0], delta=DELTA, value_discretization=0.0)


def test_the_ledger_composes_each_rows_episode_since_its_reset():
    sigma = np.stack([schedule(5, 20), schedule(6, 20)], axis=1)[:, :, None]  # (rounds, rows, 1)
    ledger = PLDLedger(np.full((2, 1), 0.05), value_discretization=1e-3)
    for t in range(10):
        ledger.record(sigma[t])
    ledger.reset(np.array([False, True]))  # row 1 starts over
    for t in range(10, 20):
        ledger.record(sigma[t])
    eps = ledger.epsilon(DELTA)
    kwargs = {"q": 0.05, "delta": DELTA, "value_discretization": 1e-3}
    assert eps[0, 0] == pytest.approx(float(pld_epsilon(noise_multiplier=sigma[:, 0, 0], **kwargs)), rel=1e-6)
    assert eps[1, 0] == pytest.approx(float(pld_epsilon(noise_multiplier=sigma[10:, 1, 0], **kwargs)), rel=1e-6)
    assert ledger.epsilon(DELTA, rows=[1])[0, 0] == 0.0


def test_the_env_reports_the_pld_epsilon_of_its_devices_rounds_beside_the_rdp_one():
    """accountant="pld": info["dp_epsilon_pld"] at the episode's end is pld_epsilon of each device's noise
    multipliers as the env reported them, and below the RDP ledger's dp_epsilon; the reward is the same."""
    kwargs = {"num_rounds": 30}
    env, plain = OTAPrivacyEnv(accountant="pld", **kwargs), OTAPrivacyEnv(**kwargs)
    env.reset(seed=3)
    plain.reset(seed=3)
    sigmas, q = [], env.unwrapped.scenario.batch_size / env.unwrapped.scenario.dataset_size
    for _ in range(30):
        action = np.array([0.3], dtype=np.float32)
        _, reward, terminated, _, info = env.step(action)
        assert reward == plain.step(action)[1]
        sigmas.append(info["noise_multiplier"])
    assert terminated
    expected = pld_epsilon(q=q, noise_multiplier=np.array(sigmas), delta=env.unwrapped.scenario.delta)
    np.testing.assert_allclose(info["dp_epsilon_pld"], expected, rtol=1e-6)
    assert np.all(info["dp_epsilon_pld"] < info["dp_epsilon"])


def test_the_vector_env_reports_it_where_an_episode_ended():
    envs = OTAPrivacyVectorEnv(3, accountant="pld", num_rounds=5)
    envs.reset(seed=0)
    for _ in range(5):
        _, _, terminated, _, info = envs.step(np.zeros((3, 1), dtype=np.float32))
    assert terminated.all() and np.all(info["dp_epsilon_pld"] > 0) and np.all(info["_dp_epsilon_pld"])
    assert info["dp_epsilon_pld_from_rdp"].dtype == bool and not info["dp_epsilon_pld_from_rdp"].any()
    envs = OTAPrivacyVectorEnv(2, accountant="pld", num_rounds=5, delta=1e-16)  # the PLD's rounding is above delta
    envs.reset(seed=0)
    for _ in range(5):
        _, _, _, _, info = envs.step(np.zeros((2, 1), dtype=np.float32))
    assert info["dp_epsilon_pld_from_rdp"].all()
    np.testing.assert_allclose(info["dp_epsilon_pld"], info["dp_epsilon"], rtol=1e-9)
    with pytest.raises(ValueError, match="accountant must be one of 'rdp', 'pld'"):
        OTAPrivacyEnv(accountant="prv")


@pytest.mark.slow
@pytest.mark.parametrize("scheme, kwargs", [("cdpb", {"num_rounds": 6}), ("anonymous", {"num_rounds": 6})])
def test_cdpb_and_anonymous_report_it_below_their_rdp_epsilon(scheme, kwargs):
    """Their SGM rounds (CDPB: each client's rate = its participation; anonymous OTA: the sampled accounting) composed
    by the PLD: finite, positive, below the RDP ledger's ε; the rewards are the same as without it."""
    env, plain = (OTAPrivacyVectorEnv(2, scheme=scheme, **kwargs, **extra) for extra in ({"accountant": "pld"}, {}))
    env.reset(seed=1)
    plain.reset(seed=1)
    for _ in range(6):
        action = np.zeros((2, 1), dtype=np.float32)
        _, reward, terminated, _, info = env.step(action)
        np.testing.assert_array_equal(reward, plain.step(action)[1])
    assert terminated.all()
    assert np.all(np.isfinite(info["dp_epsilon_pld"])) and np.all(info["dp_epsilon_pld"] > 0)
    assert np.all(info["dp_epsilon_pld"] <= info["dp_epsilon"])


def test_a_schedule_too_leaky_for_a_fine_grid_gets_a_coarser_one_and_says_so():
    """Noise multipliers of 0.01 (a round's loss up to ~5,000 nats) would need ~1e10 points at the grid their loss's
    spread asks for: the grid coarsens until a round fits MAX_POINTS, the account reports it, and ε is
    dp_accounting's at that grid up to the tail share and one point of it (203,860 against 203,645; the RDP ledger's
    is 499,941)."""
    from dp_accounting.pld import privacy_loss_distribution

    account = pld_account(q=0.5, noise_multiplier=np.full(50, 0.01), delta=DELTA)
    d = float(account.discretization)
    assert d > 1.0 and not account.from_rdp
    pld = privacy_loss_distribution.from_gaussian_mechanism(standard_deviation=0.01, sampling_prob=0.5,
                                                            value_discretization_interval=d).self_compose(50)
    upper = pld.get_epsilon_for_delta(DELTA * (1 - TAIL_SHARE)) + d
    assert pld.get_epsilon_for_delta(DELTA) <= account.epsilon <= upper


@pytest.mark.parametrize("q, sigma, rounds", [(0.01, 1.0, 10_000), (256 / 60_000, 1.1, 14_062)])
def test_a_long_schedule_gets_a_grid_fine_enough_to_stay_below_the_rdp_ledger(q, sigma, rounds):
    """Each round's pessimistic rounding adds up: the default grid narrows with the number of rounds, so ten
    thousand rounds are within 1% of dp_accounting at 1e-4 and well below the RDP ledger (by 8% here)."""
    from dp_accounting.pld import privacy_loss_distribution

    schedule = np.full(rounds, sigma)
    reference = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=sigma, sampling_prob=q, value_discretization_interval=1e-4).self_compose(rounds)
    exact = reference.get_epsilon_for_delta(DELTA)
    ours = pld_epsilon(q=q, noise_multiplier=schedule, delta=DELTA)
    rdp = rdp_to_dp(rounds * rdp_sgm(q=q, noise_multiplier=sigma, orders=DEFAULT_ORDERS), DEFAULT_ORDERS, DELTA)[0]
    assert exact <= ours <= exact * 1.01 and ours < 0.95 * rdp


def test_rates_per_round_broadcast_along_the_rounds_axis():
    sigma = np.stack([schedule(7, 10), schedule(8, 10)], axis=1)  # (rounds, 2)
    rates = np.linspace(0.01, 0.1, 10)
    both = pld_epsilon(q=rates, noise_multiplier=sigma, delta=DELTA)
    assert both.shape == (2,)
    assert both[1] == pytest.approx(float(pld_epsilon(q=rates, noise_multiplier=sigma[:, 1], delta=DELTA)), rel=1e-6)


def test_pld_epsilon_edge_inputs_are_answered_not_raised():
    """A noise multiplier past 1e155 (1/sigma^2 underflows) is rounded down to HUGE_SIGMA: epsilon 0 to float
    precision, as at 1e100 and inf; no rounds compose to 0; a missing q is named."""
    from otagym.accounting.pld import pld_epsilon

    for sigma in (1e100, 1e300, np.inf):
        assert pld_epsilon(q=0.1, noise_multiplier=sigma, delta=1e-5) == pytest.approx(0.0, abs=1e-12)
    assert pld_epsilon(q=[], noise_multiplier=[], delta=1e-5).shape == ()
    assert pld_epsilon(q=np.empty((0, 3)), noise_multiplier=1.0, delta=1e-5).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="q is required"):
        pld_epsilon(q=None, noise_multiplier=1.0, delta=1e-5)


def test_a_delta_or_a_loss_past_floats_gets_the_rdp_bound_or_a_coarse_grid_not_an_error():
    """The fault campaign's fuzzing found both: a delta of 5e-324 (its share of the window underflows: the RDP
    ledger's ε, said so) and noise multipliers of 1e-4 (losses of ~5e7 nats: a grid of hundreds of nats)."""
    tiny = pld_account(q=0.01, noise_multiplier=np.ones(10), delta=5e-324)
    assert tiny.from_rdp and np.isfinite(tiny.epsilon)
    huge = pld_account(q=0.5, noise_multiplier=np.full(3, 1e-4), delta=DELTA)
    assert np.isfinite(huge.epsilon) and huge.discretization > 100
