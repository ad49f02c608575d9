"""cocotb bench of the mesh with I/O controllers ``fred_mesh_io``
(:class:`hdl.designs.mesh.mesh_io_top.MeshIoTop`): write the stripe and the tree mode, pulse
``start``, poll ``all_done`` every ``poll`` cycles until done or ``watchdog_cycles``, read every
NPU's and controller's counters and the fabric's. Never fails by itself:
``cocotb_tests.fabric.mesh_io_run`` judges the metrics. Parameters (``FRED_BENCH_PARAMS``):
``stripe``, ``mode`` (index), ``stall`` (``IO_REGS``), ``npus``, ``controllers``, ``watchdog_cycles``, ``poll``."""

from __future__ import annotations

import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer

from cocotb_tests.fabric.bench_mesh_fabric import PERIOD_NS, _read
from cocotb_tests.lib import bench_params, metrics
from hdl.designs.fabric.fabric_top import GLOBAL_UNIT, POR_CYCLES
from hdl.designs.mesh.mesh_io_top import IO_CONTROLLER_READ, IO_GLOBAL_READ, IO_NPU_READ, IO_REGS


@cocotb.test()
async def run_io_load(dut):
    """Configure, run to completion or to the watchdog, record the counters."""
    params = bench_params()
    Clock(dut.clk, PERIOD_NS, unit="ns").start()
    for name in ("start", "prog_we", "rd_unit", "rd_reg"):
        getattr(dut, name).value = 0
    for _ in range(POR_CYCLES + 2):
        await RisingEdge(dut.clk)
    for reg, value in ((IO_REGS.index("stripe"), params["stripe"]), (IO_REGS.index("mode"), params["mode"]),
                       (IO_REGS.index("stall"), params["stall"])):
        dut.prog_we.value = 1
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
    await Timer(64 * PERIOD_NS, "ns")   # late (duplicated) flits surface as errors
    npus = [{n: await _read(dut, r, i) for i, n in enumerate(IO_NPU_READ)} for r in range(params["npus"])]
    controllers = [{n: await _read(dut, params["npus"] + k, i) for i, n in enumerate(IO_CONTROLLER_READ)}
                   for k in range(params["controllers"])]
    fabric = {n: await _read(dut, GLOBAL_UNIT, i) for i, n in enumerate(IO_GLOBAL_READ)}
    metrics.record(stalled=stalled, elapsed_cycles=elapsed, sim_s=sim_s,
                   after={"npus": npus, "controllers": controllers, "global": fabric})
