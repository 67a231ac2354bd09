"""Speed of the analytic policies (issue 3 goals), absolute wall times on this machine.

    python benchmarks/bench_policies.py

Goals: AdaScale over T=500 on 1000 envs < 1 s (its decisions, batched); OfflineOptimal for T=500 < 0.2 s; and the
wall time of the default ``otagym compare`` (paper-mnist, nu in {0.01, 0.04, 0.16}, 3 seeds; goal < 2 min).
"""

from __future__ import annotations

import time

import numpy as np

from baselines import AdaScale, OfflineOptimal, sample_realisations
from baselines.compare import DEFAULT_POLICIES, compare
from otagym import get_scenario
from otagym.receive_scaling import ReceiveScalingModel


def main() -> None:
    s = get_scenario("paper-mnist")
    model = ReceiveScalingModel(s)
    real = sample_realisations(s, range(1000))  # 1000 channel realisations, T=500
    h = model.h_min2(real.channel_gains)  # (T, 1000)

    ada = AdaScale(V=np.full(1000, 300.0), nu=0.04)
    ada.reset(s)
    t0 = time.perf_counter()
    for t in range(s.num_rounds):
        ada.act(None, {"next_h_min2": h[t]})
    t_ada = time.perf_counter() - t0

    times = []
    for _ in range(5):
        opt = OfflineOptimal(nu=0.04)
        t0 = time.perf_counter()
        opt.reset(s, channel_gains=real.channel_gains[:, 0])
        times.append(time.perf_counter() - t0)
    t_opt = min(times)

    t0 = time.perf_counter()
    compare("paper-mnist", (0.01, 0.04, 0.16), (0, 1, 2), DEFAULT_POLICIES, progress=False)
    t_cmp = time.perf_counter() - t0

    print(f"AdaScale, T=500 x 1000 envs (decisions only): {t_ada:7.3f} s   goal < 1 s")
    print(f"OfflineOptimal, T=500 (one realisation):       {t_opt:7.3f} s   goal < 0.2 s")
    print(f"otagym compare (default grid):                 {t_cmp:7.1f} s   goal < 120 s")


if __name__ == "__main__":
    main()
