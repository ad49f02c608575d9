"""The engine's reference execution: the event loop as first written, kept unoptimised.

:meth:`sysmodel.engine.Engine.run` is an optimised form of this loop (docs/sysmodel.md, Speed: cached rates,
precomputed link demands, integer resources). This module keeps the original, straightforward
loop as the executable specification the optimised one is tested against
(``tests/sysmodel/test_sysmodel_speed_identity.py``: every iteration of the evaluation computed both
ways agrees to 1e-9 relative). ``simulate_iteration(..., reference=True)`` runs it. Its
semantics are described in :mod:`sysmodel.engine`.
"""

from __future__ import annotations

import heapq

import numpy as np

from hdl.contracts.errors import FredError

__all__ = ["run_reference"]

_EPS = 1e-12
#: a transfer above this fraction of its speed alone is being served (one waiting behind a
#: higher level runs at the floor, 1e-9)
SERVED = 1e-6


def run_reference(engine):
    """Execute ``engine``'s tasks (a :class:`sysmodel.engine.Engine`, read through its ``tasks``
    and ``queues`` only, so this module needs nothing of the engine's); sets every task's
    ``start`` / ``end`` and returns the makespan.

    Per event: the active transfers' rates (:func:`_rates`); with priorities, the waiting
    transfers that resume at them (``resume``); the next instant something ends
    (``next_event``); the transfers whose bytes are through then (``bytes_through``) and the
    fixed parts that end (``fixed_ends``, which starts what the ended tasks release). The steps
    are closures over the loop's state (the queues, the transfers in flight, ``now``), as
    written first; the error of a graph that stops short is :func:`_deadlock`'s."""
    tasks = engine.tasks
    dependents: dict[int, list[int]] = {}
    remaining = [len(t.deps) for t in tasks]
    for i, t in enumerate(tasks):
        for d in t.deps:
            dependents.setdefault(d, []).append(i)
    head = {r: 0 for r in engine.queues}
    busy = {r: False for r in engine.queues}
    fixed: list[tuple[float, int]] = []      # (end time, task) of fixed-duration parts
    flows: dict[int, float] = {}             # task -> remaining fraction of its bytes
    alone: dict[int, float] = {}             # task -> busiest-link time when alone
    latency: dict[int, float] = {}
    priority, preempt_s, shared = engine.priority, engine.preempt_s, engine.shared_phase
    levels = None if priority is None else [priority.get(t.category, 0) for t in tasks]
    tiers = engine.tiers()          # within a level, the turn of a transfer holding a stored phase
    hold = getattr(engine, "hold", None) if levels is not None else None
    n = len(tasks)
    offsets: dict[int, tuple] = {}           # task -> (head, after) per link, with ``hold``
    holders: dict[int, float] = {}           # task past its bytes -> the cut of the links it holds
    bytes_end: dict[int, float] = {}         # ... and when its bytes were through
    fresh: set[int] = set()                  # transfers not served since they started
    wait_head: dict[int, float] = {}         # ... and the head of the switch where each waits
    now = 0.0
    done = 0
    current: dict[int, float] = {}           # the rates the active transfers run at now

    # per (loads, bandwidths) arrays, the latency their hold is asked with
    first_latency = _first_latencies(tasks) if hold is not None else {}

    def loads_of(tid: int):
        # what a transfer loads: all its links while its bytes run; past them, the switches it
        # still holds (after <= its cut: their last packets have not left yet)
        loads = tasks[tid].loads
        if tid in holders:
            return np.where(offsets[tid][1] <= holders[tid], loads, 0.0)
        return loads

    def cuts(tid: int) -> list[float]:
        # the transfer's distinct finite afters on the links it loads, largest first
        after = offsets[tid][1][tasks[tid].loads > 0]
        return sorted(set(after[np.isfinite(after)].tolist()), reverse=True)

    def try_start(resource: str) -> None:
        i = head[resource]
        queue = engine.queues[resource]
        if busy[resource] or i >= len(queue) or remaining[queue[i]]:
            return
        tid = queue[i]
        task = tasks[tid]
        task.start = now
        busy[resource] = True
        if task.loads is None:
            heapq.heappush(fixed, (now + task.duration, tid))
        else:
            t_alone = float((task.loads / task.bw).max())
            alone[tid] = t_alone
            latency[tid] = max(0.0, task.duration - t_alone)
            if levels is not None:
                latency[tid] += preempted(tid, current)
            flows[tid] = 1.0
            if hold is not None:
                offsets[tid] = tuple(np.asarray(x, dtype=float) for x in hold(
                    task.loads, task.bw, first_latency[(id(task.loads), id(task.bw))]))
                fresh.add(tid)

    def preempted(tid: int, rates: dict) -> float:
        # a lower-level transfer being served (at ``rates``) on a link ``tid`` uses is
        # preempted (one started at this instant, or waiting behind a higher level, has nothing
        # in flight): the largest cost of the links where that happens (a link sharing
        # another's phase counts as that one) or, if larger, the largest further-on cost of a
        # served lower transfer's own link whose column this one uses (Engine: the lower class
        # keeps flowing there)
        mine = _columns(tasks[tid].loads, shared)
        served = [other for other in [*flows, *holders]
                  if levels[other] < levels[tid] and rates.get(other, 0.0) * alone[other] > SERVED]
        first = max((_link_cost(preempt_s, link)
                     for other in served
                     for link in mine & _columns(loads_of(other), shared)),
                    default=0.0)
        further = max((_further_cost(preempt_s, link)
                       for other in served
                       for link in np.flatnonzero(loads_of(other) > 0).tolist()
                       if _column(link, shared) in mine),
                      default=0.0)
        return max(first, further)

    def head_block(tid: int, rates: dict) -> float:
        # where a transfer waited from its start: the first switch on its way (the smallest
        # head among its held links, finite after) whose column a higher transfer active at
        # ``rates`` loads; 0 where there is none
        higher = set()
        for other in [*flows, *holders]:
            if other in rates and levels[other] > levels[tid]:
                higher |= _columns(loads_of(other), shared)
        head, after = offsets[tid]
        found = [float(head[link]) for link in np.flatnonzero(tasks[tid].loads > 0).tolist()
                 if np.isfinite(after[link]) and _column(link, shared) in higher]
        return min(found, default=0.0)

    def finish(tid: int) -> None:
        nonlocal done
        task = tasks[tid]
        task.end = now
        done += 1
        busy[task.resource] = False
        head[task.resource] += 1
        touched = {task.resource}
        for t2 in dependents.get(tid, ()):
            remaining[t2] -= 1
            if not remaining[t2]:
                touched.add(tasks[t2].resource)
        for resource in sorted(touched):
            try_start(resource)

    def resume(rates: dict) -> None:
        # a transfer that waited (rated, at the floor: behind a higher level or an earlier
        # tier) and is served at the new ``rates`` resumes: it preempts a lower level served
        # until now (``current``) on a link it uses, as a starting transfer does (its packets
        # arrive at switches serving that level: docs/sysmodel.md, "Preemption at a
        # resumption"); one that waited since its start had its head travel meanwhile to the
        # switch where it waited ("A switch held per switch")
        for tid in flows:
            if tid in current and current[tid] * alone[tid] <= SERVED < rates[tid] * alone[tid]:
                latency[tid] += preempted(tid, current)
                if tid in fresh:
                    credit = min(now - tasks[tid].start, wait_head.get(tid, 0.0))
                    latency[tid] = max(0.0, latency[tid] - credit)
        for tid in flows:
            if rates[tid] * alone[tid] > SERVED:
                fresh.discard(tid)
        # where each transfer waiting since its start waits now (kept for its resumption,
        # when the transfer it waited behind may have gone)
        for tid in flows:
            if tid in fresh and rates[tid] * alone[tid] <= SERVED:
                wait_head[tid] = head_block(tid, rates)

    def next_event(rates: dict) -> tuple[float, int | None]:
        # the next instant something ends: the earliest of the transfers' bytes at ``rates``
        # and the fixed parts' ends; and the transfer whose bytes end then (None if a fixed
        # part ends first: on a tie, both)
        t_flow, first = float("inf"), None
        for tid, frac in flows.items():
            t = now + frac / rates[tid]
            if t < t_flow:
                t_flow, first = t, tid
        t_fixed = fixed[0][0] if fixed else float("inf")
        if t_fixed <= t_flow:
            return t_fixed, first if t_flow <= t_fixed else None
        return t_flow, first

    def bytes_through(first: int | None) -> None:
        # bandwidth parts that completed (``first``, and any with nothing left) continue with
        # their fixed latency tail (holding, with ``hold``, the switches whose last packets
        # have not left: until end - after)
        for tid in [t for t, f in flows.items() if f <= _EPS or t == first]:
            del flows[tid]
            heapq.heappush(fixed, (now + latency[tid], tid))
            if tid in offsets:
                below = [c for c in cuts(tid) if c < latency[tid]]
                if below:
                    holders[tid], bytes_end[tid] = below[0], now
                    heapq.heappush(fixed, (now + latency[tid] - below[0], n + tid))

    def fixed_ends() -> None:
        # the fixed parts ending now: a task's end, or (an entry n + task) a held switch's
        # last packet leaving: the transfer holds the next cut's switches, or none
        while fixed and fixed[0][0] <= now + _EPS:
            _, tid = heapq.heappop(fixed)
            if tid >= n:
                tid -= n
                later = [c for c in cuts(tid) if c < holders[tid]]
                if later:
                    holders[tid] = later[0]
                    heapq.heappush(fixed, (bytes_end[tid] + latency[tid] - later[0], n + tid))
                else:
                    del holders[tid]
                continue
            finish(tid)

    for resource in engine.queues:
        try_start(resource)
    while fixed or flows or holders:
        members = [*flows, *holders]
        rates = _rates(tasks, members, alone, levels, shared, tiers, loads_of) if members else {}
        if levels is not None:
            resume(rates)
        current = rates
        step_to, first = next_event(rates)
        dt = step_to - now
        for tid in list(flows):
            flows[tid] -= rates[tid] * dt
        now = step_to
        bytes_through(first)
        fixed_ends()
    if done != len(tasks):
        raise _deadlock(engine, head, len(tasks) - done)
    makespan = max((t.end for t in tasks), default=0.0)
    return makespan


def _first_latencies(tasks) -> dict:
    """``{(id(loads), id(bw)): latency}``: the latency beyond its bytes (s, >= 0) of the first
    of ``tasks`` carrying each (loads, bandwidths) pair of arrays. The hold of a transfer's
    links is asked with it, as the compiled loop's entries do (sysmodel.engine._hold_arrays):
    the hold's offsets are kept per set of links and latency, so every task sharing the arrays
    gets the same ones."""
    first_latency: dict = {}
    for t in tasks:
        if t.loads is not None and t.bw is not None:
            first_latency.setdefault((id(t.loads), id(t.bw)),
                                     max(0.0, t.duration - float((t.loads / t.bw).max())))
    return first_latency


def _deadlock(engine, head: dict, never_ran: int) -> FredError:
    """The error of a task graph that stopped with ``never_ran`` tasks not run, naming the
    first few tasks its resources' queues wait at (``head``: per resource, its next task's
    position in ``engine.queues``)."""
    blocked = [engine.tasks[engine.queues[r][head[r]]].name for r in engine.queues
               if head[r] < len(engine.queues[r])]
    return FredError(f"task graph deadlocks: {never_ran} tasks never ran; "
                     f"blocked at {', '.join(blocked[:6])}")


def _rates(tasks, flows, alone: dict, levels=None, shared=None, tiers=None, loads_of=None) -> dict:
    """Max-min fair slow-down factors by progressive filling; returns fraction/second. With
    ``levels`` (per task), strict priority: each level, highest first, fills what the levels
    above left. ``shared`` (:class:`sysmodel.engine.Engine`): a link's demand on a link sharing
    another's phase is moved onto that one as a grouped demand (:func:`_fill`). ``tiers`` (per
    task): within a level, the transfers of each tier fill in turn, lowest first. ``loads_of``
    (task -> its loads; default its ``loads``): a transfer past its bytes holding switches
    loads only those."""
    ids = list(flows)
    if len(ids) == 1:
        return {ids[0]: 1.0 / alone[ids[0]]}
    bw = tasks[ids[0]].bw
    if loads_of is None:
        def loads_of(i):
            return tasks[i].loads
    demand = {i: loads_of(i) / tasks[i].bw / alone[i] for i in ids}  # share of each link at full speed
    grouped = {i: np.zeros_like(bw) for i in ids}
    if shared is not None:
        on = np.flatnonzero(shared[:len(bw)] >= 0)
        for i in ids:
            np.add.at(grouped[i], shared[on], demand[i][on])
            demand[i] = demand[i].copy()
            demand[i][on] = 0.0
    capacity = np.ones_like(bw)
    factor: dict[int, float] = {}
    level_of = (lambda i: 0) if levels is None else levels.__getitem__
    tier_of = (lambda i: 0) if tiers is None else tiers.__getitem__
    order = sorted({(-level_of(i), tier_of(i)) for i in ids})
    held = np.zeros_like(bw)      # a level's grouped phases' largest use so far (kept over its tiers)
    for k, key in enumerate(order):
        if k and key[0] == order[k - 1][0]:
            capacity = capacity + held    # the level's next tier: its phases' use counted once more
        else:
            held = np.zeros_like(bw)
        capacity, held = _fill(demand, grouped, capacity, factor,
                               {i for i in ids if (-level_of(i), tier_of(i)) == key}, held)
    return {i: max(factor[i], 1e-9) / alone[i] for i in ids}


def _fill(demand, grouped, capacity, factor, active, held):
    """Progressive filling of ``active`` (one priority level, or one tier of it) into
    ``capacity``; sets ``factor``, returns what is left and the new ``held``. On a link,
    ``demand`` adds up over the transfers; ``grouped`` demands (one phase the level's
    transfers hold together) count as their largest, fixed members' (``held``, included in
    ``capacity``) and moving ones' alike."""
    while active:
        use = sum(demand[i] for i in active)
        moving = np.max([grouped[i] for i in active], axis=0)
        limits = _limits(capacity, use, moving, held)
        lam = min(1.0, float(limits.min()))
        if lam >= 1.0 - 1e-12:
            for i in active:
                factor[i] = 1.0
                capacity = capacity - demand[i]
                held = np.maximum(held, grouped[i])
            break
        saturated = limits <= lam * (1 + 1e-9)
        frozen = [i for i in active if np.any(demand[i][saturated] > _EPS) or np.any(grouped[i][saturated] > _EPS)] \
            or list(active)
        for i in frozen:
            factor[i] = lam
            capacity = capacity - lam * demand[i]
            held = np.maximum(held, lam * grouped[i])
            active.discard(i)
        capacity = np.maximum(capacity, 0.0)
    return np.maximum(capacity - held, 0.0), held


def _limit(capacity: float, use: float, moving: float, held: float) -> float:
    """The largest common factor ``lam`` the moving transfers on a link can run at: ``use``
    (their summed demand) x lam plus max(``held``, ``moving`` x lam) (a grouped phase: its
    fixed members' largest use, its moving members' largest demand) fits ``capacity``;
    infinite where nothing moving uses the link."""
    if use <= _EPS and moving <= _EPS:
        return np.inf
    if moving > _EPS and (use <= _EPS or capacity >= use * held / moving + held):
        return capacity / (use + moving)          # past the fixed members: the group moves
    return max(capacity - held, 0.0) / use if use > _EPS else np.inf


def _limits(capacity, use, moving, held) -> np.ndarray:
    """:func:`_limit` of every link at once (arrays of one length): the same IEEE operations on
    each element, chosen by the same conditions, so each entry equals ``_limit``'s bit for bit
    (``tests/sysmodel/test_sysmodel_engine_reference.py``). Why arrays: a Python call per link
    and per filling step made the reference loop about 10x slower on the GPU clusters' thousands
    of links (docs/sysmodel.md, Speed, thirteenth increment). The branches not taken may divide
    by zero; their results are discarded, so those warnings are silenced."""
    with np.errstate(divide="ignore", invalid="ignore"):
        idle = (use <= _EPS) & (moving <= _EPS)
        group_moves = (moving > _EPS) & ((use <= _EPS) | (capacity >= use * held / moving + held))
        past = capacity / (use + moving)
        left = capacity - held
        left = np.where(0.0 > left, 0.0, left)          # max(left, 0.0) as Python takes it
        fixed = np.where(use > _EPS, left / use, np.inf)
        return np.where(idle, np.inf, np.where(group_moves, past, fixed))


def _columns(loads, shared) -> set:
    """The links ``loads`` uses, a link sharing another's phase counted as that one."""
    used = np.flatnonzero(loads > 0)
    if shared is None:
        return set(used.tolist())
    return set(np.where(shared[used] >= 0, shared[used], used).tolist())


def _link_cost(preempt_s, link: int) -> float:
    """What a preemption on ``link`` costs where the preempting transfer first meets the lower
    class: ``preempt_s`` itself when it is a number, else its entry (first row) for that link
    (:class:`sysmodel.engine.Engine`)."""
    if np.ndim(preempt_s) == 0:
        return float(preempt_s)
    return float(preempt_s[link] if np.ndim(preempt_s) == 1 else preempt_s[0][link])


def _further_cost(preempt_s, link: int) -> float:
    """What a switch further on adds where the lower class keeps flowing on its own ``link``
    (the second row of two; 0 for a number or one row: :class:`sysmodel.engine.Engine`)."""
    return float(preempt_s[1][link]) if np.ndim(preempt_s) == 2 else 0.0


def _column(link: int, shared) -> int:
    """The link whose column ``link`` counts as (the one it shares a phase with, else itself)."""
    return int(shared[link]) if shared is not None and shared[link] >= 0 else link
