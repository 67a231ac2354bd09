"""Speed of the analytic policies' solvers and of the default comparison (issue 12 goals), wall times on this machine.

    python -m benchmarks.bench_policies

Goals: AdaScale over T = 500 on 1000 envs < 0.5 s (its decisions, batched); OfflineOptimal for T = 500 < 0.1 s; the
default comparison (``compare()``: paper-mnist, nu in {0.01, 0.04, 0.16}, 3 seeds, the seven default policies, each
calibrated per cell) < 10 s. Each time is the best of a few repeats (the machines are shared and noisy); the
comparison runs once.

With the rl extra, ``otagym evaluate``'s play of a trained model (the zoo's i.i.d. PPO, an MLP): all 128
realisations of a budget in one vector env (:func:`baselines.benchmark.play_episodes`), 3 budgets, against the same
model played one realisation at a time as ``otagym compare`` plays it (its cells, the offline optimum of each
included; timed on 4 realisations x 3 budgets), as a ratio per realisation. Goal: 128 x 3 batched < 60 s.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from baselines import AdaScale, OfflineOptimal, sample_realisations
from baselines.benchmark import play_episodes
from baselines.receive_scaling.compare import DEFAULT_POLICIES, PolicySpec, compare, evaluate_cells
from benchmarks.bench_env import best_of
from benchmarks.zoo import ZOO
from otagym import get_scenario
from otagym.schemes.receive_scaling import ReceiveScalingModel
from otagym.tasks import TASKS, task_scenario

#: The model and task of the trained-model timing.
ZOO_MODEL = str(ZOO / "iid" / "ppo" / "model.zip")
TASK = "otagym/ReceiveScalingIID-v0"


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
    trained_model()


def trained_model(realisations: int = 128, alone: int = 4) -> None:
    """``otagym evaluate``'s batched play of a trained MLP against compare's one-at-a-time play (module docstring)."""
    try:
        import torch

        from agents.policy import AgentPolicy, load_model, run_metadata
        from otagym.cli.evaluate import resolve_policy
    except ImportError:
        print("trained model: skipped (needs the rl extra)")
        return
    torch.set_num_threads(1)
    nus, seeds = TASKS[TASK].eval_nus, list(range(10_000, 10_000 + realisations))
    _, (factory, overrides) = resolve_policy(ZOO_MODEL, TASK)
    model, kw = load_model(ZOO_MODEL), run_metadata(Path(ZOO_MODEL))["env_kwargs"]
    one = PolicySpec(lambda nu, p: AgentPolicy(model, nu=nu, env_kwargs=kw))
    t0 = time.perf_counter()
    for nu in nus:
        play_episodes(factory(), TASK, seeds, nu=nu, **overrides)
    t_batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    for nu in nus:
        for seed in seeds[:alone]:
            evaluate_cells(task_scenario(TASK), one, [(nu, seed)])
    t_alone = time.perf_counter() - t0
    ratio = (t_alone / alone) / (t_batched / realisations)
    print(f"trained PPO, {realisations} x {len(nus)} realisations batched:    {t_batched:7.1f} s   goal < 60 s; "
          f"one at a time: {t_alone / alone:.2f} s per realisation ({len(nus)} budgets), {ratio:.0f}x slower")


if __name__ == "__main__":
    main()
