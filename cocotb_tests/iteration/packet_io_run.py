"""``run_packet_io_iteration``: the NPUs' iteration traces with I/O collectives run on the packet
FRED fabric RTL with its controllers run by the trace (``hdl.designs.iteration.PacketIoIterationTop``)
under Verilator (docs/fabric_iteration.md, "The packet FRED fabric's I/O iteration"): one build
per distinct Verilog (-O1: ``PLAIN_CFLAGS``), on the lock-step simulator (the default: the
fabric's two parts, ``eda/fabric/lockstep.cpp``, every word loaded through the program port) or
one model under the bench ``cocotb_tests.iteration.bench_iteration`` (only the top's ports
public; ``run_iteration``: load every NPU's and controller's loader entries and every NPU's
trace -- their words written straight into the memories through VPI, ``packet_io_bulk``, the
fill counters and other registers through the program port --, start once, poll ``all_done``,
read the counters and every node's times). Judged: every trace finished, every controller ran every collective, no NPU saw
a bad flit, a packet out of sequence or a link error in any run (``run_errors``), the last
run's flits complete at every NPU (what its program has it receive), no switch flag. ``flits_sent`` / ``flits_received`` of the
returned run: the controllers' and the NPUs' counts of the last collective (the units restart
their counters with each)."""

from __future__ import annotations

import time
from pathlib import Path

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricSpec

from .packet_io_loading import PACKET_IO_MEMORY_VARS, packet_io_bulk, packet_io_entries, packet_io_writes
from .packet_loading import packet_iteration_format
from cocotb_tests.fabric.run import DEFAULT_SIMULATOR

from .run import (IterationRun, build_iteration, check_finished, lockstep_params_of, node_depth, run_error_lines,
                  simulate_iteration, traces_overlap)

__all__ = ["run_packet_io_iteration", "packet_io_verilog", "packet_io_part_verilogs"]

_VERILOG: dict = {}


def _room(entries: dict) -> int:
    """Loader entries per unit: the most any unit needs, rounded up to a power of two (at least
    16), so that similar iterations share a build."""
    return max(16, 1 << (max(len(e) for e in entries.values()) - 1).bit_length())


def packet_io_verilog(spec: FabricSpec, nodes: int, programs: int, controller_programs: int,
                      overlap: bool = False) -> str:
    """Verilog of :class:`PacketIoIterationTop` (memoised), named as the packet fabric's top,
    without the all-zero contents of its memories (``to_verilog(..., zero_memory_init=False)``:
    the program loaders', trace sequencers' and controllers' memories, 40 % of the Fred-C
    wafer's Verilog; the builds' ``--x-initial fast`` zeroes them, as their reset state);
    ``overlap``: sequencers that run compute under the I/O collectives."""
    from cocotb_tests.fabric.packet_fabric_sim import PACKET_TOP
    from cocotb_tests.fabric.run import hardware_key
    key = (nodes, programs, controller_programs, overlap) + hardware_key(spec)
    if key not in _VERILOG:
        from hdl.designs.iteration import PacketIoIterationTop
        from hdl.emit.verilog import to_verilog
        _VERILOG[key] = to_verilog(PacketIoIterationTop(spec, nodes=nodes, programs=programs,
                                                        controller_programs=controller_programs, overlap=overlap),
                                     name=PACKET_TOP,
                                     zero_memory_init=False)
    return _VERILOG[key]


def packet_io_part_verilogs(spec: FabricSpec, nodes: int, programs: int, controller_programs: int,
                            overlap: bool = False) -> tuple[str, str]:
    """Verilog of the two parts of :func:`packet_io_verilog`'s top for the lock-step simulator
    (the fabric cut at its uplinks, ``hdl.contracts.fabric_partition``; the wafer's I/O
    collective split across the cut; memoised as :func:`packet_io_verilog`). The memories keep
    their all-zero contents out as there: the lock-step driver loads them through the program
    port."""
    from cocotb_tests.fabric.run import hardware_key
    key = ("parts", nodes, programs, controller_programs, overlap) + hardware_key(spec)
    if key not in _VERILOG:
        from eda.fabric.lockstep import PART_TOPS
        from eda.toolchain import build_step
        from hdl.contracts.fabric_partition import fabric_partition
        from hdl.designs.iteration import PacketIoIterationTop
        from hdl.emit.verilog import to_verilog
        partition = fabric_partition(spec, 2)
        with build_step(f"packet I/O iteration {spec.name}: generating the Verilog of the lock-step simulator's "
                        f"two parts"):
            _VERILOG[key] = tuple(
                to_verilog(PacketIoIterationTop(spec, nodes=nodes, programs=programs,
                                                controller_programs=controller_programs, overlap=overlap,
                                                partition=partition, part=p),
                           name=PART_TOPS[p], zero_memory_init=False)
                for p in range(2))
    return _VERILOG[key]


def run_packet_io_iteration(spec: FabricSpec, traces: dict, programs: list, *, watchdog_cycles: int,
                            cflags: str | None = None, build_dir=None,
                            simulator: str = DEFAULT_SIMULATOR, pgo: bool = False) -> IterationRun:
    """Run every rank's trace on the packet fabric of ``spec`` with its controllers:
    ``programs`` the striped I/O program of each of the traces' collectives in order
    (:func:`~cocotb_tests.iteration.packet_io_loading.packet_io_programs`). A stalled or wrong
    run raises :class:`FredError` naming what failed. ``simulator``: ``lockstep`` (the default:
    the fabric cut at its uplinks, each part's NPUs and controllers with it, the wafer's I/O
    collective split across the cut, run on two cores by ``eda/fabric/lockstep.cpp``, every
    word loaded through the program port) or ``cocotb`` (one model; the memories' words written
    straight into it through VPI); the same cycles, node times and counters. ``pgo``: a
    profile-guided lock-step build (``run.build_iteration``'s ``training``, this run's
    parameters), the same cycles faster."""
    from cocotb_tests.fabric.packet_fabric_sim import PACKET_TOP, PLAIN_CFLAGS
    from cocotb_tests.fabric.run import PORTS, check_simulator, poll_cycles
    from hdl.designs.fabric.packet_fabric_top import PACKET_SWITCH_READ
    from hdl.designs.iteration import StripeTraceNpu
    from hdl.designs.iteration.traced_io_controller import CONTROLLER_READ
    check_simulator(simulator)
    if not programs:
        raise FredError("the traces hold no I/O collective; the packet fabric's I/O iteration runs them")
    nodes = node_depth(traces)
    packet = packet_iteration_format(spec, True, spec.io_controllers)
    npu_entries, controller_entries = packet_io_entries(spec, programs, packet)
    room, controller_room = _room(npu_entries), _room(controller_entries)
    overlap = traces_overlap(traces)
    hardware = (spec, nodes, room, controller_room, overlap)
    writes = packet_io_writes(spec, traces, programs, packet, nodes=nodes, npu_programs=room,
                              controller_programs=controller_room)
    # the cocotb bench writes the memories' words straight into the model, the registers through
    # the program port; the lock-step driver writes every word through the port (a write a cycle,
    # both parts on their own threads: the Fred-A wafer's GPT-3, 598,484 writes, in 74 s)
    memories = []
    if simulator == "cocotb":
        memories, writes = packet_io_bulk(spec, writes)
    params = {"npus": spec.npus, "switch_count": len(spec.switch_ports), "config": [], "memories": memories,
              "writes": [list(w) for w in writes],
              "watchdog_cycles": watchdog_cycles, "poll": poll_cycles(watchdog_cycles),
              "nodes": [len(traces[r].words) for r in range(spec.npus)],
              "engine_read": list(StripeTraceNpu.read_names), "switch_read": list(PACKET_SWITCH_READ),
              "switch_units": [spec.endpoints + s for s in range(len(spec.switch_ports))],
              "controller_units": [spec.npus + k for k in range(spec.io_controllers)],
              "controller_read": list(CONTROLLER_READ)}
    name = (f"packet-io-iteration-{spec.name}-n{spec.npus}-c{spec.io_controllers}-d{nodes}-p{room}-q{controller_room}"
            + ("-overlap" if overlap else ""))
    start = time.perf_counter()
    # the one model's loaders' and sequencers' memories public: the cocotb bench writes them
    built = build_iteration(simulator, parts=lambda: packet_io_part_verilogs(*hardware),
                            whole=lambda: packet_io_verilog(*hardware), top=PACKET_TOP, ports=PORTS,
                            cflags=cflags or PLAIN_CFLAGS, sim_build=Path(build_dir) if build_dir is not None else None,
                            public_vars=PACKET_IO_MEMORY_VARS, training=lockstep_params_of(params) if pgo else None)
    build_s = time.perf_counter() - start
    metrics = simulate_iteration(simulator, built, params, name=name, top=PACKET_TOP, testcase="run_iteration",
                                 what="packet I/O iteration")
    after = metrics["after"]
    npus, controllers = after["engines"], after["controllers"]
    stuck, errors = _judged(spec, traces, programs, after)
    check_finished(f"packet fabric {spec.name} with {spec.io_controllers} I/O controllers", metrics, stuck, errors)
    cycles, sim_s = after["global"]["cycles"], metrics["sim_s"]
    return IterationRun(fabric=f"{spec.name}-packet", cycles=cycles,
                        node_times={r: metrics["node_times"][r] for r in sorted(traces)}, errors=errors,
                        flits_sent=sum(c["sent"] for c in controllers),
                        flits_received=sum(e["received"] for e in npus),
                        build_s=round(build_s, 3), sim_s=round(sim_s, 4),
                        cycles_per_s=round(cycles / sim_s, 1) if sim_s > 0 else 0.0, depth=nodes,
                        build_dir=str(built), load_stall={r: e["load_stall"] for r, e in enumerate(npus)},
                        simulator=simulator)


def _judged(spec: FabricSpec, traces: dict, programs: list, after: dict) -> tuple[list, list]:
    """(what did not finish, what went wrong) of a run's registers ``after``: every NPU's
    trace done, every controller's runs done and clean, the last collective's flits complete
    at every NPU (what its program has it receive), no switch flag."""
    npus, controllers = after["engines"], after["controllers"]
    stuck = [f"NPU {r} (node {e['nodes_done']}/{len(traces[r].words)})"
             for r, e in enumerate(npus) if e["nodes_done"] != len(traces[r].words)]
    stuck += [f"controller {k} ({c['runs']}/{len(programs)} runs)" for k, c in enumerate(controllers) if not c["done"]]
    errors = run_error_lines(npus)
    last = programs[-1]      # what each NPU receives in it (io-store: every stripe but the one it starts)
    expect = [sum(st.flits for st in last.steps[r].values() if st.source is not None) for r in range(spec.npus)]
    errors += [f"NPU {r}: {e['received']} flit(s) of the last collective's {x}"
               for r, (e, x) in enumerate(zip(npus, expect)) if e["received"] != x]
    errors += [f"controller {k}: {c['runs']} run(s) of {len(programs)}, {c['run_errors']} bad flit(s), "
               f"link errors {c['link_errors']}" for k, c in enumerate(controllers)
               if c["runs"] != len(programs) or c["run_errors"] or c["link_errors"]]
    errors += [f"switch {s}: flags {sw['flags']:#x} (bad_header, overflow, credit_error, uplink overflow)"
               for s, sw in enumerate(after["switches"]) if sw["flags"]]
    return stuck, errors
