"""Amaranth-simulator harness of the packet switch (hdl/designs/switch/packet_switch.py), used by
tests/hdl/designs/test_packet_switch_sim.py and the characterization (studies/characterization/preemption.py).

Senders model the upstream of each input link: one credit counter per data VC (the input
buffer's depth), a packet starts only when its VC holds credits for all its flits (virtual
cut-through), flits are then sent in order with random idle cycles. Receivers model the
downstream buffer of each output: every flit that arrives is freed after a random delay and its
credit returned (at most one per cycle and port), which is the backpressure. Every transfer is
recorded with its cycle.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from amaranth.sim import Simulator

from hdl.contracts.config_port import config_word_layout
from hdl.contracts.packet import PRIORITY, VC, Packet, link_words
from hdl.contracts.reduction_order import ReductionOrder


@dataclass
class Injection:
    """A packet offered at ``port`` from cycle ``at`` on (after the configurations are loaded).
    A port sends the packets of one VC in the order of the list given to
    :func:`run_packet_switch`; between VCs, at packet boundaries, the highest-priority VC with
    a packet due and credits for it goes first (the sender's own VC arbitration)."""

    port: int
    at: int
    packet: Packet


@dataclass
class Run:
    received: dict = field(default_factory=dict)   # port -> [(cycle, data, last, tag)]
    sent: dict = field(default_factory=dict)       # port -> [(cycle, data, last, tag)]
    cycles: int = 0
    states: list = field(default_factory=list)     # control unit state per cycle
    flags: dict = field(default_factory=dict)      # overflow, credit_error, bad_header, dropped
    counters: dict = field(default_factory=dict)   # preemptions, selects
    credit_errors: list = field(default_factory=list)   # harness-side credit checks
    credits: dict = field(default_factory=dict)    # port -> the senders' credits at the end


def run_packet_switch(dut, *, configs, injections, rng=None, send_rate=1.0, drain_rate=1.0,
                      drain_delay=0, max_cycles=20_000, quiet=200, header_select=True, host=None,
                      check_order=True):
    """Load ``configs`` (slot k = configs[k]; a ``SwitchConfig`` or None), then run the traffic.

    ``send_rate``: probability a sender that may send does so in a cycle; ``drain_rate``: the
    probability a receiver frees its oldest flit in a cycle (after at least ``drain_delay``
    cycles), or ``{port: probability}`` (ports not named: 1). Stops ``quiet`` cycles after the last transfer once every packet was sent, or at
    ``max_cycles``. ``host(ctx, cycle)``: optional coroutine called every cycle (host mode).
    Cycle 0 is the first cycle after the configurations are loaded. ``check_order``: the
    senders check the host ordering rule of reductions as they start packets
    (:class:`~hdl.contracts.reduction_order.ReductionOrder`; a plan that breaks it raises
    :class:`~hdl.contracts.errors.FredError` instead of hanging the switch).
    """
    rng = rng or random.Random(0)
    run = Run(received={p: [] for p in range(dut.ports)}, sent={p: [] for p in range(dut.ports)})

    async def bench(ctx):
        await _load_configs(ctx, dut, configs)
        ctx.set(dut.header_select, int(header_select))
        served = {k for k, c in enumerate(configs) if c is not None}
        if dut.online:
            served.add(dut.packet.online_phase)
        links = _Links(dut, injections, rng, run, send_rate=send_rate, drain_rate=drain_rate,
                       drain_delay=drain_delay, check_order=check_order, served=served)
        last_move = 0
        for cycle in range(max_cycles):
            if host is not None:
                await host(ctx, cycle)
            words = links.drive_senders(ctx, cycle)
            links.drive_receivers(ctx, cycle)
            moved = await links.observe(ctx, cycle, words)
            if moved:
                last_move = cycle
            run.cycles = cycle + 1
            if links.all_sent() and cycle - last_move >= quiet:
                break
        run.flags = {"overflow": ctx.get(dut.overflow), "credit_error": ctx.get(dut.credit_error),
                     "bad_header": ctx.get(dut.bad_header),
                     "dropped": [ctx.get(d) for d in dut.dropped],
                     "ctrl_unknown": ctx.get(dut.ctrl_unknown), "busy": ctx.get(dut.busy)}
        run.credits = {p: list(c) for p, c in links.credits.items()}
        run.counters = {"preemptions": ctx.get(dut.preemptions), "selects": ctx.get(dut.selects)}

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return run


async def _load_configs(ctx, dut, configs):
    """Write ``configs`` (slot k = configs[k]; None: slot left empty) through the
    configuration port, one packet per slot, two idle cycles after each."""
    layout = config_word_layout(dut.phases, dut.word_width)
    for slot, config in enumerate(configs):
        if config is None:
            continue
        words = config.encode(dut.word_width)
        for n, w in enumerate(words):
            ctx.set(dut.config.valid, 1)
            ctx.set(dut.config.payload.as_value(),
                    layout.pack(data=w, last=n == len(words) - 1, phase=slot))
            await ctx.tick().until(dut.config.ready)
        ctx.set(dut.config.valid, 0)
        await ctx.tick().repeat(2)


class _Links:
    """The links around the switch, cycle by cycle (module docstring): per input a sender
    (its packets still to send, the packet being sent, one credit counter per VC), per output
    a receiver (the flits it holds, each with the cycle it may be freed). ``rng`` draws, in
    this order each cycle, the senders' and then the receivers' random choices (the same
    sequence as ever, so a seed gives the same run)."""

    def __init__(self, dut, injections, rng, run: Run, *, send_rate, drain_rate, drain_delay,
                 check_order=True, served=None):
        self.dut, self.fmt, self.rng, self.run = dut, dut.packet, rng, run
        self.send_rate, self.drain_rate, self.drain_delay = send_rate, drain_rate, drain_delay
        ports = range(dut.ports)
        self.queues = {p: [i for i in injections if i.port == p] for p in ports}
        # credits per VC; index 3 is the control VC (ctrl_depth slots; 0: the port has none)
        self.credits = {p: [dut.depth] * 3 + [dut.ctrl_depth] for p in ports}
        self.limits = [dut.depth] * 3 + [dut.ctrl_depth]
        self.current = {p: None for p in ports}     # sender: words of the packet being sent
        self.pending = {p: [] for p in ports}       # receiver: (free cycle, vc)
        self.order = (ReductionOrder(((i.port, i.packet) for i in injections), served)
                      if check_order else None)

    def drive_senders(self, ctx, cycle) -> dict:
        """Drive every input link for this cycle; returns ``{port: (data, last, tag)}`` of the
        words offered. A sender starts a packet when :func:`_next_packet` picks one (taking
        its credits), then offers its next word with probability ``send_rate``."""
        dut, words = self.dut, {}
        for p in range(dut.ports):
            if self.current[p] is None:
                self._start_packet(p, cycle)
            if self.current[p] and self.rng.random() < self.send_rate:
                words[p] = self.current[p].pop(0)
                if not self.current[p]:
                    self.current[p] = None
            data, last, tag = words.get(p, (0, 0, 0))
            ctx.set(dut.i[p].valid, p in words)
            ctx.set(dut.i[p].payload.as_value(), dut.flit.fields.pack(data=data, last=last, tag=tag))
        return words

    def _start_packet(self, p, cycle):
        """Start the packet :func:`_next_packet` picks for input ``p``, if any: its flits
        take credits of its VC (a control packet only if the port has a control VC)."""
        dut = self.dut
        pick = _next_packet(self.queues[p], cycle, self.credits[p], ctrl=dut.ctrl_depth > 0)
        if pick is None:
            return
        packet = self.queues[p].pop(pick).packet
        if self.order is not None:
            self.order.start(p, packet)
        self.current[p] = list(link_words(self.fmt, packet))
        if packet.vc < 3 or (packet.vc == 3 and dut.ctrl_depth):
            self.credits[p][packet.vc] -= len(packet.flits)

    def drive_receivers(self, ctx, cycle):
        """Per output, free the oldest flit that may go with probability ``drain_rate`` and
        return its credit on its VC (at most one credit per cycle and port)."""
        dut = self.dut
        for p in range(dut.ports):
            freed = None
            pending = self.pending[p]
            rate = self.drain_rate.get(p, 1.0) if isinstance(self.drain_rate, dict) else self.drain_rate
            if pending and pending[0][0] <= cycle and self.rng.random() < rate:
                freed = pending.pop(0)[1]
            for v in range(3):
                ctx.set(dut.o_credit[p][v], int(freed == v))
            ctx.set(dut.o_ctrl_credit[p], int(freed == 3))

    async def observe(self, ctx, cycle, words) -> bool:
        """Tick, then record this cycle: the control unit's state, the credits returned to
        each input (an excess over the buffer's depth is a credit error), the flits each
        output delivered, and the words sent. Returns whether any flit moved."""
        dut, run = self.dut, self.run
        watched = [dut.state]
        for p in range(dut.ports):
            watched += [dut.o[p].valid, dut.o[p].payload.as_value(), *dut.i_credit[p], dut.i_ctrl_credit[p]]
        values = list((await ctx.tick().sample(*watched))[2:])
        run.states.append(int(values.pop(0)))
        moved = bool(words)
        for p in range(dut.ports):
            valid, payload = values.pop(0), int(values.pop(0))
            self._return_credits(cycle, p, [int(values.pop(0)) for _ in range(4)])
            if valid:
                self._deliver(cycle, p, payload)
                moved = True
        for p, word in words.items():
            run.sent[p].append((cycle, *word))
        return moved

    def _return_credits(self, cycle, p, returned):
        """Add the credits ``returned`` (per VC) to input ``p``'s counters."""
        credits = self.credits[p]
        for v in range(4):
            credits[v] += returned[v]
            if credits[v] > self.limits[v]:
                self.run.credit_errors.append((cycle, p, v, credits[v]))

    def _deliver(self, cycle, p, payload):
        """Record the flit output ``p`` delivered and hold it in the receiver's buffer."""
        f = self.dut.flit.fields.unpack(payload)
        self.run.received[p].append((cycle, f["data"], f["last"], f["tag"]))
        vc = self.fmt.unpack_header(f["tag"])["vc"]
        self.pending[p].append((cycle + 1 + self.drain_delay, vc))

    def all_sent(self) -> bool:
        """Every packet sent whole."""
        return (all(not q for q in self.queues.values())
                and all(c is None for c in self.current.values()))


def _next_packet(queue, cycle, credits, *, ctrl=False):
    """Index in ``queue`` of the packet a sender starts now: per VC the packets go in list
    order; among the VCs whose next packet is due (``at <= cycle``) and fits the credits, the
    highest priority (control, then MP > PP > DP; other VC codes last). None if none may start."""
    first = {}
    for n, injection in enumerate(queue):
        first.setdefault(injection.packet.vc, n)
    # control packets first (they are short and others wait for them), then MP > PP > DP
    order = [3] + [int(v) for v in PRIORITY] + sorted(v for v in first if v not in {3, *map(int, PRIORITY)})
    for v in order:
        n = first.get(v)
        if n is None or queue[n].at > cycle:
            continue
        if (v >= 3 and not (v == 3 and ctrl)) or credits[v] >= len(queue[n].packet.flits):
            return n
    return None


def slot_writer(dut, *, slot, config, at):
    """A ``host`` for :func:`run_packet_switch` that rewrites ``slot`` with ``config`` (a
    ``SwitchConfig``) through the configuration port from cycle ``at``, one word per cycle
    while ``config.ready`` is high. Returns the coroutine; its ``done`` attribute is the cycle
    of the last word's transfer (None before)."""
    layout = config_word_layout(dut.phases, dut.word_width)
    words = config.encode(dut.word_width)
    state = {"next": 0}

    async def host(ctx, cycle):
        n = state["next"]
        if cycle < at or n >= len(words):
            ctx.set(dut.config.valid, 0)
            return
        ctx.set(dut.config.valid, 1)
        ctx.set(dut.config.payload.as_value(),
                layout.pack(data=words[n], last=n == len(words) - 1, phase=slot))
        if ctx.get(dut.config.ready):          # taken at this cycle's edge
            state["next"] = n + 1
            if n + 1 == len(words):
                host.done = cycle

    host.done = None
    return host


def flow_port_writer(dut, entries):
    """A ``host`` for :func:`run_packet_switch` that writes the switch's flow-port table, one
    entry ``(slot, input, partners, outputs)`` per cycle from cycle 0 (``docs/switch.md``,
    "Starting a packet"); inject packets only after ``len(entries)`` cycles."""
    entries = list(entries)

    async def host(ctx, cycle):
        ctx.set(dut.flow_we, int(cycle < len(entries)))
        if cycle < len(entries):
            slot, port, partners, outputs = entries[cycle]
            ctx.set(dut.flow_slot, slot)
            ctx.set(dut.flow_input, port)
            ctx.set(dut.flow_partners, partners)
            ctx.set(dut.flow_outputs, outputs)

    return host


def by_phase(fmt, words):
    """``{phase: [data, ...]}`` of one output's received ``(cycle, data, last, tag)`` records."""
    out = {}
    for _, data, _, tag in words:
        out.setdefault(fmt.unpack_header(tag)["phase"], []).append(data)
    return out


__all__ = ["Injection", "Run", "run_packet_switch", "slot_writer", "flow_port_writer", "by_phase",
           "VC"]
