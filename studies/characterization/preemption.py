"""Preemption figures of the packet switch (``hdl/designs/switch/packet_switch.py``), measured in
Amaranth's simulator (the same RTL, cycle for cycle, as the Verilog; no Verilator build).

:func:`measure_preemption` runs three scenarios on Fred_m(P) with the paper's packet and buffer
sizes in flits (8-flit data packets, 48 flits per data VC):

* **DP alone**: a DP all-reduce of every port (``dp_packets`` packets per input);
* **DP + MP**: the same, plus an MP permutation (port k -> k + 1) of ``mp_packets`` packets per
  input injected at cycle ``mp_at``, once the DP phase runs;
* **MP at an idle switch**: the MP packets arrive after the DP phase completed (the active phase
  is DP's, so the switch reconfigures with nothing in flight).

Figures (cycles; "head" = the cycle a packet's first flit is at the input buffer's head, one
cycle after its link transfer):

* ``preemption_latency_cycles``: first MP head to the first MP flit out, with DP running;
* ``reconfiguration_cycles_busy`` = that minus the packet switch's latency: the drain of the DP
  packets in flight, the select and the settle cycle;
* ``reconfiguration_cycles_idle``: the same at an idle switch (select + settle only);
* ``preempted_delay_cycles``: DP's last flit out with MP minus without;
  ``mp_output_cycles``: the cycles MP's flits occupy one output (its packets x flits), the part of
  that delay any fair sharing would also pay; ``resume_cycles``: from MP's last flit out to DP's
  next flit out;
* ``throughput_per_vc``: flits per cycle per output of each VC over its active span in the
  DP + MP run (first to last flit of that VC at each output, averaged over outputs).
"""

from __future__ import annotations

import random

import numpy as np

from hdl.compiler.flows import Flow
from hdl.compiler.functional import simulate
from hdl.compiler.router import route
from hdl.contracts.errors import FredError
from hdl.contracts.packet import VC, PacketFormat, depacketize, packetize, paper_flits
from hdl.designs.switch.packet_switch import PacketSwitch

from cocotb_tests.packet_sim import Injection, by_phase, run_packet_switch

__all__ = ["measure_preemption"]


def _header(fmt, tag):
    return fmt.unpack_header(tag)


def measure_preemption(*, ports: int = 8, middle: int = 3, dtype: str = "fp16",
                       dp_packets: int = 16, mp_packets: int = 4, mp_at: int = 60,
                       seed: int = 17) -> dict:
    """The figures above, plus the design point and the sizes used; every run's outputs are
    checked bit-exact against the functional model and for lost / duplicated / reordered
    packets (raises :class:`FredError` if not)."""
    sizes = paper_flits()
    fmt = PacketFormat(phase_bits=2, seq_bits=8, flow_bits=4, packet_flits=sizes["data_packet"])
    depth = sizes["data_vc_buffer"]
    everyone = tuple(range(ports))
    dp_cfg = route(ports=ports, middle=middle, flows=[Flow(inputs=everyone, outputs=everyone)]).phases
    mp_cfg = route(ports=ports, middle=middle,
                   flows=[Flow(inputs=(k,), outputs=((k + 1) % ports,)) for k in range(ports)]).phases
    if len(dp_cfg) != 1 or len(mp_cfg) != 1:
        raise FredError(f"Fred_{middle}({ports}): the scenarios need one phase each")
    configs = [dp_cfg[0].config, mp_cfg[0].config]
    rng = random.Random(seed)
    element = np.random.default_rng(seed)
    from hdl.contracts.dtypes import get_dtype
    dt = get_dtype(dtype)
    n_dp, n_mp = dp_packets * fmt.packet_flits, mp_packets * fmt.packet_flits
    dp = [[int(x) for x in dt.random_bits(element, (n_dp,))] for _ in range(ports)]
    mp = [[int(x) for x in dt.random_bits(element, (n_mp,))] for _ in range(ports)]

    def injections(mp_time):
        inj = [Injection(k, 0, pk) for k in range(ports)
               for pk in packetize(fmt, dp[k], phase=0, vc=VC.DP, flow=0)]
        if mp_time is not None:
            inj += [Injection(k, mp_time, pk) for k in range(ports)
                    for pk in packetize(fmt, mp[k], phase=1, vc=VC.MP, flow=1 + k % 15)]
        return inj

    def check(run, with_mp):
        expected = {0: simulate(ports, middle, configs[0], dtype, [np.array(x)[:, None] for x in dp])}
        if with_mp:
            expected[1] = simulate(ports, middle, configs[1], dtype, [np.array(x)[:, None] for x in mp])
        for p in range(ports):
            records = run.received[p]
            depacketize(fmt, [(d, last, tag) for _, d, last, tag in records])
            got = by_phase(fmt, records)
            for phase, out in expected.items():
                want = [int(v) for v in out[p][:, 0]]
                if got.get(phase, []) != want:
                    raise FredError(f"packet switch: output {p} phase {phase} differs from the model")
        if run.flags["overflow"] or run.flags["credit_error"] or run.credit_errors:
            raise FredError(f"packet switch: credit protocol broken: {run.flags}, {run.credit_errors[:3]}")

    def switch():
        return PacketSwitch(ports=ports, middle=middle, dtype=dtype, lanes=1, phases=2, packet=fmt,
                            depth=depth)

    def phase_cycles(run, phase, port=None):
        ports_ = range(ports) if port is None else [port]
        return [c for p in ports_ for c, _, _, tag in run.received[p] if _header(fmt, tag)["phase"] == phase]

    alone_dut = switch()
    alone = run_packet_switch(alone_dut, configs=configs, injections=injections(None), rng=rng)
    check(alone, False)
    dut = switch()
    mixed = run_packet_switch(dut, configs=configs, injections=injections(mp_at), rng=rng)
    check(mixed, True)
    dp_end_alone = max(phase_cycles(alone, 0))
    idle_at = dp_end_alone + 50
    if mp_at >= dp_end_alone:
        raise FredError(f"mp_at={mp_at} is after the DP phase ends ({dp_end_alone}): nothing to preempt")
    idle_dut = switch()
    idle = run_packet_switch(idle_dut, configs=configs, injections=injections(idle_at), rng=rng)
    check(idle, True)

    def first_head(run, phase):
        return min(c for p in range(ports) for c, _, _, tag in run.sent[p]
                   if _header(fmt, tag)["phase"] == phase) + 1

    latency = dut.latency
    preempt = min(phase_cycles(mixed, 1)) - first_head(mixed, 1)
    idle_cost = min(phase_cycles(idle, 1)) - first_head(idle, 1) - latency
    mp_last = max(phase_cycles(mixed, 1))
    resume = min(c for c in phase_cycles(mixed, 0) if c > mp_last) - mp_last
    throughput = {}
    for vc, phase in ((VC.MP, 1), (VC.DP, 0)):
        rates = []
        for p in range(ports):
            cycles = phase_cycles(mixed, phase, p)
            if len(cycles) > 1:
                rates.append((len(cycles) - 1) / (max(cycles) - min(cycles)))
        throughput[vc.name] = round(sum(rates) / len(rates), 4)
    return {
        "point": {"ports": ports, "middle": middle, "dtype": dtype, "lanes": 1,
                  "packet_flits": fmt.packet_flits, "depth_flits": depth,
                  "dp_packets": dp_packets, "mp_packets": mp_packets, "mp_at": mp_at, "seed": seed},
        "latency_cycles": float(latency),
        "select_cycles": float(dut.select_cycles),
        "preemption_latency_cycles": float(preempt),
        "reconfiguration_cycles_busy": float(preempt - latency),
        "reconfiguration_cycles_idle": float(idle_cost),
        "preempted_delay_cycles": float(max(phase_cycles(mixed, 0)) - dp_end_alone),
        "mp_output_cycles": float(n_mp),
        "resume_cycles": float(resume),
        "throughput_per_vc": throughput,
        "preemptions": mixed.counters["preemptions"],
        "selects": mixed.counters["selects"],
    }
