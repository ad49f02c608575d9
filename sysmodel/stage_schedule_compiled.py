"""The fluid schedule of dependent stages (:mod:`sysmodel.stage_schedule`), compiled by numba
(docs/sysmodel.md, Speed; issue 31).

Why: the mesh's hierarchical 2D all-reduce chooses its two chunks' split by evaluating the
schedule about 130 times (:func:`sysmodel.collectives.mesh_2d_split`), and each evaluation in
NumPy is a few dozen calls on arrays of two to a few dozen elements -- about 0.3 ms, so 40 ms
per mesh collective and 0.75 s of ``make eval``'s main process. Here the same steps run as
one compiled loop: the same comparisons, every sum added left to right in chain order from
0.0 as :func:`sysmodel.stage_schedule.chains_time_reference` adds it (a row of
``theta[:, None] * usage`` after another, as NumPy's sum over the first axis), so the
figures are the reference's to the last bit (tests/sysmodel/test_stage_schedule.py compares
them on random chains). Like the engine's loop (:mod:`sysmodel.engine_compiled`) the machine
code is cached in ``__pycache__``; a fresh clone compiles it once, which :func:`warm_up`
states apart.

Arguments of :func:`schedule_time`: ``durations`` (per stage, its duration alone at full
speed, s; every one > 0), ``usage`` (per stage and link, the share of the link the stage
takes at full speed: its link time / its duration), ``ends`` (per chain, one past its last
stage: chain c's stages are ``ends[c - 1]`` (0 for the first) to ``ends[c] - 1``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Imported first for its side effect: numba's NumPy support loaded without the BLAS probe that
# would import scipy.linalg (sysmodel.engine_compiled explains it).
import sysmodel.engine_compiled  # noqa: F401,E402  (isort: keep after numba)

__all__ = ["schedule_time", "warm_up"]


def schedule_time(durations: np.ndarray, usage: np.ndarray, ends: np.ndarray, *, eps: float,
                  done: float) -> float:
    """Time until every chain's last stage is done, the chains starting together (the module
    docstring gives the arguments); ``eps`` and ``done``: the reference's thresholds
    (:data:`sysmodel.stage_schedule.EPS`, :data:`~sysmodel.stage_schedule.DONE`), passed by
    its caller so that they are written once."""
    return float(_schedule_time(np.ascontiguousarray(durations, dtype=np.float64),
                                np.ascontiguousarray(usage, dtype=np.float64),
                                np.ascontiguousarray(ends, dtype=np.int64), float(eps), float(done)))


@njit(cache=True)
def _fair_speeds(usage, eps):
    """Max-min fair ``theta`` of the running stages (rows of ``usage``), each at most 1: all
    rise together until a link is full; the stages on a full link stop rising."""
    m, n_links = usage.shape
    theta = np.zeros(m)
    rising = np.ones(m, dtype=np.bool_)
    left = np.empty(n_links)
    demand = np.empty(n_links)
    room = np.empty(n_links)
    while True:
        any_rising = False
        for i in range(m):
            if rising[i]:
                any_rising = True
        if not any_rising:
            return theta
        for j in range(n_links):
            used = 0.0
            wanted = 0.0
            for i in range(m):
                used += theta[i] * usage[i, j]
                if rising[i]:
                    wanted += usage[i, j]
            left[j] = 1.0 - used
            demand[j] = wanted
            room[j] = left[j] / wanted if wanted > eps else np.inf
        room_min = np.inf
        for j in range(n_links):
            if room[j] < room_min:
                room_min = room[j]
        rise_min = np.inf
        for i in range(m):
            if rising[i] and 1.0 - theta[i] < rise_min:
                rise_min = 1.0 - theta[i]
        step = room_min if not rise_min < room_min else rise_min
        for i in range(m):
            if rising[i]:
                theta[i] += step
        for i in range(m):
            stopped = theta[i] >= 1.0 - eps
            if not stopped:
                for j in range(n_links):
                    if room[j] <= step + eps and demand[j] > eps and usage[i, j] > eps:
                        stopped = True
                        break
            if stopped:
                rising[i] = False


@njit(cache=True)
def _schedule_time(durations, usage, ends, eps, done):
    n_chains = ends.shape[0]
    n_links = usage.shape[1]
    at = np.empty(n_chains, dtype=np.int64)      # each chain's current stage
    left = np.ones(n_chains)                     # the fraction of it still to run
    begin = 0
    for c in range(n_chains):
        at[c] = begin
        begin = ends[c]
    running = np.empty(n_chains, dtype=np.int64)
    now = 0.0
    while True:
        m = 0
        for c in range(n_chains):   # the chains still running, in chain order
            if at[c] < ends[c]:
                running[m] = c
                m += 1
        if m == 0:
            return now
        rows = np.empty((m, n_links))
        for i in range(m):
            rows[i, :] = usage[at[running[i]]]
        theta = _fair_speeds(rows, eps)
        rate = np.empty(m)
        for i in range(m):
            rate[i] = theta[i] / durations[at[running[i]]]
        dt = left[running[0]] / rate[0]
        for i in range(1, m):
            t = left[running[i]] / rate[i]
            if t < dt:
                dt = t
        now += dt
        for i in range(m):
            c = running[i]
            remaining = left[c] - rate[i] * dt
            if remaining <= done:
                at[c] += 1
                remaining = 1.0
            left[c] = remaining


def warm_up() -> tuple[float, bool]:
    """Load (or, without a cached copy, compile) :func:`schedule_time` by timing two chains
    on one link: (wall seconds it took, whether it compiled)."""
    import time
    misses = sum(_schedule_time.stats.cache_misses.values()) + sum(_fair_speeds.stats.cache_misses.values())
    begin = time.perf_counter()
    # any thresholds load the same machine code
    schedule_time(np.array([1.0, 3.0]), np.array([[1.0], [1.0]]), np.array([1, 2]), eps=0.0, done=0.0)
    compiled = sum(_schedule_time.stats.cache_misses.values()) + sum(_fair_speeds.stats.cache_misses.values())
    return time.perf_counter() - begin, compiled > misses
