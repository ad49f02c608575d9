"""cocotb benches of the fabrics whose NPUs run iteration traces (``hdl.designs.iteration``;
Verilog tops ``fred_fabric`` and ``fred_packet_fabric``, test ``run_iteration``, and ``fred_mesh_fabric``, test
``run_mesh_iteration``).

The harness only loads (switch configurations, phase-sequencer programs, engine programs and
each NPU's trace: the ``writes`` of ``cocotb_tests.iteration.run.iteration_load``), pulses
``start`` once and polls ``all_done`` every ``poll`` cycles (no Python per cycle); every
node's start and end cycle is counted by the NPU's trace sequencer and read back after the
run, through its read-address register. Like ``bench_fabric.py`` it records and never fails:
``cocotb_tests.iteration.run`` judges the counters.

Bench parameters (``bench_params()``): ``config``, ``writes``, ``npus``, ``switch_count``,
``watchdog_cycles``, ``poll``, ``nodes`` (per rank, the node count to read back),
``engine_read`` (the NPU's read registers, ``TraceNpu.read_names``), optionally ``switch_read``
(the packet fabric's switch registers, ``PACKET_SWITCH_READ``), ``switch_units`` (the switches'
units when they are not ``npus + s``: a fabric with controllers), ``controller_units`` /
``controller_read`` (the packet fabric's traced controllers), ``memories`` (words written
straight into public memories before ``writes``: ``harness.deposit_memories``). The mesh's:
``writes``, ``units`` (engine units), ``watchdog_cycles``, ``poll``, ``nodes``,
``trace_units`` (per rank, its sequencer's read unit), ``trace_read`` (the sequencer's read
registers).
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import RisingEdge

from cocotb_tests.fabric.bench_fabric import CONTROL_INPUTS, read_all
from cocotb_tests.fabric.bench_mesh_fabric import read_mesh
from cocotb_tests.fabric.harness import (deposit_memories, load_configurations, power_on, read_register,
                                         run_to_completion, settle, write_programs, write_register)
from cocotb_tests.lib import bench_params, metrics
from hdl.contracts.trace_program import TRACE_READ_ADDR

#: The mesh tops' control inputs, driven low at power-on.
MESH_CONTROL_INPUTS = ("start", "prog_we", "rd_unit", "rd_reg")


async def _node_times(dut, npus_nodes: list[int], read_names: list[str],
                     units: list[int] | None = None) -> list[list[list[int]]]:
    """Per rank, per node, [start, end] cycles (the read-address register, then two reads;
    the program and read ports are registered once, so a read follows its write by a cycle);
    ``units``: per rank, the unit of its sequencer (default: the rank)."""
    start_reg, end_reg = read_names.index("node_start"), read_names.index("node_end")
    out = []
    for rank, count in enumerate(npus_nodes):
        unit = rank if units is None else units[rank]
        times = []
        for i in range(count):
            await write_register(dut, unit, TRACE_READ_ADDR, i)
            dut.prog_we.value = 0
            await RisingEdge(dut.clk)
            times.append([await read_register(dut, unit, start_reg), await read_register(dut, unit, end_reg)])
        out.append(times)
    return out


async def _run_and_settle(dut, params: dict) -> tuple[int, bool, float]:
    """Pulse ``start``, poll ``all_done`` every ``poll`` cycles up to the watchdog, then let the
    fabric settle; returns (elapsed cycles, stalled, simulated seconds)."""
    elapsed, stalled, sim_s = await run_to_completion(dut, watchdog=params["watchdog_cycles"],
                                                      poll=params["poll"])
    await settle(dut, params.get("settle", 64))
    return elapsed, stalled, sim_s


async def _load_mesh_and_run(dut, params: dict) -> tuple[int, bool, float]:
    """The mesh tops' load (no switch configurations: the programs and traces only), then
    :func:`_run_and_settle`."""
    await power_on(dut, MESH_CONTROL_INPUTS)
    await write_programs(dut, params["writes"])
    return await _run_and_settle(dut, params)


@cocotb.test()
async def run_iteration(dut):
    """Load, start once, run to completion or to the watchdog, read every counter."""
    params = bench_params()
    npus, switches = params["npus"], params["switch_count"]
    names = {key: params[key] for key in ("engine_read", "switch_read") if key in params}
    await power_on(dut, CONTROL_INPUTS)
    await load_configurations(dut, params["config"])
    await deposit_memories(dut, params.get("memories", []))
    await write_programs(dut, params["writes"])
    before = await read_all(dut, npus, switches, **names)
    elapsed, stalled, sim_s = await _run_and_settle(dut, params)
    after = await read_all(dut, npus, switches, **names)
    # units read by name besides the NPUs: the controllers (``controller_units`` /
    # ``controller_read``), switches not at unit npus + s (``switch_units``: with controllers
    # the switches follow every endpoint)
    for key, units, read in (("controllers", "controller_units", "controller_read"),
                             ("switches", "switch_units", "switch_read")):
        if units in params:
            after[key] = [{n: await read_register(dut, u, i) for i, n in enumerate(params[read])}
                          for u in params[units]]
    times = await _node_times(dut, params["nodes"], params["engine_read"])
    metrics.record(stalled=stalled, elapsed_cycles=elapsed, sim_s=sim_s, before=before,
                   after=after, node_times=times)


@cocotb.test()
async def run_mesh_iteration(dut):
    """The mesh's: load the engine programs and traces, start once, run, read every counter."""
    params = bench_params()
    elapsed, stalled, sim_s = await _load_mesh_and_run(dut, params)
    after = await read_mesh(dut, params["units"])
    await _record_sequencers(dut, params, after, elapsed, stalled, sim_s)


async def _record_sequencers(dut, params, after: dict, elapsed: int, stalled: bool, sim_s: float) -> None:
    """Read every NPU's sequencer registers (``trace_units`` / ``trace_read``) into ``after``
    and every node's times, and record the run."""
    trace_units, trace_read = params["trace_units"], params["trace_read"]
    after["sequencers"] = [{n: await read_register(dut, u, i) for i, n in enumerate(trace_read)}
                           for u in trace_units]
    times = await _node_times(dut, params["nodes"], trace_read, trace_units)
    metrics.record(stalled=stalled, elapsed_cycles=elapsed, sim_s=sim_s, after=after, node_times=times)


@cocotb.test()
async def run_mesh_io_iteration(dut):
    """The mesh with I/O controllers (``fred_mesh_io_iteration``): load the traces and the I/O
    registers' loader entries, start once, run, read the fabric's, the controllers' and the
    sequencers' registers (``global_read``, ``controller_units`` / ``controller_read``,
    ``trace_units`` / ``trace_read``) and every node's times."""
    params = bench_params()
    elapsed, stalled, sim_s = await _load_mesh_and_run(dut, params)
    after = {"global": {n: await read_register(dut, params["global_unit"], i)
                        for i, n in enumerate(params["global_read"])}}
    after["controllers"] = [{n: await read_register(dut, u, i) for i, n in enumerate(params["controller_read"])}
                            for u in params["controller_units"]]
    await _record_sequencers(dut, params, after, elapsed, stalled, sim_s)
