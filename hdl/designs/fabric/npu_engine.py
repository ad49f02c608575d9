"""``NpuEngine``: the traffic engine at one NPU port of the fabric (docs/fabric_rtl.md).

It sends a programmed number of flits of deterministic data and receives and checks a
programmed number of flits, at up to one flit per cycle each way, with no Python in the loop.

Data: flit ``k``, lane ``l`` of a sender with weights ``(w, h)`` carries
``w * g(k, l) + h (mod 2^32)``, where ``g`` is a fixed non-linear 32-bit mix of ``k`` and ``l``
(:func:`hdl.contracts.npu_engine.mix`, the same function in Python). A flit that is the int32
sum of the flits of several senders (a reduction, wrapping, in a switch or in an engine) is
then ``W * g(k, l) + H`` with ``W``/``H`` the sums of their ``w``/``h``: the receiver checks
that with its own programmed ``(W, H)``. Any flit out of order (``g`` differs per ``k``), any sender missing or counted twice
(the ``w`` and ``h`` of each rank are pseudo-random 32-bit words) and any corrupted bit shows as
a mismatch. The last received flit must carry ``last`` (every sender marks its last flit).
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib.memory import Memory
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.npu_engine import (DTYPES_RUN, ENGINE_GLOBAL_REGS, ENGINE_REGS, ENGINE_STAGES, HASH_MULTIPLIER,
                                      MIX_CONSTANTS, STAGE_REGS, STAGE_ROW)
from hdl.contracts.flit import FlitFormat
from hdl.designs.layouts import flit_layout, framing_layout
from hdl.designs.reduction.reduction_unit import ReductionUnit

__all__ = ["NpuEngine", "connect_rx_between_collectives", "mix_expr"]


def mix_expr(index, lane: int):
    """Amaranth expression of :func:`hdl.contracts.npu_engine.mix` (32 bits)."""
    c1, c2, c3 = MIX_CONSTANTS
    x = (index * c1 + ((lane + 1) * c2 & 0xFFFFFFFF))[:32]
    x = x ^ (x >> 15)
    x = (x * c3)[:32]
    return x ^ (x >> 12)


def _fp16(x):
    """fp16 bit pattern of a 32-bit word (:func:`hdl.contracts.npu_engine.fp16_value`): sign
    bit 31, exponent 13 + bits 26..27 (magnitudes 1/4 .. 8: a sum of 20 stays finite),
    fraction bits 16..25."""
    return Cat(x[16:26], (x[26:28] + 13)[:5], x[31])


class NpuEngine(wiring.Component):
    """One NPU's traffic engine.

    Parameters: ``flit`` (:class:`FlitFormat`; int32 lanes only: the check is exact integer
    arithmetic); ``buffer``: flits held between receiving and forwarding.

    Members: ``tx`` (Out stream of flits, to the NPU link), ``rx`` (In stream, from it);
    ``chunk_end`` (Out, beside ``tx``: the flit ``tx`` offers is the last of its chunk, see
    below; a packetizer ends a packet there, so no packet holds flits of two chunks: a
    forwarded chunk's packet then never starts before its flits' own packet upstream has,
    docs/fabric_rtl.md, "Four DP rings across the one-port uplinks");
    ``start`` (In, a one-cycle pulse: counters clear, the engine runs); ``we``/``waddr``/
    ``wdata`` (In: program register write, :data:`ENGINE_REGS` names the registers);
    ``done`` (everything sent, every expected flit received), ``sent``, ``received`` (over all
    stages), ``errors`` (mismatched flits plus flits beyond the expected count), ``extra``
    (flits beyond the expected count), ``first_error`` (index of the first bad flit + 1, 0 =
    none).

    Program: ``stages`` (1 .. :data:`ENGINE_STAGES`) stages run one after another, each with
    its own registers (:data:`STAGE_REGS`; the hierarchical all-reduce's three stages:
    reduce-scatter in the L1, all-reduce across the L1s, all-gather in the L1; every other
    algorithm is one stage). The send side and the receive side step through the stages
    independently: the receive side enters stage s + 1 once it received stage s's
    ``recv_count`` flits; the send side enters stage s + 1 once it sent stage s's
    ``send_count`` flits, and sends stage s + 1's first flit only once the receive side is past
    stage s (the stage's data depends on everything the previous stage delivered). A stage's
    flits that reach the L1 switch before it has moved to the stage's phase wait at its input
    port (the phase sequencer lets a port take only its share of each phase). Within a
    stage:

    * output flit ``t`` (``t < send_count``): its own data for data index ``kout(t)`` if
      ``t < own_only``; otherwise the next received flit, plus its own data if
      ``t < add_until`` (the endpoint's int32 reduction, wrapping like the switch's adder);
      "own data" is ``ws * mix(k, l) + hs``: the NPU's buffer in stage 0, and in later stages
      the result of the previous stages that the NPU holds (e.g. its L1's sum of a chunk: the
      stage that produced it checked every flit of it against the same weights);
    * received flit ``t'`` (``t' < recv_count``) is checked against
      ``wr * mix(kin(t'), l) + hr`` when it arrives if ``t' >= check_from``, and if
      ``t' < fwd_count`` it is kept in a FIFO of ``buffer`` flits (the NPU's memory) until its
      turn in the output stream (a forwarded flit leaves 1 cycle after it arrived at the
      earliest: the FIFO's latency). Receiving is never held up by forwarding (only by a full
      FIFO): a ring's NPU receives a chunk while it still sends its own;
    * data indices run in chunks of ``chunk`` flits: ``kout`` = ``org`` + a base that starts
      at ``out_base``, ``kin`` = ``org`` + a base from ``in_base``; after each chunk the base
      steps down by ``chunk``, from 0 to ``last_base`` (the ring's chunk order: chunk (i - j)
      mod n at step j).

    ``stage_gate`` (default False; True for the packet fabric's hierarchical all-reduce,
    :class:`~hdl.designs.iteration.StageBarrier`): members ``send_stage`` (Out: the send
    side's stage, the one of the flit ``tx`` offers), ``recv_past`` (Out, bit s: the
    receive side has received every flit of stage s of the current run -- it is in a later
    stage, or in stage s or its last stage with the stage's count received) and
    ``stage_open`` (In, bit s: every NPU's ``recv_past[s]``); the send side sends stage s + 1's
    flits only while ``stage_open[s]`` is high, so no flit of stage s + 1 enters the fabric
    while any flit of stage s is still in it (online unicasts have no switch phase to hold an
    early stage's flits, docs/fabric_iteration.md "The hierarchical all-reduce on the packet
    fabric"). Off, the engine is built as before (its Verilog unchanged).

    Timing: ``tx.valid`` never depends on ``tx.ready`` (stream rule): high whenever a flit is
    due and (when forwarding) the FIFO holds one. A stage change takes one cycle on each side.
    ``rx.ready`` is the sink's random backpressure: low in a cycle when a 16-bit LFSR is below
    the programmed threshold (and when the FIFO is full for a flit to forward, and in the cycle
    a stage's last flit was received). The check is combinational on the received flit and
    registered into the counters.
    """

    def __init__(self, flit: FlitFormat, *, buffer: int = 4096, stage_gate: bool = False):
        if isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 1:
            raise FredError(f"engine buffer must be an integer >= 1 flit, got {buffer!r}")
        self.buffer = buffer
        if flit.dtype not in DTYPES_RUN:
            raise FredError(f"the fabric's NPU engines run {' and '.join(DTYPES_RUN)} data; "
                            f"{flit.dtype} is not supported by the RTL fabric")
        if flit.dtype != "int32" and flit.lanes * 16 > 32:
            raise FredError(f"the fabric's NPU engines hash fp16 flits of up to 2 lanes (32 bits); "
                            f"got {flit.lanes} lanes")
        self.flit, self.stage_gate = flit, bool(stage_gate)
        shape = flit_layout(flit)
        gate = ({"send_stage": Out(range(ENGINE_STAGES)), "recv_past": Out(ENGINE_STAGES - 1),
                 "stage_open": In(ENGINE_STAGES - 1)} if self.stage_gate else {})
        super().__init__({
            "tx": Out(stream.Signature(shape)),
            "rx": In(stream.Signature(shape)),
            "start": In(1),
            "we": In(1), "waddr": In(range(len(ENGINE_REGS))), "wdata": In(32),
            "chunk_end": Out(1), "done": Out(1), "sent": Out(32), "received": Out(32), "errors": Out(32),
            "extra": Out(32), "first_error": Out(32), "hash": Out(32), **gate,
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        # The engine's own registers are flip-flops; each stage's registers are a row of a
        # memory (written by the program port, read asynchronously) copied into the active
        # registers when a side enters the stage: the datapath sees only the active registers,
        # and the idle program registers cost the simulation nothing per cycle.
        regs = {name: Signal(32, name=f"reg_{name}") for name in ENGINE_GLOBAL_REGS}
        fields = len(STAGE_REGS)
        table = m.submodules.stage_table = Memory(shape=unsigned(32 * STAGE_ROW), depth=4, init=[])
        write = table.write_port(granularity=32)
        global_row = Const(3, 2)
        with m.If(self.we & (self.waddr[4:6] == global_row)):
            with m.Switch(self.waddr[:4]):
                for index, name in enumerate(ENGINE_GLOBAL_REGS):
                    with m.Case(index):
                        m.d.sync += regs[name].eq(self.wdata)
        m.d.comb += [write.addr.eq(self.waddr[4:6]), write.data.eq(Cat(*[self.wdata] * STAGE_ROW)),
                     write.en.eq(Mux(self.we & (self.waddr[4:6] != global_row),
                                     1 << self.waddr[:4], 0))]
        last_stage = Signal(range(ENGINE_STAGES))
        m.d.comb += last_stage.eq(Mux(regs["stages"] > 1, regs["stages"] - 1, 0))
        # the send side's stage (ss) and the receive side's (rs); their active registers
        ss, rs = Signal(range(ENGINE_STAGES)), Signal(range(ENGINE_STAGES))
        tx_row, rx_row = table.read_port(domain="comb"), table.read_port(domain="comb")
        m.d.comb += [tx_row.addr.eq(Mux(self.start, 0, ss + 1)),
                     rx_row.addr.eq(Mux(self.start, 0, rs + 1))]

        def field(row, name):
            index = STAGE_REGS.index(name)
            return row.data[32 * index:32 * (index + 1)]

        tx_ = {n: Signal(32, name=f"tx_{n}") for n in ("send_count", "own_only", "add_until",
                                                       "ws", "hs", "chunk", "last_base", "org")}
        rx_ = {n: Signal(32, name=f"rx_{n}") for n in ("recv_count", "fwd_count", "check_from",
                                                       "wr", "hr", "chunk", "last_base", "org")}
        load_tx = [reg.eq(field(tx_row, n)) for n, reg in tx_.items()]
        load_rx = [reg.eq(field(rx_row, n)) for n, reg in rx_.items()]
        running = Signal()
        lfsr = Signal(16, init=1)
        s_sent, s_recv = Signal(32), Signal(32)            # flits of the current stage
        out_off, out_base, in_off, in_base = (Signal(32, name=n) for n in
                                              ("out_off", "out_base", "in_off", "in_base"))
        with m.If(self.start):
            m.d.sync += [running.eq(1), self.sent.eq(0), self.received.eq(0), self.errors.eq(0),
                         self.extra.eq(0), self.first_error.eq(0), self.hash.eq(0),
                         ss.eq(0), rs.eq(0),
                         s_sent.eq(0), s_recv.eq(0), out_off.eq(0), in_off.eq(0),
                         out_base.eq(field(tx_row, "out_base")), in_base.eq(field(rx_row, "in_base")),
                         *load_tx, *load_rx,
                         lfsr.eq(Mux(regs["seed"][:16] == 0, 1, regs["seed"][:16]))]
        with m.Else():
            # Galois LFSR x^16 + x^14 + x^13 + x^11 + 1 (maximal length)
            m.d.sync += lfsr.eq(Mux(lfsr[0], (lfsr >> 1) ^ 0xB400, lfsr >> 1))

        lanes, width = self.flit.lanes, (32 if self.flit.dtype == "int32" else 16)
        data_width = lanes * width
        # received flits to forward wait here (the NPU's memory): a flit is received (checked,
        # counted) when it arrives, and leaves when its turn in the output stream comes
        held = m.submodules.held = SyncFIFO(width=data_width, depth=self.buffer)
        stall = lfsr < regs["backpressure"][:17]
        send_stage_done = s_sent >= tx_["send_count"]
        recv_stage_done = s_recv >= rx_["recv_count"]
        # a later stage sends once everything of the previous one arrived
        due = running & ~send_stage_done & (rs >= ss)
        if self.stage_gate:
            # a later stage sends only once every NPU received all of the stage before
            opened = Const(1, 1)
            for stage in range(1, ENGINE_STAGES):
                opened = Mux(ss == stage, self.stage_open[stage - 1], opened)
            due &= opened
            # a plain loop, not a generator: a closure over ``rs`` would rename it in the Verilog
            past = []
            for stage in range(ENGINE_STAGES - 1):
                past.append((rs > stage) | (recv_stage_done & ((rs == stage) | (rs == last_stage))))
            m.d.comb += [self.send_stage.eq(ss), self.recv_past.eq(Cat(*past))]
        from_input = s_sent >= tx_["own_only"]              # this output flit is a received one
        forwarded = s_recv < rx_["fwd_count"]               # this received flit leaves again
        kout = (tx_["org"] + out_base + out_off)[:32]
        kin = (rx_["org"] + in_base + in_off)[:32]
        words = [(tx_["ws"] * mix_expr(kout, lane) + tx_["hs"])[:32] for lane in range(lanes)]
        own = words if width == 32 else [_fp16(x) for x in words]
        adding = s_sent < tx_["add_until"]
        in_stage = ~recv_stage_done | (rs == last_stage)    # beyond the last stage: extras
        want = due & (~from_input | held.r_rdy)             # an output flit can be issued
        last_out = (ss == last_stage) & (s_sent == tx_["send_count"] - 1)
        chunk_end = out_off + 1 == tx_["chunk"]            # the issued flit ends its chunk
        if width == 32:
            # int32: the wrapping add of the switch's adder, in the output path (0 cycles)
            incoming = [held.r_data[lane * width:(lane + 1) * width] for lane in range(lanes)]
            summed = [Mux(adding, (incoming[lane] + own[lane])[:32], incoming[lane])
                      for lane in range(lanes)]
            m.d.comb += [
                self.tx.valid.eq(want),
                self.tx.payload.data.eq(Mux(from_input, Cat(*summed), Cat(*own))),
                self.tx.payload.last.eq(last_out),
                self.chunk_end.eq(chunk_end),
            ]
            issue = want & self.tx.ready
        else:
            # fp16: every output flit goes through the project's reduction unit (the switch's
            # adder, hdl/designs/reduction/), so the output order is one pipeline's: a received flit
            # plus its own data, or a flit plus -0 (x + -0 = x for every x, -0 included); the
            # flit's ``last`` and ``chunk_end`` ride the adder's sideband, so they leave with it.
            # The sideband is the flit's framing (``last tag``), chunk_end in ``tag`` (the
            # engine's own tag is 0), as the switch's adder's: with the fabrics' 1-bit tag the
            # two units are one Verilog module (a 2-bit sideband of another layout would be a
            # second module of the same name, fred_reduction_<dtype>x<lanes>_sb2)
            adder = m.submodules.adder = ReductionUnit(dtype=self.flit.dtype, lanes=lanes,
                                                        sideband=framing_layout(self.flit))
            minus_zero = Cat(*[Const(0x8000, 16)] * lanes)
            m.d.comb += [
                adder.a.valid.eq(want), adder.b.valid.eq(want),
                adder.a.payload.data.eq(Mux(from_input, held.r_data, Cat(*own))),
                adder.a.payload.sideband.last.eq(last_out),
                adder.a.payload.sideband.tag.eq(chunk_end),
                adder.b.payload.data.eq(Mux(from_input & adding, Cat(*own), minus_zero)),
                self.tx.valid.eq(adder.o.valid),
                self.tx.payload.data.eq(adder.o.payload.data),
                self.tx.payload.last.eq(adder.o.payload.sideband.last),
                self.chunk_end.eq(adder.o.payload.sideband.tag[0]),
                adder.o.ready.eq(self.tx.ready),
            ]
            issue = adder.a.valid & adder.a.ready
        m.d.comb += [
            self.tx.payload.tag.eq(0),
            held.r_en.eq(issue & from_input),
            held.w_data.eq(self.rx.payload.data),
            held.w_en.eq(self.rx.valid & self.rx.ready & forwarded),
            self.rx.ready.eq(running & ~stall & in_stage & (~forwarded | held.w_rdy)),
        ]

        def step(off, base, chunk, last_base):
            with m.If(off + 1 == chunk):
                m.d.sync += [off.eq(0), base.eq(Mux(base == 0, last_base, base - chunk))]
            with m.Else():
                m.d.sync += off.eq(off + 1)

        tx_fire = self.tx.valid & self.tx.ready
        rx_fire = self.rx.valid & self.rx.ready
        with m.If(~self.start):
            with m.If(tx_fire):
                m.d.sync += self.sent.eq(self.sent + 1)
            with m.If(issue):
                m.d.sync += s_sent.eq(s_sent + 1)
                step(out_off, out_base, tx_["chunk"], tx_["last_base"])
            with m.Elif(running & send_stage_done & (ss != last_stage)):
                # next stage (one cycle): its counters and chunk walk start afresh
                m.d.sync += [ss.eq(ss + 1), s_sent.eq(0), out_off.eq(0),
                             out_base.eq(field(tx_row, "out_base")), *load_tx]
            with m.If(rx_fire):
                step(in_off, in_base, rx_["chunk"], rx_["last_base"])
            with m.Elif(running & recv_stage_done & (rs != last_stage)):
                m.d.sync += [rs.eq(rs + 1), s_recv.eq(0), in_off.eq(0),
                             in_base.eq(field(rx_row, "in_base")), *load_rx]
        # -- check ------------------------------------------------------------------------------
        expected = Cat(*[(rx_["wr"] * mix_expr(kin, lane) + rx_["hr"])[:32] for lane in range(lanes)])
        beyond = recv_stage_done              # only when in the last stage (rx.ready)
        checked = s_recv >= rx_["check_from"]
        final = (rs == last_stage) & (s_recv == rx_["recv_count"] - 1)
        if width == 32:
            bad = beyond | (checked & ((self.rx.payload.data != expected) |
                                       (self.rx.payload.last != final)))
        else:
            # fp16 sums depend on the order of the additions: every received flit is folded
            # into ``hash`` (FNV-1a style on the data word) and compared after the run with the
            # golden model's (hdl.compiler.fabric_golden), in the switches' configured tree order
            bad = beyond | (self.rx.payload.last != final)
        with m.If(rx_fire & ~self.start):
            m.d.sync += [self.received.eq(self.received + 1), s_recv.eq(s_recv + 1),
                         self.hash.eq(((self.hash ^ self.rx.payload.data) * HASH_MULTIPLIER)[:32])]
            with m.If(bad):
                m.d.sync += self.errors.eq(self.errors + 1)
                with m.If(self.first_error == 0):
                    m.d.sync += self.first_error.eq(self.received + 1)
            with m.If(beyond):
                m.d.sync += self.extra.eq(self.extra + 1)
        m.d.comb += self.done.eq(running & (ss == last_stage) & send_stage_done
                                 & (self.sent == regs["send_total"])
                                 & (rs == last_stage) & recv_stage_done)
        return m


def connect_rx_between_collectives(m, source, engine: NpuEngine, running, trace_done, current=None) -> None:
    """Connect the stream ``source`` to ``engine.rx`` for an NPU that runs several collectives
    in turn (an iteration trace). ``running``: the trace sequencer has started the engine on a
    collective and not yet seen it done (:attr:`TraceSequencer.engine_running`);
    ``trace_done``: high once the trace's last collective is over.

    The engine takes flits only while it runs a collective and is not done with it. Between
    two collectives it would still take them (as extras, so that a one-collective run sees any
    flit too many), and a ring neighbour that finished early may already send the next
    collective's flits: they wait at ``source`` (not ready) until the engine has started on
    it. Why the sequencer's state and not the engine's ``done`` alone: the program loader
    rewrites the engine's ``send_total`` for the next collective while the engine is idle,
    and ``done`` compares ``sent`` with it, so ``done`` drops between collectives whenever the
    next one has another size; and in the engine's ``start`` cycle a taken flit is counted
    nowhere. Once the trace is done the engine takes flits again, so a flit too many is still
    counted as an extra, never left waiting unseen. ``valid`` is gated by state only, never by
    ``ready``.

    ``current`` (default None: every flit): high when the flit ``source`` offers belongs to
    the collective the engine runs (the packet fabric's packet numbers,
    :class:`~hdl.designs.iteration.PacketTraceNpu`); a flit of another collective then waits
    at ``source`` too, while the engine runs, received its count, or still sends -- it is
    never taken as this collective's data or extra."""
    taking = running & ~engine.done if current is None else running & ~engine.done & current
    hold = ~taking & ~trace_done
    m.d.comb += [engine.rx.payload.eq(source.payload),
                 engine.rx.valid.eq(source.valid & ~hold),
                 source.ready.eq(engine.rx.ready & ~hold)]
