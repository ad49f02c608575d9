"""The fabric tops whose NPUs run iteration traces (docs/fabric_iteration.md): the circuit FRED
fabric, the packet FRED fabric and the 2D mesh."""

from __future__ import annotations

from functools import partial

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricSpec
from hdl.contracts.mesh import MESH_VCS, MeshFabricSpec
from hdl.designs.fabric.fabric_top import FabricTop

from .loading_sequencer import LoadingTraceSequencer
from .mesh_iteration_top import MeshIterationTop
from .packet_iteration_top import PacketIterationTop
from .packet_trace_npu import PacketTraceNpu
from .rerun_phase_sequencer import RerunPhaseSequencer
from .trace_npu import TraceNpu

__all__ = ["iteration_fabric_top", "iteration_packet_top", "iteration_mesh_top"]


def iteration_fabric_top(spec: FabricSpec, *, depth: int, programs: int | None = None,
                         switch_programs: int | None = None, overlap: bool = False,
                         partition=None, part: int | None = None) -> FabricTop:
    """:class:`FabricTop` of ``spec`` with a :class:`TraceNpu` of ``depth`` trace nodes at every
    NPU port: the same switches, links, phase sequencers, harness ports and cycle counter
    (``cycles`` ends when every NPU's trace is done). Several collectives per NPU:
    ``programs`` engine-program entries per NPU and a :class:`RerunPhaseSequencer` of
    ``switch_programs`` entries per switch (both or neither). ``overlap`` (default False: built
    as before): the NPUs run compute under collectives (:class:`TraceNpu`'s). ``partition`` and
    ``part`` (both or neither): one part of the fabric cut for the lock-step simulator, as
    :class:`FabricTop`'s (the trace NPUs only talk to their own switch ports, so the cut is
    the collective fabric's: uplinks only)."""
    if (programs is None) != (switch_programs is None):
        raise FredError("give both programs and switch_programs (several collectives) or neither")
    cut = {"partition": partition, "part": part}
    if programs is None:
        return FabricTop(spec, npu=partial(TraceNpu, depth=depth, overlap=overlap), **cut)
    return FabricTop(spec, npu=partial(TraceNpu, depth=depth, programs=programs, overlap=overlap),
                     sequencer=partial(RerunPhaseSequencer, programs=switch_programs), **cut)


def iteration_packet_top(spec: FabricSpec, *, depth: int, programs: int, online: bool = False,
                         staged: bool = False, order_entries: int | None = None,
                         overlap: bool = False, partition=None, part: int | None = None) -> PacketIterationTop:
    """:class:`PacketIterationTop` (a ``PacketFabricTop``) of ``spec`` with a :class:`PacketTraceNpu`
    of ``depth`` trace nodes and ``programs`` program-loader entries at every NPU port: the
    same packet switches (header
    mode; ``online``: endpoint algorithms' unicasts routed online), links, harness ports and
    cycle counter (``cycles`` ends when every NPU's trace is done). The switches need nothing
    per collective: the phases of every collective sit side by side in their slots, loaded
    once, and each NPU's headers select them. On a fabric with I/O controllers every NPU
    paces its writes into a controller (:class:`PacketTraceNpu`'s ``io_rate``, the fabric's
    controllers' rate; as :class:`PacketFabricTop`'s own NPUs). A barrier per collective run
    (:class:`~.collective_barrier.CollectiveBarrier`): no NPU starts a run before every NPU
    has finished the run before. ``staged`` (default False: built as before): the NPUs run
    multi-stage programs (the hierarchical all-reduce), each stage to its own destination,
    with a barrier per stage (:class:`PacketTraceNpu`'s ``staged``). ``order_entries`` (default
    None: one per slot, built as before): the switches' phase-order depth, for an iteration whose
    ordered runs need more entries than the slots (``PacketFabricTop(order_entries=)``).
    ``overlap`` (default False: built as before): the NPUs run compute under collectives
    (:class:`PacketTraceNpu`'s). ``partition`` and ``part`` (both or neither): one part of the
    fabric cut at its uplinks for the lock-step simulator (the barriers split across the cut)."""
    io_rate = spec.io_rate if spec.io_controllers else None
    return PacketIterationTop(spec, online=online, order_entries=order_entries, partition=partition, part=part,
                              npu=partial(PacketTraceNpu, nodes=depth, programs=programs,
                                          io_rate=io_rate, staged=staged, overlap=overlap))


def iteration_mesh_top(spec: MeshFabricSpec, *, depth: int, programs: int, overlap: bool = False,
                       partition=None, part: int | None = None) -> MeshIterationTop:
    """:class:`MeshIterationTop` (a ``MeshFabricTop``) of ``spec`` with a :class:`LoadingTraceSequencer` of ``depth`` trace
    nodes and ``programs`` program entries per NPU, starting its two engines (chunk 0 on VC 0,
    chunk 1 on VC 1; a collective node ends when both are done) and writing their programs
    (lane = chunk); its registers and node times at unit
    :func:`hdl.designs.mesh.mesh_fabric_top.sequencer_unit`. Routers, wires, engine ports and
    the cycle counter are the mesh fabric's. A barrier per collective run
    (:class:`~.collective_barrier.CollectiveBarrier`): no NPU starts a run before every NPU
    has finished the run before. ``overlap`` (default False: built as before): the sequencers
    run compute under collectives (:class:`~.trace_sequencer.TraceSequencer`'s). ``partition``
    and ``part`` (both or neither): one part of the mesh cut between two columns for the
    lock-step simulator (``hdl.contracts.mesh_partition``; the barrier split across the cut)."""
    return MeshIterationTop(spec, sequencer=partial(LoadingTraceSequencer, depth=depth, programs=programs,
                                                    lanes=MESH_VCS, barrier=True, overlap=overlap),
                            partition=partition, part=part)
