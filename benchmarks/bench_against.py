"""The env's step in this checkout against another revision's, alternated in one run: the single env
(``otagym/OTAPrivacy-v0``, default settings, episode ends included) and the vector env of 4096 envs
(``dp_orders=None``), each the best of 5 timed blocks in a fresh process, the two checkouts taking turns ``--runs``
times so that the machine's load falls on both alike. The other revision is checked out with ``git worktree`` into a
temporary folder (removed at the end); numba compiles its kernels once there, before the first timed run.

    python -m benchmarks.bench_against 14a7101 --runs 3 --cpu 1
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: What each run times (printed as ``single_us vector_ms``).
PROBE = """
import time, numpy as np, gymnasium as gym, otagym
env = gym.make("otagym/OTAPrivacy-v0").unwrapped
env.reset(seed=0)
a = np.zeros(1, np.float32)
def block(n):
    start = time.perf_counter()
    for _ in range(n):
        if env.step(a)[2]:
            env.reset()
    return (time.perf_counter() - start) / n
block(2000)
single = min(block(5000) for _ in range(5))
venv = otagym.OTAPrivacyVectorEnv(4096, dp_orders=None)
venv.reset(seed=0)
actions = np.zeros((4096, 1), np.float32)
def vblock(n):
    start = time.perf_counter()
    for _ in range(n):
        venv.step(actions)
    return (time.perf_counter() - start) / n
vblock(20)
print(single * 1e6, min(vblock(50) for _ in range(5)) * 1e3)
"""


def time_checkout(folder: Path, cpu: int | None) -> tuple[float, float]:
    """(single step in us, 4096-env step in ms) of the checkout in ``folder``, in a fresh process."""
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    env = {**os.environ, "PYTHONPATH": str(folder)}
    out = subprocess.run([*pin, sys.executable, "-c", PROBE], cwd=folder, env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[-2]), float(out[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("revision", help="the git revision to time against (e.g. 14a7101)")
    parser.add_argument("--runs", type=int, default=3, help="alternated runs of each checkout")
    parser.add_argument("--cpu", type=int, default=None, help="pin both to this core (taskset)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "other"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(other), args.revision],
                       check=True, capture_output=True)
        try:
            time_checkout(other, args.cpu)  # numba compiles the other checkout's kernels
            rows = {"this": [], args.revision: []}
            for _ in range(args.runs):
                rows[args.revision].append(time_checkout(other, args.cpu))
                rows["this"].append(time_checkout(ROOT, args.cpu))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)], check=False)
    for name, times in rows.items():
        single, vector = zip(*times)
        print(f"{name:>12}: single step {min(single):6.2f}-{max(single):6.2f} us   "
              f"4096 envs {min(vector):5.2f}-{max(vector):5.2f} ms")
    ratio = [t[0] / o[0] for t, o in zip(rows["this"], rows[args.revision])]
    vratio = [t[1] / o[1] for t, o in zip(rows["this"], rows[args.revision])]
    print(f"this / {args.revision}: single step {min(ratio):.3f}-{max(ratio):.3f}x, "
          f"4096 envs {min(vratio):.3f}-{max(vratio):.3f}x (paired runs; < 1 is faster)")


if __name__ == "__main__":
    main()
