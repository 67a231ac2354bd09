"""A-FADMM, D-FADMM and A-GD (seed 001) against independent computations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from otagym.training import partition  # noqa: E402
from benchmarks.fadmm import (Radio, State, Trace, a_fadmm_iteration, diabetes_task,  # noqa: E402
                                   digital_upload_slots, digits_task, draw_channels, over_the_air, power_scaling, run,
                                   shannon_bits_per_slot, transmit_signal, truncated_inversion)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def task5():
    return diabetes_task(5, np.random.default_rng(0))


def standardised_diabetes() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_diabetes

    x, y = load_diabetes(return_X_y=True, scaled=False)
    return (x - x.mean(0)) / x.std(0), (y - y.mean()) / y.std()


def test_local_objectives_are_the_squared_errors_of_each_workers_rows(task5):
    """f_n(theta_n) = ||y_n - X_n theta_n||^2 on the rows partition() gives worker n (App. H)."""
    x, y = standardised_diabetes()
    parts = partition(y, 5, np.random.default_rng(0))
    theta = np.random.default_rng(1).standard_normal((5, 10))
    expected = [np.sum((y[p] - x[p] @ t) ** 2) for p, t in zip(parts, theta)]
    np.testing.assert_allclose(task5.objective(theta), expected, rtol=1e-12)
    xs, ys = x[parts[2]], y[parts[2]]
    np.testing.assert_allclose(task5.gradient(theta, None)[2], -2 * xs.T @ (ys - xs @ theta[2]), rtol=1e-12, atol=1e-12)


def test_noiseless_unit_channel_a_fadmm_converges_to_least_squares(task5):
    """h = 1 and (numerically) no noise: A-FADMM is ADMM on (P1) and Theta -> numpy.linalg.lstsq of all the data."""
    x, y = standardised_diabetes()
    reference = np.linalg.lstsq(x, y, rcond=None)[0]
    trace = run("a-fadmm", task5, np.random.default_rng(1), iterations=1000, rho=50.0,
                radio=Radio(fading="none", snr_db=300.0))
    np.testing.assert_allclose(trace.global_model, reference, rtol=0, atol=1e-10)
    assert trace.metrics["gap"][-1] < 1e-12 * task5.optimal_value
    assert np.all(trace.slots == 1) and np.all(trace.channel_uses == 10)  # d = 10 <= S = 10: one slot


def test_upload_is_not_channel_inverted_and_respects_the_power_limit():
    """h x = |h|^2 theta + mu / rho (the summand of (7)) and the most demanding worker uses exactly P d."""
    rng = np.random.default_rng(2)
    h = draw_channels(rng, 4, 6)
    theta, mu = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    x = transmit_signal(h, theta, mu, 0.5)
    np.testing.assert_allclose(h * x, np.abs(h) ** 2 * theta + mu / 0.5, atol=1e-12)
    alpha = power_scaling(x, 0.15)
    energy = alpha**2 * (np.abs(x) ** 2).sum(axis=1)
    assert energy.max() == pytest.approx(0.15 * 6) and np.all(energy <= 0.15 * 6 * (1 + 1e-12))


def test_received_noise_has_the_matched_filter_variance():
    """Zero signals: what the PS gets is z / alpha with E|z|^2 = N_o / T (23); chi-square test on Re and Im."""
    radio = Radio(noise_psd_w_per_hz=2e-9, slot_duration_s=1e-3)
    assert radio.analog_noise_var_w == pytest.approx(2e-6)
    d, alpha = 200_000, 3.0
    y = over_the_air(np.ones((3, d), dtype=complex), np.zeros((3, d)), alpha, radio.analog_noise_var_w,
                     np.random.default_rng(3))
    per_part = 2e-9 / 1e-3 / 2 / alpha**2
    lo, hi = stats.chi2.ppf([1e-4, 1 - 1e-4], df=d)
    for part in (y.real, y.imag):
        assert lo < (part**2).sum() / per_part < hi
    assert abs(np.mean(y.real * y.imag)) < 5 * per_part / np.sqrt(d)


def test_frozen_primal_on_a_channel_change_and_the_dual_absorbs_it(task5):
    """When h changes, theta^{k+1} = theta^k and the dual solves (27) under the new channel (Alg. 1 lines 9-11); the
    dual update (28) then follows with the new Theta."""
    rng = np.random.default_rng(4)
    radio = Radio(snr_db=30.0)
    n, d = task5.num_workers, task5.dim
    state = State(local=rng.standard_normal((n, d)), dual=rng.standard_normal((n, d)),
                  global_model=rng.standard_normal(d), channel=draw_channels(rng, n, d))
    old_local, old_global = state.local.copy(), state.global_model.copy()
    gain = np.abs(state.channel) ** 2
    a_fadmm_iteration(task5, radio, state, rho=0.5, channel_changed=True, rng=rng)
    np.testing.assert_array_equal(state.local, old_local)
    absorbed = state.dual - 0.5 * gain * (state.local - state.global_model)  # mu before (28)
    gradient = task5.gradient(old_local, None)
    np.testing.assert_allclose(gradient + absorbed + 0.5 * gain * (old_local - old_global), 0.0, atol=1e-9)
    # without a change the primal moves and satisfies (27) with the stored dual
    before = state.dual.copy()
    centre = state.global_model.copy()
    a_fadmm_iteration(task5, radio, state, rho=0.5, channel_changed=False, rng=rng)
    stationarity = task5.gradient(state.local, None) + before + 0.5 * gain * (state.local - centre)
    np.testing.assert_allclose(stationarity, 0.0, atol=1e-9)


def test_d_fadmm_bit_budget_is_the_shannon_rate():
    """bits per slot = sum_j W T log2(1 + P |h_j|^2 / (N_o W)) over the worker's subcarriers (App. B/H), and the
    upload takes the fewest slots that carry 32 d bits."""
    radio = Radio(snr_db=20.0, num_subcarriers=40)
    rng = np.random.default_rng(5)
    gain = np.abs(draw_channels(rng, 8, 5)) ** 2  # 40 / 8 = 5 subcarriers per worker
    got = shannon_bits_per_slot(gain, radio.snr, radio.subcarrier_bandwidth_hz, radio.slot_duration_s, 5.0)
    p = 100.0 * 1e-9 * 15e3
    expected = [sum(15e3 * 1e-3 * np.log2(1 + p * g / (1e-9 * 15e3)) for g in row) for row in gain]
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    slots = digital_upload_slots(32 * 10, got)
    assert np.all(slots * got >= 320) and np.all((slots - 1) * got < 320)


def test_d_fadmm_channel_uses_grow_linearly_with_workers_a_fadmm_do_not():
    """Fig. 2(c)'s mechanism: per iteration D-FADMM needs about 32 d N / (W T E log2(1 + SNR |h|^2)) channel uses,
    A-FADMM d whatever N."""
    workers = [10, 20, 40, 80]
    digital, analog = [], []
    for n in workers:
        task = diabetes_task(n, np.random.default_rng(0))
        digital.append(run("d-fadmm", task, np.random.default_rng(6), iterations=200).channel_uses.mean())
        analog.append(run("a-fadmm", task, np.random.default_rng(6), iterations=10).channel_uses.mean())
    assert analog == [10.0] * 4
    fit = stats.linregress(workers, digital)
    assert fit.rvalue > 0.99 and abs(fit.intercept) < 0.1 * digital[-1]
    per_worker = 320 / (15e3 * 1e-3 * np.mean(np.log2(1 + 1e4 * np.random.default_rng(7).exponential(size=10**6))))
    assert fit.slope == pytest.approx(per_worker, rel=0.25)  # ceil() and the worst worker add a little


def test_truncated_inversion_silences_weak_channels():
    h = np.array([[2.0 + 0j, 0.01j], [0.5 + 0j, 1j]])
    x, active = truncated_inversion(h, np.ones((2, 2)), threshold=0.1)
    np.testing.assert_array_equal(active, [[True, False], [True, True]])
    np.testing.assert_allclose(h * x, active.astype(float))


def test_reach_counts_the_uploads_spent_by_the_first_hit():
    trace = Trace("a-fadmm", {"loss": np.array([1.0, 0.5, 0.05, 0.2, 0.01])}, np.array([2, 3, 4, 5, 6]),
                  np.array([10.0, 10.0, 10.0, 10.0, 10.0]), np.zeros(1), {})
    assert trace.reach("loss", 0.1) == (3, 9, 30.0)
    assert trace.reach("loss", 0.001) is None
    assert trace.reach("loss", 0.5, above=True) == (1, 2, 10.0)


@pytest.mark.parametrize("method", ["a-fadmm", "d-fadmm", "a-gd"])
def test_same_seed_same_trajectory(task5, method):
    a = run(method, task5, np.random.default_rng(8), iterations=30, rho=5.0)
    b = run(method, task5, np.random.default_rng(8), iterations=30, rho=5.0)
    for key in a.metrics:
        np.testing.assert_array_equal(a.metrics[key], b.metrics[key])
    np.testing.assert_array_equal(a.slots, b.slots)
    c = run(method, task5, np.random.default_rng(9), iterations=30, rho=5.0)
    # D-FADMM's updates are noise free: only its channels (its slots) depend on the seed
    same = np.array_equal(a.slots, c.slots) if method == "d-fadmm" else np.array_equal(a.global_model, c.global_model)
    assert not same


def test_mlp_same_seed_same_trajectory_and_learns():
    task = digits_task(4, np.random.default_rng(0), local_steps=5)
    radio = Radio(num_subcarriers=4096)
    a = run("a-fadmm", task, np.random.default_rng(1), iterations=12, radio=radio)
    b = run("a-fadmm", task, np.random.default_rng(1), iterations=12, radio=radio)
    np.testing.assert_array_equal(a.global_model, b.global_model)
    assert task.dim == 17_226 and np.all(a.slots == 5)  # ceil(17,226 / 4,096)
    assert a.metrics["accuracy"][-1] > max(0.6, a.metrics["accuracy"][0])


@pytest.mark.parametrize("call, error, words", [
    (lambda t: run("admm", t, np.random.default_rng(0), iterations=1), ValueError, "method must be one of"),
    (lambda t: run("a-fadmm", t, 0, iterations=1), TypeError, "rng must be a numpy.random.Generator"),
    (lambda t: run("a-fadmm", t, np.random.default_rng(0), iterations=0), ValueError, "iterations must be"),
    (lambda t: run("a-fadmm", t, np.random.default_rng(0), iterations=1, rho=0.0), ValueError, "rho must be"),
    (lambda t: run("a-gd", t, np.random.default_rng(0), iterations=1, learning_rate=-1.0), ValueError,
     "learning_rate must be"),
    (lambda t: Radio(num_subcarriers=0), ValueError, "Radio.num_subcarriers must be an integer in"),
    (lambda t: Radio(snr_db="40"), TypeError, "Radio.snr_db must be a finite number"),
    (lambda t: Radio(fading="rician"), ValueError, "Radio.fading must be one of"),
    (lambda t: diabetes_task(443, np.random.default_rng(0)), ValueError, "num_workers must be an integer in [1, 442]"),
    (lambda t: digits_task(2, np.random.default_rng(0), local_steps=0), ValueError, "local_steps must be"),
])
def test_bad_arguments_are_refused_by_name(task5, call, error, words):
    with pytest.raises(error, match=words.replace("[", r"\[").replace("(", r"\(")):
        call(task5)
