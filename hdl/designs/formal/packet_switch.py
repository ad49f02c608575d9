"""Credit properties of the whole packet switch (:class:`~hdl.designs.switch.packet_switch.PacketSwitch`).

Small instance: Fred_2(2) (one RD microswitch), int32 x 1 lane, K = 2 phases (1-bit phase),
packets of 2 flits, 2 flits per data VC, 8-bit configuration words, no control VC, no online
routing. Everything the host and the neighbours do is free: configuration words and phase
selects (free streams), ``host_vc``, ``header_select`` (a free constant), every input flit.
The harness plays both neighbours of the credit protocol (docs/switch.md, "Packet switch"):

* upstream of each input: one credit counter per data VC, starting at ``depth``, one spent per
  flit of a packet whose first-flit header names that VC, one back per unit on ``i_credit``; it
  sends a flit only with a credit in hand;
* downstream of each output: per VC, the flits it holds (received, not yet credited back); it
  returns a credit (free, any cycle later) only for a flit it holds.

Asserted: ``overflow`` never rises (no input VC is overrun by a sender that respects its
credits); ``credit_error`` never rises; the credits returned to a sender never exceed those it
spent; an output never sends a flit of VC v while the downstream holds ``depth`` flits of v
(a flit leaves only with a credit). Covered: a flit leaves an output (so the configuration
load, phase select and datapath are reached, and the output property is not vacuous).

What goes through the switch is proven for its datapath in ``switch.py`` and for the input buffer
in ``vc_input_buffer.py``; this proof is the credit loop around them, which neither sees.
Engine: BMC (buffers and counters are hidden state). Proven against the packet switch of main as
of 2026-11-26 (another change to it is in progress; re-run ``fred formal 'packet_switch.*'``).
"""

from __future__ import annotations

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Cat, Cover, Mux, Signal, Value

from hdl.contracts.packet import DATA_VCS, PacketFormat
from hdl.designs.switch import packet_switch as packet_switch_module
from hdl.designs.switch.packet_switch import PacketSwitch

from .checks import free_stream_input
from .microswitches import assume_small_data
from .proof import Mutation, Proof, build, harness_module
from .vc_input_buffer import credit_early

__all__ = ["PROOFS", "packet_switch_harness", "PACKET"]

PACKET = PacketFormat(phase_bits=1, seq_bits=2, flow_bits=1, packet_flits=2)
PORTS, MIDDLE, PHASES, DEPTH, WORD = 2, 2, 2, 2, 8


def _packet_vc(m, link, *, name: str):
    """The data VC each flit on ``link`` is charged to: its packet's first-flit header's."""
    header = link.payload.tag
    vc = header[PACKET.phase_bits:PACKET.phase_bits + 2]
    in_packet = Signal(name=f"{name}_in_packet")
    packet_vc = Signal(2, name=f"{name}_packet_vc")
    current = Mux(in_packet, packet_vc, vc)
    with m.If(link.valid):
        m.d.sync += [in_packet.eq(~link.payload.last), packet_vc.eq(current)]
    return current


def _upstream(m, dut, n: int) -> None:
    link = dut.i[n]
    m.d.comb += [link.valid.eq(AnySeq(1)), Value.cast(link.payload).eq(AnySeq(Value.cast(link.payload).shape().width))]
    assume_small_data(m, link.payload, dut.flit)
    vc = _packet_vc(m, link, name=f"i{n}")
    for v in range(len(DATA_VCS)):
        credits = Signal(range(2 * DEPTH + 4), init=DEPTH, name=f"i{n}_vc{v}_credits")
        spend = link.valid & (vc == v)
        m.d.comb += [Assume(~spend | (credits != 0)),
                     Assert(credits <= DEPTH, f"i{n} VC {v}: more credits returned than spent")]
        with m.If(credits <= DEPTH + 2):
            m.d.sync += credits.eq(credits - spend + dut.i_credit[n][v])


def _downstream(m, dut, n: int):
    """Returns the signal 'a flit left output n'."""
    link = dut.o[n]
    vc = link.payload.tag[PACKET.phase_bits:PACKET.phase_bits + 2]
    for v in range(len(DATA_VCS)):
        held = Signal(range(2 * DEPTH + 4), name=f"o{n}_vc{v}_held")
        returned = Signal(2, name=f"o{n}_vc{v}_returned")
        received = link.valid & (vc == v)
        m.d.comb += [returned.eq(AnySeq(2)), dut.o_credit[n][v].eq(returned),
                     Assume(returned <= held),
                     Assert(~received | (held < DEPTH), f"o{n} VC {v}: a flit sent without a credit")]
        with m.If(held <= DEPTH + 2):
            m.d.sync += held.eq(held + received - returned)
    return link.valid


def packet_switch_harness(mutant=None):
    m = harness_module()
    dut, fragment = build(PacketSwitch, MUTANTS.get(mutant), ports=PORTS, middle=MIDDLE, dtype="int32",
                          lanes=1, phases=PHASES, packet=PACKET, depth=DEPTH, word_width=WORD)
    m.submodules.dut = fragment
    free_stream_input(m, dut.config, name="config")
    free_stream_input(m, dut.phase, name="phase")
    m.d.comb += [dut.host_vc.eq(AnySeq(2)), dut.header_select.eq(AnyConst(1)), dut.flow_clear.eq(0)]
    for n in range(PORTS):
        m.d.comb += dut.o_ctrl_credit[n].eq(0)
        _upstream(m, dut, n)
    sent = [_downstream(m, dut, n) for n in range(PORTS)]
    m.d.comb += [Assert(~dut.overflow, "an input VC overran although its sender respected the credits"),
                 Assert(~dut.credit_error, "credit_error: an output got back more credits than it spent"),
                 Cover(Cat(*sent).any())]
    return m


def _send_without_credit(switch, m):
    # output 0 takes and sends the datapath's flit whether or not it holds a credit
    core = m.submodules.switch
    m.d.comb += [core.o[0].ready.eq(1), switch.o[0].valid.eq(core.o[0].valid)]


MUTANTS = {
    "send_without_credit": Mutation("output 0 sends without a credit", design=_send_without_credit),
    "input_credit_on_write": Mutation("the input buffers return a credit per flit written, not read",
                                      submodule=(packet_switch_module, "VCInputBuffer", credit_early)),
}

PROOFS = [
    Proof(name="packet_switch.credits", build=packet_switch_harness, mode="bmc", depth=12,
          mutants=MUTANTS,
          why_bounded="the VC buffers, credit counters, configuration memory and datapath are "
                      "hidden state; 12 cycles load a configuration, select it and send a packet"),
    Proof(name="packet_switch.cover", build=packet_switch_harness, mode="cover", depth=12),
]
