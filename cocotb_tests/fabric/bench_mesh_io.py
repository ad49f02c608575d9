"""cocotb bench of the mesh with I/O controllers ``fred_mesh_io``
(:class:`hdl.designs.mesh.mesh_io_top.MeshIoTop`): write the stripe, the tree mode and the
random idle, pulse ``start``, poll ``all_done`` every ``poll`` cycles until done or
``watchdog_cycles``, read every NPU's and controller's counters and the fabric's. Never fails by
itself: ``cocotb_tests.fabric.mesh_io_run`` judges the metrics. Parameters
(``bench_params()``): ``stripe``, ``mode`` (index), ``stall`` (``IO_REGS``), ``npus``,
``controllers``, ``watchdog_cycles``, ``poll``; ``npu_read`` and ``controller_read``: the
register names of an NPU and a controller unit (default the io-load top's; the io-store top
``fred_mesh_io_store`` and the spill top ``fred_mesh_io_spill``, whose ``mode`` is the op, read
others)."""

from __future__ import annotations

import cocotb

from cocotb_tests.fabric.harness import power_on, read_register, run_to_completion, settle, write_programs
from cocotb_tests.lib import bench_params, metrics
from hdl.designs.fabric.fabric_top import GLOBAL_UNIT
from hdl.designs.mesh.mesh_io_harness import IO_GLOBAL_READ, IO_REGS
from hdl.designs.mesh.mesh_io_top import IO_CONTROLLER_READ, IO_NPU_READ


@cocotb.test()
async def run_io_load(dut):
    """Configure, run to completion or to the watchdog, record the counters."""
    params = bench_params()
    await power_on(dut, ("start", "prog_we", "rd_unit", "rd_reg"))
    # the program registers ignore the unit
    await write_programs(dut, [(0, IO_REGS.index(name), params[name]) for name in IO_REGS])
    elapsed, stalled, sim_s = await run_to_completion(dut, watchdog=params["watchdog_cycles"],
                                                      poll=params["poll"])
    await settle(dut)   # late (duplicated) flits surface as errors
    npu_read = params.get("npu_read", IO_NPU_READ)
    controller_read = params.get("controller_read", IO_CONTROLLER_READ)
    npus = [{n: await read_register(dut, r, i) for i, n in enumerate(npu_read)}
            for r in range(params["npus"])]
    controllers = [{n: await read_register(dut, params["npus"] + k, i) for i, n in enumerate(controller_read)}
                   for k in range(params["controllers"])]
    fabric = {n: await read_register(dut, GLOBAL_UNIT, i) for i, n in enumerate(IO_GLOBAL_READ)}
    metrics.record(stalled=stalled, elapsed_cycles=elapsed, sim_s=sim_s,
                   after={"npus": npus, "controllers": controllers, "global": fabric})
