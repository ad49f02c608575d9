"""``StripeReceiver``: the receive side of an endpoint of the striped I/O request (docs/fabric_rtl.md,
"Striped I/O: every controller at once"): the stripes of several senders arrive interleaved per
packet; each flit is checked against its own stripe's data and each packet's sequence number
against its own stripe's count.

Why per stripe: a stripe reaches an endpoint from exactly one sender (its chain's member before
it, or its controller), so the one-sender rule of the packet fabric's sequence check holds per
stripe, not per endpoint (an NPU of Fred-A/C's weight streaming hears the NPU before it and its
controller).
"""

from __future__ import annotations

from amaranth import Array, Cat, Module, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.data import StructLayout
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.io_stripes import STRIPE_REGS, stripe_reg
from hdl.designs.fabric.npu_engine import mix_expr

__all__ = ["StripeReceiver"]


class StripeReceiver(wiring.Component):
    """Parameters: ``stripes`` (1 .. 64), ``lanes`` (int32 lanes per flit), ``seq_bits`` (the
    header's sequence number), ``stripe_bits`` (the width of the stripe id it is given; default
    the narrowest for ``stripes``; wider, e.g. the header's 6-bit ``flow`` when the flow id is
    the stripe, so an id outside the program is an error rather than another stripe's alias).

    Members: ``i`` (In stream: a flit as the receive buffer delivers it, ``data``, ``last`` (the
    packet's last flit) and its packet's header ``stripe`` and ``seq``); ``o`` (Out stream: the
    same flit with its data ``index``, for a forwarder; ``i.ready`` is ``o.ready`` while running,
    ``o.valid`` is ``i.valid`` while running: no cycle, and valid never waits for ready);
    ``start`` (In, one-cycle pulse: counts clear, the receiver runs); ``we``/``waddr``/``wdata``
    (the program: :data:`~hdl.contracts.io_stripes.STRIPE_REGS` per stripe,
    :func:`~hdl.contracts.io_stripes.stripe_receiver_writes`); ``done`` (every stripe's
    ``flits`` received), ``received``, ``errors`` (flits of a stripe outside the program or
    beyond its count, with data other than ``wr * mix(org + t, l) + hr``, or the stripe's last
    flit not ending a packet), ``first_error`` (received count + 1 at the first bad flit),
    ``seq_errors`` (packets whose ``seq`` is not their stripe's next; saturating).
    """

    def __init__(self, *, stripes: int, lanes: int = 1, seq_bits: int = 16, stripe_bits: int | None = None):
        for name, value, high in (("stripes", stripes, 64), ("lanes", lanes, 16), ("seq_bits", seq_bits, 32)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                self._MustUse__silence = True   # never built: no "created but never used" warning
                raise FredError(f"stripe receiver: {name} must be an integer in 1..{high}, got {value!r}")
        least = max(1, (stripes - 1).bit_length())
        if stripe_bits is not None and (isinstance(stripe_bits, bool) or not isinstance(stripe_bits, int)
                                        or not least <= stripe_bits <= 8):
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(f"stripe receiver: stripe_bits must be an integer in {least}..8 for {stripes} "
                            f"stripes, got {stripe_bits!r}")
        self.stripes, self.lanes, self.seq_bits = stripes, lanes, seq_bits
        self.stripe_bits = least if stripe_bits is None else stripe_bits
        data = unsigned(32 * lanes)
        self.in_layout = StructLayout({"data": data, "last": 1, "stripe": self.stripe_bits, "seq": seq_bits})
        self.out_layout = StructLayout({"data": data, "last": 1, "stripe": self.stripe_bits, "seq": seq_bits,
                                        "index": 32})
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
            "start": In(1),
            "we": In(1), "waddr": In(range(len(STRIPE_REGS) * stripes)), "wdata": In(32),
            "done": Out(1), "received": Out(32), "errors": Out(32), "first_error": Out(32),
            "seq_errors": Out(16),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        n = self.stripes
        regs = {name: [Signal(32, name=f"{name}{k}") for k in range(n)] for name in STRIPE_REGS}
        count = [Signal(32, name=f"count{k}") for k in range(n)]
        expect = [Signal(self.seq_bits, name=f"expect{k}") for k in range(n)]
        with m.If(self.we):
            with m.Switch(self.waddr):
                for k in range(n):
                    for name in STRIPE_REGS:
                        with m.Case(stripe_reg(k, name)):
                            m.d.sync += regs[name][k].eq(self.wdata)
        running, inside = Signal(), Signal()
        flit = self.i.payload
        k = flit.stripe
        known = k < n
        org, flits, wr, hr = (Array(regs[name])[k] for name in STRIPE_REGS)
        seen = Array(count)[k]
        index = (org + seen)[:32]
        expected = Cat(*[(wr * mix_expr(index, lane) + hr)[:32] for lane in range(self.lanes)])
        bad = ~known | (seen >= flits) | (flit.data != expected) | ((seen + 1 == flits) & ~flit.last)
        m.d.comb += [
            self.o.valid.eq(self.i.valid & running),
            self.i.ready.eq(self.o.ready & running),
            self.o.payload.data.eq(flit.data), self.o.payload.last.eq(flit.last),
            self.o.payload.stripe.eq(k), self.o.payload.seq.eq(flit.seq), self.o.payload.index.eq(index),
            self.done.eq(running & Cat(*[count[j] == regs["flits"][j] for j in range(n)]).all()),
        ]
        fire = self.i.valid & self.i.ready
        with m.If(self.start):
            m.d.sync += [running.eq(1), inside.eq(0), self.received.eq(0), self.errors.eq(0),
                         self.first_error.eq(0), self.seq_errors.eq(0),
                         *[c.eq(0) for c in count], *[e.eq(0) for e in expect]]
        with m.Elif(fire):
            m.d.sync += [self.received.eq(self.received + 1), inside.eq(~flit.last)]
            with m.If(bad):
                m.d.sync += self.errors.eq(self.errors + 1)
                with m.If(self.first_error == 0):
                    m.d.sync += self.first_error.eq(self.received + 1)
            for j in range(n):
                with m.If(k == j):
                    m.d.sync += count[j].eq(count[j] + 1)
                    with m.If(~inside):     # a packet's first flit: its stripe's next number?
                        m.d.sync += expect[j].eq(flit.seq + 1)
                        with m.If((flit.seq != expect[j]) & (self.seq_errors != 0xFFFF)):
                            m.d.sync += self.seq_errors.eq(self.seq_errors + 1)
        return m
