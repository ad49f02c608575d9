"""``NpuEngine``: the traffic engine at one NPU port of the fabric (issue 15).

It sends a programmed number of flits of deterministic data and receives and checks a
programmed number of flits, at up to one flit per cycle each way, with no Python in the loop.

Data: flit ``k``, lane ``l`` of a sender with weights ``(w, h)`` carries
``w * g(k, l) + h (mod 2^32)``, where ``g`` is a fixed non-linear 32-bit mix of ``k`` and ``l``
(:func:`hdl.base.fabric_program.mix`, the same function in Python). A flit that is the int32
sum of the flits of several senders (a reduction, wrapping) is then ``W * g(k, l) + H`` with
``W``/``H`` the sums of their ``w``/``h``: the receiver checks that with its own programmed
``(W, H)``. Any flit out of order (``g`` differs per ``k``), any sender missing or counted twice
(the ``w`` and ``h`` of each rank are pseudo-random 32-bit words) and any corrupted bit shows as
a mismatch. The last received flit must carry ``last`` (every sender marks its last flit).
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.base.errors import FredError
from hdl.base.fabric_program import ENGINE_REGS, MIX_CONSTANTS
from hdl.base.flit import FlitFormat
from hdl.layouts import flit_layout

__all__ = ["NpuEngine"]


def _mix(index, lane: int):
    """Amaranth expression of :func:`hdl.base.fabric_program.mix` (32 bits)."""
    c1, c2, c3 = MIX_CONSTANTS
    x = (index * c1 + ((lane + 1) * c2 & 0xFFFFFFFF))[:32]
    x = x ^ (x >> 15)
    x = (x * c3)[:32]
    return x ^ (x >> 12)


class NpuEngine(wiring.Component):
    """One NPU's traffic engine.

    Parameters: ``flit`` (:class:`FlitFormat`; int32 lanes only: the check is exact integer
    arithmetic).

    Members: ``tx`` (Out stream of flits, to the NPU link), ``rx`` (In stream, from it);
    ``start`` (In, a one-cycle pulse: counters clear, the engine runs); ``we``/``waddr``/
    ``wdata`` (In: program register write, :data:`ENGINE_REGS` names the registers);
    ``done`` (everything sent, every expected flit received), ``sent``, ``received``,
    ``errors`` (mismatched flits plus flits beyond the expected count), ``extra`` (flits
    beyond the expected count), ``first_error`` (index of the first bad flit + 1, 0 = none).

    Timing: ``tx.valid`` rises whenever a flit is due, independent of ``tx.ready`` (stream
    rule); ``rx.ready`` is the sink's random backpressure: low in a cycle when a 16-bit LFSR is
    below the programmed threshold (probability threshold / 65536), high otherwise. The check
    is combinational on the received flit and registered into the counters.
    """

    def __init__(self, flit: FlitFormat):
        if flit.dtype != "int32":
            raise FredError(f"the fabric's NPU engines check int32 data exactly; {flit.dtype} is not "
                            f"supported by the RTL fabric")
        self.flit = flit
        shape = flit_layout(flit)
        super().__init__({
            "tx": Out(stream.Signature(shape)),
            "rx": In(stream.Signature(shape)),
            "start": In(1),
            "we": In(1), "waddr": In(range(len(ENGINE_REGS))), "wdata": In(32),
            "done": Out(1), "sent": Out(32), "received": Out(32), "errors": Out(32),
            "extra": Out(32), "first_error": Out(32),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        regs = {name: Signal(32, name=f"reg_{name}") for name in ENGINE_REGS}
        with m.If(self.we):
            with m.Switch(self.waddr):
                for index, name in enumerate(ENGINE_REGS):
                    with m.Case(index):
                        m.d.sync += regs[name].eq(self.wdata)
        running = Signal()
        lfsr = Signal(16, init=1)
        with m.If(self.start):
            m.d.sync += [running.eq(1), self.sent.eq(0), self.received.eq(0), self.errors.eq(0),
                         self.extra.eq(0), self.first_error.eq(0),
                         lfsr.eq(Mux(regs["seed"][:16] == 0, 1, regs["seed"][:16]))]
        with m.Else():
            # Galois LFSR x^16 + x^14 + x^13 + x^11 + 1 (maximal length)
            m.d.sync += lfsr.eq(Mux(lfsr[0], (lfsr >> 1) ^ 0xB400, lfsr >> 1))

        lanes = self.flit.lanes
        # -- send ------------------------------------------------------------------------------
        m.d.comb += [
            self.tx.valid.eq(running & (self.sent < regs["send_count"])),
            self.tx.payload.data.eq(Cat(*[(regs["ws"] * _mix(self.sent, lane) + regs["hs"])[:32]
                                          for lane in range(lanes)])),
            self.tx.payload.last.eq(self.sent == regs["send_count"] - 1),
            self.tx.payload.tag.eq(0),
        ]
        with m.If(self.tx.valid & self.tx.ready & ~self.start):
            m.d.sync += self.sent.eq(self.sent + 1)
        # -- receive and check ---------------------------------------------------------------
        m.d.comb += self.rx.ready.eq(running & (lfsr >= regs["backpressure"][:17]))
        expected = Cat(*[(regs["wr"] * _mix(self.received, lane) + regs["hr"])[:32]
                         for lane in range(lanes)])
        beyond = self.received >= regs["recv_count"]
        bad = beyond | (self.rx.payload.data != expected) | \
            (self.rx.payload.last != (self.received == regs["recv_count"] - 1))
        with m.If(self.rx.valid & self.rx.ready & ~self.start):
            m.d.sync += self.received.eq(self.received + 1)
            with m.If(bad):
                m.d.sync += self.errors.eq(self.errors + 1)
                with m.If(self.first_error == 0):
                    m.d.sync += self.first_error.eq(self.received + 1)
            with m.If(beyond):
                m.d.sync += self.extra.eq(self.extra + 1)
        m.d.comb += self.done.eq(running & (self.sent == regs["send_count"])
                                 & (self.received >= regs["recv_count"]))
        return m
