"""The packet switch's control VC: ACK / NACK packets are sent back to every input port of their
flow, learned from the data packets the switch forwarded."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.hdl import Array
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.flit import FlitFormat
from hdl.contracts.packet import PacketFormat
from hdl.designs.layouts import flit_layout

__all__ = ["ControlRouter", "MAX_FLOW_BITS"]

#: The flow table holds ``2**flow_bits`` masks of P bits: keep it a small register file.
MAX_FLOW_BITS = 6
COUNTER_BITS = 16


class ControlRouter(wiring.Component):
    """Routes control packets (one flit, ``vc`` = 3) of a P-port packet switch.

    Parameters (keyword-only, validated): ports P; flit (:class:`FlitFormat`, the packet
    switch's); packet (:class:`PacketFormat`, ``flow_bits`` <= :data:`MAX_FLOW_BITS`).

    Members:
        i: ``In(stream.Signature(flit)).array(P)``: each input buffer's control VC head.
        learn: ``In(P)``; learn_flow: ``In(flow_bits).array(P)``: input n started a data packet
            of flow ``learn_flow[n]`` this cycle; port n becomes an input of that flow.
        clear: ``In(1)``: forget every flow (e.g. between collectives).
        o: ``Out(stream.Signature(flit)).array(P)``: control flits for output n (``ready`` =
            the output takes it: it is between data packets and holds a control credit).
        unknown: ``Out(16)``: control packets dropped because their flow has no input port yet.

    A control packet of flow f arriving at any input is sent, unchanged, on the output of every
    port that is an input of f: ACKs pass through, and a NACK reaches every input of the flow
    (a reduction's contributors all go back, Go-Back-N). The switch does not tell ACK from
    NACK: both travel against the data, to the flow's senders. One control packet is handled
    at a time: taken from the lowest-numbered input offering one, held until every port of
    its flow took it (one cycle each at best), then the next (at most one per 2 cycles).
    """

    def __new__(cls, *, ports: int, flit: FlitFormat, packet: PacketFormat):
        if isinstance(ports, bool) or not isinstance(ports, int) or ports < 2:
            raise FredError(f"ports must be an integer >= 2, got {ports!r}")
        if packet.flow_bits > MAX_FLOW_BITS:
            raise FredError(f"the control VC's flow table takes flow_bits <= {MAX_FLOW_BITS}, "
                            f"got {packet.flow_bits}")
        return super().__new__(cls)

    def __init__(self, *, ports: int, flit: FlitFormat, packet: PacketFormat):
        self.ports, self.flit, self.packet = ports, flit, packet
        shape = flit_layout(flit)
        super().__init__({
            "i": In(stream.Signature(shape)).array(ports),
            "learn": In(ports),
            "learn_flow": In(packet.flow_bits).array(ports),
            "clear": In(1),
            "o": Out(stream.Signature(shape)).array(ports),
            "unknown": Out(COUNTER_BITS),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        P = self.ports
        flows = 1 << self.packet.flow_bits
        table = Array(Signal(P, name=f"inputs_of_flow{f}") for f in range(flows))
        flow_field = self.packet.header["flow"]
        tag_offset = self.flit.fields["tag"].offset

        holding = Signal()
        pending = Signal(P)
        held = Signal(self.flit.width)

        # learning (a clear wins over a learn in the same cycle)
        with m.If(self.clear):
            for f in range(flows):
                m.d.sync += table[f].eq(0)
        with m.Else():
            # one comparator per (flow, port) rather than a write through the Array: an
            # indexed write is a case statement per entry with no default, which lint flags
            for f in range(flows):
                for n in range(P):
                    with m.If(self.learn[n] & (self.learn_flow[n] == f)):
                        m.d.sync += table[f][n].eq(1)

        # take one control flit
        with m.If(~holding):
            for n in reversed(range(P)):   # the lowest index wins
                with m.If(self.i[n].valid):
                    for k in range(P):
                        m.d.comb += self.i[k].ready.eq(k == n)
            for n in range(P):
                with m.If(self.i[n].valid & self.i[n].ready):
                    word = self.i[n].payload.as_value()
                    flow = word[tag_offset + flow_field.offset:tag_offset + flow_field.offset + flow_field.width]
                    members = table[flow]
                    with m.If(members == 0):
                        m.d.sync += self.unknown.eq(self.unknown + (self.unknown != (1 << COUNTER_BITS) - 1))
                    with m.Else():
                        m.d.sync += [holding.eq(1), pending.eq(members), held.eq(word)]
        # hand it to every member output
        taken = Signal(P)
        for k in range(P):
            m.d.comb += [self.o[k].valid.eq(holding & pending[k]), self.o[k].payload.eq(held),
                         taken[k].eq(self.o[k].valid & self.o[k].ready)]
        with m.If(holding):
            m.d.sync += pending.eq(pending & ~taken)
            with m.If((pending & ~taken) == 0):
                m.d.sync += holding.eq(0)
        return m
