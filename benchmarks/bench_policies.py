"""Speed of the analytic policies' solvers and of the default comparison (issue 12 goals), wall times on this machine.

    python benchmarks/bench_policies.py

Goals: AdaScale over T = 500 on 1000 envs < 0.5 s (its decisions, batched); OfflineOptimal for T = 500 < 0.1 s; the
default comparison (``compare()``: paper-mnist, nu in {0.01, 0.04, 0.16}, 3 seeds, the seven default policies, each
calibrated per cell) < 10 s. Each time is the best of a few repeats (the machines are shared and noisy); the
comparison runs once.
"""

from __future__ import annotations

import time

import numpy as np
from bench_env import best_of  # run as a script: benchmarks/ is on sys.path

from baselines import AdaScale, OfflineOptimal, sample_realisations
from baselines.compare import DEFAULT_POLICIES, compare
from otagym import get_scenario
from otagym.receive_scaling import ReceiveScalingModel


def main() -> None:
    s = get_scenario("paper-mnist")
    model = ReceiveScalingModel(s)
    real = sample_realisations(s, range(1000))  # 1000 channel realisations, T=500
    h = model.h_min2(real.channel_gains)  # (T, 1000)

    def adascale() -> None:
        ada = AdaScale(V=np.full(1000, 300.0), nu=0.04)
        ada.reset(s)
        for t in range(s.num_rounds):
            ada.act(None, {"next_h_min2": h[t]})

    def offline() -> None:
        OfflineOptimal(nu=0.04).reset(s, channel_gains=real.channel_gains[:, 0])

    t_ada = best_of(adascale, 3)
    t_opt = best_of(offline, 5)
    t0 = time.perf_counter()
    compare("paper-mnist", (0.01, 0.04, 0.16), (0, 1, 2), DEFAULT_POLICIES, progress=False)
    t_cmp = time.perf_counter() - t0

    print(f"AdaScale, T=500 x 1000 envs (decisions only): {t_ada:7.3f} s   goal < 0.5 s")
    print(f"OfflineOptimal, T=500 (one realisation):       {t_opt:7.3f} s   goal < 0.1 s")
    print(f"compare(), default grid (63 cells):            {t_cmp:7.1f} s   goal < 10 s")


if __name__ == "__main__":
    main()
