"""``MeshIoIterationTop``: the mesh with its edge I/O controllers and a trace sequencer per NPU
whose collective nodes are weight streaming (``io-load``), gradient reduce-out (``io-store``)
and checkpoint spills (``io-write`` / ``io-read``) (docs/fabric_iteration.md, "Weight
streaming")."""

from __future__ import annotations

from amaranth import Array, Module, Mux, Signal

from hdl.compiler.mesh_io_program import neighbour, spill_dests, tree_children, tree_parents
from hdl.contracts.errors import FredError
from hdl.contracts.mesh import LOCAL
from hdl.contracts.mesh_io import SEQ_BITS, MeshIoSpec
from hdl.designs.mesh.controller_links import add_controller_sinks, add_controller_sources
from hdl.designs.mesh.io_checker import IoChecker
from hdl.designs.mesh.io_controller import IoController
from hdl.designs.mesh.mesh_io_spill_top import controller_spill_sender, npu_spill_sender
from hdl.designs.mesh.mesh_io_store_top import tree_share
from hdl.designs.mesh.mesh_io_harness import MeshIoHarnessTop
from hdl.designs.mesh.shared_input import share_input
from hdl.designs.mesh.spill_checker import SpillChecker
from hdl.designs.mesh.store_checker import StoreChecker
from hdl.designs.mesh.reduce_forwarder import ReduceForwarder
from hdl.designs.mesh.tree_forwarder import TreeForwarder

from .loading_sequencer import LoadingTraceSequencer
from .wafer_collective import WaferCollective, all_of, any_of

__all__ = ["MeshIoIterationTop", "IO_NODE_REGS", "IO_OPS_OF_NODE", "IO_ITERATION_GLOBAL_READ",
           "IO_ITERATION_CONTROLLER_READ"]

#: Program registers of an NPU's I/O unit (unit = rank), written by its sequencer's loader per
#: I/O collective (or by the harness): the op (:data:`IO_OPS_OF_NODE` index), the stripe per
#: controller, the trees (``hdl.contracts.mesh_io.IO_MODES`` index).
IO_NODE_REGS = {"op": 0, "stripe": 1, "mode": 2}
#: The I/O ops this top runs, in the order of the ``op`` register.
IO_OPS_OF_NODE = ("io-load", "io-store", "io-write", "io-read")
LOAD, STORE, WRITE, READ = range(4)
#: Fabric-wide read registers (``GLOBAL_UNIT``): ``protocol_error`` as the I/O tops', plus
#: ``mismatch`` (the NPUs' I/O registers differed at a collective's start), the load checkers'
#: bad flits summed over every collective, the I/O collectives run, and the spill checkers'
#: bad flits (every controller's over every io-write, every NPU's over every io-read).
IO_ITERATION_GLOBAL_READ = ("cycles", "all_done", "running", "protocol_error", "mismatch",
                            "load_errors", "collectives", "spill_errors")
#: A controller unit's read registers: its store checker's bad flits summed over every
#: io-store, the flits it received in all, and the io-write flits it received in all.
IO_ITERATION_CONTROLLER_READ = ("store_errors", "store_received", "spill_received")


class MeshIoIterationTop(MeshIoHarnessTop):
    """The routers of ``spec.mesh`` with ``spec.controllers`` controllers on the edge (an
    :class:`IoController` into, and a store checker out of, each one's router port), and at
    every NPU a :class:`LoadingTraceSequencer` (``depth`` nodes, ``programs`` loader entries,
    one lane: the I/O registers :data:`IO_NODE_REGS`), a :class:`TreeForwarder` and an
    :class:`IoChecker` (io-load), a :class:`ReduceForwarder` (io-store, ``max_stripe`` flits
    per tree), a spill sender (io-write) and a :class:`SpillChecker` (io-read) on the router's
    local port; at each controller also an io-read sender and an io-write sink
    (``hdl.designs.mesh.mesh_io_spill_top.add_spill_units``).

    One I/O collective at a time, started as the model starts its task: when every NPU's
    sequencer has reached it (raised its engine start), every NPU's unit of the op and every
    controller start together (the op, stripe and mode latched from NPU 0's registers; the
    others must hold the same, else ``mismatch``); it ends for every NPU when every unit and
    controller of the op is done (io-load: every checker complete, every forwarder and
    controller done; io-store: every controller's checker complete, every reducer idle;
    io-write: every NPU's sender done, every controller's spill checker complete; io-read:
    every controller's sender done, every NPU's spill checker complete), and
    each NPU's node sees its engine done from then until its own next start. Between the two,
    no flit of another collective is in flight, so the local port is muxed by the op; the local
    input's credits, which return a few cycles after a flit left, go to the unit that spent
    them (per VC a count of each sending unit's credits still owed).

    Harness ports as ``fred_mesh_io``'s: program unit r < npus is NPU r (registers
    :data:`IO_NODE_REGS`, the sequencer's and its loader's); read unit r the sequencer's
    ``read_names``; ``controller_unit(spec, k)`` :data:`IO_ITERATION_CONTROLLER_READ`;
    ``GLOBAL_UNIT`` :data:`IO_ITERATION_GLOBAL_READ`. ``all_done``: every sequencer done;
    ``cycles`` from the cycle after ``start`` to it.

    Latency beyond the units': 1 cycle from the last NPU's engine start to the units' start, 1
    from the units' last done to the NPUs' engine done (the sequencers' nodes end the cycle
    after); the end is looked for from the second cycle after the units' start (their outputs
    are then those of the new run).

    ``overlap`` (default False: built as before): the sequencers run compute under the I/O
    collectives (:class:`~.trace_sequencer.TraceSequencer`'s ``overlap``), still one I/O
    collective at a time.
    """

    def __init__(self, spec: MeshIoSpec, *, depth: int, programs: int, max_stripe: int = 256, overlap: bool = False):
        self.depth, self.programs, self.max_stripe, self.overlap = depth, programs, max_stripe, overlap
        super().__init__(spec)

    def check(self, spec: MeshIoSpec) -> None:
        if spec.mesh.dtype != "int32":
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(f"MeshIoIterationTop runs int32 meshes, got {spec.mesh.dtype}")

    def program_registers(self, m: Module, prog_we, prog_reg, prog_data) -> None:
        """None: each NPU's I/O registers are its own (:meth:`_sequencers`)."""
        return None

    def elaborate(self, platform) -> Module:
        m = Module()
        spec = self.spec
        h = self.harness(m)
        routers, errors = h.routers, h.errors
        seqs, regs = self._sequencers(m, h.start, h.prog_we, h.prog_unit, h.prog_reg, h.prog_data)
        c = _Collective(m, seqs, regs)
        shares = [tree_share(m, c.stripes[STORE], c.modes[STORE], k, vc)
                  for k in range(spec.controllers) for vc in (0, 1)]
        starts = [c.unit_start & (c.op == op) for op in range(len(IO_OPS_OF_NODE))]
        controllers, sinks = self._controllers(m, routers, errors, c, shares, starts)
        npus = self._npus(m, routers, errors, c, shares, starts)
        done = [npus["load"] & all_of(x[LOAD].done for x in controllers),
                npus["store"] & all_of(s[STORE].complete for s in sinks),
                npus["write"] & all_of(s[WRITE].complete for s in sinks),
                npus["read"] & all_of(x[READ].done for x in controllers)]
        m.d.comb += c.units_done.eq(Array(done)[c.op])
        self._counters(m, h, seqs, sinks, c, npus)
        return m

    def _controllers(self, m, routers, errors, c, shares, starts):
        """Each controller's senders (io-load's :class:`IoController`, io-read's spill sender)
        on one link into its router, and its receivers (io-store's :class:`StoreChecker`,
        io-write's :class:`SpillChecker`) behind one receive queue, each op's unit selected by
        the collective's op. Returns ``(senders, sinks)``: per controller ``{op: unit}``."""
        spec = self.spec

        def senders(k, dest):
            load, read = IoController(spec=spec, index=k, dest=dest), controller_spill_sender(spec, k)
            m.d.comb += [load.start.eq(starts[LOAD]), load.stripe.eq(c.stripes[LOAD]), load.mode.eq(c.modes[LOAD]),
                         load.hold.eq(0), read.start.eq(starts[READ]), read.stripe.eq(c.stripes[READ]),
                         read.hold.eq(0)]
            return {LOAD: load, READ: read}

        def receivers(k):
            store = StoreChecker(spec=spec, index=k)
            write = SpillChecker(spec=spec, at="controller", index=k, vc=spill_dests(spec)[k][2])
            m.d.comb += [store.start.eq(starts[STORE]), store.expect.eq(shares[2 * k] + shares[2 * k + 1]),
                         write.start.eq(starts[WRITE]), write.expect.eq(c.stripes[WRITE] * spec.mesh.npus)]
            return {STORE: store, WRITE: write}

        out = add_controller_sources(m, spec, routers, errors, senders, select=c.op)
        sinks = add_controller_sinks(m, spec, routers, errors, None, receivers, None, select=c.op)
        return out, sinks

    def _sequencers(self, m, start, prog_we, prog_unit, prog_reg, prog_data):
        """Each NPU's sequencer and its I/O registers (written by its loader or the harness)."""
        seqs, regs = [], []
        for rank in range(self.spec.mesh.npus):
            seq = m.submodules[f"seq_{rank}"] = LoadingTraceSequencer(depth=self.depth, programs=self.programs,
                                                                      lanes=1, overlap=self.overlap)
            mine = prog_we & (prog_unit == rank)
            m.d.comb += [seq.start.eq(start), seq.we.eq(mine), seq.waddr.eq(prog_reg), seq.wdata.eq(prog_data),
                         seq.engine_errors.eq(0)]
            write = mine | seq.lane_we[0]
            reg = Mux(seq.lane_we[0], seq.lane_waddr[:6], prog_reg)
            data = Mux(seq.lane_we[0], seq.lane_wdata[:32], prog_data)
            values = {name: Signal(width, name=f"{name}_{rank}")
                      for name, width in (("op", 2), ("stripe", SEQ_BITS), ("mode", 2))}
            for name, address in IO_NODE_REGS.items():
                with m.If(write & (reg == address)):
                    m.d.sync += values[name].eq(data)
            seqs.append(seq)
            regs.append(values)
        return seqs, regs

    def _npus(self, m, routers, errors, c, shares, starts) -> dict:
        """Each NPU's io-load unit (forwarder, checker), io-store unit (reducer), io-write sender
        and io-read checker on its router's local port, muxed by the collective's op;
        ``{"load": every load unit done, "store": every reducer idle, "write": every spill
        sender done, "read": every spill checker complete, "load_errors": the load checkers'
        bad flits summed over collectives, "read_bad": the spill checkers' bad flits now}``."""
        spec, mesh = self.spec, self.spec.mesh
        children, parents = tree_children(spec), tree_parents(spec)
        load_done, store_idle, write_done, read_done, bad, read_bad = [], [], [], [], [], []
        for rank in range(mesh.npus):
            router = routers[mesh.position(rank)]
            dests = {p: mesh.position(neighbour(spec, rank, p)) for per in children[rank] for p in per}
            fwd = m.submodules[f"forward_{rank}"] = TreeForwarder(spec=spec, children=children[rank], dests=dests)
            chk = m.submodules[f"check_{rank}"] = IoChecker(spec=spec)
            red = m.submodules[f"reduce_{rank}"] = ReduceForwarder(
                spec=spec, rank=rank, children=children[rank], parents=parents[rank], max_stripe=self.max_stripe)
            send = m.submodules[f"spill_send_{rank}"] = npu_spill_sender(spec, rank)
            spill = m.submodules[f"spill_check_{rank}"] = SpillChecker(spec=spec, at="npu", index=rank, vc=0)
            eject = router.o[LOCAL]
            # the sending unit of each op (io-read: the NPU sends nothing) and the receiving ones
            outs = {LOAD: fwd.o, STORE: red.o, WRITE: send.o}
            m.d.comb += [
                fwd.start.eq(starts[LOAD]), chk.start.eq(starts[LOAD]), red.start.eq(starts[STORE]),
                send.start.eq(starts[WRITE]), send.stripe.eq(c.stripes[WRITE]), send.hold.eq(0),
                spill.start.eq(starts[READ]), spill.expect.eq(c.stripes[READ] * spec.controllers),
                chk.expect.eq(c.stripes[LOAD] * spec.controllers),
                *(red.per_tree[t].eq(s) for t, s in enumerate(shares)),
                fwd.eject.valid.eq(eject.valid & (c.op == LOAD)), fwd.eject.payload.eq(eject.payload),
                chk.eject.valid.eq(eject.valid & (c.op == LOAD)), chk.eject.payload.eq(eject.payload),
                red.eject.valid.eq(eject.valid & (c.op == STORE)), red.eject.payload.eq(eject.payload),
                spill.i.valid.eq(eject.valid & (c.op == READ)), spill.i.payload.eq(eject.payload),
                # every unit takes every flit at once (the NPU's memory): the credit returns on arrival
                router.o_credit[LOCAL].eq(eject.valid << eject.payload.vc),
            ]
            valid, payload, owner = share_input(m, f"local_{rank}", c.op, outs, router.i_credit[LOCAL])
            m.d.comb += [router.i[LOCAL].valid.eq(valid), router.i[LOCAL].payload.eq(payload),
                         fwd.credit.eq(owner[LOAD]), red.credit.eq(owner[STORE]), send.credit.eq(owner[WRITE])]
            # a flit at a unit of another op (io-write: the NPU receives nothing), or with no
            # collective running, or a unit of another op sending: the schedule is broken
            stray = Signal(name=f"stray_{rank}")
            m.d.comb += stray.eq((eject.valid & (~c.active | (c.op == WRITE)))
                                 | any_of(o.valid & (c.op != op) for op, o in outs.items()))
            errors += [fwd.overflow, red.overflow, send.error, stray]
            load_done.append(chk.complete & fwd.idle)
            store_idle.append(red.idle)
            write_done.append(send.done)
            read_done.append(spill.complete)
            bad.append(chk.errors)
            read_bad.append(spill.errors)
        load_errors = Signal(32)
        with m.If(c.over & (c.op == LOAD)):
            m.d.sync += load_errors.eq(load_errors + sum(bad))
        return {"load": all_of(load_done), "store": all_of(store_idle), "write": all_of(write_done),
                "read": all_of(read_done), "load_errors": load_errors, "read_bad": sum(read_bad)}

    def _counters(self, m, h, seqs, sinks, c, npus):
        """The harness's ``all_done`` (every sequencer done), every io-store's and io-write's
        checks summed per controller, the spill checkers' bad flits, and the read port."""
        status = self.finish(m, h, [all_of(s.done for s in seqs)])
        totals = []
        write_bad = []
        for k, units in enumerate(sinks):     # every io-store's and io-write's checks, summed
            sink, spill = units[STORE], units[WRITE]
            bad, received = Signal(32, name=f"store_errors_{k}"), Signal(32, name=f"store_received_{k}")
            spilled = Signal(32, name=f"spill_received_{k}")
            with m.If(c.over & (c.op == STORE)):
                m.d.sync += [bad.eq(bad + sink.errors), received.eq(received + sink.received)]
            with m.If(c.over & (c.op == WRITE)):
                m.d.sync += spilled.eq(spilled + spill.received)
            totals.append((bad, received, spilled))
            write_bad.append(spill.errors)
        spill_errors = Signal(32)
        with m.If(c.over & (c.op == WRITE)):
            m.d.sync += spill_errors.eq(spill_errors + sum(write_bad))
        with m.Elif(c.over & (c.op == READ)):
            m.d.sync += spill_errors.eq(spill_errors + npus["read_bad"])
        self.read_port(m, h, status, [[getattr(seq, n) for n in seq.read_names] for seq in seqs],
                       [list(registers) for registers in totals], (c.mismatch, npus["load_errors"], c.count, spill_errors))


class _Collective(WaferCollective):
    """The wafer-wide start and end of one I/O collective (:class:`MeshIoIterationTop`;
    :class:`WaferCollective`), with the mesh's I/O registers: ``op`` latched from NPU 0's
    registers at ``go``, and at ``unit_start`` the op's own ``stripes[op]`` and
    ``modes[op]``, so each op's units see theirs change only at their restart; ``mismatch``
    when another NPU's registers differ at ``go``."""

    def __init__(self, m: Module, seqs, regs):
        super().__init__(m, seqs)
        ops = len(IO_OPS_OF_NODE)
        self.op = Signal(2)
        self.stripes = [Signal(SEQ_BITS, name=f"stripe_{o.replace('-', '_')}") for o in IO_OPS_OF_NODE]
        self.modes = [Signal(2, name=f"mode_{o.replace('-', '_')}") for o in IO_OPS_OF_NODE]
        self.mismatch = Signal()
        # each op's units see their stripe and trees change only at their own start: a
        # finished controller, leaf generator or spill sender compares what it sent with them
        # and would take a longer stripe (another op's, or the next before its start) as more
        # to send
        for op in range(ops):
            with m.If(self.unit_start & (self.op == op)):
                m.d.sync += [self.stripes[op].eq(regs[0]["stripe"]), self.modes[op].eq(regs[0]["mode"])]
        with m.If(self.go):
            m.d.sync += self.op.eq(regs[0]["op"])
            with m.If(sum((r[k] != regs[0][k]) for r in regs for k in ("op", "stripe", "mode")) != 0):
                m.d.sync += self.mismatch.eq(1)
