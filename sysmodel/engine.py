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

:meth:`Engine.run` hands the graph as arrays (:meth:`Engine.arrays`) to the event loop compiled
by numba (:mod:`sysmodel.engine_compiled`) and writes every task's start and end back;
``run(reference=True)`` runs the plain loop of :mod:`sysmodel.engine_reference`, the
specification the compiled one is tested against (docs/sysmodel.md, Speed).
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from hdl.contracts.errors import FredError
from sysmodel.engine_reference import run_reference

if TYPE_CHECKING:
    from sysmodel.engine_compiled import GraphArrays

__all__ = ["Task", "Engine", "Schedule"]


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
        """Execute the tasks; sets every task's ``start`` / ``end``. The loop runs compiled
        over the graph's arrays (:mod:`sysmodel.engine_compiled`); ``reference``: run the
        unoptimised loop of :mod:`sysmodel.engine_reference` instead (the same semantics; the
        compiled loop is tested against it to 1e-9 relative)."""
        if reference:
            return Schedule(tasks=self.tasks, makespan=run_reference(self))
        tasks = self.tasks
        if not tasks:
            return Schedule(tasks=tasks, makespan=0.0)
        # imported here: numba's import and the compiled code's loading (about 0.5 s) are paid
        # by the processes that run an engine, not by every one that imports the model
        from sysmodel.engine_compiled import run_arrays
        names = sorted(self.queues)
        start, end, head, done = run_arrays(self.arrays(names))
        for task, s, e in zip(tasks, start.tolist(), end.tolist()):
            task.start = s
            task.end = e
        if done != len(tasks):
            queue = [self.queues[r] for r in names]
            offset = [0, *itertools.accumulate(len(q) for q in queue)]
            blocked = [tasks[queue[r][head[r] - offset[r]]].name for r in range(len(names))
                       if head[r] - offset[r] < len(queue[r])]
            raise FredError(f"task graph deadlocks: {len(tasks) - done} tasks never ran; "
                            f"blocked at {', '.join(blocked[:6])}")
        return Schedule(tasks=tasks, makespan=float(end.max()))

    def arrays(self, names: list[str] | None = None) -> GraphArrays:
        """The graph as arrays for the compiled loop (:class:`~sysmodel.engine_compiled.GraphArrays`);
        ``names``: the resources in name order (``sorted(self.queues)``), when the caller has them.
        A transfer's busiest-link time alone and its share of every link it uses depend only
        on its (loads, bandwidths) pair; tasks repeating one communication share those arrays
        (the communication timer memoises), so each pair becomes one entry."""
        from sysmodel.engine_compiled import GraphArrays
        tasks = self.tasks
        n = len(tasks)
        names = sorted(self.queues) if names is None else names
        rid = {r: i for i, r in enumerate(names)}
        queues = [self.queues[r] for r in names]
        # one pass over the task objects (scattered in memory: each pass costs), then columns
        duration, resource, deps, loads_of, bw_of, category = tuple(zip(*map(_FIELDS, tasks))) or ((),) * 6
        counts = np.fromiter(map(len, deps), dtype=np.int64, count=n)
        flat = np.fromiter(itertools.chain.from_iterable(deps), dtype=np.int64, count=int(counts.sum()))
        # dependents in task order: a stable sort of the flattened dependencies by what they name
        order = np.argsort(flat, kind="stable")
        dependents = np.repeat(np.arange(n, dtype=np.int64), counts)[order]
        dependents_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(flat, minlength=n), out=dependents_ptr[1:])
        queue_ptr = np.zeros(len(names) + 1, dtype=np.int64)
        np.cumsum([len(q) for q in queues], out=queue_ptr[1:])
        entry: list[int] = []
        pairs: dict[tuple[int, int], int] = {}
        found: list[tuple] = []
        for loads, bw in zip(loads_of, bw_of):
            if loads is None:
                entry.append(-1)
                continue
            key = (id(loads), id(bw))
            e = pairs.get(key)
            if e is None:
                e = pairs[key] = len(found)
                found.append(_array_entry(loads, bw))
            entry.append(e)
        priority = self.priority
        if priority is None:
            level = np.zeros(n, dtype=np.int64)
        else:
            level_of = {c: priority.get(c, 0) for c in set(category)}
            level = np.fromiter(map(level_of.__getitem__, category), dtype=np.int64, count=n)
        return GraphArrays(
            duration=np.array(duration, dtype=np.float64),
            resource=np.fromiter(map(rid.__getitem__, resource), dtype=np.int64, count=n),
            remaining=counts, dependents_ptr=dependents_ptr, dependents=dependents,
            queue_ptr=queue_ptr,
            queue=np.fromiter(itertools.chain.from_iterable(queues), dtype=np.int64, count=n),
            first_tries=np.array([rid[r] for r in self.queues], dtype=np.int64),
            entry=np.array(entry, dtype=np.int64), level=level,
            alone=np.array([f[0] for f in found], dtype=np.float64),
            link_ptr=np.cumsum([0] + [len(f[1]) for f in found], dtype=np.int64),
            links=np.concatenate([f[1] for f in found]).astype(np.int64) if found else np.zeros(0, np.int64),
            share=np.concatenate([f[2] for f in found]) if found else np.zeros(0),
            n_links=max((int(f[1][-1]) + 1 for f in found if len(f[1])), default=0),
            priority=priority is not None, preempt_s=self.preempt_s)


_FIELDS = operator.attrgetter("duration", "resource", "deps", "loads", "bw", "category")


def _array_entry(loads, bw) -> tuple:
    """One (loads, bandwidths) pair's busiest-link time alone, the links it loads (indices) and
    its share of each of them at full speed."""
    time_per_link = loads / bw
    t_alone = float(time_per_link.max())
    used = np.flatnonzero(loads > 0)
    return t_alone, used, time_per_link[used] / t_alone
