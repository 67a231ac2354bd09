"""The compiled-kernel runtime of otagym (numba): the options every kernel is compiled with, its on-disk cache keyed
on the source of every kernel module, and the dispatch of a round's kernel (one core or all, without numba's typing
of every call). The accounting (:mod:`otagym.accounting`) and the schemes' cores use it; nothing here is a
formula.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from numba import typeof

__all__ = ["JIT", "JIT_NO_ALLOC", "PARALLEL_FROM", "KERNEL_MODULES", "parallel", "specialised"]

#: Options of every compiled kernel of otagym (numba): compiled on first use and cached on disk (``__pycache__``), so
#: a process loads them instead of compiling; IEEE arithmetic as numpy's (a division by zero gives inf or NaN, never an
#: exception); no ``fastmath`` (it reorders sums: results would leave the rounding of the same formula in numpy).
JIT = {"cache": True, "error_model": "numpy", "nogil": True}
#: The options of a kernel that takes arrays but creates none (every formula, every loop over given outputs): compiled
#: without numba's reference counting, which otherwise counts the references of every array passed in a call, with
#: atomic operations that cost more than most formulas (measured: 3x on the leakage at alpha = 3).
JIT_NO_ALLOC = {**JIT, "_nrt": False}
#: Batch size (envs of a vector env, elements of a ledger) from which the kernels of a round run over every core
#: (numba's ``prange`` on ``NUMBA_NUM_THREADS`` threads); None, the default: always on one core. Measured on the shared
#: 2-core machine of docs/speed.md (``benchmarks/bench_numba_probe.py``), two threads gave 1.2-1.3x in a quiet moment
#: and down to 0.05x while other processes held the second core (a parallel region waits for its slowest thread); set
#: it (e.g. ``otagym.jit.PARALLEL_FROM = 1024``) on a machine with cores to spare. Results do not depend on it.
PARALLEL_FROM: int | None = None


def parallel(size: int) -> bool:
    """Whether a kernel over ``size`` envs or elements runs over every core (:data:`PARALLEL_FROM`)."""
    return PARALLEL_FROM is not None and size >= PARALLEL_FROM


def specialised(kernel: Any, args: tuple[Any, ...]) -> Callable[..., Any]:
    """``kernel`` (a numba dispatcher) compiled, or loaded from the cache, for the numba types of ``args``, as a
    function that takes arguments of exactly those types: a call goes to the compiled code without numba's dispatch,
    which types every argument of every call (3-4 us for a round's 19 arguments, one a namedtuple of 17 arrays: a
    tenth of a single env's step). The caller passes arguments of the same types at every call (dtype, dimensions,
    layout, writeability, the same namedtuple type): the compiled code checks only the size of an array's elements,
    and reads a strided view passed for a C-ordered array as C-ordered, without an error
    (``tests/otagym/test_speed_kernels.py`` checks every call of the env's round). Not picklable."""
    return kernel.compile(tuple(typeof(a) for a in args))


#: The otagym modules that may hold compiled kernels, as glob patterns relative to the package. A kernel inlines the
#: kernels it calls from the other modules, while numba keys a cached kernel on its own module's source only:
#: :func:`_share_cache_key` keys every one on all of these.
KERNEL_MODULES = ("accounting/*.py", "schemes/*/*.py")


def _share_cache_key() -> None:
    """Key numba's on-disk cache of every kernel in :data:`KERNEL_MODULES` on the source of all of them (a SHA-256 of
    their bytes), so that editing one module recompiles the kernels of the others that inline its functions (numba
    alone would keep serving them stale). Numba's own cache locators, subclassed for otagym's files only; if its
    internals move, numba's default (per-module) keys apply."""
    try:
        from numba.core import caching
    except ImportError:  # pragma: no cover - numba reorganised; per-module keys
        return
    package = Path(__file__).resolve().parent
    files = sorted({f for pattern in KERNEL_MODULES for f in package.glob(pattern)})

    def stamp(self: object) -> str:
        return hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()

    def ours(base: type) -> type:
        def from_function(cls: type, py_func: object, py_file: str) -> object:
            if Path(py_file).resolve() not in files:
                return None
            return base.from_function.__func__(cls, py_func, py_file)
        return type(f"Otagym{base.__name__}", (base,), {"get_source_stamp": stamp,
                                                        "from_function": classmethod(from_function)})
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)  # numba >= 0.59 / older
    bases = [getattr(caching, name, None) or getattr(caching, "_" + name, None)
             for name in ("UserProvidedCacheLocator", "InTreeCacheLocator", "UserWideCacheLocator")]
    if impl is None or None in bases or any(c.__name__.startswith("Otagym") for c in impl._locator_classes):
        return
    impl._locator_classes[:0] = [ours(base) for base in bases]


_share_cache_key()
