"""Properties of :class:`~hdl.designs.switch.vc_input_buffer.VCInputBuffer`, through its ports only.

Small instance: one-bit phase (K = 2 slots, which slots are loaded is a free constant), 2-bit
sequence, 1-bit flow, packets of 2 flits, 2 flits per data VC, no control VC. The harness is the
sender of the credit protocol in the docstring: one counter per data VC starting at ``depth``,
one credit spent per flit of a packet whose header names that VC (well formed or not), one back
per unit on ``credit[v]``; it sends a flit only with a credit in hand. Asserted:

* ``overflow`` never rises (a sender that respects its credits never overruns a VC), and the
  credits returned never exceed those spent (counters stay <= depth);
* per data VC, the flits read on ``o`` (with ``sel`` = v) are exactly the flits of the well-formed
  packets sent on v, in order, each stored with its packet's first-flit header; no flit of a
  malformed packet (phase not loaded or vc not a data VC) ever comes out, and ``head_valid``
  says whether a VC holds one;
* ``dropped`` counts the malformed packets.

Engine: BMC (the FIFOs' contents are hidden state).
"""

from __future__ import annotations

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Cat, Cover, Mux, Signal, Value

from hdl.contracts.flit import FlitFormat
from hdl.contracts.packet import DATA_VCS, PacketFormat
from hdl.designs.switch.vc_input_buffer import VCInputBuffer

from .checks import ShadowQueue, fire
from .microswitches import assume_small_data
from .proof import Mutation, Proof, build, harness_module

__all__ = ["PROOFS", "vc_input_buffer_harness", "credit_early"]

PACKET = PacketFormat(phase_bits=1, seq_bits=2, flow_bits=1, packet_flits=2)
FLIT = FlitFormat(dtype="int32", lanes=1, tag_width=PACKET.header_width)
PHASES, DEPTH = 2, 2


def credit_early(buffer, m):
    """Mutation of a VC input buffer (``buffer``, in its module ``m``): it returns a credit when
    a flit is written instead of when it is read (a mutant the proofs must kill)."""
    m.d.comb += buffer.credit[0].eq(buffer.i.valid)


def _stores_by_own_tag(buffer, m):
    # VC 0 stores every flit whose own tag names VC 0, well formed packet or not
    fifo = m.submodules.vc0
    own_vc = buffer.i.payload.tag[PACKET.phase_bits:PACKET.phase_bits + 2]
    m.d.comb += fifo.w_en.eq(buffer.i.valid & fifo.w_rdy & (own_vc == 0))


def _raw_tag(buffer, m):
    # later flits of a packet are stored with their own tag, not the first flit's header
    m.d.comb += m.submodules.vc1.w_data.eq(Value.cast(buffer.i.payload))


MUTANTS = {
    "stores_by_own_tag": Mutation("VC 0 stores flits by their own tag: malformed packets and later "
                                  "flits are misfiled", design=_stores_by_own_tag),
    "raw_tag": Mutation("VC 1 stores each flit's own tag instead of its packet's header", design=_raw_tag),
    "credit_on_write": Mutation("VC 0 returns a credit per flit written, not per flit read", design=credit_early),
}


def vc_input_buffer_harness(mutant=None):
    m = harness_module()
    buffer, fragment = build(VCInputBuffer, MUTANTS.get(mutant), flit=FLIT, packet=PACKET,
                             phases=PHASES, depth=DEPTH)
    m.submodules.dut = fragment
    nvc = len(DATA_VCS)
    word = buffer.i.payload
    m.d.comb += [
        buffer.i.valid.eq(AnySeq(1)), Value.cast(word).eq(AnySeq(FLIT.width)),
        buffer.loaded.eq(AnyConst(PHASES)), buffer.sel.eq(AnySeq(2)), buffer.o.ready.eq(AnySeq(1)),
    ]
    assume_small_data(m, word, FLIT)
    header = word.tag
    phase = header[:PACKET.phase_bits]
    vc = header[PACKET.phase_bits:PACKET.phase_bits + 2]

    # ---- the sender's view of packets ----------------------------------------------------------
    in_packet = Signal()
    packet_vc = Signal(2)
    packet_header = Signal(FLIT.tag_width)
    packet_good = Signal()
    first = ~in_packet
    good_here = (vc < nvc) & (buffer.loaded.bit_select(phase, 1))
    cur_vc = Mux(first, vc, packet_vc)
    cur_header = Mux(first, header, packet_header)
    cur_good = Mux(first, good_here, packet_good)
    with m.If(buffer.i.valid):
        m.d.sync += [in_packet.eq(~word.last), packet_vc.eq(cur_vc), packet_header.eq(cur_header),
                     packet_good.eq(cur_good)]
    stored = Cat(word.data, word.last, cur_header)

    # ---- credits --------------------------------------------------------------------------------
    for v in range(nvc):
        credits = Signal(range(2 * DEPTH + 4), init=DEPTH, name=f"vc{v}_credits")
        spend = buffer.i.valid & (cur_vc == v)
        m.d.comb += [
            Assume(~spend | (credits != 0)),
            Assert(credits <= DEPTH, f"VC {v}: more credits returned than spent"),
        ]
        with m.If(credits <= DEPTH + 2):
            m.d.sync += credits.eq(credits - spend + buffer.credit[v])
        queue = ShadowQueue(m, name=f"vc{v}", width=FLIT.width, depth=DEPTH,
                            push=spend & cur_good, push_value=stored,
                            pop=(buffer.sel == v) & fire(buffer.o), pop_value=buffer.o.payload)
        m.d.comb += [
            Assert(buffer.head_valid[v] == (queue.count != 0), f"VC {v}: head_valid differs from the flits stored"),
            Cover(queue.count == DEPTH),
        ]
    m.d.comb += Assert(~buffer.overflow, "a flit arrived for a full VC although the sender had a credit")

    dropped = Signal(4)
    with m.If(buffer.i.valid & first & ~good_here):
        m.d.sync += dropped.eq(dropped + 1)
    m.d.comb += [
        Assert(buffer.dropped[:4] == dropped, "dropped differs from the malformed packets sent"),
        Cover(buffer.i.valid & first & ~good_here & (vc < nvc)),   # a charged bad packet
    ]
    return m


PROOFS = [
    Proof(name="vc_input_buffer.credits_and_drops", build=vc_input_buffer_harness, mode="bmc",
          depth=10, mutants=MUTANTS,
          why_bounded="the FIFOs' contents are hidden state; 10 cycles send five packets, fill "
                      "a VC and drain it"),
]
