"""An I/O controller on the mesh's edge streaming its stripe into the NPU it is attached to."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.mesh import MESH_VCS
from hdl.contracts.mesh_io import CHECK_BITS, IO_MODES, SEQ_BITS, TREE_BITS, MeshIoSpec
from hdl.designs.layouts import struct_layout
from hdl.designs.switch.vc_input_buffer import link_signature

from .output_credits import OutputCredits

__all__ = ["IoController"]

SPLIT = IO_MODES.index("tree-split")


class IoController(wiring.Component):
    """Controller ``index`` of ``spec``: after ``start``, sends ``stripe`` flits into the
    router input it is wired to, addressed to ``dest`` (its NPU's router coordinates), on the
    VC of the tree ``mode`` picks (0 ``tree-xy``: VC 0; 1 ``tree-yx``: VC 1; 2 ``tree-split``:
    alternating, VC 0 first on an even ``index``, VC 1 first on an odd one, so an odd stripe's
    extra flits are spread over both trees' links, not all on the X-Y trees': docs/mesh_rtl.md).
    Flit ``i`` of tree ``t = 2 index + vc`` carries the word
    ``hdl.contracts.mesh_io.io_word(i, t)`` and ``io_check(i, t)`` (the rest of the data field).

    Parameters: spec (:class:`MeshIoSpec`), index (controller k), dest ``(x, y)``.

    Members: ``start``, ``stripe`` (In(SEQ_BITS)), ``mode`` (In(2)), ``o`` (Out link),
    ``credit`` (In(2): the router input's credit pulses; ``spec.mesh.depth`` per VC to start
    with), ``hold`` (In(1): send nothing this cycle, the bench's random idle), ``sent`` (Out(32)), ``done`` (Out(1): all sent), ``error`` (a credit returned that
    was never given).

    Rate: one flit when the link's token counter (``spec.io_rate``, *paced*: restarted by
    ``start``, accumulating while flits are left to send) and a credit of the VC allow: flit k
    leaves in cycle s + ceil((k + 1) b / a) - 1, s the cycle after ``start``, without credit
    stalls (16/375: s + 23, s + 46, s + 70, ...). A 128 GBps controller needs b / a cycles for
    every flit, the first included, as the FRED fabric's controllers (docs/mesh_rtl.md, "I/O
    controllers on the mesh"); ``o`` is combinational from registers (a producer never waits
    for anything but credits and the rate).
    """

    def __init__(self, *, spec: MeshIoSpec, index: int, dest: tuple[int, int]):
        self.spec, self.index, self.dest = spec, index, dest
        self.flit = spec.mesh.flit
        super().__init__({
            "start": In(1), "stripe": In(SEQ_BITS), "mode": In(2),
            "o": Out(link_signature(struct_layout(self.flit.fields))), "credit": In(MESH_VCS),
            "hold": In(1), "sent": Out(32), "done": Out(1), "error": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        credits = m.submodules.credits = OutputCredits(flit=self.flit, depth=self.spec.mesh.depth,
                                                       rate=self.spec.io_rate, paced=True)
        running = Signal()
        split = Signal()
        vc = Signal()
        seq = Signal(SEQ_BITS)
        tree = Signal(TREE_BITS)
        fire = Signal()
        m.d.comb += [
            split.eq(self.mode == SPLIT),
            # split: flit i goes to tree (i + index) % 2 as its (i // 2)-th flit
            vc.eq(Mux(split, self.sent[0] ^ (self.index % 2), self.mode == 1)),
            seq.eq(Mux(split, self.sent[1:], self.sent)),
            tree.eq(2 * self.index + vc),
            self.done.eq(running & (self.sent == self.stripe)),
            fire.eq(running & ~self.hold & (self.sent != self.stripe) & credits.has.bit_select(vc, 1)),
            credits.spend.eq(Mux(fire, 1 << vc, 0)),
            credits.give.eq(self.credit),
            credits.restart.eq(self.start),
            credits.waiting.eq(running & (self.sent != self.stripe)),
            self.error.eq(credits.error),
            self.o.valid.eq(fire),
            self.o.payload.data.eq(Cat(seq, tree, Const(0, 32 - SEQ_BITS - TREE_BITS),
                                       seq[:CHECK_BITS] ^ seq[3:3 + CHECK_BITS] ^ tree[:CHECK_BITS])),
            self.o.payload.last.eq(1),
            self.o.payload.vc.eq(vc),
            self.o.payload.dest_x.eq(self.dest[0]),
            self.o.payload.dest_y.eq(self.dest[1]),
        ]
        with m.If(self.start):
            m.d.sync += [running.eq(1), self.sent.eq(0)]
        with m.Elif(fire):
            m.d.sync += self.sent.eq(self.sent + 1)
        return m
