"""``StripeNpu``: an NPU of the striped I/O request on Fred-A/C (docs/fabric_rtl.md, "Striped
I/O: every controller at once"). Weight streaming (io-broadcast): it receives every stripe,
from the NPU before it on each stripe's chain or from the stripe's controller, interleaved per
packet, checks every flit against its stripe, and sends each received packet on, whole, to
the next member of that stripe's chain (a stripe whose chain ends here is kept). Gradient
reduce-out (io-reduce, :data:`~hdl.contracts.io_stripes.NPU_OWN_REGS` set): it adds its own
data to every flit it forwards (the partial sum it received is checked first) and sends the
stripe it starts (at most one) from its own data, its packets taking turns with the forwarded
ones at packet boundaries; the entry NPU's next member is the stripe's controller.

**The started stripe leaves a bubble** (session 13; docs/fabric_validation.md, "The striped
reduce-out on the wafer"). The reduce-out's chains all run the NPUs in one ring (NPU r + 1 ->
r, wrapping; every NPU receives every stripe from the same NPU), a cycle of buffers on DP's
VC: each NPU's receive FIFO, its L1 input, and between L1s the uplink's queue with the L2's
input and the next L1's input from the L2, each used by one hop of the ring. A packet moves
into the next buffer only with room for a whole packet (virtual cut-through); the only exits
are the controllers, at the chains' ends. With its own packets started on room for one, the
started stripes filled every buffer of the ring (traced in Amaranth on the 6-NPU Fred-A with
6 controllers: every receive FIFO and every ring input at 24 of 24 flits, every head waiting
for an output with no credits, no packet at a controller) and nothing moved again. So a
packet of the started stripe starts only when the packetizer holds credits for **two** whole
packets (``room2``: the bubble rule of docs/switch.md, "Entries leave a bubble", with this
NPU as the entry), a forwarded one with credits for one, and when the started stripe's turn
finds no room for two, the forwarded packet goes first. *Deadlock-freedom argument*: (1) only
a started packet adds a packet to the ring; a forwarded packet takes one packet of room in the
next buffer and frees one in its own; a packet into a controller leaves the ring (the
controller drains at its memory's rate whatever the ring does); a started packet takes one of
at least two packets of room, so after every move the ring has a whole packet of free room;
(2) every buffer of the ring is a multiple of ``packet_flits`` deep and every packet reserves
its room at its start, so a buffer with a packet of room can take one more; (3) walking back
along the ring from that buffer, the first non-empty buffer's head packet leaves the ring
(into a controller, eventually) or needs only the room after it, and takes it (the switches'
argument, docs/switch.md; at this NPU the forwarded packet is picked whenever the started one
cannot go, except during a claim (``claim_after``, session 16), which holds it only while the
L1 input's credits come back and its room is below two packets: the room then only grows, so
the claim ends with the started packet's start or lapses after 2 x ``packet_flits`` quiet
cycles, and comes again only ``claim_after`` cycles later). So the ring never stops while it holds a packet, and once it is empty every
started packet finds its room. What the argument counts in whole packets: a stripe's last
packet may be shorter than ``packet_flits``; it reserves a whole packet's room at its start
but frees only its own flits, so a buffer behind it can be left with less than a packet of
room while holding fewer packets than its depth (not shown to lock; the wafer's 1,800- and
4,014-flit requests end every stripe on a short packet, docs/fabric_validation.md).

**The started stripe is paced to its controller** (``rate``; host rule 4 of docs/switch.md,
"Slow sinks"): the stripe's sink is its controller, which drains 16/375 flit per cycle on the
wafer; started at link rate, its packets reach the entry NPU faster than the controller
takes them and wait in the ring's buffers before it, the ring's packets of other stripes
behind them (inferred from the pacing's effect, not traced; with the bubble alone the 6-NPU
reproducer took 4,889 cycles against the controllers' 2,812.5, the Fred-A wafer at 4,014
flits 46,225 against the model's 8,141.4). A
:class:`~hdl.designs.fabric.write_pacer.WritePacer` at ``rate`` (one writer: the chain),
whole packets, between the stripe's data and the packetizer: 2,948 cycles. The pacing is
not part of the deadlock-freedom argument (a packet into a controller leaves the ring
whatever the rate); it keeps the exits from blocking the ring.

A :class:`~hdl.designs.fabric.packet_fabric_top.PacketFabricTop` ``npu`` component (the
same members as :class:`~hdl.designs.fabric.io_controller.IoController` at the link, plus
``start``, the program port, ``done`` and :attr:`read_names`).
"""

from __future__ import annotations

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.flit import FlitFormat
from hdl.contracts.io_stripes import (NPU_HEADER_REGS, NPU_OWN_REGS, NPU_PAGE_REG, NPU_PAGE_SIZE, NPU_ROUTE_BASE,
                                      STRIPE_REGS)
from hdl.contracts.packet import DATA_VCS, PacketFormat
from hdl.designs.layouts import flit_layout
from hdl.designs.switch.control_unit import check_claim_cycles
from hdl.designs.switch.packet_switch import credits_returning

from .depacketizer import Depacketizer
from .io_controller import endpoint_link_members
from .npu_engine import mix_expr
from .packetizer import Packetizer
from .stripe_receiver import StripeReceiver
from .write_pacer import WritePacer

__all__ = ["StripeNpu"]


class StripeNpu(wiring.Component):
    """Parameters: ``flit`` (int32 :class:`FlitFormat`), ``packet`` (:class:`PacketFormat` with
    ``stripe_bits`` for ``stripes``), ``depth`` (flits per data VC of the L1's input buffer and
    of this NPU's receive buffer; at least 2 x ``packet_flits``, the bubble rule), ``stripes``,
    ``rate`` (None: the started stripe at link rate; ``(a, b)``: paced to a / b flits per
    cycle, whole packets, its first packet unpaced: the fabric's ``io_rate``), ``key`` (the
    header field naming a packet's stripe: ``"stripe"``, the default, Fred-A/C's chains; or
    ``"flow"``, Fred-B's trees served as shared stored flows, where the flow id is the stripe,
    and the packets it sends carry their stripe as their flow), ``claim_after``
    (0 = never, else 1..4095 cycles: a started packet that has waited that long for room for
    two *claims* the L1 input: no forwarded packet starts until the room reaches two, and only
    while credits keep coming back, a credit within the last 2 x ``packet_flits`` cycles; the
    switch's entry claim, docs/switch.md, "Entries leave a bubble";
    :func:`~hdl.designs.fabric.packet_fabric_top.claim_interval`).

    Members: ``o`` / ``credit_in`` (to the L1's input, its credits back), ``i`` / ``credit_out``
    (from the L1's output, credits to it), ``start``, ``we`` / ``waddr`` / ``wdata`` (the
    program: :func:`hdl.contracts.io_stripes.stripe_npu_writes`), ``done`` (every stripe
    received, and the stripe it starts sent; what it forwards has left with it), and the read
    registers :attr:`read_names`.

    Path: :class:`Depacketizer` (``headers``: each flit's packet ``seq`` and ``stripe``) ->
    :class:`StripeReceiver` (checks) -> :class:`Packetizer` (``forward``: a received packet
    leaves whole, with its own ``seq`` and ``stripe``, ``flow`` = the stripe's route, when it
    holds credits for a whole packet). Latency: the receive FIFO's cycle; the rest is
    combinational. A received flit of a stripe that is not forwarded is taken at once.
    """

    read_names = ("done", "received", "errors", "first_error", "seq_errors", "link_errors")

    def __init__(self, *, flit: FlitFormat, packet: PacketFormat, depth: int, stripes: int, rate=None,
                 key: str = "stripe", claim_after: int = 0):
        if key not in ("stripe", "flow"):
            raise FredError(f"a stripe NPU's key is 'stripe' or 'flow' (the header field naming a packet's "
                            f"stripe), got {key!r}")
        self.key = key
        try:
            check_claim_cycles(claim_after, "a stripe NPU's ")
        except FredError:
            self._MustUse__silence = True
            raise
        self.claim_after = claim_after
        if rate is not None and not (isinstance(rate, tuple) and len(rate) == 2):
            raise FredError(f"a stripe NPU's rate is None or (a, b), a / b flits per cycle; got {rate!r}")
        self.rate = rate
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 2 * packet.packet_flits:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(f"a stripe NPU's started stripe needs room for two packets in its L1's input: "
                            f"depth >= {2 * packet.packet_flits} (2 x packet_flits), got {depth!r}")
        self.flit, self.packet, self.depth, self.stripes = flit, packet, depth, stripes
        super().__init__({
            **endpoint_link_members(flit, packet),
            "start": In(1), "we": In(1), "waddr": In(6), "wdata": In(32),
            "done": Out(1), "received": Out(32), "errors": Out(32), "first_error": Out(32),
            "seq_errors": Out(32), "link_errors": Out(32),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        fmt, n = self.packet, self.stripes
        key_bits = fmt.flow_bits if self.key == "flow" else fmt.stripe_bits
        tagged = FlitFormat(dtype=self.flit.dtype, lanes=self.flit.lanes, tag_width=fmt.seq_bits + key_bits)
        rx = m.submodules.rx = Depacketizer(flit=tagged, packet=fmt, depth=self.depth, headers=self.key)
        recv = m.submodules.recv = StripeReceiver(stripes=n, lanes=self.flit.lanes, seq_bits=fmt.seq_bits,
                                                  stripe_bits=key_bits)
        tx = m.submodules.tx = Packetizer(flit=self.flit, packet=fmt, depth=self.depth, forward=True)
        # the program port: a page register, then 63 registers a page
        page = Signal(8)
        address = Signal(16)
        m.d.comb += address.eq(page * NPU_PAGE_SIZE + self.waddr)
        write = self.we & (self.waddr != NPU_PAGE_REG)
        with m.If(self.we & (self.waddr == NPU_PAGE_REG)):
            m.d.sync += page.eq(self.wdata)
        routes = [Signal(9, name=f"route{k}") for k in range(n)]
        phase, vc = Signal(fmt.phase_bits), Signal(2)
        m.d.comb += [recv.we.eq(write & (address < len(STRIPE_REGS) * n)),
                     recv.waddr.eq(address), recv.wdata.eq(self.wdata)]
        with m.If(write):
            for k in range(n):
                with m.If(address == NPU_ROUTE_BASE + k):
                    m.d.sync += routes[k].eq(self.wdata)
            with m.If(address == NPU_HEADER_REGS["phase"]):
                m.d.sync += phase.eq(self.wdata)
            with m.If(address == NPU_HEADER_REGS["vc"]):
                m.d.sync += vc.eq(self.wdata)
        own = {name: Signal(32, name=f"own_{name}") for name in NPU_OWN_REGS}
        with m.If(write):
            for name, at in NPU_OWN_REGS.items():
                with m.If(address == at):
                    m.d.sync += own[name].eq(self.wdata)
        # receive -> check -> forward (or keep)
        tag = rx.o.payload.tag
        m.d.comb += [recv.i.valid.eq(rx.o.valid), rx.o.ready.eq(recv.i.ready),
                     recv.i.payload.data.eq(rx.o.payload.data), recv.i.payload.last.eq(rx.o.payload.last),
                     recv.i.payload.seq.eq(tag[:fmt.seq_bits]), recv.i.payload.stripe.eq(tag[fmt.seq_bits:])]
        forward = Array(routes)[recv.o.payload.stripe][8]
        lanes = self.flit.lanes

        def own_data(index):        # this NPU's data at ``index`` (io-reduce)
            return [(own["ws"] * mix_expr(index, lane) + own["hs"])[:32] for lane in range(lanes)]

        # a forwarded flit, with this NPU's data added in a reduce-out
        added = own_data(recv.o.payload.index)
        fwd_data = Cat(*[(recv.o.payload.data[32 * lane:32 * (lane + 1)] + Mux(own["add"] != 0, added[lane], 0))[:32]
                         for lane in range(lanes)])
        # the stripe this NPU starts from its own data (io-reduce), in packets as the
        # packetizer cuts them (``last`` at each packet's end, its number t // packet_flits)
        size = fmt.packet_flits
        # ``sent``: flits of the started stripe made (into the pacer, if any); ``out``: taken by
        # the packetizer
        sent, in_packet = Signal(32, name="start_sent"), Signal(range(size), name="start_in_packet")
        out = Signal(32, name="start_out")
        number = Signal(fmt.seq_bits, name="start_seq")
        # from the run's start until the started stripe is sent: not after it, when a loader
        # may already write the next collective's registers (a trace's next run)
        starting = Signal(name="starting")
        with m.If(self.start):
            m.d.sync += starting.eq(1)
        with m.Elif((own["start"] == 0) | (out >= own["start_flits"])):
            m.d.sync += starting.eq(0)
        made = Signal(flit_layout(self.flit), name="start_flit")
        made_valid = (own["start"] != 0) & (sent < own["start_flits"]) & starting
        made_last = (in_packet == size - 1) | (sent + 1 == own["start_flits"])
        m.d.comb += [made.data.eq(Cat(*own_data(own["start_org"] + sent))), made.last.eq(made_last)]
        if self.rate is None:       # unpaced: the started stripe at link rate
            start_valid, start_flit, made_ready = made_valid, made, Signal(name="start_ready")
        else:                       # paced to the stripe's controller, whole packets (host rule 4)
            pacer = m.submodules.pacer = WritePacer(flit_layout(self.flit), rate=self.rate, packet_flits=size)
            m.d.comb += [pacer.i.valid.eq(made_valid), pacer.i.payload.eq(made), pacer.divisor.eq(1),
                         pacer.restart.eq(self.start)]
            start_valid, start_flit, made_ready = pacer.o.valid, pacer.o.payload, pacer.i.ready
        start_stripe = (own["start"] - 1)[:key_bits]
        # the two sources take turns at packet boundaries (the packetizer sends a packet whole);
        # a started packet only with room for two (the bubble rule, module docstring), else the
        # forwarded one goes first
        inside, mine, turn = Signal(), Signal(name="from_start"), Signal(name="start_turn")
        claim = self._claim(m, start_valid, inside, mine, tx, vc)
        fwd_valid = recv.o.valid & forward & ~claim
        pick = Mux(inside, mine, start_valid & tx.room2 & (turn | ~fwd_valid))
        stripe = Mux(pick, start_stripe, recv.o.payload.stripe)
        route = Array(routes)[stripe]
        m.d.comb += [tx.i.valid.eq(Mux(pick, start_valid, fwd_valid)),
                     tx.i.payload.data.eq(Mux(pick, start_flit.data, fwd_data)),
                     tx.i.payload.last.eq(Mux(pick, start_flit.last, recv.o.payload.last)),
                     recv.o.ready.eq(~forward | (tx.i.ready & ~pick & ~claim)),
                     # key "flow": the flow id is the stripe (the shared stored flows)
                     tx.flow.eq(stripe if self.key == "flow" else route[:8]),
                     *([tx.stripe.eq(stripe)] if fmt.stripe_bits else []),
                     tx.seq_in.eq(Mux(pick, number, recv.o.payload.seq)),
                     tx.phase.eq(phase), tx.vc.eq(vc), tx.hold.eq(0)]
        taken = tx.i.valid & tx.i.ready
        if self.rate is None:
            m.d.comb += made_ready.eq(tx.i.ready & pick)
        else:
            m.d.comb += pacer.o.ready.eq(tx.i.ready & pick)
        with m.If(self.start):
            m.d.sync += [sent.eq(0), in_packet.eq(0)]
        with m.Elif(made_valid & made_ready):
            m.d.sync += [sent.eq(sent + 1), in_packet.eq(Mux(made_last, 0, in_packet + 1))]
        with m.If(self.start):
            m.d.sync += [out.eq(0), number.eq(0), inside.eq(0), turn.eq(0)]
        with m.Elif(taken):
            m.d.sync += [inside.eq(~tx.i.payload.last), mine.eq(pick)]
            with m.If(tx.i.payload.last):
                m.d.sync += turn.eq(~pick)      # the other source first at the next boundary
            with m.If(pick):
                m.d.sync += out.eq(out + 1)
                with m.If(start_flit.last):
                    m.d.sync += number.eq(number + 1)
        started_all = ~starting
        # the link
        m.d.comb += [self.o.valid.eq(tx.o.valid), self.o.payload.eq(tx.o.payload),
                     rx.i.valid.eq(self.i.valid), rx.i.payload.eq(self.i.payload)]
        for v in range(len(DATA_VCS)):
            m.d.comb += [tx.credit[v].eq(self.credit_in[v]), self.credit_out[v].eq(rx.credit[v])]
        m.d.comb += [rx.start.eq(self.start), recv.start.eq(self.start), tx.start.eq(self.start),
                     self.done.eq(recv.done & started_all), self.received.eq(recv.received),
                     self.errors.eq(recv.errors),
                     self.first_error.eq(recv.first_error), self.seq_errors.eq(recv.seq_errors),
                     self.link_errors.eq(tx.credit_error | rx.overflow)]
        return m

    def _claim(self, m, start_valid, inside, mine, tx, vc):
        """1 while the started stripe claims the L1 input (``claim_after``; always 0 without):
        at a packet boundary, its packet has waited ``claim_after`` cycles (since a started
        flit was last taken or since it came), the input lacks room for two, and a credit came
        back within the last 2 x ``packet_flits`` cycles. Then no forwarded packet starts, so
        the returning credits make room for two and the started packet goes. Why: at the NPU
        that feeds a half-rate uplink the L1 input's room comes back a packet at a time and the
        forwarded stream, needing one, took each (the started stripe starved, as a controller's
        at its entry output did); the wait keeps its share to one stripe's, and the claim lapses
        when the credits stop, so the ring's argument holds (module docstring, step (3))."""
        limit = self.claim_after
        if not limit:
            return Const(0, 1)      # unsigned: ``~claim`` stays one bit
        returning = credits_returning(m, vc, self.credit_in, self.packet.packet_flits)
        waited = Signal(range(limit + 1), name="start_waited")
        m.d.sync += waited.eq(Mux(~start_valid | (inside & mine), 0,
                                  Mux(waited == limit, limit, waited + 1)))
        claim = Signal(name="start_claim")
        m.d.comb += claim.eq((waited == limit) & returning & ~tx.room2 & ~inside)
        return claim
