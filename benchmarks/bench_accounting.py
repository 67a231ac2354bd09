"""ε from the PLD accountant (:mod:`otagym.accounting.pld`) against the RDP ledger and the field's accountants:
the numbers and the time, as ratios against references timed in the same run.

    python -m benchmarks.bench_accounting            # full run (a few minutes on 2 cores)
    python -m benchmarks.bench_accounting --quick    # fewer envs, no 500-round dp_accounting/Opacus references

The goals (docs/speed.md): the PLD ε of one paper-deployment episode (T = 500, every device class, any action
sequence: here a = 0 and uniformly random actions) in <= 1 s in a fresh process, and of a vector env of 256 envs at
the episode's end in <= 10 s; each printed beside the RDP ledger's time for the same rounds (ratio = RDP ledger time
/ PLD time; the PLD costs more: it is reported at the episode's end only).

The table reproduces the comparison of the RDP, PLD and PRV ε at δ = 1e-5 on homogeneous schedules, and the
paper's episode (its 500 heterogeneous noise multipliers), with dp_accounting's own accountant on every round as
the reference of the grid that makes ours fast.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from otagym import OTAPrivacyEnv, OTAPrivacyVectorEnv
from otagym.accounting import DEFAULT_ORDERS, PLDLedger, RDPLedger, pld_epsilon, rdp_sgm, rdp_to_dp
from otagym.accounting.pld import SIGMA_RESOLUTION

DELTA = 1e-5
#: (q, sigma, rounds) of the homogeneous rows.
HOMOGENEOUS = ((0.01, 1.0, 1_000), (0.01, 1.0, 10_000), (256 / 60_000, 1.1, 14_062), (1.0, 10.0, 100))


def paper_episode(num_envs: int, seed: int = 0, random_actions: bool = False) -> tuple[np.ndarray, float]:
    """The noise multipliers (rounds, envs, classes) of episodes of the paper's MNIST deployment under the price
    action a = 0 (or actions drawn uniformly), and the sampling rate q of its devices."""
    env = OTAPrivacyVectorEnv(num_envs, dp_orders=None)
    env.reset(seed=seed)
    core = env.core
    rng = np.random.default_rng(seed)
    sigmas = []
    for _ in range(core.num_rounds):
        action = rng.uniform(-1, 1, (num_envs, 1)) if random_actions else np.zeros((num_envs, 1))
        _, _, _, _, info = env.step(action.astype(np.float32))
        sigmas.append(info["noise_multiplier"][:, np.unique(core.model.device_class, return_index=True)[1]])
    return np.stack(sigmas), float(core.model.class_q[0])


def rdp_epsilon(q: float, sigma: np.ndarray) -> np.ndarray:
    """The RDP ledger's ε of each schedule (rounds on the first axis)."""
    ledger = RDPLedger(np.full(sigma.shape[1:], q), orders=DEFAULT_ORDERS)
    for round_sigma in sigma:
        ledger.record(round_sigma)
    return ledger.epsilon(DELTA)[0]


def prv_upper(q: float, sigma: np.ndarray, eps_error: float = 0.01) -> float:
    """Opacus's PRV accountant's upper bound on ε (its histories grouped by equal rounds)."""
    from opacus.accountants import PRVAccountant

    accountant = PRVAccountant()
    for s in sigma:
        accountant.step(noise_multiplier=float(s), sample_rate=q)
    return accountant.get_epsilon(DELTA, eps_error=eps_error)


def dp_accounting_epsilon(q: float, sigma: np.ndarray, discretization: float = 1e-3) -> float:
    """dp_accounting's PLD accountant on every round as it is."""
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=discretization)
    accountant.compose(dp_accounting.ComposedDpEvent(
        [dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(float(s))) for s in sigma]))
    return accountant.get_epsilon(DELTA)


def homogeneous_rows() -> list[str]:
    rows = []
    for q, sigma, rounds in HOMOGENEOUS:
        schedule = np.full(rounds, sigma)
        rdp = rdp_to_dp(rounds * rdp_sgm(q=q, noise_multiplier=sigma, orders=DEFAULT_ORDERS), DEFAULT_ORDERS, DELTA)[0]
        pld = float(pld_epsilon(q=q, noise_multiplier=schedule, delta=DELTA))
        rows.append(f"| {q:.4g} | {sigma:g} | {rounds:,} | {rdp:.3f} | {pld:.3f} | {prv_upper(q, schedule):.3f} |")
    return rows


def episode_rows(quick: bool) -> list[str]:
    sigma, q = paper_episode(1)
    one = sigma[:, 0, 0]
    rows = [f"| RDP ledger | {rdp_epsilon(q, sigma)[0, 0]:.3f} | |"]
    for disc, res in ((None, SIGMA_RESOLUTION), (1e-3, 0.0)):
        start = time.perf_counter()
        eps = float(pld_epsilon(q=q, noise_multiplier=one, delta=DELTA, value_discretization=disc,
                                sigma_resolution=res))
        elapsed = time.perf_counter() - start
        grid = "chosen from the schedule" if disc is None else f"{disc:g}"
        rows.append(f"| PLD, loss grid {grid}, sigma grid {res:g} | {eps:.3f} | {elapsed:.2f} s |")
    if not quick:
        for name, fn in (("dp_accounting's PLDAccountant, every round, 1e-3", lambda: dp_accounting_epsilon(q, one)),
                         ("Opacus PRV (upper bound, eps_error 0.01)", lambda: prv_upper(q, one))):
            start = time.perf_counter()
            eps = fn()
            rows.append(f"| {name} | {eps:.3f} | {time.perf_counter() - start:.1f} s |")
    return rows


def speed_rows(num_envs: int) -> list[str]:
    """Time of the episode's end: the RDP ledger vs the PLD ledger over the same recorded rounds, first for one env
    (its rounds' PLDs built: as in a fresh process), then for num_envs envs (as at the end of a vector env's
    episode, after the first)."""
    rows = []
    for n, random_actions in ((1, False), (1, True), (num_envs, True)):
        sigma, q = paper_episode(n, seed=1 + n, random_actions=random_actions)
        rdp, pld = RDPLedger(np.full(sigma.shape[1:], q), orders=DEFAULT_ORDERS), PLDLedger(np.full(sigma.shape[1:], q))
        start = time.perf_counter()
        for round_sigma in sigma:
            rdp.record(round_sigma)
        rdp.epsilon(DELTA)
        rdp_time = time.perf_counter() - start
        for round_sigma in sigma:
            pld.record(round_sigma)
        start = time.perf_counter()
        pld.epsilon(DELTA)
        pld_time = time.perf_counter() - start
        goal = 1.0 if n == 1 else 10.0
        actions = "random" if random_actions else "a = 0"
        rows.append(f"| {n} | {actions} | {rdp_time:.3f} s | {pld_time:.2f} s | {rdp_time / pld_time:.3f}x "
                    f"| <= {goal:g} s: "
                    f"{'met' if pld_time <= goal else f'missed by {pld_time / goal:.1f}x'} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="16 envs, no 500-round dp_accounting/Opacus references")
    args = p.parse_args(argv)
    OTAPrivacyEnv().reset(seed=0)  # the compiled kernels loaded before any timing
    print("| q | sigma | rounds | RDP ε | PLD ε | PRV ε (upper) |\n|---|---|---|---|---|---|")
    print("\n".join(homogeneous_rows()))
    print("\nThe paper's MNIST episode (T = 500, a = 0, δ = 1e-5):\n\n| accountant | ε | time |\n|---|---|---|")
    print("\n".join(episode_rows(args.quick)))
    print("\nThe episode's end, every device class (one env as in a fresh process, then the vector env):\n\n"
          "| envs | actions | RDP ledger | PLD ledger | ratio | goal |\n|---|---|---|---|---|---|")
    print("\n".join(speed_rows(16 if args.quick else 256)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
