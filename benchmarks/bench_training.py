"""One FedSGD round of the paper's MNIST CNN (d = 26,010), 10 devices x 60 samples, on CPU (issue 10 goal):

    python benchmarks/bench_training.py

* non-private: one mean-loss gradient per device (no per-sample gradients, no clipping);
* private, ours: ``otagym.training.clipped_gradient_sum`` (torch.func vmap of grad, clip, sum) per device;
* private, Opacus: ``GradSampleModule`` (its default hooks path) per device, then the same clip and sum.

Goal: ours <= 2x the non-private round and at least as fast as Opacus. Printed as ratios to the non-private round
measured in the same run (median of repeats), never as absolute goals.
"""

from __future__ import annotations

import statistics
import time

import torch
from opacus import GradSampleModule

from otagym.training import MnistCNN, clipped_gradient_sum

DEVICES, BATCH, CLIP, REPEATS = 10, 60, 1.0, 15


def _timed(fn) -> float:
    fn()  # warm-up
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


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
            clipped_gradient_sum(model, x, y, CLIP)

    gsm = GradSampleModule(MnistCNN(), loss_reduction="sum")

    def opacus() -> None:
        for x, y in data:
            gsm.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(gsm(x), y, reduction="sum").backward()
            per_sample = torch.cat([p.grad_sample.reshape(BATCH, -1) for p in gsm.parameters()], dim=1)
            torch.clamp(CLIP / (per_sample.norm(dim=1) + 1e-12), max=1.0) @ per_sample

    base = _timed(non_private)
    t_ours, t_opacus = _timed(ours), _timed(opacus)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; one round = {DEVICES} devices x {BATCH}")
    print(f"non-private round:          {base * 1e3:7.1f} ms   1.00x")
    print(f"private, torch.func (ours): {t_ours * 1e3:7.1f} ms   {t_ours / base:4.2f}x   goal <= 2x")
    print(f"private, Opacus hooks:      {t_opacus * 1e3:7.1f} ms   {t_opacus / base:4.2f}x   "
          f"(ours / Opacus = {t_ours / t_opacus:4.2f}, goal <= 1)")


if __name__ == "__main__":
    main()
