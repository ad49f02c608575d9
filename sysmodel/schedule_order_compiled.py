"""The pipeline schedule's round-robin over the stages, compiled by numba (docs/sysmodel.md,
Speed, twenty-fourth increment; issue 31).

:func:`sysmodel.pipeline_schedules.schedule_order` puts every stage's passes in one order: round
after round over the stages, each stage adding its passes in its own order for as long as the
pass it waits for (its producer) is already placed. In CPython that loop cost about 0.6 us per
pass -- 30-45 ms for the validation's PP 35 and PP 64 pipelines (58,800 and 65,536 passes), a
fifth of their case -- and it is the same loop here, over integer arrays: the order, and so
every task number the graph gives, is the Python loop's to the pass
(tests/sysmodel/test_sysmodel_pipeline_schedules.py compares them). Like the engine's loop
(:mod:`sysmodel.engine_compiled`) the machine code is cached in ``__pycache__``; a fresh clone
compiles it once (about 1 s), which :func:`warm_up` states apart.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Imported first for its side effect: it loads numba's NumPy support without the BLAS probe that
# would import scipy.linalg (0.13-0.45 s; sysmodel.engine_compiled explains it). Loading this
# function would otherwise import that support, probe and all, whenever a graph's schedule order
# is made before its engine runs (every pipelined `fred eval`); the engine is needed next anyway.
import sysmodel.engine_compiled  # noqa: F401,E402  (isort: keep after numba)

__all__ = ["round_robin", "warm_up"]


def round_robin(codes: np.ndarray, needs: np.ndarray, n_codes: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(the placed pass codes in order, code -> its place (-1: not placed), passes placed).

    ``codes``: a (stages, passes per stage) array of each stage's pass codes in its own order
    (codes are 0 to ``n_codes`` - 1, each used once); ``needs``: the same shape, the code of the
    pass each waits for, or -1. Round after round, stage 0 first, each stage places its next
    passes while the pass they wait for is placed; it stops when a round places nothing.
    Fewer placed passes than ``codes`` holds means some wait on one never placed (a caller's
    error to report)."""
    return _round_robin(np.ascontiguousarray(codes, dtype=np.int64),
                        np.ascontiguousarray(needs, dtype=np.int64), n_codes)


@njit(cache=True)
def _round_robin(codes, needs, n_codes):
    stages, width = codes.shape
    number = np.full(n_codes, -1, dtype=np.int64)
    order = np.empty(stages * width, dtype=np.int64)
    pos = np.zeros(stages, dtype=np.int64)
    placed = 0
    progress = True
    while progress:
        progress = False
        for s in range(stages):
            p = pos[s]
            while p < width and (needs[s, p] < 0 or number[needs[s, p]] >= 0):
                number[codes[s, p]] = placed
                order[placed] = codes[s, p]
                placed += 1
                p += 1
            if p > pos[s]:
                pos[s] = p
                progress = True
    return order[:placed], number, placed


def warm_up() -> tuple[float, bool]:
    """Load (or, without a cached copy, compile) :func:`round_robin` by ordering two passes:
    (wall seconds it took, whether it compiled)."""
    import time
    misses = sum(_round_robin.stats.cache_misses.values())
    start = time.perf_counter()
    round_robin(np.array([[0, 1]]), np.array([[-1, 0]]), 2)
    return time.perf_counter() - start, sum(_round_robin.stats.cache_misses.values()) > misses
