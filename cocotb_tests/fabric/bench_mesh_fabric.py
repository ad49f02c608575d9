"""cocotb bench of the mesh fabric top ``fred_mesh_fabric``
(:class:`hdl.designs.mesh.mesh_fabric_top.MeshFabricTop`): load the engine programs, pulse
``start``, poll ``all_done`` every ``poll`` cycles (no Python per cycle), read every engine's
counters and the fabric's. Never fails by itself: ``cocotb_tests.fabric.mesh_run`` judges the
metrics. Parameters (``FRED_BENCH_PARAMS``): ``writes`` ((unit, register, value) triples),
``units``, ``watchdog_cycles``, ``poll``."""

from __future__ import annotations

import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer

from cocotb_tests.lib import bench_params, metrics
from hdl.designs.fabric.fabric_top import ENGINE_READ, GLOBAL_UNIT, POR_CYCLES
from hdl.designs.mesh.mesh_fabric_top import MESH_GLOBAL_READ

PERIOD_NS = 10


async def _read(dut, unit: int, reg: int) -> int:
    dut.rd_unit.value = unit
    dut.rd_reg.value = reg
    await RisingEdge(dut.clk)   # the read port is registered
    await Timer(1, "ns")
    return int(dut.rd_data.value)


async def _read_all(dut, units: int) -> dict:
    engines = [{name: await _read(dut, u, i) for i, name in enumerate(ENGINE_READ)} for u in range(units)]
    fabric = {name: await _read(dut, GLOBAL_UNIT, i) for i, name in enumerate(MESH_GLOBAL_READ)}
    return {"engines": engines, "global": fabric}


@cocotb.test()
async def run_program(dut):
    """Load, run to completion or to the watchdog, record the counters."""
    params = bench_params()
    Clock(dut.clk, PERIOD_NS, unit="ns").start()
    for name in ("start", "prog_we", "rd_unit", "rd_reg"):
        getattr(dut, name).value = 0
    for _ in range(POR_CYCLES + 2):
        await RisingEdge(dut.clk)
    for unit, reg, value in params["writes"]:
        dut.prog_we.value = 1
        dut.prog_unit.value = unit
        dut.prog_reg.value = reg
        dut.prog_data.value = value
        await RisingEdge(dut.clk)
    dut.prog_we.value = 0
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
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
    await Timer(64 * PERIOD_NS, "ns")   # late (duplicated) flits surface as extras
    after = await _read_all(dut, params["units"])
    metrics.record(stalled=stalled, elapsed_cycles=elapsed, sim_s=sim_s, after=after)
