"""One input port of the packet switch: a buffer per data virtual channel, credit return, and the
header check that drops malformed packets whole."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.hdl import Mux
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.flit import FlitFormat
from hdl.contracts.packet import DATA_VCS, PacketFormat
from hdl.designs.layouts import flit_layout, struct_layout

__all__ = ["VCInputBuffer", "COUNTER_BITS", "link_signature"]

def link_signature(shape) -> wiring.Signature:
    """A credit-based link, seen from the sender: ``valid`` and ``payload``, no ``ready`` (the
    sender spends credits instead; a stream with a constant ``ready`` cannot be a Verilog port)."""
    return wiring.Signature({"valid": Out(1), "payload": Out(shape)})


#: Width of the dropped-packet counter (saturates).
COUNTER_BITS = 16


class VCInputBuffer(wiring.Component):
    """Input port: one FIFO of ``depth`` flits per data VC (MP, DP, PP), credit-based.

    Parameters (keyword-only, validated):
        flit: :class:`FlitFormat` whose ``tag_width`` is the header width of ``packet``.
        packet: :class:`PacketFormat` (header layout, packet length).
        phases: K, the number of stored configurations (a header's ``phase`` must be < K and
            loaded).
        depth: flits per data VC (>= ``packet.packet_flits``, so a whole packet always fits:
            the sender reserves a packet's worth of credits, virtual cut-through).
        dest_limit: 0 (default) = no online routing; else the default phase index
            ``packet.online_phase`` (not a stored phase: K < 2**phase_bits) is well formed when
            the header's ``dest`` < ``dest_limit`` (the switch's P).

    Members:
        i: ``In(link_signature(flit))``: the link (``valid``, ``payload``). No ``ready``: the sender
            holds one credit counter per data VC, initialised to ``depth``, spends one per flit
            and gets one back per pulse on ``credit``; it never sends a flit without a credit.
        credit: ``Out(2).array(3)``: ``credit[v]`` is the number of VC v slots freed (0..2: a
            flit leaves on ``o`` this cycle, and a flit of a dropped packet that was charged to
            VC v arrived in the cycle before; both can happen in one cycle, so it is a count,
            not a pulse). Latency: a read's credit in the cycle of the read, a dropped flit's
            one cycle after it arrived (registered), so ``credit`` depends combinationally on
            no input but ``o.ready`` and ``sel``; never on ``i``.
        loaded: ``In(K)``: the configuration memory's loaded slots.
        head_valid, head_first: ``Out(3)``: VC v holds a flit; that flit starts a packet.
        head: ``Out(struct of the header).array(3)``: the header of VC v's head flit (every
            stored flit carries its packet's header, copied from the first flit).
        sel: ``In(2)``: the VC ``o`` reads.
        o: ``Out(stream.Signature(flit))``: VC ``sel``'s head flit; ``valid`` depends on ``sel``
            combinationally, never on ``o.ready``.
        dropped: ``Out(COUNTER_BITS)``: malformed packets dropped (saturating);
        bad_header: ``Out(1)``: sticky, some packet was dropped;
        overflow: ``Out(1)``: sticky, a flit arrived for a full VC (the sender broke the credit
            protocol; the flit is lost). A simulation assertion: benches require it stays 0.

        ctrl: ``Out(stream.Signature(flit))``: the control VC's head flit (``ctrl_depth`` > 0);
        ctrl_credit: ``Out(2)``: control VC slots freed (as ``credit``: a dropped control
            flit's one cycle after it arrived).

    Control VC (``ctrl_depth`` > 0, docs/switch.md, Packet switch): a packet with ``vc`` = 3 is a one-flit control
    packet (ACK / NACK: ``phase`` holds its kind, ``seq`` and ``flow`` what it acknowledges);
    it goes to a FIFO of ``ctrl_depth`` flits, credited like the data VCs. A control packet of
    more than one flit is malformed and dropped whole. With ``ctrl_depth`` = 0, ``vc`` = 3 is
    not a VC of this port (dropped, no credit returned).

    A packet's header is read from its first flit: ``phase`` >= K or not loaded (and not the
    default index with a ``dest`` in range when ``dest_limit`` > 0), or ``vc`` not a data VC, drops the whole packet (every flit up to ``last``; none is stored, so none is ever
    forwarded) and counts it. The later flits of a packet are stored with the first flit's
    header whatever their own tag says. Latency: a flit written in cycle t is at the head from
    cycle t + 1 (``fifo.SyncFIFO``).
    """

    def __new__(cls, *, flit: FlitFormat, packet: PacketFormat, phases: int, depth: int,
                ctrl_depth: int = 0, dest_limit: int = 0):
        # Validate before the object exists (Amaranth warns about an Elaboratable never elaborated).
        cls.check(flit=flit, packet=packet, phases=phases, depth=depth, ctrl_depth=ctrl_depth,
                  dest_limit=dest_limit)
        return super().__new__(cls)

    @staticmethod
    def check(*, flit: FlitFormat, packet: PacketFormat, phases: int, depth: int,
              ctrl_depth: int = 0, dest_limit: int = 0) -> None:
        """Raise :class:`FredError` naming a bad parameter."""
        if isinstance(dest_limit, bool) or not isinstance(dest_limit, int) or dest_limit < 0:
            raise FredError(f"dest_limit must be an integer >= 0, got {dest_limit!r}")
        if dest_limit:
            if not packet.dest_bits or dest_limit > 1 << packet.dest_bits:
                raise FredError(f"online routing to {dest_limit} ports needs a PacketFormat with "
                                f"dest_bits >= {max(1, (dest_limit - 1).bit_length())}, got "
                                f"dest_bits={packet.dest_bits}")
            if isinstance(phases, int) and phases > packet.online_phase:
                raise FredError(f"online routing reserves phase index {packet.online_phase}: "
                                f"phases must be <= {packet.online_phase}, got {phases}")
        if isinstance(ctrl_depth, bool) or not isinstance(ctrl_depth, int) or ctrl_depth < 0:
            raise FredError(f"ctrl_depth must be an integer >= 0, got {ctrl_depth!r}")
        if flit.tag_width != packet.header_width:
            raise FredError(f"the flit's tag_width ({flit.tag_width}) must be the header width "
                            f"({packet.header_width})")
        if not isinstance(phases, int) or not 1 <= phases <= (1 << packet.phase_bits):
            raise FredError(f"phases must be in 1..{1 << packet.phase_bits}, got {phases!r}")
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < packet.packet_flits:
            raise FredError(f"depth must be an integer >= packet_flits ({packet.packet_flits}), "
                            f"got {depth!r}")

    def __init__(self, *, flit: FlitFormat, packet: PacketFormat, phases: int, depth: int,
                 ctrl_depth: int = 0, dest_limit: int = 0):
        self.flit, self.packet, self.phases, self.depth = flit, packet, phases, depth
        self.dest_limit = dest_limit
        self.ctrl_depth = ctrl_depth
        header = struct_layout(packet.header)
        shape = flit_layout(flit)
        super().__init__({
            "i": In(link_signature(shape)),
            "credit": Out(2).array(len(DATA_VCS)),
            "loaded": In(phases),
            "head_valid": Out(len(DATA_VCS)),
            "head_first": Out(len(DATA_VCS)),
            "head": Out(header).array(len(DATA_VCS)),
            "sel": In(2),
            "o": Out(stream.Signature(shape)),
            "dropped": Out(COUNTER_BITS),
            "bad_header": Out(1),
            "overflow": Out(1),
            "ctrl": Out(stream.Signature(shape)),
            "ctrl_credit": Out(2),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        nvc = len(DATA_VCS)
        width = self.flit.width
        fifos = [fifo.SyncFIFO(width=width, depth=self.depth) for _ in range(nvc)]
        for v, f in enumerate(fifos):
            m.submodules[f"vc{v}"] = f

        word = self.i.payload
        header = word.tag
        phase = header[:self.packet.phase_bits]
        vc = header[self.packet.phase_bits:self.packet.phase_bits + 2]

        in_packet = Signal()          # a packet's first flit has been seen, not yet its last
        dropping = Signal()           # ... and that packet is being dropped
        packet_vc = Signal(2)
        packet_tag = Signal(self.flit.tag_width)
        charged = Signal()            # the dropped packet's vc is a data VC (the sender paid)
        # a dropped flit's credit leaves one cycle after the flit arrived (a register): the
        # credit outputs then depend on no input of the same cycle, so a fabric can be cut at
        # a link into parts simulated in lock step (docs/switch.md, "Links and credits")
        drop_credit = Signal(nvc)

        first = ~in_packet
        loaded_bit = Signal()
        for k in range(self.phases):
            with m.If(phase == k):
                m.d.comb += loaded_bit.eq(self.loaded[k])
        if self.dest_limit:
            f = self.packet.header["dest"]
            dest = header[f.offset:f.offset + f.width]
            with m.If(phase == self.packet.online_phase):
                m.d.comb += loaded_bit.eq(dest < self.dest_limit)
        is_ctrl = Signal()
        m.d.comb += is_ctrl.eq((vc == 3) & (self.ctrl_depth > 0))
        # phase >= K leaves loaded_bit at 0; a control packet is one flit
        good = Mux(is_ctrl, word.last, loaded_bit & (vc < nvc))
        ctrl_fifo = None
        if self.ctrl_depth:
            ctrl_fifo = m.submodules.ctrl_vc = fifo.SyncFIFO(width=width, depth=self.ctrl_depth)
        ctrl_drop_credit = Signal()
        cur_vc = Signal(2)
        cur_tag = Signal(self.flit.tag_width)
        cur_drop = Signal()
        cur_charged = Signal()
        m.d.comb += [
            cur_vc.eq(Mux(first, vc, packet_vc)),
            cur_tag.eq(Mux(first, header, packet_tag)),
            cur_drop.eq(Mux(first, ~good, dropping)),
            cur_charged.eq(Mux(first, (vc < nvc) | is_ctrl, charged)),
        ]
        stored = Signal(width)
        m.d.comb += stored.eq(word.as_value())
        m.d.comb += stored[width - self.flit.tag_width:].eq(cur_tag)

        m.d.sync += [drop_credit.eq(0), ctrl_drop_credit.eq(0)]
        with m.If(self.i.valid):
            m.d.sync += [in_packet.eq(~word.last), packet_vc.eq(cur_vc), packet_tag.eq(cur_tag),
                         dropping.eq(cur_drop), charged.eq(cur_charged)]
            with m.If(first & ~good):
                m.d.sync += self.bad_header.eq(1)
                with m.If(self.dropped != (1 << COUNTER_BITS) - 1):
                    m.d.sync += self.dropped.eq(self.dropped + 1)
            for v, f in enumerate(fifos):
                with m.If(cur_vc == v):
                    with m.If(cur_drop):
                        m.d.sync += drop_credit[v].eq(cur_charged)
                    with m.Elif(f.w_rdy):
                        m.d.comb += f.w_en.eq(1)
                    with m.Else():
                        m.d.sync += self.overflow.eq(1)
            if ctrl_fifo is not None:
                with m.If(cur_vc == 3):
                    with m.If(cur_drop):
                        m.d.sync += ctrl_drop_credit.eq(cur_charged)
                    with m.Elif(ctrl_fifo.w_rdy):
                        m.d.comb += ctrl_fifo.w_en.eq(1)
                    with m.Else():
                        m.d.sync += self.overflow.eq(1)
        for v, f in enumerate(fifos):
            m.d.comb += f.w_data.eq(stored)
        if ctrl_fifo is not None:
            ctrl_read = Signal()
            m.d.comb += [
                ctrl_fifo.w_data.eq(stored),
                self.ctrl.valid.eq(ctrl_fifo.r_rdy),
                self.ctrl.payload.eq(ctrl_fifo.r_data),
                ctrl_read.eq(self.ctrl.ready & ctrl_fifo.r_rdy),
                ctrl_fifo.r_en.eq(ctrl_read),
                self.ctrl_credit.eq(ctrl_read + ctrl_drop_credit),
            ]

        # ---- read side -------------------------------------------------------------------
        mid = Signal(nvc)             # VC v's head packet has been partly read
        for v, f in enumerate(fifos):
            head_word = f.r_data
            read = Signal(name=f"read{v}")
            m.d.comb += [
                self.head_valid[v].eq(f.r_rdy),
                self.head_first[v].eq(~mid[v]),
                self.head[v].eq(head_word[width - self.flit.tag_width:]),
                read.eq((self.sel == v) & self.o.ready & f.r_rdy),
                f.r_en.eq(read),
                self.credit[v].eq(read + drop_credit[v]),
            ]
            with m.If(read):
                # the last flag sits just above the data
                m.d.sync += mid[v].eq(~head_word[self.flit.data_width])
            with m.If(self.sel == v):
                m.d.comb += [self.o.valid.eq(f.r_rdy), self.o.payload.eq(head_word)]
        return m
