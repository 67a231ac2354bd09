"""Fashion-MNIST as a named dataset of the training fidelity (Debian's ``dataset-fashion-mnist``, MNIST's IDX format),
and the data subsets that make evaluations cheaper: unit tests on tiny generated IDX files, and one end-to-end run on
the real files where the package is installed."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from otagym import datasets  # noqa: E402
from otagym.datasets import DATA_PACKAGES, FASHION_MNIST_DIR, MNIST_FILES, DataPackage, data_folder  # noqa: E402
from otagym.training import MnistCNN, load_mnist, make_federation, partition  # noqa: E402

INSTALL = "apt-get install dataset-fashion-mnist"


def _write_idx(path, array, gz=True):
    raw = bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(raw) if gz else raw)


def _tiny_fashion(folder, n_train=40, n_test=12, gz=True, seed=7):
    """The four IDX files of a tiny Fashion-MNIST in ``folder`` (gzipped as Debian ships them); returns the arrays."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for (split, kind), name in MNIST_FILES.items():
        n = n_train if split == "train" else n_test
        arrays[split, kind] = rng.integers(0, 256, (n, 28, 28)) if kind == "images" else rng.integers(0, 10, n)
        _write_idx(folder / (name + (".gz" if gz else "")), arrays[split, kind], gz)
    return arrays


@pytest.fixture
def packaged(tmp_path, monkeypatch):
    """The package's folder moved to an empty ``tmp_path/pkg`` (the files are written by each test)."""
    folder = tmp_path / "pkg"
    folder.mkdir()
    monkeypatch.setitem(DATA_PACKAGES, "fashion-mnist", DATA_PACKAGES["fashion-mnist"]._replace(folder=folder))
    return folder


def test_the_default_folder_is_debians_and_the_dataset_trains_the_papers_cnn():
    assert FASHION_MNIST_DIR == datasets.Path("/usr/share/datasets/fashion-mnist")
    assert DATA_PACKAGES["fashion-mnist"] == DataPackage(FASHION_MNIST_DIR, INSTALL, tuple(MNIST_FILES.values()))
    from otagym.training.federation import DATASETS, LOADERS

    assert DATASETS["fashion-mnist"] is MnistCNN and LOADERS["fashion-mnist"] is load_mnist  # one reader, no copy
    assert data_folder("digits", None) is None


@pytest.mark.parametrize("gz", [True, False])
def test_fashion_mnist_reads_its_idx_files_from_data_dir(tmp_path, gz):
    """The images as float32 in [0, 1] (the bytes / 255), the labels as written, split over the devices as
    :func:`partition` splits them with the same generator; gzipped (Debian's) or plain files."""
    arrays = _tiny_fashion(tmp_path, gz=gz)
    fed = make_federation("fashion-mnist", 4, np.random.default_rng(3), data_dir=tmp_path)
    parts = partition(arrays["train", "labels"], 4, np.random.default_rng(3))
    for (x, y), part in zip(fed.device_data, parts):
        np.testing.assert_allclose(x[:, 0].numpy(), arrays["train", "images"][part] / 255.0, rtol=1e-6)
        np.testing.assert_array_equal(y.numpy(), arrays["train", "labels"][part])
    np.testing.assert_array_equal(fed.test_data[1].numpy(), arrays["test", "labels"])
    assert fed.model_dim == 26_010 and fed.eval_data is None and fed.dataset_sizes == (10, 10, 10, 10)


def test_without_data_dir_the_package_folder_is_read(packaged):
    from otagym import OTAPrivacyEnv

    arrays = _tiny_fashion(packaged)
    env = OTAPrivacyEnv(fidelity="train", dataset="fashion-mnist", num_devices=4, batch_size=5, num_rounds=2,
                        eval_every=1)
    assert env.scenario.model_dim == 26_010 and env.scenario.dataset_size == (10, 10, 10, 10)
    np.testing.assert_array_equal(env.core.training.federation.test_data[1].numpy(), arrays["test", "labels"])
    _, info = env.reset(seed=0)
    _, _, _, _, info = env.step(np.zeros(1, dtype=np.float32))
    assert info["evaluated_round"] == 0 and np.isfinite(info["train_loss"]) and 0 <= info["test_accuracy"] <= 1


def test_missing_files_raise_one_line_naming_apt_get_and_data_dir(packaged, tmp_path):
    from otagym import OTAPrivacyEnv

    for make in (lambda: make_federation("fashion-mnist", 4, np.random.default_rng(0)),
                 lambda: OTAPrivacyEnv(fidelity="train", dataset="fashion-mnist"),
                 lambda: make_federation("fashion-mnist", 4, np.random.default_rng(0), data_dir=tmp_path / "pkg")):
        with pytest.raises(FileNotFoundError) as err:
            make()
        message = str(err.value)
        assert "\n" not in message and INSTALL in message and "data_dir" in message and str(packaged) in message
        assert "train-images-idx3-ubyte[.gz]" in message and "nothing is downloaded" in message
    _tiny_fashion(packaged)
    (packaged / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(FileNotFoundError, match=r"needs t10k-labels-idx1-ubyte\[\.gz\] in .*apt-get install"):
        data_folder("fashion-mnist", None)
    with pytest.raises(ValueError, match="data_dir must name the folder of the mnist files"):
        data_folder("mnist", None)


def test_subsets_train_and_evaluate_on_the_samples_drawn(tmp_path):
    """``train_samples`` keeps that many training samples (n_m follows); ``eval_samples`` evaluates the test loss and
    accuracy, f(w) and ||grad f(w)||^2 on that many samples, each equal to its computation by plain torch on them."""
    arrays = _tiny_fashion(tmp_path)
    fed = make_federation("fashion-mnist", 4, np.random.default_rng(1), data_dir=tmp_path, train_samples=24,
                          eval_samples=8)
    assert fed.dataset_sizes == (6, 6, 6, 6) and len(fed.test_data[1]) == 8 and len(fed.eval_data[1]) == 8
    pooled = torch.cat([x for x, _ in fed.device_data]).reshape(24, -1)
    assert all((pooled == row).all(dim=1).any() for row in fed.eval_data[0].reshape(8, -1))  # of the devices' data
    test_images = torch.tensor(arrays["test", "images"] / 255.0, dtype=torch.float32).reshape(12, -1)
    assert all((test_images == row).all(dim=1).any() for row in fed.test_data[0].reshape(8, -1))
    engine = fed.engine(np.random.default_rng(2), [2.0] * 4, clip_norm=1.0, learning_rate=0.5)
    x, y = fed.test_data
    with torch.no_grad():
        logits = engine.model(x)
    loss, accuracy = engine.evaluate()
    assert loss == pytest.approx(float(torch.nn.functional.cross_entropy(logits, y)), rel=1e-5)
    assert accuracy == pytest.approx(float((logits.argmax(dim=1) == y).float().mean()))
    engine.model.zero_grad()
    torch.nn.functional.cross_entropy(engine.model(fed.eval_data[0]), fed.eval_data[1]).backward()
    expected = sum(float((p.grad ** 2).sum()) for p in engine.model.parameters())
    assert engine.gradient_norm2() == pytest.approx(expected, rel=1e-4)
    assert engine.train_loss() == pytest.approx(
        float(torch.nn.functional.cross_entropy(engine.model(fed.eval_data[0]), fed.eval_data[1])), rel=1e-5)
    whole = make_federation("fashion-mnist", 4, np.random.default_rng(1), data_dir=tmp_path, eval_samples=1000)
    assert len(whole.test_data[1]) == 12 and len(whole.eval_data[1]) == 40  # at most what there is
    one = make_federation("fashion-mnist", 4, np.random.default_rng(1), data_dir=tmp_path, eval_samples=1)
    assert one.test_data[0].shape == one.eval_data[0].shape == (1, 1, 28, 28)
    with pytest.raises(ValueError, match=r"train_samples must be an integer in \[4, 40\]; got 41"):
        make_federation("fashion-mnist", 4, np.random.default_rng(1), data_dir=tmp_path, train_samples=41)


def test_the_env_takes_the_subsets_and_its_scenario_follows(tmp_path):
    from otagym import OTAPrivacyEnv

    _tiny_fashion(tmp_path)
    env = OTAPrivacyEnv(fidelity="train", dataset="fashion-mnist", data_dir=tmp_path, num_devices=4, batch_size=2,
                        train_samples=20, eval_samples=5)
    assert env.scenario.dataset_size == (5, 5, 5, 5)
    with pytest.raises(ValueError, match="eval_samples applies only with fidelity"):
        OTAPrivacyEnv(eval_samples=5)
    with pytest.raises(ValueError, match=r"train_samples must be an integer in \[4, 40\]; got 3"):
        make_federation("fashion-mnist", 4, np.random.default_rng(0), data_dir=tmp_path, train_samples=3)
    with pytest.raises(ValueError, match=r"batch_size must be .* train_samples=8 give n_m = \(2, 2, 2, 2\)"):
        OTAPrivacyEnv(fidelity="train", dataset="fashion-mnist", data_dir=tmp_path, num_devices=4, batch_size=5,
                      train_samples=8)


def test_a_process_reads_the_files_once_while_they_stay_as_they_were(tmp_path, monkeypatch):
    """Every env of a comparison builds its federation: the files are read once per process, and again once one of
    them changed (size or time)."""
    from otagym.training import federation

    _tiny_fashion(tmp_path)
    reads = []
    monkeypatch.setitem(federation.LOADERS, "fashion-mnist", lambda folder: reads.append(folder) or load_mnist(folder))
    federation._load.cache_clear()
    first = make_federation("fashion-mnist", 4, np.random.default_rng(1), data_dir=tmp_path)
    again = make_federation("fashion-mnist", 4, np.random.default_rng(1), data_dir=tmp_path)
    assert len(reads) == 1 and torch.equal(first.test_data[0], again.test_data[0])
    arrays = _tiny_fashion(tmp_path, n_test=13, seed=8)
    changed = make_federation("fashion-mnist", 4, np.random.default_rng(1), data_dir=tmp_path)
    assert len(reads) == 2 and changed.test_data[1].tolist() == arrays["test", "labels"].tolist()


def test_without_the_gradient_an_evaluation_is_the_test_set_only_and_the_run_the_same(tmp_path):
    """``eval_gradient=False``: ``gradient_norm2`` and the initial ``train_loss`` are NaN, every other number of the
    run (test loss and accuracy at each evaluation, training losses, rewards) is the one with it."""
    from otagym import OTAPrivacyEnv

    _tiny_fashion(tmp_path)
    kwargs = {"fidelity": "train", "dataset": "fashion-mnist", "data_dir": tmp_path, "num_devices": 4, "batch_size": 2,
              "eval_every": 1, "num_rounds": 3}
    runs = []
    for eval_gradient in (True, False):
        env = OTAPrivacyEnv(eval_gradient=eval_gradient, **kwargs)
        _, info = env.reset(seed=5)
        steps = [info] + [env.step(np.zeros(1, dtype=np.float32))[4] for _ in range(3)]
        runs.append(steps)
    for with_it, without in zip(*runs):
        assert np.isnan(without["gradient_norm2"]) and np.isfinite(with_it["gradient_norm2"])
        for key in ("test_loss", "test_accuracy", "evaluated_round"):
            assert with_it[key] == without[key]
    assert np.isnan(runs[1][0]["train_loss"]) and np.isfinite(runs[0][0]["train_loss"])
    assert [s["train_loss"] for s in runs[0][1:]] == [s["train_loss"] for s in runs[1][1:]]
    with pytest.raises(ValueError, match="eval_gradient applies only with fidelity"):
        OTAPrivacyEnv(eval_gradient=False)


def _installed() -> str | None:
    """Why the real Fashion-MNIST cannot be read here (None when it can)."""
    try:
        data_folder("fashion-mnist", None)
    except FileNotFoundError as err:
        return f"Fashion-MNIST is not installed ({err})"
    return None


@pytest.mark.slow  # trains the paper's CNN on the real Fashion-MNIST for 30 rounds (about 10 s)
@pytest.mark.skipif(_installed() is not None, reason=_installed() or "")
def test_the_env_trains_on_the_real_fashion_mnist_above_chance(one_torch_thread):
    """End to end through the env (``fidelity="train", dataset="fashion-mnist"``, found at Debian's folder): 60,000
    training images over the paper's 10 devices, 30 rounds at the least noise, test accuracy on 2,000 test images
    from chance (10 classes: 0.1) to well above it."""
    from otagym import OTAPrivacyEnv

    env = OTAPrivacyEnv(fidelity="train", dataset="fashion-mnist", eval_samples=2000, eval_every=30, num_rounds=30)
    assert env.scenario.dataset_size == (6000,) * 10 and env.scenario.model_dim == 26_010
    _, info = env.reset(seed=0)
    assert info["test_accuracy"] < 0.25
    for _ in range(30):
        _, _, _, _, info = env.step(np.ones(1, dtype=np.float32))
    assert info["evaluated_round"] == 29 and info["test_accuracy"] > 0.3


def test_a_truncated_corrupt_or_misshapen_idx_set_is_refused_naming_the_file(tmp_path):
    """A truncated or corrupt .gz names its file (not a bare EOFError / BadGzipFile); 14x14 images and labels past 9
    are refused at load, not later inside torch."""
    _tiny_fashion(tmp_path)
    images = tmp_path / (MNIST_FILES["train", "images"] + ".gz")
    whole = images.read_bytes()
    images.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=f"{images.name}: a truncated or corrupt gzip file"):
        load_mnist(tmp_path)
    images.write_bytes(whole[:10] + bytes(len(whole) - 10))
    with pytest.raises(ValueError, match=f"{images.name}: a truncated or corrupt gzip file"):
        load_mnist(tmp_path)
    rng = np.random.default_rng(0)
    _write_idx(images, rng.integers(0, 256, (40, 14, 14)))
    with pytest.raises(ValueError, match="14x14; the MNIST format's .* are 28x28"):
        load_mnist(tmp_path)
    _tiny_fashion(tmp_path)
    _write_idx(tmp_path / (MNIST_FILES["test", "labels"] + ".gz"), np.full(12, 11))
    with pytest.raises(ValueError, match="labels must lie in 0..9"):
        load_mnist(tmp_path)
