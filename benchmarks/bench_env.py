"""Speed of the environment and the accounting, as ratios against references measured in the same run.

    python benchmarks/bench_env.py            # full run (~5 min: the DP-ledger rows at 4096 envs dominate)
    python benchmarks/bench_env.py --quick    # fewer repeats (~2 min)

Goals (issue 2): vector env >= 0.5x CartPoleVectorEnv at 4096 envs; single step >= 0.5x CartPole-v1 (unwrapped);
batched accounting >= 100x Opacus. A ratio is (reference time / our time) for the same amount of work: > 1 means we
are faster. Each timing is the best of several repeats (the machines are shared and noisy).
"""

from __future__ import annotations

import argparse
import time
from typing import Callable

import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv, CartPoleVectorEnv

from otagym import OTAPrivacyEnv, OTAPrivacyVectorEnv
from otagym.privacy import DEFAULT_ORDERS, OPACUS_ORDERS, rdp_sgm


def best_of(fn: Callable[[], None], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


#: Env settings timed: the default (budget mode, price action, DP ledger on), without the ledger, and the cheaper
#: share and normalised-x actions without it.
VARIANTS = (("default: price action, DP ledger on", {}), ("price, dp_orders=None", {"dp_orders": None}),
            ("share, dp_orders=None", {"dp_orders": None, "action_type": "share"}),
            ("cmdp normalized x, dp_orders=None", {"dp_orders": None, "reward_mode": "cmdp"}))


def single_steps(env, action, n: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(n):
            if env.step(action)[2]:
                env.reset()
    return run


def vector_steps(env, action, n: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(n):
            env.step(action)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rep = 3 if args.quick else 7
    rows: list[tuple[str, float, float, str]] = []

    # --- single env step vs CartPole-v1 (unwrapped) ------------------------------------------------------------
    n = 5_000 if args.quick else 20_000  # 40 episodes of T=500: episode ends (DP report) are included
    cart = CartPoleEnv()
    cart.reset(seed=0)
    t_ref = best_of(single_steps(cart, 1, n), rep)
    for label, kw in VARIANTS:
        env = OTAPrivacyEnv(**kw)
        env.reset(seed=0)
        t = best_of(single_steps(env, np.array([0.9], np.float32), n), rep)
        rows.append((f"single step, {label}", t / n * 1e6, t_ref / t, "goal >= 0.5"))

    # --- vector env vs CartPoleVectorEnv ----------------------------------------------------------------------------
    for num_envs in (256, 4096):
        steps = 200 if num_envs == 4096 else 1000
        cvec = CartPoleVectorEnv(num_envs=num_envs)
        cvec.reset(seed=0)
        t_ref = best_of(vector_steps(cvec, np.ones(num_envs, dtype=np.int64), steps), rep)
        for label, kw in VARIANTS:
            venv = OTAPrivacyVectorEnv(num_envs, num_rounds=steps, **kw)  # one full episode per timing
            act = np.full((num_envs, 1), 0.9, np.float32)

            def episode(venv=venv, act=act, steps=steps) -> None:
                venv.reset(seed=0)
                vector_steps(venv, act, steps)()
            t = best_of(episode, rep)
            rows.append((f"vector step x{num_envs}, {label}", t / steps * 1e6, t_ref / t,
                         "goal >= 0.5 at 4096" if num_envs == 4096 else ""))

    # --- batched accounting vs Opacus ------------------------------------------------------------------------------
    rng = np.random.default_rng(0)
    pairs = 200
    q = rng.uniform(1e-3, 0.2, pairs)
    sigma = rng.uniform(0.5, 5.0, pairs)
    from opacus.accountants.analysis import rdp as opacus_rdp

    for label, orders in (("DEFAULT_ORDERS (integer)", list(DEFAULT_ORDERS)), ("Opacus DEFAULT_ALPHAS", list(OPACUS_ORDERS))):
        def ours(orders=orders) -> None:
            rdp_sgm(q=q, noise_multiplier=sigma, orders=orders)

        def theirs(orders=orders) -> None:
            for qi, si in zip(q, sigma):
                opacus_rdp.compute_rdp(q=qi, noise_multiplier=si, steps=1, orders=orders)
        t_ref = best_of(theirs, max(2, rep // 2))
        t = best_of(ours, rep)
        rows.append((f"accounting {pairs} (q, sigma) x {label}", t * 1e3, t_ref / t, "goal >= 100"))

    width = max(len(r[0]) for r in rows)
    print(f"{'benchmark':<{width}}  {'time':>12}  {'ratio vs ref':>12}  goal")
    for name, value, ratio, goal in rows:
        unit = "ms/call" if name.startswith("accounting") else "us/step"
        print(f"{name:<{width}}  {value:9.2f} {unit:>7} {ratio:10.2f}x  {goal}")


if __name__ == "__main__":
    main()
