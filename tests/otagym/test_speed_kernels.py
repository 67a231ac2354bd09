"""The fast paths of the round and of the ledger against their references: the tabulated RDP curves against the exact
series (eq. (9), rdp_sgm) and 60-digit mpmath, never below it; a round's numbers independent of the batch around an env
and of the kernel's thread count (docs/speed.md)."""

import math

import mpmath as mp
import numpy as np
import pytest

import otagym.accounting.ledger as ledger_module
from otagym import OTAPrivacyVectorEnv, jit
from otagym.accounting import DEFAULT_ORDERS, RDPLedger, rdp_sgm
from otagym.accounting.tables import _curve_table, _LedgerTables

ORDERS = np.asarray(DEFAULT_ORDERS, dtype=float)


def table_round(q: float, sigma: np.ndarray) -> np.ndarray:
    """One round's RDP at DEFAULT_ORDERS of each noise multiplier, from the tables of sampling rate q."""
    tables = _LedgerTables.build(np.full(ledger_module._TABLE_MIN_ELEMENTS, q), ORDERS)
    assert tables is not None
    tables = type(tables)(**{**tables.__dict__, "group": np.zeros(sigma.size, dtype=np.int64)})
    totals = np.zeros((sigma.size, ORDERS.size))
    tables.add(totals, np.ascontiguousarray(sigma, dtype=float))
    return totals


def mp_rdp(q: float, u: float, alpha: int) -> mp.mpf:
    """Eq. (9) at 60 digits: log1p(sum_{k>=2} C(alpha,k) (1-q)^(alpha-k) q^k expm1(u (k^2-k)/2)) / (alpha - 1)."""
    with mp.workdps(60):
        q, u = mp.mpf(q), mp.mpf(u)
        s = mp.fsum(mp.binomial(alpha, k) * (1 - q) ** (alpha - k) * q**k * mp.expm1(u * (k * k - k) / 2)
                    for k in range(2, alpha + 1))
        return mp.log1p(s) / (alpha - 1)


@pytest.mark.parametrize("q", [1e-3, 0.01, 0.08, 0.5, 0.9])
def test_tables_agree_with_the_series_within_their_bounds(q):
    """Across the whole range of u = 1/sigma^2 (below the table: the chord; above it: the asymptote; between: the
    interpolants, the two-cluster ones included), every order: within [-2e-12, 1e-12] of rdp_sgm. Both are upper
    bounds on eq. (9): the tables within 1e-12 of it, the series up to ~1.6e-12 above it (its rounding bound, where
    the terms near k = alpha take over); mpmath below checks the tables' sign against the exact value."""
    table = _curve_table(q, DEFAULT_ORDERS)
    v = np.random.default_rng(0).uniform(table.v_lo - 3.0, math.log(table.edges[-1]) + 3.0, 3000)
    sigma = np.exp(-0.5 * v)
    got = table_round(q, sigma)
    exact = rdp_sgm(q=q, noise_multiplier=sigma, orders=DEFAULT_ORDERS)
    rel = got / exact - 1
    assert rel.min() >= -2e-12 and rel.max() <= 1e-12, (rel.min(), rel.max())


@pytest.mark.parametrize("q,u,alpha", [(0.01, 0.0408, 226), (0.01, 0.0361, 256), (0.01, 8.9e-16, 256),
                                       (0.01, 0.3, 28), (0.08, 0.0558, 79), (0.5, 0.567, 22), (0.9, 0.87, 17),
                                       (0.01, 1.0, 2), (0.01, 200.0, 256)])
def test_tables_are_upper_bounds_on_the_exact_rdp(q, u, alpha):
    """At the hardest points found (where the terms near k = alpha overtake those near k = alpha q, at tiny u, above
    the table): never below 60-digit eq. (9), and within 1e-12 of it."""
    sigma = np.array([u**-0.5])
    u_played = 1.0 / (sigma[0] * sigma[0])  # the u the ledger evaluates
    got = table_round(q, sigma)[0, DEFAULT_ORDERS.index(alpha)]
    exact = mp_rdp(q, u_played, alpha)
    assert mp.mpf(got) >= exact
    assert mp.mpf(got) <= exact * (1 + mp.mpf("1e-12"))


def test_a_large_ledger_reads_tables_and_agrees_with_the_series():
    """A ledger of 1024 elements (two sampling rates and q = 0, 1) uses the tables; its totals over 50 rounds equal
    the series' sums within 1e-12, with q = 0 leaking nothing and q = 1 leaking alpha u / 2 exactly."""
    q = np.tile([0.0, 0.01, 0.3, 1.0], 256).reshape(256, 4)
    rng = np.random.default_rng(1)
    sigmas = rng.uniform(0.5, 5.0, size=(50, 256, 4))
    ledger = RDPLedger(q)
    assert ledger._tables is not None
    for s in sigmas:
        ledger.record(s)
    ref = sum(rdp_sgm(q=q, noise_multiplier=s, orders=DEFAULT_ORDERS) for s in sigmas)
    np.testing.assert_allclose(ledger.rdp, ref, rtol=1e-12, atol=0)
    assert (ledger.rdp[:, 0] == 0).all()
    np.testing.assert_allclose(ledger.rdp[:, 3], sum(ORDERS * s[:, 3, None] ** -2.0 / 2 for s in sigmas), rtol=1e-14)
    small = RDPLedger(q[:3])  # below _TABLE_MIN_ELEMENTS: the series
    assert small._tables is None


def test_a_small_ledger_tabulates_once_the_series_has_cost_a_tables_build(monkeypatch):
    """A ledger of 10 elements sums the series until it has spent _TABLE_AFTER units (5 + 10 a round) and then reads
    the tables: its totals stay within 1e-12 above the series' sums (never below), an invalid round still raises naming
    the parameter and leaves the totals as they were, and a ledger that cannot tabulate (a fractional order) keeps the
    series."""
    monkeypatch.setattr(ledger_module, "_TABLE_AFTER", 150)
    q = np.full(10, 0.01)
    sigmas = np.random.default_rng(3).uniform(0.5, 5.0, size=(40, 10))
    ledger = RDPLedger(q)
    for k, s in enumerate(sigmas):
        assert (ledger._tables is None) == (k <= 10), k  # 11 rounds of 15 units exceed 150
        ledger.record(s)
    ref = sum(rdp_sgm(q=q, noise_multiplier=s, orders=DEFAULT_ORDERS) for s in sigmas)
    rel = ledger.rdp / ref - 1
    assert rel.min() >= -5e-13 and rel.max() <= 1e-12, (rel.min(), rel.max())
    before = ledger.rdp.copy()
    with pytest.raises(ValueError, match="noise_multiplier must be finite and >= 0"):
        ledger.record(np.r_[np.ones(9), np.nan])
    np.testing.assert_array_equal(ledger.rdp, before)
    fractional = RDPLedger(q, orders=(1.5, 2, 8))
    for s in sigmas:
        fractional.record(s)
    assert fractional._tables is None


def test_an_envs_round_does_not_depend_on_the_batch_around_it():
    """Env 3 of a batch of 7 and the same env alone (same channel trace, nu and actions): the same observations,
    rewards and info, to the bit (the kernel works env by env)."""
    rng = np.random.default_rng(2)
    gains = rng.exponential(1e-9, size=(20, 7, 10))
    nu = rng.uniform(0.01, 0.16, size=7)
    batch = OTAPrivacyVectorEnv(7, num_rounds=20, dp_orders=None)
    batch.reset(seed=0, options={"channel_gains": gains, "nu": nu, "distances_m": np.full((7, 10), 50.0)})
    alone = OTAPrivacyVectorEnv(1, num_rounds=20, dp_orders=None)
    alone.reset(seed=0, options={"channel_gains": gains[:, 3:4], "nu": nu[3:4], "distances_m": np.full((1, 10), 50.0)})
    actions = rng.uniform(-1, 1, size=(20, 7, 1))
    for a in actions:
        obs_b, rew_b, _, _, info_b = batch.step(a)
        obs_a, rew_a, _, _, info_a = alone.step(a[3:4])
        np.testing.assert_array_equal(obs_b[3], obs_a[0])
        assert rew_b[3] == rew_a[0]
        for key in ("x", "receive_scaling", "noise_multiplier", "rdp_cumulative", "transmit_power_w", "cost"):
            np.testing.assert_array_equal(info_b[key][3], info_a[key][0])


@pytest.mark.slow  # compiles the parallel kernels: 19 s
def test_the_round_on_every_core_equals_the_round_on_one(monkeypatch):
    """jit.PARALLEL_FROM changes where the kernels run, not their numbers: the same episode (600 envs, the ledger
    on its tables) on one core and over numba's threads, to the bit."""
    results = []
    for setting in (None, 1):
        monkeypatch.setattr(jit, "PARALLEL_FROM", setting)
        env = OTAPrivacyVectorEnv(600, num_rounds=6)
        env.reset(seed=4)
        steps = [env.step(np.full((600, 1), a, np.float32)) for a in (-0.5, 0.0, 0.3, 0.9, -1.0, 1.0)]
        results.append(steps)
    for one, every in zip(*results):
        np.testing.assert_array_equal(one[0], every[0])
        np.testing.assert_array_equal(one[1], every[1])
        for key in ("x", "rdp_cumulative", "dp_epsilon"):
            if key in one[4]:
                np.testing.assert_array_equal(one[4][key], every[4][key])
    assert "dp_epsilon" in results[0][-1][4]


@pytest.mark.parametrize("kwargs", [{}, {"fading": "gauss_markov", "correlation": 0.9},
                                    {"fading": "block", "coherence_rounds": 3, "nu_range": (0.01, 0.16)},
                                    {"action_type": "share"},
                                    {"reward_mode": "lagrangian", "action_type": "spend", "reward_lambda": 0.1},
                                    {"reward_mode": "cmdp", "action_type": "x"}])
def test_the_round_kernel_gets_the_types_it_was_compiled_for(monkeypatch, kwargs):
    """The round's kernel is called without numba's dispatch (jit.specialised), so every call's arguments must
    have the numba types it was compiled for, whatever the user passes: actions as float16, float32, float64 or int,
    (N,) or (N, 1), a list, a strided, broadcast or read-only view or (one env) a scalar; resets with and without
    options (nu, a broadcast placement, a Fortran-ordered replayed trace, then a sampled channel again); both
    autoreset modes. A changed type would be misread by the compiled
    code (a strided view read as C-ordered gives wrong numbers without an error)."""
    import gymnasium as gym
    from numba import typeof

    from otagym import OTAPrivacyEnv

    compiled, calls = jit.specialised, []

    def checking(kernel, args):
        signature, entry = tuple(map(typeof, args)), compiled(kernel, args)

        def call(*args):
            calls.append(tuple(map(typeof, args)) == signature)
            return entry(*args)
        return call
    monkeypatch.setattr(jit, "specialised", checking)
    single = OTAPrivacyEnv(num_rounds=4, dp_orders=None, **kwargs)
    low = max(float(single.action_space.low[0]), -0.5)
    m = single.scenario.num_devices
    for options in (None, {"nu": 0.05}, {"distances_m": np.broadcast_to(60.0, (m,))},
                    {"channel_gains": np.asfortranarray(np.full((4, m), 1e-9))}, None):
        single.reset(seed=1, options=options)
        for action in (np.array([low], np.float32), np.array([low]), [low], low, np.array([[low, 0.0]])[:, 0]):
            if single.core.t[0] == 4:
                single.reset()
            single.step(action)
    for mode in (gym.vector.AutoresetMode.NEXT_STEP, gym.vector.AutoresetMode.SAME_STEP):
        vector = OTAPrivacyVectorEnv(3, num_rounds=4, dp_orders=None, autoreset_mode=mode, **kwargs)
        wide = np.full((3, 2), low)
        readonly = np.full((3, 1), low)
        readonly.flags.writeable = False
        actions = (np.full((3, 1), low, np.float32), np.full(3, low, np.float16), np.full(3, low), [low] * 3,
                   wide[:, 1], wide[:, :1], np.broadcast_to(low, (3,)), readonly)
        if "action_type" not in kwargs:
            actions += (np.zeros(3, dtype=np.int64),)
        for options in (None, {"channel_gains": np.asfortranarray(np.full((4, 3, m), 1e-9)),
                               "distances_m": np.broadcast_to(60.0, (3, m))}, None):
            vector.reset(seed=0, options=options)
            for action in actions:  # autoresets along the way
                vector.step(action)
    assert len(calls) > 60 and all(calls)


def test_an_env_pickled_mid_episode_plays_on_as_the_original():
    """The compiled round a ReceiveScalingCore keeps is not pickled (numba's compiled code is not picklable); the copy finds it
    again and plays the same rounds, to the bit."""
    import pickle

    from otagym import OTAPrivacyEnv

    env = OTAPrivacyEnv(num_rounds=6)
    env.reset(seed=3)
    env.step(np.array([0.2], np.float32))
    copy = pickle.loads(pickle.dumps(env))
    for a in (-0.4, 0.1, 0.9, -1.0, 0.0):
        ours, theirs = env.step(np.array([a], np.float32)), copy.step(np.array([a], np.float32))
        np.testing.assert_array_equal(ours[0], theirs[0])
        assert ours[1] == theirs[1] and ours[2] == theirs[2]
    np.testing.assert_array_equal(ours[4]["dp_epsilon"], theirs[4]["dp_epsilon"])
