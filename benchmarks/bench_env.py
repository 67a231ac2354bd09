"""Speed of the environment and the accounting, as ratios against references timed in the same run.

    python -m benchmarks.bench_env            # full run
    python -m benchmarks.bench_env --quick    # fewer steps and repeats

A ratio is (reference time / our time) for the same amount of work: > 1 means we are faster. Each row times its
reference and itself in alternation, ``--repeats`` times, and keeps the best of each (the machines are shared: a busy
moment slows both sides of a pair, and the best of several pairs is the least disturbed). The compiled kernels are
loaded (or compiled, once per machine) before any timing.

The goals (docs/speed.md), first the ones the speed issue sets:

* single env step vs unwrapped ``CartPole-v1``: >= 0.25x with the default end-of-episode epsilon (the all-order DP
  ledger), >= 0.5x with ``dp_orders=None`` (also timed with a benchmark task's settings);
* vector env of 4096 envs vs ``CartPoleVectorEnv``: >= 0.5x with the ledger, >= 1x without;
* the ledger alone, one round of 4096 envs at ``DEFAULT_ORDERS``: <= 0.5 ms (and its ratio to a ``CartPoleVectorEnv``
  step);
* accounting >= 100x Opacus on its DEFAULT_ALPHAS, batched over many noise multipliers, with the same numbers
  (asserted here).
"""

from __future__ import annotations

import argparse
import time
from typing import Callable

import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv, CartPoleVectorEnv

from otagym import OTAPrivacyEnv, OTAPrivacyVectorEnv
from otagym.accounting import DEFAULT_ORDERS, OPACUS_ORDERS, RDPLedger, rdp_sgm
from otagym.tasks import TASKS

#: The benchmark task whose settings (budget mode, price action, nu drawn per episode, no ledger) a row times.
TASK = "otagym/ReceiveScalingIID-v0"


def best_of(fn: Callable[[], object], repeats: int) -> float:
    """Best time (s) of ``repeats`` calls of ``fn`` (``benchmarks/bench_policies.py`` times its solvers with it)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def paired(reference: Callable[[], object], ours: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Best times (s) of ``reference`` and ``ours``, timed in alternation ``repeats`` times after one untimed call of
    each."""
    reference(), ours()
    best_ref = best_ours = float("inf")
    for _ in range(repeats):
        for fn, which in ((reference, 0), (ours, 1)):
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            if which == 0:
                best_ref = min(best_ref, dt)
            else:
                best_ours = min(best_ours, dt)
    return best_ref, best_ours


def single_steps(env, action, n: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(n):
            if env.step(action)[2]:
                env.reset()
    return run


def vector_episode(venv, action, steps: int) -> Callable[[], None]:
    def run() -> None:
        venv.reset(seed=0)
        for _ in range(steps):
            venv.step(action)
    return run


def cartpole_steps(env, action, n: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(n):
            env.step(action)
    return run


#: Untimed rounds a single env plays first: a small ledger sums eq. (9) for its first 5,000 rounds (10 episodes of
#: T = 500, ~65 us more per step) and then reads its tables; a training run's steps are timed, not its first episodes.
WARM_ROUNDS = 5_500
#: Single-env settings timed: (label, env keyword arguments, goal).
SINGLE = (("default: price action, DP ledger on", {}, 0.25),
          ("price, dp_orders=None", {"dp_orders": None}, 0.5),
          (f"task {TASK.split('/')[1]} settings", {k: v for k, v in TASKS[TASK].kwargs.items()}, 0.5),
          ("share, dp_orders=None", {"dp_orders": None, "action_type": "share"}, None),
          ("cmdp normalized x, dp_orders=None", {"dp_orders": None, "reward_mode": "cmdp"}, None))
#: Vector-env settings timed at each size: (label, env keyword arguments, goal at 4096 envs).
VECTOR = (("default: price action, DP ledger on", {}, 0.5),
          ("price, dp_orders=None", {"dp_orders": None}, 1.0),
          ("share, dp_orders=None", {"dp_orders": None, "action_type": "share"}, None),
          ("cmdp normalized x, dp_orders=None", {"dp_orders": None, "reward_mode": "cmdp"}, None))


#: A row of the table: the benchmark's name, our time, its unit, the ratio (reference time / ours), the goal's text.
Row = tuple[str, float, str, float, str]


def goal_text(goal: float | None, ratio: float) -> str:
    """Whether ``ratio`` meets the goal of at least ``goal`` (empty without a goal)."""
    return "" if goal is None else f"goal >= {goal:g}x: {'met' if ratio >= goal else 'missed'}"


def single_env_rows(quick: bool, rep: int) -> list[Row]:
    """A single env's step against unwrapped ``CartPole-v1``, per setting of :data:`SINGLE`."""
    rows = []
    n = 5_000 if quick else 20_000  # 40 episodes of T = 500: the episode ends (DP report, reset) are included
    cart = CartPoleEnv()
    cart.reset(seed=0)
    for label, kw, goal in SINGLE:
        env = OTAPrivacyEnv(**kw)
        env.reset(seed=0)
        single_steps(env, np.array([0.9], np.float32), WARM_ROUNDS)()  # past the ledger's move to its tables
        t_ref, t = paired(single_steps(cart, 1, n), single_steps(env, np.array([0.9], np.float32), n), rep)
        rows.append((f"single step, {label}", t / n * 1e6, "us/step", t_ref / t, goal_text(goal, t_ref / t)))
    return rows


def vector_env_rows(rep: int) -> tuple[list[Row], float]:
    """The vector env's step against ``CartPoleVectorEnv`` at 256 and 4096 envs, per setting of :data:`VECTOR`;
    with the time (s) of a ``CartPoleVectorEnv(4096)`` step."""
    rows = []
    cart_step_4096 = 0.0
    for num_envs in (256, 4096):
        steps = 200 if num_envs == 4096 else 1000
        cvec = CartPoleVectorEnv(num_envs=num_envs)
        cvec.reset(seed=0)
        cart_run = cartpole_steps(cvec, np.ones(num_envs, dtype=np.int64), steps)
        act = np.full((num_envs, 1), 0.9, np.float32)
        for label, kw, goal in VECTOR:
            venv = OTAPrivacyVectorEnv(num_envs, num_rounds=steps, **kw)  # one full episode per timing
            t_ref, t = paired(cart_run, vector_episode(venv, act, steps), rep)
            if num_envs == 4096:
                cart_step_4096 = t_ref / steps
            rows.append((f"vector step x{num_envs}, {label}", t / steps * 1e6, "us/step", t_ref / t,
                         goal_text(goal if num_envs == 4096 else None, t_ref / t)))
    return rows, cart_step_4096


def ledger_row(rep: int) -> Row:
    """The default env's ledger alone: one round of 4096 envs at DEFAULT_ORDERS, as the env feeds it, against a
    ``CartPoleVectorEnv(4096)`` step."""
    rounds = 128
    venv = OTAPrivacyVectorEnv(4096, num_rounds=rounds)
    venv.reset(seed=0)
    model = venv.core.model
    sigmas = [venv.step(np.full((4096, 1), 0.9, np.float32))[4]["noise_multiplier"][:, model.class_device]
              for _ in range(rounds)]
    ledger = RDPLedger(np.broadcast_to(model.class_q, (4096, model.class_q.size)), orders=DEFAULT_ORDERS)

    def record() -> None:
        ledger.reset()
        for s in sigmas:
            ledger.record(s)
        ledger.rdp  # noqa: B018 (the series' ledgers fold their buffer here)
    cvec = CartPoleVectorEnv(num_envs=4096)
    cvec.reset(seed=0)
    t_ref, t = paired(cartpole_steps(cvec, np.ones(4096, dtype=np.int64), rounds), record, rep)
    per_round = t / rounds
    return ("RDP ledger alone: one round of 4096 envs, DEFAULT_ORDERS", per_round * 1e6, "us/round",
            (t_ref / rounds) / per_round,
            f"goal <= 500 us: {'met' if per_round <= 5e-4 else 'missed'} (ratio: vs a CartPoleVectorEnv step)")


def accounting_rows(rep: int) -> list[Row]:
    """Batched accounting against Opacus: a few sampling rates, many noise multipliers, with the same numbers
    (asserted)."""
    from opacus.accountants.analysis import rdp as opacus_rdp

    rows = []
    q = np.repeat([1e-3, 0.01, 0.05, 0.2], 50)
    sigma = np.tile(np.geomspace(0.5, 5.0, 50), 4)
    for label, orders in (("DEFAULT_ORDERS (integer)", list(DEFAULT_ORDERS)),
                          ("Opacus DEFAULT_ALPHAS", list(OPACUS_ORDERS))):
        def theirs(orders=orders) -> np.ndarray:
            return np.array([opacus_rdp.compute_rdp(q=qi, noise_multiplier=si, steps=1, orders=orders)
                             for qi, si in zip(q, sigma)])

        def ours(orders=orders) -> np.ndarray:
            return rdp_sgm(q=q, noise_multiplier=sigma, orders=orders)
        # Same numbers up to Opacus's own error: its truncated fractional series is off by up to 1e-6 relative on
        # its grid (5.9e-8 too high at q = 1e-3, sigma = 0.524, alpha = 1.1), where ours is an upper bound within
        # 1e-11 of the exact value (tests/otagym/accounting/test_accounting.py checks ours against 50-digit mpmath);
        # integer orders 1e-9.
        tolerance = {"rtol": 1e-9} if "integer" in label else {"rtol": 1e-6, "atol": 1e-12}
        np.testing.assert_allclose(ours(), theirs(), **tolerance)
        t_ref, t = paired(theirs, ours, max(2, rep // 2))
        rows.append((f"accounting {q.size} (q, sigma) x {label}", t * 1e3, "ms/call", t_ref / t,
                     "goal >= 100x" if "Opacus" in label else ""))
    return rows


def print_table(rows: list[Row], cart_step_4096: float) -> None:
    """The rows as a table, then the reference time they are measured against."""
    width = max(len(r[0]) for r in rows)
    print(f"{'benchmark':<{width}}  {'time':>16}  {'ratio vs ref':>12}  goal")
    for name, value, unit, ratio, goal in rows:
        print(f"{name:<{width}}  {value:9.2f} {unit:<8} {ratio:11.3g}x  {goal}")
    print(f"(reference times in the same run: CartPoleVectorEnv(4096) step {cart_step_4096 * 1e6:.0f} us)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    rep = args.repeats or (3 if args.quick else 7)
    rows = single_env_rows(args.quick, rep)
    vector, cart_step_4096 = vector_env_rows(rep)
    rows += vector + [ledger_row(rep)] + accounting_rows(rep)
    print_table(rows, cart_step_4096)


if __name__ == "__main__":
    main()
