"""``MeshFabricTop``: the 2D-mesh fabric of mesh routers with two NPU engines per NPU
(docs/mesh_rtl.md, "The mesh fabric"; the Verilog top ``fred_mesh_fabric``)."""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring

from hdl.contracts.errors import FredError
from hdl.contracts.flit import FlitFormat
from hdl.contracts.mesh import LOCAL, MESH_VCS, PORT_REGS, MeshFabricSpec
from hdl.contracts.mesh_partition import MeshPartition, part_problem
from hdl.contracts.npu_engine import ENGINE_REGS
from hdl.designs.fabric.fabric_top import (ENGINE_READ, GLOBAL_UNIT, PROG_REG_WIDTH,
                                           TAG_WIDTH, count_cycles, harness_inputs, harness_ports,
                                           read_register)
from hdl.designs.fabric.npu_engine import NpuEngine, connect_rx_between_collectives
from hdl.designs.fabric.cut import cut_ports as cut_ports_of, cut_slices

from .engine_port import EnginePort
from .injection_mux import InjectionMux
from .mesh_network import add_mesh, mesh_cut_fields

__all__ = ["MeshFabricTop", "MESH_GLOBAL_READ", "engine_unit", "sequencer_unit", "PORT_REG_BASE"]

#: Fabric-wide read registers (unit :data:`GLOBAL_UNIT`).
MESH_GLOBAL_READ = ("cycles", "all_done", "running", "protocol_error")
#: Program register address of the engine port's first register (after the engine's).
PORT_REG_BASE = len(ENGINE_REGS)
assert PORT_REG_BASE + len(PORT_REGS) <= 1 << PROG_REG_WIDTH


def engine_unit(rank: int, chunk: int) -> int:
    """Program / read unit of NPU ``rank``'s engine for ``chunk`` (0: VC 0, 1: VC 1)."""
    return rank * MESH_VCS + chunk


def sequencer_unit(spec: MeshFabricSpec, rank: int) -> int:
    """Program / read unit of NPU ``rank``'s sequencer (``MeshFabricTop(..., sequencer=...)``):
    after every engine's unit (an engine's registers fill its unit's 6-bit space)."""
    return engine_unit(spec.npus, 0) + rank


class MeshFabricTop(wiring.Component):
    """``spec.rows`` x ``spec.cols`` :class:`MeshRouter` s joined by :class:`MeshWire` s
    (:func:`hdl.designs.mesh.mesh_network.add_mesh`), and at
    each router's local port two :class:`NpuEngine` s (chunk 0 on VC 0 / X-Y, chunk 1 on VC 1
    / Y-X), each behind an :class:`EnginePort`, into the router through an
    :class:`InjectionMux`.

    Harness ports as ``fred_fabric``'s (:class:`hdl.designs.fabric.FabricTop`), without the
    switch configuration port: ``clk`` (power-on reset for :data:`POR_CYCLES` cycles),
    ``start``, ``prog_we/prog_unit/prog_reg/prog_data`` (unit :func:`engine_unit`; registers
    ``ENGINE_REGS`` then :data:`PORT_REGS` from :data:`PORT_REG_BASE`), ``rd_unit/rd_reg`` ->
    ``rd_data`` (``ENGINE_READ`` per engine unit; :data:`MESH_GLOBAL_READ` at
    :data:`GLOBAL_UNIT`), ``all_done``, ``cycles`` (from the cycle after ``start`` is seen to
    every engine done). ``sequencer`` (optional): a factory of a component that starts an
    NPU's two engines instead of ``start`` (:class:`hdl.designs.iteration.TraceSequencer`'s
    members ``start``, ``we/waddr/wdata``, ``engine_start``, ``engine_done`` -- both engines
    done --, ``done`` and ``read_names``; with ``lane_we/lane_waddr/lane_wdata`` it also writes
    the engines' programs, lane = chunk, and with ``engine_errors`` it sees both engines' bad
    and extra flits), one per NPU at unit :func:`sequencer_unit`; ``cycles`` then runs until
    every sequencer is done. ``protocol_error``: some router's ``overflow`` or ``credit_error``,
    or some engine port's ``overflow`` (must stay 0).

    Edge routers' outward ports are unconnected: no flit enters there and no credit returns
    (dimension-order routes between NPUs never leave the mesh).

    One part of a cut mesh (``partition``, a :class:`~hdl.contracts.mesh_partition.MeshPartition`
    of ``spec``, and ``part``; the lock-step simulator, ``eda/fabric/lockstep.py``): only the
    part's routers and the NPUs at them; a wire to or from the other part keeps its flit or
    credit registers here and the rest goes through the ports ``cut_out`` / ``cut_in``
    (:meth:`cut_fields`). The harness ports are the same; a unit of the other part ignores
    writes and reads 0, and ``all_done`` / ``cycles`` / ``protocol_error`` cover the part's own
    routers and engines.
    """

    def __init__(self, spec: MeshFabricSpec, *, sequencer=None, partition: MeshPartition | None = None,
                 part: int | None = None):
        problem = self._check(spec, sequencer, partition, part)
        if problem:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(problem)
        self.spec, self.sequencer = spec, sequencer
        self.partition, self.part = partition, part
        self.engine_flit = FlitFormat(dtype=spec.dtype, lanes=spec.engine_lanes, tag_width=TAG_WIDTH)
        cut_ports = cut_ports_of(self.cut_fields()) if partition is not None else {}
        super().__init__({**cut_ports, **harness_ports()})

    @staticmethod
    def _check(spec, sequencer, partition, part) -> str:
        """What is wrong with these parameters ("" if nothing)."""
        if not isinstance(spec, MeshFabricSpec):
            return f"MeshFabricTop needs a MeshFabricSpec, got {spec!r}"
        last_unit = sequencer_unit(spec, spec.npus - 1) if sequencer is not None else engine_unit(spec.npus, 0)
        if last_unit >= GLOBAL_UNIT + (sequencer is None):
            return f"a {spec.rows} x {spec.cols} mesh has more engines than program units"
        return part_problem("MeshFabricTop", spec, partition, part)

    def cut_fields(self) -> list[tuple[str, str, int]]:
        """This part's cut signals, LSB first: ``(bus, name, width)``, bus ``cut_out`` or
        ``cut_in``: the cut wires' (:func:`~.mesh_network.mesh_cut_fields`)."""
        return mesh_cut_fields(self.partition, self.part)

    def _mine(self, rank: int) -> bool:
        return self.partition is None or self.partition.npu_part(rank) == self.part

    def elaborate(self, platform) -> Module:
        m = Module()
        start, prog_we, prog_unit, prog_reg, prog_data, rd_unit, rd_reg = harness_inputs(m, self)
        spec = self.spec
        if self.partition is None:
            routers, errors = add_mesh(m, spec)
        else:
            routers, errors = add_mesh(m, spec, partition=self.partition, part=self.part,
                                       cut=cut_slices(self, self.cut_fields()))
        engines, sequencers, ranked = {}, {}, {}
        for rank in range(spec.npus):
            if not self._mine(rank):
                continue
            router = routers[spec.position(rank)]
            engine_start, seq = start, None
            if self.sequencer is not None:
                seq = sequencers[sequencer_unit(spec, rank)] = ranked[rank] = m.submodules[f"seq_{rank}"] = \
                    self.sequencer()
                m.d.comb += [seq.start.eq(start), seq.we.eq(prog_we & (prog_unit == sequencer_unit(spec, rank))),
                             seq.waddr.eq(prog_reg), seq.wdata.eq(prog_data)]
                engine_start = seq.engine_start
            mux = m.submodules[f"inject_{rank}"] = InjectionMux(flit=spec.flit, depth=spec.depth)
            m.d.comb += [router.i[LOCAL].valid.eq(mux.o.valid), router.i[LOCAL].payload.eq(mux.o.payload),
                         mux.credit.eq(router.i_credit[LOCAL])]
            for chunk in range(MESH_VCS):
                unit = engine_unit(rank, chunk)
                engine = m.submodules[f"npu_{rank}_{chunk}"] = NpuEngine(self.engine_flit, buffer=spec.engine_buffer)
                port = m.submodules[f"port_{rank}_{chunk}"] = EnginePort(spec=spec, vc=chunk,
                                                                        flit=self.engine_flit)
                engines[unit] = engine
                write, reg, data = prog_we & (prog_unit == unit), prog_reg, prog_data
                if hasattr(seq, "lane_we"):     # the sequencer loads programs (lane = chunk)
                    mine = seq.lane_we[chunk]
                    write = write | mine
                    reg = Mux(mine, seq.lane_waddr[6 * chunk:6 * (chunk + 1)], prog_reg)
                    data = Mux(mine, seq.lane_wdata[32 * chunk:32 * (chunk + 1)], prog_data)
                m.d.comb += [
                    engine.start.eq(engine_start), port.start.eq(engine_start),
                    engine.we.eq(write & (reg < PORT_REG_BASE)),
                    engine.waddr.eq(reg), engine.wdata.eq(data),
                    port.we.eq(write & (reg >= PORT_REG_BASE)),
                    port.waddr.eq(reg - PORT_REG_BASE), port.wdata.eq(data),
                    port.eject.valid.eq(router.o[LOCAL].valid & (router.o[LOCAL].payload.vc == chunk)),
                    port.eject.payload.eq(router.o[LOCAL].payload),
                    router.o_credit[LOCAL][chunk].eq(port.credit),
                ]
                wiring.connect(m, engine.tx, port.tx)
                if seq is None:
                    wiring.connect(m, port.rx, engine.rx)
                else:       # several collectives in turn: the next one's flits wait for it
                    connect_rx_between_collectives(m, port.rx, engine, seq.engine_running, seq.done)
                wiring.connect(m, port.o, mux.i[chunk])
                errors.append(port.overflow)
            if self.sequencer is not None:
                pair = [engines[engine_unit(rank, c)] for c in range(MESH_VCS)]
                m.d.comb += seq.engine_done.eq(pair[0].done & pair[1].done)
                if hasattr(seq, "engine_errors"):
                    m.d.comb += seq.engine_errors.eq(sum(e.errors + e.extra for e in pair))
        self.coordinate(m, ranked)
        self._counters(m, engines, sequencers, errors, start, rd_unit, rd_reg)
        return m

    def coordinate(self, m: Module, sequencers: dict) -> None:
        """Logic between the NPUs' sequencers (``{rank: sequencer}``), e.g. the iteration's
        barrier per collective run (``hdl.designs.iteration.MeshIterationTop``); none here."""
        return None

    def _counters(self, m, engines, sequencers, errors, start, rd_unit, rd_reg):
        all_done, running, protocol_error = Signal(), Signal(), Signal()
        finishers = sequencers or engines
        m.d.comb += [all_done.eq(running & (sum(e.done for e in finishers.values()) == len(finishers))),
                     self.all_done.eq(all_done)]
        with m.If(sum(errors) != 0):
            m.d.sync += protocol_error.eq(1)
        count_cycles(m, start, running, all_done, self.cycles)
        with m.Switch(rd_unit):
            for unit, engine in engines.items():
                with m.Case(unit):
                    read_register(m, rd_reg, self.rd_data, [getattr(engine, n) for n in ENGINE_READ])
            for unit, seq in sequencers.items():
                with m.Case(unit):
                    read_register(m, rd_reg, self.rd_data, [getattr(seq, n) for n in seq.read_names])
            with m.Case(GLOBAL_UNIT):
                read_register(m, rd_reg, self.rd_data, [self.cycles, all_done, running, protocol_error])
