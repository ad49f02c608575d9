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

import dataclasses
import itertools
from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from hdl.contracts.errors import FredError
from sysmodel.engine_reference import run_reference
from sysmodel.model_cache import Ref, current

if TYPE_CHECKING:
    from sysmodel.engine_compiled import GraphArrays

__all__ = ["Task", "Engine", "Schedule", "Timeline", "TaskBlock", "BlockTable", "preempt_per_link",
           "shared_per_link", "entry_tiers"]


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


class Schedule:
    """An executed graph: ``tasks`` (every :class:`Task` with its start and end) and
    ``makespan`` (s). A schedule of a compiled run makes its task objects only when ``tasks``
    is first read (:meth:`Engine.timeline` gives the same figures as columns, without them)."""

    def __init__(self, tasks: list[Task] | None = None, makespan: float = 0.0, *, engine: Engine | None = None):
        if tasks is None and engine is None:
            tasks = []
        self._tasks, self.makespan, self.engine = tasks, makespan, engine

    @property
    def tasks(self) -> list[Task]:
        if self._tasks is None:
            self._tasks = self.engine.tasks
        return self._tasks

    def timeline(self) -> Timeline:
        """Every task's start, end, duration, category and NPU as columns, and each resource's
        tasks (see :class:`Timeline`)."""
        if self._tasks is None:
            return self.engine.timeline()
        return Timeline.of_tasks(self._tasks)


@dataclass
class Timeline:
    """An executed graph as columns, indexed by task number: ``start``, ``end``, ``duration``,
    ``category``, ``npu`` (sequences: lists, tuples or typed arrays, read only) and ``queues`` (resource -> its tasks in
    task order)."""

    start: list
    end: list
    duration: list
    category: list
    npu: list
    queues: dict
    #: None, or the category and NPU columns as codes (:meth:`Engine.task_kinds`)
    kinds: tuple | None = None
    #: None, or a function of a resource's name giving its tasks (those of ``queues``, in the
    #: same order) as an int64 array: a slice of the compiled run's own queue array
    #: (:meth:`Engine.timeline`), so a reader that wants them as an array makes none
    queue_array: object = None

    @staticmethod
    def of_tasks(tasks: list[Task]) -> Timeline:
        queues: dict[str, list[int]] = {}
        for i, t in enumerate(tasks):
            queues.setdefault(t.resource, []).append(i)
        return Timeline([t.start for t in tasks], [t.end for t in tasks], [t.duration for t in tasks],
                        [t.category for t in tasks], [t.npu for t in tasks], queues)


class Engine:
    """Collects tasks (:meth:`add`) and runs them (:meth:`run`).

    The graph is kept as columns (one per task field, dependencies flattened), not as one
    object per task: builders append whole blocks of tasks (:meth:`_extend`), the compiled loop
    reads arrays made from the columns, and :class:`Task` objects are made only when ``tasks``
    is read (traces, exports, the reference loop; docs/sysmodel.md, Speed). The numeric
    columns (durations, transfer entries, dependency counts and the flat dependencies) become
    typed arrays (:class:`array.array` of float64 / int64, :meth:`_typed`) when the first block
    is appended: a block's columns are then appended, and turned into the loop's numpy arrays,
    as one copy of memory, not one Python number per task each way. A graph added task by task
    keeps them as lists, which CPython appends to fastest (a typed array's ``append`` costs
    about 50 ns more), until it is sealed. The others (names, categories, NPUs, sources) are
    lists of objects. An appended block's dependencies are copied as the block's offsets and
    shifted by its first task's number later, every block's at once in numpy when the
    column is first read (:meth:`_settle`), not one numpy call per append."""

    def __init__(self, *, priority: dict | None = None, preempt_s=0.0, shared_phase=None, hold=None):
        """``priority``: ``{category: level}`` (higher served first; categories not named are
        level 0), or None: every transfer shares links max-min fairly, whatever its category.
        ``preempt_s``: latency a transfer pays when it starts, or resumes after waiting (its
        rate at the floor, behind a higher level or an earlier tier of its own, then above
        1e-6 of its speed alone), while a transfer of a lower level is being served on a link
        it uses (a FRED switch drains the packets in flight and selects the higher phase; a
        lower transfer that starts at the same instant, or waits, has none in flight); only
        with ``priority``. On FRED fabrics
        each switch a transfer crosses is one of its links (:mod:`sysmodel.switch_phases`).
        A number (every link alike) or an array with one cost per link of the transfers' loads
        (:func:`sysmodel.preemption.preemption_costs`: each switch's own drain); a transfer
        then pays the largest cost among the links where it preempts. Or two such rows,
        ``[first, further]``: the largest ``first`` cost among the links (columns) where it
        preempts, or, if larger, the largest ``further`` cost of a *lower transfer's own* link
        (before ``shared_phase`` maps it) whose column it preempts on: the drains along the
        path to a switch further on, which starts its own drain only when the preempting
        packet arrives, where the lower class keeps flowing (:mod:`sysmodel.preemption`).
        ``shared_phase``: None, or per link the link whose time it shares as a phase several
        transfers hold together, -1 where none (:func:`sysmodel.switch_phases.shared_phase_links`:
        a switch's default-phase pseudo-link names its stored-phase one). Link ``j`` sharing
        link ``k`` adds to ``k``'s use, per priority level, the *largest* use among that level's
        transfers on ``j`` (they hold one phase together), not their sum; preemptions are
        looked up on ``k``. The links it names (the switches' stored-phase pseudo-links) are
        served in turns within a level: a transfer that loads one of them fills after the
        level's transfers of lower entry number (:meth:`tiers`).
        ``hold``: None, or a function of a transfer's (loads, bandwidths, latency beyond its
        bytes) giving two arrays over its links, ``(head, after)`` (s; :func:`sysmodel.switch_phases.hold_offsets`): a switch
        held per switch (docs/sysmodel.md, "A switch held per switch"). A link with a finite
        ``after`` (a switch's pseudo-link) stays held by the transfer after its bytes are
        through, at its level and with its share, until the transfer's end minus ``after``
        (its last packet has left the switch); and a transfer that waited from its start
        behind a higher level has its latency reduced, when it is first served, by the
        smaller of its wait and the ``head`` of the first switch where it waited (the
        smallest ``head`` among its held links on which a higher transfer was active): its
        head travelled there during the wait. Only with ``priority``; None: neither."""
        self.priority = dict(priority) if priority else None
        if hold is not None and not callable(hold):
            raise FredError(f"hold must be None or a function of (loads, bw), got {hold!r}")
        self.hold = hold
        self.preempt_s = _checked_preempt(preempt_s)
        self.shared_phase = _checked_shared(shared_phase)
        self.queues: dict[str, list[int]] = {}
        #: per task, where its duration came from when a compute timer gave it (see
        #: :mod:`sysmodel.graph_template`), else None
        self.sources: list = []
        # the columns, one entry per task (dependencies: their count, and all of them in a row)
        # names: made only when read (traces, task objects, errors; no figure reads them):
        # ``_name`` holds the names made so far, ``_name_parts`` those of the tasks after them,
        # a name or a function giving a block's names per appended task or block (:meth:`names`)
        self._name: list[str] = []
        self._name_parts: list = []
        # the numeric columns: lists, typed arrays once a block is appended (:meth:`_typed`)
        self._duration: list | array = []
        self._category: list[str] = []
        self._npu: list = []
        self._entry: list | array = []        # its (loads, bw) pair's number, or -1
        self._dep_count: list | array = []
        self._dep_flat: list | array = []
        # (where in _dep_flat, how many, by what) of the appended blocks' dependencies copied as
        # offsets and not yet shifted by their first task's number (:meth:`_settle`)
        self._dep_shifts: list = []
        # (loads, bw) pairs of the transfers, by the arrays' identities (repeated communication
        # tasks share one pair: the communication timer memoises): number and pair
        self._entry_of: dict[tuple[int, int], tuple] = {}
        self.entries: list[tuple[np.ndarray, np.ndarray]] = []
        self._tasks: list[Task] | None = None     # the task objects, once made
        self._times: tuple | None = None          # (start, end) arrays of the last compiled run
        self._run_key: tuple | None = None        # a relinked graph's run, as a value (_run_key)
        self._arrays: GraphArrays | None = None   # the arrays of the graph, once made
        self._kinds: tuple | None = None          # task_kinds(), once made
        self._codes: tuple | None = None          # _category_codes(), once made
        # (first task, category tuple, NPU tuple) of every block appended by _extend: the
        # codes of task_kinds() and _category_codes() are made once per distinct block
        # (:meth:`_pieces`), not once per task
        self._segments: list = []

    def __len__(self) -> int:
        return len(self._duration)

    def _typed(self) -> None:
        """Make the numeric columns typed arrays (those that are lists; each value once), so that
        blocks are appended to them as memory (:meth:`_extend`, :meth:`_extend_blocks`)."""
        if type(self._duration) is list:
            self._duration = array("d", self._duration)
        for name in ("_entry", "_dep_count", "_dep_flat"):
            column = getattr(self, name)
            if type(column) is list:
                setattr(self, name, array("q", column))

    @property
    def sealed(self) -> bool:
        """Whether the graph is complete and read only (:meth:`seal`)."""
        return type(self._name_parts) is tuple

    def names(self) -> list[str]:
        """Every task's name, in task order (made on first read from the parts appended since)."""
        if self._name_parts:
            sealed = type(self._name) is tuple
            made = list(self._name) if sealed else self._name
            for part in self._name_parts:
                kind = type(part)
                if kind is str:
                    made.append(part)
                elif kind is tuple:   # (prefix, a block's names): :meth:`_extend`
                    made.extend(map(part[0].__add__, part[1]))
                else:
                    made.extend(part())
            self._name, self._name_parts = (tuple(made), ()) if sealed else (made, [])
        return self._name

    @property
    def tasks(self) -> list[Task]:
        """The tasks as :class:`Task` objects (made from the columns on first read, with their
        start and end once run; the same objects until a task is added)."""
        tasks = self._tasks
        n = len(self._duration)
        if tasks is not None and len(tasks) == n:
            return tasks
        resource = [""] * n
        for r, queue in self.queues.items():
            for i in queue:
                resource[i] = r
        entries = self.entries
        loads = [entries[e][0] if e >= 0 else None for e in self._entry]
        bw = [entries[e][1] if e >= 0 else None for e in self._entry]
        ptr = [0, *itertools.accumulate(self._dep_count)]
        self._settle()
        flat = self._dep_flat
        deps = [tuple(flat[ptr[i]:ptr[i + 1]]) for i in range(n)]
        tasks = [Task(*fields) for fields in zip(self.names(), resource, self._duration, deps,
                                                 self._category, self._npu, loads, bw)]
        if self._times is not None:
            for task, s, e in zip(tasks, *self._times):
                task.start, task.end = s, e
        self._tasks = tasks
        return tasks

    def add(self, name: str, resource: str, duration, deps=(), *, category: str = "compute",
            npu: int | None = None, loads=None, bw=None, source=None) -> int:
        """Add a task; ``duration`` may be an object with ``time_s``, ``loads``, ``bw``
        (a communication time with its link loads). ``source``: how a compute timer gave the
        duration (``("layer", layer, backward, recompute)`` or ``("optimizer", params)``), so that the same
        graph can be re-timed for another compute speed (:mod:`sysmodel.graph_template`)."""
        if type(duration) is not float and hasattr(duration, "time_s"):
            loads, bw, duration = duration.loads, duration.bw, duration.time_s
        if duration < 0:
            raise FredError(f"task {name}: negative duration {duration}")
        if self.sealed:
            raise FredError(f"task {name}: the graph is sealed (kept as a graph template); "
                            "add tasks to a new engine")
        n = len(self._duration)
        if deps:
            deps = tuple([d for d in deps if d is not None])
            for d in deps:
                if not 0 <= d < n:
                    raise FredError(f"task {name}: unknown dependency {d}")
        else:
            deps = ()
        return self._append(name, resource, duration, deps, category, npu, loads, bw, source)

    def entry(self, loads, bw) -> int:
        """The number of the (``loads``, ``bw``) pair of a transfer, or -1 where it has no link
        data (no bandwidths, or no link loaded: a fixed duration)."""
        if loads is None or bw is None:
            return -1
        key = (id(loads), id(bw))
        found = self._entry_of.get(key)
        if found is None:
            e = -1
            # an array's own any(): what np.any gives it, without np.any's dispatch (a pair is
            # new once per engine, a few dozen per Transformer-17B graph)
            positive = loads > 0
            if positive.any() if type(positive) is np.ndarray else np.any(positive):
                e = len(self.entries)
                self.entries.append((loads, bw))
            # the arrays are kept with their number: the ids in the key stay theirs
            found = self._entry_of[key] = (e, loads, bw)
        return found[0]

    def _append(self, name, resource, duration, deps, category, npu, loads, bw, source) -> int:
        """Append a task whose duration (a number) and dependencies (a tuple of earlier task
        ids) are already checked: :meth:`add` after its checks, or a builder's fast path."""
        n = len(self._duration)
        self._name_parts.append(name)
        self._duration.append(float(duration))
        self._category.append(category)
        self._npu.append(npu)
        self._entry.append(-1 if loads is None else self.entry(loads, bw))
        self._dep_count.append(len(deps))
        self._dep_flat.extend(deps)
        self.sources.append(source)
        queue = self.queues.get(resource)
        if queue is None:
            queue = self.queues[resource] = []
        queue.append(n)
        self._arrays = None
        return n

    def _extend(self, block: TaskBlock, prefix: str, first_deps: tuple) -> int:
        """Append ``block``'s tasks (named ``prefix`` + its names), its first task after
        ``first_deps`` (checked task ids); returns the number of its first task."""
        if type(self._dep_flat) is list:
            self._typed()
        t0 = len(self._duration)
        names = block.names
        # a (prefix, names) pair, not a closure: a kept graph holds one per appended block, and a
        # tuple costs the cyclic garbage collector less to traverse than a function and its cells
        self._name_parts.append((prefix, names))
        if type(block.category) is tuple and type(block.npu) is tuple:
            self._segments.append((t0, block.category, block.npu))
        self._duration.extend(block.duration)    # a typed array into a typed array: one copy
        self._category.extend(block.category)
        self._npu.extend(block.npu)
        self._entry.extend(block.entry)
        self._dep_count.append(len(first_deps))
        self._dep_count.extend(block.dep_count)
        self._dep_flat.extend(first_deps)
        deps = block.deps
        if t0 and len(deps):   # copied as offsets (a typed array: as memory), shifted by _settle
            self._dep_shifts.append((len(self._dep_flat), len(deps), t0))
        self._dep_flat.extend(deps)
        self.sources.extend(block.sources)
        queues = self.queues
        for resource, offsets in block.queues:
            queue = queues.get(resource)
            if queue is None:
                queue = queues[resource] = []
            if type(offsets) is range:   # evenly spaced (TaskBlock.typed): shifted as a range
                queue.extend(range(t0 + offsets.start, t0 + offsets.stop, offsets.step))
            else:
                queue.extend(map(t0.__add__, offsets))
        self._arrays = None
        return t0

    def _extend_blocks(self, table: BlockTable, which: np.ndarray, prefixes, first: np.ndarray) -> np.ndarray:
        """What :meth:`_extend` does for each row ``j`` in turn, in one go: append block
        ``which[j]`` of ``table`` named ``prefixes[j]`` + its names, its first task after the
        task ids in row ``j`` of ``first`` (checked earlier tasks, left-aligned, -1 padding).
        Returns the number of each appended block's first task. The columns are gathered
        with numpy (no Python frame per task or per block: a pipeline schedule's passes,
        docs/sysmodel.md, Speed)."""
        if type(self._dep_flat) is list:
            self._typed()
        n = len(self._duration)
        sizes = table.size[which]
        ends = np.cumsum(sizes)
        begins = ends - sizes
        t0 = n + begins
        total = int(ends[-1])
        # the table row of every appended task
        src = np.repeat(table.start[which] - begins, sizes) + np.arange(total)
        self._name_parts.append(lambda: map(str.__add__, np.repeat(np.array(prefixes, dtype=object), sizes).tolist(),
                                            table.names[src].tolist()))
        _put(self._duration, table.duration[src])
        self._category.extend(table.category[src].tolist())
        self._npu.extend(table.npu[src].tolist())
        _put(self._entry, table.entry[src])
        self.sources.extend(table.sources[src].tolist())
        given = first >= 0
        first_count = given.sum(axis=1)
        dep_count = table.dep_count[src]
        dep_count[begins] = first_count
        _put(self._dep_count, dep_count)
        _put(self._dep_flat, _block_deps(table, which, t0, first[given], first_count))
        rid = table.resource[src]
        order = np.argsort(rid, kind="stable")
        bounds = np.cumsum(np.bincount(rid, minlength=len(table.resources))).tolist()
        tasks = (order + n).tolist()
        queues, lo = self.queues, 0
        for resource, hi in zip(table.resources, bounds):
            if hi > lo:
                queue = queues.get(resource)
                if queue is None:
                    queue = queues[resource] = []
                queue.extend(tasks[lo:hi])
            lo = hi
        self._arrays = None
        return t0

    def run(self, *, reference: bool = False) -> Schedule:
        """Execute the tasks; sets every task's ``start`` / ``end``. The loop runs compiled
        over the graph's arrays (:mod:`sysmodel.engine_compiled`); ``reference``: run the
        unoptimised loop of :mod:`sysmodel.engine_reference` instead (the same semantics; the
        compiled loop is tested against it to 1e-9 relative)."""
        if reference:
            self._times = None
            tasks = self.tasks
            return Schedule(tasks, makespan=run_reference(self))
        n = len(self._duration)
        if not n:
            return Schedule([], makespan=0.0)
        # a graph relinked onto values an earlier relinked run had (a design-space grid's
        # switch designs that differ only in what these transfers do not read): its times
        runs = current().engine_runs if self._run_key is not None else None
        ran = None if runs is None else runs.get(self._run_key)
        if ran is not None:
            self._times = ran[0]
            if self._tasks is not None:
                for task, s, e in zip(self._tasks, *self._times):
                    task.start, task.end = s, e
            return Schedule(self._tasks, makespan=ran[1], engine=self)
        # imported here: numba's import and the compiled code's loading (about 0.5 s) are paid
        # by the processes that run an engine, not by every one that imports the model
        from sysmodel.engine_compiled import run_arrays
        names = sorted(self.queues)
        start, end, head, done = run_arrays(self.arrays(names))
        # typed arrays (one copy of memory each): an engine kept as a graph template keeps its
        # first run's times, and a typed array is never traversed by the cyclic garbage
        # collector (see :meth:`seal`)
        self._times = (_floats(start), _floats(end))
        if runs is not None and done == n:
            runs.put(self._run_key, (self._times, float(end.max())))
        if self._tasks is not None:
            for task, s, e in zip(self._tasks, *self._times):
                task.start, task.end = s, e
        if done != n:
            queue = [self.queues[r] for r in names]
            offset = [0, *itertools.accumulate(len(q) for q in queue)]
            blocked = [self.names()[queue[r][head[r] - offset[r]]] for r in range(len(names))
                       if head[r] - offset[r] < len(queue[r])]
            raise FredError(f"task graph deadlocks: {n - done} tasks never ran; "
                            f"blocked at {', '.join(blocked[:6])}")
        return Schedule(self._tasks, makespan=float(end.max()), engine=self)

    def seal(self) -> None:
        """Mark the graph complete: its object columns become tuples (so :meth:`add` refuses new
        tasks with an error, and the builders' fast paths fail at the names' tuple). Why: a
        graph kept as a template (:mod:`sysmodel.graph_template`) lives as long as the model's
        cache, and every full pass of Python's cyclic garbage collector traversed each of its
        lists element by element (some 5 million elements in ``make eval``); a tuple of numbers
        and strings is untracked after one pass, and the numeric columns (typed arrays) hold no
        Python object, so the collector never tracks them; numeric columns still lists (a graph
        added task by task) become tuples too. Copies (:meth:`retimed`) share the columns
        instead of copying them. The values are unchanged."""
        if self.sealed:
            return
        self._settle()
        for name in ("_duration", "_entry", "_dep_count", "_dep_flat"):
            column = getattr(self, name)
            if type(column) is list:
                setattr(self, name, tuple(column))
        self._category, self._npu = tuple(self._category), tuple(self._npu)
        self._segments = tuple(self._segments)
        self.sources = tuple(self.sources)
        self._name, self._name_parts = tuple(self._name), tuple(self._name_parts)
        self.queues = {r: tuple(q) for r, q in self.queues.items()}

    def retimed(self, duration: np.ndarray) -> Engine:
        """A new engine with this graph, task ``i`` taking ``duration[i]`` (an array of every
        task's duration, each >= 0); its arrays are this graph's with the durations replaced.
        A sealed graph's copy shares its columns (tuples) and is sealed too."""
        self._settle()
        eng = Engine(priority=self.priority, preempt_s=self.preempt_s, hold=self.hold)
        eng.shared_phase = self.shared_phase      # checked already
        duration = np.asarray(duration, dtype=np.float64)
        eng._duration = _floats(duration)
        if self.sealed:        # the columns are shared, not copied
            eng.queues = dict(self.queues)
            eng.sources, eng._name, eng._name_parts = self.sources, self._name, self._name_parts
            eng._category, eng._npu = self._category, self._npu
            eng._entry, eng._dep_count, eng._dep_flat = self._entry, self._dep_count, self._dep_flat
            eng._kinds, eng._codes = self._kinds, self._codes
            eng._segments = self._segments
        else:
            eng.queues = {r: list(q) for r, q in self.queues.items()}
            eng.sources = list(self.sources)
            eng._name, eng._name_parts = list(self._name), list(self._name_parts)
            eng._category, eng._npu = list(self._category), list(self._npu)
            eng._segments = list(self._segments)
            eng._entry, eng._dep_count, eng._dep_flat = self._entry[:], self._dep_count[:], self._dep_flat[:]
        eng._entry_of, eng.entries = dict(self._entry_of), list(self.entries)
        eng._arrays = dataclasses.replace(self.arrays(), duration=duration)
        return eng

    def timeline(self) -> Timeline:
        """The last compiled run's :class:`Timeline` (without making task objects)."""
        if self._times is None:
            raise FredError("internal: the engine has not run")
        arrays = self._arrays
        queue_array = None
        if arrays is not None:   # the run's queue (CSR, resources in name order, as run() gave them)
            where = {r: i for i, r in enumerate(sorted(self.queues))}
            queue, ptr = arrays.queue, arrays.queue_ptr

            def queue_array(resource: str) -> np.ndarray:
                i = where.get(resource)
                return queue[:0] if i is None else queue[ptr[i]:ptr[i + 1]]
        return Timeline(*self._times, self._duration, self._category, self._npu, self.queues,
                        self.task_kinds(), queue_array)

    def task_kinds(self) -> tuple | None:
        """The category and NPU columns as codes, for the breakdown's filters in numpy:
        (per task its category's number (int64), the categories by number, per task its NPU
        (int64; -1 for none)); None where an NPU is not an int >= 0 (the breakdown then filters
        the columns themselves). Made once per graph; a sealed graph's copies share it (they
        share its category and NPU columns)."""
        kinds = self._kinds
        n = len(self._duration)
        if kinds is not None and len(kinds[0]) == n:
            return kinds
        code, names = self._category_codes()
        made: dict = {}   # per distinct block's NPU tuple, its codes (kept across graphs)
        parts = []
        for block, values in self._pieces(2):
            part = made.get(id(values)) if block else None
            if part is None:
                part = _block_npu_codes(values) if block else _npu_codes(values)
                if part is None:
                    return None
                if block:
                    made[id(values)] = part
            parts.append(part)
        # one piece: a copy, as a concatenation is (a kept block's codes are read only)
        npu = np.concatenate(parts) if len(parts) != 1 else parts[0].copy()
        kinds = self._kinds = (code, names, npu)
        return kinds

    def _pieces(self, which: int) -> list:
        """The category (``which`` 1) or NPU (2) column in task order as pieces (whether the
        piece is an appended block's own tuple, its values): the blocks :meth:`_extend`
        appended (kept in ``_segments``) and the slices of the column between them (tasks
        added otherwise), so that a block appended many times is coded once. One piece, the
        whole column, where the blocks are small (fewer than :data:`TASKS_PER_PIECE` tasks per
        block on average): a piece costs about a microsecond, a task some 25 ns."""
        column = self._category if which == 1 else self._npu
        n = len(self._duration)
        pieces, at = [], 0
        if len(self._segments) * TASKS_PER_PIECE > n:
            return [(False, column)]
        for segment in self._segments:
            t0, values = segment[0], segment[which]
            if t0 > at:
                pieces.append((False, column[at:t0]))
            pieces.append((True, values))
            at = t0 + len(values)
        if at < n or not pieces:
            pieces.append((False, column[at:n]))
        return pieces

    def _category_codes(self) -> tuple[np.ndarray, list]:
        """(per task its category's number (int64, read only), the categories in name order):
        made once per graph size, for :meth:`arrays` (each task's priority level) and
        :meth:`task_kinds` (the breakdown's filters), which would otherwise each map every
        task's category in Python."""
        made = self._codes
        n = len(self._duration)
        if made is not None and len(made[0]) == n:
            return made
        pieces = self._pieces(1)
        # per distinct block's category tuple, (its categories in name order, per task its
        # number among them): kept across graphs (_block_category_codes)
        local: dict = {}
        present = set()
        for block, values in pieces:
            if block:
                found = local.get(id(values))
                if found is None:
                    found = local[id(values)] = _block_category_codes(values)
                present.update(found[0])
            else:
                present.update(values)
        names = sorted(present)
        number = {c: k for k, c in enumerate(names)}
        coded: dict = {}   # per distinct block's category tuple, its codes in this graph
        parts = []
        for block, values in pieces:
            part = coded.get(id(values)) if block else None
            if part is None:
                if block:   # its numbers among its own categories, renumbered among the graph's
                    own, numbers = local[id(values)]
                    part = coded[id(values)] = np.array([number[c] for c in own], dtype=np.int64)[numbers]
                else:
                    part = np.fromiter(map(number.__getitem__, values), dtype=np.int64, count=len(values))
            parts.append(part)
        code = np.concatenate(parts) if len(parts) != 1 else parts[0]
        code.flags.writeable = False
        self._codes = (code, names)
        return self._codes

    def _settle(self) -> None:
        """Shift the dependencies :meth:`_extend` copied as offsets by their blocks' first task
        numbers, every pending block's at once (a few numpy calls per graph instead of one
        shift per append, about 2 us each); the column then holds task numbers only."""
        shifts = self._dep_shifts
        if not shifts:
            return
        # the column up to the last pending block as runs: before each block the tasks added
        # otherwise (shift 0, already numbers), then the block's offsets (shift by its first
        # task); one repeat and one in-place add over the column (timeit, Transformer-17B's 31
        # blocks: about half the time of gathering the blocks' positions and adding there)
        shift, run, end = [], [], 0
        for at, count, by in shifts:   # in column order, each run after the one before
            shift += (0, by)
            run += (at - end, count)
            end = at + count
        flat = np.frombuffer(self._dep_flat, dtype=np.int64)   # a writable view of the typed column
        flat[:end] += np.repeat(np.array(shift, dtype=np.int64), run)
        del flat   # the view would lock the column's size
        self._dep_shifts = []

    def tiers(self) -> list[int]:
        """Per task, its turn within its priority level (:func:`entry_tiers` of its transfer
        entry; 0 for a fixed duration): the reference loop's view of ``GraphArrays.tier``."""
        tier = entry_tiers(self.entries, self.shared_phase, self._entry)
        return [int(tier[e]) if e >= 0 else 0 for e in self._entry]

    def arrays(self, names: list[str] | None = None) -> GraphArrays:
        """The graph as arrays for the compiled loop (:class:`~sysmodel.engine_compiled.GraphArrays`);
        ``names``: the resources in name order (``sorted(self.queues)``), when the caller has them.
        A transfer's busiest-link time alone and its share of every link it uses depend only
        on its (loads, bandwidths) pair: one entry per pair (:meth:`entry`)."""
        if self._arrays is not None:
            return self._arrays
        from sysmodel.engine_compiled import GraphArrays, dependents_csr
        n = len(self._duration)
        names = sorted(self.queues) if names is None else names
        rid = {r: i for i, r in enumerate(names)}
        queues = [self.queues[r] for r in names]
        self._settle()
        # the typed columns copied as memory (a view, np.asarray, would lock their size)
        counts = np.array(self._dep_count, dtype=np.int64)
        flat = np.array(self._dep_flat, dtype=np.int64)
        # dependents in task order: one compiled counting sort of the flattened dependencies
        # by what they name (a stable argsort's order; four numpy calls before)
        dependents_ptr, dependents = dependents_csr(counts, flat)
        lengths = np.array([len(q) for q in queues], dtype=np.int64)
        queue_ptr = np.zeros(len(names) + 1, dtype=np.int64)
        np.cumsum(lengths, out=queue_ptr[1:])
        queue = np.fromiter(itertools.chain.from_iterable(queues), dtype=np.int64, count=n)
        resource = np.empty(n, dtype=np.int64)   # every task is in one queue
        resource[queue] = np.repeat(np.arange(len(names), dtype=np.int64), lengths)
        priority = self.priority
        if priority is None:
            level = np.zeros(n, dtype=np.int64)
        else:
            code, categories = self._category_codes()
            level = np.array([priority.get(c, 0) for c in categories], dtype=np.int64)[code]
        self._arrays = GraphArrays(
            duration=np.array(self._duration, dtype=np.float64),
            resource=resource, remaining=counts, dependents_ptr=dependents_ptr, dependents=dependents,
            queue_ptr=queue_ptr, queue=queue,
            first_tries=np.array([rid[r] for r in self.queues], dtype=np.int64),
            entry=np.array(self._entry, dtype=np.int64), level=level,
            priority=priority is not None,
            **_entry_arrays(self.entries, self.preempt_s, self.shared_phase, self._entry,
                            self.hold if priority is not None else None, self._duration))
        return self._arrays

    def relinked(self, duration: np.ndarray, entries: list, preempt_s, shared_phase=None,
                 hold=None) -> Engine:
        """A new engine with this graph, task ``i`` taking ``duration[i]``, transfer entry ``e``
        the (loads, bandwidths) pair ``entries[e]`` (each with a link loaded), preemptions
        costing ``preempt_s``, phases shared as ``shared_phase`` says and switches held as
        ``hold`` says (:meth:`__init__`): the same graph on another network
        (:mod:`sysmodel.graph_template`)."""
        eng = self.retimed(duration)
        eng.preempt_s = _checked_preempt(preempt_s)
        eng.shared_phase = _checked_shared(shared_phase)
        if hold is not None and not callable(hold):
            raise FredError(f"hold must be None or a function of (loads, bw), got {hold!r}")
        eng.hold = hold
        eng._entry_of, eng.entries = {}, list(entries)
        if self.sealed and hold is None:   # a sealed graph cannot change under the key
            eng._run_key = _run_key(self, eng)
        eng._arrays = dataclasses.replace(eng._arrays, **_entry_arrays(
            eng.entries, eng.preempt_s, eng.shared_phase, eng._entry,
            hold if eng.priority is not None else None, eng._duration))
        return eng


@dataclass
class TaskBlock:
    """A run of tasks a builder appends many times (:meth:`Engine._extend`), as columns:
    ``names`` (suffixes of the tasks' names; a tuple of strings, which the cyclic garbage
    collector stops tracking: a kept graph refers to it per appended block), ``duration``,
    ``category``, ``npu``, ``entry`` (an engine's :meth:`Engine.entry` numbers: a block belongs to one engine), ``sources``,
    ``dep_count`` (of every task but the first, whose dependencies each append gives),
    ``deps`` (those dependencies in a row, as offsets from the block's first task) and
    ``queues`` ((resource, offsets of its tasks in order: a list, or a range where evenly
    spaced) per resource)."""

    names: tuple
    duration: list
    category: list
    npu: list
    entry: list
    sources: list
    dep_count: list
    deps: list
    queues: list

    @staticmethod
    def typed(names: tuple, duration: list, category: list, npu: list, entry: list, sources: list,
              dep_count: list, deps: list, queues: list) -> TaskBlock:
        """The block of these columns (lists), its numeric ones typed as the engine's
        (:class:`Engine`): ``duration`` float64, ``entry`` and ``dep_count`` int64 typed arrays,
        so that each append copies them as memory, ``deps`` too (each append copies the
        offsets, which the engine shifts later: :meth:`Engine._settle`); the category and NPU
        columns as tuples: an engine codes each distinct block's once
        (:meth:`Engine.task_kinds`), and the collector stops tracking them."""
        return TaskBlock(names, array("d", duration), tuple(category), tuple(npu), array("q", entry), sources,
                         array("q", dep_count), array("q", deps), [(r, _as_range(q)) for r, q in queues])


def _as_range(offsets: list):
    """``offsets`` (increasing) as a range where they are evenly spaced (a layer block's compute
    and MP tasks alternate): :meth:`Engine._extend` then shifts them as a range, about half
    the time of shifting each offset; else the list itself."""
    if len(offsets) < 2:
        return offsets
    first, step = offsets[0], offsets[1] - offsets[0]
    stop = offsets[-1] + step
    if step <= 0 or list(range(first, stop, step)) != offsets:
        return offsets
    return range(first, stop, step)


@dataclass
class BlockTable:
    """Several :class:`TaskBlock` s of one engine as one table of rows (one per task of each
    block in turn), for :meth:`Engine._extend_blocks`: per block its first row (``start``),
    task count (``size``), first dependency (``dep_start``) and dependency count
    (``dep_total``) in ``deps``; per row ``names``, ``category``, ``npu``, ``sources`` (object
    arrays), ``duration``, ``entry``, ``dep_count`` (0 for a block's first task: each append
    gives it) and ``resource`` (a number into ``resources``)."""

    start: np.ndarray
    size: np.ndarray
    dep_start: np.ndarray
    dep_total: np.ndarray
    deps: np.ndarray
    names: np.ndarray
    duration: np.ndarray
    category: np.ndarray
    npu: np.ndarray
    entry: np.ndarray
    sources: np.ndarray
    dep_count: np.ndarray
    resource: np.ndarray
    resources: list

    @staticmethod
    def of(blocks: list[TaskBlock]) -> BlockTable:
        resources: dict[str, int] = {}
        rows = []
        for b in blocks:
            rid = [0] * len(b.names)
            for r, offsets in b.queues:
                k = resources.setdefault(r, len(resources))
                for o in offsets:
                    rid[o] = k
            rows.append(rid)
        size = np.array([len(b.names) for b in blocks], dtype=np.int64)
        dep_total = np.array([len(b.deps) for b in blocks], dtype=np.int64)

        def column(field: str, dtype) -> np.ndarray:
            flat = list(itertools.chain.from_iterable(getattr(b, field) for b in blocks))
            if dtype is object:   # element by element: a tuple stays one element
                return np.fromiter(flat, dtype=object, count=len(flat))
            return np.array(flat, dtype=dtype)
        return BlockTable(
            start=np.cumsum(size) - size, size=size, dep_start=np.cumsum(dep_total) - dep_total,
            dep_total=dep_total, deps=column("deps", np.int64), names=column("names", object),
            duration=column("duration", np.float64), category=column("category", object),
            npu=column("npu", object), entry=column("entry", np.int64),
            sources=column("sources", object),
            dep_count=np.array(list(itertools.chain.from_iterable([0, *b.dep_count] for b in blocks)),
                               dtype=np.int64),
            resource=np.array(list(itertools.chain.from_iterable(rows)), dtype=np.int64),
            resources=list(resources))


def _block_category_codes(values: tuple) -> tuple:
    """(the categories of ``values``, an appended block's category column, in name order; per
    task its category's number among them, int64, read only), kept in the model cache
    (``block_codes``) under the tuple itself (:class:`~sysmodel.model_cache.Ref`: a tuple of
    strings cannot change, and the key keeps it alive). Why: a pass's block shape is kept
    across graphs (``pass_block_shapes``) with its category and NPU tuples, and coding them
    task by task for every graph built was about a tenth of a Transformer-17B evaluation's
    arrays and breakdown (docs/sysmodel.md, Speed, thirty-first increment)."""
    memo = current().block_codes
    key = Ref(values)
    kept = memo.get(key)
    if kept is None:
        own = sorted(set(values))
        number = {c: k for k, c in enumerate(own)}
        numbers = np.fromiter(map(number.__getitem__, values), dtype=np.int64, count=len(values))
        numbers.flags.writeable = False
        kept = memo.put(key, (tuple(own), numbers))
    return kept


def _block_npu_codes(values: tuple) -> np.ndarray | None:
    """:func:`_npu_codes` of ``values``, an appended block's NPU column (a tuple), kept in the
    model cache (``block_codes``) under the tuple itself, read only (see
    :func:`_block_category_codes`)."""
    memo = current().block_codes
    key = Ref(values)
    kept = memo.get(key)
    if kept is None:
        codes = _npu_codes(values)
        if codes is not None:
            codes.flags.writeable = False
        kept = memo.put(key, False if codes is None else codes)
    return None if kept is False else kept


def _npu_codes(values) -> np.ndarray | None:
    """The NPUs ``values`` (a sequence) as int64 codes, -1 for None; None where one is not an
    int >= 0 or is 2**53 or more (a float would round it: :meth:`Engine.task_kinds`)."""
    npus = set(values)
    none = None in npus
    npus.discard(None)
    if any(type(x) is not int or x < 0 for x in npus):
        return None
    if npus and max(npus) >= 2 ** 53:
        return None
    if len(npus) == 1 and not none:   # one NPU (a stage's block): no conversion needed
        return np.full(len(values), npus.pop(), dtype=np.int64)
    # every NPU an int in [0, 2**53): exact as a float64, and None becomes NaN (-1 here),
    # converted by numpy in C rather than looked up per task in Python
    as_float = np.array(values, dtype=np.float64)
    return np.where(np.isnan(as_float), -1.0, as_float).astype(np.int64)


def _floats(values=None) -> array:
    """A typed float64 column (:class:`Engine`): empty, or a copy of the numpy array ``values``."""
    column = array("d")
    if values is not None:
        _put(column, values)
    return column


def _put(column: array, values: np.ndarray) -> None:
    """Append the numpy array ``values`` to the typed ``column`` as one copy of memory; their
    types must match (float64 for ``"d"``, int64 for ``"q"``: no silent conversion)."""
    dtype = np.float64 if column.typecode == "d" else np.int64
    if values.dtype != dtype:
        raise FredError(f"internal: a {values.dtype} array appended to a {np.dtype(dtype)} task column")
    column.frombytes(np.ascontiguousarray(values).view(np.uint8))


# int64 columns: the typed array's "q" must be numpy's int64 (so a block's bytes are its values)
assert array("q").itemsize == 8 and array("d").itemsize == 8


def _block_deps(table: BlockTable, which: np.ndarray, t0: np.ndarray, first: np.ndarray,
                first_count: np.ndarray) -> np.ndarray:
    """The dependencies :meth:`Engine._extend_blocks` appends, in a row: per appended block its
    first task's (``first``: all of them in a row, ``first_count`` per block), then its own
    (the table's offsets + the block's first task ``t0``)."""
    own = table.dep_total[which]
    per_block = first_count + own
    at = np.cumsum(per_block) - per_block
    flat = np.empty(int(per_block.sum()), dtype=np.int64)
    k = len(first)
    flat[np.repeat(at - (np.cumsum(first_count) - first_count), first_count) + np.arange(k)] = first
    total = int(own.sum())
    within = np.arange(total) - np.repeat(np.cumsum(own) - own, own)
    flat[np.repeat(at + first_count, own) + within] = \
        table.deps[np.repeat(table.dep_start[which], own) + within] + np.repeat(t0, own)
    return flat


def _entry_arrays(entries: list, preempt_s, shared_phase=None, task_entry=(), hold=None,
                  duration=()) -> dict:
    """The :class:`~sysmodel.engine_compiled.GraphArrays` fields of the transfers' (loads,
    bandwidths) pairs ``entries``: each one's time alone, the links it loads and its shares;
    the per-link preemption costs of ``preempt_s`` (:func:`preempt_per_link`) and the shared
    phases of ``shared_phase`` (:func:`shared_per_link`) and each entry's tier (:func:`entry_tiers`
    of the tasks' entries ``task_entry``); with ``hold`` (:class:`Engine`), the hold arrays of
    :func:`_hold_arrays` (entries it adds follow the given ones; each entry's latency beyond its
    bytes is its first task's, of ``duration``)."""
    if hold is None and _stack_width(entries) is not None:   # computed over every entry at once
        return _kept_stacked_entry_arrays(entries, preempt_s, shared_phase, task_entry)
    found = [_array_entry(loads, bw) for loads, bw in entries]
    n_links = max((int(f[1][-1]) + 1 for f in found if len(f[1])), default=0)
    tier = entry_tiers(entries, shared_phase, task_entry)
    held = _hold_arrays(entries, found, tier, hold, task_entry, duration)
    found = found + held["derived"]
    return dict(
        alone=np.array([f[0] for f in found], dtype=np.float64),
        link_ptr=np.cumsum([0] + [len(f[1]) for f in found], dtype=np.int64),
        links=np.concatenate([f[1] for f in found]).astype(np.int64) if found else np.zeros(0, np.int64),
        share=np.concatenate([f[2] for f in found]) if found else np.zeros(0),
        n_links=n_links, preempt_s=preempt_per_link(preempt_s, n_links),
        shared_phase=shared_per_link(shared_phase, n_links), tier=held["tier"],
        head=held["head"], after=held["after"], hold_first=held["hold_first"],
        hold_count=held["hold_count"], hold_cut=held["hold_cut"])


#: Tasks per appended block from which a graph's category and NPU codes are made block by block
#: (:meth:`Engine._pieces`): timed, Transformer-17B's 32 blocks of 79-83 tasks coded in about
#: half the time task by task took; the 10,240-GPU Megatron graph's 738 blocks of about 21
#: tasks (15,616 tasks) in 1.5 times it (docs/sysmodel.md, Speed).
TASKS_PER_PIECE = 40


#: Entries x links up to which the transfer entries' arrays are made stacked
#: (:func:`_stack_width`): beyond it the passes over whole matrices cost more than the
#: per-entry numpy calls they save (timed, ``/tmp/s16-t17/t_cross.py``: stacked faster at
#: 10 x 2,000 and 50 x 400 cells, slower from 10 x 4,000 and 50 x 1,000 on; the cluster graphs'
#: 51 x 25,602 took 8.5 ms stacked against 2.2 ms entry by entry; docs/sysmodel.md, Speed).
STACKED_ENTRY_CELLS = 2 ** 14


def _stack_width(entries: list) -> int | None:
    """The links of every transfer entry, when every entry's loads and bandwidths are
    one-dimensional float64 arrays of one length (a graph's transfers on one network) and they
    are at most :data:`STACKED_ENTRY_CELLS` values: :func:`_entry_arrays` then computes them
    stacked; else None (it takes them one by one)."""
    if not entries:
        return None
    width = None
    for loads, bw in entries:
        if type(loads) is not np.ndarray or type(bw) is not np.ndarray or loads.dtype != np.float64 \
                or bw.dtype != np.float64 or loads.ndim != 1 or loads.shape != bw.shape:
            return None
        if width is None:
            width = loads.shape[0]
        elif loads.shape[0] != width:
            return None
    if len(entries) * width > STACKED_ENTRY_CELLS:
        return None
    return width


def _kept_stacked_entry_arrays(entries: list, preempt_s, shared_phase, task_entry) -> dict:
    """:func:`_stacked_entry_arrays` of ``entries`` (stackable: :func:`_stack_width`), kept in
    the model cache (``transfer_entry_arrays``) under every value they are computed from, as
    bytes: the entries' loads and bandwidths in order, the preemption costs, the shared phases
    and the tasks' entries (their order sets the tiers: :func:`entry_tiers`). Equal bytes give
    the same arrays, so a kept entry is never stale, whichever objects carry the values (an
    MP transfer's scaled loads are new arrays per iteration). Each call returns its own copies
    (writable, as the compiled loop's machine code takes them): a caller that changed one
    could not change what is kept, and the kept arrays share no memory with the caller's.
    Why: a graph built again (a new iteration of the same network and strategy) has the same
    entries, and making their arrays was about a tenth of a Transformer-17B evaluation
    (docs/sysmodel.md, Speed, twenty-seventh increment)."""
    key = (len(entries), b"".join([loads.tobytes() for loads, _ in entries]),
           b"".join([bw.tobytes() for _, bw in entries]), _bytes_key(preempt_s),
           _bytes_key(shared_phase), _bytes_key(np.asarray(task_entry, dtype=np.int64)))
    memo = current().transfer_entry_arrays
    kept = memo.get(key)
    if kept is None:
        stacked = np.stack([e[0] for e in entries]), np.stack([e[1] for e in entries])
        kept = _stacked_entry_arrays(entries, stacked, preempt_s, shared_phase, task_entry)
        # every array is made there but the preemption costs, which may be a view of the
        # caller's: copied, so that no later change of the caller's array reaches the memo
        kept["preempt_s"] = kept["preempt_s"].copy()
        for value in kept.values():
            if type(value) is np.ndarray:
                value.flags.writeable = False
        memo.put(key, kept)
    return {k: v.copy() if type(v) is np.ndarray else v for k, v in kept.items()}


def _bytes_key(value):
    """``value`` (None, a float, or a numpy array) as a key equal exactly for equal bits: an
    array as its dtype, shape and bytes; a float as its hex form (0.0 and -0.0 apart)."""
    if value is None:
        return None
    if type(value) is np.ndarray:
        return value.dtype.str, value.shape, value.tobytes()
    return "float", float(value).hex()


def _run_key(graph: Engine, eng: Engine) -> tuple:
    """What the compiled loop reads of ``eng``, a sealed ``graph`` relinked
    (:meth:`Engine.relinked`, no hold), as a value: the graph (by identity: sealed, its tasks,
    dependencies, queues, categories, priorities and entry numbers never change), and as bits
    every task's duration, every entry's loads and bandwidths, the preemption costs and the
    shared phases (:func:`_bytes_key`; the entries' arrays are read for their values only, so
    which objects carry them is not in the key). Equal keys run the same loop on the same
    numbers, so the model cache's ``engine_runs`` keeps a run's times under it. The entries
    of one network share a bandwidth array: its bits are made once and the key holds that one
    object per entry (a bytes object keeps its hash)."""
    bandwidths: dict = {}
    for _, bw in eng.entries:
        if id(bw) not in bandwidths:
            bandwidths[id(bw)] = _bytes_key(bw)
    return (Ref(graph), _bytes_key(eng._arrays.duration), tuple(_bytes_key(loads) for loads, _ in eng.entries),
            tuple(bandwidths[id(bw)] for _, bw in eng.entries), _bytes_key(eng.preempt_s),
            _bytes_key(eng.shared_phase))


def _stacked_entry_arrays(entries: list, stacked: tuple, preempt_s, shared_phase, task_entry) -> dict:
    """:func:`_entry_arrays` without a hold, over the entries' stacked loads and bandwidths
    (:func:`_stack_width`): each row's time alone, loaded links and shares are
    :func:`_array_entry`'s (the same divisions and maxima, element by element), and the tiers
    :func:`entry_tiers`' (its test whether an entry loads a stored phase made for every row
    at once). Why: numpy's fixed cost per call, paid about ten times per entry, was a tenth
    of a small iteration's evaluation (docs/sysmodel.md, Speed, twentieth increment)."""
    loads, bw = stacked
    n = len(entries)
    per_link = loads / bw
    alone = per_link.max(axis=1)
    rows, links = np.nonzero(loads > 0)   # row by row, each row's links in order (flatnonzero's)
    share = per_link[rows, links] / alone[rows]
    link_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=link_ptr[1:])
    n_links = int(links.max()) + 1 if len(links) else 0
    total = len(links)
    return dict(
        alone=alone, link_ptr=link_ptr, links=links.astype(np.int64), share=share,
        n_links=n_links, preempt_s=preempt_per_link(preempt_s, n_links),
        shared_phase=shared_per_link(shared_phase, n_links),
        tier=entry_tiers(entries, shared_phase, task_entry, loads),
        head=np.zeros(total), after=np.full(total, np.inf), hold_first=np.full(n, -1, dtype=np.int64),
        hold_count=np.zeros(n, dtype=np.int64), hold_cut=np.full(n, np.inf))


def _hold_arrays(entries: list, found: list, tier: np.ndarray, hold, task_entry=(), duration=()) -> dict:
    """The hold of each transfer entry (``hold``, :class:`Engine`; ``found``: each entry's
    :func:`_array_entry`; its latency beyond its bytes: its first task's (``task_entry``,
    ``duration``), as the reference loop asks per task) as arrays for the compiled loop: per link of each entry (CSR as
    ``links``) its ``head`` and ``after`` (s); per entry ``hold_first`` (its first *held
    entry*, -1 for none) and ``hold_count``; the held entries follow the given ones
    (``derived``: their :func:`_array_entry` triples; ``tier``: every entry's, a held one its
    transfer's), one per distinct finite ``after`` of the entry, largest first: held entry
    ``j`` holds the entry's links whose ``after`` is at most its cut (``hold_cut``, per entry,
    inf for the given ones), with the same shares and time alone. The loop moves a transfer
    whose bytes are through to the first held entry whose cut is below its latency, and on to
    the next as each cut is passed (docs/sysmodel.md, "A switch held per switch")."""
    n = len(entries)
    total = sum(len(f[1]) for f in found)
    if hold is None or not n:
        return dict(derived=[], tier=tier, head=np.zeros(total), after=np.full(total, np.inf),
                    hold_first=np.full(n, -1, dtype=np.int64), hold_count=np.zeros(n, dtype=np.int64),
                    hold_cut=np.full(n, np.inf))
    head, after, derived, tiers, cuts = [], [], [], list(tier), [np.inf] * n
    first = np.full(n, -1, dtype=np.int64)
    count = np.zeros(n, dtype=np.int64)
    task_of = {}
    for t, e in enumerate(task_entry):
        if e >= 0 and e not in task_of:
            task_of[e] = t
    for e, ((loads, bw), (t_alone, used, share)) in enumerate(zip(entries, found)):
        h, a = hold(loads, bw, max(0.0, float(duration[task_of[e]]) - t_alone) if e in task_of else 0.0)
        h = np.asarray(h, dtype=np.float64)
        a = np.asarray(a, dtype=np.float64)
        if h.shape != np.shape(loads) or a.shape != np.shape(loads) or np.any(h < 0) \
                or not np.all(np.isfinite(h)) or np.any(a < 0):
            raise FredError(f"hold must give (head, after) over the {len(loads)} links of a "
                            f"transfer, each >= 0 (head finite), got shapes {h.shape}, {a.shape}")
        head.append(h[used])
        after.append(a[used])
        distinct = np.unique(a[used][np.isfinite(a[used])])[::-1]
        if len(distinct):
            first[e], count[e] = n + len(derived), len(distinct)
            for cut in distinct:
                keep = a[used] <= cut
                derived.append((t_alone, used[keep], share[keep]))
                tiers.append(int(tier[e]))
                cuts.append(float(cut))
    dtotal = sum(len(d[1]) for d in derived)
    return dict(derived=derived, tier=np.array(tiers, dtype=np.int64),
                head=np.concatenate(head + [np.zeros(dtotal)]),
                after=np.concatenate(after + [np.full(dtotal, np.inf)]),
                hold_first=first, hold_count=count, hold_cut=np.array(cuts, dtype=np.float64))


def _checked_preempt(preempt_s):
    """``preempt_s`` (a number, one cost per link, or two rows of them: :class:`Engine`) as a
    float or a float array, each >= 0."""
    if np.ndim(preempt_s) == 0:
        value = float(preempt_s)
        if not value >= 0:
            raise FredError(f"preempt_s must be >= 0, got {preempt_s}")
        return value
    costs = np.asarray(preempt_s, dtype=np.float64)
    if not (costs.ndim == 1 or (costs.ndim == 2 and costs.shape[0] == 2)) \
            or not (costs >= 0).all() or not np.isfinite(costs).all():
        raise FredError(f"preempt_s must be a number >= 0, one finite cost >= 0 per link, or two "
                        f"rows of them (first, further), got {preempt_s!r}")
    return costs


def entry_tiers(entries: list, shared_phase, task_entry, stacked_loads=None) -> np.ndarray:
    """Per transfer entry, its turn among the transfers of its priority level: where it loads a
    link another shares a phase with (a switch's stored-phase pseudo-link,
    :func:`sysmodel.switch_phases.shared_phase_links`), 1 + the number of the first task
    (``task_entry``: each task's entry, -1 for none) whose transfer loads the same bytes on the
    same links (the same collective, whichever arrays carry it: the graph's order, not the
    timer's memo); else 0. A switch serves the stored phases of one VC one after another, in
    the order the packet fabric's program gives them (docs/switch.md, "Phase order"), not a
    split of its time; the engine fills a level tier by tier, lowest first, so a transfer
    holding a stored phase gets what the level's earlier transfers leave (transfers of one
    collective, and those holding no stored phase, share max-min as before).
    ``stacked_loads``: the entries' loads as one (entries, links) array
    (:func:`_stack_width`), when the caller has it: which entries load a stored phase is
    then found for all of them at once."""
    tier = np.zeros(len(entries), dtype=np.int64)
    if shared_phase is None or not entries:
        return tier
    stored = np.unique(shared_phase[shared_phase >= 0])
    task_entry = np.asarray(task_entry, dtype=np.int64)
    used = task_entry >= 0
    first = np.full(len(entries), len(task_entry), dtype=np.int64)
    np.minimum.at(first, task_entry[used], np.flatnonzero(used))
    first_of_content: dict = {}
    if stacked_loads is not None:
        in_order = np.argsort(first, kind="stable")
        holding = (stacked_loads[:, stored[stored < stacked_loads.shape[1]]] > 0).any(axis=1)
        for e in in_order[holding[in_order]].tolist():
            loads, bw = entries[e]
            key = (np.asarray(loads).tobytes(), np.asarray(bw).tobytes())
            tier[e] = first_of_content.setdefault(key, first[e] + 1)
        return tier
    for e in np.argsort(first, kind="stable"):
        loads, bw = entries[e]
        if np.any(loads[stored[stored < len(loads)]] > 0):
            key = (np.asarray(loads).tobytes(), np.asarray(bw).tobytes())
            tier[e] = first_of_content.setdefault(key, first[e] + 1)
    return tier


def _checked_shared(shared_phase):
    """``shared_phase`` (None or per link -1 or the link it shares, :class:`Engine`) as None
    or an int64 array; a link sharing one that is itself shared, or itself, is an error."""
    if shared_phase is None or len(shared_phase) == 0:
        return None
    shared = np.asarray(shared_phase, dtype=np.int64)
    named = np.flatnonzero(shared >= 0)
    # the arrays' own any() (np.any's result without its dispatch: checked per engine made)
    if shared.ndim != 1 or (shared < -1).any() or (shared >= len(shared)).any() \
            or (shared[shared[named]] >= 0).any() or (shared[named] == named).any():
        raise FredError("shared_phase must give per link -1 or another link that shares none, "
                        f"got {shared_phase!r}")
    return shared


def shared_per_link(shared_phase, n_links: int) -> np.ndarray:
    """The shared phases of the first ``n_links`` links (:class:`Engine`): an empty array when
    none of them shares another's (the loops then map nothing). A link the transfers load
    beyond the given ones is an error naming both lengths."""
    if shared_phase is None:
        return np.zeros(0, dtype=np.int64)
    if len(shared_phase) < n_links:
        raise FredError(f"shared_phase names {len(shared_phase)} links; the transfers load {n_links}")
    shared = shared_phase[:n_links]
    if np.any(shared >= n_links):
        raise FredError(f"shared_phase maps a link onto link {int(shared.max())}; the transfers load {n_links}")
    return shared.copy() if np.any(shared >= 0) else np.zeros(0, dtype=np.int64)


def preempt_per_link(preempt_s, n_links: int) -> np.ndarray:
    """The costs of a preemption on each of ``n_links`` links (s) as two rows, ``[first,
    further]`` (:class:`Engine`): ``preempt_s`` on every link of the first row when it is a
    number, a one-row array as the first row (the second 0), else its first ``n_links``
    columns; an empty (0, 0) array when no link's preemption costs anything (the loops then
    skip the check). An array shorter than the links the transfers load is an error naming
    both lengths."""
    if np.ndim(preempt_s) == 0:
        if not preempt_s > 0:
            return np.zeros((0, 0))
        return np.vstack([np.full(n_links, float(preempt_s)), np.zeros(n_links)])
    costs = np.atleast_2d(np.asarray(preempt_s, dtype=np.float64))
    if costs.shape[1] < n_links:
        raise FredError(f"preempt_s has a cost for {costs.shape[1]} links; the transfers load {n_links}")
    costs = costs[:, :n_links]
    if not np.any(costs > 0):
        return np.zeros((0, 0))
    if costs.shape[0] == 1:
        costs = np.vstack([costs, np.zeros(n_links)])
    return np.ascontiguousarray(costs)


def _array_entry(loads, bw) -> tuple:
    """One (loads, bandwidths) pair's busiest-link time alone, the links it loads (indices) and
    its share of each of them at full speed."""
    time_per_link = loads / bw
    t_alone = float(time_per_link.max())
    used = np.flatnonzero(loads > 0)
    return t_alone, used, time_per_link[used] / t_alone
