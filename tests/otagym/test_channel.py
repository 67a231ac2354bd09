"""Channel model: path loss closed form, E|h|^2 = 1/PL, exponential marginals (KS), block and AR(1) correlation."""

import numpy as np
import pytest
from scipy import stats

from otagym.channel import ChannelModel, mean_channel_gain, path_loss_db
from otagym.schemes.receive_scaling import get_scenario


def test_cost231_hata_numbers():
    np.testing.assert_allclose(path_loss_db([1.0, 10.0, 100.0]), [33.44, 68.66, 103.88])
    np.testing.assert_allclose(mean_channel_gain(100.0), 10 ** (-10.388))


def _model(**kw):
    return ChannelModel.from_scenario(get_scenario("paper-mnist", distances_m=(10.0, 50.0, 200.0), num_devices=3, **kw))


@pytest.mark.parametrize("fading,kw", [("iid", {}), ("block", {"coherence_rounds": 5}),
                                       ("gauss_markov", {"correlation": 0.8})])
def test_mean_gain_and_exponential_marginal(fading, kw):
    model = _model(fading=fading, **kw)
    rng = np.random.default_rng(0)
    distances, gains = model.sample_trace(rng, 400, batch_shape=(200,))  # (T, envs, M)
    mean = mean_channel_gain(distances[0])
    normalised = gains / mean
    # E|h|^2 = 1/PL within a 5-sigma CI of the sample mean (blocks/AR reduce the effective sample size: use envs).
    per_env_mean = normalised.mean(axis=0)  # (envs, M): independent across envs
    se = per_env_mean.std(axis=0, ddof=1) / np.sqrt(per_env_mean.shape[0])
    assert np.all(np.abs(per_env_mean.mean(axis=0) - 1.0) < 5 * se)
    # |h|^2 PL ~ Exponential(1): KS test on one round across independent envs, for each device.
    for m in range(3):
        assert stats.kstest(normalised[123, :, m], "expon").pvalue > 1e-3


def test_block_fading_is_constant_within_blocks_and_redrawn_between():
    _, gains = _model(fading="block", coherence_rounds=4).sample_trace(np.random.default_rng(1), 12)
    for start in (0, 4, 8):
        np.testing.assert_array_equal(gains[start:start + 4], np.broadcast_to(gains[start], (4, 3)))
    assert np.all(gains[3] != gains[4])


def test_gauss_markov_lag_one_power_correlation_is_rho_squared():
    rho = 0.9
    _, gains = _model(fading="gauss_markov", correlation=rho).sample_trace(np.random.default_rng(2), 2000,
                                                                           batch_shape=(50,))
    x = gains[:-1, :, 0].ravel()
    y = gains[1:, :, 0].ravel()
    r = np.corrcoef(x, y)[0, 1]
    assert abs(r - rho**2) < 0.03
    _, iid = _model().sample_trace(np.random.default_rng(3), 2000, batch_shape=(50,))
    assert abs(np.corrcoef(iid[:-1, :, 0].ravel(), iid[1:, :, 0].ravel())[0, 1]) < 0.02


def test_random_placement_is_uniform_in_range():
    model = ChannelModel.from_scenario(get_scenario("paper-mnist"))
    d = model.draw_distances(np.random.default_rng(4), (5000,))
    assert d.shape == (5000, 10) and d.min() >= 10 and d.max() <= 200
    assert stats.kstest(d[:, 0], "uniform", args=(10, 190)).pvalue > 1e-3
