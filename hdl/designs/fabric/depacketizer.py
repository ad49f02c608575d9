"""``Depacketizer``: the NPU's receive buffer on the packet fabric (docs/fabric_rtl.md,
"Packet fabric"): holds the flits the L1 switch sends, returns their credits as the engine
takes them, checks each packet's sequence number."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.hdl import Cat
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.flit import FlitFormat
from hdl.contracts.packet import DATA_VCS, PacketFormat
from hdl.designs.layouts import flit_layout
from hdl.designs.switch.vc_input_buffer import link_signature

__all__ = ["Depacketizer"]


class Depacketizer(wiring.Component):
    """Parameters: ``flit`` (the engine's :class:`FlitFormat`), ``packet``
    (:class:`PacketFormat`), ``depth``: flits per data VC (the credits the L1 output holds).

    Members: ``i`` (``In(link_signature)``: from the L1's output link), ``credit``
    (``Out(2).array(3)``: a slot of VC v freed this cycle), ``o`` (``Out(stream)``: the
    engine's flits; ``last`` only on the last flit of the packet numbered ``last_seq``, the
    stream's end the engine checks), ``start`` (In: the next packet expected is seq 0),
    ``last_seq`` (In: the sequence number of the last packet of this NPU's run),
    ``seq_errors`` (Out(16), saturating: packets whose ``seq`` was not the next expected one:
    lost, duplicated or reordered), ``overflow`` (Out, sticky: a flit with no free slot).

    Buffer: one FIFO of 3 x ``depth`` flits (every VC's credits fit; the engine reads in
    arrival order). Latency: one cycle (the FIFO).

    ``headers`` (default False): for a receiver that checks sequences itself (the striped I/O
    request's :class:`~hdl.designs.fabric.stripe_receiver.StripeReceiver`, several senders, one
    count per stripe): ``o``'s ``tag`` (``flit.tag_width`` >= ``seq_bits`` + ``stripe_bits``)
    carries each flit's packet ``seq`` and ``stripe`` (LSB first), ``last`` marks every
    packet's end, and ``seq_errors`` stays 0. ``headers="flow"``: the same with the header's
    ``flow`` in place of ``stripe`` (Fred-B's shared stored flows, where a packet's flow id is
    its stripe: docs/fabric_rtl.md, "Fred-B/D, the shared stored flows").

    ``with_seq`` (default False): a member ``o_seq`` (Out(``seq_bits``)) beside ``o``: the
    packet number of the flit ``o`` offers, for a receiver that takes each collective's
    packets only while it runs that collective (:class:`~hdl.designs.iteration.PacketTraceNpu`,
    docs/fabric_iteration.md, "Collectives kept apart at a packet NPU"); off, the module is
    built as before.
    """

    def __init__(self, *, flit: FlitFormat, packet: PacketFormat, depth: int, headers: bool | str = False,
                 with_seq: bool = False):
        if headers not in (False, True, "stripe", "flow"):
            raise FredError(f"a depacketizer's headers is False, True (the stripe field) or 'flow', got {headers!r}")
        self.flit, self.packet, self.depth, self.headers = flit, packet, depth, bool(headers)
        #: the header field a receiver with headers keys its stripes by, and its width
        self.key = "flow" if headers == "flow" else "stripe"
        self.key_bits = (packet.flow_bits if self.key == "flow" else packet.stripe_bits) if self.headers else 0
        if self.headers and flit.tag_width < packet.seq_bits + self.key_bits:
            raise FredError(f"a depacketizer with headers needs a tag of {packet.seq_bits + self.key_bits} "
                            f"bits (seq and {self.key}), got {flit.tag_width}")
        self.link_flit = FlitFormat(dtype=flit.dtype, lanes=flit.lanes, tag_width=packet.header_width)
        self.with_seq = bool(with_seq)
        super().__init__({
            "i": In(link_signature(flit_layout(self.link_flit))),
            "credit": Out(2).array(len(DATA_VCS)),
            "o": Out(stream.Signature(flit_layout(flit))),
            "start": In(1),
            "last_seq": In(packet.seq_bits),
            "seq_errors": Out(16),
            "overflow": Out(1),
            **({"o_seq": Out(packet.seq_bits)} if self.with_seq else {}),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        fmt = self.packet
        data_width = self.flit.data_width
        header = fmt.header
        word = self.i.payload
        tag = word.tag
        vc = tag[header["vc"].offset:header["vc"].offset + 2]
        seq = tag[header["seq"].offset:header["seq"].offset + fmt.seq_bits]
        stripe_bits = self.key_bits
        stripe = tag[header[self.key].offset:header[self.key].offset + stripe_bits] if stripe_bits else None
        fifo = m.submodules.fifo = SyncFIFO(width=data_width + 3 + fmt.seq_bits + stripe_bits,
                                            depth=3 * self.depth)
        inside = Signal()
        expected = Signal(fmt.seq_bits)
        m.d.comb += [fifo.w_en.eq(self.i.valid),
                     fifo.w_data.eq(Cat(word.data, word.last, vc, seq, *([stripe] if stripe_bits else [])))]
        with m.If(self.i.valid):
            with m.If(~fifo.w_rdy):
                m.d.sync += self.overflow.eq(1)
            m.d.sync += inside.eq(~word.last)
            if not self.headers:        # with headers the receiver checks per stripe
                with m.If(~inside):
                    m.d.sync += expected.eq(seq + 1)
                    with m.If((seq != expected) & (self.seq_errors != 0xFFFF)):
                        m.d.sync += self.seq_errors.eq(self.seq_errors + 1)
        with m.If(self.start):
            m.d.sync += [expected.eq(0), inside.eq(0), self.seq_errors.eq(0)]
        r = fifo.r_data
        r_last, r_vc, r_seq = (r[data_width], r[data_width + 1:data_width + 3],
                               r[data_width + 3:data_width + 3 + fmt.seq_bits])
        pop = Signal()
        m.d.comb += [
            self.o.valid.eq(fifo.r_rdy),
            self.o.payload.data.eq(r[:data_width]),
            self.o.payload.last.eq(r_last if self.headers else r_last & (r_seq == self.last_seq)),
            pop.eq(fifo.r_rdy & self.o.ready),
            fifo.r_en.eq(pop),
        ]
        if self.headers:
            m.d.comb += self.o.payload.tag.eq(r[data_width + 3:])
        if self.with_seq:
            m.d.comb += self.o_seq.eq(r_seq)
        for v in range(len(DATA_VCS)):
            m.d.comb += self.credit[v].eq(pop & (r_vc == v))
        return m
