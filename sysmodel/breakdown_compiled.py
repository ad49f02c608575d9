"""The breakdown's interval sweeps, compiled by numba (docs/sysmodel.md, Speed, twenty-fifth
increment; issue 31).

:func:`sysmodel.breakdown.attribute_time` finds the representative stage's idle compute time
(:func:`~sysmodel.breakdown.interval_gaps`), then lets each communication category claim what it
covers (:func:`~sysmodel.breakdown.interval_union`, :func:`~sysmodel.breakdown.interval_overlap`)
-- a few dozen numpy calls per iteration, about a seventh of a Transformer-17B evaluation. Here
the same steps run as one compiled loop over the engine's columns: the same comparisons and
maxima (``np.maximum``'s and ``np.minimum``'s choice on ties included), a stable sort by start
as numpy's, and every sum added left to right from 0.0 in the order the numpy functions add it,
so the figures are theirs to the last bit (tests/sysmodel/test_breakdown.py compares them).
Like the engine's loop (:mod:`sysmodel.engine_compiled`) the machine code is cached in
``__pycache__``; a fresh clone compiles it once, which :func:`warm_up` states apart.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Imported first for its side effect: numba's NumPy support loaded without the BLAS probe that
# would import scipy.linalg (sysmodel.engine_compiled explains it).
import sysmodel.engine_compiled  # noqa: F401,E402  (isort: keep after numba)

__all__ = ["attribute_columns", "warm_up"]


def attribute_columns(start: np.ndarray, end: np.ndarray, duration: np.ndarray, compute: np.ndarray,
                      makespan: float, code: np.ndarray, npus: np.ndarray, npu: int,
                      category_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(claimed, busy, counts): per category of ``category_codes`` the idle compute seconds its
    tasks cover (each taking only what the earlier ones left), then the bubble (what none
    covers); per category the seconds its tasks run; per category its tasks of the stage, then
    the idle intervals none covers (a caller's ``sum()`` of none is the integer 0).

    ``start``, ``end``, ``duration``: the run's float64 columns by task number; ``compute``: the
    representative stage's compute tasks (task numbers); ``makespan``: the run's; ``code``,
    ``npus``: per task its category code and NPU (-1: none); ``npu``: the stage's NPU (-1:
    none); ``category_codes``: the code of each communication category in the order they claim
    (-1: no task has it). The stage's tasks are those of NPU ``npu`` or of none."""
    return _attribute(_read_only(start), _read_only(end), _read_only(duration),
                      _read_only(np.ascontiguousarray(compute, dtype=np.int64)), float(makespan),
                      _read_only(code), _read_only(npus), int(npu), _read_only(category_codes))


def _read_only(values: np.ndarray) -> np.ndarray:
    """A read-only view of ``values``: numba compiles (and loads from its cache) one machine
    code per argument type, and an array's writability is part of it; the engine's columns come
    both ways (its category codes read-only), so every argument is passed read-only and the one
    version :func:`warm_up` loads is the one the runs call (timed: a second version's loading
    cost a validation's first case about 6 ms)."""
    view = values.view()
    view.flags.writeable = False
    return view


@njit(cache=True, inline="always")
def _maximum(a, b):
    return a if a >= b else b   # np.maximum's choice (no NaN here): the first on a tie


@njit(cache=True, inline="always")
def _minimum(a, b):
    return a if a <= b else b   # np.minimum's choice


@njit(cache=True)
def _gaps(lo_in, hi_in, makespan):
    """interval_gaps: [0, makespan] minus the intervals, as (starts, ends)."""
    order = np.argsort(lo_in, kind="mergesort")
    n = len(order)
    lo = np.empty(n + 1)
    hi = np.empty(n + 1)
    m = 0
    reach = 0.0
    for j in range(n):
        a = lo_in[order[j]]
        if a > reach:
            lo[m] = reach
            hi[m] = a
            m += 1
        b = _maximum(hi_in[order[j]], 0.0)
        reach = b if j == 0 else _maximum(reach, b)
    if reach < makespan:
        lo[m] = reach
        hi[m] = makespan
        m += 1
    return lo[:m], hi[:m]


@njit(cache=True)
def _union(lo_in, hi_in):
    """interval_union: the sorted, disjoint union of the non-empty intervals."""
    n = len(lo_in)
    keep = np.empty(n, dtype=np.int64)
    k = 0
    for j in range(n):
        if hi_in[j] > lo_in[j]:
            keep[k] = j
            k += 1
    keep = keep[:k]
    a_all = lo_in[keep]
    order = np.argsort(a_all, kind="mergesort")
    lo = np.empty(k)
    hi = np.empty(k)
    m = -1
    reach = 0.0
    for j in range(k):
        a = a_all[order[j]]
        b = hi_in[keep[order[j]]]
        if j == 0 or a > reach:
            m += 1
            lo[m] = a
        reach = b if j == 0 else _maximum(reach, b)
        hi[m] = reach
    return lo[:m + 1], hi[:m + 1]


@njit(cache=True)
def _overlap(seg_lo, seg_hi, iv_lo, iv_hi):
    """interval_overlap: (covered, rest starts, rest ends) of the segments by the intervals."""
    n_iv = len(iv_lo)
    # two disjoint sorted sets meet in at most (segments + intervals) pairs, each pair leaving
    # at most one rest piece before it, each segment one after its last
    size = 2 * len(seg_lo) + n_iv
    rest_lo = np.empty(size)
    rest_hi = np.empty(size)
    m = 0
    covered = 0.0
    first = 0
    for i in range(len(seg_lo)):
        s_lo, s_hi = seg_lo[i], seg_hi[i]
        while first < n_iv and iv_hi[first] <= s_lo:   # searchsorted(iv_hi, s_lo, "right")
            first += 1
        left = s_lo
        k = first
        while k < n_iv and iv_lo[k] < s_hi:             # up to searchsorted(iv_lo, s_hi, "left")
            lo = _maximum(s_lo, iv_lo[k])
            hi = _minimum(s_hi, iv_hi[k])
            covered += hi - lo
            if left < lo:
                rest_lo[m] = left
                rest_hi[m] = lo
                m += 1
            left = hi
            k += 1
        if left < s_hi:
            rest_lo[m] = left
            rest_hi[m] = s_hi
            m += 1
    return 0.0 + covered, rest_lo[:m], rest_hi[:m]


@njit(cache=True)
def _attribute(start, end, duration, compute, makespan, code, npus, npu, category_codes):
    n_cat = len(category_codes)
    idle_lo, idle_hi = _gaps(start[compute], end[compute], makespan)
    claimed = np.zeros(n_cat + 1)
    busy = np.zeros(n_cat)
    counts = np.zeros(n_cat + 1, dtype=np.int64)
    n = len(code)
    for c in range(n_cat):
        want = category_codes[c]
        if want < 0:
            continue
        count = 0
        for t in range(n):
            if code[t] == want and (npus[t] == -1 or npus[t] == npu):
                count += 1
        tasks = np.empty(count, dtype=np.int64)
        j = 0
        total = 0.0
        for t in range(n):
            if code[t] == want and (npus[t] == -1 or npus[t] == npu):
                tasks[j] = t
                total += duration[t]
                j += 1
        busy[c] = total
        counts[c] = count
        if count and len(idle_lo):
            iv_lo, iv_hi = _union(start[tasks], end[tasks])
            claimed[c], idle_lo, idle_hi = _overlap(idle_lo, idle_hi, iv_lo, iv_hi)
    bubble = 0.0
    for i in range(len(idle_lo)):
        bubble += idle_hi[i] - idle_lo[i]
    claimed[n_cat] = bubble
    counts[n_cat] = len(idle_lo)
    return claimed, busy, counts


def warm_up() -> tuple[float, bool]:
    """Load (or, without a cached copy, compile) :func:`attribute_columns` by breaking down a
    two-task run: (wall seconds it took, whether it compiled)."""
    import time
    misses = sum(_attribute.stats.cache_misses.values())
    begin = time.perf_counter()
    attribute_columns(np.array([0.0, 0.5]), np.array([1.0, 2.0]), np.array([1.0, 1.5]), np.array([0]), 2.0,
                      np.array([0, 1]), np.array([0, -1]), 0, np.array([1, -1, -1, -1]))
    return time.perf_counter() - begin, sum(_attribute.stats.cache_misses.values()) > misses
