"""A training iteration's trace as the RTL's per-NPU trace sequencer runs it (docs/fabric_iteration.md).

The system model exports an iteration as one node list per NPU (``sysmodel.iteration_export``,
read back by ``sysmodel.chakra_trace.load_chakra_ranks``). On the circuit FRED fabric
(``hdl/designs/fabric/``) each NPU's :class:`hdl.designs.iteration.TraceNpu` runs its list:
a :class:`~hdl.designs.iteration.TraceSequencer` walks a node memory, counting a compute node's
cycles and starting the NPU's engine for a collective node, and writes every node's start and
end cycle into a memory the harness reads after the run. This module is the contract between
the trace, the sequencer and the harness: what the circuit fabric can run, the node words, the
register addresses and the collective request the switches are configured for. Pure Python:
nodes are any objects with the fields of ``sysmodel.trace.TraceNode``.

What the circuit fabric runs (everything else is refused, by name, before anything is built):

* **serialised traces**: every node of a rank waits, directly or through others, for the node
  before it in the file (a dependency, or the same queue: a queue runs one node at a time in
  file order) (the model's ``--no-overlap`` iteration with one pipeline stage). The
  sequencer runs one node at a time in file order; a trace in which two nodes may overlap
  (compute under communication, two classes at once) is not what it runs. The circuit fabric
  holds one switch configuration at a time, so overlapping collectives would need the
  run-time overlap compiled into the configurations;
* node kinds ``compute`` (a delay), ``marker`` (a delay of 0) and ``comm`` of an op in
  :data:`hdl.contracts.fabric.FABRIC_OPS` with ``repeat`` 1; no receives (pipeline stages), no
  point-to-point or memory nodes (no I/O controllers in the RTL);
* at most one collective node per NPU, and the same node (id) at every NPU that has one: the
  engine is loaded with one program and the switches with the phases of one request. (Several
  serialised collectives would need program reloads and the phases of each concatenated.)

Timing (what the sequencer adds, counted in the RTL's cycles): compute node k takes
``round(D_k / cycle) - round(D_{k-1} / cycle)`` cycles, ``D_k`` the sum of the first k
compute durations (rounded on the running sum: the total is the rounded total), at least 1 (a 0-cycle node, e.g. a marker,
still takes the cycle in which the sequencer moves past it); a collective node takes one cycle
to start the engine, the engine's run, and one cycle to see it done.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FABRIC_OPS, FabricCollective, FabricRequest

__all__ = ["COLLECTIVE_BIT", "DELAY_MASK", "TRACE_TABLE_ADDR", "TRACE_TABLE_DATA", "TRACE_NODES",
           "TRACE_READ_ADDR", "TRACE_READ", "NpuTrace", "npu_trace", "trace_writes",
           "collective_request"]

#: Node word: bit 31 set for a collective node (start the engine, wait for it), else a delay.
COLLECTIVE_BIT = 1 << 31
#: Node word: a compute node's cycles (bits 0..30).
DELAY_MASK = COLLECTIVE_BIT - 1
#: Program registers of the trace sequencer, above the NPU engine's (``ENGINE_REGS``, 0..51) in
#: the same 6-bit register space of the fabric's program port: the node memory's write
#: address, a node word (written at the address, which then steps by one), the node count,
#: the node whose start/end cycles the read registers show.
TRACE_TABLE_ADDR, TRACE_TABLE_DATA, TRACE_NODES, TRACE_READ_ADDR = 56, 57, 58, 59
#: Read registers a trace NPU adds after the engine's (``ENGINE_READ``): the start and end cycle
#: of node ``TRACE_READ_ADDR``, the nodes finished so far.
TRACE_READ = ("node_start", "node_end", "nodes_done")
_MAX_DELAY = DELAY_MASK
_RUNS = ("compute", "marker", "comm")


@dataclass(frozen=True)
class NpuTrace:
    """One NPU's trace as the sequencer runs it: ``words`` (one per node, file order),
    ``node_ids`` and ``names`` (the trace's), ``categories`` (the traffic class of a collective
    node, else ``compute``), ``collective`` (the id of its collective node, or None)."""

    rank: int
    words: tuple[int, ...]
    node_ids: tuple[int, ...]
    names: tuple[str, ...]
    categories: tuple[str, ...]
    collective: int | None

    @property
    def compute_cycles(self) -> int:
        """Cycles of its compute nodes as the sequencer counts them (each at least 1)."""
        return sum(max(w & DELAY_MASK, 1) for w in self.words if not w & COLLECTIVE_BIT)


def _check_serial(rank: int, nodes) -> None:
    """Refuse a trace whose nodes are not a chain in file order (module docstring): a node
    waits for its dependencies and for the node before it on its queue (a queue runs its
    nodes one at a time in file order), and through them for every node before it."""
    position = {n.id: i for i, n in enumerate(nodes)}
    ancestors: list[int] = []          # bit j: node j is an ancestor
    last_on_queue: dict = {}
    for i, node in enumerate(nodes):
        bits = 0
        for dep in node.deps:
            j = position.get(dep)
            if j is None or j >= i:
                raise FredError(f"rank {rank}: node {node.id} ({node.name}) depends on node {dep}, "
                                f"which is not before it in the trace")
            bits |= ancestors[j] | (1 << j)
        if node.queue is not None:
            j = last_on_queue.get(node.queue)
            if j is not None:
                bits |= ancestors[j] | (1 << j)
            last_on_queue[node.queue] = i
        if i and not bits >> (i - 1) & 1:
            prev = nodes[i - 1]
            raise FredError(f"rank {rank}: node {node.id} ({node.name}) does not wait for node "
                            f"{prev.id} ({prev.name}): the two may overlap, and the circuit "
                            f"fabric's trace sequencer runs serialised traces only (export with "
                            f"--no-overlap and one pipeline stage)")
        ancestors.append(bits)


def _word(rank: int, node, cycles: int) -> int:
    if node.kind not in _RUNS:
        what = ("a pipeline stage's receive" if node.kind == "recv" else f"a {node.kind} node")
        raise FredError(f"rank {rank}: node {node.id} ({node.name}) is {what}; the circuit "
                        f"fabric's trace sequencer runs compute, marker and collective nodes "
                        f"(one pipeline stage, no I/O controllers)")
    if node.kind == "comm":
        op = node.fred_op or node.op
        if op not in FABRIC_OPS:
            raise FredError(f"rank {rank}: node {node.id} ({node.name}) is a {op}; the fabric's "
                            f"engines run {', '.join(FABRIC_OPS)}")
        if node.repeat != 1:
            raise FredError(f"rank {rank}: node {node.id} ({node.name}) repeats its collective "
                            f"{node.repeat:g} times; the trace sequencer runs each once")
        return COLLECTIVE_BIT
    if not 0 <= cycles <= _MAX_DELAY:
        raise FredError(f"rank {rank}: node {node.id} ({node.name}) lasts {cycles} cycles; the "
                        f"sequencer counts 0..{_MAX_DELAY} (use a larger --scale)")
    return cycles


def npu_trace(rank: int, nodes, *, cycle_s: float) -> NpuTrace:
    """The sequencer's trace of ``rank``'s ``nodes`` (file order) at a clock of ``cycle_s``
    seconds per cycle; refuses what the circuit fabric cannot run (module docstring)."""
    if not cycle_s > 0:
        raise FredError(f"cycle time must be positive, got {cycle_s!r}")
    nodes = list(nodes)
    _check_serial(rank, nodes)
    # compute cycles rounded on the running sum, so that rounding does not accumulate: the
    # k-th compute node ends at round(sum of the first k durations / cycle)
    delays, elapsed = [], 0.0
    for n in nodes:
        before = round(elapsed / cycle_s)
        if n.kind == "compute":
            elapsed += n.duration_s
        delays.append(round(elapsed / cycle_s) - before)
    words = tuple(_word(rank, n, d) for n, d in zip(nodes, delays))
    collectives = [n.id for n, w in zip(nodes, words) if w & COLLECTIVE_BIT]
    if len(collectives) > 1:
        raise FredError(f"rank {rank} has {len(collectives)} collective nodes "
                        f"({', '.join(map(str, collectives[:5]))}); the circuit fabric's trace "
                        f"run loads one engine program and one request's switch phases, so it "
                        f"runs traces with one collective per NPU")
    return NpuTrace(rank=rank, words=words, node_ids=tuple(n.id for n in nodes),
                    names=tuple(n.name for n in nodes),
                    categories=tuple((n.category or "comm") if w & COLLECTIVE_BIT else "compute"
                                     for n, w in zip(nodes, words)),
                    collective=collectives[0] if collectives else None)


def trace_writes(trace: NpuTrace, depth: int) -> list[tuple[int, int]]:
    """(register, value) writes that load ``trace`` into a sequencer of ``depth`` nodes."""
    if len(trace.words) > depth:
        raise FredError(f"rank {trace.rank}: {len(trace.words)} nodes do not fit the sequencer's "
                        f"node memory of {depth}")
    return ([(TRACE_TABLE_ADDR, 0)] + [(TRACE_TABLE_DATA, w) for w in trace.words]
            + [(TRACE_NODES, len(trace.words))])


def collective_request(ranks: dict, traces: dict, *, flit_bytes: int) -> FabricRequest | None:
    """The fabric request of the traces' collective (None if no NPU has one): for each rank
    holding it, its group (and root) from the node in ``ranks`` (rank -> nodes); the groups
    must be disjoint or equal (concurrent collectives of one op) and the bytes the same. Size:
    whole flits, ``ceil(bytes / flit_bytes)`` (the model moves whole flits too)."""
    ids = {t.collective for t in traces.values() if t.collective is not None}
    if not ids:
        return None
    if len(ids) > 1:
        raise FredError(f"the NPUs' collective nodes differ ({', '.join(map(str, sorted(ids)))}); "
                        f"the circuit fabric runs one request at a time")
    (node_id,) = ids
    groups, ops, sizes = {}, set(), set()
    for rank, trace in traces.items():
        if trace.collective is None:
            continue
        node = next(n for n in ranks[rank] if n.id == node_id)
        members = tuple(sorted(node.group)) if node.group else None
        if not members or rank not in members and node.root != rank:
            raise FredError(f"rank {rank}: collective node {node_id} ({node.name}) names no group "
                            f"holding the rank")
        ops.add(node.fred_op or node.op)
        sizes.add(node.size)
        groups[members] = node.root
    if len(ops) > 1 or len(sizes) > 1:
        raise FredError(f"collective node {node_id}: the NPUs disagree on its op or size "
                        f"({sorted(ops)}, {sorted(sizes)})")
    seen: set[int] = set()
    for members in groups:
        if seen & set(members):
            raise FredError(f"collective node {node_id}: groups overlap ({sorted(groups)})")
        seen |= set(members)
    (op,), (size,) = ops, sizes
    flits = max(math.ceil(size / flit_bytes - 1e-9), 1)
    # FabricCollective's members: a multicast's destinations without its root, a reduce's
    # group with it, an all-reduce's group (no root)
    collectives = tuple(FabricCollective(op, tuple(m for m in members if m != root or op != "multicast"),
                                         root if op != "all-reduce" else None)
                        for members, root in sorted(groups.items(), key=lambda g: g[0]))
    return FabricRequest(op, collectives, flits, f"trace node {node_id} {op} of {len(collectives)} group(s)")
