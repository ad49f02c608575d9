"""Discrete-event execution of a task graph on per-NPU resources, with link sharing.

Each :class:`Task` runs on one named resource (an NPU's single compute unit, or one of its
communication channels: MP, DP, PP, I/O in, I/O out -- FRED's virtual channels) and may start
only when all its dependencies have finished. A resource runs one task at a time, in the order
its tasks were added (the schedule's order: GPipe or 1F1B for compute, issue order for a
channel), so the compute unit and different channels overlap freely. Overlap and exposed
communication therefore come out of the schedule, not out of a formula.

Compute tasks (and communication without link data) take a fixed duration. A communication
task may carry its **link loads** (bytes on every directed link of the fabric, from
:func:`sysmodel.collectives.evaluate`): communication tasks that run at the same time then
share those links. Alone, such a task takes its busiest link's time plus its latency; when
several are active, their rates follow max-min fairness over the links (progressive filling:
all active transfers slow down by a common factor until a link saturates; transfers on it are
fixed at that factor, the others continue). Rates are recomputed at every start and end, so a
DP all-reduce overlapping an MP one on the same links slows both.

A task may only depend on tasks added before it; since each resource runs its tasks in the
order they were added, this rules out cycles and deadlocks by construction (the run still
checks that every task ran and names the blocked ones if not).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

import numpy as np

from hdl.contracts.errors import FredError
from sysmodel.engine_reference import run_reference

__all__ = ["Task", "Engine", "Schedule"]

_EPS = 1e-12


@dataclass(slots=True)
class Task:
    """``name``, ``resource``, ``duration`` (s, when alone), ``deps`` (task ids), ``category``
    (breakdown label: compute, mp, dp, pp, io), ``npu`` (the NPU whose timeline it belongs to,
    or None for wafer-wide tasks such as I/O streams), ``loads``/``bw`` (optional link data
    for link sharing; ``duration`` - busiest-link time is its fixed latency)."""

    name: str
    resource: str
    duration: float
    deps: tuple[int, ...] = ()
    category: str = "compute"
    npu: int | None = None
    loads: np.ndarray | None = field(default=None, repr=False)
    bw: np.ndarray | None = field(default=None, repr=False)
    start: float = -1.0
    end: float = -1.0


@dataclass
class Schedule:
    tasks: list[Task]
    makespan: float


class Engine:
    """Collects tasks (:meth:`add`) and runs them (:meth:`run`)."""

    def __init__(self, *, priority: dict | None = None, preempt_s: float = 0.0):
        """``priority``: ``{category: level}`` (higher served first; categories not named are
        level 0), or None: every transfer shares links max-min fairly, whatever its category.
        ``preempt_s``: latency a transfer pays when it starts while a transfer of a lower level
        is active on a link it uses (a FRED switch drains the packets in flight and selects
        the higher phase); only with ``priority``."""
        if preempt_s < 0:
            raise FredError(f"preempt_s must be >= 0, got {preempt_s}")
        self.priority = dict(priority) if priority else None
        self.preempt_s = float(preempt_s)
        self.tasks: list[Task] = []
        self.queues: dict[str, list[int]] = {}
        #: per task, where its duration came from when a compute timer gave it (see
        #: :mod:`sysmodel.graph_template`), else None
        self.sources: list = []
        # id(loads array) -> (array, whether it loads any link): repeated communication tasks
        # share one array, so the check runs once per distinct array
        self._loaded: dict[int, tuple] = {}

    def add(self, name: str, resource: str, duration: float, deps=(), *, category: str = "compute",
            npu: int | None = None, loads=None, bw=None, source=None) -> int:
        """Add a task; ``duration`` may be an object with ``time_s``, ``loads``, ``bw``
        (a communication time with its link loads). ``source``: how a compute timer gave the
        duration (``("layer", layer, backward)`` or ``("optimizer", params)``), so that the same
        graph can be re-timed for another compute speed (:mod:`sysmodel.graph_template`)."""
        if type(duration) is not float and hasattr(duration, "time_s"):
            loads, bw, duration = duration.loads, duration.bw, duration.time_s
        if duration < 0:
            raise FredError(f"task {name}: negative duration {duration}")
        tasks = self.tasks
        n = len(tasks)
        if deps:
            deps = tuple([d for d in deps if d is not None])
            for d in deps:
                if not 0 <= d < n:
                    raise FredError(f"task {name}: unknown dependency {d}")
        else:
            deps = ()
        return self._append(name, resource, duration, deps, category, npu, loads, bw, source)

    def _append(self, name, resource, duration, deps, category, npu, loads, bw, source) -> int:
        """Append a task whose duration (a number) and dependencies (a tuple of earlier task
        ids) are already checked: :meth:`add` after its checks, or a builder's fast path."""
        if loads is not None:
            seen = self._loaded.get(id(loads))
            if seen is None or seen[0] is not loads:
                seen = self._loaded[id(loads)] = (loads, bool(np.any(loads > 0)))
            if bw is None or not seen[1]:
                loads = None
        tasks = self.tasks
        n = len(tasks)
        tasks.append(Task(name, resource, float(duration), deps, category, npu,
                          loads, bw if loads is not None else None))
        self.sources.append(source)
        queue = self.queues.get(resource)
        if queue is None:
            queue = self.queues[resource] = []
        queue.append(n)
        return n

    def run(self, *, reference: bool = False) -> Schedule:
        """Execute the tasks; sets every task's ``start`` / ``end``. ``reference``: run the
        unoptimised loop of :mod:`sysmodel.engine_reference` instead (the same semantics; the
        optimised loop below is tested against it to 1e-9 relative)."""
        if reference:
            return Schedule(tasks=self.tasks, makespan=run_reference(self))
        tasks = self.tasks
        n = len(tasks)
        # Resources as integers numbered in name order: the loop starts the resources a
        # finished task frees in name order (as the reference does), so ordering by number is
        # the same order without comparing strings.
        names = sorted(self.queues)
        rid = {r: i for i, r in enumerate(names)}
        queues = [self.queues[r] for r in names]
        res = [rid[t.resource] for t in tasks]
        dependents: list[list[int]] = [[] for _ in range(n)]
        remaining = [0] * n
        for i, t in enumerate(tasks):
            remaining[i] = len(t.deps)
            for d in t.deps:
                dependents[d].append(i)
        head = [0] * len(names)
        busy = [False] * len(names)
        fixed: list[tuple[float, int]] = []      # (end time, task) of fixed-duration parts
        flows: dict[int, float] = {}             # task -> remaining fraction of its bytes
        info: dict[int, tuple] = {}              # task -> its loads array's entry (_array_entry)
        # task -> a small integer naming its (loads array, priority level): a set of transfers
        # sorted by it is in a canonical order (the same set started in another order is the
        # same sharing problem), and the sorted codes are its key in the rate memo
        code: dict[int, int] = {}
        codes: dict[tuple, int] = {}
        numbers = itertools.count()
        latency: dict[int, float] = {}
        # A communication task's busiest-link time alone and its share of every link at full
        # speed depend only on its link loads; tasks repeating one communication share one
        # loads array (CommTimer memoises), so each is computed once per distinct array.
        by_array: dict[tuple[int, int], tuple] = {}
        rate_memo: dict[tuple, list] = {}
        priority, preempt_s = self.priority, self.preempt_s
        levels = None if priority is None else [priority.get(t.category, 0) for t in tasks]
        now = 0.0
        done = 0
        changed = True       # the set of active transfers changed since rates were computed
        heappush, heappop = heapq.heappush, heapq.heappop

        def try_start(r: int) -> None:
            nonlocal changed
            i = head[r]
            queue = queues[r]
            if busy[r] or i >= len(queue) or remaining[queue[i]]:
                return
            tid = queue[i]
            task = tasks[tid]
            task.start = now
            busy[r] = True
            loads = task.loads
            if loads is None:
                heappush(fixed, (now + task.duration, tid))
            else:
                key = (id(loads), id(task.bw))
                entry = by_array.get(key)
                if entry is None or entry[4] is not loads or entry[5] is not task.bw:
                    entry = by_array[key] = _array_entry(loads, task.bw, next(numbers))
                info[tid] = entry
                pair = (entry[3], 0 if levels is None else levels[tid])
                c = codes.get(pair)
                code[tid] = c if c is not None else codes.setdefault(pair, len(codes))
                latency[tid] = max(0.0, task.duration - entry[0])
                if levels is not None and preempt_s > 0.0 and flows:
                    latency[tid] += _preemption(tid, flows, info, levels, preempt_s)
                flows[tid] = 1.0
                changed = True

        for resource in self.queues:
            try_start(rid[resource])
        inf = float("inf")
        rates: dict[int, float] = {}
        t_rates = 0.0          # when the current rates took effect (fractions are settled then)
        t_flow, first = inf, None
        while fixed or flows:
            if flows:
                if changed:
                    # Rates change only when the set of transfers does; between changes every
                    # transfer progresses linearly, so its remaining fraction is settled here
                    # once (not at every event) and its finish time is fixed until the next change.
                    changed = False
                    elapsed = now - t_rates
                    if elapsed:      # (at the same instant nothing progressed)
                        for tid in flows:
                            r = rates.get(tid)
                            if r is not None:
                                flows[tid] -= r * elapsed
                    # canonical order (by code); memoised over repeated sets
                    active = sorted(flows, key=code.__getitem__)
                    memo_key = tuple(map(code.__getitem__, active))
                    rate_list = rate_memo.get(memo_key)
                    if rate_list is None:
                        rate_list = rate_memo[memo_key] = _rates(
                            [info[tid] for tid in active],
                            None if levels is None else [levels[tid] for tid in active])
                    rates = dict(zip(active, rate_list))
                    t_rates = now
                    t_flow, first = inf, None
                    for tid, frac in flows.items():
                        t = now + frac / rates[tid]
                        if t < t_flow:
                            t_flow, first = t, tid
                t_fixed = fixed[0][0] if fixed else inf
                if t_fixed <= t_flow:
                    now = t_fixed
                else:
                    # a transfer's bandwidth part completes (and any other within _EPS of it):
                    # it continues with its fixed latency tail
                    now = t_flow
                    elapsed = now - t_rates
                    for tid in flows:
                        flows[tid] -= rates[tid] * elapsed
                    t_rates = now
                    for tid in [t for t, f in flows.items() if f <= _EPS or t == first]:
                        del flows[tid]
                        heappush(fixed, (now + latency[tid], tid))
                    changed = True
            else:
                now = fixed[0][0]
            limit = now + _EPS
            while fixed and fixed[0][0] <= limit:
                tid = heappop(fixed)[1]
                # the task ends: free its resource, release its dependents, start what can
                tasks[tid].end = now
                done += 1
                r = res[tid]
                busy[r] = False
                head[r] += 1
                ready = None
                for t2 in dependents[tid]:
                    remaining[t2] -= 1
                    if not remaining[t2]:
                        if ready is None:
                            ready = {r}
                        ready.add(res[t2])
                if ready is None:
                    try_start(r)
                else:
                    for r2 in sorted(ready):
                        try_start(r2)
        if done != len(tasks):
            blocked = [tasks[queues[r][head[r]]].name for r in range(len(names))
                       if head[r] < len(queues[r])]
            raise FredError(f"task graph deadlocks: {len(tasks) - done} tasks never ran; "
                            f"blocked at {', '.join(blocked[:6])}")
        makespan = max((t.end for t in tasks), default=0.0)
        return Schedule(tasks=tasks, makespan=makespan)


def _array_entry(loads, bw, number: int) -> tuple:
    """What the loop keeps of one (loads, bandwidths) pair: (its busiest-link time alone, the
    links it uses (sorted indices, a frozenset), its share of each of them at full speed,
    ``number`` (a small integer naming the pair: sorts and hashes fast), loads, bw). The
    links are kept sparse: a transfer uses a few of a large fabric's links, and the max-min
    problem involves only the links some active transfer uses."""
    time_per_link = loads / bw
    t_alone = float(time_per_link.max())
    used = np.flatnonzero(loads > 0)
    share = time_per_link[used] / t_alone
    return (t_alone, used, share, number, loads, bw, frozenset(used.tolist()))


def _preemption(tid: int, flows, info, levels, preempt_s: float) -> float:
    """``preempt_s`` if a transfer of a lower level than ``tid``'s is active on a link ``tid``
    uses, else 0 (the reference computes the same, :mod:`sysmodel.engine_reference`)."""
    mine = levels[tid]
    used = info[tid][6]
    for other in flows:
        if levels[other] < mine and not used.isdisjoint(info[other][6]):
            return preempt_s
    return 0.0


def _rates(entries: list, levels: list | None = None) -> list:
    """Max-min fair rates (fraction of its bytes per second) of the active transfers, given
    each one's entry (:func:`_array_entry`: alone time, links used, share of each), by
    progressive filling: all slow down by a common factor until a link saturates; transfers
    on it are fixed at that factor, the others continue. The reference's loop over transfers as one matrix (transfers x links the
    transfers use); sums are taken in another order, so rates agree with the reference's to
    rounding (about 1e-16 relative)."""
    if len(entries) == 1:
        return [1.0 / entries[0][0]]
    # transfers x the links some transfer uses (links no transfer uses never saturate), in
    # link order: the dense matrix's used columns
    used = np.zeros(len(entries[0][4]), dtype=bool)
    for e in entries:
        used[e[1]] = True
    links = np.flatnonzero(used)
    column = np.zeros(len(used), dtype=np.intp)          # link -> its column
    column[links] = np.arange(len(links))
    demand = np.zeros((len(entries), len(links)))
    for row, e in zip(demand, entries):
        row[column[e[1]]] = e[2]
    capacity = np.ones(demand.shape[1])
    factor = np.ones(len(entries))
    alone = np.array([e[0] for e in entries])
    if levels is not None and len(set(levels)) > 1:
        # strict priority: the highest level fills the links max-min fairly, the next level
        # fills what is left, and so on (a level left with nothing waits: factor 0 -> 1e-9)
        levels = np.array(levels)
        for level in sorted(set(levels.tolist()), reverse=True):
            members = levels == level
            capacity = _fill(demand, capacity, factor, members.copy())
        return (np.maximum(factor, 1e-9) / alone).tolist()
    _fill(demand, capacity, factor, np.ones(len(entries), dtype=bool))
    return (np.maximum(factor, 1e-9) / alone).tolist()


def _fill(demand, capacity, factor, active):
    """Progressive filling of the ``active`` transfers into ``capacity``: sets their
    ``factor`` (in place) and returns the capacity left."""
    while active.any():
        use = demand[active].sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            limits = np.where(use > _EPS, capacity / use, np.inf)
        lam = min(1.0, float(limits.min()))
        if lam >= 1.0 - 1e-12:
            break                                           # the rest run at full speed
        saturated = limits <= lam * (1 + 1e-9)
        frozen = active & (demand[:, saturated] > _EPS).any(axis=1)
        if not frozen.any():                                # only tiny demands left on it
            frozen = active
        factor[frozen] = lam
        capacity = np.maximum(capacity - lam * demand[frozen].sum(axis=0), 0.0)
        active &= ~frozen
    if active.any():   # the rest ran at full speed: they use their whole demand
        capacity = np.maximum(capacity - demand[active].sum(axis=0), 0.0)
    return capacity
