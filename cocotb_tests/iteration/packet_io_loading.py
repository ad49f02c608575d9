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
from hdl.contracts.packet import VC, PacketFormat
from hdl.contracts.trace_program import (CONTROLLER_STRIPE_REG, PACKET_HEADER_REGS, IoRequest, loader_entries,
                                         loader_writes, trace_writes)

__all__ = ["PACKET_IO_BUILT", "packet_io_programs", "packet_io_entries", "packet_io_writes"]

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
            packets = -(-step.flits // packet.packet_flits) if step.source is not None else 0
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
