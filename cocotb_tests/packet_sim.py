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


def run_packet_switch(dut, *, configs, injections, rng=None, send_rate=1.0, drain_rate=1.0,
                      drain_delay=0, max_cycles=20_000, quiet=200, header_select=True, host=None):
    """Load ``configs`` (slot k = configs[k]; a ``SwitchConfig`` or None), then run the traffic.

    ``send_rate``: probability a sender that may send does so in a cycle; ``drain_rate``: the
    probability a receiver frees its oldest flit in a cycle (after at least ``drain_delay``
    cycles). Stops ``quiet`` cycles after the last transfer once every packet was sent, or at
    ``max_cycles``. ``host(ctx, cycle)``: optional coroutine called every cycle (host mode).
    Cycle 0 is the first cycle after the configurations are loaded.
    """
    rng = rng or random.Random(0)
    fmt = dut.packet
    run = Run(received={p: [] for p in range(dut.ports)}, sent={p: [] for p in range(dut.ports)})
    layout = config_word_layout(dut.phases, dut.word_width)

    async def bench(ctx):
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
        ctx.set(dut.header_select, int(header_select))
        queues = {p: [i for i in injections if i.port == p]
                  for p in range(dut.ports)}
        # credits per VC; index 3 is the control VC (ctrl_depth slots; 0: the port has none)
        credits = {p: [dut.depth] * 3 + [dut.ctrl_depth] for p in range(dut.ports)}
        limits = [dut.depth] * 3 + [dut.ctrl_depth]
        current = {p: None for p in range(dut.ports)}
        pending = {p: [] for p in range(dut.ports)}    # receiver: (free cycle, vc)
        last_move = 0
        for cycle in range(max_cycles):
            if host is not None:
                await host(ctx, cycle)
            words = {}
            for p in range(dut.ports):
                if current[p] is None:
                    pick = _next_packet(queues[p], cycle, credits[p], ctrl=dut.ctrl_depth > 0)
                    if pick is not None:
                        packet = queues[p].pop(pick).packet
                        current[p] = list(link_words(fmt, packet))
                        if packet.vc < 3 or (packet.vc == 3 and dut.ctrl_depth):
                            credits[p][packet.vc] -= len(packet.flits)
                if current[p] and rng.random() < send_rate:
                    words[p] = current[p].pop(0)
                    if not current[p]:
                        current[p] = None
                data, last, tag = words.get(p, (0, 0, 0))
                ctx.set(dut.i[p].valid, p in words)
                ctx.set(dut.i[p].payload.as_value(), dut.flit.fields.pack(data=data, last=last, tag=tag))
            for p in range(dut.ports):
                freed = None
                if pending[p] and pending[p][0][0] <= cycle and rng.random() < drain_rate:
                    freed = pending[p].pop(0)[1]
                for v in range(3):
                    ctx.set(dut.o_credit[p][v], int(freed == v))
                ctx.set(dut.o_ctrl_credit[p], int(freed == 3))
            watched = [dut.state]
            for p in range(dut.ports):
                watched += [dut.o[p].valid, dut.o[p].payload.as_value(), *dut.i_credit[p], dut.i_ctrl_credit[p]]
            values = list((await ctx.tick().sample(*watched))[2:])
            run.states.append(int(values.pop(0)))
            moved = bool(words)
            for p in range(dut.ports):
                valid, payload = values.pop(0), int(values.pop(0))
                returned = [int(values.pop(0)) for _ in range(4)]
                for v in range(4):
                    credits[p][v] += returned[v]
                    if credits[p][v] > limits[v]:
                        run.credit_errors.append((cycle, p, v, credits[p][v]))
                if valid:
                    f = dut.flit.fields.unpack(payload)
                    run.received[p].append((cycle, f["data"], f["last"], f["tag"]))
                    vc = fmt.unpack_header(f["tag"])["vc"]
                    pending[p].append((cycle + 1 + drain_delay, vc))
                    moved = True
            for p, word in words.items():
                run.sent[p].append((cycle, *word))
            if moved:
                last_move = cycle
            run.cycles = cycle + 1
            done = all(not q for q in queues.values()) and all(c is None for c in current.values())
            if done and cycle - last_move >= quiet:
                break
        run.flags = {"overflow": ctx.get(dut.overflow), "credit_error": ctx.get(dut.credit_error),
                     "bad_header": ctx.get(dut.bad_header),
                     "dropped": [ctx.get(d) for d in dut.dropped],
                     "ctrl_unknown": ctx.get(dut.ctrl_unknown)}
        run.counters = {"preemptions": ctx.get(dut.preemptions), "selects": ctx.get(dut.selects)}

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return run


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


def by_phase(fmt, words):
    """``{phase: [data, ...]}`` of one output's received ``(cycle, data, last, tag)`` records."""
    out = {}
    for _, data, _, tag in words:
        out.setdefault(fmt.unpack_header(tag)["phase"], []).append(data)
    return out


__all__ = ["Injection", "Run", "run_packet_switch", "by_phase", "VC"]
