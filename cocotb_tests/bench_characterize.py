"""cocotb bench that measures ``fred_switch`` timings for the characterization (docs/characterization.md).

One cocotb test, :func:`characterize`, runs every traffic class of :func:`traffic_classes` twice
on one build: without backpressure, then with random backpressure on every output (probability
``backpressure``, default 0.3). Inputs never idle (full load). It reuses
:class:`cocotb_tests.bench_switch.SwitchBench`, so every flit is still checked bit for bit
against the functional model by the tagged scoreboard (loss, duplication, corruption,
misrouting and deadlock all fail the run).

For each phase of each class it records *segments*: the index of the first transfer of the
phase on every input/output stream, the cycle the select was raised, and the configuration
load's first word and the cycle its ``loaded`` bit rose. The full transfer-cycle list of every
stream is recorded too (``metrics``), so the host side (:mod:`studies.characterization.timing`) can
recompute every transfer from the VCD, check that both agree exactly, and compute the figures
from the VCD timestamps.

Sequence per phase (the host rule of ``docs/switch.md``): load the configuration into the next
slot while the previous phase's flits still flow, wait until the last old flit has been
accepted at the inputs, raise the select at once (so the measured phase switch is drain +
select copy), then send this phase's packets of ``length`` flits on every flow input.

Bench parameters (``bench_params()``): the design's ``ports middle dtype lanes phases
tag_width``, ``length`` (flits per packet, default 128), ``backpressure`` (default 0.3).
"""

from __future__ import annotations

import cocotb

from cocotb_tests.bench_switch import SwitchBench
from cocotb_tests.lib import bench_params, metrics
from hdl.compiler.flows import Flow
from hdl.compiler.router import route
from hdl.contracts.config_port import ConfigError

#: Traffic classes in the order they run (docs/characterization.md describes them).
CLASS_NAMES = ("unicast", "multicast", "reduce", "all_reduce", "mix3d")


def traffic_classes(ports: int) -> dict[str, list[Flow]]:
    """The five traffic classes on a P-port switch (deterministic, no randomness):

    * ``unicast``: the permutation port s -> (s + P/2 + 1) mod P (every port busy);
    * ``multicast``: port 0 to every port;
    * ``reduce``: every port reduced to port 0;
    * ``all_reduce``: every port reduced and the sum broadcast to every port;
    * ``mix3d``: concurrent groups of a 3D-parallel layout: MP all-reduces on consecutive port
      pairs of the first half (an odd half leaves its last port idle: a pair must not reach
      into the second half, whose ports the other flows use), a DP all-reduce over the even
      ports of the second half and PP unicasts between its odd ports (a ring shift); for P = 4
      the second half is one PP pair.
    """
    P = ports
    half = P // 2
    flows_mix = [Flow(inputs=(a, a + 1), outputs=(a, a + 1)) for a in range(0, half - 1, 2)]
    second = list(range(half, P))
    if len(second) >= 4:
        dp = tuple(second[0::2])
        pp = second[1::2]
        flows_mix.append(Flow(inputs=dp, outputs=dp))
    else:
        pp = second
    flows_mix += [Flow(inputs=(s,), outputs=(pp[(i + 1) % len(pp)],)) for i, s in enumerate(pp)]
    return {
        "unicast": [Flow(inputs=(s,), outputs=((s + half + 1) % P,)) for s in range(P)],
        "multicast": [Flow(inputs=(0,), outputs=tuple(range(P)))],
        "reduce": [Flow(inputs=tuple(range(P)), outputs=(0,))],
        "all_reduce": [Flow(inputs=tuple(range(P)), outputs=tuple(range(P)))],
        "mix3d": flows_mix,
    }


class _Probe:
    """A harness agent that watches the select offer and the ``loaded`` bits every cycle.

    ``select_raised``: edge after which ``phase.valid`` was first high for the current select.
    ``loaded_rose[slot]``: edge at which ``loaded[slot]`` was first seen high after ``arm``.
    """

    def __init__(self, bench: SwitchBench):
        self.bench = bench
        self.dut = bench.dut
        self.select_raised = None
        self._offered = False
        self.watch_slot = None
        self.loaded_rose = None
        self._seen_low = False

    def pending(self):
        return 0

    def _reset(self):
        pass

    def arm_load(self, slot):
        self.watch_slot, self.loaded_rose, self._seen_low = slot, None, False

    def _edge(self, cycle):
        offered = self.bench.phase._current is not None
        if offered and not self._offered:
            self.select_raised = cycle
        self._offered = offered

    def _sample(self, cycle):
        # a reloaded slot reads 1 until its first new word clears it: wait for the 0 first
        if self.watch_slot is not None and self.loaded_rose is None:
            if (int(self.dut.loaded.value) >> self.watch_slot) & 1:
                if self._seen_low:
                    self.loaded_rose = cycle
            else:
                self._seen_low = True


@cocotb.test()
async def characterize(dut):
    p = bench_params()
    length = p.get("length", 128)
    bp_probability = p.get("backpressure", 0.3)
    bench = SwitchBench(dut, "characterize", idle=0.0, backpressure=0.0)
    probe = _Probe(bench)
    bench.harness.agents.append(probe)
    await bench.start()
    P, m = bench.ports, bench.middle
    classes = traffic_classes(P)
    segments = []
    first = True
    for backpressure in (0.0, bp_probability):
        for name in CLASS_NAMES:
            flows = classes[name]
            result = route(ports=P, middle=m, flows=flows, seed=1)
            for index, phase in enumerate(result.phases):
                config = phase.config
                slot = bench.slot
                bench.slot = (bench.slot + 1) % bench.phases
                # load while the previous phase's flits may still flow
                config_first = len(bench.config.transfer_cycles)
                probe.arm_load(slot)
                await bench.load(config, slot)
                await bench.harness.wait_until(lambda: probe.loaded_rose is not None,
                                               what=f"slot {slot} loaded")
                assert int(dut.error.value) == ConfigError.NONE, f"load error {int(dut.error.value)}"
                # raise the select as soon as the last old flit entered (drain + select)
                await bench.harness.wait_until(lambda: all(d.pending == 0 for d in bench.drivers),
                                               what="old flits accepted")
                select_index = len(bench.phase.transfer_cycles)
                drain_backpressure = bench.backpressure   # the old phase's, while it drains
                await bench.select(slot)
                bench.backpressure = backpressure
                assert int(dut.error.value) == ConfigError.NONE, f"select error {int(dut.error.value)}"
                assert int(dut.active_phase.value) == slot and int(dut.active_valid.value) == 1
                bench.round += 1
                marks_in = [len(d.transfer_cycles) for d in bench.drivers]
                marks_out = [len(s.transfer_cycles) for s in bench.sinks]
                flow_list = list(phase.flows)
                bench.send_traffic(config, flow_list, lengths=[length] * len(flow_list))
                segments.append({
                    "traffic": name, "backpressure": backpressure, "phase": index,
                    "phases": len(result.phases), "length": length,
                    "flows": [[list(f.inputs), list(f.outputs)] for f in flow_list],
                    "inputs": sorted({q for f in flow_list for q in f.inputs}),
                    "outputs": sorted({q for f in flow_list for q in f.outputs}),
                    "marks_in": marks_in, "marks_out": marks_out,
                    "config_index": config_first, "config_words": len(config.encode()),
                    "loaded_rose": probe.loaded_rose,
                    "select_index": select_index, "select_raised": probe.select_raised,
                    "previous_phase": not first, "drain_backpressure": drain_backpressure,
                })
                first = False
    await bench.drain()
    await bench.harness.cycles(2)
    bench.finish("characterize")
    period = bench.harness.period_ns
    metrics.record(
        segments=segments, period_ns=period, cycle_one_ns=bench.harness.cycle_one_ns,
        latency_property=p.get("latency"),
        transfers={**{f"i__{n}": d.transfer_cycles for n, d in enumerate(bench.drivers)},
                   **{f"o__{n}": s.transfer_cycles for n, s in enumerate(bench.sinks)},
                   "config": bench.config.transfer_cycles, "phase": bench.phase.transfer_cycles})
