"""``MeshIoIterationTop``: the mesh with its edge I/O controllers and a trace sequencer per NPU
whose collective nodes are weight streaming (``io-load``) and gradient reduce-out
(``io-store``) (docs/fabric_iteration.md, "Weight streaming")."""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring

from hdl.compiler.mesh_io_program import neighbour, tree_children, tree_parents
from hdl.contracts.errors import FredError
from hdl.contracts.mesh import LOCAL, MESH_VCS
from hdl.contracts.mesh_io import SEQ_BITS, MeshIoSpec
from hdl.designs.fabric.fabric_top import (GLOBAL_UNIT, count_cycles, harness_inputs,
                                           harness_ports, read_register)
from hdl.designs.mesh.io_checker import IoChecker
from hdl.designs.mesh.mesh_io_store_top import add_store_sinks, tree_share
from hdl.designs.mesh.mesh_io_top import _link, add_io_controllers, check_io_top_spec, controller_unit
from hdl.designs.mesh.mesh_network import add_mesh
from hdl.designs.mesh.reduce_forwarder import ReduceForwarder
from hdl.designs.mesh.tree_forwarder import TreeForwarder

from .loading_sequencer import LoadingTraceSequencer

__all__ = ["MeshIoIterationTop", "IO_NODE_REGS", "IO_OPS_OF_NODE", "IO_ITERATION_GLOBAL_READ",
           "IO_ITERATION_CONTROLLER_READ"]

#: Program registers of an NPU's I/O unit (unit = rank), written by its sequencer's loader per
#: I/O collective (or by the harness): the op (:data:`IO_OPS_OF_NODE` index), the stripe per
#: controller, the trees (``hdl.contracts.mesh_io.IO_MODES`` index).
IO_NODE_REGS = {"op": 0, "stripe": 1, "mode": 2}
#: The I/O ops this top runs, in the order of the ``op`` register.
IO_OPS_OF_NODE = ("io-load", "io-store")
#: Fabric-wide read registers (``GLOBAL_UNIT``): ``protocol_error`` as the I/O tops', plus
#: ``mismatch`` (the NPUs' I/O registers differed at a collective's start), the load checkers'
#: bad flits summed over every collective, and the I/O collectives run.
IO_ITERATION_GLOBAL_READ = ("cycles", "all_done", "running", "protocol_error", "mismatch",
                            "load_errors", "collectives")
#: A controller unit's read registers: its store checker's bad flits summed over every
#: io-store, and the flits it received in all.
IO_ITERATION_CONTROLLER_READ = ("store_errors", "store_received")


class MeshIoIterationTop(wiring.Component):
    """The routers of ``spec.mesh`` with ``spec.controllers`` controllers on the edge (an
    :class:`IoController` into, and a store checker out of, each one's router port), and at
    every NPU a :class:`LoadingTraceSequencer` (``depth`` nodes, ``programs`` loader entries,
    one lane: the I/O registers :data:`IO_NODE_REGS`), a :class:`TreeForwarder` and an
    :class:`IoChecker` (io-load) and a :class:`ReduceForwarder` (io-store, ``max_stripe`` flits
    per tree) on the router's local port.

    One I/O collective at a time, started as the model starts its task: when every NPU's
    sequencer has reached it (raised its engine start), every NPU's unit of the op and every
    controller start together (the op, stripe and mode latched from NPU 0's registers; the
    others must hold the same, else ``mismatch``); it ends for every NPU when every unit and
    controller of the op is done (io-load: every checker complete, every forwarder and
    controller done; io-store: every controller's checker complete, every reducer idle), and
    each NPU's node sees its engine done from then until its own next start. Between the two,
    no flit of another collective is in flight, so the local port is muxed by the op; the local
    input's credits, which return a few cycles after a flit left, go to the unit that spent
    them (a count per VC of the load forwarder's credits still owed).

    Harness ports as ``fred_mesh_io``'s: program unit r < npus is NPU r (registers
    :data:`IO_NODE_REGS`, the sequencer's and its loader's); read unit r the sequencer's
    ``read_names``; ``controller_unit(spec, k)`` :data:`IO_ITERATION_CONTROLLER_READ`;
    ``GLOBAL_UNIT`` :data:`IO_ITERATION_GLOBAL_READ`. ``all_done``: every sequencer done;
    ``cycles`` from the cycle after ``start`` to it.

    Latency beyond the units': 1 cycle from the last NPU's engine start to the units' start, 1
    from the units' last done to the NPUs' engine done (the sequencers' nodes end the cycle
    after); the end is looked for from the second cycle after the units' start (their outputs
    are then those of the new run).
    """

    def __init__(self, spec: MeshIoSpec, *, depth: int, programs: int, max_stripe: int = 256):
        check_io_top_spec("MeshIoIterationTop", spec)
        if spec.mesh.dtype != "int32":
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(f"MeshIoIterationTop runs int32 meshes, got {spec.mesh.dtype}")
        self.spec, self.depth, self.programs, self.max_stripe = spec, depth, programs, max_stripe
        super().__init__(harness_ports())

    def elaborate(self, platform) -> Module:
        m = Module()
        start, prog_we, prog_unit, prog_reg, prog_data, rd_unit, rd_reg = harness_inputs(m, self)
        spec, mesh = self.spec, self.spec.mesh
        routers, errors = add_mesh(m, mesh)
        seqs, regs = self._sequencers(m, start, prog_we, prog_unit, prog_reg, prog_data)
        c = _Collective(m, seqs, regs)
        shares = [tree_share(m, c.store_stripe, c.store_mode, k, vc) for k in range(spec.controllers) for vc in (0, 1)]
        load_start, store_start = c.unit_start & (c.op == 0), c.unit_start & (c.op == 1)
        controllers = add_io_controllers(m, spec, routers, errors, load_start, c.stripe, c.mode, lambda k: 0)
        sinks = add_store_sinks(m, spec, routers, errors, store_start, shares)
        load_done, store_done, load_errors = self._npus(m, routers, errors, c, shares, load_start, store_start)
        m.d.comb += c.units_done.eq(Mux(c.op == 0, load_done & _all(x.done for x in controllers),
                                        store_done & _all(s.complete for s in sinks)))
        self._counters(m, seqs, sinks, c, errors, load_errors, start, rd_unit, rd_reg)
        return m

    def _sequencers(self, m, start, prog_we, prog_unit, prog_reg, prog_data):
        """Each NPU's sequencer and its I/O registers (written by its loader or the harness)."""
        seqs, regs = [], []
        for rank in range(self.spec.mesh.npus):
            seq = m.submodules[f"seq_{rank}"] = LoadingTraceSequencer(depth=self.depth, programs=self.programs,
                                                                      lanes=1)
            mine = prog_we & (prog_unit == rank)
            m.d.comb += [seq.start.eq(start), seq.we.eq(mine), seq.waddr.eq(prog_reg), seq.wdata.eq(prog_data),
                         seq.engine_errors.eq(0)]
            write = mine | seq.lane_we[0]
            reg = Mux(seq.lane_we[0], seq.lane_waddr[:6], prog_reg)
            data = Mux(seq.lane_we[0], seq.lane_wdata[:32], prog_data)
            values = {name: Signal(width, name=f"{name}_{rank}")
                      for name, width in (("op", 1), ("stripe", SEQ_BITS), ("mode", 2))}
            for name, address in IO_NODE_REGS.items():
                with m.If(write & (reg == address)):
                    m.d.sync += values[name].eq(data)
            seqs.append(seq)
            regs.append(values)
        return seqs, regs

    def _npus(self, m, routers, errors, c, shares, load_start, store_start):
        """Each NPU's io-load unit (forwarder, checker) and io-store unit (reducer) on its
        router's local port, muxed by the collective's op; (every load unit done, every reducer
        idle, the load checkers' bad flits summed over collectives)."""
        spec, mesh = self.spec, self.spec.mesh
        children, parents = tree_children(spec), tree_parents(spec)
        load_done, store_idle, bad = [], [], []
        for rank in range(mesh.npus):
            router = routers[mesh.position(rank)]
            dests = {p: mesh.position(neighbour(spec, rank, p)) for per in children[rank] for p in per}
            fwd = m.submodules[f"forward_{rank}"] = TreeForwarder(spec=spec, children=children[rank], dests=dests)
            chk = m.submodules[f"check_{rank}"] = IoChecker(spec=spec)
            red = m.submodules[f"reduce_{rank}"] = ReduceForwarder(
                spec=spec, rank=rank, children=children[rank], parents=parents[rank], max_stripe=self.max_stripe)
            eject = router.o[LOCAL]
            to_fwd = Signal(MESH_VCS, name=f"credit_fwd_{rank}")
            m.d.comb += [
                fwd.start.eq(load_start), chk.start.eq(load_start), red.start.eq(store_start),
                chk.expect.eq(c.stripe * spec.controllers),
                *(red.per_tree[t].eq(s) for t, s in enumerate(shares)),
                fwd.eject.valid.eq(eject.valid & (c.op == 0)), fwd.eject.payload.eq(eject.payload),
                chk.eject.valid.eq(eject.valid & (c.op == 0)), chk.eject.payload.eq(eject.payload),
                red.eject.valid.eq(eject.valid & (c.op == 1)), red.eject.payload.eq(eject.payload),
                # both units take every flit at once (the NPU's memory): the credit returns on arrival
                router.o_credit[LOCAL].eq(eject.valid << eject.payload.vc),
                router.i[LOCAL].valid.eq(Mux(c.op == 0, fwd.o.valid, red.o.valid)),
                router.i[LOCAL].payload.eq(Mux(c.op == 0, fwd.o.payload.as_value(), red.o.payload.as_value())),
                fwd.credit.eq(router.i_credit[LOCAL] & to_fwd),
                red.credit.eq(router.i_credit[LOCAL] & ~to_fwd),
            ]
            self._owed_credits(m, rank, to_fwd, fwd.o, red.o, c.op == 0, router.i_credit[LOCAL])
            # a flit at a unit of the other op, or with no collective running: the schedule is broken
            stray = Signal(name=f"stray_{rank}")
            m.d.comb += stray.eq((eject.valid & ~c.active) | Mux(c.op == 0, red.o.valid, fwd.o.valid))
            errors += [fwd.overflow, red.overflow, stray]
            load_done.append(chk.complete & fwd.idle)
            store_idle.append(red.idle)
            bad.append(chk.errors)
        load_errors = Signal(32)
        with m.If(c.over & (c.op == 0)):
            m.d.sync += load_errors.eq(load_errors + sum(bad))
        return _all(load_done), _all(store_idle), load_errors

    @staticmethod
    def _owed_credits(m, rank, to_fwd, fwd_o, red_o, loading, credit) -> None:
        """``to_fwd[vc]``: the local input's credit pulse on ``vc`` belongs to the load
        forwarder. Credits return in the order the flits were sent and the two units never
        send at once, so a credit belongs to the unit of the previous op while that one still
        has flits on the VC whose credit has not returned, then to the current op's."""
        for vc in range(MESH_VCS):
            owed_fwd = Signal(16, name=f"owed_fwd_{rank}_{vc}")
            owed_red = Signal(16, name=f"owed_red_{rank}_{vc}")
            m.d.comb += to_fwd[vc].eq(Mux(loading, owed_red == 0, owed_fwd != 0))
            back = credit[vc]
            m.d.sync += [
                owed_fwd.eq(owed_fwd + (loading & fwd_o.valid & (fwd_o.payload.vc == vc)) - (back & to_fwd[vc])),
                owed_red.eq(owed_red + (~loading & red_o.valid & (red_o.payload.vc == vc)) - (back & ~to_fwd[vc])),
            ]

    def _counters(self, m, seqs, sinks, c, errors, load_errors, start, rd_unit, rd_reg):
        all_done, running, protocol_error = Signal(), Signal(), Signal()
        m.d.comb += [all_done.eq(running & _all(s.done for s in seqs)), self.all_done.eq(all_done)]
        with m.If(sum(errors) != 0):
            m.d.sync += protocol_error.eq(1)
        count_cycles(m, start, running, all_done, self.cycles)
        totals = []
        for k, sink in enumerate(sinks):     # every io-store's checks, summed
            bad, received = Signal(32, name=f"store_errors_{k}"), Signal(32, name=f"store_received_{k}")
            with m.If(c.over & (c.op == 1)):
                m.d.sync += [bad.eq(bad + sink.errors), received.eq(received + sink.received)]
            totals.append((bad, received))
        with m.Switch(rd_unit):
            for rank, seq in enumerate(seqs):
                with m.Case(rank):
                    read_register(m, rd_reg, self.rd_data, [getattr(seq, n) for n in seq.read_names])
            for k, (bad, received) in enumerate(totals):
                with m.Case(controller_unit(self.spec, k)):
                    read_register(m, rd_reg, self.rd_data, [bad, received])
            with m.Case(GLOBAL_UNIT):
                read_register(m, rd_reg, self.rd_data, [self.cycles, all_done, running, protocol_error,
                                                        c.mismatch, load_errors, c.count])


def _all(signals) -> Signal:
    signals = list(signals)
    return sum(signals) == len(signals) if signals else 1


class _Collective:
    """The wafer-wide start and end of one I/O collective (:class:`MeshIoIterationTop`):
    ``arrived[r]`` from NPU r's engine start to the collective's start; ``go`` when every NPU
    has arrived; ``op`` latched from NPU 0's registers at ``go``, ``unit_start`` the cycle
    after, and at it the op's own ``stripe``/``mode`` (io-load) or
    ``store_stripe``/``store_mode`` (io-store), so each op's units see theirs change only at
    their restart; ``active`` until ``over`` (``units_done``, driven by the
    top, seen from the second cycle after ``unit_start``: the units' outputs are fresh); each
    NPU's ``engine_done`` from ``over`` until its next engine start."""

    def __init__(self, m: Module, seqs, regs):
        self.op, self.stripe, self.mode = Signal(1), Signal(SEQ_BITS), Signal(2)
        self.store_stripe, self.store_mode = Signal(SEQ_BITS), Signal(2)
        self.unit_start, self.active, self.over = Signal(), Signal(), Signal()
        self.units_done, self.mismatch, self.count = Signal(), Signal(), Signal(32)
        arrived = [Signal(name=f"arrived_{r}") for r in range(len(seqs))]
        go, settle, finished = Signal(), Signal(2), Signal()
        m.d.comb += [go.eq(~self.active & _all(a | s.engine_start for a, s in zip(arrived, seqs))),
                     self.over.eq(self.active & (settle == 0) & ~self.unit_start & self.units_done)]
        m.d.sync += self.unit_start.eq(go)
        # each op's units see their stripe and trees change only at their own start: a
        # finished controller or leaf generator compares what it sent with them and would take
        # a longer stripe (the other op's, or the next before its start) as more to send
        for op, (stripe, mode) in enumerate(((self.stripe, self.mode), (self.store_stripe, self.store_mode))):
            with m.If(self.unit_start & (self.op == op)):
                m.d.sync += [stripe.eq(regs[0]["stripe"]), mode.eq(regs[0]["mode"])]
        with m.If(go):
            m.d.sync += [self.active.eq(1), settle.eq(2), finished.eq(0), self.count.eq(self.count + 1),
                         self.op.eq(regs[0]["op"])]
            with m.If(sum((r[k] != regs[0][k]) for r in regs for k in ("op", "stripe", "mode")) != 0):
                m.d.sync += self.mismatch.eq(1)
        with m.Elif(self.over):
            m.d.sync += [self.active.eq(0), finished.eq(1)]
        with m.If(settle != 0):
            m.d.sync += settle.eq(settle - 1)
        for a, seq in zip(arrived, seqs):
            with m.If(go):
                m.d.sync += a.eq(0)
            with m.Elif(seq.engine_start):
                m.d.sync += a.eq(1)
            m.d.comb += seq.engine_done.eq(finished & ~a)
