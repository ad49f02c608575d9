"""Execution traces replayed on a fabric: the common form of imported workloads (docs/sysmodel.md, Fidelity).

ASTRA-sim 1.0 text workloads (:mod:`sysmodel.astrasim`) and Chakra execution traces
(:mod:`sysmodel.chakra_trace`) carry their own compute times and the collectives each step
issues; they become a :class:`Trace`: one NPU's graph of nodes (compute with a duration,
collectives with an operation, size and the parallel dimension whose groups run them,
point-to-point transfers, external-memory reads and writes) and dependencies.

:func:`replay` runs the trace of one representative NPU on the task-graph engine, every NPU
being assumed to run the same graph at the same time (the SPMD case both formats describe):
compute nodes on the NPU's single compute unit in dependency order, each collective on a
channel of its dimension, timed by :func:`sysmodel.collectives.evaluate` with every group of
that dimension active at once, so concurrent collectives share links in the engine. The
breakdown is the iteration time split into compute, communication exposed per dimension
(the compute unit idle while it is in flight) and idle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hdl.contracts.errors import FredError
from sysmodel.collectives import Collective, evaluate
from sysmodel.engine import Engine
from sysmodel.platform import Platform
from sysmodel.switch_phases import collective_links
from sysmodel.breakdown import interval_gaps, interval_overlap, interval_union

__all__ = ["TraceNode", "Trace", "TraceResult", "replay", "KINDS", "DIMS"]

KINDS = ("compute", "comm", "p2p", "recv", "mem-read", "mem-write", "marker")
#: Dimensions a collective runs over: all NPUs, the model-parallel groups (consecutive
#: ranks), the data-parallel groups (ranks ``mp`` apart).
DIMS = ("all", "mp", "dp")


@dataclass(frozen=True)
class TraceNode:
    """``id``, ``name``, ``kind`` (one of :data:`KINDS`), ``duration_s`` (compute),
    ``op``/``size``/``dim`` (a collective of ``size`` bytes per NPU on the groups of ``dim``),
    ``peer`` (p2p / recv: the other rank; ``size`` bytes), ``deps`` (ids of nodes it waits for).

    Traces that name their groups explicitly (the model's exported iterations,
    :mod:`sysmodel.iteration_export`; replayed by :mod:`sysmodel.rank_replay`) also give:
    ``group`` (the ranks of this NPU's collective), ``root`` (a rooted collective's source),
    ``fred_op`` (the model's collective when no Chakra type names it: multicast, io-load, ...),
    ``repeat`` (back-to-back repetitions of one collective of ``size / repeat`` bytes),
    ``priority`` (the traffic class's virtual-channel level), ``tag`` (a receive's matching
    node on ``peer``), ``queue`` (the NPU resource that runs the node, one node at a time in
    file order) and ``category`` (the traffic class: mp, pp, dp, io)."""

    id: int
    name: str
    kind: str
    duration_s: float = 0.0
    op: str | None = None
    size: float = 0.0
    dim: str = "all"
    peer: int | None = None
    deps: tuple = ()
    group: tuple = ()
    root: int | None = None
    fred_op: str | None = None
    repeat: float = 1.0
    priority: int | None = None
    tag: int | None = None
    queue: str | None = None
    category: str | None = None


@dataclass
class Trace:
    """One NPU's graph. ``npus``: NPUs running it; ``mp``: model-parallel group size
    (``dp`` = npus / mp); ``source``: where it came from (file, format)."""

    name: str
    nodes: list
    npus: int
    mp: int = 1
    source: str = ""
    notes: list = field(default_factory=list)

    def __post_init__(self):
        if isinstance(self.npus, bool) or not isinstance(self.npus, int) or self.npus < 1:
            raise FredError(f"trace {self.name}: NPU count must be a positive integer, got {self.npus!r}")
        if self.npus % self.mp:
            raise FredError(f"trace {self.name}: model-parallel group {self.mp} does not divide "
                            f"{self.npus} NPUs")
        ids = set()
        for n in self.nodes:
            if n.kind not in KINDS:
                raise FredError(f"trace {self.name}: node {n.id} ({n.name}): unknown kind {n.kind!r}")
            if n.dim not in DIMS:
                raise FredError(f"trace {self.name}: node {n.id} ({n.name}): unknown dimension {n.dim!r}")
            if n.id in ids:
                raise FredError(f"trace {self.name}: node id {n.id} appears twice")
            ids.add(n.id)
        for n in self.nodes:
            for d in n.deps:
                if d not in ids:
                    raise FredError(f"trace {self.name}: node {n.id} ({n.name}) depends on unknown "
                                    f"node {d}")

    def by_id(self) -> dict:
        """{node id: node} (built once; the node list is not changed after loading)."""
        cached = self.__dict__.get("_by_id")
        if cached is None:
            cached = self.__dict__["_by_id"] = {n.id: n for n in self.nodes}
        return cached

    def groups(self, dim: str) -> list[tuple[int, ...]]:
        if dim == "all" or (dim == "mp" and self.mp == self.npus) or (dim == "dp" and self.mp == 1):
            return [tuple(range(self.npus))]
        dp = self.npus // self.mp
        if dim == "mp":
            return [tuple(range(g * self.mp, (g + 1) * self.mp)) for g in range(dp)]
        return [tuple(k + self.mp * g for g in range(dp)) for k in range(self.mp)]

    def ordered(self) -> list[TraceNode]:
        """Nodes in dependency order, file order among the ready ones (Kahn); a cycle is an
        error naming a node on it."""
        by_id = {n.id: n for n in self.nodes}
        waiting = {n.id: len(set(n.deps)) for n in self.nodes}
        users: dict = {}
        for n in self.nodes:
            for d in set(n.deps):
                users.setdefault(d, []).append(n.id)
        position = {n.id: i for i, n in enumerate(self.nodes)}
        import heapq
        ready = [(position[i], i) for i, w in waiting.items() if w == 0]
        heapq.heapify(ready)
        out = []
        while ready:
            _, i = heapq.heappop(ready)
            out.append(by_id[i])
            for u in users.get(i, ()):
                waiting[u] -= 1
                if waiting[u] == 0:
                    heapq.heappush(ready, (position[u], u))
        if len(out) != len(self.nodes):
            stuck = next(n for n in self.nodes if waiting[n.id] > 0)
            raise FredError(f"trace {self.name}: dependency cycle through node {stuck.id} ({stuck.name})")
        return out


@dataclass
class TraceResult:
    trace: str
    fabric: str
    time_s: float
    breakdown: dict
    comm_busy: dict
    nodes: int
    npus: int
    idle_npus: int
    notes: list

    def to_dict(self) -> dict:
        return dict(self.__dict__)


_COLLECTIVE_OPS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "reduce")


def replay(platform: Platform, fabric: str, trace: Trace) -> TraceResult:
    """Time of ``trace`` on ``fabric`` of ``platform`` (see the module docstring)."""
    platform.check_fabric(fabric)
    if trace.npus > platform.npus:
        raise FredError(f"trace {trace.name} runs on {trace.npus} NPUs but platform "
                        f"{platform.name!r} has {platform.npus}")
    eng = Engine()
    task_of: dict = {}
    cache: dict = {}

    def comm_time(node: TraceNode):
        key = (node.kind, node.op, node.size, node.dim, node.peer)
        if key not in cache:
            if node.kind == "comm":
                if node.op not in _COLLECTIVE_OPS:
                    raise FredError(f"trace {trace.name}: node {node.id} ({node.name}): "
                                    f"unsupported collective {node.op!r}")
                colls = [Collective(node.op, g, node.size) for g in trace.groups(node.dim)
                         if len(g) > 1]
            elif node.kind in ("p2p", "recv"):
                if node.peer is None or not 0 <= node.peer < trace.npus or node.peer == 0:
                    raise FredError(f"trace {trace.name}: node {node.id} ({node.name}): "
                                    f"point-to-point peer {node.peer!r} is not another rank of "
                                    f"the {trace.npus} NPUs")
                colls = [Collective("point-to-point", size=node.size, pairs=((0, node.peer),))]
            else:
                if platform.io_controllers == 0:
                    raise FredError(f"trace {trace.name}: node {node.id} ({node.name}) reads or "
                                    f"writes external memory, but platform {platform.name!r} has "
                                    f"no I/O controllers")
                op = "io-read" if node.kind == "mem-read" else "io-write"
                colls = [Collective(op, tuple(range(trace.npus)), node.size)]
            if not colls or node.size <= 0:
                cache[key] = 0.0
            else:
                r = evaluate(platform, fabric, colls)
                cache[key] = (r.time_s, *collective_links(platform, fabric, r))
        return cache[key]

    for node in trace.ordered():
        deps = [task_of[d] for d in node.deps if task_of.get(d) is not None]
        if node.kind == "compute":
            task_of[node.id] = eng.add(node.name, "npu.compute", node.duration_s, deps, npu=0)
        elif node.kind == "marker":
            task_of[node.id] = eng.add(node.name, "npu.marker", 0.0, deps, category="marker", npu=0)
        else:
            t = comm_time(node)
            category = node.dim if node.kind == "comm" else \
                ("p2p" if node.kind in ("p2p", "recv") else "io")
            resource = f"npu.{category}"
            if t == 0.0:
                task_of[node.id] = eng.add(node.name, resource, 0.0, deps, category=category, npu=0)
            else:
                time_s, loads, bw = t
                task_of[node.id] = eng.add(node.name, resource, time_s, deps, category=category,
                                           npu=0, loads=loads, bw=bw)
    sched = eng.run()
    makespan = sched.makespan
    compute = [t for t in sched.tasks if t.resource == "npu.compute"]
    busy = sum(t.duration for t in compute)
    idle = interval_gaps(*_intervals(compute), makespan)
    breakdown = {"compute": busy}
    comm_busy = {}
    for cat in ("mp", "dp", "all", "p2p", "io"):
        mine = [t for t in sched.tasks if t.category == cat]
        comm_busy[cat] = sum(t.end - t.start for t in mine)
        covered, idle = interval_overlap(idle, interval_union(*_intervals(mine)))
        breakdown[cat] = covered
    breakdown["idle"] = sum((idle[1] - idle[0]).tolist())
    notes = list(trace.notes)
    if trace.npus < platform.npus:
        notes.append(f"{platform.npus - trace.npus} of {platform.npus} NPUs idle")
    return TraceResult(trace=trace.name, fabric=fabric, time_s=makespan, breakdown=breakdown,
                       comm_busy=comm_busy, nodes=len(trace.nodes), npus=trace.npus,
                       idle_npus=platform.npus - trace.npus, notes=notes)


def _intervals(tasks) -> tuple[np.ndarray, np.ndarray]:
    """The (start, end) of ``tasks`` as two arrays, as the breakdown's interval sweeps take them."""
    return (np.array([t.start for t in tasks], dtype=np.float64),
            np.array([t.end for t in tasks], dtype=np.float64))
