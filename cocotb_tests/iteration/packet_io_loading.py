"""What the packet FRED fabric's I/O iteration loads (``hdl.designs.iteration.PacketIoIterationTop``;
docs/fabric_iteration.md, "The packet FRED fabric's I/O iteration"): per I/O collective of the
trace, the striped I/O request's program (Fred-A/C io-load: every controller's stripe on its
chain), and from it each NPU's and each controller's program-loader entries. Pure Python."""

from __future__ import annotations

from hdl.compiler.io_stripe_program import IoStripeProgram, io_stripe_program, npu_own, receiver_entries
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricSpec
from hdl.contracts.io_stripes import paged_writes, stripe_npu_words
from hdl.contracts.npu_engine import ENGINE_REGS, engine_writes
from hdl.contracts.packet import VC, PacketFormat, stream_packets
from hdl.contracts.trace_program import (CONTROLLER_STRIPE_REG, PACKET_HEADER_REGS, PROG_ADDR, PROG_HEAD, PROG_VALUE,
                                         TRACE_TABLE_ADDR, TRACE_TABLE_DATA, IoRequest, loader_entries,
                                         loader_writes, trace_writes)

__all__ = ["PACKET_IO_BUILT", "PACKET_IO_MEMORY_VARS", "packet_io_programs", "packet_io_entries", "packet_io_writes",
           "packet_io_bulk"]

#: The memories :func:`packet_io_bulk` fills directly, by their Verilog names (a loader's
#: ``entries``, a trace sequencer's ``table``; no other variable of the top has these names):
#: the build makes them public (``build_top_public_only(public_vars=...)``).
PACKET_IO_MEMORY_VARS = ("entries", "table")

#: The trace's I/O ops the packet fabric's I/O iteration runs, as the striped request's op
#: (weights in along the chains, gradients reduced out along them).
PACKET_IO_BUILT = {"io-load": "io-broadcast", "io-store": "io-reduce"}


def packet_io_programs(spec: FabricSpec, requests: list, *, seed: int = 0) -> list[IoStripeProgram]:
    """The striped I/O program of each request (the trace's collectives in order): io-load on
    the wafer is ``io_stripe_program(spec, "io-broadcast", size_flits)``, io-store
    ``io_stripe_program(spec, "io-reduce", size_flits)``. FredError, naming the first request
    the iteration top cannot run: a collective that is not an I/O node, an op not built (the
    spills), a group other than the wafer, an in-switch fabric (``io_stripe_program``'s
    refusal)."""
    wafer = (tuple(range(spec.npus)),)
    out, made = [], {}
    for request in requests:
        if not isinstance(request, IoRequest):
            raise FredError(f"{request.label}: the packet fabric's I/O iteration runs I/O collectives only "
                            f"(an {request.op} beside them is not built)")
        if request.op not in PACKET_IO_BUILT:
            raise FredError(f"{request.label}: {request.op} is not built on the packet fabric's I/O iteration "
                            f"(it runs {', '.join(PACKET_IO_BUILT)})")
        if request.groups != wafer:
            raise FredError(f"{request.label}: the striped I/O request streams to every NPU; the trace's groups "
                            f"{[len(g) for g in request.groups]} are not the wafer (use MP1)")
        if request.controllers != spec.io_controllers:
            raise FredError(f"{request.label}: {request.controllers} controllers, the fabric has {spec.io_controllers}")
        key = (request.op, request.size_flits)
        if key not in made:
            made[key] = io_stripe_program(spec, PACKET_IO_BUILT[request.op], request.size_flits, seed=seed)
        out.append(made[key])
    return out


def packet_io_entries(spec: FabricSpec, programs: list[IoStripeProgram], packet: PacketFormat, *,
                      seed: int = 0) -> tuple[dict[int, list], dict[int, list]]:
    """(per NPU rank, per controller k) program-loader entries
    (:func:`~hdl.contracts.trace_program.loader_entries`) for ``programs`` in order.

    An NPU's collective: its StripeNpu's receiver table, routes and header
    (:func:`~hdl.contracts.io_stripes.stripe_npu_words`, online phase, DP's VC), only the
    writes that change a register, with their page writes
    (:func:`~hdl.contracts.io_stripes.paged_writes`; the loader itself cannot tell pages apart:
    ``changes_only=False``). A controller's: its engine's program
    (one stage sending its stripe of its memory, or in io-store receiving and checking the
    stripe's sum, ``stripe_controller_engine``; ``stages``
    deferred to the collective, as on the other fabrics: a done engine whose stage count
    grows would move on into the new stages), its header (phase, VC, flow = its chain's entry
    NPU, the packets it receives: its stripe's in io-store) and its stripe, only the writes
    that change a register. An NPU's own part (its data weights, ``add``, the stripe it
    starts) in io-store: ``npu_own``."""
    from cocotb_tests.fabric.stripe_io_run import stripe_controller_engine
    npus = {}
    for r in range(spec.npus):
        writes, state = [], {}
        for p in programs:
            routes = {k: s.dest for k, s in p.steps[r].items() if s.dest is not None}
            words = stripe_npu_words(receiver_entries(p, r), routes, p.controllers, phase=packet.online_phase,
                                     vc=int(VC.DP), own=npu_own(p, r))
            writes.append({0: paged_writes(words, state)})
        npus[r] = loader_entries(writes, 1, changes_only=False)
    stages = frozenset({ENGINE_REGS.index("stages")})
    controllers = {}
    for k in range(spec.io_controllers):
        io = spec.npus + k
        writes = []
        for p in programs:
            step = p.steps[io][k]
            packets = stream_packets(step.flits, packet.packet_flits) if step.source is not None else 0
            header = {"phase": packet.online_phase, "vc": int(VC.DP), "flow": step.dest or 0, "packets": packets}
            writes.append({0: engine_writes(stripe_controller_engine(step, seed))
                           + [(PACKET_HEADER_REGS[n], v) for n, v in header.items()] + [(CONTROLLER_STRIPE_REG, k)]})
        controllers[k] = loader_entries(writes, 1, deferred=stages)
    return npus, controllers


def packet_io_writes(spec: FabricSpec, traces: dict, programs: list[IoStripeProgram], packet: PacketFormat, *,
                     nodes: int, npu_programs: int, controller_programs: int,
                     seed: int = 0) -> list[tuple[int, int, int]]:
    """``(unit, register, value)`` program-port writes of the whole iteration: every NPU's
    trace (``nodes`` node memory) and loader (``npu_programs`` entries), every controller's
    loader (``controller_programs``); FredError when one does not fit."""
    npus, controllers = packet_io_entries(spec, programs, packet, seed=seed)
    writes = []
    for r in range(spec.npus):
        writes += [(r, reg, v) for reg, v in loader_writes(npus[r], 1, npu_programs)]
        writes += [(r, reg, v) for reg, v in trace_writes(traces[r], nodes)]
    for k in range(spec.io_controllers):
        writes += [(spec.npus + k, reg, v) for reg, v in loader_writes(controllers[k], 1, controller_programs)]
    return writes


def packet_io_bulk(spec: FabricSpec, writes: list) -> tuple[list, list]:
    """``writes`` (:func:`packet_io_writes`) split into the words they store in the units'
    memories and the writes left: ``(memories, rest)``, ``memories`` a list of ``(path,
    {index: word})`` (path relative to the top: an NPU's loader entries and trace table, a
    controller's loader entries) and ``rest`` the register writes in order, each memory's fill
    counter set once to its count (``PROG_ADDR`` / ``TRACE_TABLE_ADDR`` with the count, where the
    port's writes set it to 0 and counted up).

    Replays the program port as the hardware takes it (:class:`~hdl.designs.iteration.program_loader.ProgramLoader`:
    ``PROG_ADDR`` sets the fill counter, ``PROG_HEAD`` the head, ``PROG_VALUE`` stores head |
    value << 9 (one lane) at the counter and counts; :class:`~hdl.designs.iteration.trace_sequencer.TraceSequencer`:
    ``TRACE_TABLE_ADDR`` sets its counter, ``TRACE_TABLE_DATA`` stores and counts), so loading the
    words into the memories and ``rest`` through the port leaves every register the run reads as
    the port alone would (the loader's head register keeps its reset value: it is read only while
    storing). Why: the port takes one write a cycle, and each cycle is a whole-fabric model
    evaluation -- GPT-3's 598,440 writes on the Fred-C wafer are 14 % of its run's cycles."""
    head_bits = 2 + 7      # ProgramLoader's head of one lane: final, deferred, write valid, register
    memories: dict = {}
    fills: dict = {}
    heads: dict = {}
    rest = []
    for unit, reg, value in writes:
        name = f"npu_{unit}" if unit < spec.npus else f"io_{unit - spec.npus}"
        npu = unit < spec.npus
        if reg == PROG_ADDR:
            fills[(unit, "loader")] = value
        elif reg == PROG_HEAD:
            heads[unit] = value & ((1 << head_bits) - 1)     # the head register's width
        elif reg == PROG_VALUE:
            path = f"{name}.sequencer.loader.entries" if npu else f"{name}.loader.entries"
            at = fills.get((unit, "loader"), 0)
            memories.setdefault((unit, "loader"), (path, {}))[1][at] = heads.get(unit, 0) | value << head_bits
            fills[(unit, "loader")] = at + 1
        elif reg == TRACE_TABLE_ADDR and npu:
            fills[(unit, "table")] = value
        elif reg == TRACE_TABLE_DATA and npu:
            path = f"{name}.sequencer.table"
            at = fills.get((unit, "table"), 0)
            memories.setdefault((unit, "table"), (path, {}))[1][at] = value
            fills[(unit, "table")] = at + 1
        else:
            rest.append((unit, reg, value))
    counters = [(unit, PROG_ADDR if kind == "loader" else TRACE_TABLE_ADDR, count)
                for (unit, kind), count in sorted(fills.items())]
    return [memories[key] for key in sorted(memories)], counters + rest
