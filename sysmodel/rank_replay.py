"""Replay of per-rank traces whose collectives name their groups (docs/chakra_export.md).

:func:`sysmodel.trace.replay` runs one rank's graph and assumes every NPU runs it (SPMD). A
pipelined iteration is not SPMD: each pipeline stage runs its own layers and hands
activations to the next. :func:`replay_ranks` takes every rank's trace (the model's exported
iteration, :mod:`sysmodel.iteration_export`, or any trace whose collective nodes carry
``group``):

* ranks whose graphs are the same node for node (ids, names, kinds, durations, sizes,
  dependencies, queues; groups and peers may differ) form a class; the lowest rank of each
  class is simulated for all of them (the model's representative NPU per stage);
* a collective node runs, as one task, the concurrent set of the collectives the class's ranks
  give for it (every MP group of a stage at once, as the model times it), timed by
  :func:`sysmodel.collectives.evaluate`, ``repeat`` times back to back; its link loads go to
  the engine so that overlapping transfers share links;
* a receive node is the sending rank's node with the receive's ``tag`` (no task of its own:
  its users wait for that node);
* nodes run on their ``queue`` (default ``s<class>.<kind>``) one at a time in dependency
  order, the file's order among ready ones;
* on fabrics with virtual-channel priority (FRED; :func:`sysmodel.training.link_priority`)
  transfers share links by the nodes' ``priority`` levels, each preemption costing the
  switch's measured time; on the mesh max-min fairly.

The breakdown is the model's (:func:`sysmodel.breakdown.attribute_time`, the busiest class's
timeline). Not modelled: the one-time switch configuration load of a first iteration.
"""

from __future__ import annotations

import heapq

from hdl.contracts.errors import FredError
from sysmodel.breakdown import attribute_time
from sysmodel.collectives import Collective, evaluate
from sysmodel.engine import Engine
from sysmodel.switch_phases import collective_links
from sysmodel.trace import TraceResult
from sysmodel.training import link_priority

__all__ = ["replay_ranks", "has_explicit_groups"]


def has_explicit_groups(trace) -> bool:
    """Whether ``trace`` (a :class:`sysmodel.trace.Trace`) names its collectives' groups."""
    return any(n.group or n.queue for n in trace.nodes)


def _signature(trace) -> tuple:
    return tuple((n.id, n.name, n.kind, n.duration_s, n.op, n.fred_op, n.size, n.repeat,
                  n.deps, n.queue, n.category, n.priority, n.tag) for n in trace.nodes)


def _classes(traces: dict) -> tuple[list[int], dict]:
    """(representative rank per class, rank -> class); classes ordered by their lowest rank."""
    first: dict = {}
    class_of = {}
    reps = []
    for rank in sorted(traces):
        sig = _signature(traces[rank])
        if sig not in first:
            first[sig] = len(reps)
            reps.append(rank)
        class_of[rank] = first[sig]
    return reps, class_of


def _collective(node, rank: int, where: str) -> Collective:
    """This rank's collective of ``node`` (one repetition)."""
    op = node.fred_op or node.op
    if node.kind in ("mem-read", "mem-write") and node.fred_op is None:
        raise FredError(f"{where}: a memory node with a group needs fred_op (io-load, io-read, "
                        f"io-store or io-write)")
    size = node.size / node.repeat
    if node.kind == "p2p":
        return Collective("point-to-point", size=size, pairs=((rank, node.peer),))
    return Collective(op, tuple(node.group) or (rank,), size, root=node.root)


def _levels(traces: dict) -> dict:
    """{category: priority level} from the nodes; one level per category."""
    levels: dict = {}
    for rank, trace in traces.items():
        for n in trace.nodes:
            if n.priority is None or n.category is None:
                continue
            if levels.setdefault(n.category, n.priority) != n.priority:
                raise FredError(f"rank {rank}: node {n.id} ({n.name}) gives traffic class "
                                f"{n.category} priority {n.priority}, another node "
                                f"{levels[n.category]}")
    return levels


def replay_ranks(platform, fabric: str, traces: dict, *, name: str = "trace") -> TraceResult:
    """Time of the per-rank ``traces`` (rank -> :class:`~sysmodel.trace.Trace`, ranks 0..n-1)
    on ``fabric`` of ``platform`` (module docstring)."""
    platform.check_fabric(fabric)
    if sorted(traces) != list(range(len(traces))) or not traces:
        raise FredError(f"{name}: the ranks must be 0..n-1, got {sorted(traces)[:8]}")
    if len(traces) > platform.npus:
        raise FredError(f"{name} runs on {len(traces)} NPUs but platform {platform.name!r} "
                        f"has {platform.npus}")
    reps, class_of = _classes(traces)
    members: dict = {}
    for rank, c in class_of.items():
        members.setdefault(c, []).append(rank)
    priority = link_priority(platform, fabric)
    if priority:
        priority = {**priority, "priority": _levels(traces)}
    eng = Engine(**priority)
    order = _merged_order(traces, reps, class_of)
    task_of: dict = {}
    cache: dict = {}
    for key in order:
        c, node = key[0], traces[reps[key[0]]].by_id()[key[1]]
        task_of[key] = _add(eng, platform, fabric, traces, members[c], reps[c], c, node,
                            [task_of[d] for d in _deps(key, traces, reps, class_of)], cache)
    executed = eng.run()
    breakdown, busy, _ = attribute_time(executed, len(reps), lambda c: reps[c])
    notes = [f"{len(reps)} rank classes simulated (representative ranks "
             f"{', '.join(map(str, reps))}); the one-time switch configuration load is not "
             f"included"]
    if len(traces) < platform.npus:
        notes.append(f"{platform.npus - len(traces)} of {platform.npus} NPUs idle")
    return TraceResult(trace=name, fabric=fabric, time_s=executed.makespan, breakdown=breakdown,
                       comm_busy=busy, nodes=sum(len(traces[r].nodes) for r in reps),
                       npus=len(traces), idle_npus=platform.npus - len(traces), notes=notes)


def _deps(key, traces, reps, class_of) -> list:
    """The (class, node id) tasks node ``key`` waits for, receives resolved to their senders."""
    c, nid = key
    by_id = traces[reps[c]].by_id()
    out = []
    for d in by_id[nid].deps:
        out.append(_resolve(c, by_id[d], traces, reps, class_of))
    return [d for d in dict.fromkeys(out) if d is not None]


def _resolve(c: int, node, traces, reps, class_of):
    """(class, id) of the task ``node`` of class ``c`` stands for: itself, or a receive's
    sender (None for a receive without a tag: it waits for nothing)."""
    if node.kind != "recv" or node.tag is None:
        return (c, node.id)
    if node.peer not in class_of:
        raise FredError(f"rank {reps[c]}: receive node {node.id} ({node.name}) names rank "
                        f"{node.peer}, which has no trace")
    sender = class_of[node.peer]
    target = traces[reps[sender]].by_id().get(node.tag)
    if target is None or target.kind == "recv":
        raise FredError(f"rank {reps[c]}: receive node {node.id} ({node.name}) waits for node "
                        f"{node.tag} of rank {node.peer}, which has no such sending node")
    return (sender, node.tag)


def _merged_order(traces, reps, class_of) -> list:
    """Every class's non-receive nodes in dependency order (Kahn), lowest (id, class) first
    among the ready ones: the model's task order for its exported files."""
    keys, waiting, users = [], {}, {}
    for c, rank in enumerate(reps):
        for n in traces[rank].nodes:
            if n.kind == "recv" and n.tag is not None:
                continue
            key = (c, n.id)
            deps = _deps(key, traces, reps, class_of)
            keys.append(key)
            waiting[key] = len(deps)
            for d in deps:
                users.setdefault(d, []).append(key)
    ready = [(k[1], k[0]) for k in keys if waiting[k] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        nid, c = heapq.heappop(ready)
        out.append((c, nid))
        for u in users.get((c, nid), ()):
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (u[1], u[0]))
    if len(out) != len(keys):
        c, nid = next(k for k in keys if waiting[k] > 0)
        raise FredError(f"rank {reps[c]}: dependency cycle through node {nid}")
    return out


def _add(eng, platform, fabric, traces, ranks, rep, c, node, deps, cache) -> int:
    """The engine task of ``node`` of class ``c`` (``ranks``: the class's ranks)."""
    if node.kind == "compute":
        return eng.add(node.name, node.queue or f"s{c}.compute", node.duration_s, deps, npu=rep)
    category = node.category or ("p2p" if node.kind == "p2p" else
                                 "io" if node.kind.startswith("mem") else node.dim)
    queue = node.queue or f"s{c}.{category}"
    npu = None if category == "io" else rep
    if node.kind == "marker" or node.size <= 0:
        return eng.add(node.name, queue, 0.0, deps, category=category, npu=npu)
    where = f"rank {rep}: node {node.id} ({node.name})"
    colls = tuple(sorted({_collective(traces[r].by_id()[node.id], r, where) for r in ranks},
                         key=lambda x: (x.group, x.root if x.root is not None else -1, x.pairs)))
    key = (colls, node.repeat)
    if key not in cache:
        r = evaluate(platform, fabric, list(colls))
        k = node.repeat
        loads, bw = collective_links(platform, fabric, r)
        cache[key] = (r.time_s * k, loads * k, bw)
    time_s, loads, bw = cache[key]
    return eng.add(node.name, queue, time_s, deps, category=category, npu=npu, loads=loads, bw=bw)
