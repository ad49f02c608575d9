"""Loading Fred-B/D's striped I/O request, served as shared stored flows, into a packet fabric
built for it (``PacketFabricTop(phases=, shared_flows=C, npu=StripeNpu(key="flow"))``,
docs/fabric_rtl.md, "Fred-B/D, the shared stored flows"; the slots per switch, and so the
header's phase width, from the program: Fred-B 8 slots, Fred-D 9 and a 4-bit phase,
:func:`~hdl.compiler.io_stripe_shared.fabric_shared_phases`): every switch's slots (one per distinct tree there),
flow-port entries and shared table (stripe -> slot), every NPU's receiver per stripe and every
controller's engine and header. The judgement of a run is the chains' (``judge_stripe_io``).

``io-broadcast`` (weight streaming): the NPUs only receive (:class:`StripeNpu`, ``key="flow"``).
``io-reduce`` (gradient reduce-out): the NPUs only send, their own data of every stripe in
:func:`~hdl.compiler.io_stripe_trees.home_late_order` (:class:`TreeStripeNpu`: their L1's own
stripes late by :func:`~hdl.compiler.io_stripe_trees.home_delay`), the switches
add, each controller checks its stripe's sum."""

from __future__ import annotations

from functools import partial

from cocotb_tests.fabric.stripe_io_run import controller_last_seq, run_striped_top, stripe_controller_engine
from hdl.compiler.io_stripe_program import IoStripeProgram, npu_own, receiver_entries
from hdl.compiler.io_stripe_shared import fabric_shared_phases, fabric_shared_tables
from hdl.compiler.io_stripe_trees import home_delay, home_stripes
from hdl.contracts.errors import FredError
from hdl.contracts.io_stripes import stripe_npu_writes, tree_npu_writes
from hdl.contracts.npu_engine import engine_writes
from hdl.contracts.packet import VC
from hdl.designs.fabric.packet_fabric_top import FLOW_PORT_REGS, PACKET_REGS, SHARED_REG, PacketFabricTop
from hdl.designs.fabric.stripe_npu import StripeNpu
from hdl.designs.fabric.tree_stripe_npu import TreeStripeNpu

__all__ = ["shared_io_top", "shared_top_key", "shared_io_load", "run_shared_io"]


def shared_io_top(spec, program: IoStripeProgram, *, packet_flits: int = 8, depth: int | None = None,
                  phases: int | None = None) -> PacketFabricTop:
    """The packet fabric of ``spec`` whose switches serve ``program.controllers`` flow ids as
    shared stored flows (in their last slot), at every NPU port a :class:`StripeNpu` keyed by
    the header's flow (io-broadcast) or a :class:`TreeStripeNpu` (io-reduce). Its switches store
    the slots the program's trees need (:func:`fabric_shared_phases`: the default 8 where they
    fit, so Fred-B's top is as before; 9 on Fred-D's wafer, whose header's phase field is then
    4 bits wide); ``phases`` (default None: those) stores more, the shared phase still the last
    (a test of the wider header on a small fabric; too few fail at :func:`shared_io_load`,
    naming the switch). io-reduce's switches hand a tree's lanes over behind its operands
    entered in lock step (``PacketFabricTop(shared_lockstep=True)``; docs/switch.md, "Shared
    stored flows")."""
    npu = (partial(StripeNpu, stripes=program.controllers, key="flow") if program.op == "io-broadcast"
           else partial(TreeStripeNpu, stripes=program.controllers))
    phases = fabric_shared_phases(spec, program.op) if phases is None else phases
    # the reduce-out's trees all reduce: their lanes are handed over behind when their
    # operands enter in lock step (io-broadcast's never reduce: its top as before)
    return PacketFabricTop(spec, phases=phases, packet_flits=packet_flits, depth=depth,
                           shared_flows=program.controllers, npu=npu,
                           shared_lockstep=program.op == "io-reduce")


def shared_top_key(spec, program: IoStripeProgram, *, packet_flits: int = 8, depth: int | None = None) -> tuple:
    """What :func:`shared_io_top`'s Verilog depends on: the fabric's hardware, the shared flows
    (controllers), the NPUs' kind and the slots per switch (both by the op: receivers or tree
    senders; :func:`fabric_shared_phases`), the packet length and the buffers' depth; not the
    size (loaded through the ports)."""
    from cocotb_tests.fabric.run import hardware_key
    return ("shared", hardware_key(spec), program.controllers, program.op, packet_flits, depth)


def shared_io_load(spec, program: IoStripeProgram, top: PacketFabricTop, *, seed: int = 0,
                   delay: int | None = None) -> dict:
    """``config``: ``[switch, slot, last, word]`` of every switch's trees (slot k: its k-th
    distinct tree, :func:`~hdl.compiler.io_stripe_shared.fabric_shared_tables`); ``writes``:
    ``[unit, register, value]``: every switch's flow-port entries (``FLOW_PORT_REGS``) and
    shared table (``SHARED_REG``, stripe -> slot), every NPU's receiver (the stripes it
    receives, keyed by flow id = stripe; it forwards nothing) or sender (io-reduce: its
    weights, the stripes and their flits), every controller's engine and header (the shared
    phase, DP, flow id = its stripe). io-reduce's NPUs send their L1's own stripes ``delay``
    places late in the one packet order (:func:`~hdl.compiler.io_stripe_trees.home_late_order`;
    default None: the largest the top's input buffers keep deadlock-free,
    :func:`~hdl.compiler.io_stripe_trees.home_delay`; 0: the one order). FredError for a top
    without the shared flows."""
    if top.shared_phase is None or top.shared_flows < program.controllers:
        raise FredError(f"the fabric top serves {top.shared_flows} shared flow ids; the program's "
                        f"{program.controllers} stripes need one each (PacketFabricTop(shared_flows=))")
    phase = top.shared_phase
    config, writes = [], []
    if delay is None:
        delay = (home_delay(spec, program.stripe_flits, top.packet.packet_flits, top.depth)
                 if program.op == "io-reduce" else 0)
    for s, tables in enumerate(fabric_shared_tables(spec, program.op, top.phases)):
        unit = spec.endpoints + s
        for k, slot_config in enumerate(tables.configs):
            words = slot_config.encode(32)
            config += [[s, k, int(i == len(words) - 1), word] for i, word in enumerate(words)]
        for k, n, partners, outputs in tables.flow_ports:
            writes += [[unit, FLOW_PORT_REGS["partners"], partners], [unit, FLOW_PORT_REGS["outputs"], outputs],
                       [unit, FLOW_PORT_REGS["entry"], k << 8 | n]]
        writes += [[unit, SHARED_REG, 1 << 16 | slot << 8 | stripe]
                   for stripe, slot in tables.stripe_slots.items()]
    for r in range(spec.npus):
        if program.op == "io-broadcast":
            words = stripe_npu_writes(receiver_entries(program, r), {}, program.controllers,
                                      phase=phase, vc=int(VC.DP), own=npu_own(program, r))
        else:
            own = program.steps[r][0]
            words = tree_npu_writes(ws=own.ws, hs=own.hs, stripes=program.controllers,
                                    stripe_flits=program.stripe_flits, phase=phase, vc=int(VC.DP),
                                    home=home_stripes(spec, spec.port_of(r)[0]), delay=delay)
        writes += [[r, reg, value] for reg, value in words]
    for k in range(program.controllers):
        io = spec.npus + k
        step = program.steps[io][k]
        writes += [[io, reg, value] for reg, value in engine_writes(stripe_controller_engine(step, seed))]
        header = {"phase": phase, "vc": int(VC.DP), "flow": k,
                  "last_seq": controller_last_seq(step, top.packet), "delay": 0}
        writes += [[io, PACKET_REGS[name], header[name]] for name in PACKET_REGS]
    return {"config": config, "writes": writes}


def run_shared_io(spec, program: IoStripeProgram, *, watchdog_cycles: int | None = None) -> dict:
    """``program`` on the packet fabric of ``spec`` with shared stored flows under Verilator
    (:func:`~cocotb_tests.fabric.stripe_io_run.run_striped_top`: one model, the cocotb bench);
    the result of :func:`~cocotb_tests.fabric.stripe_io_run.run_stripe_io`."""
    top = shared_io_top(spec, program)
    load = shared_io_load(spec, program, top)
    return run_striped_top(spec, program, top, load["config"], load["writes"],
                           watchdog_cycles=watchdog_cycles, name="shared-io",
                           top_key=shared_top_key(spec, program))
