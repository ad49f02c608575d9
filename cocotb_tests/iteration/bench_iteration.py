"""cocotb bench of the fabric whose NPUs run iteration traces (``hdl.designs.iteration``;
Verilog top ``fred_fabric``).

The harness only loads (switch configurations, phase-sequencer programs, engine programs and
each NPU's trace: the ``writes`` of ``cocotb_tests.iteration.run.iteration_load``), pulses
``start`` once and polls ``all_done`` every ``poll`` cycles (no Python per cycle); every
node's start and end cycle is counted by the NPU's trace sequencer and read back after the
run, through its read-address register. Like ``bench_fabric.py`` it records and never fails:
``cocotb_tests.iteration.run`` judges the counters.

Bench parameters (``FRED_BENCH_PARAMS``): ``config``, ``writes``, ``npus``, ``switch_count``,
``watchdog_cycles``, ``poll``, ``nodes`` (per rank, the node count to read back),
``engine_read`` (the NPU's read registers, ``TraceNpu.read_names``).
"""

from __future__ import annotations

import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer

from cocotb_tests.fabric.bench_fabric import PERIOD_NS, _read, _read_all
from cocotb_tests.lib import bench_params, metrics
from hdl.contracts.trace_program import TRACE_READ_ADDR
from hdl.designs.fabric.fabric_top import POR_CYCLES


async def _write(dut, unit: int, reg: int, value: int) -> None:
    dut.prog_we.value = 1
    dut.prog_unit.value = unit
    dut.prog_reg.value = reg
    dut.prog_data.value = value
    await RisingEdge(dut.clk)


async def _node_times(dut, npus_nodes: list[int], engine_read: list[str]) -> list[list[list[int]]]:
    """Per rank, per node, [start, end] cycles (the read-address register, then two reads;
    the program and read ports are registered once, so a read follows its write by a cycle)."""
    start_reg, end_reg = engine_read.index("node_start"), engine_read.index("node_end")
    out = []
    for rank, count in enumerate(npus_nodes):
        times = []
        for i in range(count):
            await _write(dut, rank, TRACE_READ_ADDR, i)
            dut.prog_we.value = 0
            await RisingEdge(dut.clk)
            times.append([await _read(dut, rank, start_reg), await _read(dut, rank, end_reg)])
        out.append(times)
    return out


@cocotb.test()
async def run_iteration(dut):
    """Load, start once, run to completion or to the watchdog, read every counter."""
    params = bench_params()
    npus, switches, engine_read = params["npus"], params["switch_count"], params["engine_read"]
    Clock(dut.clk, PERIOD_NS, unit="ns").start()
    for name in ("start", "prog_we", "cfg_valid", "cfg_last", "rd_unit", "rd_reg"):
        getattr(dut, name).value = 0
    for _ in range(POR_CYCLES + 2):   # the fabric's own power-on reset
        await RisingEdge(dut.clk)
    for s, k, last, word in params["config"]:
        dut.cfg_valid.value = 1
        dut.cfg_switch.value = s
        dut.cfg_data.value = word
        dut.cfg_last.value = last
        dut.cfg_phase.value = k
        while True:
            await RisingEdge(dut.clk)
            if int(dut.cfg_ready.value):
                break
    dut.cfg_valid.value = 0
    for unit, reg, value in params["writes"]:
        await _write(dut, unit, reg, value)
    dut.prog_we.value = 0
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    before = await _read_all(dut, npus, switches, engine_read=engine_read)
    watchdog, poll = params["watchdog_cycles"], params["poll"]
    dut.start.value = 1
    sim_start = time.perf_counter()
    await RisingEdge(dut.clk)
    dut.start.value = 0
    elapsed, stalled = 0, False
    while True:
        await Timer(poll * PERIOD_NS, "ns")
        elapsed += poll
        if int(dut.all_done.value):
            break
        if elapsed >= watchdog:
            stalled = True
            break
    sim_s = time.perf_counter() - sim_start
    await Timer(params.get("settle", 64) * PERIOD_NS, "ns")   # late (duplicated) flits surface
    after = await _read_all(dut, npus, switches, engine_read=engine_read)
    times = await _node_times(dut, params["nodes"], engine_read)
    metrics.record(stalled=stalled, elapsed_cycles=elapsed, sim_s=sim_s, before=before,
                   after=after, node_times=times)
