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
at an NPU or a switch, and each NPU's engine counters against the collective they belong to
(:func:`judge_packet_npus`: the last one for a finished trace, the one it stalled in for a
stalled one, named with its counts; every error listed).
"""

from __future__ import annotations

import time
from pathlib import Path

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricSpec
from hdl.contracts.trace_program import COLLECTIVE_BIT, NpuTrace, loader_writes, trace_writes

from cocotb_tests.fabric.run import DEFAULT_SIMULATOR

from .run import (FRED_ENTRIES, FRED_NODES, IterationRun, build_iteration, iteration_run, check_finished,
                  collective_repeats, lockstep_params_of, node_depth, run_error_lines, simulate_iteration,
                  traces_overlap)

__all__ = ["run_packet_iteration", "packet_iteration_verilog", "packet_iteration_part_verilogs", "judge_packet_npus",
           "held_collective"]

_VERILOG: dict = {}


def packet_iteration_verilog(spec: FabricSpec, depth: int, programs: int, online: bool, staged: bool = False,
                             order_entries: int | None = None, overlap: bool = False) -> str:
    """Verilog of the packet fabric of ``spec`` with trace NPUs of ``depth`` nodes and ``programs``
    loader entries, ``online`` routing or stored phases, ``staged`` NPUs (multi-stage programs,
    :func:`~cocotb_tests.iteration.packet_loading.packet_staged`) or not, and the switches'
    ``order_entries`` (:func:`~cocotb_tests.iteration.packet_loading.packet_order_entries`),
    ``overlap``: sequencers that run compute under collectives (memoised)."""
    from cocotb_tests.fabric.packet_fabric_sim import PACKET_TOP
    from cocotb_tests.fabric.run import hardware_key
    key = (depth, programs, online, staged, order_entries, overlap) + hardware_key(spec)
    if key not in _VERILOG:
        from hdl.designs.iteration import iteration_packet_top
        from hdl.emit.verilog import to_verilog
        _VERILOG[key] = to_verilog(iteration_packet_top(spec, depth=depth, programs=programs, online=online,
                                                        staged=staged, order_entries=order_entries, overlap=overlap),
                                   name=PACKET_TOP)
    return _VERILOG[key]


def packet_iteration_part_verilogs(spec: FabricSpec, depth: int, programs: int, online: bool, staged: bool = False,
                                   order_entries: int | None = None, overlap: bool = False) -> tuple[str, str]:
    """Verilog of the two parts of :func:`packet_iteration_verilog`'s fabric for the lock-step
    simulator (cut at its uplinks, ``hdl.contracts.fabric_partition``; memoised)."""
    from cocotb_tests.fabric.run import hardware_key
    key = ("parts", depth, programs, online, staged, order_entries, overlap) + hardware_key(spec)
    if key not in _VERILOG:
        from eda.fabric.lockstep import PART_TOPS
        from eda.toolchain import build_step
        from hdl.contracts.fabric_partition import fabric_partition
        from hdl.designs.iteration import iteration_packet_top
        from hdl.emit.verilog import to_verilog
        partition = fabric_partition(spec, 2)
        with build_step(f"packet iteration {spec.name}: generating the Verilog of the lock-step simulator's two parts"):
            _VERILOG[key] = tuple(
                to_verilog(iteration_packet_top(spec, depth=depth, programs=programs, online=online, staged=staged,
                                                order_entries=order_entries, overlap=overlap, partition=partition,
                                                part=p), name=PART_TOPS[p])
                for p in range(2))
    return _VERILOG[key]


def held_collective(trace: NpuTrace, nodes_done: int, started: bool) -> int:
    """The index (in file order, from 0) of the collective node whose counters an NPU's engine
    holds with ``nodes_done`` nodes of ``trace`` finished: the node it is in if that is a
    collective whose run has ``started``, else the last collective before it (the last one
    once the trace is done); -1 before its first collective."""
    return sum(1 for w in trace.words[:nodes_done + (1 if started else 0)] if w & COLLECTIVE_BIT) - 1


def judge_packet_npus(spec: FabricSpec, traces: dict, programs: list, engines: list) -> tuple[list[str], list[str]]:
    """(the NPUs whose trace did not finish, errors) of a packet iteration's read registers
    ``engines`` (per rank). Each NPU is judged against the collective its engine's counters
    belong to (:func:`held_collective`; ``programs`` per collective node): a stalled NPU is
    named with its node, that collective (its trace node) and its sent and received counts
    against that collective's, and its bad flits, if any, counted in that collective."""
    from cocotb_tests.fabric.run import judge_engine
    stuck, errors = [], []
    for rank, e in enumerate(engines):
        if rank not in traces:
            continue
        trace = traces[rank]
        node, k = e["nodes_done"], held_collective(trace, e["nodes_done"], e["run_started"])
        finished = node >= len(trace.words)
        if not finished and not e["run_started"]:     # the node was not started: nothing to count
            stuck.append(f"NPU {rank} at node {node}/{len(trace.words)} (trace node {trace.node_ids[node]} "
                         f"{trace.names[node]}), its run not started (its program or the barrier)")
        if k < 0:
            continue
        program = programs[k]
        if not finished and e["run_started"]:
            regs = program.engines[rank]
            stuck.append(f"NPU {rank} at node {node}/{len(trace.words)} (collective {k + 1} of "
                         f"{len(programs)}, trace node {trace.node_ids[node]} {trace.names[node]}): sent "
                         f"{e['sent']}/{regs['send_count']}, received {e['received']}/{regs['recv_count']} "
                         f"from {program.contributors[rank] or 'no sender'}")
        lines, _ = judge_engine(spec, program, rank, e)
        errors += [f"{line} (collective {k + 1})" for line in lines]
    return stuck, errors


def packet_iteration_load(spec: FabricSpec, programs: list, requests: list, traces: dict, depth: int,
                          packet) -> dict:
    """The load sequence: the switches' configurations, flow-port tables and phase orders
    (:func:`~cocotb_tests.iteration.packet_loading.packet_iteration_orders`), then per NPU its
    loader entries (:func:`~cocotb_tests.iteration.packet_loading.packet_loader_entries`) and
    its trace; ``room``: the loaders' entries (at least ``FRED_ENTRIES``, so that the table's
    cases share a build); ``order_entries``: the switches' order depth the orders need (None:
    one per slot, :func:`~cocotb_tests.iteration.packet_loading.packet_order_entries`)."""
    from .packet_loading import (packet_iteration_orders, packet_loader_entries, packet_order_entries,
                                 packet_switch_writes)
    vcs, orders = packet_iteration_orders(spec, programs, requests, packet,
                                          collective_repeats(traces, len(programs)))
    config, writes = packet_switch_writes(spec, programs, orders)
    ranks = packet_loader_entries(spec, programs, requests, packet, vcs)
    room = max(FRED_ENTRIES, 1 << (max(len(e) for e in ranks.values()) - 1).bit_length())
    for rank in range(spec.npus):
        writes += [[rank, reg, value] for reg, value in loader_writes(ranks[rank], 1, room)]
        if rank in traces:
            writes += [[rank, reg, value] for reg, value in trace_writes(traces[rank], depth)]
    return {"config": config, "writes": writes, "room": room, "order_entries": packet_order_entries(orders)}


def run_packet_iteration(spec: FabricSpec, traces: dict[int, NpuTrace], programs: list, requests: list, *,
                         watchdog_cycles: int, cflags: str | None = None, build_dir=None,
                         simulator: str = DEFAULT_SIMULATOR, pgo: bool = False) -> IterationRun:
    """Run every rank's trace on the packet fabric of ``spec``: ``programs`` (the
    :class:`~hdl.compiler.fabric_program.FabricProgram` of each of the traces' collectives, in
    order, all in-switch or all endpoint algorithms) of ``requests``; ``watchdog_cycles``: the
    run's budget (a stalled run raises, naming what did not finish); ``cflags`` default
    ``PLAIN_CFLAGS`` (-O1). Repeated collectives (the node's repeat) rerun the engine with the
    same program and headers. ``simulator``: as ``run.run_iteration``'s (``lockstep``, the
    default: the fabric cut at its uplinks, the barriers split across the cut; ``cocotb``: one
    model); ``pgo``: a profile-guided lock-step build (``run.build_iteration``'s ``training``,
    this run's parameters), the same cycles faster."""
    from cocotb_tests.fabric.packet_fabric_sim import PACKET_TOP, PLAIN_CFLAGS
    from cocotb_tests.fabric.run import PORTS, check_simulator, poll_cycles
    from hdl.designs.fabric.packet_fabric_top import PACKET_SWITCH_READ
    from hdl.designs.iteration import PacketTraceNpu
    from .packet_loading import packet_iteration_format, packet_online, packet_staged
    check_simulator(simulator)
    if not programs:
        raise FredError("the traces hold no collective; the packet fabric's iteration runs them")
    if len(programs) != len(requests):
        raise FredError(f"{len(programs)} programs for {len(requests)} requests")
    online = packet_online(programs)
    packet = packet_iteration_format(spec, online)
    depth = max(FRED_NODES, node_depth(traces))      # one build for the table's cases
    load = packet_iteration_load(spec, programs, requests, traces, depth, packet)
    room = load["room"]
    overlap = traces_overlap(traces)
    hardware = (spec, depth, room, online, packet_staged(programs), load["order_entries"], overlap)
    params = {"npus": spec.npus, "switch_count": len(spec.switch_ports), "config": load["config"],
              "writes": load["writes"], "watchdog_cycles": watchdog_cycles, "poll": poll_cycles(watchdog_cycles),
              "nodes": [len(traces[r].words) if r in traces else 0 for r in range(spec.npus)],
              "engine_read": list(PacketTraceNpu.read_names), "switch_read": list(PACKET_SWITCH_READ)}
    start = time.perf_counter()
    built = build_iteration(simulator, parts=lambda: packet_iteration_part_verilogs(*hardware),
                            whole=lambda: packet_iteration_verilog(*hardware), top=PACKET_TOP, ports=PORTS,
                            cflags=cflags or PLAIN_CFLAGS, sim_build=Path(build_dir) if build_dir is not None else None,
                            training=lockstep_params_of(params) if pgo else None)
    build_s = time.perf_counter() - start
    name = f"packet-iteration-{spec.name}-n{spec.npus}-d{depth}-p{room}" + ("-overlap" if overlap else "")
    metrics = simulate_iteration(simulator, built, params, name=name, top=PACKET_TOP, testcase="run_iteration",
                                 what="packet iteration")
    after = metrics["after"]
    engines = after["engines"]
    stuck, errors = judge_packet_npus(spec, traces, programs, engines)
    errors += run_error_lines(engines)
    errors += [f"NPU {r}: {e['seq_errors']} packet(s) out of sequence" for r, e in enumerate(engines) if e["seq_errors"]]
    errors += [f"NPU {r}: a credit error or a receive overflow" for r, e in enumerate(engines) if e["link_errors"]]
    errors += [f"{programs[-1].switch_name(s)}: flags {sw['flags']:#x} (bad_header, overflow, credit_error, "
               f"uplink overflow)" for s, sw in enumerate(after["switches"]) if sw["flags"]]
    check_finished(f"packet fabric {spec.name}", metrics, stuck, errors, shown=None)
    run = iteration_run(f"{spec.name}-packet", traces, metrics, errors, build_s, depth, built)
    run.simulator = simulator
    run.load_stall = {r: e["load_stall"] for r, e in enumerate(engines) if r in traces}
    return run
