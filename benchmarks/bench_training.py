"""The training fidelity's cost on CPU, as ratios to references timed in the same run (medians of interleaved repeats),
never as absolute goals. Run with torch at one thread (``OMP_NUM_THREADS=1``; set here too):

    python -m benchmarks.bench_training

1. One FedSGD round of the paper's MNIST CNN (d = 26,010), 10 devices x 60 samples:

   * non-private: one mean-loss gradient per device (no per-sample gradients, no clipping);
   * private, ours: ``otagym.training.clipped_gradient_sum_and_loss`` per device (the per-layer path for this model:
     one backward to the layer outputs, per-sample weight gradients from inputs and output gradients, clip, sum; the
     loss of the same forward), as FedSGD runs it;
   * private, torch.func: the general path (vmap of grad_and_value), which FedSGD uses for other models (GroupNorm);
   * private, Opacus: ``GradSampleModule`` (its default hooks path) per device, then the same clip and sum.

   Goal: ours <= 2x the non-private round and at least as fast as Opacus.

2. ``fidelity="train"``, 8 envs of a vector env, one round (one ``step``, no evaluation due) on the digits CNN
   (10 devices x 60 expected samples per env): the 8 models trained as one stack (the default) against the same envs
   each training alone, one after another (``TrainingRuns.batched = False``: the same numbers), and the floor of any
   way through the model's own layers, one plain forward and backward of as many samples (no per-sample gradients):
   sequential / floor bounds what batching can gain. Goal: batched >= 4x faster than sequential. The same for CDPB
   (``scheme="cdpb"``, K = 20 clients, L = 1).
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch
from opacus import GradSampleModule

from otagym import OTAPrivacyVectorEnv
from otagym.training import MnistCNN, clipped_gradient_sum_and_loss, stacked

DEVICES, BATCH, CLIP, REPEATS = 10, 60, 1.0, 15
ENVS, ENV_REPEATS = 8, 7


def _timed(*fns, repeats: int = REPEATS) -> list[float]:
    """Median time of each function over ``repeats`` rounds, the functions interleaved within each round (so that load
    on a shared machine falls on all of them alike)."""
    for fn in fns:
        fn()  # warm-up
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, out in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def per_device_rows() -> None:
    torch.manual_seed(0)
    model = MnistCNN()
    data = [(torch.randn(BATCH, 1, 28, 28), torch.randint(0, 10, (BATCH,))) for _ in range(DEVICES)]

    def non_private() -> None:
        for x, y in data:
            model.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()

    def ours() -> None:
        for x, y in data:
            clipped_gradient_sum_and_loss(model, x, y, CLIP)

    def by_vmap() -> None:
        params = stacked.stack_parameters([model])
        for x, y in data:
            stacked.clipped_gradient_sums(model, params, x[None], y[None], torch.ones(1, BATCH), CLIP, by_layers=False)

    gsm = GradSampleModule(MnistCNN(), loss_reduction="sum")

    def opacus() -> None:
        for x, y in data:
            gsm.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(gsm(x), y, reduction="sum").backward()
            per_sample = torch.cat([p.grad_sample.reshape(BATCH, -1) for p in gsm.parameters()], dim=1)
            torch.clamp(CLIP / (per_sample.norm(dim=1) + 1e-12), max=1.0) @ per_sample

    base, t_ours, t_vmap, t_opacus = _timed(non_private, ours, by_vmap, opacus)
    print(f"MNIST CNN, one round = {DEVICES} devices x {BATCH}:")
    print(f"non-private round:              {base * 1e3:7.1f} ms   1.00x")
    print(f"private, ours (per layer):      {t_ours * 1e3:7.1f} ms   {t_ours / base:4.2f}x   goal <= 2x")
    print(f"private, torch.func (general):  {t_vmap * 1e3:7.1f} ms   {t_vmap / base:4.2f}x")
    print(f"private, Opacus hooks:          {t_opacus * 1e3:7.1f} ms   {t_opacus / base:4.2f}x   "
          f"(ours / Opacus = {t_ours / t_opacus:4.2f}, goal <= 1)")


def vector_env_rows(name: str, **kwargs) -> None:
    """One step of ENVS envs under fidelity="train": batched against sequential (and, for FedSGD, the floor)."""
    vec = OTAPrivacyVectorEnv(ENVS, fidelity="train", num_rounds=10_000, eval_every=1_000_000, **kwargs)
    vec.reset(seed=0)
    runs = vec.core.training
    action = np.zeros((ENVS,) + vec.single_action_space.shape, dtype=np.float32)

    def step(batched: bool):
        def run() -> None:
            runs.batched = batched
            vec.step(action)
        return run

    engine = runs.engines[0]
    samples = torch.arange(ENVS * DEVICES * BATCH) % len(engine._all_y)  # as many as the envs' expected batches
    x, y = engine._all_x[samples], engine._all_y[samples]

    def floor() -> None:
        engine.model.zero_grad()
        torch.nn.functional.cross_entropy(engine.model(x), y).backward()

    fns = [step(True), step(False)] + ([floor] if name == "FedSGD" else [])
    batched, sequential, *base = _timed(*fns, repeats=ENV_REPEATS)
    print(f"fidelity='train', {name}, {ENVS} envs, one round ({kwargs or 'defaults'}):")
    print(f"  sequential (each env alone):  {sequential * 1e3:7.1f} ms   1.00x")
    print(f"  batched (one stack):          {batched * 1e3:7.1f} ms   {sequential / batched:4.2f}x faster   goal >= 4x")
    if base:
        print(f"  floor, one plain forward+backward of the {len(samples)} samples: {base[0] * 1e3:7.1f} ms "
              f"(sequential / floor = {sequential / base[0]:4.2f}, the most batching could gain; "
              f"batched / floor = {batched / base[0]:4.2f})")


def main() -> None:
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    per_device_rows()
    vector_env_rows("FedSGD")
    vector_env_rows("CDPB", scheme="cdpb", num_clients=20)


if __name__ == "__main__":
    main()
