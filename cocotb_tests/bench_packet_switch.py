"""cocotb bench of the packet switch (``fred_packet_switch``, hdl/designs/switch/packet_switch.py) under
Verilator.

Fixed design of the bench (``DESIGN``; the pytest entry generates the same): Fred_2(4) int32 x 1
lane, K = 3 phases, 4-flit packets, 8-flit VC buffers. Phases: 0 = DP all-reduce of inputs 0, 1 to
every output; 1 = MP permutation 2 -> 0, 3 -> 1; 2 = PP 0 -> 3, 1 -> 2.

Per cycle (at each rising edge, then sampled at ReadOnly): senders (one per input, one credit
counter per data VC, a packet starts only with credits for all its flits, the highest-priority
VC due first) drive the links; receivers (one per output) free each flit after a random delay
and return its credit. Every output flit goes to a scoreboard keyed per (output, flow) with tag
(seq, flit index), ordered: loss, duplication, corruption, misrouting and reordering are all
reported. A watchdog fails the run if nothing moves for 2000 cycles while packets are
outstanding. The switch's ``overflow`` / ``credit_error`` flags and the senders' counters are
checked every cycle (never above the buffer depth).

Testcases: ``preemption`` (DP running, MP arrives: the MP phase preempts, DP completes
afterwards; metrics: preemption latency, DP completion with and without MP), ``mixed_random``
(all three phases, random arrival times, idle senders and slow receivers), ``control_vc``
(ACK / NACK packets on the control VC beside the data phases: every control packet out of every
input port of its flow, counted) and ``online_unicast`` (random unicast of the default phase
index, routed online, preempted by the MP phase and resumed). The design has the control VC
(``ctrl_depth`` 2) and online routing on; at m = 2 an online request can block (not strict-sense
non-blocking) and then waits (the bench does not count how often that happens).
"""

from __future__ import annotations

import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from cocotb_tests.lib import bench_params
from cocotb_tests.lib.metrics import record
from cocotb_tests.lib.scoreboard import TaggedScoreboard
from cocotb_tests.lib.seeds import seeded_rng
from cocotb_tests.lib.watchdog import Watchdog
from hdl.compiler.flows import Flow
from hdl.compiler.functional import simulate
from hdl.compiler.router import route
from hdl.contracts.config_port import config_word_layout
from hdl.contracts.flit import FlitFormat
from hdl.contracts.packet import PRIORITY, VC, Packet, PacketFormat, link_words, packetize

PKT = PacketFormat(phase_bits=2, seq_bits=6, flow_bits=2, packet_flits=4, dest_bits=2)
DESIGN = {"ports": 4, "middle": 2, "dtype": "int32", "lanes": 1, "phases": 3, "depth": 8,
          "ctrl_depth": 2, "online": True}
CTRL_DEPTH = DESIGN["ctrl_depth"]
ONLINE = PKT.online_phase   # 3: the default index, unicast routed online
ACK, NACK = 0, 1            # a control packet's kind, in its ``phase`` field
FLIT = FlitFormat(dtype="int32", lanes=1, tag_width=PKT.header_width)
P, M = DESIGN["ports"], DESIGN["middle"]

#: phase -> (VC, flows, {input: flow id}, {output: flow id whose header it carries})
PHASES = {
    0: (VC.DP, [Flow(inputs=(0, 1), outputs=(0, 1, 2, 3))], {0: 0, 1: 0}, {0: 0, 1: 0, 2: 0, 3: 0}),
    1: (VC.MP, [Flow(inputs=(2,), outputs=(0,)), Flow(inputs=(3,), outputs=(1,))], {2: 1, 3: 2}, {0: 1, 1: 2}),
    2: (VC.PP, [Flow(inputs=(0,), outputs=(3,)), Flow(inputs=(1,), outputs=(2,))], {0: 3, 1: 3}, {3: 3, 2: 3}),
}


def _flow_outputs(flow):
    return {p for _, (_, _, _, outs) in PHASES.items() for p, f in outs.items() if f == flow}


def _config(phase):
    return route(ports=P, middle=M, flows=PHASES[phase][1]).phases[0].config


def _int(handle) -> int:
    return int(handle.value)


class PacketBench:
    def __init__(self, dut, rng, *, send_rate=1.0, drain_rate=1.0, drain_delay=0):
        self.dut, self.rng = dut, rng
        self.send_rate, self.drain_rate, self.drain_delay = send_rate, drain_rate, drain_delay
        self.depth = DESIGN["depth"]
        self.queues = {p: [] for p in range(P)}          # (at, packet)
        self.current = {p: None for p in range(P)}
        self.credits = {p: [self.depth] * 3 + [CTRL_DEPTH] for p in range(P)}
        self.limits = [self.depth] * 3 + [CTRL_DEPTH]
        # control VC: packets waiting for their flow to be seen at an output, then queued;
        # expected and observed control flits per output (multisets)
        self.ctrl_waiting = []                           # (flow, port, packet)
        self.ctrl_expected = {p: [] for p in range(P)}
        self.ctrl_observed = {p: [] for p in range(P)}
        self.flow_outputs = {}                           # flow -> outputs that saw its data
        self.ctrl_sent = 0
        self.pending = {p: [] for p in range(P)}         # receiver: (free cycle, vc)
        self.board = TaggedScoreboard("packet switch", ordered=True)
        self.expected_flits = 0
        self.observed = {p: [] for p in range(P)}        # (cycle, phase, flow, seq, data)
        self.sent = {p: [] for p in range(P)}            # (cycle, phase)
        self.in_packet = {p: 0 for p in range(P)}        # flit index inside the current packet
        self.cycle = 0

    def add_phase_traffic(self, phase, data, at):
        """Queue ``data[input]`` of ``phase`` from cycle ``at[input]``; expect the functional
        model's outputs on the scoreboard."""
        vc, _, in_flows, out_flows = PHASES[phase]
        for port, flow in in_flows.items():
            for pk in packetize(PKT, data[port], phase=phase, vc=vc, flow=flow):
                self.queues[port].append((at[port], pk))
        inputs = [np.array(data[p], dtype=np.uint32)[:, None] if p in data else None for p in range(P)]
        out = simulate(P, M, _config(phase), "int32", inputs)
        for port, flow in out_flows.items():
            for n, value in enumerate(out[port][:, 0]):
                self.board.expect((port, flow), (phase, n // PKT.packet_flits, n % PKT.packet_flits),
                                  int(value))
                self.expected_flits += 1

    async def reset_and_load(self):
        dut = self.dut
        Clock(dut.clk, 10, unit="ns").start()
        dut.rst.value = 1
        dut.header_select.value = 0
        dut.config__valid.value = 0
        dut.phase__valid.value = 0
        dut.host_vc.value = 0
        dut.flow_clear.value = 0
        for p in range(P):
            getattr(dut, f"i__{p}__valid").value = 0
            getattr(dut, f"o_ctrl_credit__{p}").value = 0
            for v in range(3):
                getattr(dut, f"o_credit__{p}__{v}").value = 0
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        layout = config_word_layout(DESIGN["phases"])
        for slot in PHASES:
            words = _config(slot).encode()
            for n, w in enumerate(words):
                dut.config__valid.value = 1
                dut.config__payload.value = layout.pack(data=w, last=n == len(words) - 1, phase=slot)
                await RisingEdge(dut.clk)
                while not _int(dut.config__ready):
                    await RisingEdge(dut.clk)
            dut.config__valid.value = 0
            for _ in range(3):
                await RisingEdge(dut.clk)
        assert _int(dut.loaded) == (1 << DESIGN["phases"]) - 1, "configurations did not load"
        dut.header_select.value = 1

    def _next_packet(self, port):
        queue = self.queues[port]
        first = {}
        for n, (_, pk) in enumerate(queue):
            first.setdefault(pk.vc, n)
        for v in (3, *PRIORITY):    # control packets first, then MP > PP > DP
            n = first.get(int(v))
            if n is not None and queue[n][0] <= self.cycle and self.credits[port][v] >= len(queue[n][1].flits):
                return n
        return None

    def add_unicast_traffic(self, packets_per_input, *, at=0, vc=VC.DP):
        """Online-routed packets (phase ``ONLINE``): each input sends ``packets_per_input``
        packets to random outputs; flow = source port, sequence numbers per (source,
        destination); scoreboard key (output, "u", flow)."""
        for src in range(P):
            seq = {}
            for _ in range(packets_per_input):
                dst = self.rng.randrange(P)
                data = [self.rng.getrandbits(32) for _ in range(PKT.packet_flits)]
                pk = packetize(PKT, data, phase=ONLINE, vc=vc, flow=src,
                               first_seq=seq.get(dst, 0), dest=dst)[0]
                seq[dst] = seq.get(dst, 0) + 1
                self.queues[src].append((at, pk))
                for k, value in enumerate(data):
                    self.board.expect((dst, "u", src), (ONLINE, pk.seq, k), value)
                    self.expected_flits += 1

    def add_control(self, port, *, kind, flow, seq, data):
        """A one-flit control packet entering ``port`` once every output of ``flow`` has seen
        a data flit of it (so every input of the flow has started a packet and the switch has
        learned them all: PP flow 3's two inputs feed different outputs); expected on the
        output of every input port of the flow."""
        pk = Packet(phase=kind, vc=VC.CTRL, seq=seq, flow=flow, flits=(data,))
        self.ctrl_waiting.append((flow, port, pk))
        inputs = {p for phase, (_, _, in_flows, _) in PHASES.items()
                  for p, f in in_flows.items() if f == flow}
        tag = PKT.pack_header(phase=kind, vc=VC.CTRL, seq=seq, flow=flow)
        for p in inputs:
            self.ctrl_expected[p].append((tag, data))

    def ctrl_outstanding(self):
        return sum(len(e) for e in self.ctrl_expected.values()) - \
            sum(len(o) for o in self.ctrl_observed.values())

    def outstanding(self):
        return self.board.outstanding + self.ctrl_outstanding()

    async def run(self, *, max_cycles=50_000):
        dut = self.dut
        watchdog = Watchdog(2000, self.outstanding, name="packet switch watchdog")
        clk = dut.clk
        while self.outstanding() > 0:
            await RisingEdge(clk)
            self.cycle += 1
            if self.cycle > max_cycles:
                raise AssertionError(f"not done after {max_cycles} cycles")
            # drive
            for p in range(P):
                if self.current[p] is None:
                    n = self._next_packet(p)
                    if n is not None:
                        _, pk = self.queues[p].pop(n)
                        self.current[p] = (pk.phase, list(link_words(PKT, pk)))
                        self.credits[p][pk.vc] -= len(pk.flits)
                        self.ctrl_sent += pk.vc == VC.CTRL
                word = None
                if self.current[p] is not None and self.rng.random() < self.send_rate:
                    phase, words = self.current[p]
                    word = words.pop(0)
                    self.sent[p].append((self.cycle, phase))
                    if not words:
                        self.current[p] = None
                getattr(dut, f"i__{p}__valid").value = int(word is not None)
                if word is not None:
                    d, last, tag = word
                    getattr(dut, f"i__{p}__payload").value = FLIT.fields.pack(data=d, last=last, tag=tag)
                freed = None
                if self.pending[p] and self.pending[p][0][0] <= self.cycle and self.rng.random() < self.drain_rate:
                    freed = self.pending[p].pop(0)[1]
                for v in range(3):
                    getattr(dut, f"o_credit__{p}__{v}").value = int(freed == v)
                getattr(dut, f"o_ctrl_credit__{p}").value = int(freed == VC.CTRL)
            await ReadOnly()
            moved = False
            for p in range(P):
                for v in range(4):
                    handle = f"i_credit__{p}__{v}" if v < 3 else f"i_ctrl_credit__{p}"
                    self.credits[p][v] += _int(getattr(dut, handle))
                    assert self.credits[p][v] <= self.limits[v], \
                        f"input {p} VC {v}: {self.credits[p][v]} credits > depth {self.limits[v]} (cycle {self.cycle})"
                if _int(getattr(dut, f"o__{p}__valid")):
                    f = FLIT.fields.unpack(_int(getattr(dut, f"o__{p}__payload")))
                    h = PKT.unpack_header(f["tag"])
                    if h["vc"] == VC.CTRL:
                        assert self.in_packet[p] == 0, f"output {p}: control flit inside a data packet"
                        self.ctrl_observed[p].append((f["tag"], f["data"]))
                        self.pending[p].append((self.cycle + 1 + self.drain_delay, VC.CTRL))
                        moved = True
                        continue
                    self.flow_outputs.setdefault(h["flow"], set()).add(p)
                    if h["phase"] == ONLINE:
                        assert h["dest"] == p, f"online packet for {h['dest']} left output {p}"
                        key = (p, "u", h["flow"])
                    else:
                        key = (p, h["flow"])
                    k = self.in_packet[p]
                    self.in_packet[p] = 0 if f["last"] else k + 1
                    error = self.board.observe(key, (h["phase"], h["seq"], k), f["data"])
                    assert error is None, str(error)
                    self.observed[p].append((self.cycle, h["phase"], h["flow"], h["seq"], f["data"]))
                    self.pending[p].append((self.cycle + 1 + self.drain_delay, h["vc"]))
                    moved = True
            assert not _int(dut.overflow), f"an input buffer overflowed (cycle {self.cycle})"
            assert not _int(dut.credit_error), f"an output got more credits than its depth (cycle {self.cycle})"
            if moved:
                watchdog.kick()
            watchdog.tick(self.cycle)
            for item in list(self.ctrl_waiting):     # release control packets of seen flows
                flow, port, pk = item
                if self.flow_outputs.get(flow, set()) >= _flow_outputs(flow):
                    self.ctrl_waiting.remove(item)
                    self.queues[port].append((self.cycle, pk))
            assert self.ctrl_outstanding() >= 0, "more control flits than expected"
        self.board.check()
        for p in range(P):
            assert sorted(self.ctrl_observed[p]) == sorted(self.ctrl_expected[p]), \
                f"output {p}: control flits {self.ctrl_observed[p]} != {self.ctrl_expected[p]}"
        assert _int(dut.bad_header) == 0 and _int(dut.ctrl_unknown) == 0

    def first(self, phase, *, sent=False):
        table = self.sent if sent else self.observed
        return min(r[0] for p in range(P) for r in table[p] if r[1] == phase)

    def last(self, phase):
        return max(r[0] for p in range(P) for r in self.observed[p] if r[1] == phase)


def _data(rng, ports, flits):
    return {p: [rng.getrandbits(32) for _ in range(flits)] for p in ports}


@cocotb.test()
async def preemption(dut):
    """DP all-reduce running; MP arrives at cycle ``mp_at``; MP preempts, DP completes; both
    bit-exact. Metrics: preemption latency, DP completion, and DP alone (a second run)."""
    params = bench_params()
    rng = seeded_rng("packet_switch.preemption")
    dp = _data(rng, (0, 1), params.get("dp_flits", 64))
    mp = _data(rng, (2, 3), params.get("mp_flits", 16))
    bench = PacketBench(dut, rng)
    await bench.reset_and_load()
    bench.add_phase_traffic(0, dp, {0: 0, 1: 0})
    mp_at = params.get("mp_at", 30)
    bench.add_phase_traffic(1, mp, {2: mp_at, 3: mp_at})
    await bench.run()
    mp_head = bench.first(1, sent=True) + 1
    mp_out = bench.first(1)
    dp_after = [c for p in range(P) for c, ph, *_ in bench.observed[p] if ph == 0 and c > bench.last(1)]
    assert bench.first(0) < mp_out and dp_after, "MP did not preempt a running DP phase"
    assert _int(dut.preemptions) == 1
    metrics = {"preemption_latency_cycles": mp_out - mp_head, "dp_done_cycle": bench.last(0),
               "mp_done_cycle": bench.last(1), "dp_resume_cycles": min(dp_after) - bench.last(1),
               "selects": _int(dut.selects), "flits_checked": bench.board.matched}
    dut._log.info(f"packet switch preemption: {metrics}")
    record(**metrics)


@cocotb.test()
async def mixed_random(dut):
    """All three phases with random arrival times, idle senders and slow receivers."""
    params = bench_params()
    rng = seeded_rng("packet_switch.mixed")
    bench = PacketBench(dut, rng, send_rate=params.get("send_rate", 0.7),
                        drain_rate=params.get("drain_rate", 0.5), drain_delay=2)
    await bench.reset_and_load()
    flits = params.get("flits", 24)
    for phase, (_, _, inputs, _) in PHASES.items():
        start = rng.randrange(0, 80)
        bench.add_phase_traffic(phase, _data(rng, tuple(inputs), flits),
                                {p: start for p in inputs})
    await bench.run()
    metrics = {"mixed_cycles": bench.cycle, "mixed_flits_checked": bench.board.matched,
               "mixed_preemptions": _int(dut.preemptions), "mixed_selects": _int(dut.selects)}
    for phase, (vc, *_rest) in PHASES.items():
        span = bench.last(phase) - bench.first(phase) + 1
        count = sum(1 for p in range(P) for r in bench.observed[p] if r[1] == phase)
        outputs = len(PHASES[phase][3])
        metrics[f"throughput_{vc.name}"] = round(count / outputs / span, 4)
    dut._log.info(f"packet switch mixed traffic: {metrics}")
    record(**metrics)


@cocotb.test()
async def control_vc(dut):
    """ACK / NACK traffic on the control VC beside all three data phases (idle senders, slow
    receivers): each flow's receivers send a cumulative ACK every 2 data packets and one NACK;
    every control packet must come out of the output of every input port of its flow (a NACK
    for the DP reduction reaches both contributors), exactly once, never inside a data
    packet; nothing dropped, no unknown flow, credits of the control VC checked every cycle."""
    params = bench_params()
    rng = seeded_rng("packet_switch.control_vc")
    bench = PacketBench(dut, rng, send_rate=params.get("send_rate", 0.8),
                        drain_rate=params.get("drain_rate", 0.6), drain_delay=1)
    await bench.reset_and_load()
    flits = params.get("ctrl_data_flits", 16)
    packets = flits // PKT.packet_flits
    nacks = {}                      # (flow, data) -> the flow's input ports
    for phase, (_, _, inputs, outputs) in PHASES.items():
        start = rng.randrange(0, 40)
        bench.add_phase_traffic(phase, _data(rng, tuple(inputs), flits), {p: start for p in inputs})
        for flow in sorted(set(inputs.values())):
            receivers = sorted(p for p, f in outputs.items() if f == flow)
            for port in receivers:  # the flow's receivers answer through their own port
                for seq in range(1, packets, 2):
                    bench.add_control(port, kind=ACK, flow=flow, seq=seq, data=rng.getrandbits(32))
            data = rng.getrandbits(32)
            bench.add_control(receivers[0], kind=NACK, flow=flow, seq=packets - 1, data=data)
            nacks[(flow, data)] = {p for p, f in inputs.items() if f == flow}
    expected = sum(len(e) for e in bench.ctrl_expected.values())
    await bench.run()
    delivered = sum(len(o) for o in bench.ctrl_observed.values())
    assert delivered == expected and not bench.ctrl_waiting
    fanout = {}
    for p in range(P):
        for tag, data in bench.ctrl_observed[p]:
            h = PKT.unpack_header(tag)
            if h["phase"] == NACK:
                fanout.setdefault((h["flow"], data), set()).add(p)
    assert fanout == nacks, f"NACK fan-out {fanout} != the flows' inputs {nacks}"
    assert any(len(v) > 1 for v in nacks.values())      # a NACK reached several inputs
    metrics = {"ctrl_sent": bench.ctrl_sent, "ctrl_delivered": delivered, "ctrl_nacks": len(nacks),
               "ctrl_nack_copies": sum(len(v) for v in fanout.values()),
               "ctrl_data_flits_checked": bench.board.matched, "ctrl_cycles": bench.cycle}
    dut._log.info(f"packet switch control VC: {metrics}")
    record(**metrics)


@cocotb.test()
async def online_unicast(dut):
    """Random unicast traffic of the default phase index (routed online: contention for
    outputs, idle senders, slow receivers), with the MP phase (a stored configuration)
    arriving mid-way: it preempts the online phase, which then resumes. Every online packet
    must leave the output its header names, per flow in order, bit-exact."""
    params = bench_params()
    rng = seeded_rng("packet_switch.online")
    bench = PacketBench(dut, rng, send_rate=params.get("send_rate", 0.8),
                        drain_rate=params.get("drain_rate", 0.6), drain_delay=1)
    await bench.reset_and_load()
    bench.add_unicast_traffic(params.get("unicast_packets", 12))
    mp_at = params.get("online_mp_at", 40)
    bench.add_phase_traffic(1, _data(rng, (2, 3), params.get("mp_flits", 16)), {2: mp_at, 3: mp_at})
    await bench.run()
    online = [(c, p) for p in range(P) for c, ph, *_ in bench.observed[p] if ph == ONLINE]
    per_cycle = {}
    for c, _ in online:
        per_cycle[c] = per_cycle.get(c, 0) + 1
    metrics = {"online_flits": len(online), "online_cycles": bench.cycle,
               "online_parallel_cycles": sum(1 for n in per_cycle.values() if n >= 2),
               "online_throughput": round(len(online) / P / (max(per_cycle) - min(per_cycle) + 1), 4),
               "online_preemptions": _int(dut.preemptions), "online_selects": _int(dut.selects)}
    dut._log.info(f"packet switch online unicast: {metrics}")
    record(**metrics)
