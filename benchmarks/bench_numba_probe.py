"""The measurement behind the compiled round (docs/speed.md): the model-A core as it was in numpy (the last commit
before the compiled kernels, :data:`NUMPY_COMMIT`, checked out by ``git archive`` into a temporary folder) against the
compiled core of this working tree, at N = 1 (the single env, which rl_zoo3, TorchRL's GymEnv and RLlib step) and
N = 4096 (the native vector env); then the compiled kernels on one core against all cores (numba's ``prange``), which
decides :data:`otagym.jit.PARALLEL_FROM`.

    python -m benchmarks.bench_numba_probe            # needs the git history (git archive)
    python -m benchmarks.bench_numba_probe --quick

The two cores cannot live in one process (one package name), so each is timed by worker processes, started in
alternation, each timing CartPole (``CartPoleEnv`` unwrapped, ``CartPoleVectorEnv``) beside its own steps: the ratios to
CartPole are comparable between workers even when the machine's speed drifts, and the best of each over the workers
is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from io import BytesIO
from pathlib import Path

import numpy as np

#: The last commit whose model-A core is numpy (before the compiled kernels).
NUMPY_COMMIT = "9afffe6"
ROOT = Path(__file__).resolve().parents[1]


def best_of(fn: Callable[[], object], repeats: int) -> float:
    """Best time (s) of ``repeats`` calls of ``fn`` after an untimed one. Not ``benchmarks.bench_env.best_of``: the
    workers run this file as a script with another tree's otagym first on ``PYTHONPATH``, so it imports nothing of
    ``benchmarks``."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def worker(quick: bool) -> dict[str, float]:
    """Per-step times (us) of this process's otagym and of CartPole, interleaved."""
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv, CartPoleVectorEnv

    from otagym import OTAPrivacyEnv, OTAPrivacyVectorEnv

    # 128 vector steps: the numpy core's ledger folds its buffer every 128 rounds, so its cost is in the time
    steps, vec_steps, rep = (2000, 128, 2) if quick else (5000, 128, 4)
    out: dict[str, float] = {}
    cart = CartPoleEnv()
    cart.reset(seed=0)

    def cart_steps() -> None:
        for _ in range(steps):
            if cart.step(1)[2]:
                cart.reset()
    for label, kw in (("default", {}), ("dp_orders=None", {"dp_orders": None})):
        env = OTAPrivacyEnv(**kw)
        env.reset(seed=0)
        action = np.array([0.9], np.float32)

        def env_steps(env=env, action=action) -> None:
            for _ in range(steps):
                if env.step(action)[2]:
                    env.reset()
        out[f"single {label}"] = best_of(env_steps, rep) / steps * 1e6
        out[f"cartpole for single {label}"] = best_of(cart_steps, rep) / steps * 1e6
    cvec = CartPoleVectorEnv(num_envs=4096)
    cvec.reset(seed=0)
    ones = np.ones(4096, dtype=np.int64)

    def cvec_steps() -> None:
        for _ in range(vec_steps):
            cvec.step(ones)
    for label, kw in (("default", {}), ("dp_orders=None", {"dp_orders": None})):
        venv = OTAPrivacyVectorEnv(4096, num_rounds=10**6, **kw)
        venv.reset(seed=0)
        act = np.full((4096, 1), 0.9, np.float32)

        def venv_steps(venv=venv, act=act) -> None:
            for _ in range(vec_steps):
                venv.step(act)
        out[f"vector 4096 {label}"] = best_of(venv_steps, rep) / vec_steps * 1e6
        out[f"cartpole for vector 4096 {label}"] = best_of(cvec_steps, rep) / vec_steps * 1e6
    return out


def numpy_tree(folder: Path, repo: Path) -> Path:
    """The otagym package of :data:`NUMPY_COMMIT` in the git repository ``repo``, extracted under ``folder`` (which
    goes on PYTHONPATH)."""
    data = subprocess.run(["git", "-C", str(repo), "archive", NUMPY_COMMIT, "otagym"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def run_worker(pythonpath: Path, quick: bool, what: str = "steps") -> object:
    """A worker process's timings, with ``pythonpath``'s otagym."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    cmd = [sys.executable, __file__, "--worker", what] + (["--quick"] if quick else [])
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=pythonpath)
    return json.loads(done.stdout.strip().splitlines()[-1])


def cores(quick: bool) -> list[tuple[str, float, float]]:
    """(what, one core us, all cores us) of the compiled round and ledger, in this process."""
    from otagym import OTAPrivacyVectorEnv, jit
    from otagym.accounting import RDPLedger

    rep = 3 if quick else 7
    rows: list[tuple[str, float, float]] = []
    for n in (256, 1024, 4096):
        venv = OTAPrivacyVectorEnv(n, num_rounds=10**6, dp_orders=None)
        venv.reset(seed=0)
        act = np.full((n, 1), 0.9, np.float32)
        times = []
        for setting in (None, 1):
            jit.PARALLEL_FROM = setting
            times.append(best_of(lambda venv=venv, act=act: [venv.step(act) for _ in range(20)], rep) / 20 * 1e6)
        rows.append((f"vector env step x{n}, dp_orders=None", *times))
    sigma = np.exp(np.random.default_rng(0).uniform(-1.0, 1.5, (4096, 1)))
    ledger = RDPLedger(np.full((4096, 1), 0.01))
    times = []
    for setting in (None, 1):
        jit.PARALLEL_FROM = setting
        times.append(best_of(lambda: [ledger.record(sigma) for _ in range(20)], rep) / 20 * 1e6)
    rows.append(("RDP ledger round x4096, DEFAULT_ORDERS", *times))
    jit.PARALLEL_FROM = None
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--worker", choices=("steps", "cores"), help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=3, help="worker processes per core (alternated)")
    parser.add_argument("--repo", type=Path, default=ROOT, help="the git repository holding NUMPY_COMMIT")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.quick) if args.worker == "steps" else cores(args.quick)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        old = numpy_tree(Path(tmp), args.repo)
        best: dict[str, dict[str, float]] = {"numpy": {}, "compiled": {}}
        for _ in range(args.workers):
            for name, path in (("numpy", old), ("compiled", ROOT)):
                for key, value in run_worker(path, args.quick).items():
                    best[name][key] = min(best[name].get(key, np.inf), value)
    print(f"numpy core ({NUMPY_COMMIT}) against the compiled core, best of {args.workers} alternated workers each; "
          "ratio = CartPole's time / ours (same process)")
    print(f"{'step':<26} {'numpy us':>10} {'ratio':>8} {'compiled us':>12} {'ratio':>8}  compiled / numpy speed")
    for label in ("single default", "single dp_orders=None", "vector 4096 default", "vector 4096 dp_orders=None"):
        n_us, c_us = best["numpy"][label], best["compiled"][label]
        n_ratio = best["numpy"][f"cartpole for {label}"] / n_us
        c_ratio = best["compiled"][f"cartpole for {label}"] / c_us
        print(f"{label:<26} {n_us:10.1f} {n_ratio:7.3f}x {c_us:12.1f} {c_ratio:7.3f}x  {c_ratio / n_ratio:6.2f}x")
    print("\ncompiled kernels on one core against all cores (numba prange), in this process")
    print(f"{'what':<42} {'one core us':>12} {'all cores us':>13} {'speed-up':>9}")
    for what, one, every in run_worker(ROOT, args.quick, "cores"):
        print(f"{what:<42} {one:12.1f} {every:13.1f} {one / every:8.2f}x")


if __name__ == "__main__":
    main()
