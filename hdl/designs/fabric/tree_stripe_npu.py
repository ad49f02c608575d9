"""``TreeStripeNpu``: an NPU of the striped gradient reduce-out on Fred-B's trees
(docs/fabric_rtl.md, "Fred-B/D, the shared stored flows", plan point 6): it sends its own data
of every stripe, one packet of each stripe in turn, in the one packet order every sender follows
(:func:`hdl.compiler.io_stripe_trees.stripe_packet_order`: packet p of stripes 0 .. C - 1, then
packet p + 1; docs/switch.md, host rule 5), each packet with its stripe as the header's flow id
and its number in the stripe as ``seq``; the switches add the NPUs' packets of a stripe on the
way to its controller. It receives nothing (a flit that arrives is counted as an error).

Why one order: at every switch an NPU input carries packets of several reduce flows (every
stripe), and a packet is granted only with its whole gang at the heads of its partners' inputs;
with every sender in the same order the lowest packet not yet started is at the head of every
input it needs (docs/switch.md, "Why no deadlock").

Not paced: the stripe's sink is its controller (16/375 flit per cycle on the wafer); the
switches hold each stripe's packet until its controller has room for it, and every packet
behind it on the NPU's input waits (host rule 4); in this request all the traffic is the
reduce-out itself, whose packets leave in the one order anyway.
"""

from __future__ import annotations

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.flit import FlitFormat
from hdl.contracts.io_stripes import TREE_NPU_REGS
from hdl.contracts.packet import DATA_VCS, PacketFormat

from .depacketizer import Depacketizer
from .io_controller import endpoint_link_members
from .npu_engine import mix_expr
from .packetizer import Packetizer

__all__ = ["TreeStripeNpu"]


class TreeStripeNpu(wiring.Component):
    """Parameters: ``flit`` (int32 :class:`FlitFormat`), ``packet`` (:class:`PacketFormat`),
    ``depth`` (flits per data VC of the L1's input buffer: the packetizer's credits), ``stripes``
    (the most stripes a program may name: the flow ids).

    Members: ``o`` / ``credit_in`` (to the L1's input, its credits back), ``i`` / ``credit_out``
    (from the L1's output, credits to it), ``start``, ``we`` / ``waddr`` / ``wdata`` (the
    program, :data:`~hdl.contracts.io_stripes.TREE_NPU_REGS`,
    :func:`~hdl.contracts.io_stripes.tree_npu_writes`), ``done`` (every stripe's flits sent),
    and the read registers :attr:`read_names` (those of a
    :class:`~hdl.designs.fabric.stripe_npu.StripeNpu`: ``received`` counts flits that arrived,
    ``errors`` the same, since none should; ``sent``: flits sent).

    Path: a flit generator (stripe k, packet p, flit t: data index ``k S + 8 p + t``, lane l
    ``ws * mix(index, l) + hs``; ``last`` at a packet's end or the stripe's) -> :class:`Packetizer`
    (``forward``: the packet ends at ``last``, ``seq`` = p, ``flow`` = k; a packet starts with
    credits for a whole packet). Latency 0 (combinational); valid never waits for ready.
    """

    read_names = ("done", "received", "errors", "first_error", "seq_errors", "link_errors", "sent")

    def __init__(self, *, flit: FlitFormat, packet: PacketFormat, depth: int, stripes: int):
        if isinstance(stripes, bool) or not isinstance(stripes, int) or not 1 <= stripes <= 1 << packet.flow_bits:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(f"a tree stripe NPU's stripes are flow ids: 1..{1 << packet.flow_bits}, got {stripes!r}")
        self.flit, self.packet, self.depth, self.stripes = flit, packet, depth, stripes
        super().__init__({
            **endpoint_link_members(flit, packet),
            "start": In(1), "we": In(1), "waddr": In(6), "wdata": In(32),
            "done": Out(1), "received": Out(32), "errors": Out(32), "first_error": Out(32),
            "seq_errors": Out(32), "link_errors": Out(32), "sent": Out(32),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        fmt, size, lanes = self.packet, self.packet.packet_flits, self.flit.lanes
        rx = m.submodules.rx = Depacketizer(flit=self.flit, packet=fmt, depth=self.depth)
        tx = m.submodules.tx = Packetizer(flit=self.flit, packet=fmt, depth=self.depth, forward=True)
        regs = {name: Signal(32, name=f"reg_{name}") for name in TREE_NPU_REGS}
        with m.If(self.we):
            for name, at in TREE_NPU_REGS.items():
                with m.If(self.waddr == at):
                    m.d.sync += regs[name].eq(self.wdata)
        # the generator: stripe k (its first index ``org`` = k S), packet p (``base`` = 8 p), flit t
        k = Signal(range(self.stripes + 1), name="stripe")
        org, base = Signal(32, name="org"), Signal(32, name="base")
        t = Signal(range(size), name="in_packet")
        running = Signal()
        index = (org + base + t)[:32]
        in_stripe = base + t     # the flit's place in its stripe
        last = (t == size - 1) | (in_stripe + 1 == regs["stripe_flits"])
        m.d.comb += [tx.i.valid.eq(running),
                     tx.i.payload.data.eq(Cat(*[(regs["ws"] * mix_expr(index, lane) + regs["hs"])[:32]
                                                for lane in range(lanes)])),
                     tx.i.payload.last.eq(last),
                     tx.flow.eq(k), tx.seq_in.eq(base // size), tx.phase.eq(regs["phase"]),
                     tx.vc.eq(regs["vc"]), tx.hold.eq(0), tx.start.eq(self.start), rx.start.eq(self.start),
                     rx.last_seq.eq(0)]
        with m.If(self.start):
            m.d.sync += [running.eq(regs["stripes"] != 0), k.eq(0), org.eq(0), base.eq(0), t.eq(0),
                         self.sent.eq(0)]
        with m.Elif(tx.i.valid & tx.i.ready):
            m.d.sync += self.sent.eq(self.sent + 1)
            with m.If(~last):
                m.d.sync += t.eq(t + 1)
            with m.Elif(k + 1 < regs["stripes"]):       # the next stripe's packet p
                m.d.sync += [t.eq(0), k.eq(k + 1), org.eq(org + regs["stripe_flits"])]
            with m.Elif(base + size < regs["stripe_flits"]):    # packet p + 1 of stripe 0
                m.d.sync += [t.eq(0), k.eq(0), org.eq(0), base.eq(base + size)]
            with m.Else():
                m.d.sync += running.eq(0)
        sent_all = Signal(name="sent_all")
        with m.If(self.start):
            m.d.sync += sent_all.eq(0)
        with m.Elif(running & tx.i.ready & last & (k + 1 >= regs["stripes"]) & (base + size >= regs["stripe_flits"])):
            m.d.sync += sent_all.eq(1)
        # nothing should arrive: every flit that does is an error
        m.d.comb += rx.o.ready.eq(1)
        with m.If(self.start):
            m.d.sync += [self.received.eq(0), self.errors.eq(0), self.first_error.eq(0)]
        with m.Elif(rx.o.valid):
            m.d.sync += [self.received.eq(self.received + 1), self.errors.eq(self.errors + 1)]
            with m.If(self.first_error == 0):
                m.d.sync += self.first_error.eq(self.received + 1)
        m.d.comb += [self.o.valid.eq(tx.o.valid), self.o.payload.eq(tx.o.payload),
                     rx.i.valid.eq(self.i.valid), rx.i.payload.eq(self.i.payload)]
        for v in range(len(DATA_VCS)):
            m.d.comb += [tx.credit[v].eq(self.credit_in[v]), self.credit_out[v].eq(rx.credit[v])]
        m.d.comb += [self.done.eq(sent_all), self.seq_errors.eq(rx.seq_errors),
                     self.link_errors.eq(tx.credit_error | rx.overflow)]
        return m
