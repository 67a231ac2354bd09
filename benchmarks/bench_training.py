"""One FedSGD round of the paper's MNIST CNN (d = 26,010), 10 devices x 60 samples, on CPU (issue 10 goal):

    python benchmarks/bench_training.py

* non-private: one mean-loss gradient per device (no per-sample gradients, no clipping);
* private, ours: ``otagym.training.clipped_gradient_sum_and_loss`` per device (the per-layer path for this model:
  one backward to the layer outputs, per-sample weight gradients from inputs and output gradients, clip, sum; the
  loss of the same forward), as FedSGD runs it;
* private, torch.func: the general path (vmap of grad_and_value), which FedSGD uses for other models (GroupNorm);
* private, Opacus: ``GradSampleModule`` (its default hooks path) per device, then the same clip and sum.

Goal: ours <= 2x the non-private round and at least as fast as Opacus. Printed as ratios to the non-private round
measured in the same run (medians of interleaved repeats), never as absolute goals.
"""

from __future__ import annotations

import statistics
import time

import torch
from opacus import GradSampleModule

from otagym.training import MnistCNN, clipped_gradient_sum_and_loss
from otagym.training.fedsgd import _per_sample_by_vmap

DEVICES, BATCH, CLIP, REPEATS = 10, 60, 1.0, 15


def _timed(*fns) -> list[float]:
    """Median time of each function over REPEATS rounds, the functions interleaved within each round (so that load
    on a shared machine falls on all of them alike)."""
    for fn in fns:
        fn()  # warm-up
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(REPEATS):
        for fn, out in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def main() -> None:
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
        for x, y in data:
            flat, _ = _per_sample_by_vmap(model, x, y)
            torch.clamp(CLIP / (flat.norm(dim=1) + 1e-12), max=1.0) @ flat

    gsm = GradSampleModule(MnistCNN(), loss_reduction="sum")

    def opacus() -> None:
        for x, y in data:
            gsm.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(gsm(x), y, reduction="sum").backward()
            per_sample = torch.cat([p.grad_sample.reshape(BATCH, -1) for p in gsm.parameters()], dim=1)
            torch.clamp(CLIP / (per_sample.norm(dim=1) + 1e-12), max=1.0) @ per_sample

    base, t_ours, t_vmap, t_opacus = _timed(non_private, ours, by_vmap, opacus)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; one round = {DEVICES} devices x {BATCH}")
    print(f"non-private round:              {base * 1e3:7.1f} ms   1.00x")
    print(f"private, ours (per layer):      {t_ours * 1e3:7.1f} ms   {t_ours / base:4.2f}x   goal <= 2x")
    print(f"private, torch.func (general):  {t_vmap * 1e3:7.1f} ms   {t_vmap / base:4.2f}x")
    print(f"private, Opacus hooks:          {t_opacus * 1e3:7.1f} ms   {t_opacus / base:4.2f}x   "
          f"(ours / Opacus = {t_ours / t_opacus:4.2f}, goal <= 1)")


if __name__ == "__main__":
    main()
