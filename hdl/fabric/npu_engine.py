"""``NpuEngine``: the traffic engine at one NPU port of the fabric (issue 15).

It sends a programmed number of flits of deterministic data and receives and checks a
programmed number of flits, at up to one flit per cycle each way, with no Python in the loop.

Data: flit ``k``, lane ``l`` of a sender with weights ``(w, h)`` carries
``w * g(k, l) + h (mod 2^32)``, where ``g`` is a fixed non-linear 32-bit mix of ``k`` and ``l``
(:func:`hdl.base.fabric_program.mix`, the same function in Python). A flit that is the int32
sum of the flits of several senders (a reduction, wrapping, in a switch or in an engine) is
then ``W * g(k, l) + H`` with ``W``/``H`` the sums of their ``w``/``h``: the receiver checks
that with its own programmed ``(W, H)``. Any flit out of order (``g`` differs per ``k``), any sender missing or counted twice
(the ``w`` and ``h`` of each rank are pseudo-random 32-bit words) and any corrupted bit shows as
a mismatch. The last received flit must carry ``last`` (every sender marks its last flit).
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
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
    arithmetic); ``buffer``: flits held between receiving and forwarding.

    Members: ``tx`` (Out stream of flits, to the NPU link), ``rx`` (In stream, from it);
    ``start`` (In, a one-cycle pulse: counters clear, the engine runs); ``we``/``waddr``/
    ``wdata`` (In: program register write, :data:`ENGINE_REGS` names the registers);
    ``done`` (everything sent, every expected flit received), ``sent``, ``received``,
    ``errors`` (mismatched flits plus flits beyond the expected count), ``extra`` (flits
    beyond the expected count), ``first_error`` (index of the first bad flit + 1, 0 = none).

    Program (what the endpoint algorithms need; the in-switch collectives use only the first
    part: ``own_only = send_count``, nothing forwarded):

    * output flit ``t`` (``t < send_count``): its own data for data index ``kout(t)`` if
      ``t < own_only``; otherwise the next received flit, plus its own data if
      ``t < add_until`` (the endpoint's int32 reduction, wrapping like the switch's adder);
    * received flit ``t'`` (``t' < recv_count``) is checked against
      ``wr * mix(kin(t'), l) + hr`` when it arrives if ``t' >= check_from``, and if
      ``t' < fwd_count`` it is kept in a FIFO of ``buffer`` flits (the NPU's memory) until its
      turn in the output stream (a forwarded flit leaves 1 cycle after it arrived at the
      earliest: the FIFO's latency). Receiving is never held up by forwarding (only by a full
      FIFO): a ring's NPU receives a chunk while it still sends its own;
    * data indices run in chunks of ``chunk`` flits: ``kout`` starts at ``out_base``, ``kin``
      at ``in_base``; after each chunk the base steps down by ``chunk``, from 0 to
      ``last_base`` (the ring's chunk order: chunk (i - j) mod n at step j).

    Timing: ``tx.valid`` never depends on ``tx.ready`` (stream rule): high whenever a flit is
    due and (when forwarding) the FIFO holds one. ``rx.ready`` is the sink's random
    backpressure: low in a cycle when a 16-bit LFSR is below the programmed threshold (and
    when the FIFO is full for a flit to forward). The check is
    combinational on the received flit and registered into the counters.
    """

    def __init__(self, flit: FlitFormat, *, buffer: int = 4096):
        if isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 1:
            raise FredError(f"engine buffer must be an integer >= 1 flit, got {buffer!r}")
        self.buffer = buffer
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
        out_off, out_base, in_off, in_base = (Signal(32, name=n) for n in
                                              ("out_off", "out_base", "in_off", "in_base"))
        with m.If(self.start):
            m.d.sync += [running.eq(1), self.sent.eq(0), self.received.eq(0), self.errors.eq(0),
                         self.extra.eq(0), self.first_error.eq(0),
                         out_off.eq(0), in_off.eq(0),
                         out_base.eq(regs["out_base"]), in_base.eq(regs["in_base"]),
                         lfsr.eq(Mux(regs["seed"][:16] == 0, 1, regs["seed"][:16]))]
        with m.Else():
            # Galois LFSR x^16 + x^14 + x^13 + x^11 + 1 (maximal length)
            m.d.sync += lfsr.eq(Mux(lfsr[0], (lfsr >> 1) ^ 0xB400, lfsr >> 1))

        lanes, width = self.flit.lanes, 32
        data_width = lanes * width
        # received flits to forward wait here (the NPU's memory): a flit is received (checked,
        # counted) when it arrives, and leaves when its turn in the output stream comes
        held = m.submodules.held = SyncFIFO(width=data_width, depth=self.buffer)
        stall = lfsr < regs["backpressure"][:17]
        due = running & (self.sent < regs["send_count"])
        from_input = self.sent >= regs["own_only"]          # this output flit is a received one
        forwarded = self.received < regs["fwd_count"]       # this received flit leaves again
        kout, kin = out_base + out_off, in_base + in_off
        own = [(regs["ws"] * _mix(kout[:32], lane) + regs["hs"])[:32] for lane in range(lanes)]
        adding = self.sent < regs["add_until"]
        incoming = [held.r_data[lane * width:(lane + 1) * width] for lane in range(lanes)]
        summed = [Mux(adding, (incoming[lane] + own[lane])[:32], incoming[lane])
                  for lane in range(lanes)]
        m.d.comb += [
            self.tx.valid.eq(due & (~from_input | held.r_rdy)),
            self.tx.payload.data.eq(Mux(from_input, Cat(*summed), Cat(*own))),
            self.tx.payload.last.eq(self.sent == regs["send_count"] - 1),
            self.tx.payload.tag.eq(0),
            held.r_en.eq(due & from_input & self.tx.ready),
            held.w_data.eq(self.rx.payload.data),
            held.w_en.eq(self.rx.valid & self.rx.ready & forwarded),
            self.rx.ready.eq(running & ~stall & (~forwarded | held.w_rdy)),
        ]

        def step(off, base, fire):
            with m.If(fire & ~self.start):
                with m.If(off + 1 == regs["chunk"]):
                    m.d.sync += [off.eq(0),
                                 base.eq(Mux(base == 0, regs["last_base"], base - regs["chunk"]))]
                with m.Else():
                    m.d.sync += off.eq(off + 1)

        tx_fire = self.tx.valid & self.tx.ready
        rx_fire = self.rx.valid & self.rx.ready
        with m.If(tx_fire & ~self.start):
            m.d.sync += self.sent.eq(self.sent + 1)
        step(out_off, out_base, tx_fire)
        step(in_off, in_base, rx_fire)
        # -- check ------------------------------------------------------------------------------
        expected = Cat(*[(regs["wr"] * _mix(kin[:32], lane) + regs["hr"])[:32] for lane in range(lanes)])
        beyond = self.received >= regs["recv_count"]
        checked = self.received >= regs["check_from"]
        bad = beyond | (checked & ((self.rx.payload.data != expected) |
                                   (self.rx.payload.last != (self.received == regs["recv_count"] - 1))))
        with m.If(rx_fire & ~self.start):
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
