"""Training fidelity (issue 10, first part): the FedSGD-over-the-air engine against independent computations."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from scipy import stats

torch = pytest.importorskip("torch")

from otagym.training import (DigitsCNN, FedSGD, MnistCNN, UpdateRule, clipped_gradient_sum,  # noqa: E402
                             digits_dataset, num_parameters, ota_aggregate, partition, poisson_sample)
from otagym.training.fedsgd import receiver_noise_std  # noqa: E402


def test_mnist_cnn_has_the_papers_26010_parameters():
    assert num_parameters(MnistCNN()) == 26_010
    assert MnistCNN()(torch.zeros(3, 1, 28, 28)).shape == (3, 10)


@pytest.mark.parametrize("path", ["layers", "vmap"])
def test_clipped_gradient_sum_equals_opacus_grad_sample(path, monkeypatch):
    """Per-sample gradients, clipped and summed, equal Opacus's GradSampleModule's to 1e-6, by both paths: per
    layer (chosen for this model) and torch.func (forced here, as for models with other layers); the summed loss is
    the forward's."""
    from otagym.training import fedsgd, stacked

    if path == "vmap":
        monkeypatch.setattr(stacked, "_layers_supported", lambda model: False)
    opacus = pytest.importorskip("opacus")
    torch.manual_seed(0)
    model = MnistCNN()
    x, y = torch.randn(12, 1, 28, 28), torch.randint(0, 10, (12,))
    clip = 0.05  # small enough that most samples are clipped
    ours, loss = fedsgd.clipped_gradient_sum_and_loss(model, x, y, clip)
    assert loss == pytest.approx(float(torch.nn.functional.cross_entropy(model(x), y, reduction="sum")), rel=1e-6)
    gsm = opacus.GradSampleModule(MnistCNN(), loss_reduction="sum")
    gsm._module.load_state_dict(model.state_dict())
    torch.nn.functional.cross_entropy(gsm(x), y, reduction="sum").backward()
    per_sample = torch.cat([p.grad_sample.reshape(12, -1) for p in gsm.parameters()], dim=1)
    scale = torch.clamp(clip / per_sample.norm(dim=1), max=1.0)
    ref = scale @ per_sample
    assert (per_sample.norm(dim=1) > clip).sum() >= 6
    torch.testing.assert_close(ours, ref, rtol=1e-6, atol=1e-6)


def test_receiver_noise_has_the_variance_of_eq_13():
    """With zero gradients the aggregate is the receiver noise: per-coordinate variance sigma_n^2 / (2 eta)
    (chi-square test at d = 200,000), and with no noise it is (1/M) sum_m sums_m / B_m exactly."""
    rng = np.random.default_rng(5)
    sigma2, eta = 1e-12, 3e-10
    std = receiver_noise_std(sigma2, eta)
    r = ota_aggregate(torch.zeros(4, 200_000, dtype=torch.float64), [60.0] * 4, std, rng).numpy()
    stat = (r**2).sum() / (sigma2 / (2 * eta))
    lo, hi = stats.chi2.ppf([1e-4, 1 - 1e-4], df=r.size)
    assert lo < stat < hi
    sums = torch.randn(3, 5, dtype=torch.float64)
    got = ota_aggregate(sums, [2.0, 4.0, 8.0], 0.0, rng)
    torch.testing.assert_close(got, (sums[0] / 2 + sums[1] / 4 + sums[2] / 8) / 3)


def test_poisson_sampling_has_rate_q():
    rng = np.random.default_rng(0)
    counts = np.array([len(poisson_sample(rng, 600, 0.1)) for _ in range(2000)])
    assert stats.ttest_1samp(counts, 60.0).pvalue > 1e-4
    assert abs(counts.var(ddof=1) / (600 * 0.1 * 0.9) - 1) < 0.1


def test_partitions_cover_the_data_once():
    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(10), 50)
    for split in ("iid", "classes"):
        parts = partition(labels, 10, rng, split=split)
        np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(500))
    parts = partition(labels, 10, rng, split="classes", classes_per_device=2)
    assert all(len(np.unique(labels[p])) <= 2 for p in parts)
    with pytest.raises(ValueError, match="split"):
        partition(labels, 10, rng, split="dirichlet")


def _digits_engine(seed: int) -> FedSGD:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    x, y, x_test, y_test = digits_dataset(rng)
    parts = partition(y.numpy(), 10, rng)
    return FedSGD(DigitsCNN(), [(x[p], y[p]) for p in parts], [20.0] * 10, UpdateRule(clip_norm=1.0, learning_rate=0.5),
                  test_data=(x_test, y_test))


@pytest.mark.slow
def test_digits_training_learns_and_is_deterministic():
    """Noise-free (eta huge) FedSGD on the 8x8 digits passes 85% test accuracy in 200 rounds; the same seeds give
    the same model."""
    engine, twin = _digits_engine(0), _digits_engine(0)
    rng, rng_twin = np.random.default_rng(1), np.random.default_rng(1)
    for _ in range(200):
        engine.round(rng, receive_scaling=1e6, noise_power_w=1e-12)
    for _ in range(3):
        twin.round(rng_twin, receive_scaling=1e6, noise_power_w=1e-12)
    assert engine.evaluate()[1] >= 0.85
    again, rng_again = _digits_engine(0), np.random.default_rng(1)
    for _ in range(3):
        again.round(rng_again, receive_scaling=1e6, noise_power_w=1e-12)
    for p, q in zip(twin.model.parameters(), again.model.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


def _play_with(env, actions, seed):
    env.reset(seed=seed)
    out = []
    for a in actions:
        obs, reward, _, _, info = env.step(np.array([a], dtype=np.float32))
        out.append((obs, reward, info))
    return out


def test_training_fidelity_leaks_exactly_what_the_analytic_one_does():
    """Same seed, same actions: identical channels, observations, rewards and RDP; the training fidelity adds its
    metrics (and d, n_m follow the trained model and data)."""
    from otagym import OTAPrivacyEnv

    actions = np.random.default_rng(3).uniform(-1, 1, 12)
    train = OTAPrivacyEnv(fidelity="train", num_rounds=12, eval_every=4)
    assert train.scenario.model_dim == num_parameters(DigitsCNN()) == 8714
    assert sum(train.scenario.dataset_size) == 1438
    analytic = OTAPrivacyEnv(num_rounds=12, model_dim=8714, dataset_size=train.scenario.dataset_size)
    for (o1, r1, i1), (o2, r2, i2) in zip(_play_with(train, actions, 7), _play_with(analytic, actions, 7)):
        np.testing.assert_array_equal(o1, o2)
        assert r1 == r2
        for key in ("leakage", "rdp_round", "channel_gain", "receive_scaling"):
            np.testing.assert_array_equal(i1[key], i2[key])
        assert "test_accuracy" in i1 and "test_accuracy" not in i2
    assert i1["evaluated_round"] == 11 and 0 <= i1["test_accuracy"] <= 1


@pytest.mark.slow
def test_full_power_training_learns_the_digits_and_replays_by_seed():
    from otagym import OTAPrivacyEnv, OTAPrivacyVectorEnv

    env = OTAPrivacyEnv(fidelity="train", reward_mode="cmdp", action_type="x", num_rounds=60, eval_every=30)
    final = _play_with(env, [env.model.x_max] * 60, 0)[-1][2]
    assert final["test_accuracy"] >= 0.7 and final["train_loss"] < 1.6
    again = _play_with(env, [env.model.x_max] * 3, 0)[-1][2]
    once_more = _play_with(env, [env.model.x_max] * 3, 0)[-1][2]
    assert again["train_loss"] == once_more["train_loss"]
    vec = OTAPrivacyVectorEnv(2, fidelity="train", num_rounds=2, eval_every=1, autoreset_mode=AutoresetMode.SAME_STEP)
    vec.reset(seed=0)
    for _ in range(3):  # autoreset included: fresh models for the new episodes
        _, _, terminated, _, info = vec.step(np.zeros((2, 1)))
    assert (info["evaluated_round"] == 0).all() and np.isfinite(info["gradient_norm2"]).all()


def test_a_diverging_model_stops_training_with_finite_metrics():
    """Receiver noise far above the gradients (P_max = 1e-30 W, G = 1e23: found by the fuzz suite) wrecks the model:
    it goes back to its last weights of finite loss, stops training and says so; every metric stays finite."""
    from otagym import OTAPrivacyEnv

    env = OTAPrivacyEnv(fidelity="train", num_devices=1, power_max_w=1e-30, clip_norm=9.4e22, num_rounds=3,
                        eval_every=1)
    env.reset(seed=0)
    for _ in range(3):
        _, reward, _, _, info = env.step(np.zeros(1))
        assert all(np.isfinite(info[k]) for k in ("train_loss", "test_loss", "test_accuracy", "gradient_norm2"))
    assert info["diverged"] == 1.0


def _write_idx(path, array, gz=False):
    import gzip as gzip_module
    import struct

    raw = bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip_module.compress(raw) if gz else raw)


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_loads_from_tiny_generated_idx_files(tmp_path, gz):
    from otagym.training.data import MNIST_FILES, load_mnist

    rng = np.random.default_rng(0)
    arrays = {}
    for (split, kind), name in MNIST_FILES.items():
        n = 5 if split == "train" else 3
        arrays[split, kind] = rng.integers(0, 256, (n, 28, 28)) if kind == "images" else rng.integers(0, 10, n)
        _write_idx(tmp_path / (name + (".gz" if gz else "")), arrays[split, kind], gz)
    x, y, x_test, y_test = load_mnist(tmp_path)
    assert x.shape == (5, 1, 28, 28) and x_test.shape == (3, 1, 28, 28)
    np.testing.assert_allclose(x[:, 0].numpy(), arrays["train", "images"] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(y_test.numpy(), arrays["test", "labels"])
    assert MnistCNN()(x).shape == (5, 10)


def test_mnist_missing_or_corrupt_files_name_the_path(tmp_path):
    from otagym.training.data import load_mnist, read_idx

    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte"):
        load_mnist(tmp_path)
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x00\x00\x08\x03\x00\x00\x00\x05")
    with pytest.raises(ValueError, match="bad"):
        read_idx(bad)
    bad.write_bytes(b"PK\x03\x04 not idx")
    with pytest.raises(ValueError, match="not an IDX file"):
        read_idx(bad)


def test_cifar10_loads_from_tiny_generated_pickle_batches(tmp_path):
    import pickle

    from otagym.training.data import CIFAR10_TEST, CIFAR10_TRAIN, load_cifar10

    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(1)
    first = None
    for name in CIFAR10_TRAIN + CIFAR10_TEST:
        batch = {b"data": rng.integers(0, 256, (2, 3072)).astype(np.uint8), b"labels": list(rng.integers(0, 10, 2))}
        first = batch if first is None else first
        (folder / name).write_bytes(pickle.dumps(batch))
    x, y, x_test, y_test = load_cifar10(tmp_path)
    assert x.shape == (10, 3, 32, 32) and x_test.shape == (2, 3, 32, 32)
    np.testing.assert_allclose(x[0].numpy().ravel(), first[b"data"][0] / 255.0, rtol=1e-6)
    (folder / "test_batch").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="test_batch.*CIFAR-10 python batch"):
        load_cifar10(tmp_path)


@pytest.mark.slow  # trains a model per cell
def test_compare_with_the_training_fidelity_adds_accuracy(tmp_path):
    """Leakage and cost columns are the analytic fidelity's (same channels, same actions); accuracy is added."""
    from baselines.receive_scaling.compare import compare, format_table, save
    from baselines.receive_scaling.evaluation import CellTraining, training_scenario
    from otagym import get_scenario

    scen = get_scenario("paper-mnist", num_rounds=6)
    kwargs = dict(nus=(0.04,), seeds=(0, 1), policies=("EqualAlloc", "FullPower"), progress=False)
    trained = compare(scen, training=CellTraining("train"), **kwargs)
    analytic = compare(training_scenario(scen), **kwargs)
    for t, a in zip(trained, analytic):
        assert t["rdp"] == a["rdp"] and t["cost_mean"] == a["cost_mean"]
        assert 0.0 <= t["accuracy"] <= 1.0 and len(t["accuracy_seeds"]) == 2 and "accuracy" not in a
        assert t["accuracy_rounds"] == [0, 1, 2, 3, 4, 5, 6]  # eval every T/20 -> every round, the initial model too
        assert t["accuracy_curve"][-1] == pytest.approx(t["accuracy"]) and len(t["accuracy_curve_ci95"]) == 7
    assert "test accuracy" in format_table(trained, training_scenario(scen))
    paths = save(trained, training_scenario(scen), tmp_path)
    assert (tmp_path / "compare_accuracy.png") in paths and (tmp_path / "compare_accuracy.png").stat().st_size > 0
    assert all(p.exists() for p in save(trained, training_scenario(scen), tmp_path))


def _tiny_mnist(folder, n_train=40, n_test=10):
    from otagym.training.data import MNIST_FILES

    rng = np.random.default_rng(5)
    for (split, kind), name in MNIST_FILES.items():
        n = n_train if split == "train" else n_test
        _write_idx(folder / name, rng.integers(0, 256, (n, 28, 28)) if kind == "images" else rng.integers(0, 10, n))


def test_the_env_trains_mnist_from_local_files_and_d_follows_the_model(tmp_path):
    """dataset="mnist" reads the IDX files of data_dir and trains the paper's CNN: d = 26,010 in the scenario."""
    from otagym import OTAPrivacyEnv

    _tiny_mnist(tmp_path)
    env = OTAPrivacyEnv(fidelity="train", dataset="mnist", data_dir=tmp_path, num_devices=4, batch_size=5,
                        num_rounds=2, eval_every=1)
    assert env.scenario.model_dim == 26010 and env.scenario.dataset_size == (10, 10, 10, 10)
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.zeros(1, dtype=np.float32))
    assert info["evaluated_round"] == 0 and np.isfinite(info["train_loss"])
    with pytest.raises(ValueError, match="data_dir must name the folder of the mnist files"):
        OTAPrivacyEnv(fidelity="train", dataset="mnist")
    with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte"):
        (tmp_path / "t10k-images-idx3-ubyte").unlink()
        OTAPrivacyEnv(fidelity="train", dataset="mnist", data_dir=tmp_path, num_devices=4, batch_size=5)
    with pytest.raises(TypeError, match="data_dir must be a folder path"):
        OTAPrivacyEnv(fidelity="train", dataset="mnist", data_dir=3)


def test_cifar_resnet_has_about_500k_parameters_and_clips_per_sample():
    """The residual network of about 500k parameters (GroupNorm, no batch norm): per-sample clipped sums are exact
    (each sample's own gradient, computed alone, clipped, summed)."""
    from otagym.training import CifarResNet

    torch.manual_seed(0)
    model = CifarResNet()
    assert num_parameters(model) == 494_394
    x, y = torch.randn(3, 3, 32, 32), torch.randint(0, 10, (3,))
    expected = torch.zeros(num_parameters(model))
    for i in range(3):
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(x[i:i + 1]), y[i:i + 1]).backward()
        g = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        expected += g * min(1.0, 0.5 / float(g.norm()))
    torch.testing.assert_close(clipped_gradient_sum(model, x, y, 0.5), expected, rtol=1e-4, atol=1e-6)


def test_cdpb_training_applies_the_estimate_18_of_the_clipped_local_updates():
    """Without artificial noise and with a vanishing receiver noise, g_hat_t (18) is the mean of the reliable
    clients' clipped updates: theta_t+1 = theta_t + (1/K_t) sum_k clip(theta_k,L - theta_t, W), computed here
    independently with plain autograd steps."""
    from otagym.schemes.cdpb import get_cdpb_scenario, round_powers
    from otagym.schemes.cdpb.training import CDPBTraining
    from otagym.training import make_federation

    s = get_cdpb_scenario("paper-cdpb", num_clients=4, artificial_noise=False, noise_power_w=1e-30, grad_bound=0.05)
    fed = make_federation("digits", 4, np.random.default_rng(0))
    engine = CDPBTraining(fed.fresh_model(np.random.default_rng(1)), fed.device_data, s.grad_bound, 2, 0.5)
    theta = engine.weights().clone()
    gains = np.array([2.0, 0.001, 1.5, 3.0])
    rho = 0.5
    pw = round_powers(s, np.array(rho), gains, np.zeros(4, bool))
    assert pw.reliable.tolist() == [True, False, True, True]
    expected = torch.zeros_like(theta)
    for k in (0, 2, 3):
        model = fed.make_model()
        torch.nn.utils.vector_to_parameters(theta.clone(), model.parameters())
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        for _ in range(2):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(fed.device_data[k][0]), fed.device_data[k][1]).backward()
            opt.step()
        g = torch.nn.utils.parameters_to_vector(model.parameters()).detach() - theta
        assert float(g.norm()) > s.grad_bound  # the clip binds
        expected += g * (s.grad_bound / float(g.norm())) / 3
    engine.round(np.random.default_rng(2), s, rho, gains, pw)
    torch.testing.assert_close(engine.weights() - theta, expected, rtol=1e-4, atol=1e-7)


@pytest.mark.slow
def test_cdpb_training_fidelity_leaks_exactly_what_the_analytic_one_does_and_learns():
    """scheme="cdpb": same seed and actions, identical channels, powers, rewards and RDP (the analytic env given the
    trained model's d); the trained model learns the digits; replays by seed."""
    from otagym import OTAPrivacyEnv

    actions = np.random.default_rng(4).uniform(-1, 1, 30)
    kw = dict(scheme="cdpb", num_clients=20, num_rounds=30)
    train = OTAPrivacyEnv(fidelity="train", eval_every=10, local_learning_rate=0.5, **kw)
    analytic = OTAPrivacyEnv(model_dim=train.scenario.model_dim, **kw)
    assert train.scenario.model_dim == 8714
    played = _play_with(train, actions, 3)
    for (o1, r1, i1), (o2, r2, i2) in zip(played, _play_with(analytic, actions, 3)):
        np.testing.assert_array_equal(o1, o2)
        assert r1 == r2
        for key in ("rdp_round", "channel_gain", "reliable", "noise_var", "rho"):
            np.testing.assert_array_equal(i1[key], i2[key])
    first, final = played[0][2], played[-1][2]
    assert (final["evaluated_round"] == 29 and final["test_accuracy"] >= 0.5
            and final["train_loss"] < first["train_loss"])
    again = _play_with(train, actions[:3], 3)[-1][2]
    assert again["train_loss"] == played[2][2]["train_loss"]
