"""``run_mesh_io_iteration``: an iteration whose collectives are weight streaming (io-load),
gradient reduce-out (io-store) and checkpoint spills (io-write / io-read) on the mesh with its
edge I/O controllers under Verilator
(``hdl.designs.iteration.mesh_io_iteration_top``; docs/fabric_iteration.md, "Weight
streaming"), on the lock-step simulator (the default: the mesh cut between two columns, each
part's NPUs and controllers with it, ``eda/fabric/lockstep.cpp``) or one model under cocotb.

Every NPU's program loader holds each I/O collective's registers (op, stripe, trees); the
driver (or the bench ``cocotb_tests.iteration.bench_iteration.run_mesh_io_iteration``) loads
them and the traces through the program port, starts once and reads back. Judged: every trace finished, no protocol error, the
NPUs' registers agreed at every start, no bad flit at any NPU's load checker over every
io-load, none at any controller's store checker over every io-store (each flit the sum of
every NPU's contribution), every controller received exactly its io-stores' flits, no bad
flit at any controller's spill checker over every io-write or any NPU's over every io-read
(which NPU, which controller, which flit), every controller received exactly its io-writes'
flits, and as many I/O collectives ran as the traces hold. Timed window and polling as
``cocotb_tests.iteration.run``'s.
"""

from __future__ import annotations

import time
from pathlib import Path

from cocotb_tests.fabric.run import DEFAULT_SIMULATOR
from cocotb_tests.iteration.run import (IterationRun, build_iteration, check_finished, collective_repeats,
                                        lockstep_params_of, node_depth, poll_cycles, simulate_iteration,
                                        traces_overlap)
from hdl.contracts.mesh_io import IO_MODES, MeshIoSpec
from hdl.contracts.trace_program import loader_entries, loader_writes, trace_writes

__all__ = ["run_mesh_io_iteration", "io_loader_entries", "IO_ITERATION_TOP", "mesh_io_part_verilogs"]

IO_ITERATION_TOP = "fred_mesh_io_iteration"
_VERILOG: dict = {}


def io_loader_entries(requests, programs) -> list:
    """Every NPU's loader entries (the same for all): per I/O collective in order, its op,
    stripe and trees (``IO_NODE_REGS``; a spill has no trees: 0) from its ``IoRequest`` and
    program."""
    from hdl.designs.iteration.mesh_io_iteration_top import IO_NODE_REGS, IO_OPS_OF_NODE
    return loader_entries([{0: [(IO_NODE_REGS["op"], IO_OPS_OF_NODE.index(r.op)),
                                (IO_NODE_REGS["stripe"], p.stripe_flits),
                                (IO_NODE_REGS["mode"], IO_MODES.index(p.mode) if p.mode in IO_MODES else 0)]}
                           for r, p in zip(requests, programs)], 1)


def _verilog(spec: MeshIoSpec, depth: int, programs: int, max_stripe: int, overlap: bool = False) -> str:
    key = (spec, depth, programs, max_stripe, overlap)
    if key not in _VERILOG:
        from hdl.designs.iteration.mesh_io_iteration_top import MeshIoIterationTop
        from hdl.emit.verilog import to_verilog
        _VERILOG[key] = to_verilog(MeshIoIterationTop(spec, depth=depth, programs=programs, max_stripe=max_stripe,
                                                      overlap=overlap), name=IO_ITERATION_TOP)
    return _VERILOG[key]


def mesh_io_part_verilogs(spec: MeshIoSpec, depth: int, programs: int, max_stripe: int,
                          overlap: bool = False) -> tuple[str, str]:
    """Verilog of the two parts of the I/O iteration top of ``spec`` for the lock-step
    simulator (the mesh cut between two columns, ``hdl.contracts.mesh_partition``; its I/O
    collective split across the cut), memoised."""
    key = ("parts", spec, depth, programs, max_stripe, overlap)
    if key not in _VERILOG:
        from eda.fabric.lockstep import PART_TOPS
        from eda.toolchain import build_step
        from hdl.contracts.mesh_partition import mesh_partition
        from hdl.designs.iteration.mesh_io_iteration_top import MeshIoIterationTop
        from hdl.emit.verilog import to_verilog
        partition = mesh_partition(spec.mesh)
        with build_step("mesh I/O iteration: generating the Verilog of the lock-step simulator's two parts"):
            _VERILOG[key] = tuple(
                to_verilog(MeshIoIterationTop(spec, depth=depth, programs=programs, max_stripe=max_stripe,
                                              overlap=overlap, partition=partition, part=p), name=PART_TOPS[p])
                for p in range(2))
    return _VERILOG[key]


def run_mesh_io_iteration(spec: MeshIoSpec, traces: dict, requests: list, programs: list, *,
                          watchdog_cycles: int, max_stripe: int, cflags: str | None = None,
                          build_dir=None, simulator: str = DEFAULT_SIMULATOR, pgo: bool = False) -> IterationRun:
    """Run every rank's trace on the mesh of ``spec`` with its controllers: ``requests`` (the
    traces' ``IoRequest`` s in order) and ``programs`` (each one's ``IoLoadProgram`` /
    ``IoStoreProgram`` / ``IoSpillProgram``); ``max_stripe``: the reducers' partial-sum memory per tree (a build
    parameter, >= every io-store's flits per tree). ``simulator``: ``lockstep`` (the default:
    the two parts of the cut mesh on two cores) or ``cocotb`` (one model); the same cycles,
    node times and counters. A stalled or wrong run raises :class:`FredError` naming what
    failed. ``pgo``: a profile-guided lock-step build (``run.build_iteration``'s ``training``,
    this run's parameters), the same cycles faster."""
    from cocotb_tests.fabric.mesh_run import CFLAGS, PORTS
    from cocotb_tests.fabric.run import check_simulator
    from hdl.designs.fabric.fabric_top import GLOBAL_UNIT
    from hdl.designs.iteration import LoadingTraceSequencer
    from hdl.designs.iteration.mesh_io_iteration_top import (IO_ITERATION_CONTROLLER_READ,
                                                             IO_ITERATION_GLOBAL_READ)
    from hdl.designs.mesh.mesh_io_harness import controller_unit
    check_simulator(simulator)
    depth = node_depth(traces)
    overlap = traces_overlap(traces)
    entries = io_loader_entries(requests, programs)
    room = max(16, 1 << (len(entries) - 1).bit_length())
    hardware = (spec, depth, room, max_stripe, overlap)
    writes = []
    for rank in range(spec.mesh.npus):
        writes += [[rank, reg, value] for reg, value in loader_writes(entries, 1, room)]
        writes += [[rank, reg, value] for reg, value in trace_writes(traces[rank], depth)]
    params = {"writes": writes, "watchdog_cycles": watchdog_cycles, "poll": poll_cycles(watchdog_cycles),
              "nodes": [len(traces[r].words) for r in range(spec.mesh.npus)],
              "global_unit": GLOBAL_UNIT, "global_read": list(IO_ITERATION_GLOBAL_READ),
              "controller_units": [controller_unit(spec, k) for k in range(spec.controllers)],
              "controller_read": list(IO_ITERATION_CONTROLLER_READ),
              "trace_units": list(range(spec.mesh.npus)), "trace_read": list(LoadingTraceSequencer.read_names)}
    name = f"mesh-io-iteration-d{depth}-p{room}-s{max_stripe}" + ("-overlap" if overlap else "")
    # the lock-step driver reads the sequencers (units 0..) as its "engines"
    lockstep = {"npus": spec.mesh.npus, "switch_count": 0, "engine_read": params["trace_read"]}
    start = time.perf_counter()
    built = build_iteration(simulator, parts=lambda: mesh_io_part_verilogs(*hardware),
                            whole=lambda: _verilog(*hardware), top=IO_ITERATION_TOP, ports=PORTS,
                            cflags=cflags or CFLAGS, sim_build=Path(build_dir) if build_dir is not None else None,
                            training=lockstep_params_of(params, lockstep) if pgo else None)
    build_s = time.perf_counter() - start
    metrics = simulate_iteration(simulator, built, params, name=name, top=IO_ITERATION_TOP,
                                 testcase="run_mesh_io_iteration", what="mesh I/O iteration",
                                 lockstep_params=lockstep)
    if simulator == "lockstep":
        state = metrics["after"]
        metrics["after"] = {"sequencers": state["engines"], "global": state["global"],
                            "controllers": state["controllers"]}
    after = metrics["after"]
    stuck = [f"NPU {r} (node {s['nodes_done']}/{len(traces[r].words)})"
             for r, s in enumerate(after["sequencers"]) if s["nodes_done"] != len(traces[r].words)]
    repeats = collective_repeats(traces, len(requests))
    errors = _judge(spec, requests, programs, repeats, after)
    check_finished(f"mesh {spec.mesh.rows} x {spec.mesh.cols} with {spec.controllers} I/O controllers",
                   metrics, stuck, errors)
    cycles, sim_s = after["global"]["cycles"], metrics["sim_s"]
    return IterationRun(fabric="mesh", cycles=cycles, node_times={r: metrics["node_times"][r] for r in sorted(traces)},
                        errors=errors, flits_sent=sum(r.size_flits * spec.mesh.npus * n for r, n in zip(requests, repeats)),
                        flits_received=sum(c["store_received"] for c in after["controllers"]),
                        build_s=round(build_s, 3), sim_s=round(sim_s, 4),
                        cycles_per_s=round(cycles / sim_s, 1) if sim_s > 0 else 0.0, depth=depth,
                        build_dir=str(built),
                        load_stall={r: s["load_stall"] for r, s in enumerate(after["sequencers"])},
                        simulator=simulator)


def _judge(spec: MeshIoSpec, requests, programs, repeats, after) -> list[str]:
    """What the run's registers say went wrong (module docstring); empty: nothing. ``repeats``:
    the runs of each request (an io-read node runs once per microbatch)."""
    g = after["global"]
    errors = [f"{name} set" for name in ("protocol_error", "mismatch") if g[name]]
    if g["load_errors"]:
        errors.append(f"{g['load_errors']} bad flit(s) at the NPUs' load checkers over every io-load")
    if g["spill_errors"]:
        errors.append(f"{g['spill_errors']} bad flit(s) at the spill checkers over every io-write and io-read")
    written = sum(p.stripe_flits * spec.mesh.npus * n for r, p, n in zip(requests, programs, repeats)
                  if r.op == "io-write")
    for k, c in enumerate(after["controllers"]):
        if c["spill_received"] != written:
            errors.append(f"controller {k}: {c['spill_received']} io-write flit(s) of {written}")
    if g["collectives"] != sum(repeats):
        errors.append(f"{g['collectives']} I/O collective(s) ran, the traces hold {sum(repeats)} "
                      f"({len(requests)} nodes with their repeats)")
    expect = [0] * spec.controllers
    for r, p, n in zip(requests, programs, repeats):
        if r.op == "io-store":
            expect = [a + n * b for a, b in zip(expect, p.expect)]
    for k, (c, e) in enumerate(zip(after["controllers"], expect)):
        if c["store_errors"] or c["store_received"] != e:
            errors.append(f"controller {k}: {c['store_received']} store flit(s) of {e}, "
                          f"{c['store_errors']} wrong")
    return errors
