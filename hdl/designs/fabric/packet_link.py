"""``PacketLink``: a credit-based link of the packet fabric (docs/fabric_rtl.md, "Packet
fabric"): flits one way, per-VC credit counts the other, both delayed by the link."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.packet import DATA_VCS
from hdl.designs.switch.vc_input_buffer import link_signature

__all__ = ["PacketLink"]


class PacketLink(wiring.Component):
    """One direction of a cable between credit-based ports (``PacketSwitch``, the NPU's
    packetizer and depacketizer).

    Parameters: ``shape`` (the flit's payload shape), ``latency`` >= 1 cycles.

    Members: ``i`` (``In(link_signature)``: from the sender's output), ``o`` (``Out``: to the
    receiver's input buffer), ``credit_in`` (``In(2).array(3)``: the receiver's freed slots per
    VC, a count per cycle), ``credit_out`` (``Out(2).array(3)``: the same counts, to the
    sender).

    Mechanism: ``latency - 1`` always-moving registers each way; the receiver's input buffer
    (a FIFO, one cycle) is the last cycle, so a flit sent in cycle t is at the head of the
    receiver's buffer in cycle t + latency, as on the circuit fabric's :class:`Link`. The
    sender holds the credits (the receiver's buffer depth per VC), so nothing is dropped and
    no ``ready`` is needed.
    """

    def __init__(self, shape, *, latency: int):
        if isinstance(latency, bool) or not isinstance(latency, int) or latency < 1:
            raise FredError(f"link latency must be an integer >= 1 cycle, got {latency!r}")
        self.latency = latency
        nvc = len(DATA_VCS)
        super().__init__({"i": In(link_signature(shape)), "o": Out(link_signature(shape)),
                          "credit_in": In(2).array(nvc), "credit_out": Out(2).array(nvc)})

    def elaborate(self, platform) -> Module:
        m = Module()
        valid, payload = self.i.valid, self.i.payload
        credits = list(self.credit_in)
        for stage in range(self.latency - 1):
            v = Signal(name=f"valid_{stage}")
            d = Signal.like(self.i.payload, name=f"payload_{stage}")
            c = [Signal(2, name=f"credit_{stage}_{vc}") for vc in range(len(credits))]
            m.d.sync += [v.eq(valid), d.eq(payload), *(ci.eq(x) for ci, x in zip(c, credits))]
            valid, payload, credits = v, d, c
        m.d.comb += [self.o.valid.eq(valid), self.o.payload.eq(payload),
                     *(out.eq(x) for out, x in zip(self.credit_out, credits))]
        return m
