"""Online unicast path set-up and release for Fred_m(P): the modes register of the packet
switch's default phase index."""

from __future__ import annotations

from amaranth import Const, Module, Signal
from amaranth.hdl import Cat
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.contracts.encoding import (DemuxMode, InputMode, MuxMode, OutputMode, RDMode,
                                        check_size, config_bits, layout, wire_bits)
from hdl.contracts.errors import FredError

__all__ = ["OnlineRouter"]


class OnlineRouter(wiring.Component):
    """Keeps the configuration vector of the unicast paths set up online; sets one up and
    releases one per cycle (the algorithm of :class:`hdl.compiler.online_routing.OnlineRoutingModel`,
    its reference model: at each level the lowest middle subnetwork whose link from the
    input's microswitch and whose link to the output's microswitch are both free).

    Parameters (keyword-only, validated): ports P >= 2, middle m >= 2 (m >= 3: a request
    between a free input and a free output always routes; m = 2: ``ok`` may be low).

    Members:
        req: ``In(1)``: set up a path ``src -> dst`` at the next clock edge (if ``ok``).
            The caller guarantees ``src`` and ``dst`` are on no path.
        src, dst: ``In(range(P))``.
        ok: ``Out(1)``: combinational, the request routes (always 1 at m >= 3).
        rel: ``In(P)``: bit n releases the path ending at output n at the next clock edge
            (the caller guarantees it exists and its flits have all left the datapath); any
            number at once (P release circuits, each for one constant output).
        modes: ``Out(config_bits(P, m))``: the registered configuration vector (reset: idle),
            for ``FredSwitch.modes``.

    Held links (``held``, P >= 3; the packet switch with paths set up behind others,
    ``docs/switch.md``, "Online unicast routing"): an input may own several paths at once
    (each packet takes its path's first wire, carried with the flit through the top-level
    input microswitch), and an output a path whose flits wait behind the current one's. The
    top level's lanes then no longer show every link in use, so the caller names them:
        in_block, out_block: ``In(m)``: the top-level links from ``src``'s input microswitch
            and into ``dst``'s output microswitch held by any path; the chosen middle avoids
            them (instead of the lanes' fields; the levels below are as without ``held``).
        keep_out: ``In(1)``: set up every field but ``dst``'s top-level output lane (the path
            waits behind the one on it).
        swap: ``In(P)``, swap_wire: ``In(wire_bits(m)).array(P)``: with ``rel[n]``, output
            n's top-level lane takes wire ``swap_wire[n]`` (the waiting path) instead of
            being cleared.
        wire: ``Out(wire_bits(m))``: the top-level middle the request takes.

    A set-up and releases may happen in the same cycle (they write disjoint fields: the
    set-up uses only links free before the releases). Latency: a path exists the cycle after
    ``req``; its modes change only lanes no flit is on (each input microswitch lane, wire and
    output lane carries one unicast path), which is why this can run while other paths carry
    flits (``docs/switch.md``, "Online unicast routing").
    """

    def __new__(cls, *, ports: int, middle: int, held: bool = False):
        check_size(ports, middle)
        if held and ports < 3:
            raise FredError(f"held links need P >= 3, got P = {ports}")
        return super().__new__(cls)

    def __init__(self, *, ports: int, middle: int, held: bool = False):
        self.ports, self.middle, self.held = ports, middle, bool(held)
        extra = {}
        if self.held:
            w = wire_bits(middle)
            extra = {"in_block": In(middle), "out_block": In(middle), "keep_out": In(1),
                     "swap": In(ports), "swap_wire": In(w).array(ports), "wire": Out(w)}
        super().__init__({
            **extra,
            "req": In(1),
            "src": In(range(ports)),
            "dst": In(range(ports)),
            "ok": Out(1),
            "rel": In(ports),
            "modes": Out(config_bits(ports, middle)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        width = config_bits(self.ports, self.middle)
        state = Signal(width)
        nxt = Signal(width)
        m.d.comb += [nxt.eq(state), self.modes.eq(state)]
        m.d.sync += state.eq(nxt)
        builder = _Builder(m, self.middle, state, nxt, self if self.held else None)
        ok = builder.route(self.ports, 0, self.req, self.src, self.dst, "r", top=True)
        m.d.comb += self.ok.eq(ok)
        commit = Signal()
        m.d.comb += commit.eq(self.req & ok)
        builder.commit_route(commit)
        for n in range(self.ports):
            builder.release(self.ports, 0, self.rel[n], Const(n, range(self.ports)), f"x{n}_",
                            swap=(self.swap[n], self.swap_wire[n]) if self.held else None)
        return m


class _Builder:
    """Generates one level's logic and recurses into the middles (offsets of the compiler's
    configuration layout)."""

    def __init__(self, m, middle, state, nxt, held=None):
        self.m, self.middle, self.state, self.nxt = m, middle, state, nxt
        self.held = held        # the router's held-link ports, used at the top level only
        self.writes = []   # (ask signal, list of (slice, value)) committed when the top commits

    def _field(self, vec, slot_offset, mode_cls, name):
        f = mode_cls.layout(self.middle)[name]
        return vec[slot_offset + f.offset:slot_offset + f.offset + f.width]

    def _slots(self, P, base):
        return {s.name: base + s.offset for s in layout(P, self.middle) if "." not in s.name}

    def _level(self, P, base):
        """Input / output lanes of this level: [(port, slot, cls, en, wire)] per side."""
        slots = self._slots(P, base)
        r = P // 2
        ins, outs = [], []
        for u in range(r):
            for lane in (0, 1):
                ins.append((2 * u + lane, slots[f"in[{u}]"], InputMode, f"in{lane}_en", f"in{lane}_wire"))
                outs.append((2 * u + lane, slots[f"out[{u}]"], OutputMode, f"out{lane}_en", f"out{lane}_wire"))
        if P % 2:
            ins.append((2 * r, slots["demux"], DemuxMode, "en", "wire"))
            outs.append((2 * r, slots["mux"], MuxMode, "en", "wire"))
        return ins, outs

    def route(self, P, base, ask, src, dst, name, top=False):
        """Returns ``ok`` (this level and the chosen middle's subtree route); records the writes
        to make when the top-level request commits."""
        m = self.m
        if P == 2:
            slot = self._slots(2, base)["rd"]
            for d in (0, 1):
                self.writes.append((ask & (dst == d), [(self._field(self.nxt, slot, RDMode, f"out{d}"),
                                                       src + 1)]))
            return 1
        mid = self.middle
        r, odd = P // 2, P % 2
        sub_ports = r + odd
        sub_base = {k: base + _sub_offset(P, mid, k) for k in range(mid)}
        ins, outs = self._level(P, base)
        # links of the input's microswitch in use (the other lane's), and of the output's
        in_used = Signal(mid, name=f"{name}_in_used")
        out_used = Signal(mid, name=f"{name}_out_used")
        for port, slot, cls, en, wire in ins:
            mate = [p for p in ins if p[1] == slot and p[0] != port]
            with m.If(src == port):
                for _, slot2, cls2, en2, wire2 in mate:
                    e, w = self._field(self.state, slot2, cls2, en2), self._field(self.state, slot2, cls2, wire2)
                    for k in range(mid):
                        m.d.comb += in_used[k].eq(e & (w == k))
        for port, slot, cls, en, wire in outs:
            mate = [p for p in outs if p[1] == slot and p[0] != port]
            with m.If(dst == port):
                for _, slot2, cls2, en2, wire2 in mate:
                    e, w = self._field(self.state, slot2, cls2, en2), self._field(self.state, slot2, cls2, wire2)
                    for k in range(mid):
                        m.d.comb += out_used[k].eq(e & (w == k))
        top = top and self.held is not None
        used = (self.held.in_block | self.held.out_block) if top else (in_used | out_used)
        chosen = Signal(range(mid), name=f"{name}_k")
        found = Signal(name=f"{name}_found")
        for k in reversed(range(mid)):      # the lowest free middle wins
            with m.If(~used[k]):
                m.d.comb += [chosen.eq(k), found.eq(1)]
        sub_src, sub_dst = src >> 1, dst >> 1   # the demux / mux port 2r is sub-port r
        sub_ok = []
        for k in range(mid):
            sub_ask = Signal(name=f"{name}{k}_ask")
            m.d.comb += sub_ask.eq(ask & found & (chosen == k))
            sub_ok.append(sub_ask & self.route(sub_ports, sub_base[k], sub_ask, sub_src, sub_dst,
                                               f"{name}{k}"))
        for port, slot, cls, en, wire in ins:
            self.writes.append((ask & found & (src == port),
                                [(self._field(self.nxt, slot, cls, en), 1),
                                 (self._field(self.nxt, slot, cls, wire), chosen)]))
        out_ask = ask & found & ~self.held.keep_out if top else ask & found
        for port, slot, cls, en, wire in outs:
            self.writes.append((out_ask & (dst == port),
                                [(self._field(self.nxt, slot, cls, en), 1),
                                 (self._field(self.nxt, slot, cls, wire), chosen)]))
        if top:
            self.m.d.comb += self.held.wire.eq(chosen)
        ok = Signal(name=f"{name}_ok")
        m.d.comb += ok.eq(found & Cat(*sub_ok).any())
        return ok

    def commit_route(self, commit):
        for cond, assigns in self.writes:
            with self.m.If(commit & cond):
                for target, value in assigns:
                    self.m.d.comb += target.eq(value)

    def release(self, P, base, rel, dst, name, swap=None):
        """Clears the path ending at ``dst`` (when ``rel``); returns its source port. ``swap``
        (top level, held links): (bit, wire): the output lane takes that wire instead."""
        m = self.m
        src = Signal(range(P), name=f"{name}_src")
        if P == 2:
            slot = self._slots(2, base)["rd"]
            for d in (0, 1):
                with m.If(dst == d):
                    m.d.comb += src.eq(self._field(self.state, slot, RDMode, f"out{d}") - 1)
                    with m.If(rel):
                        m.d.comb += self._field(self.nxt, slot, RDMode, f"out{d}").eq(0)
            return src
        mid = self.middle
        r, odd = P // 2, P % 2
        ins, outs = self._level(P, base)
        k_rel = Signal(range(mid), name=f"{name}_k")
        for port, slot, cls, en, wire in outs:
            with m.If(dst == port):
                m.d.comb += k_rel.eq(self._field(self.state, slot, cls, wire))
                with m.If(rel):
                    m.d.comb += [self._field(self.nxt, slot, cls, en).eq(0),
                                 self._field(self.nxt, slot, cls, wire).eq(0)]
                    if swap is not None:
                        with m.If(swap[0]):
                            m.d.comb += [self._field(self.nxt, slot, cls, en).eq(1),
                                         self._field(self.nxt, slot, cls, wire).eq(swap[1])]
        sub_src = Signal(range(r + odd), name=f"{name}_u")
        for k in range(mid):
            sub_rel = Signal(name=f"{name}{k}_rel")
            m.d.comb += sub_rel.eq(rel & (k_rel == k))
            u = self.release(r + odd, base + _sub_offset(P, mid, k), sub_rel, dst >> 1, f"{name}{k}")
            with m.If(k_rel == k):
                m.d.comb += sub_src.eq(u)
        # the input lane of sub-port u that uses wire k_rel
        for port, slot, cls, en, wire in ins:
            e, w = self._field(self.state, slot, cls, en), self._field(self.state, slot, cls, wire)
            with m.If((sub_src == (port >> 1)) & e & (w == k_rel)):
                m.d.comb += src.eq(port)
                with m.If(rel):
                    m.d.comb += [self._field(self.nxt, slot, cls, en).eq(0),
                                 self._field(self.nxt, slot, cls, wire).eq(0)]
        return src


def _sub_offset(P, middle, k):
    sub = (P // 2 + P % 2)
    first = f"mid[{k}].in[0]" if sub > 2 else f"mid[{k}].rd"
    for s in layout(P, middle):
        if s.name == first:
            return s.offset
    raise FredError(f"internal: no {first} in Fred_{middle}({P})")
