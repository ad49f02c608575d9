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
  point-to-point nodes; memory nodes only where the fabric has I/O controllers (``npu_trace(...,
  io=True)``: an I/O node of :data:`TRACE_IO_OPS` is a collective node whose request is an
  :class:`IoRequest`, whole stripes per controller; no iteration top runs them yet);
* any number of collective nodes per NPU (``max_collectives``; 1: one program loaded by the
  harness): the k-th collective node of every NPU is the same node; each NPU's
  :class:`~hdl.designs.iteration.ProgramLoader` holds the engine programs of all of them and
  loads the next one while the NPU computes (:func:`loader_entries`). On the circuit FRED
  fabric each switch's :class:`~hdl.designs.iteration.RerunPhaseSequencer` also loads each
  collective's phase counts and first slot (the phases of every algorithm side by side in
  its slots, loaded once). A collective node that repeats (``repeat`` k, e.g. an all-reduce
  recomputed) runs its engines k times.

**Overlapped traces** (``npu_trace(..., overlap=True)``, a sequencer built with ``overlap``): the
model's overlapped iteration (compute under communication), one collective at a time per NPU
(``sysmodel.iteration_export.export_iteration(..., overlap=True, one_collective=True)``). The
sequencer has two lanes: the node lane runs the compute and marker nodes in order and issues
each collective node (one cycle); the collective lane runs the issued collectives in order.
So a trace runs when its compute nodes form a chain in file order and so do its collective
nodes (each waits for the one before on its lane); the nodes are reordered so that each
collective is issued right after the last node it waits for (file order otherwise kept), and
before a compute node that waits for a collective the node lane gets a *wait node*
(:data:`WAIT_BIT`: until the collective lane has finished every collective up to that one;
id -1, name ``wait``, category ``wait``; one cycle). Markers of a traffic class (a
communication of no bytes) take no time and are passed: what waits for one waits for what it
waits for.

Timing (what the sequencer adds, counted in the RTL's cycles): compute node k takes
``round(D_k / cycle) - round(D_{k-1} / cycle)`` cycles, ``D_k`` the sum of the first k
compute durations (rounded on the running sum: the total is the rounded total), at least 1 (a 0-cycle node, e.g. a marker,
still takes the cycle in which the sequencer moves past it); a collective node takes one cycle
to start the engine, the engine's run, and one cycle to see it done (per repeat), plus the
cycles it waits for its program to be loaded (none when the compute before it is long enough).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FABRIC_OPS, FabricCollective, FabricRequest

__all__ = ["COLLECTIVE_BIT", "DELAY_MASK", "REPEAT_MASK", "WAIT_BIT", "OVERLAP_DELAY_MASK", "TRACE_TABLE_ADDR", "TRACE_TABLE_DATA",
           "TRACE_NODES", "TRACE_READ_ADDR", "TRACE_READ", "LOADER_READ", "PROG_ADDR", "PROG_HEAD",
           "PROG_VALUE", "PACKET_HEADER_REGS", "PACKET_PACE_REG", "CONTROLLER_STRIPE_REG", "stage_flows_word", "TRACE_IO_OPS", "IoRequest", "NpuTrace", "npu_trace", "trace_writes", "collective_request",
           "collective_requests", "loader_entries", "loader_writes"]

#: Node word: bit 31 set for a collective node (start the engine, wait for it), else a delay.
COLLECTIVE_BIT = 1 << 31
#: Node word: a compute node's cycles (bits 0..30).
DELAY_MASK = COLLECTIVE_BIT - 1
#: Node word of a collective: how many times its engines run (bits 0..7; 0 means once).
REPEAT_MASK = 0xFF
#: Node word of an overlapped trace (a sequencer built with ``overlap``, "Overlapped traces"
#: below): a wait node, which holds the node lane until the collective lane has finished the
#: number of collectives in bits 0..29 (counted from the start).
WAIT_BIT = 1 << 30
#: Node word of an overlapped trace: a compute node's cycles, a wait node's count (bits 0..29).
OVERLAP_DELAY_MASK = WAIT_BIT - 1
#: Program registers of the trace sequencer, above the NPU engine's (``ENGINE_REGS``, 0..51) in
#: the same 6-bit register space of the fabric's program port: the node memory's write
#: address, a node word (written at the address, which then steps by one), the node count,
#: the node whose start/end cycles the read registers show.
TRACE_TABLE_ADDR, TRACE_TABLE_DATA, TRACE_NODES, TRACE_READ_ADDR = 56, 57, 58, 59
#: Read registers a trace NPU adds after the engine's (``ENGINE_READ``): the start and end cycle
#: of node ``TRACE_READ_ADDR``, the nodes finished so far.
TRACE_READ = ("node_start", "node_end", "nodes_done")
#: Program registers of a sequencer's program loader (after the trace's): the entry memory's
#: write address; an entry's head (bit 0: last entry of its program, bit 1: deferred -- written
#: only once the collective node is reached --, then per lane 7 bits: write valid, register);
#: each lane's value in lane order (the last one stores the entry, the address steps by one).
PROG_ADDR, PROG_HEAD, PROG_VALUE = 60, 61, 62
#: Program register of a switch's rerun phase sequencer (above the sequencer's, below the
#: loader's): the configuration slot of the collective's phase 0 (its phase k is slot base + k),
#: so that collectives of different algorithms each select their own phases.
SLOT_BASE = 59
#: Program registers of an NPU of the packet fabric that runs a trace
#: (``hdl.designs.iteration.PacketTraceNpu``), between the engine's and the sequencer's, written
#: by the harness or by its program loader per collective: the header's phase slot, VC and flow
#: id, and the packets the NPU receives in one run of the collective (its depacketizer marks
#: the stream's end on the last of them; packets are numbered on from collective to collective).
PACKET_HEADER_REGS = {"phase": 52, "vc": 53, "flow": 54, "packets": 55}


def stage_flows_word(flows, flow_bits: int) -> int:
    """The ``flow`` header register of a staged packet trace NPU
    (:class:`hdl.designs.iteration.PacketTraceNpu`, ``staged``): stage s's destination in bits
    ``s * flow_bits`` up (``flows``: one flow id per engine stage). FredError for a flow id
    that does not fit its field or a word beyond the register's 32 bits."""
    flows = list(flows)
    if len(flows) * flow_bits > 32:
        raise FredError(f"{len(flows)} flow ids of {flow_bits} bits do not fit the 32-bit flow register")
    word = 0
    for s, flow in enumerate(flows):
        if not 0 <= flow < 1 << flow_bits:
            raise FredError(f"stage {s}'s flow id {flow} does not fit {flow_bits} bits")
        word |= flow << (s * flow_bits)
    return word


#: Program register of a traced I/O controller (``hdl.designs.iteration.TracedIoController``),
#: after its header's (:data:`PACKET_HEADER_REGS`), written by its program loader per I/O
#: collective: the stripe its packets carry (the striped I/O request's header field).
CONTROLLER_STRIPE_REG = 56
#: Program register of a packet trace NPU on a fabric with I/O controllers (its
#: ``WritePacer``'s divisor, after the loader's registers): the NPUs writing into the
#: controller this NPU's collective writes into, 0 not paced
#: (:func:`hdl.compiler.packet_fabric_program.write_paces`; docs/fabric_rtl.md, "Writers paced
#: to their controller"). Written by the harness or by the NPU's program loader per collective.
PACKET_PACE_REG = 63
#: Read registers a sequencer with a program loader adds after :data:`TRACE_READ`: cycles its
#: collective nodes waited for their program, the engines' bad and extra flits summed over
#: every run (an engine clears its own counters at each start).
LOADER_READ = ("load_stall", "run_errors")
_MAX_DELAY = DELAY_MASK
_RUNS = ("compute", "marker", "comm")
#: The I/O collectives of an exported trace, memory nodes (``mem-read`` / ``mem-write``) the
#: sequencer runs as collective nodes where the fabric has I/O controllers (``npu_trace(...,
#: io=True)``): ``io-load`` weights streamed in (every member receives the same bytes, striped
#: over the controllers), ``io-store`` gradients reduced out (every member's bytes summed into
#: the controllers' stripes), ``io-write`` / ``io-read`` an activation checkpoint written /
#: read back (every member its own bytes, striped over the controllers). The model's ops
#: (``sysmodel.collectives``).
TRACE_IO_OPS = ("io-load", "io-store", "io-write", "io-read")
_IO_KINDS = ("mem-read", "mem-write")


@dataclass(frozen=True)
class IoRequest:
    """One I/O collective of the trace as the controllers run it: ``op``
    (:data:`TRACE_IO_OPS`), ``groups`` (sorted ranks of each group at once, disjoint: the
    model's DP groups of the stage), ``controllers`` (the fabric's), ``stripe_flits`` per
    controller per group (the bytes per NPU of one run, in whole flits, rounded up to whole
    stripes: ``ceil(ceil(bytes / flit_bytes) / controllers)``, at least 1), ``label``.
    ``size_flits`` = ``stripe_flits x controllers``: what every NPU then receives or sends."""

    op: str
    groups: tuple[tuple[int, ...], ...]
    controllers: int
    stripe_flits: int
    label: str

    @property
    def size_flits(self) -> int:
        return self.stripe_flits * self.controllers

    def to_dict(self) -> dict:
        return {"op": self.op, "groups": [list(g) for g in self.groups], "controllers": self.controllers,
                "stripe_flits": self.stripe_flits, "size_flits": self.size_flits, "label": self.label}


@dataclass(frozen=True)
class NpuTrace:
    """One NPU's trace as the sequencer runs it: ``words`` (one per node, file order),
    ``node_ids`` and ``names`` (the trace's), ``categories`` (the traffic class of a collective
    node, else ``compute``), ``collective`` (the id of its first collective node, or None),
    ``collectives`` (the ids of all of them, file order)."""

    rank: int
    words: tuple[int, ...]
    node_ids: tuple[int, ...]
    names: tuple[str, ...]
    categories: tuple[str, ...]
    collective: int | None
    collectives: tuple[int, ...] = ()
    #: an overlapped trace (the nodes in issue order, with wait nodes: :data:`WAIT_BIT`)
    overlap: bool = False

    @property
    def compute_cycles(self) -> int:
        """Cycles of its compute nodes as the sequencer counts them (each at least 1)."""
        if self.overlap:      # a wait node's count is not cycles
            return sum(max(w & OVERLAP_DELAY_MASK, 1) for w in self.words if not w & (COLLECTIVE_BIT | WAIT_BIT))
        return sum(max(w & DELAY_MASK, 1) for w in self.words if not w & COLLECTIVE_BIT)


def _check_serial(rank: int, nodes) -> None:
    """Refuse a trace whose nodes are not a chain in file order (module docstring): a node
    waits for its dependencies and for the node before it on its queue (a queue runs its
    nodes one at a time in file order), and through them for every node before it."""
    for i, bits in enumerate(_ancestors(rank, nodes)):
        if i and not bits >> (i - 1) & 1:
            node, prev = nodes[i], nodes[i - 1]
            raise FredError(f"rank {rank}: node {node.id} ({node.name}) does not wait for node "
                            f"{prev.id} ({prev.name}): the two may overlap, and the circuit "
                            f"fabric's trace sequencer runs serialised traces only (export with "
                            f"--no-overlap and one pipeline stage)")


def _ancestors(rank: int, nodes, passed=frozenset()) -> list[int]:
    """Per node (file order) the bit set of the nodes it waits for, directly or through others:
    its dependencies and the node before it on its queue (a queue runs one node at a time in
    file order). A node of ``passed`` (positions) is never in a set: what waits for it waits
    for its own set. A dependency not before it in the file is an error."""
    position = {n.id: i for i, n in enumerate(nodes)}
    mine = [0 if i in passed else 1 << i for i in range(len(nodes))]
    ancestors: list[int] = []          # bit j: node j is an ancestor
    last_on_queue: dict = {}
    for i, node in enumerate(nodes):
        bits = 0
        for dep in node.deps:
            j = position.get(dep)
            if j is None or j >= i:
                raise FredError(f"rank {rank}: node {node.id} ({node.name}) depends on node {dep}, "
                                f"which is not before it in the trace")
            bits |= ancestors[j] | mine[j]
        if node.queue is not None:
            j = last_on_queue.get(node.queue)
            if j is not None:
                bits |= ancestors[j] | mine[j]
            last_on_queue[node.queue] = i
        ancestors.append(bits)
    return ancestors


def _is_collective(node) -> bool:
    return node.kind == "comm" or node.kind in _IO_KINDS


def _issue_order(rank: int, nodes) -> list:
    """``nodes`` in the order an overlapped sequencer takes them, with its wait nodes
    (:class:`_Wait`): the module docstring's "Overlapped traces". Refuses a trace whose lanes
    are not chains. A marker of a traffic class (a communication of no bytes, e.g. the model's
    weight stream of a layer without weights) is passed: it takes no time, and what waits for
    it waits for what it waits for."""
    passed = frozenset(i for i, n in enumerate(nodes) if n.kind == "marker" and n.category)
    ancestors = _ancestors(rank, nodes, passed)
    lanes: dict = {True: [], False: []}
    for i, node in enumerate(nodes):
        if i in passed:
            continue
        lane = lanes[_is_collective(node)]
        if lane and not ancestors[i] >> lane[-1] & 1:
            j = lane[-1]
            what = "collective" if _is_collective(node) else "compute"
            raise FredError(f"rank {rank}: node {node.id} ({node.name}) does not wait for node "
                            f"{nodes[j].id} ({nodes[j].name}): two {what} nodes may overlap, and the "
                            f"overlapped trace sequencer runs one {what} node at a time")
        lane.append(i)
    computes, collectives = lanes[False], lanes[True]
    order: list = []
    issued = 0                         # collectives in the order so far
    waited = 0                         # the count the node lane has waited for
    in_order = 0                       # bit j: node j is in the order

    def issue_ready():
        nonlocal issued, in_order
        while issued < len(collectives):
            k = collectives[issued]
            if ancestors[k] & ~in_order:      # a passed marker is in no set
                return
            order.append(nodes[k])
            in_order |= 1 << k
            issued += 1

    issue_ready()
    for i in computes:
        # the lane runs its collectives in order: waiting for the latest one node i waits for
        # (beyond those already waited for) waits for every one before it
        needed = next((n + 1 for n in range(issued - 1, waited - 1, -1) if ancestors[i] >> collectives[n] & 1),
                      waited)
        if needed > waited:
            order.append(_Wait(needed))
            waited = needed
        order.append(nodes[i])
        in_order |= 1 << i
        issue_ready()
    if issued < len(collectives):
        k = nodes[collectives[issued]]
        raise FredError(f"rank {rank}: collective node {k.id} ({k.name}) waits for a node after it")
    return order


@dataclass(frozen=True)
class _Wait:
    """An overlapped trace's wait node: until the collective lane has finished ``count``
    collectives (:data:`WAIT_BIT`); shown as a node of id -1 (:func:`npu_trace`)."""

    count: int
    id: int = -1
    name: str = "wait"
    kind: str = "wait"


def _word(rank: int, node, cycles: int, repeats: bool, io: bool = False, *, overlap: bool = False) -> int:
    if node.kind not in _RUNS and not (io and node.kind in _IO_KINDS):
        what = ("a pipeline stage's receive" if node.kind == "recv" else f"a {node.kind} node")
        raise FredError(f"rank {rank}: node {node.id} ({node.name}) is {what}; the trace "
                        f"sequencer runs compute, marker and collective nodes (one pipeline "
                        f"stage{', I/O nodes' if io else ', no I/O controllers'})")
    if node.kind in _IO_KINDS and node.op not in TRACE_IO_OPS:
        raise FredError(f"rank {rank}: node {node.id} ({node.name}) is a memory node of op "
                        f"{node.op!r}; the I/O controllers run {', '.join(TRACE_IO_OPS)}")
    if _is_collective(node):
        op = node.op if node.kind in _IO_KINDS else node.fred_op or node.op
        if node.kind == "comm" and op not in FABRIC_OPS:
            raise FredError(f"rank {rank}: node {node.id} ({node.name}) is a {op}; the fabric's "
                            f"engines run {', '.join(FABRIC_OPS)}")
        most = REPEAT_MASK if repeats else 1
        if node.repeat != int(node.repeat) or not 1 <= node.repeat <= most:
            raise FredError(f"rank {rank}: node {node.id} ({node.name}) repeats its collective "
                            f"{node.repeat:g} times; this fabric's trace sequencer runs 1..{most} "
                            f"whole runs of a collective")
        # a single run is the one-program sequencer's word (no repeat field)
        return COLLECTIVE_BIT | (int(node.repeat) if node.repeat > 1 else 0)
    most = OVERLAP_DELAY_MASK if overlap else _MAX_DELAY
    if not 0 <= cycles <= most:
        raise FredError(f"rank {rank}: node {node.id} ({node.name}) lasts {cycles} cycles; the "
                        f"sequencer counts 0..{most} (use a larger --scale)")
    return cycles


def npu_trace(rank: int, nodes, *, cycle_s: float, max_collectives: int = 1, io: bool = False,
              overlap: bool = False) -> NpuTrace:
    """The sequencer's trace of ``rank``'s ``nodes`` (file order) at a clock of ``cycle_s``
    seconds per cycle; refuses what the fabric cannot run (module docstring), among it more
    than ``max_collectives`` collective nodes (1: the circuit FRED fabric). ``io``: the fabric
    has I/O controllers; the trace's I/O memory nodes (:data:`TRACE_IO_OPS`) are collective
    nodes (category ``io``), run as the others: start, wait for the end, per repeat.
    ``overlap``: the trace of an overlapped sequencer ("Overlapped traces"): the nodes in
    issue order, a wait node (:data:`WAIT_BIT`) before each compute node that waits for a
    collective, markers of a traffic class passed (not in the trace)."""
    if not cycle_s > 0:
        raise FredError(f"cycle time must be positive, got {cycle_s!r}")
    nodes = list(nodes)
    if overlap:
        nodes = _issue_order(rank, nodes)
    else:
        _check_serial(rank, nodes)
    # compute cycles rounded on the running sum, so that rounding does not accumulate: the
    # k-th compute node ends at round(sum of the first k durations / cycle)
    delays, elapsed = [], 0.0
    for n in nodes:
        before = round(elapsed / cycle_s)
        if n.kind == "compute":
            elapsed += n.duration_s
        delays.append(round(elapsed / cycle_s) - before)
    words = tuple(WAIT_BIT | n.count if n.kind == "wait" else _word(rank, n, d, max_collectives > 1, io, overlap=overlap)
                  for n, d in zip(nodes, delays))
    collectives = [n.id for n, w in zip(nodes, words) if w & COLLECTIVE_BIT]
    if len(collectives) > max_collectives:
        raise FredError(f"rank {rank} has {len(collectives)} collective nodes "
                        f"({', '.join(map(str, collectives[:5]))}); this trace run holds "
                        f"{max_collectives} collective program(s) per NPU")
    return NpuTrace(rank=rank, words=words, node_ids=tuple(n.id for n in nodes),
                    names=tuple(n.name for n in nodes),
                    categories=tuple((n.category or "comm") if w & COLLECTIVE_BIT else
                                     "wait" if n.kind == "wait" else "compute" for n, w in zip(nodes, words)),
                    collective=collectives[0] if collectives else None, collectives=tuple(collectives),
                    overlap=overlap)


def trace_writes(trace: NpuTrace, depth: int) -> list[tuple[int, int]]:
    """(register, value) writes that load ``trace`` into a sequencer of ``depth`` nodes."""
    if len(trace.words) > depth:
        raise FredError(f"rank {trace.rank}: {len(trace.words)} nodes do not fit the sequencer's "
                        f"node memory of {depth}")
    return ([(TRACE_TABLE_ADDR, 0)] + [(TRACE_TABLE_DATA, w) for w in trace.words]
            + [(TRACE_NODES, len(trace.words))])


def collective_requests(ranks: dict, traces: dict, *, flit_bytes: int,
                        io_controllers: int = 0) -> list:
    """The fabric request of every collective of the traces, in file order: the k-th collective
    node must be the same node (id) at every NPU that has k or more (:func:`collective_request`
    of each; an I/O node's is an :class:`IoRequest` for ``io_controllers`` controllers)."""
    out = []
    for k in range(max((len(t.collectives) for t in traces.values()), default=0)):
        ids = {t.collectives[k] for t in traces.values() if len(t.collectives) > k}
        if len(ids) > 1:
            raise FredError(f"the NPUs' collective nodes number {k} differ "
                            f"({', '.join(map(str, sorted(ids)))}); the RTL runs one request at a time")
        node_id = ids.pop()
        if any(t.categories[t.node_ids.index(node_id)] == "io" for t in traces.values()
               if node_id in t.collectives):
            out.append(_io_request(ranks, traces, node_id, flit_bytes, io_controllers))
        else:
            out.append(_request(ranks, traces, node_id, flit_bytes))
    return out


def _agreed_op_and_flits(what: str, groups, ops: set, sizes: set, flit_bytes: int) -> tuple[str, int]:
    """The one op and size every NPU holding node ``what`` gives it, its groups (iterable of
    member tuples) disjoint; the size in whole flits, ``ceil(bytes / flit_bytes)`` (the model
    moves whole flits too)."""
    if len(ops) > 1 or len(sizes) > 1:
        raise FredError(f"{what}: the NPUs disagree on its op or size ({sorted(ops)}, {sorted(sizes)})")
    seen: set[int] = set()
    for members in groups:
        if seen & set(members):
            raise FredError(f"{what}: groups overlap ({sorted(groups)})")
        seen |= set(members)
    (op,), (size,) = ops, sizes
    return op, max(math.ceil(size / flit_bytes - 1e-9), 1)


def _io_request(ranks: dict, traces: dict, node_id: int, flit_bytes: int, controllers: int) -> IoRequest:
    """The :class:`IoRequest` of I/O node ``node_id`` (:func:`collective_requests`)."""
    if controllers < 1:
        raise FredError(f"trace node {node_id} is an I/O collective; the fabric has no I/O controllers")
    groups, ops, sizes = set(), set(), set()
    for rank, trace in traces.items():
        if node_id not in trace.collectives:
            continue
        node = next(n for n in ranks[rank] if n.id == node_id)
        if not node.group or rank not in node.group:
            raise FredError(f"rank {rank}: I/O node {node_id} ({node.name}) names no group holding the rank")
        groups.add(tuple(sorted(node.group)))
        ops.add(node.op)
        sizes.add(node.size / node.repeat)       # bytes x repeat in the export, as a collective's
    op, flits = _agreed_op_and_flits(f"I/O node {node_id}", groups, ops, sizes, flit_bytes)
    stripe = -(-flits // controllers)
    return IoRequest(op, tuple(sorted(groups)), controllers, stripe,
                     f"trace node {node_id} {op} of {len(groups)} group(s)")


def collective_request(ranks: dict, traces: dict, *, flit_bytes: int) -> FabricRequest | None:
    """The fabric request of the traces' collective (None if no NPU has one): for each rank
    holding it, its group (and root) from the node in ``ranks`` (rank -> nodes); the groups
    must be disjoint or equal (concurrent collectives of one op) and the bytes of one run (a
    repeated node holds bytes x repeat) the same. Size:
    whole flits, ``ceil(bytes / flit_bytes)`` (the model moves whole flits too)."""
    ids = {t.collective for t in traces.values() if t.collective is not None}
    if not ids:
        return None
    if len(ids) > 1:
        raise FredError(f"the NPUs' collective nodes differ ({', '.join(map(str, sorted(ids)))}); "
                        f"the circuit fabric runs one request at a time")
    return _request(ranks, traces, ids.pop(), flit_bytes)


def _request(ranks: dict, traces: dict, node_id: int, flit_bytes: int) -> FabricRequest:
    groups, ops, sizes = {}, set(), set()
    for rank, trace in traces.items():
        if node_id not in (trace.collectives or (trace.collective,)):
            continue
        node = next(n for n in ranks[rank] if n.id == node_id)
        members = tuple(sorted(node.group)) if node.group else None
        if not members or rank not in members and node.root != rank:
            raise FredError(f"rank {rank}: collective node {node_id} ({node.name}) names no group "
                            f"holding the rank")
        ops.add(node.fred_op or node.op)
        sizes.add(node.size / node.repeat)       # the export writes a repeated collective's bytes x repeat
        groups[members] = node.root
    op, flits = _agreed_op_and_flits(f"collective node {node_id}", groups, ops, sizes, flit_bytes)
    # FabricCollective's members: a multicast's destinations without its root, a reduce's
    # group with it, an all-reduce's group (no root)
    collectives = tuple(FabricCollective(op, tuple(m for m in members if m != root or op != "multicast"),
                                         root if op != "all-reduce" else None)
                        for members, root in sorted(groups.items(), key=lambda g: g[0]))
    return FabricRequest(op, collectives, flits, f"trace node {node_id} {op} of {len(collectives)} group(s)")


def loader_entries(programs: list[dict[int, list[tuple[int, int]]]], lanes: int, *,
                   deferred: frozenset = frozenset(), changes_only: bool = True) -> list[tuple[int, tuple]]:
    """One NPU's program-loader entries for its collectives in order: ``programs[k]`` maps a
    lane (the NPU's engine, e.g. the mesh's chunk) to the (register, value) writes of
    collective k. Only the writes that change a register are kept (every register starts at
    0; a collective that repeats the one before it loads nothing), two lanes written in the
    same entry. Writes to a register in ``deferred`` (an engine register that must not change
    while the engine, done, still runs its last program: the mesh engine's ``stages``) come
    last and are marked deferred. Returns ``(flags, lanes' (register, value) or None)``
    entries; bit 0 of ``flags``: the program's last entry (an empty program is one entry
    without writes), bit 1: deferred. ``changes_only=False`` keeps every write: a paged
    program port (the striped I/O NPU's, :data:`hdl.contracts.io_stripes.NPU_PAGE_REG`)
    reuses a register number on every page, so "unchanged" cannot be told from it."""
    state: dict = {}
    entries = []
    for k, program in enumerate(programs):
        bad = [lane for lane in program if not 0 <= lane < lanes]
        if bad:
            raise FredError(f"collective {k}: lanes {bad} outside 0..{lanes - 1}")
        now, later = [], []
        for lane in range(lanes):
            for reg, value in program.get(lane, []):
                if not changes_only or state.get((lane, reg), 0) != value:
                    state[lane, reg] = value
                    (later if reg in deferred else now).append((lane, reg, value))
        program_entries = []
        for group, flag in ((now, 0), (later, 2)):
            per_lane = [[(r, v) for ln, r, v in group if ln == lane] for lane in range(lanes)]
            for i in range(max((len(x) for x in per_lane), default=0)):
                program_entries.append([flag, tuple(x[i] if i < len(x) else None for x in per_lane)])
        if not program_entries:
            program_entries.append([0, (None,) * lanes])
        program_entries[-1][0] |= 1
        entries += [(flags, writes) for flags, writes in program_entries]
    return entries


def loader_writes(entries, lanes: int, depth: int) -> list[tuple[int, int]]:
    """(register, value) writes that load ``entries`` (:func:`loader_entries`) into a program
    loader of ``lanes`` lanes and ``depth`` entries: :data:`PROG_ADDR` 0, then per entry
    :data:`PROG_HEAD` and one :data:`PROG_VALUE` per lane."""
    if len(entries) > depth:
        raise FredError(f"{len(entries)} program entries do not fit the loader's memory of {depth}")
    out = [(PROG_ADDR, 0)]
    for flags, writes in entries:
        head = flags
        for lane, write in enumerate(writes):
            if write is not None:
                head |= (1 | write[0] << 1) << (2 + 7 * lane)
        out.append((PROG_HEAD, head))
        out += [(PROG_VALUE, 0 if write is None else write[1] & 0xFFFFFFFF) for write in writes]
    return out
