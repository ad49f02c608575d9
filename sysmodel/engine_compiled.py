"""The engine's event loop over arrays, compiled by numba (docs/sysmodel.md, Speed).

:meth:`sysmodel.engine.Engine.run` hands the task graph to :func:`run_arrays` as flat arrays
(:class:`GraphArrays`: durations, resources, dependents, queues, link shares) and reads every
task's start and end back. The loop is the one :mod:`sysmodel.engine_reference` specifies --
resources run their queues in order, a finished task releases its dependents and the freed
resources start in name order, transfers share links max-min fairly (by strict priority level
with a preemption latency, at a start or a resumption, when the engine has priorities) and continue with their fixed latency
once their bytes are through -- written with integer task and resource numbers so that numba
compiles it (``@njit(cache=True)``: the machine code is kept in ``__pycache__`` and loaded by
later processes, 0.3-0.5 s; the first call on a fresh clone compiles, about 10 s of CPU, stated
apart by ``make bench-sysmodel``). Rates are recomputed from the active transfers' sparse link
shares whenever the set of active transfers changes (memoised per set); sums run in another
order than the reference's, so figures agree to rounding (tested to 1e-9 relative,
``tests/sysmodel/test_sysmodel_engine_property.py``).

Ties are broken as the reference breaks them: the fixed-duration heap orders by (end time,
task number); among transfers finishing at the same instant the first started wins, the others
within ``EPS`` of done finish with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numba.np.linalg
from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic

from hdl.contracts.errors import FredError


def _import_numba_arraymath_without_scipy() -> None:
    """Import numba's NumPy support (``numba.np.arraymath``, which loading or compiling any
    function imports) without its BLAS probe: at import it calls ``ensure_blas()``, which
    imports ``scipy.linalg`` (0.13 s unloaded, up to 0.45 s on a loaded machine, in every
    process that runs an engine) only to decide whether ``np.dot`` of two vectors inside
    compiled code may call BLAS. The loop below has no ``np.dot``; without the probe numba
    takes its own loop for such products. The probe is restored at once, so anything in the
    process that asks for linear algebra later still gets it (and scipy then)."""
    import importlib
    import sys
    probe = getattr(numba.np.linalg, "ensure_blas", None)
    if "numba.np.arraymath" in sys.modules or probe is None:   # imported already, or another numba
        return

    def no_blas():
        raise ImportError("BLAS probe skipped (sysmodel.engine_compiled)")
    numba.np.linalg.ensure_blas = no_blas
    try:
        importlib.import_module("numba.np.arraymath")
    finally:
        numba.np.linalg.ensure_blas = probe


_import_numba_arraymath_without_scipy()

__all__ = ["GraphArrays", "run_arrays", "dependents_csr", "warm_up", "EPS", "SERVED"]

#: a transfer whose remaining fraction is below this is done; events within it coincide
EPS = 1e-12


@dataclass(frozen=True)
class GraphArrays:
    """A task graph as arrays (task numbers are indices; resources are numbered in name order).

    ``duration`` (s), ``resource``, ``remaining`` (dependencies per task, a duplicate counted
    twice), ``dependents_ptr``/``dependents`` (CSR: the tasks depending on each task, in task
    order), ``queue_ptr``/``queue`` (CSR: each resource's tasks in run order), ``first_tries``
    (resources in the order the run first tries them), ``entry`` (per task, its transfer entry
    or -1 for a fixed duration), ``level`` (priority level per task), ``alone`` (per entry, its
    busiest-link time alone), ``link_ptr``/``links``/``share`` (CSR per entry: the links it
    loads and its share of each at full speed), ``n_links``, ``priority`` (whether levels
    apply), ``preempt_s`` (two rows of per-link costs, s, ``[first, further]``: a transfer
    that starts (or resumes after waiting) while a lower level is served on links it uses pays the largest ``first`` cost
    of those links or, if larger, the largest ``further`` cost of the lower transfers' own links there,
    :class:`sysmodel.engine.Engine`; a (0, 0) array when no preemption costs anything), ``shared_phase`` (per link, the link whose
    time it shares as one phase of several transfers, -1 where none; an empty array when no
    link does: :class:`sysmodel.engine.Engine`), ``tier`` (per entry, its turn within its
    level: :func:`sysmodel.engine.entry_tiers`); the switches held per switch
    (:func:`sysmodel.engine._hold_arrays`, ``Engine(hold=)``): ``head`` and ``after`` (per
    link of each entry, as ``links``, s), ``hold_first`` / ``hold_count`` (per given entry,
    its held entries: -1 / 0 for none) and ``hold_cut`` (per entry, a held entry's cut; the
    held entries follow the given ones in ``alone``, ``link_ptr`` and ``tier``)."""

    duration: np.ndarray
    resource: np.ndarray
    remaining: np.ndarray
    dependents_ptr: np.ndarray
    dependents: np.ndarray
    queue_ptr: np.ndarray
    queue: np.ndarray
    first_tries: np.ndarray
    entry: np.ndarray
    level: np.ndarray
    alone: np.ndarray
    link_ptr: np.ndarray
    links: np.ndarray
    share: np.ndarray
    n_links: int
    priority: bool
    preempt_s: np.ndarray
    shared_phase: np.ndarray
    tier: np.ndarray
    head: np.ndarray = None
    after: np.ndarray = None
    hold_first: np.ndarray = None
    hold_count: np.ndarray = None
    hold_cut: np.ndarray = None


def run_arrays(g: GraphArrays, *, memo_rows: int = 4096) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Run the graph: (start per task, end per task, each resource's queue head (an index into
    ``g.queue``), tasks done); a task that never started keeps -1. ``memo_rows``: rows of the
    rate memo's table (a power of two; it keeps up to half as many sets of transfers)."""
    if memo_rows < 2 or memo_rows & (memo_rows - 1):
        raise FredError(f"memo_rows must be a power of two >= 2, got {memo_rows}")
    n_entries = g.alone.shape[0]
    head = np.zeros(g.links.shape[0]) if g.head is None else g.head
    after = np.full(g.links.shape[0], np.inf) if g.after is None else g.after
    hold_first = np.full(n_entries, -1, dtype=np.int64) if g.hold_first is None else g.hold_first
    hold_count = np.zeros(n_entries, dtype=np.int64) if g.hold_count is None else g.hold_count
    hold_cut = np.full(n_entries, np.inf) if g.hold_cut is None else g.hold_cut
    return _run(g.duration, g.resource, g.remaining.copy(), g.dependents_ptr, g.dependents,
                g.queue_ptr, g.queue, g.first_tries, g.entry, g.level, g.alone, g.link_ptr,
                g.links, g.share, g.n_links, g.priority, g.preempt_s, g.shared_phase, g.tier,
                head, after, hold_first, hold_count, hold_cut, *_memo_tables(memo_rows))


#: memo_rows -> the rate memo's arrays, allocated once per process and emptied by each run.
#: Why kept: the stores (1 MB at 4,096 rows) are above glibc's threshold for serving an
#: allocation from fresh mapped pages, so allocating them per run cost a page fault per page
#: touched -- 0.25 ms of a 0.65 ms Transformer-17B run -- unless some earlier large free had
#: raised that threshold (importing scipy did).
_MEMO_TABLES: dict[int, tuple] = {}


def _memo_tables(rows: int) -> tuple:
    """The rate memo of :func:`_memo_rates` for ``rows`` table rows (a power of two; up to half
    as many sets kept): the (hash, start, length) table, the stores of codes and rates (16 per
    row, read only where this run wrote them) and (codes used, sets kept); :func:`_run` empties
    the table and the counts."""
    tables = _MEMO_TABLES.get(rows)
    if tables is None:
        tables = _MEMO_TABLES[rows] = (np.zeros((rows, 3), dtype=np.int64), np.zeros(16 * rows, dtype=np.int64),
                                       np.zeros(16 * rows), np.zeros(2, dtype=np.int64))
    return tables


@njit(cache=True)
def dependents_csr(counts, flat):
    """The tasks depending on each task, in task order, as CSR (``dependents_ptr``,
    ``dependents``: :class:`GraphArrays`), from each task's dependency count (``counts``) and
    its dependencies in a row (``flat``: task numbers; a duplicate counted twice), by one
    counting sort: what a stable argsort of ``flat`` gives (a task's dependents in the order
    their entries come in ``flat``, which is task order). Counts that do not add up to
    ``flat``'s length, or a dependency that names no task, raise ValueError (the builders
    check both; an error rather than a read or a write out of bounds). Why compiled: the
    argsort, the repeat of the task numbers, the bincount and the cumsum were about a fifth of
    :meth:`sysmodel.engine.Engine.arrays` on Transformer-17B's graph (docs/sysmodel.md, Speed,
    thirty-first increment)."""
    n = counts.shape[0]
    total = 0
    for t in range(n):
        total += counts[t]
    if total != flat.shape[0]:
        raise ValueError("internal: the dependency counts do not add up to the dependencies")
    ptr = np.zeros(n + 1, dtype=np.int64)
    for k in range(flat.shape[0]):
        if not 0 <= flat[k] < n:
            raise ValueError("internal: a dependency names no task of the graph")
        ptr[flat[k] + 1] += 1
    for t in range(n):
        ptr[t + 1] += ptr[t]
    place = ptr[:n].copy()
    dependents = np.empty(flat.shape[0], dtype=np.int64)
    k = 0
    for t in range(n):
        for _ in range(counts[t]):
            d = flat[k]
            dependents[place[d]] = t
            place[d] += 1
            k += 1
    return ptr, dependents


def warm_up() -> tuple[float, bool]:
    """Load (or, without a cached copy, compile) the loop by running a two-task graph, and
    :func:`dependents_csr` on it: (wall seconds it took, whether either compiled). A benchmark
    states this cost apart."""
    import time
    compiled = (_run, dependents_csr)
    misses = sum(sum(f.stats.cache_misses.values()) for f in compiled)
    start = time.perf_counter()
    dependents_csr(np.array([0, 1]), np.array([0]))
    one = np.ones(1)
    run_arrays(GraphArrays(
        duration=np.array([1.0, 1.0]), resource=np.array([0, 1]), remaining=np.array([0, 0]),
        dependents_ptr=np.zeros(3, dtype=np.int64), dependents=np.zeros(0, dtype=np.int64),
        queue_ptr=np.array([0, 1, 2]), queue=np.array([0, 1]), first_tries=np.array([0, 1]),
        entry=np.array([-1, 0]), level=np.array([0, 1]), alone=one, link_ptr=np.array([0, 1]),
        links=np.array([0]), share=one, n_links=1, priority=True, preempt_s=np.zeros((0, 0)),
        shared_phase=np.zeros(0, dtype=np.int64), tier=np.zeros(1, dtype=np.int64)))
    return time.perf_counter() - start, sum(sum(f.stats.cache_misses.values()) for f in compiled) > misses


@intrinsic
def _borrowed(typingctx, arr):
    """``arr`` seen through a view without a reference count (a null meminfo and parent): for
    the arrays :func:`_run` keeps alive itself, while its loop runs.

    Why: numba counts a reference to an array every time a variable takes it -- each argument
    of a helper, inlined or called, on every call -- with an atomic increment and decrement
    (``NRT_incref``/``NRT_decref``: a ``lock``-prefixed instruction each). In the loop that was
    about two thirds of the run (perf on a Megatron-1T validation graph: 68 % of the samples
    on those two instructions). A view with a null meminfo makes each count a test and a
    return. Such a view must not outlive the array it views: :func:`_run` returns its owned
    arrays, never a view."""
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, signature, args):
        src = context.make_array(arr)(context, builder, value=args[0])
        view = context.make_array(arr)(context, builder)
        for field in ("nitems", "itemsize", "data", "shape", "strides"):
            setattr(view, field, getattr(src, field))
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        view.parent = cgutils.get_null_value(view.parent.type)
        return view._getvalue()
    return arr(arr), codegen


@njit(cache=True, inline="never")
def _keep_until_here(owned):
    """Nothing: a use of ``owned`` (a tuple of arrays), so that they live until this call
    (:func:`_borrowed`)."""
    return None


@njit(cache=True, inline="always")
def _heap_less(ht, hi, a, b):
    return ht[a] < ht[b] or (ht[a] == ht[b] and hi[a] < hi[b])


@njit(cache=True, inline="always")
def _heap_push(ht, hi, size, t, tid):
    """Push (t, tid) onto the binary heap ``ht``/``hi`` of ``size`` items; returns the new size."""
    k = size
    ht[k] = t
    hi[k] = tid
    while k > 0:
        p = (k - 1) // 2
        if _heap_less(ht, hi, k, p):
            ht[k], ht[p] = ht[p], ht[k]
            hi[k], hi[p] = hi[p], hi[k]
            k = p
        else:
            break
    return size + 1


@njit(cache=True, inline="always")
def _heap_pop(ht, hi, size):
    """Remove the smallest (time, task) of the heap; returns the new size (the item is read
    before the call, at index 0)."""
    size -= 1
    ht[0] = ht[size]
    hi[0] = hi[size]
    k = 0
    while True:
        c = 2 * k + 1
        if c >= size:
            break
        if c + 1 < size and _heap_less(ht, hi, c + 1, c):
            c += 1
        if _heap_less(ht, hi, c, k):
            ht[k], ht[c] = ht[c], ht[k]
            hi[k], hi[c] = hi[c], hi[k]
            k = c
        else:
            break
    return size


@njit(cache=True, inline="always")
def _limit(capacity, use, moving, held):
    """The largest common factor the moving transfers on a link can run at (the reference
    loop's ``_limit``): ``use`` x lam + max(``held``, ``moving`` x lam) fits ``capacity``."""
    if use <= EPS and moving <= EPS:
        return np.inf
    if moving > EPS and (use <= EPS or capacity >= use * held / moving + held):
        return capacity / (use + moving)
    if use > EPS:
        return max(capacity - held, 0.0) / use
    return np.inf


@njit(cache=True)
def _fill(demand, grouped, capacity, factor, active, held):
    """Progressive filling of the ``active`` rows of ``demand`` (transfers x links, each row its
    share of each link at full speed) into ``capacity``: all slow down by a common factor until
    a link saturates; transfers on it are fixed at that factor (``factor``, in place), the
    others continue. ``grouped`` (same shape): shares of a phase the transfers (one priority
    level) hold together, which count on a link as their largest, not their sum; ``held``
    (in place): their largest use so far, fixed members' (``capacity`` includes it). ``capacity``
    is reduced in place to what is left."""
    k, n = demand.shape
    use = np.empty(n)
    moving = np.empty(n)
    limits = np.empty(n)
    while active.any():
        use[:] = 0.0
        moving[:] = 0.0
        for i in range(k):
            if active[i]:
                use += demand[i]
                np.maximum(moving, grouped[i], moving)
        lam = 1.0
        for j in range(n):
            limits[j] = _limit(capacity[j], use[j], moving[j], held[j])
            lam = min(lam, limits[j])
        if lam >= 1.0 - 1e-12:
            break                                   # the rest run at full speed
        bound = lam * (1 + 1e-9)
        frozen = np.zeros(k, dtype=np.bool_)
        for i in range(k):
            if active[i]:
                for j in range(n):
                    if limits[j] <= bound and (demand[i, j] > EPS or grouped[i, j] > EPS):
                        frozen[i] = True
                        break
        if not frozen.any():                        # only tiny demands left on it
            frozen[:] = active
        for i in range(k):
            if frozen[i]:
                factor[i] = lam
                capacity -= lam * demand[i]
                np.maximum(held, lam * grouped[i], held)
                active[i] = False
        np.maximum(capacity, 0.0, capacity)
    if active.any():     # the rest ran at full speed: they use their whole demand
        for i in range(k):
            if active[i]:
                capacity -= demand[i]
                np.maximum(held, grouped[i], held)
    capacity -= held
    np.maximum(capacity, 0.0, capacity)


@njit(cache=True, inline="always")
def _column_of(link, shared):
    """The link whose column ``link``'s demand goes to: the one it shares a phase with, else itself."""
    if shared.shape[0] > 0 and shared[link] >= 0:
        return shared[link]
    return link


@njit(cache=True)
def _rates(act, n_act, rate, entry, level, priority, alone, link_ptr, links, share, column, shared, tier):
    """Max-min fair rates (fraction of its bytes per second, into ``rate`` per task) of the
    ``n_act`` active transfers ``act``; with ``priority``, strict priority by level (the
    highest fills the links first, the next what is left; a level left with nothing waits:
    factor 0 -> 1e-9). ``column``: per link -1 (scratch, restored). ``shared``
    (``GraphArrays.shared_phase``): a share of a link sharing another's phase is a grouped
    demand on that one (:func:`_fill`). Within a level, tier by tier (``tier`` per entry),
    lowest first."""
    if n_act == 1:
        rate[act[0]] = 1.0 / alone[entry[act[0]]]
        return
    n_cols = 0
    for a in range(n_act):
        e = entry[act[a]]
        for p in range(link_ptr[e], link_ptr[e + 1]):
            c = _column_of(links[p], shared)
            if column[c] < 0:
                column[c] = n_cols
                n_cols += 1
    demand = np.zeros((n_act, n_cols))
    grouped = np.zeros((n_act, n_cols))
    for a in range(n_act):
        e = entry[act[a]]
        for p in range(link_ptr[e], link_ptr[e + 1]):
            c = _column_of(links[p], shared)
            if c == links[p]:
                demand[a, column[c]] += share[p]
            else:
                grouped[a, column[c]] += share[p]
    for a in range(n_act):
        e = entry[act[a]]
        for p in range(link_ptr[e], link_ptr[e + 1]):
            column[_column_of(links[p], shared)] = -1
    capacity = np.ones(n_cols)
    factor = np.ones(n_act)
    lv = np.empty(n_act, dtype=np.int64)
    span = tier.max() + 1 if tier.shape[0] > 0 else 1
    for a in range(n_act):    # filled in decreasing order: level first, then the lower tier
        lv[a] = (level[act[a]] if priority else 0) * span + (span - 1 - tier[entry[act[a]]])
    held = np.zeros(n_cols)   # a level's grouped phases' largest use so far (kept over its tiers)
    owned = (demand, grouped, capacity, factor, lv, held)   # seen through views below (_borrowed)
    demand, grouped, capacity = _borrowed(demand), _borrowed(grouped), _borrowed(capacity)
    factor, lv, held = _borrowed(factor), _borrowed(lv), _borrowed(held)
    top, bottom = lv.max(), lv.min()
    if top == bottom:
        _fill(demand, grouped, capacity, factor, np.ones(n_act, dtype=np.bool_), held)
    else:
        current = top + 1
        while True:       # each level (and tier) present, highest first
            nxt = bottom - 1
            for a in range(n_act):
                if lv[a] < current and lv[a] > nxt:
                    nxt = lv[a]
            if nxt < bottom:
                break
            if nxt // span != current // span:
                held[:] = 0.0     # a new level: its own phases
            else:
                capacity += held  # the level's next tier: its phases' use counted once more below
            current = nxt
            _fill(demand, grouped, capacity, factor, lv == current, held)
    for a in range(n_act):
        rate[act[a]] = max(factor[a], 1e-9) / alone[entry[act[a]]]
    _keep_until_here(owned)


@njit(cache=True, inline="always")
def _memo_rates(act, n_act, rate, code, memo, entry, level, priority, alone, link_ptr, links, share, column,
                shared, tier):
    """:func:`_rates`, memoised over repeated sets of active transfers: transfers with the same
    code (entry and level) have the same rate, so a set is named by its sorted codes, and its
    rates are kept in that order. ``memo`` (:func:`_memo_tables`): an open-addressing table of
    (hash, start, length) rows into flat stores of codes and rates; a full table or store
    stops keeping new sets (they are computed every time); then two scratch rows of
    :func:`_run` (a set's sorted codes and their order: no allocation per call)."""
    index, codes_kept, rates_kept, fill, codes, order = memo   # the last two: scratch rows
    for a in range(n_act):          # insertion sort by code: a handful of transfers
        c = code[act[a]]
        j = a
        while j > 0 and codes[j - 1] > c:
            codes[j] = codes[j - 1]
            order[j] = order[j - 1]
            j -= 1
        codes[j] = c
        order[j] = a
    key = np.int64(n_act)
    for a in range(n_act):
        key = key * np.int64(1000003) + codes[a]
    mask = index.shape[0] - 1
    slot = key & mask
    while index[slot, 2] > 0:
        if index[slot, 0] == key and index[slot, 2] == n_act:
            at = index[slot, 1]
            same = True
            for a in range(n_act):
                if codes_kept[at + a] != codes[a]:
                    same = False
                    break
            if same:
                for a in range(n_act):
                    rate[act[order[a]]] = rates_kept[at + a]
                return
        slot = (slot + 1) & mask
    _rates(act, n_act, rate, entry, level, priority, alone, link_ptr, links, share, column, shared, tier)
    at = fill[0]
    if 2 * fill[1] < index.shape[0] and at + n_act <= codes_kept.shape[0]:
        index[slot, 0], index[slot, 1], index[slot, 2] = key, at, n_act
        for a in range(n_act):
            codes_kept[at + a] = codes[a]
            rates_kept[at + a] = rate[act[order[a]]]
        fill[0] += n_act
        fill[1] += 1


#: a transfer runs at more than this fraction of its speed alone: it is being served (a
#: transfer waiting behind a higher level runs at the floor, 1e-9)
SERVED = 1e-6


@njit(cache=True)
def _preempted(tid, act, n_act, entry, level, link_ptr, links, mark, stamp, rate, rated, alone,
               preempt_s, shared):
    """What ``tid`` pays for preempting: the largest first-row ``preempt_s`` of the links it
    uses on which a transfer of a lower level is being served -- one with a rate (``rate``:
    the current ones, or at a resumption those until then) above :data:`SERVED` of its speed
    alone (one that started at this instant has no packet in
    flight yet, one that waits behind a higher level has none either: nothing to drain) --
    or, if larger, the largest second-row (further on) cost of such a lower transfer's own
    links there (before ``shared`` maps them: the lower class keeps flowing where it holds
    that link; :class:`sysmodel.engine.Engine`); 0 when there is none; a link sharing another's phase
    counts as that one (``shared``). ``mark``: per link, scratch stamps; ``stamp`` is new for
    this call."""
    e = entry[tid]
    for p in range(link_ptr[e], link_ptr[e + 1]):
        mark[_column_of(links[p], shared)] = stamp
    cost = 0.0
    for a in range(n_act):
        other = act[a]
        if level[other] < level[tid] and rated[other] and rate[other] * alone[entry[other]] > SERVED:
            o = entry[other]
            for p in range(link_ptr[o], link_ptr[o + 1]):
                c = _column_of(links[p], shared)
                if mark[c] == stamp:
                    if preempt_s[0, c] > cost:
                        cost = preempt_s[0, c]
                    if preempt_s[1, links[p]] > cost:
                        cost = preempt_s[1, links[p]]
    return cost


@njit(cache=True)
def _run(duration, resource, remaining, dependents_ptr, dependents, queue_ptr, queue, first_tries,
         entry, level, alone, link_ptr, links, share, n_links, priority, preempt_s, shared, tier,
         head_s, after, hold_first, hold_count, hold_cut,
         memo_index, memo_codes, memo_rates, memo_fill):
    """The event loop (module docstring); returns (start, end, head, done). The per-task path
    (a task ends, its resources start their next tasks) is written out in this one function:
    numba reference-counts the arrays passed to a function it calls, which costs more than the
    path itself; helpers run once per change of the active transfers. Every array is used
    through a :func:`_borrowed` view (no counts at all); the arrays made here are kept alive by
    ``owned`` and only those are returned."""
    n = duration.shape[0]
    n_res = queue_ptr.shape[0] - 1
    start_kept = np.full(n, -1.0)                 # returned; the loop writes through views
    end_kept = np.full(n, -1.0)
    head_kept = queue_ptr[:-1].copy()
    busy = np.zeros(n_res, dtype=np.bool_)
    # the fixed-duration heap: (end time, task), and (release time, n + task) of held switches
    ht = np.empty(2 * n + 1)
    hi = np.empty(2 * n + 1, dtype=np.int64)
    act = np.empty(n + 1, dtype=np.int64)         # active transfers, in the order they started
    frac = np.zeros(n)                            # per transfer, the remaining fraction of its bytes
    rate = np.zeros(n)
    rated = np.zeros(n, dtype=np.bool_)           # its rate is the current one
    latency = np.zeros(n)
    before = np.zeros(n)                          # per transfer, scratch: its rate until a change
    column = np.full(max(n_links, 1), -1, dtype=np.int64)
    mark = np.zeros(max(n_links, 1), dtype=np.int64)
    ready = np.empty(max(n_res, first_tries.shape[0]) + 1, dtype=np.int64)
    # switches held per switch (``Engine(hold=)``): per transfer its entry now (a held entry
    # past its bytes), whether it is past its bytes holding switches, when its bytes were
    # through, and whether it has not been served since it started
    has_hold = priority and hold_first.shape[0] > 0 and hold_first.max() >= 0
    cur = entry.copy()
    holding = np.zeros(n, dtype=np.bool_)
    bytes_end = np.zeros(n)
    fresh = np.zeros(n, dtype=np.bool_)
    hmark = np.zeros(max(n_links, 1), dtype=np.int64)   # scratch of _head_block
    hcol = np.zeros(max(n_links, 1))
    wait_head = np.zeros(n)                       # per transfer, where it waited last (s)
    # every array of the loop seen without reference counts (_borrowed). The arguments live in
    # the caller; the arrays made here are kept alive by ``owned`` until the loop has ended (a
    # variable's last use drops its reference: the view alone would not keep its array)
    sort_codes = np.empty(n + 1, dtype=np.int64)  # scratch of _memo_rates: a set's codes, sorted
    sort_order = np.empty(n + 1, dtype=np.int64)
    owned = (busy, ht, hi, act, frac, rate, rated, latency, before, column, mark, ready, cur, holding,
             bytes_end, fresh, hmark, hcol, wait_head, sort_codes, sort_order)
    start, end, head = _borrowed(start_kept), _borrowed(end_kept), _borrowed(head_kept)
    duration = _borrowed(duration)
    resource = _borrowed(resource)
    remaining = _borrowed(remaining)
    dependents_ptr = _borrowed(dependents_ptr)
    dependents = _borrowed(dependents)
    queue_ptr = _borrowed(queue_ptr)
    queue = _borrowed(queue)
    first_tries = _borrowed(first_tries)
    entry = _borrowed(entry)
    level = _borrowed(level)
    alone = _borrowed(alone)
    link_ptr = _borrowed(link_ptr)
    links = _borrowed(links)
    share = _borrowed(share)
    preempt_s = _borrowed(preempt_s)
    shared = _borrowed(shared)
    tier = _borrowed(tier)
    head_s = _borrowed(head_s)
    after = _borrowed(after)
    hold_first = _borrowed(hold_first)
    hold_count = _borrowed(hold_count)
    hold_cut = _borrowed(hold_cut)
    memo_index = _borrowed(memo_index)
    memo_codes = _borrowed(memo_codes)
    memo_rates = _borrowed(memo_rates)
    memo_fill = _borrowed(memo_fill)
    busy = _borrowed(busy)
    ht = _borrowed(ht)
    hi = _borrowed(hi)
    act = _borrowed(act)
    frac = _borrowed(frac)
    rate = _borrowed(rate)
    rated = _borrowed(rated)
    latency = _borrowed(latency)
    before = _borrowed(before)
    column = _borrowed(column)
    mark = _borrowed(mark)
    ready = _borrowed(ready)
    cur = _borrowed(cur)
    holding = _borrowed(holding)
    bytes_end = _borrowed(bytes_end)
    fresh = _borrowed(fresh)
    hmark = _borrowed(hmark)
    hcol = _borrowed(hcol)
    wait_head = _borrowed(wait_head)
    sort_codes = _borrowed(sort_codes)
    sort_order = _borrowed(sort_order)
    held = (holding, fresh, start, head_s, after, hmark, hcol, wait_head)
    # rates memoised per set of active transfers, named by their sorted codes (entry, level)
    span = level.max() - level.min() + 1
    level_code = level - level.min()              # a transfer's code is entry * span + this
    code = entry * span + level_code
    codes_owned = (level_code, code)
    level_code, code = _borrowed(level_code), _borrowed(code)
    memo_index[:, :] = 0      # the memo (see _memo_tables): emptied, its stores overwritten
    memo_fill[:] = 0
    memo = (memo_index, memo_codes, memo_rates, memo_fill, sort_codes, sort_order)
    n_heap, n_act, done = 0, 0, 0
    now, t_rates, t_flow, first, limit = 0.0, 0.0, np.inf, -1, -1.0
    changed = False
    n_ready = first_tries.shape[0]
    ready[:n_ready] = first_tries
    while True:
        for q in range(n_ready):       # start what can on these resources, in this order
            r = ready[q]
            i = head[r]
            if busy[r] or i >= queue_ptr[r + 1] or remaining[queue[i]] != 0:
                continue
            tid = queue[i]
            start[tid] = now
            busy[r] = True
            if entry[tid] < 0:
                n_heap = _heap_push(ht, hi, n_heap, now + duration[tid], tid)
            else:
                n_act = _start_transfer(tid, act, n_act, frac, rate, rated, latency, duration, cur,
                                        level, alone, link_ptr, links, priority, preempt_s, shared, mark)
                fresh[tid] = has_hold
                changed = True
        n_ready = 0
        if n_heap > 0 and ht[0] <= limit:
            # the next task ending now: free its resource, release its dependents; then the
            # loop starts the resources touched, in number order (name order)
            tid = hi[0]
            n_heap = _heap_pop(ht, hi, n_heap)
            if tid >= n:
                # a held switch's last packet has left: hold the next cut's switches, or none
                n_heap, n_act = _release_held(tid - n, n, cur, code, span, entry, level_code, hold_first,
                                              hold_count, hold_cut, bytes_end, latency, holding,
                                              act, n_act, ht, hi, n_heap)
                changed = True
                continue
            end[tid] = now
            done += 1
            r = resource[tid]
            busy[r] = False
            head[r] += 1
            ready[0] = r
            n_ready = 1
            for p in range(dependents_ptr[tid], dependents_ptr[tid + 1]):
                t2 = dependents[p]
                remaining[t2] -= 1
                if remaining[t2] == 0:
                    n_ready = _insert_sorted(ready, n_ready, resource[t2])
            continue
        if n_heap == 0 and n_act == 0:
            break
        if n_act > 0:
            if changed:
                # rates change only when the set of transfers does: settle the fractions once,
                # then every transfer's finish time is fixed until the next change
                changed = False
                first = _rerate(now, t_rates, act, n_act, frac, rate, rated, code, memo, cur, level,
                                priority, alone, link_ptr, links, share, column, shared, tier,
                                preempt_s, latency, mark, before, has_hold, held)
                t_rates = now
                t_flow = now + frac[first] / rate[first] if first >= 0 else np.inf
            if n_heap > 0 and ht[0] <= t_flow:
                now = ht[0]
            else:
                # a transfer's bytes are through (and any other's within EPS): it continues
                # with its fixed latency tail
                now = t_flow
                elapsed = now - t_rates
                kept = 0
                for a in range(n_act):
                    tid = act[a]
                    if holding[tid]:
                        act[kept] = tid
                        kept += 1
                        continue
                    frac[tid] -= rate[tid] * elapsed
                    if frac[tid] <= EPS or tid == first:
                        n_heap = _heap_push(ht, hi, n_heap, now + latency[tid], tid)
                        if has_hold:
                            n_heap = _start_holding(tid, now, n, cur, code, span, entry, level_code,
                                                    hold_first, hold_count, hold_cut, bytes_end,
                                                    latency, holding, ht, hi, n_heap)
                            if holding[tid]:      # past its bytes, it stays active as a holder
                                act[kept] = tid
                                kept += 1
                    else:
                        act[kept] = tid
                        kept += 1
                n_act = kept
                t_rates = now
                changed = True
        else:
            now = ht[0]
        limit = now + EPS
    _keep_until_here(owned)
    _keep_until_here(codes_owned)
    return start_kept, end_kept, head_kept, done


@njit(cache=True, inline="always")
def _start_holding(tid, now, n, cur, code, span, entry, level_code, hold_first, hold_count, hold_cut,
                   bytes_end, latency, holding, ht, hi, n_heap):
    """Transfer ``tid``'s bytes are through at ``now``: past its bytes it holds the switches
    whose last packets have not left (its first held entry whose cut is below its latency),
    until its end minus that cut (a release event ``n + tid`` on the heap); ``holding[tid]``
    says whether it holds any. Returns the heap's new size. Inlined into :func:`_run` (the
    per-task path; a call would reference-count the arrays)."""
    e = entry[tid]
    if hold_first[e] < 0:
        return n_heap
    for d in range(hold_first[e], hold_first[e] + hold_count[e]):
        if hold_cut[d] < latency[tid]:
            holding[tid] = True
            cur[tid] = d
            code[tid] = d * span + level_code[tid]
            bytes_end[tid] = now
            return _heap_push(ht, hi, n_heap, now + latency[tid] - hold_cut[d], n + tid)
    return n_heap


@njit(cache=True, inline="always")
def _release_held(h, n, cur, code, span, entry, level_code, hold_first, hold_count, hold_cut, bytes_end,
                  latency, holding, act, n_act, ht, hi, n_heap):
    """Holder ``h``'s switches of its current held entry are released (its release event):
    it holds the next entry's switches until their cut, or none and leaves the active
    transfers. Returns the heap's and the active transfers' new sizes. Inlined into
    :func:`_run`, as :func:`_start_holding`."""
    d = cur[h] + 1
    if d < hold_first[entry[h]] + hold_count[entry[h]]:
        cur[h] = d
        code[h] = d * span + level_code[h]
        return _heap_push(ht, hi, n_heap, bytes_end[h] + latency[h] - hold_cut[d], n + h), n_act
    holding[h] = False
    cur[h] = entry[h]
    code[h] = entry[h] * span + level_code[h]
    kept = 0
    for a in range(n_act):
        if act[a] != h:
            act[kept] = act[a]
            kept += 1
    return n_heap, kept


@njit(cache=True, inline="always")
def _insert_sorted(ready, n_ready, r):
    """Insert resource ``r`` into ``ready[:n_ready]`` (sorted, distinct; ``ready[0]``, the
    freed resource, is among them): returns the new count."""
    j = n_ready
    for q in range(n_ready):
        if ready[q] == r:
            return n_ready
        if ready[q] > r:
            j = q
            break
    for q in range(n_ready, j, -1):
        ready[q] = ready[q - 1]
    ready[j] = r
    return n_ready + 1


@njit(cache=True, inline="always")
def _rerate(now, t_rates, act, n_act, frac, rate, rated, code, memo, entry, level, priority, alone,
            link_ptr, links, share, column, shared, tier, preempt_s, latency, mark, before,
            has_hold, held):
    """The set of active transfers changed at ``now``: settle each rated transfer's remaining
    fraction (it progressed at its rate since ``t_rates``), compute the new rates, and return
    the transfer that finishes first at them (the first started among equals). A rated
    transfer that waited (at most :data:`SERVED` of its speed alone) and is served at the new
    rates resumes: it pays :func:`_preempted` against the lower levels served at the rates
    until now (kept in ``before`` only when some transfer waited; ``mark``: scratch).
    With ``has_hold`` (``Engine(hold=)``; ``held``: the loop's arrays of it, ``holding``,
    ``fresh``, ``start``, ``head_s``, ``after``, ``hmark``, ``hcol``, ``wait_head``):
    ``entry`` is each transfer's entry now (a held entry
    past its bytes: ``holding``, no fraction left to settle, never the first to finish), and
    a transfer ``fresh`` (not served since it started) that resumes has its latency reduced by
    the smaller of its wait and ``wait_head`` (per transfer, :func:`_head_block` where it
    waited last, recorded at every change while it waits: its head travelled meanwhile;
    ``hmark``, ``hcol``: scratch). Returns -1 when only holders are active."""
    holding, fresh, start, _, _, _, _, wait_head = held
    elapsed = now - t_rates
    check = priority and preempt_s.shape[0] > 0
    # whether a transfer waited above the lowest level served (only such a one can preempt),
    # and whether one waited since its start (only such a one is credited its head's way)
    waited, fresh_wait = False, False
    if elapsed != 0.0 or check or has_hold:
        high, low, fresh_wait = _settle(elapsed, check or has_hold, act, n_act, frac, rate, rated,
                                        entry, level, alone, holding, fresh)
        waited = check and high > low
    if waited or fresh_wait:
        for a in range(n_act):
            before[act[a]] = rate[act[a]]
    _memo_rates(act, n_act, rate, code, memo, entry, level, priority, alone, link_ptr, links, share,
                column, shared, tier)
    if waited or fresh_wait:    # before ``rated`` is set below: a transfer started since has no rate until now
        for a in range(n_act):
            tid = act[a]
            if rated[tid] and not holding[tid] and \
                    before[tid] * alone[entry[tid]] <= SERVED < rate[tid] * alone[entry[tid]]:
                if waited and level[tid] > low:
                    latency[tid] += _preempted(tid, act, n_act, entry, level, link_ptr, links, mark,
                                               tid + 1, before, rated, alone, preempt_s, shared)
                if fresh[tid]:
                    latency[tid] = max(0.0, latency[tid] - min(now - start[tid], wait_head[tid]))
    t_flow, first = np.inf, -1
    for a in range(n_act):
        tid = act[a]
        rated[tid] = True
        if holding[tid]:
            continue
        if fresh[tid] and rate[tid] * alone[entry[tid]] > SERVED:
            fresh[tid] = False
        t = now + frac[tid] / rate[tid]
        if t < t_flow:
            t_flow, first = t, tid
    if has_hold:
        _record_waits(act, n_act, entry, level, link_ptr, links, rate, rated, alone, shared, held)
    return first


@njit(cache=True, inline="always")
def _settle(elapsed, classify, act, n_act, frac, rate, rated, entry, level, alone, holding, fresh):
    """:func:`_rerate`'s first step: every rated transfer that is not a holder progressed
    ``elapsed`` at its rate (its fraction settled); with ``classify``, the highest level among
    the rated transfers that waited (at most :data:`SERVED` of their speed alone), the lowest
    among those served, and whether one that waited has not been served since its start
    (``fresh``). Returns (highest waiting, lowest served, a fresh one waited)."""
    low, high = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    fresh_wait = False
    for a in range(n_act):
        tid = act[a]
        if not rated[tid]:
            continue
        if not holding[tid]:
            frac[tid] -= rate[tid] * elapsed
        if not classify:
            continue
        if rate[tid] * alone[entry[tid]] <= SERVED:
            high = max(high, level[tid])
            if fresh[tid]:
                fresh_wait = True
        else:
            low = min(low, level[tid])
    return high, low, fresh_wait


@njit(cache=True)
def _record_waits(act, n_act, entry, level, link_ptr, links, rate, rated, alone, shared, held):
    """:func:`_rerate`'s last step with a hold: where each transfer waiting since its start
    waits now (:func:`_head_block`), kept in ``wait_head`` for its resumption, when the
    transfer it waited behind may have gone. Once per change of the active transfers."""
    holding, fresh, _, head_s, after, hmark, hcol, wait_head = held
    for a in range(n_act):
        tid = act[a]
        if fresh[tid] and not holding[tid] and rate[tid] * alone[entry[tid]] <= SERVED:
            wait_head[tid] = _head_block(tid, act, n_act, entry, level, link_ptr, links, hmark,
                                         hcol, tid + 1, rated, head_s, after, shared)


@njit(cache=True)
def _head_block(tid, act, n_act, entry, level, link_ptr, links, hmark, hcol, stamp, rated, head_s,
                after, shared):
    """Where transfer ``tid`` waited from its start: the smallest ``head_s`` among its held links
    (finite ``after``: a switch's pseudo-links) whose column a higher-level transfer active
    until now (``rated``, its links as its entry now gives them) loads; 0 where there is none.
    ``hmark``/``hcol``: per column, scratch (``stamp`` is ``tid``'s own: its columns' smallest
    heads are the same at every call)."""
    e = entry[tid]
    for p in range(link_ptr[e], link_ptr[e + 1]):
        c = _column_of(links[p], shared)
        if hmark[c] != stamp:
            hmark[c] = stamp
            hcol[c] = np.inf
        if after[p] < np.inf and head_s[p] < hcol[c]:
            hcol[c] = head_s[p]
    block = np.inf
    for a in range(n_act):
        other = act[a]
        if level[other] > level[tid] and rated[other]:
            o = entry[other]
            for p in range(link_ptr[o], link_ptr[o + 1]):
                c = _column_of(links[p], shared)
                if hmark[c] == stamp and hcol[c] < block:
                    block = hcol[c]
    return block if block < np.inf else 0.0


@njit(cache=True)
def _start_transfer(tid, act, n_act, frac, rate, rated, latency, duration, entry, level, alone,
                    link_ptr, links, priority, preempt_s, shared, mark):
    """Transfer ``tid`` starts: its latency beyond its links' time (plus the preemption latency
    when it preempts a lower level being served on a link it uses, :func:`_preempted`),
    appended to the active transfers; returns their new count."""
    e = entry[tid]
    latency[tid] = max(0.0, duration[tid] - alone[e])
    if priority and preempt_s.shape[0] > 0 and n_act > 0:
        latency[tid] += _preempted(tid, act, n_act, entry, level, link_ptr, links, mark,
                                   tid + 1, rate, rated, alone, preempt_s, shared)   # tid + 1: a fresh stamp
    act[n_act] = tid
    frac[tid] = 1.0
    rated[tid] = False
    return n_act + 1
