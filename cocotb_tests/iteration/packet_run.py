"""``run_packet_iteration``: the NPUs' iteration traces run on the packet FRED fabric RTL
(``PacketFabricTop`` with a :class:`hdl.designs.iteration.PacketTraceNpu` at every NPU port)
under Verilator (docs/fabric_iteration.md, "The packet fabric").

As ``cocotb_tests.iteration.run.run_iteration`` on the circuit fabric: the Verilog (memoised per
hardware, routing and memory sizes), one build per distinct Verilog (one Verilated model, only
the top's ports public, -O1 without profile-guided optimisation: ``PLAIN_CFLAGS``), the bench
``cocotb_tests.iteration.bench_iteration`` loading the switches' stored phases and flow-port
tables (:mod:`cocotb_tests.iteration.packet_loading`: once for the whole iteration), every
NPU's loader entries and trace, starting once, polling ``all_done`` and reading the counters.
Judged: every trace finished, no engine saw a bad or extra flit in any run (``run_errors``),
no packet out of sequence (``seq_errors``, over the whole trace), no credit or overflow error
at an NPU or a switch, and the last collective's counters as a fabric run's.
"""

from __future__ import annotations

import time
from pathlib import Path

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricSpec
from hdl.contracts.trace_program import NpuTrace, loader_writes, trace_writes

from .run import (FRED_ENTRIES, FRED_NODES, IterationRun, iteration_run, bench_metrics, check_finished,
                  node_depth, run_error_lines)

__all__ = ["run_packet_iteration", "packet_iteration_verilog"]

_VERILOG: dict = {}


def packet_iteration_verilog(spec: FabricSpec, depth: int, programs: int, online: bool) -> str:
    """Verilog of the packet fabric of ``spec`` with trace NPUs of ``depth`` nodes and ``programs``
    loader entries, ``online`` routing or stored phases (memoised)."""
    from cocotb_tests.fabric.packet_fabric_sim import PACKET_TOP
    from cocotb_tests.fabric.run import hardware_key
    key = (depth, programs, online) + hardware_key(spec)
    if key not in _VERILOG:
        from hdl.designs.iteration import iteration_packet_top
        from hdl.emit.verilog import to_verilog
        _VERILOG[key] = to_verilog(iteration_packet_top(spec, depth=depth, programs=programs, online=online),
                                   name=PACKET_TOP)
    return _VERILOG[key]


def packet_iteration_load(spec: FabricSpec, programs: list, requests: list, traces: dict, depth: int,
                          packet) -> dict:
    """The load sequence: the switches' configurations and flow-port tables, then per NPU its
    loader entries (:func:`~cocotb_tests.iteration.packet_loading.packet_loader_entries`) and
    its trace; ``room``: the loaders' entries (at least ``FRED_ENTRIES``, so that the table's
    cases share a build)."""
    from .packet_loading import packet_loader_entries, packet_switch_writes
    config, writes = packet_switch_writes(spec, programs)
    ranks = packet_loader_entries(spec, programs, requests, packet)
    room = max(FRED_ENTRIES, 1 << (max(len(e) for e in ranks.values()) - 1).bit_length())
    for rank in range(spec.npus):
        writes += [[rank, reg, value] for reg, value in loader_writes(ranks[rank], 1, room)]
        if rank in traces:
            writes += [[rank, reg, value] for reg, value in trace_writes(traces[rank], depth)]
    return {"config": config, "writes": writes, "room": room}


def run_packet_iteration(spec: FabricSpec, traces: dict[int, NpuTrace], programs: list, requests: list, *,
                         watchdog_cycles: int, cflags: str | None = None, build_dir=None) -> IterationRun:
    """Run every rank's trace on the packet fabric of ``spec``: ``programs`` (the
    :class:`~hdl.compiler.fabric_program.FabricProgram` of each of the traces' collectives, in
    order, all in-switch or all endpoint algorithms) of ``requests``; ``watchdog_cycles``: the
    run's budget (a stalled run raises, naming what did not finish); ``cflags`` default
    ``PLAIN_CFLAGS`` (-O1). Repeated collectives (the node's repeat) rerun the engine with the
    same program and headers."""
    from cocotb_tests.fabric.packet_fabric_sim import PACKET_TOP, PLAIN_CFLAGS
    from cocotb_tests.fabric.run import PORTS, judge_engines, poll_cycles
    from cocotb_tests.runner import run_bench
    from eda.fabric.build import build_top_public_only
    from hdl.designs.fabric.packet_fabric_top import PACKET_SWITCH_READ
    from hdl.designs.iteration import PacketTraceNpu
    from .packet_loading import packet_iteration_format, packet_online
    if not programs:
        raise FredError("the traces hold no collective; the packet fabric's iteration runs them")
    if len(programs) != len(requests):
        raise FredError(f"{len(programs)} programs for {len(requests)} requests")
    online = packet_online(programs)
    packet = packet_iteration_format(spec, online)
    depth = max(FRED_NODES, node_depth(traces))      # one build for the table's cases
    load = packet_iteration_load(spec, programs, requests, traces, depth, packet)
    room = load["room"]
    start = time.perf_counter()
    verilog = packet_iteration_verilog(spec, depth, room, online)
    built = build_top_public_only(verilog, PACKET_TOP, PORTS, cflags=cflags or PLAIN_CFLAGS,
                                  sim_build=Path(build_dir) if build_dir is not None else None)
    build_s = time.perf_counter() - start
    params = {"npus": spec.npus, "switch_count": len(spec.switch_ports), "config": load["config"],
              "writes": load["writes"], "watchdog_cycles": watchdog_cycles, "poll": poll_cycles(watchdog_cycles),
              "nodes": [len(traces[r].words) if r in traces else 0 for r in range(spec.npus)],
              "engine_read": list(PacketTraceNpu.read_names), "switch_read": list(PACKET_SWITCH_READ)}
    name = f"packet-iteration-{spec.name}-n{spec.npus}-d{depth}-p{room}"
    result = run_bench(test_module="cocotb_tests.iteration.bench_iteration", verilog=(verilog, PACKET_TOP),
                       bench_params=params, run_name=name, prebuilt=built, testcase="run_iteration")
    metrics = bench_metrics(result, "packet iteration")
    after = metrics["after"]
    engines = after["engines"]
    stuck = [f"NPU {r} (node {e['nodes_done']}/{len(traces[r].words)})"
             for r, e in enumerate(engines) if r in traces and not e["done"]]
    errors, _, _ = judge_engines(spec, programs[-1], engines)
    errors += run_error_lines(engines)
    errors += [f"NPU {r}: {e['seq_errors']} packet(s) out of sequence" for r, e in enumerate(engines) if e["seq_errors"]]
    errors += [f"NPU {r}: a credit error or a receive overflow" for r, e in enumerate(engines) if e["link_errors"]]
    errors += [f"{programs[-1].switch_name(s)}: flags {sw['flags']:#x} (bad_header, overflow, credit_error, "
               f"uplink overflow)" for s, sw in enumerate(after["switches"]) if sw["flags"]]
    check_finished(f"packet fabric {spec.name}", metrics, stuck, errors)
    run = iteration_run(f"{spec.name}-packet", traces, metrics, errors, build_s, depth, built)
    run.load_stall = {r: e["load_stall"] for r, e in enumerate(engines) if r in traces}
    return run
