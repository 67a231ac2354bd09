"""The training fidelity batched across envs: the models of a vector env computed as one stack give each env the numbers
of its engine alone (to 1e-6), and the stacked per-sample gradients against plain autograd, one sample at a time."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from otagym.training import FedSGD, UpdateRule, make_federation, stacked  # noqa: E402

TOL = dict(rtol=0, atol=1e-6)  # "equal to its sequential run to 1e-6"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


class _Tiny(nn.Module):
    """Every branch of the per-layer path: a strided padded conv (strided windows), a dilated conv without bias
    (``unfold``), a Linear over a middle axis (per-sample gradients formed) and a Linear on flat inputs (never
    formed)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 3, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(3, 4, 2, dilation=2, bias=False)
        self.mid = nn.Linear(4, 5)
        self.out = nn.Linear(20, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv2(torch.tanh(self.conv1(x)))  # (B, 4, 2, 2)
        h = torch.tanh(self.mid(h.flatten(2).transpose(1, 2)))  # (B, 4 positions, 5)
        return self.out(h.flatten(1))


def _one_sample_gradient(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    model.zero_grad()
    nn.functional.cross_entropy(model(x.unsqueeze(0)), y.unsqueeze(0)).backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


@pytest.mark.parametrize("by_layers", [True, False])
def test_stacked_clipped_sums_equal_one_sample_at_a_time(by_layers):
    """Three models, ragged batches (padding weighted 0), a clip norm per model and per-sample weights: each model's
    sum_i w_i clip(g_i, G_e) equals the sum of its samples' gradients taken one at a time with plain autograd, and
    its losses are its samples' cross-entropies; by the per-layer path and by torch.func, across several passes."""
    torch.manual_seed(0)
    models = [_Tiny() for _ in range(3)]
    x, y = torch.rand(3, 7, 1, 8, 8), torch.randint(0, 10, (3, 7))
    weights = torch.rand(3, 7) + 0.5
    weights[1, 5:] = 0.0  # model 1 has 5 samples, model 2 has 6: the rest is padding
    weights[2, 6:] = 0.0
    clip = torch.tensor([0.05, 0.2, 1e6])  # model 2 is never clipped
    old = stacked.SAMPLES_PER_PASS
    try:
        stacked.SAMPLES_PER_PASS = 3  # three passes over the 7 samples
        sums, losses = stacked.clipped_gradient_sums(models[0], stacked.stack_parameters(models), x, y, weights, clip,
                                                     by_layers=by_layers)
    finally:
        stacked.SAMPLES_PER_PASS = old
    clipped_any = False
    for e, model in enumerate(models):
        expected = torch.zeros(sum(p.numel() for p in model.parameters()))
        for i in range(7):
            if weights[e, i] == 0:
                continue
            g = _one_sample_gradient(model, x[e, i], y[e, i])
            clipped_any |= bool(g.norm() > clip[e])
            expected += weights[e, i] * g * min(1.0, float(clip[e] / g.norm()))
            loss = nn.functional.cross_entropy(model(x[e, i:i + 1]), y[e, i:i + 1])
            assert float(losses[e, i]) == pytest.approx(loss.item(), rel=1e-6)
        torch.testing.assert_close(sums[e], expected, rtol=1e-5, atol=1e-7)
    assert clipped_any


def test_stacked_metrics_equal_each_model_alone():
    torch.manual_seed(1)
    models = [_Tiny() for _ in range(3)]
    x, y = torch.rand(40, 1, 8, 8), torch.randint(0, 10, (40,))
    loss, accuracy = stacked.loss_and_accuracy(models[0], stacked.stack_parameters(models), x, y)
    norm2 = stacked.gradient_norm2(models[0], stacked.stack_parameters(models), x, y)
    for e, model in enumerate(models):
        out = model(x)
        assert loss[e] == pytest.approx(nn.functional.cross_entropy(out, y).item(), rel=1e-6)
        assert accuracy[e] == int((out.argmax(1) == y).sum()) / 40
        model.zero_grad()
        nn.functional.cross_entropy(out, y).backward()
        assert norm2[e] == pytest.approx(float(sum((p.grad ** 2).sum() for p in model.parameters())), rel=1e-5)


def _fedsgd_engines(count: int, **kw) -> list[FedSGD]:
    fed = make_federation("digits", 5, np.random.default_rng(0))
    return [fed.engine(np.random.default_rng(10 + i), [20.0] * 5, 1.0, 0.5, **kw) for i in range(count)]


def test_fedsgd_round_all_equals_each_engine_alone_and_keeps_a_diverged_one_apart():
    """Three engines with their own generators and eta_t, momentum and weight decay: round_all gives each the
    weights, losses and batch sizes of its rounds alone; the one whose noise blows its weights up diverges alone."""
    together = _fedsgd_engines(3, momentum=0.5, weight_decay=1e-3)
    alone = copy.deepcopy(together)
    etas = [1e6, 1e-3, 1e-100]  # noiseless, noisy, overflowing float32 (diverges in its first round)
    rngs, rngs_alone = [np.random.default_rng(i) for i in range(3)], [np.random.default_rng(i) for i in range(3)]
    for _ in range(3):
        losses = FedSGD.round_all(together, rng=rngs, receive_scaling=etas, noise_power_w=[1e-9] * 3)
        for e, engine in enumerate(alone):
            metrics = engine.round(rngs_alone[e], etas[e], 1e-9)
            assert losses[e] == pytest.approx(metrics.train_loss, abs=1e-6)
            np.testing.assert_array_equal(together[e]._last.batch_sizes, metrics.batch_sizes)
    assert [e.diverged for e in together] == [e.diverged for e in alone] == [False, False, True]
    for a, b in zip(together, alone):
        torch.testing.assert_close(a.weights(), b.weights(), **TOL)
    assert not torch.equal(together[0].weights(), together[1].weights())
    loss, accuracy = FedSGD.evaluate_all(together)
    np.testing.assert_allclose(loss, [e.evaluate()[0] for e in alone], **TOL)
    np.testing.assert_allclose(accuracy, [e.evaluate()[1] for e in alone], **TOL)
    np.testing.assert_allclose(FedSGD.gradient_norm2_all(together), [e.gradient_norm2() for e in alone], **TOL)
    assert np.all(np.isfinite(loss))


def _play(batched: bool, seed: int, n: int = 3, **kw) -> tuple[list[dict], list[torch.Tensor]]:
    from otagym import OTAPrivacyVectorEnv

    vec = OTAPrivacyVectorEnv(n, fidelity="train", num_rounds=3, eval_every=2, **kw)
    vec.core.training.batched = batched
    actions = np.random.default_rng(1).uniform(-1, 1, (6, n) + vec.single_action_space.shape)
    infos = [vec.reset(seed=seed)[1]]
    infos += [vec.step(a)[4] for a in actions]  # rounds 1-3, the autoreset step (fresh models), rounds 1-2
    return infos, [e.weights().clone() for e in vec.core.training.engines]


SCHEMES = [dict(momentum=0.9, weight_decay=1e-3), dict(scheme="cdpb", num_clients=6, local_learning_rate=0.5)]


@pytest.mark.parametrize("kw", [SCHEMES[0], pytest.param(SCHEMES[1], marks=pytest.mark.slow)],
                         ids=["receive_scaling", "cdpb"])
def test_vector_env_batched_equals_each_env_alone(kw):
    """N envs whose models train as one stack against the same envs each training alone, same seed and actions:
    every metric of every step (initial and periodic evaluations, an autoreset included) and the final weights
    agree to 1e-6."""
    from otagym.fidelity import TRAIN_KEYS

    (batched, w_batched), (alone, w_alone) = _play(True, 0, **kw), _play(False, 0, **kw)
    for b, a in zip(batched, alone):
        for key in TRAIN_KEYS:
            np.testing.assert_allclose(b[key], a[key], **TOL, err_msg=key)
    for b, a in zip(w_batched, w_alone):
        torch.testing.assert_close(b, a, **TOL)
    assert len({float(v) for v in batched[3]["train_loss"]}) == 3  # the envs' models differ
    assert [float(b["evaluated_round"][0]) for b in batched] == [-1, -1, 1, 2, -1, -1, 1]


@pytest.mark.parametrize("kw", [SCHEMES[0], pytest.param(SCHEMES[1], marks=pytest.mark.slow)],
                         ids=["receive_scaling", "cdpb"])
def test_same_seed_same_trajectory_and_another_seed_another(kw):
    first, w_first = _play(True, 4, **kw)
    again, w_again = _play(True, 4, **kw)
    other, _ = _play(True, 5, **kw)
    for a, b in zip(first, again):
        for key in ("train_loss", "test_loss", "gradient_norm2"):
            np.testing.assert_array_equal(a[key], b[key])
    for a, b in zip(w_first, w_again):
        assert torch.equal(a, b)
    assert not np.array_equal(first[2]["train_loss"], other[2]["train_loss"])


def test_engines_of_other_data_or_architecture_compute_apart():
    from otagym.training import Engine

    same = _fedsgd_engines(2)
    other_data = make_federation("digits", 5, np.random.default_rng(1)).engine(np.random.default_rng(0), [20.0] * 5,
                                                                                 1.0, 0.5)
    other_model = FedSGD(_Tiny(), same[0].device_data, [20.0] * 5, UpdateRule(1.0, 0.5), test_data=same[0].test_data)
    assert Engine.groups([same[0], other_data, same[1], other_model]) == [[0, 2], [1], [3]]
    with pytest.raises(ValueError, match="one non-empty group of FedSGD"):
        FedSGD.evaluate_all([same[0], other_data])


def test_a_play_function_must_call_round_once():
    from otagym import OTAPrivacyVectorEnv

    vec = OTAPrivacyVectorEnv(2, fidelity="train", num_rounds=3)
    vec.reset(seed=0)
    runs = vec.core.training
    with pytest.raises(RuntimeError, match="did not call it"):
        runs.round(np.ones(2, int), lambda i, engine, rng: None)
    with pytest.raises(RuntimeError, match="called it twice"):
        runs.round(np.ones(2, int), lambda i, engine, rng: (engine.round(rng, 1.0, 1e-9), engine.round(rng, 1.0, 1e-9)))
