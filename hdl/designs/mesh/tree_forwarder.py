"""An NPU's forwarding of I/O flits to its children in each tree (up to three at once)."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.errors import FredError
from hdl.contracts.mesh import MESH_VCS, PORT_NAMES
from hdl.contracts.mesh_io import MeshIoSpec, TREE_BITS, SEQ_BITS
from hdl.designs.layouts import struct_layout
from hdl.designs.switch.vc_input_buffer import link_signature

from .rate_token import RateToken

__all__ = ["TreeForwarder"]


class TreeForwarder(wiring.Component):
    """What NPU ``rank`` sends on after it receives an I/O flit: a copy to each of the flit's
    tree's children (``children[tree]``: router ports, each a neighbour; ``dests[port]``: that
    neighbour's router coordinates), one queue per direction.

    Parameters: spec (:class:`MeshIoSpec`), children (per tree, a tuple of ports), dests
    (``{port: (x, y)}`` for every port a child is on).

    Members: ``start``; ``eject`` (In link: the router's local output; every flit is written
    into the queue of each direction its tree continues in, at once: the NPU keeps the weights
    anyway, so the queue is its memory and the router's credit returns on arrival);
    ``o`` (Out link, to the router's local input) and ``credit`` (In(2): its credit pulses,
    ``spec.mesh.depth`` per VC to start with); ``hold`` (In(1): send nothing this cycle, the
    bench's random idle); ``overflow`` (sticky: a queue was full, which
    the program generator rules out); ``idle`` (every queue empty).

    Injection: a direction's head goes when the direction's token counter (the neighbour link's
    rate, ``spec.mesh.link_rate``) and a credit of its VC allow; directions take turns (round
    robin) for the one flit per cycle of the local port. Pacing each direction at its link's
    rate keeps the router's local input queue (shared by the directions) from blocking one
    direction behind another. Latency: 3 cycles from ``eject`` to ``o`` (queue write, its
    buffered read, the choice).
    """

    def __init__(self, *, spec: MeshIoSpec, children, dests: dict[int, tuple[int, int]]):
        if len(children) != spec.trees:
            raise FredError(f"TreeForwarder needs children for {spec.trees} trees, got {len(children)}")
        self.spec, self.children, self.dests = spec, [tuple(c) for c in children], dict(dests)
        self.directions = sorted({p for c in self.children for p in c})
        missing = [PORT_NAMES[p] for p in self.directions if p not in self.dests]
        if missing:
            raise FredError(f"TreeForwarder has children by {', '.join(missing)} but no neighbour there")
        self.flit = spec.mesh.flit
        shape = struct_layout(self.flit.fields)
        super().__init__({"start": In(1), "eject": In(link_signature(shape)),
                          "o": Out(link_signature(shape)), "credit": In(MESH_VCS),
                          "hold": In(1), "overflow": Out(1), "idle": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        width = self.flit.data_width + 1          # data and vc
        data, vc = self.eject.payload.data, self.eject.payload.vc
        tree = data[SEQ_BITS:SEQ_BITS + TREE_BITS]
        queues, tokens, ready = [], [], []
        credits = [Signal(range(self.spec.mesh.depth + 2), init=self.spec.mesh.depth, name=f"credits{v}")
                   for v in range(MESH_VCS)]
        for port in self.directions:
            q = m.submodules[f"queue_{PORT_NAMES[port]}"] = fifo.SyncFIFOBuffered(width=width,
                                                                                  depth=self.spec.queue_depth)
            rate = m.submodules[f"rate_{PORT_NAMES[port]}"] = RateToken(self.spec.mesh.link_rate)
            goes = Signal(name=f"goes_{PORT_NAMES[port]}")
            trees = [t for t, c in enumerate(self.children) if port in c]
            m.d.comb += [q.w_data.eq(Cat(data, vc)),
                         q.w_en.eq(self.eject.valid & sum((tree == t) for t in trees).bool()),
                         goes.eq(q.r_rdy & rate.token & Cat(*(c != 0 for c in credits)).bit_select(
                             q.r_data[-1], 1))]
            with m.If(q.w_en & ~q.w_rdy):
                m.d.sync += self.overflow.eq(1)
            queues.append(q)
            tokens.append(rate)
            ready.append(goes)
        self._choose(m, queues, tokens, ready, credits)
        m.d.comb += self.idle.eq(sum(q.r_rdy for q in queues) == 0 if queues else 1)
        return m

    def _choose(self, m, queues, tokens, ready, credits):
        """Round robin over the directions that can send; the chosen one's head to ``o``."""
        n = len(queues)
        last = Signal(range(max(n, 2)))
        pick = Signal(range(max(n, 2)))
        go = Signal()
        if n:
            m.d.comb += go.eq(Cat(*ready).any() & ~self.hold)
            # the first ready direction after the last one served
            for after in range(n):
                with m.If(last == after):
                    order = [(after + 1 + j) % n for j in range(n)]
                    for j in reversed(order):
                        with m.If(ready[j]):
                            m.d.comb += pick.eq(j)
        spent = [Signal(name=f"spent{v}") for v in range(MESH_VCS)]
        for j, (q, rate) in enumerate(zip(queues, tokens)):
            chosen = go & (pick == j)
            port = self.directions[j]
            x, y = self.dests[port]
            m.d.comb += [q.r_en.eq(chosen), rate.spend.eq(chosen)]
            with m.If(chosen):
                m.d.comb += [self.o.payload.data.eq(q.r_data[:-1]), self.o.payload.vc.eq(q.r_data[-1]),
                             self.o.payload.dest_x.eq(x), self.o.payload.dest_y.eq(y)]
                m.d.comb += [s.eq(q.r_data[-1] == v) for v, s in enumerate(spent)]
        with m.If(go):
            m.d.sync += last.eq(pick)
        m.d.comb += [self.o.valid.eq(go), self.o.payload.last.eq(1)]
        for v, count in enumerate(credits):
            m.d.sync += count.eq(count - spent[v] + self.credit[v])
