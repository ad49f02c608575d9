"""cocotb bench for ``fred_switch`` (:class:`hdl.designs.switch.FredSwitchTop`) under Verilator.

Every phase is routed by the compiler (``hdl.compiler.router.route``), loaded through the
configuration port into one of the K slots, selected, and then driven with tagged packets on
every input of every flow. Each output flit is predicted bit for bit by the functional model
(``hdl.compiler.functional.simulate`` for the data; ``symbolic`` for the framing: a sum carries
the framing of its in0 operand, i.e. of the leftmost leaf of its addition tree) and checked by a
:class:`TaggedScoreboard` keyed on (phase round, flit sequence number): loss, duplication,
corruption and misrouting are all caught; the watchdog fails the test on a deadlock.

Flit tag = ``input_port << seq_bits | seq``: ``seq`` numbers the flits of a round (the same for
all inputs of a flow), so the tag arriving at an output also says which input's framing it got.

Bench parameters (``bench_params()``): ``ports middle dtype lanes phases tag_width`` (the
design), ``latency`` (the design's property), ``config_words``, ``idle``, ``backpressure``,
``rounds``, ``max_length``, ``sizes`` (group sizes for the directed collective test).
"""

from __future__ import annotations

import numpy as np

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from cocotb_tests.lib import StreamHarness, TaggedScoreboard, bench_params, metrics, seeded_rng
from cocotb_tests.lib import coverage
from hdl.contracts.encoding import DEFAULT_WORD_WIDTH, InputMode, RDMode, SwitchConfig
from hdl.compiler.flows import Flow
from hdl.compiler.functional import simulate, symbolic
from hdl.compiler.router import route
from hdl.contracts.config_port import ConfigError, config_word_layout
from hdl.contracts.flit import FlitFormat

WATCHDOG_CYCLES = 3000


def _leftmost_leaf(tree):
    while isinstance(tree, tuple):
        tree = tree[1]
    return tree


class SwitchBench:
    """Drivers/sinks on every port, the configuration and phase ports, one scoreboard."""

    def __init__(self, dut, name: str, *, idle: float | None = None, backpressure: float | None = None):
        p = bench_params()
        self.dut = dut
        self.params = p
        self.ports, self.middle, self.phases = p["ports"], p["middle"], p["phases"]
        self.fmt = FlitFormat(dtype=p["dtype"], lanes=p["lanes"], tag_width=p["tag_width"])
        self.rng = seeded_rng(f"switch.{name}.P{self.ports}m{self.middle}.{p['dtype']}")
        self.np_rng = np.random.default_rng(self.rng.getrandbits(32))
        self.idle = p.get("idle", 0.3) if idle is None else idle
        self.backpressure = p.get("backpressure", 0.3) if backpressure is None else backpressure
        self.stall = False   # when True every sink holds ready low
        self.stalled_outputs: set[int] = set()   # sinks that hold ready low (non_interference)
        self.port_bits = max(1, (self.ports - 1).bit_length())
        self.seq_bits = self.fmt.tag_width - self.port_bits
        assert self.seq_bits >= 6, "tag_width too small for this many ports"
        self.harness = h = StreamHarness(dut, dut.clk, watchdog_cycles=WATCHDOG_CYCLES)
        self.scoreboard = TaggedScoreboard(f"switch.{name}")
        self.drivers = [h.driver(f"i__{n}", idle=self._idle_gen()) for n in range(self.ports)]
        self.sinks = [h.sink(f"o__{n}", backpressure=self._backpressure_gen(n),
                             on_transfer=self._observer(n)) for n in range(self.ports)]
        self.config_word = config_word_layout(self.phases)
        self.config = h.driver("config")
        self.phase = h.driver("phase")
        h.outstanding = lambda: (sum(d.pending for d in self.drivers) + self.scoreboard.outstanding
                                 + self.config.pending + self.phase.pending)
        self.round = 0
        self.sent = 0
        self.slot = 0
        self.active_flows = []   # (inputs, outputs) of the flows of the latest round driven
        self.coverage = None
        if coverage.enabled():   # functional coverage (make coverage): sampled from the ports
            self.coverage = coverage.SwitchCoverage(self.ports, self.middle)
            self.coverage_probe = coverage.SwitchCoverageProbe(
                dut, self.coverage, word_layout=self.config_word, flows=lambda: self.active_flows,
                in_flight=lambda: self.scoreboard.outstanding)
            h.agents.append(self.coverage_probe)

    def _idle_gen(self):
        while True:
            yield self.rng.random() < self.idle

    def _backpressure_gen(self, port):
        while True:
            yield self.stall or port in self.stalled_outputs or self.rng.random() < self.backpressure

    def _observer(self, port):
        flit = self.fmt.fields
        seq_mask = (1 << self.seq_bits) - 1

        def observe(cycle, word):
            seq = flit.get(word, "tag") & seq_mask
            error = self.scoreboard.observe(port, (self.round, seq), word)
            if error is not None:
                # fail at the first wrong flit: a switch that repeats a flit forever (a stage
                # whose valid never drops) would otherwise keep the watchdog fed and the bench
                # waiting for a drain that never comes
                raise AssertionError(f"{self.scoreboard.name}: {error} (cycle {cycle}; "
                                     f"{self.scoreboard.matched} flits matched before)")
        return observe

    async def start(self):
        await self.harness.start()

    # -- configuration --------------------------------------------------------------------
    def config_packet(self, words, slot, *, last_at=None):
        """Payload ints of a configuration packet (``last`` on word ``last_at``, default the final)."""
        last_at = len(words) - 1 if last_at is None else last_at
        return [self.config_word.pack(data=w, last=i == last_at, phase=slot)
                for i, w in enumerate(words)]

    async def load(self, config: SwitchConfig, slot: int):
        self.config.send_all(self.config_packet(config.encode(), slot))
        await self.harness.wait_until(lambda: self.config.pending == 0, what="configuration written")
        await self.harness.cycles(2)   # the packet check takes one cycle after `last`

    async def select(self, slot: int):
        self.phase.send(slot)
        await self.harness.wait_until(lambda: self.phase.pending == 0, what=f"phase {slot} selected")
        await RisingEdge(self.dut.clk)
        await ReadOnly()

    async def drain(self):
        await self.harness.wait_until(
            lambda: self.scoreboard.outstanding == 0 and all(d.pending == 0 for d in self.drivers),
            what="all flits delivered")

    async def run_phase(self, config: SwitchConfig, flows, *, lengths=None, max_length=16):
        """Load ``config`` into the next slot while the previous phase's traffic may still be
        flowing, wait for that traffic to drain, select, and send this phase's packets (the
        caller drains the last phase)."""
        await self.activate(config)
        self.send_traffic(config, flows, lengths=lengths, max_length=max_length)

    async def activate(self, config: SwitchConfig) -> int:
        """Load ``config`` into the next slot, wait for the traffic in flight to drain, select
        it (both without a configuration error) and start a new scoreboard round; the slot."""
        slot = self.slot
        self.slot = (self.slot + 1) % self.phases
        await self.load(config, slot)
        assert int(self.dut.error.value) == ConfigError.NONE, f"load error {int(self.dut.error.value)}"
        await self.drain()
        await self.select(slot)
        assert int(self.dut.error.value) == ConfigError.NONE, f"select error {int(self.dut.error.value)}"
        assert int(self.dut.active_phase.value) == slot and int(self.dut.active_valid.value) == 1
        self.round += 1
        return slot

    def send_traffic(self, config, flows, *, lengths=None, max_length=16):
        fmt, dt = self.fmt, self.fmt.element
        lengths = lengths or [self.rng.randint(1, max_length) for _ in flows]
        assert max(lengths) < (1 << self.seq_bits)
        inputs = [None] * self.ports
        in_length, out_length = {}, {}
        for flow, length in zip(flows, lengths):
            for port in flow.inputs:
                inputs[port] = dt.random_bits(self.np_rng, (length, fmt.lanes))
                in_length[port] = length
            for port in flow.outputs:
                out_length[port] = length
        outputs = simulate(self.ports, self.middle, config, fmt.dtype, inputs)
        self.active_flows = [(tuple(f.inputs), tuple(f.outputs)) for f in flows]
        if self.coverage:
            for flow in flows:
                self.coverage.sample_flow(flow.inputs, flow.outputs)
        trees, problems = symbolic(config, sorted(in_length))
        assert not problems, problems
        for port in range(self.ports):
            if outputs[port] is None:
                assert port not in out_length, f"the model sends nothing to flow output {port}"
                continue
            leaf = _leftmost_leaf(trees[port])
            length = out_length[port]
            data = np.asarray(outputs[port]).reshape(length, fmt.lanes)
            for n in range(length):
                word = fmt.pack(data[n], last=n == length - 1, tag=leaf << self.seq_bits | n)
                self.scoreboard.expect(port, (self.round, n), word)
        for port, length in sorted(in_length.items()):
            for n in range(length):
                word = fmt.pack(inputs[port][n], last=n == length - 1, tag=port << self.seq_bits | n)
                self.drivers[port].send(word)
                self.sent += 1

    def finish(self, name):
        self.scoreboard.check()
        if hasattr(self.dut, "mismatch"):   # a co-simulation of flat and hierarchical Verilog
            assert int(self.dut.mismatch.value) == 0, \
                "the flat and the hierarchical build disagreed on some output (cocotb_tests.cosim)"
            metrics.record(**{f"{name}_cosim_cycles": self.harness.cycle})
        received = sum(s.transfers for s in self.sinks)
        self.dut._log.info("%s: %d rounds, %d flits sent, %d flits received and matched",
                           name, self.round, self.sent, self.scoreboard.matched)
        metrics.record(**{f"{name}_flits_sent": self.sent, f"{name}_flits_received": received,
                          f"{name}_rounds": self.round})
        if self.coverage:
            path = self.coverage.write()
            metrics.record(**{f"{name}_coverage_file": str(path),
                              f"{name}_configs_accepted": self.coverage_probe.accepted})


def random_flows(rng, ports):
    """A random set of disjoint flows: random group sizes, random input/output sets."""
    ins, outs = list(range(ports)), list(range(ports))
    rng.shuffle(ins)
    rng.shuffle(outs)
    flows = []
    while ins and outs:
        k_in = rng.randint(1, min(len(ins), max(1, ports // 2)))
        k_out = rng.randint(1, min(len(outs), max(1, ports // 2)))
        if rng.random() < 0.3:   # all-reduce style: inputs = outputs where possible
            group = [p for p in ins[:k_in] if p in outs]
            if group:
                flows.append(Flow(inputs=tuple(group), outputs=tuple(group)))
                ins = [p for p in ins if p not in group]
                outs = [p for p in outs if p not in group]
                continue
        flows.append(Flow(inputs=tuple(ins[:k_in]), outputs=tuple(outs[:k_out])))
        ins, outs = ins[k_in:], outs[k_out:]
        if rng.random() < 0.15:
            break   # leave some ports unused
    return flows


def permute_middles(config: SwitchConfig, rng) -> SwitchConfig:
    """The same routes with the m middle subnetworks of every Fred_m(.) (at every level) in a
    random order: middle k's configuration moves to position perm[k] and the wires of that
    level's input/output microswitches, demux and mux that named k name perm[k]. The middles are
    identical, so the switch must deliver exactly what it delivered before; the compiler's router
    fills low wire indices first, and this is how the benches reach the modes that use the others
    (e.g. ``in0 -> wire 2`` at the deepest levels)."""
    from dataclasses import replace
    from hdl.contracts.encoding import DemuxMode, MuxMode, OutputMode
    m = config.middle
    modes = {slot.name: mode for slot, mode in zip(config.slots, config.modes)}

    def remap(mode, perm):
        if isinstance(mode, InputMode):
            return replace(mode, in0_wire=perm[mode.in0_wire] if mode.in0_en else 0,
                           in1_wire=perm[mode.in1_wire] if mode.in1_en else 0)
        if isinstance(mode, OutputMode):
            return replace(mode, out0_wire=perm[mode.out0_wire] if mode.out0_en else 0,
                           out1_wire=perm[mode.out1_wire] if mode.out1_en else 0)
        if isinstance(mode, (DemuxMode, MuxMode)):
            return replace(mode, wire=perm[mode.wire] if mode.en else 0)
        return mode

    def subtree(prefix: str, ports: int) -> dict:
        if ports == 2:
            return {prefix + "rd": modes[prefix + "rd"]}
        perm = list(range(m))
        rng.shuffle(perm)
        out = {}
        for name, mode in modes.items():
            rest = name[len(prefix):]
            if name.startswith(prefix) and not rest.startswith("mid["):
                out[name] = remap(mode, perm)
        for k in range(m):
            old = f"{prefix}mid[{k}]."
            for name, mode in subtree(old, ports // 2 + ports % 2).items():
                out[f"{prefix}mid[{perm[k]}]." + name[len(old):]] = mode
        return out

    return SwitchConfig.from_modes(config.ports, m, subtree("", config.ports))


def share_deepest_middle(config: SwitchConfig, rng) -> SwitchConfig:
    """The same routes with two flows that cross sibling Fred_m(2) middles on disjoint ports
    moved into one of them (its RD microswitch then passes two flows: ``out0 <- in0, out1 <-
    in1`` or crossed), when the configuration has such a pair; otherwise ``config`` unchanged.
    The router never shares a deepest middle between unrelated flows, so without this the benches
    would never drive those RD modes. Every candidate is checked to be legal (the mode classes)
    and to deliver exactly what ``config`` delivers (the functional model, on random data at every
    port) before it is used."""
    from dataclasses import replace
    from hdl.contracts.encoding import DemuxMode, MuxMode, OutputMode, RD_NONE
    from hdl.contracts.errors import FredError
    P, m = config.ports, config.middle
    modes = {slot.name: mode for slot, mode in zip(config.slots, config.modes)}
    parents = sorted({name[:-len("mid[0].rd")] for name in modes if name.endswith("mid[0].rd")})
    data = [np.arange(4, dtype=np.uint32) * 7 + 11 * n for n in range(P)]
    reference = simulate(P, m, config, "int32", data)
    candidates = []
    for prefix in parents:
        for k in range(m):
            for k2 in range(m):
                if k != k2:
                    candidates.append((prefix, k, k2))
    rng.shuffle(candidates)

    def used(rd):
        ins, outs = set(), set()
        for j, o in enumerate((rd.out0, rd.out1)):
            if o != RD_NONE:
                outs.add(j)
                ins |= {0: set(), 1: {0}, 2: {1}, 3: {0, 1}}[o]
        return ins, outs

    def reroute(new, prefix, port, k_from, k_to, side):
        names = [n for n in new if n.startswith(prefix) and n[len(prefix):] in
                 ((f"in[{port}]", "demux") if side == "in" else (f"out[{port}]", "mux"))]
        sub_r = None
        for n in names:
            rest = n[len(prefix):]
            mode = new[n]
            if rest in (f"in[{port}]", f"out[{port}]"):
                fields = ("in0", "in1") if isinstance(mode, InputMode) else ("out0", "out1")
                # one replace: a reducing input mode must move both wires at once
                moved = {f + "_wire": k_to for f in fields
                         if getattr(mode, f + "_en") and getattr(mode, f + "_wire") == k_from}
                new[n] = replace(mode, **moved)
                sub_r = True
        if sub_r is None:   # odd parent: port r is the demux (in) / mux (out)
            n = prefix + ("demux" if side == "in" else "mux")
            mode = new.get(n)
            if isinstance(mode, (DemuxMode, MuxMode)) and mode.en and mode.wire == k_from:
                new[n] = replace(mode, wire=k_to)

    for prefix, k, k2 in candidates:
        a, b = modes[f"{prefix}mid[{k}].rd"], modes[f"{prefix}mid[{k2}].rd"]
        (ia, oa), (ib, ob) = used(a), used(b)
        if not ia or not ib or ia & ib or oa & ob:
            continue
        new = dict(modes)
        new[f"{prefix}mid[{k}].rd"] = RDMode(out0=a.out0 or b.out0, out1=a.out1 or b.out1)
        new[f"{prefix}mid[{k2}].rd"] = RDMode()
        try:   # a move the mode rules forbid (two inputs onto one wire) is no candidate
            for port in ib:
                reroute(new, prefix, port, k2, k, "in")
            for port in ob:
                reroute(new, prefix, port, k2, k, "out")
            candidate = SwitchConfig.from_modes(P, m, new)
        except FredError:
            continue
        got = simulate(P, m, candidate, "int32", data)
        if all((x is None and y is None) or (x is not None and y is not None and np.array_equal(x, y))
               for x, y in zip(reference, got)):
            return candidate
    return config


async def run_flows(bench, flows, **kwargs):
    result = route(ports=bench.ports, middle=bench.middle, flows=flows, seed=bench.rng.getrandbits(16))
    for phase in result.phases:
        await bench.run_phase(phase.config, list(phase.flows), **kwargs)
    return len(result.phases)


@cocotb.test()
async def random_flow_sets(dut):
    """Random flow sets from the compiler, random packet lengths, idle cycles and backpressure."""
    p = bench_params()
    bench = SwitchBench(dut, "random")
    await bench.start()
    phases = 0
    for _ in range(p.get("rounds", 10)):
        phases += await run_flows(bench, random_flows(bench.rng, bench.ports),
                                  max_length=p.get("max_length", 24))
    await bench.drain()
    bench.finish("random")
    metrics.record(random_phases=phases)


@cocotb.test()
async def directed_collectives(dut):
    """Unicast permutations, multicast, reduce, all-reduce on groups of every size, concurrent flows."""
    p = bench_params()
    bench = SwitchBench(dut, "directed")
    await bench.start()
    P, rng = bench.ports, bench.rng
    ports = list(range(P))
    # unicast: identity, reversal, a random permutation
    perm = ports[:]
    rng.shuffle(perm)
    for mapping in (ports, ports[::-1], perm):
        await run_flows(bench, [Flow(inputs=(s,), outputs=(d,)) for s, d in zip(ports, mapping)])
    for size in p.get("sizes", range(1, P + 1)):
        group = tuple(sorted(rng.sample(ports, size)))
        others = tuple(q for q in ports if q not in group)
        await run_flows(bench, [Flow(inputs=group, outputs=group)])          # all-reduce
        await run_flows(bench, [Flow(inputs=group, outputs=(group[0],))])    # reduce to root
        await run_flows(bench, [Flow(inputs=(group[-1],), outputs=group)])   # multicast
        if size >= 2:  # concurrent: the group all-reduces while the rest is a permutation
            shuffled = list(others)
            rng.shuffle(shuffled)
            await run_flows(bench, [Flow(inputs=group, outputs=group)]
                            + [Flow(inputs=(s,), outputs=(d,)) for s, d in zip(others, shuffled)])
    # broadcast to every port and all-reduce of every port
    await run_flows(bench, [Flow(inputs=(0,), outputs=tuple(ports))])
    await run_flows(bench, [Flow(inputs=tuple(ports), outputs=tuple(ports))])
    await bench.drain()
    bench.finish("directed")


@cocotb.test()
async def throughput_and_latency(dut):
    """No idle, no backpressure: every output must deliver 1.0 flit/cycle after fill, and the
    first flit must appear exactly ``latency`` cycles after the first input transfer."""
    p = bench_params()
    bench = SwitchBench(dut, "throughput", idle=0.0, backpressure=0.0)
    await bench.start()
    P = bench.ports
    length = p.get("length", 200)
    cases = {
        "permutation": [Flow(inputs=(s,), outputs=((s + 1) % P,)) for s in range(P)],
        "all_reduce": [Flow(inputs=tuple(range(P)), outputs=tuple(range(P)))],
        "broadcast": [Flow(inputs=(P - 1,), outputs=tuple(range(P)))],
    }
    figures = {}
    for name, flows in cases.items():
        result = route(ports=P, middle=bench.middle, flows=flows, split=False)
        config = result.phases[0].config
        await bench.activate(config)
        marks_in = [len(d.transfer_cycles) for d in bench.drivers]
        marks_out = [len(s.transfer_cycles) for s in bench.sinks]
        bench.send_traffic(config, flows, lengths=[length] * len(flows))
        await bench.drain()
        first_in = min(d.transfer_cycles[k] for d, k in zip(bench.drivers, marks_in)
                       if len(d.transfer_cycles) > k)
        rates, latencies = [], []
        for sink, k in zip(bench.sinks, marks_out):
            cycles = sink.transfer_cycles[k:]
            if not cycles:
                continue
            assert len(cycles) == length
            rates.append((len(cycles) - 1) / (cycles[-1] - cycles[0]))
            latencies.append(cycles[0] - first_in)
        figures[name] = {"min_throughput": min(rates), "max_throughput": max(rates),
                         "latency_min": min(latencies), "latency_max": max(latencies),
                         "outputs": len(rates)}
        dut._log.info("%s: throughput per output %.4f..%.4f flit/cycle, latency %d..%d cycles "
                      "(property %d)", name, min(rates), max(rates), min(latencies),
                      max(latencies), p["latency"])
    bench.finish("throughput")
    metrics.record(throughput=figures, latency_property=p["latency"])
    for name, f in figures.items():
        assert f["min_throughput"] == 1.0, f"{name}: throughput {f['min_throughput']} < 1.0"
        assert f["latency_min"] == f["latency_max"] == p["latency"], f"{name}: latency {f}"


@cocotb.test()
async def non_interference(dut):
    """One output stalled for good must not slow the flows that do not go to it: with every port
    in a unicast permutation, no idle cycles and no other backpressure, the sink of one flow
    holds ``ready`` low while the packets are sent, and every other flow must still deliver its
    packet at 1 flit/cycle, within ``length + latency + 8`` cycles of the first input transfer
    (the bound: fill once, then one flit per cycle). The stalled flow's flits wait (the sink
    then resumes and the scoreboard checks them too). Each stalled output in turn, for two
    permutations, each routed as the compiler routes it and with the middles permuted
    (:func:`permute_middles`: the other wire indices): a ready term that couples one input's
    or wire's handshake to another's (e.g. an input microswitch fork where input 1 waits for
    wire 0) shows here and nowhere else, since the other benches' backpressure is random and
    their throughput test never stalls."""
    p = bench_params()
    bench = SwitchBench(dut, "non_interference", idle=0.0, backpressure=0.0)
    await bench.start()
    P, rng = bench.ports, bench.rng
    length = p.get("length", 32)
    shuffled = list(range(P))
    rng.shuffle(shuffled)
    checked = 0
    for mapping in ([(s + 1) % P for s in range(P)], shuffled):
        flows = [Flow(inputs=(s,), outputs=(d,)) for s, d in enumerate(mapping)]
        routed = route(ports=P, middle=bench.middle, flows=flows, split=False).phases[0].config
        for config in (routed, permute_middles(routed, rng)):
            for stalled in range(P):
                await bench.activate(config)
                bench.stalled_outputs = {stalled}
                marks_in = [len(d.transfer_cycles) for d in bench.drivers]
                marks_out = [len(s.transfer_cycles) for s in bench.sinks]
                bench.send_traffic(config, flows, lengths=[length] * P)
                others = [o for o in range(P) if o != stalled]
                bound = length + p["latency"] + 8
                await bench.harness.wait_until(
                    lambda: any(len(d.transfer_cycles) > k for d, k in zip(bench.drivers, marks_in)),
                    timeout_cycles=64, what="a first input transfer")
                await bench.harness.wait_until(
                    lambda: all(len(bench.sinks[o].transfer_cycles) - marks_out[o] >= length
                                for o in others),
                    timeout_cycles=bound,
                    what=f"{length} flits on every output but the stalled output {stalled} "
                         f"(mapping {mapping}, modes {config.modes})")
                for o in others:
                    cycles = bench.sinks[o].transfer_cycles[marks_out[o]:]
                    rate = (len(cycles) - 1) / (cycles[-1] - cycles[0])
                    assert rate == 1.0, (f"output {o}: {rate:.3f} flit/cycle while output "
                                         f"{stalled} is stalled (mapping {mapping})")
                assert len(bench.sinks[stalled].transfer_cycles) == marks_out[stalled]
                bench.stalled_outputs = set()
                await bench.drain()
                checked += 1
    bench.finish("non_interference")
    metrics.record(non_interference_cases=checked)


class _ActiveProbe:
    """A harness agent that samples (active_valid, active_phase) every settled cycle."""

    def __init__(self, dut):
        self.dut = dut
        self.samples = []

    def _edge(self, cycle):
        pass

    def _reset(self):
        pass

    def _sample(self, cycle):
        self.samples.append((int(self.dut.active_valid.value), int(self.dut.active_phase.value)))


@cocotb.test()
async def configuration_protocol(dut):
    """Load protocol: bad packets are rejected with the right error and leave the running phase
    intact; a select waits while flits are in flight and holds the inputs; a select of an
    unloaded or out-of-range slot fails at once, also while flits are in flight; active_valid stays
    1 through a later select's copy."""
    bench = SwitchBench(dut, "config", idle=0.2, backpressure=0.2)
    await bench.start()
    P, m, K = bench.ports, bench.middle, bench.phases
    flows = [Flow(inputs=(s,), outputs=(P - 1 - s,)) for s in range(P)]
    good = route(ports=P, middle=m, flows=flows, split=False).phases[0].config
    words = good.encode()

    async def bad_packet(payloads, expected):
        bench.config.send_all(payloads)
        await bench.harness.wait_until(lambda: bench.config.pending == 0, what="packet written")
        await bench.harness.cycles(2)
        await ReadOnly()
        got = int(dut.error.value)
        assert got == expected, f"error {got}, expected {expected}"

    # selecting a slot that was never loaded
    bench.phase.send(K - 1)
    await bench.harness.wait_until(lambda: bench.phase.pending == 0, what="select")
    await bench.harness.cycles(1)
    await ReadOnly()
    assert int(dut.error.value) == ConfigError.NOT_LOADED
    assert int(dut.active_valid.value) == 0
    # a good phase in slot 0, used
    await bench.run_phase(good, flows)
    await bench.drain()
    # too short and too long packets, in slot 1
    if len(words) > 1:
        await bad_packet(bench.config_packet(words[:-1], 1), ConfigError.WORD_COUNT)
        await bad_packet(bench.config_packet(words, 1, last_at=len(words) - 2), ConfigError.WORD_COUNT)
    await bad_packet(bench.config_packet(words + [0], 1), ConfigError.WORD_COUNT)
    # two words too many: the word counter saturates (docs/verification.md: a branch code coverage found
    # unexercised when a phase is one word long)
    await bad_packet(bench.config_packet(words + [0, 0], 1), ConfigError.WORD_COUNT)
    # an illegal mode: make the first microswitch reduce two inputs onto different wires
    # (input mode) or sum on one RD output while passing an input on the other
    first = good.slots[0]
    if first.kind == "input":
        illegal = InputMode.layout(m).pack(in0_en=1, in0_wire=0, in1_en=1, in1_wire=1, reduce=1)
    else:
        illegal = RDMode.layout(m).pack(out0=3, out1=1)
    value = good.to_int() & ~(((1 << first.width) - 1) << first.offset) | (illegal << first.offset)
    word_mask = (1 << DEFAULT_WORD_WIDTH) - 1
    bad_words = [(value >> (DEFAULT_WORD_WIDTH * i)) & word_mask for i in range(len(words))]
    await bad_packet(bench.config_packet(bad_words, 1), ConfigError.ILLEGAL_MODE)
    # non-zero padding bits
    if good.bit_width % DEFAULT_WORD_WIDTH:
        padded = words[:-1] + [words[-1] | (1 << (DEFAULT_WORD_WIDTH - 1))]
        await bad_packet(bench.config_packet(padded, 1), ConfigError.ILLEGAL_MODE)
    # a phase field out of range (only representable when K is not a power of two)
    if K & (K - 1):
        await bad_packet([bench.config_word.pack(data=words[-1], last=1, phase=K)], ConfigError.BAD_PHASE)
    # slot 1 was never loaded successfully: selecting it fails and slot 0 stays active
    await bench.drain()
    bench.phase.send(1)
    await bench.harness.wait_until(lambda: bench.phase.pending == 0, what="select")
    await bench.harness.cycles(1)
    await ReadOnly()
    assert int(dut.error.value) == ConfigError.NOT_LOADED
    assert int(dut.active_phase.value) == 0 and int(dut.active_valid.value) == 1
    # slot 0 still routes
    await bench.harness.cycles(1)
    bench.round += 1
    bench.send_traffic(good, flows)
    await bench.drain()

    # select while busy: stall every output, let flits enter, then ask for another phase
    slot2 = 2 % K
    other_flows = [Flow(inputs=tuple(range(P)), outputs=tuple(range(P)))]
    other = route(ports=P, middle=m, flows=other_flows, split=False).phases[0].config
    bench.stall = True
    bench.round += 1
    # 4 flits per port fit inside the switch (P = 2: 2; one RD microswitch holds 3 per path)
    bench.send_traffic(good, flows, lengths=[4 if P >= 4 else 2] * len(flows))
    await bench.harness.wait_until(lambda: all(d.pending == 0 for d in bench.drivers),
                                   what="stalled flits entered")
    # a select that cannot take effect completes at once, whatever the datapath holds: slot 2
    # is not loaded yet (NOT_LOADED); an index >= K (BAD_PHASE) where the phase field can hold one
    failing = [(slot2, ConfigError.NOT_LOADED)] if slot2 != 0 else []
    if K < (1 << max(1, (K - 1).bit_length())):
        failing.append((K, ConfigError.BAD_PHASE))
    for slot, error in failing:
        bench.phase.send(slot)
        await bench.harness.cycles(2)
        await ReadOnly()
        assert bench.phase.pending == 0, f"a select of slot {slot} must not wait for the datapath"
        assert int(dut.error.value) == error, f"select of slot {slot}: error {int(dut.error.value)}"
        assert int(dut.busy.value) == 1 and int(dut.active_phase.value) == 0
        assert int(dut.active_valid.value) == 1
    await bench.load(other, slot2)   # loading while flits are in flight is allowed
    probe = _ActiveProbe(dut)
    bench.harness.agents.append(probe)
    bench.phase.send(slot2)
    await bench.harness.cycles(30)
    await ReadOnly()
    assert int(dut.busy.value) == 1, "busy must be high while flits are in flight"
    assert bench.phase.pending == 1, "the select must wait until the switch is drained"
    held = [int(getattr(dut, f"i__{n}__ready").value) for n in range(P)]
    assert held == [0] * P, f"inputs must be held while a select is pending, ready={held}"
    bench.stall = False
    await bench.drain()   # the old phase's flits come out intact
    await bench.harness.wait_until(lambda: bench.phase.pending == 0, what="select after drain")
    await bench.harness.cycles(1)
    await ReadOnly()
    assert int(dut.active_phase.value) == slot2 and int(dut.error.value) == ConfigError.NONE
    # active_valid never drops once a select succeeded (not during the wait, not during the
    # copy); active_phase is the old slot until the select completes, then the new one
    bench.harness.agents.remove(probe)
    assert all(valid == 1 for valid, _ in probe.samples), probe.samples
    phases = [phase for _, phase in probe.samples]
    if slot2 != 0:   # K = 2 re-selects slot 0
        old_cycles = phases.index(slot2) if slot2 in phases else len(phases)
        assert old_cycles >= 30 + len(words) + 1 and set(phases[:old_cycles]) == {0}, probe.samples
        assert set(phases[old_cycles:]) <= {slot2}, probe.samples
    await bench.harness.cycles(1)
    bench.round += 1
    bench.send_traffic(other, other_flows)
    await bench.drain()

    # two selects back to back (the second offered in the cycle the first completes): both take
    # effect, each copy of N words in a bounded time (docs/verification.md: a configuration memory that
    # does not restart its word count for a select arriving right after a copy never finishes
    # the second copy, and holds the inputs for good)
    bench.phase.send_all([0, slot2])
    bound = 2 * (len(words) + 8)
    await bench.harness.wait_until(lambda: bench.phase.pending == 0, timeout_cycles=bound,
                                   what="two back-to-back selects")
    await bench.harness.cycles(1)
    await ReadOnly()
    assert int(dut.active_phase.value) == slot2 and int(dut.error.value) == ConfigError.NONE
    await bench.harness.cycles(1)
    bench.round += 1
    bench.send_traffic(other, other_flows)
    await bench.drain()

    # one flit alone in the switch, held at its stalled output: `busy` stays high and a select
    # waits for it, at every output port (docs/verification.md: an output microswitch whose busy term saw
    # only a full output buffer let a select through with one flit left in it)
    await bench.select(0)
    for port in range(P):
        flow = next(f for f in flows if f.outputs == (port,))
        bench.stalled_outputs = {port}
        bench.round += 1
        bench.send_traffic(good, [flow], lengths=[1])
        await bench.harness.wait_until(lambda: all(d.pending == 0 for d in bench.drivers),
                                       timeout_cycles=64, what="the flit entered")
        await bench.harness.cycles(bench.params["latency"] + 4)   # it reached the output
        bench.phase.send(0)
        await bench.harness.cycles(8)
        await ReadOnly()
        assert int(dut.busy.value) == 1, f"busy low with a flit held at output {port}"
        assert bench.phase.pending == 1, f"a select went through with a flit held at output {port}"
        bench.stalled_outputs = set()
        await bench.drain()
        await bench.harness.wait_until(lambda: bench.phase.pending == 0, timeout_cycles=64,
                                       what="the select after the drain")
    bench.finish("config")
    metrics.record(config_words=len(words))


def illegal_encodings(kind: str, middle: int) -> list[int]:
    """Every value of a ``kind`` microswitch's mode field that the contract rejects (the
    compiler's mode classes raise on it): the values the configuration checker must refuse."""
    from hdl.contracts.encoding import DemuxMode, MuxMode, OutputMode
    from hdl.contracts.errors import FredError
    cls = {"input": InputMode, "output": OutputMode, "rd": RDMode, "demux": DemuxMode,
           "mux": MuxMode}[kind]
    bad = []
    for value in range(1 << cls.width(middle)):
        try:
            cls.unpack(value, middle).check(middle)
        except FredError:
            bad.append(value)
    return bad


@cocotb.test()
async def illegal_modes(dut):
    """An illegal mode in any one microswitch rejects the whole packet: for every microswitch
    of the switch (every slot of the configuration vector, at every level), a packet that
    differs from a legal configuration only in that microswitch's field, set to an illegal
    value of its kind (the kind's illegal values taken in turn, so every one of them is tried),
    ends with ILLEGAL_MODE, leaves the slot unloaded and the active phase running; a packet
    with the same field set to a legal value is accepted."""
    from hdl.contracts.encoding import layout
    bench = SwitchBench(dut, "illegal", idle=0.0, backpressure=0.0)
    await bench.start()
    P, m, K = bench.ports, bench.middle, bench.phases
    flows = [Flow(inputs=(s,), outputs=(P - 1 - s,)) for s in range(P)]
    good = route(ports=P, middle=m, flows=flows, split=False).phases[0].config
    await bench.run_phase(good, flows)
    await bench.drain()
    word_mask = (1 << DEFAULT_WORD_WIDTH) - 1
    nwords = len(good.encode())
    bad_values = {kind: illegal_encodings(kind, m) for kind in ("input", "output", "rd", "demux", "mux")}
    turn = {kind: 0 for kind in bad_values}
    target = 1 % K   # slot 0 is active; packets go to another slot

    def packet(value):
        words = [(value >> (DEFAULT_WORD_WIDTH * i)) & word_mask for i in range(nwords)]
        return bench.config_packet(words, target)

    async def send(payloads):
        bench.config.send_all(payloads)
        await bench.harness.wait_until(lambda: bench.config.pending == 0, what="packet written")
        await bench.harness.cycles(2)
        await ReadOnly()
        return int(dut.error.value), (int(dut.loaded.value) >> target) & 1

    checked = 0
    base = good.to_int()
    slots = layout(P, m)
    for kind, values in bad_values.items():
        of_kind = [slot for slot in slots if slot.kind == kind]
        if not of_kind or not values:
            continue
        # every illegal value of the kind at least once, every slot of the kind at least once
        for i in range(max(len(of_kind), len(values))):
            slot, illegal = of_kind[i % len(of_kind)], values[i % len(values)]
            field = ((1 << slot.width) - 1) << slot.offset
            error, loaded = await send(packet(base & ~field | (illegal << slot.offset)))
            assert error == ConfigError.ILLEGAL_MODE and loaded == 0, \
                (f"{slot.name} ({slot.kind}) = {illegal:#x}: error {error}, slot {target} "
                 f"loaded {loaded}; expected ILLEGAL_MODE and not loaded")
            assert int(dut.active_phase.value) == 0 and int(dut.active_valid.value) == 1
            if i < len(of_kind):
                # the same packet with the field idle (always legal) is accepted
                error, loaded = await send(packet(base & ~field))
                assert error == ConfigError.NONE and loaded == 1, \
                    f"{slot.name} idle: error {error}, loaded {loaded}"
            checked += 1
    # the active phase still routes
    await bench.harness.cycles(1)
    bench.round += 1
    bench.send_traffic(good, flows)
    await bench.drain()
    bench.finish("illegal")
    metrics.record(illegal_slots_checked=checked)


@cocotb.test()
async def permuted_middles(dut):
    """Routed flow sets (random sets, full unicast permutations, and reduce-multicast flows of
    every size: inputs 0..k-1 to outputs 1..k) with the middle subnetworks of every level put in
    a random order (:func:`permute_middles`): the same flows must arrive exactly as the
    functional model of the permuted configuration predicts. This reaches the wire indices the
    router leaves unused (docs/verification.md, functional coverage), under idle cycles and backpressure."""
    p = bench_params()
    bench = SwitchBench(dut, "permuted")
    await bench.start()
    P, rng = bench.ports, bench.rng
    flow_sets = [[Flow(inputs=tuple(range(k)), outputs=tuple(range(1, k + 1)))]
                 for k in range(2, P)]
    for n in range(p.get("rounds", 20)):
        if n % 2:
            perm = list(range(P))
            rng.shuffle(perm)
            flow_sets.append([Flow(inputs=(s,), outputs=(d,)) for s, d in enumerate(perm)])
        else:
            flow_sets.append(random_flows(rng, P))
    phases = 0
    for flows in flow_sets:
        result = route(ports=P, middle=bench.middle, flows=flows, seed=rng.getrandbits(16))
        for phase in result.phases:
            config = share_deepest_middle(permute_middles(phase.config, rng), rng)
            await bench.run_phase(config, list(phase.flows),
                                  max_length=p.get("max_length", 8))
            phases += 1
    await bench.drain()
    bench.finish("permuted")
    metrics.record(permuted_phases=phases)
