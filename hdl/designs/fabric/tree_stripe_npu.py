"""``TreeStripeNpu``: an NPU of the striped gradient reduce-out on Fred-B/D's trees
(docs/fabric_rtl.md, "Fred-B/D, the shared stored flows", plan point 6, and "Fred-B's weight
streaming and reduce-out on the fabric", point 9): it sends its own data of every stripe, one
packet of each stripe in turn, each packet with its stripe as the header's flow id and its
number in the stripe as ``seq``; the switches add the NPUs' packets of a stripe on the way to
its controller. It receives nothing (a flit that arrives is counted as an error).

The order: :func:`hdl.compiler.io_stripe_trees.home_late_order`, the one packet order (packet p
of stripes 0 .. C - 1, then packet p + 1; docs/switch.md, host rule 5) with the packets of the
*home* stripes (those whose controller is on this NPU's L1, the ``home`` mask) ``delay`` places
later. Every NPU of an L1 follows the same order and the others' packets keep the one order, so
at every switch each input carries its flows' packets in one order its partners share; a home
packet meets the L2's partial sum of the other L1s, which was sent ``delay`` places earlier and
waits at the downlink input instead of the home L1's NPU inputs waiting for it (the one order,
``delay`` 0, pays one L1 -> L2 -> L1 way per packet). The delay is deadlock-free up to the
window rule of :func:`hdl.compiler.io_stripe_trees.home_delay` (the downlink input's depth).

Not paced: the stripe's sink is its controller (16/375 flit per cycle on the wafer); the
switches hold each stripe's packet until its controller has room for it, and every packet
behind it on the NPU's input waits (host rule 4); in this request all the traffic is the
reduce-out itself.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
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

    Path: two cursors over the one order (the other stripes', the home stripes'), each at its
    next packet (stripe k, packet p, index ``C p + k``; the next stripe of its kind by a
    priority encoder, so a cursor skips the other kind's packets in no cycle); the packet
    sent is the home cursor's when its ``index + delay`` is below the other's, else the other's;
    a flit generator (flit t: data index ``k S + 8 p + t``, lane l ``ws * mix(index, l) + hs``;
    ``last`` at a packet's end or the stripe's) -> :class:`Packetizer` (``forward``: the packet
    ends at ``last``, ``seq`` = p, ``flow`` = k; a packet starts with credits for a whole
    packet). Latency 0 (combinational); valid never waits for ready; no idle cycle between
    packets.
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
        # two cursors over the one packet order (index n = C p + k): 0 walks the other stripes,
        # 1 the home stripes; the next packet is the cursor with the lower key (n, or n + delay
        # + 1/2 for home: home_late_order), so a cursor skips the other's packets at no cost
        count = self.stripes
        in_order = Signal(count, name="in_order")      # stripes 0 .. stripes - 1 of the program
        home = Signal(count, name="home_mask")
        m.d.comb += [in_order.eq(Cat(*[regs["stripes"] > j for j in range(count)])),
                     home.eq(Cat(regs["home"], regs["home_hi"])[:count])]
        masks = (in_order & ~home, in_order & home)
        ks = [Signal(range(count), name=f"stripe_{c}") for c in range(2)]
        bases = [Signal(32, name=f"base_{c}") for c in range(2)]       # 8 p
        rounds = [Signal(32, name=f"round_{c}") for c in range(2)]     # C p
        spent = [Signal(name=f"spent_{c}") for c in range(2)]          # every packet of its stripes sent
        firsts = [_lowest(m, mask, count, f"first_{c}") for c, mask in enumerate(masks)]
        nexts = [_lowest(m, mask & ~Cat(*[ks[c] >= j for j in range(count)]), count, f"next_{c}")
                 for c, mask in enumerate(masks)]
        started = Signal(name="started")
        late = Signal(name="late")                     # the home cursor's packet goes next
        m.d.comb += late.eq(~spent[1] & (spent[0] | (rounds[1] + ks[1] + regs["delay"] < rounds[0] + ks[0])))
        k, base = Mux(late, ks[1], ks[0]), Mux(late, bases[1], bases[0])
        t = Signal(range(size), name="in_packet")
        running = Signal(name="running")
        m.d.comb += running.eq(started & ~(spent[0] & spent[1]))
        index = (k * regs["stripe_flits"] + base + t)[:32]
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
            m.d.sync += [started.eq(1), t.eq(0), self.sent.eq(0)]
            for c in range(2):
                first, found = firsts[c]
                m.d.sync += [ks[c].eq(first), bases[c].eq(0), rounds[c].eq(0), spent[c].eq(~found)]
        with m.Elif(tx.i.valid & tx.i.ready):
            m.d.sync += [self.sent.eq(self.sent + 1), t.eq(Mux(last, 0, t + 1))]
            for c in range(2):
                (first, _), (after, more) = firsts[c], nexts[c]
                with m.If(last & (late == c)):
                    with m.If(more):                   # the cursor's next stripe, packet p
                        m.d.sync += ks[c].eq(after)
                    with m.Else():                     # packet p + 1 of its first stripe
                        m.d.sync += [ks[c].eq(first), bases[c].eq(bases[c] + size),
                                     rounds[c].eq(rounds[c] + regs["stripes"]),
                                     spent[c].eq(bases[c] + size >= regs["stripe_flits"])]
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
        m.d.comb += [self.done.eq(started & spent[0] & spent[1]), self.seq_errors.eq(rx.seq_errors),
                     self.link_errors.eq(tx.credit_error | rx.overflow)]
        return m


def _lowest(m: Module, mask, width: int, name: str) -> tuple[Signal, Signal]:
    """(the lowest set bit of ``mask``, whether it has one): a priority encoder, combinational."""
    at, found = Signal(range(width), name=name), Signal(name=f"{name}_found")
    for j in reversed(range(width)):
        with m.If(mask[j]):
            m.d.comb += [at.eq(j), found.eq(1)]
    return at, found
