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
from hdl.designs.fabric.cut import link_cut_fields
from hdl.designs.mesh.mesh_io_harness import MeshIoHarnessTop
from hdl.designs.mesh.shared_input import share_input
from hdl.designs.mesh.spill_checker import SpillChecker
from hdl.designs.mesh.store_checker import StoreChecker
from hdl.designs.mesh.reduce_forwarder import ReduceForwarder
from hdl.designs.mesh.tree_forwarder import TreeForwarder

from .loading_sequencer import LoadingTraceSequencer
from .wafer_collective import WaferCollective, all_of, any_of, collective_cut, collective_cut_fields

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
#: An NPU's I/O registers that cross a cut from part 0 (NPU 0's: every NPU's reference).
_REFERENCE = (("op", 2), ("stripe", SEQ_BITS), ("mode", 2))
#: The bad-flit totals that cross a cut from part 1 (part 0 reads the sums).
_TOTALS = (("load_errors", 32), ("spill_errors", 32))


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

    One part of a cut mesh (``partition`` and ``part``, the lock-step simulator): the part's
    routers, the NPUs at them with their units and the controllers at its edge routers; the
    collective split (``WaferCollective(cut=...)``: this part's "every NPU arrived" and "every
    unit done" cross the cut, :meth:`cut_fields`), NPU 0's I/O registers (op, stripe, trees:
    every NPU's reference) crossing from part 0 to part 1, and part 1's bad-flit totals
    (``load_errors``, ``spill_errors``) to part 0, whose global unit reads the sums (part 1's
    reads 0 there); every crossing signal a register's output. ``mismatch``, ``all_done`` and
    ``cycles`` are each part's: the lock-step driver and ``JoinedParts`` combine them (either,
    both, the later).
    """

    CUT = True

    def __init__(self, spec: MeshIoSpec, *, depth: int, programs: int, max_stripe: int = 256, overlap: bool = False,
                 partition=None, part: int | None = None):
        self.depth, self.programs, self.max_stripe, self.overlap = depth, programs, max_stripe, overlap
        super().__init__(spec, partition=partition, part=part)

    def cut_fields(self) -> list[tuple[str, str, int]]:
        """:meth:`MeshIoHarnessTop.cut_fields` (the cut mesh wires), then the split collective's
        halves (``hdl.designs.iteration.wafer_collective.collective_cut_fields``), NPU 0's I/O
        registers from part 0 (``io_reference_<name>``) and part 1's bad-flit totals
        (``io_totals_<name>``): part 0's ``cut_out`` is, field for field, part 1's ``cut_in``."""
        return [*super().cut_fields(), *collective_cut_fields(self.part),
                *link_cut_fields([("io_reference", 0, 1)], self.part, _REFERENCE, []),
                *link_cut_fields([("io_totals", 1, 0)], self.part, _TOTALS, [])]

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
        cut = h.cut
        if cut is None or self.part == 0:
            reference = regs[0]
            if cut is not None:     # part 1's NPUs compare with NPU 0's registers
                m.d.comb += [cut[f"io_reference_{name}"].eq(reference[name]) for name, _ in _REFERENCE]
        else:
            reference = {name: cut[f"io_reference_{name}"] for name, _ in _REFERENCE}
        c = _Collective(m, list(seqs.values()), list(regs.values()), reference,
                        cut=None if cut is None else collective_cut(self, self.cut_fields(), self.part))
        shares = [tree_share(m, c.stripes[STORE], c.modes[STORE], k, vc)
                  for k in range(spec.controllers) for vc in (0, 1)]
        starts = [c.unit_start & (c.op == op) for op in range(len(IO_OPS_OF_NODE))]
        mine = self.my_controllers()
        controllers, sinks = self._controllers(m, routers, errors, c, shares, starts, mine)
        npus = self._npus(m, routers, errors, c, shares, starts)
        done = [npus["load"] & all_of(x[LOAD].done for x in controllers),
                npus["store"] & all_of(s[STORE].complete for s in sinks),
                npus["write"] & all_of(s[WRITE].complete for s in sinks),
                npus["read"] & all_of(x[READ].done for x in controllers)]
        m.d.comb += c.units_done.eq(Array(done)[c.op])
        self._counters(m, h, seqs, dict(zip(mine, sinks)), c, npus, cut)
        return m

    def _controllers(self, m, routers, errors, c, shares, starts, mine):
        """Each controller's (of ``mine``) senders (io-load's :class:`IoController`, io-read's
        spill sender) on one link into its router, and its receivers (io-store's
        :class:`StoreChecker`, io-write's :class:`SpillChecker`) behind one receive queue, each
        op's unit selected by the collective's op. Returns ``(senders, sinks)``: per controller
        of ``mine`` ``{op: unit}``."""
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

        out = add_controller_sources(m, spec, routers, errors, senders, select=c.op, only=mine)
        sinks = add_controller_sinks(m, spec, routers, errors, None, receivers, None, select=c.op, only=mine)
        return out, sinks

    def _sequencers(self, m, start, prog_we, prog_unit, prog_reg, prog_data):
        """Each NPU's (of this part) sequencer and its I/O registers (written by its loader or
        the harness): ``({rank: sequencer}, {rank: {name: register}})``."""
        seqs, regs = {}, {}
        for rank in range(self.spec.mesh.npus):
            if not self.mine(rank):
                continue
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
            seqs[rank] = seq
            regs[rank] = values
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
            if not self.mine(rank):
                continue
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

    def _counters(self, m, h, seqs, sinks, c, npus, cut):
        """The harness's ``all_done`` (every sequencer of the part done), every io-store's and
        io-write's checks summed per controller (``sinks``: k -> its receivers), the spill
        checkers' bad flits, and the read port; ``cut``: the cut fields' slices, or None."""
        status = self.finish(m, h, [all_of(s.done for s in seqs.values())])
        totals = {}
        write_bad = []
        for k, units in sinks.items():     # every io-store's and io-write's checks, summed
            sink, spill = units[STORE], units[WRITE]
            bad, received = Signal(32, name=f"store_errors_{k}"), Signal(32, name=f"store_received_{k}")
            spilled = Signal(32, name=f"spill_received_{k}")
            with m.If(c.over & (c.op == STORE)):
                m.d.sync += [bad.eq(bad + sink.errors), received.eq(received + sink.received)]
            with m.If(c.over & (c.op == WRITE)):
                m.d.sync += spilled.eq(spilled + spill.received)
            totals[k] = (bad, received, spilled)
            write_bad.append(spill.errors)
        spill_errors = Signal(32)
        with m.If(c.over & (c.op == WRITE)):
            m.d.sync += spill_errors.eq(spill_errors + sum(write_bad))
        with m.Elif(c.over & (c.op == READ)):
            m.d.sync += spill_errors.eq(spill_errors + npus["read_bad"])
        load_errors = npus["load_errors"]
        if cut is not None and self.part == 1:    # part 0 reads the sums
            m.d.comb += [cut["io_totals_load_errors"].eq(load_errors), cut["io_totals_spill_errors"].eq(spill_errors)]
            load_errors = spill_errors = 0
        elif cut is not None:
            load_errors = (load_errors + cut["io_totals_load_errors"])[:32]
            spill_errors = (spill_errors + cut["io_totals_spill_errors"])[:32]
        self.read_port(m, h, status, {r: [getattr(seq, n) for n in seq.read_names] for r, seq in seqs.items()},
                       {k: list(registers) for k, registers in totals.items()},
                       (c.mismatch, load_errors, c.count, spill_errors))


class _Collective(WaferCollective):
    """The wafer-wide start and end of one I/O collective (:class:`MeshIoIterationTop`;
    :class:`WaferCollective`, ``cut`` as there), with the mesh's I/O registers: ``op``
    latched from ``reference`` (NPU 0's registers) at ``go``, and at ``unit_start`` the op's
    own ``stripes[op]`` and ``modes[op]``, so each op's units see theirs change only at their
    restart; ``mismatch`` when one of ``regs`` (the NPUs' registers) differs at ``go``."""

    def __init__(self, m: Module, seqs, regs, reference, *, cut=None):
        super().__init__(m, seqs, cut=cut)
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
                m.d.sync += [self.stripes[op].eq(reference["stripe"]), self.modes[op].eq(reference["mode"])]
        with m.If(self.go):
            m.d.sync += self.op.eq(reference["op"])
            with m.If(sum((r[k] != reference[k]) for r in regs for k in ("op", "stripe", "mode")) != 0):
                m.d.sync += self.mismatch.eq(1)
