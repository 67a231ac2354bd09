"""How long the command line takes to answer without doing any work: ``otagym --help``, ``otagym --version`` and an
unknown command (an argument error), each a fresh process, start-up included, alternated with the references timed
in the same run (Python doing nothing, ``import gymnasium``, ``import otagym``):

    python -m benchmarks.bench_cli

Also ``otagym evaluate --help`` and an argument error of ``otagym evaluate``: the benchmark's command imports what it
computes with only once its arguments are parsed. Goal: each < 0.5 s on a quiet 2-core machine, importing neither
numba, scipy nor torch (``otagym`` registers its tasks from the schemes' scenarios alone; a command's module loads
when it runs or its help is asked for).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

#: What is timed: a name and the arguments of ``python``.
CASES: dict[str, tuple[str, ...]] = {
    "python -c pass (reference)": ("-c", "pass"),
    "import gymnasium (reference)": ("-c", "import gymnasium"),
    "import otagym": ("-c", "import otagym"),
    "otagym --help": ("-m", "otagym.cli", "--help"),
    "otagym --version": ("-m", "otagym.cli", "--version"),
    "otagym bogus (an argument error)": ("-m", "otagym.cli", "bogus"),
    "otagym evaluate --help": ("-m", "otagym.cli", "evaluate", "--help"),
    "otagym compare --help": ("-m", "otagym.cli", "compare", "--help"),
    "otagym sweep --help": ("-m", "otagym.cli", "sweep", "--help"),
    "otagym evaluate BADTASK (an error)": ("-m", "otagym.cli", "evaluate", "otagym/NoSuchTask-v0", "EqualAlloc"),
}
#: The modules none of the commands above may import.
HEAVY = ("numba", "scipy", "torch", "baselines", "agents")


def _timed(args: tuple[str, ...]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], capture_output=True)
    return time.perf_counter() - start


def heavy_modules(argv: list[str]) -> list[str]:
    """The modules of :data:`HEAVY` that ``otagym argv`` imports, in a fresh process."""
    code = ("import sys\nfrom otagym.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True).stdout
    return out.split("\n")[-2].split() if out.strip() else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="times each case runs (alternated); the median")
    args = parser.parse_args(argv)
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.repeats):
        for name, case in CASES.items():
            times[name].append(_timed(case))
    reference = statistics.median(times["import gymnasium (reference)"])
    print(f"median of {args.repeats}, each a fresh process (goal: the otagym commands < 0.5 s quiet)")
    for name, ts in times.items():
        median = statistics.median(ts)
        print(f"  {name:34s} {median:6.3f} s   {median / reference:5.2f}x import gymnasium")
    for case in (["--help"], ["--version"], ["bogus"], ["evaluate", "--help"]):
        print(f"  otagym {' '.join(case)} imports: {heavy_modules(case) or 'none of ' + ', '.join(HEAVY)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
