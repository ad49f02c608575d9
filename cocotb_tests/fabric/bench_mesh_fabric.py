"""cocotb bench of the mesh fabric top ``fred_mesh_fabric``
(:class:`hdl.designs.mesh.mesh_fabric_top.MeshFabricTop`): load the engine programs, pulse
``start``, poll ``all_done`` every ``poll`` cycles (no Python per cycle), read every engine's
counters and the fabric's. Never fails by itself: ``cocotb_tests.fabric.mesh_run`` judges the
metrics. Parameters (``bench_params()``): ``writes`` ((unit, register, value) triples),
``units``, ``watchdog_cycles``, ``poll``."""

from __future__ import annotations

import cocotb

from cocotb_tests.fabric.harness import power_on, read_register, run_to_completion, settle, write_programs
from cocotb_tests.lib import bench_params, metrics
from hdl.designs.fabric.fabric_top import ENGINE_READ, GLOBAL_UNIT
from hdl.designs.mesh.mesh_fabric_top import MESH_GLOBAL_READ


async def read_mesh(dut, units: int) -> dict:
    """The first ``units`` engines' ``ENGINE_READ`` registers and the mesh's ``MESH_GLOBAL_READ``."""
    engines = [{name: await read_register(dut, u, i) for i, name in enumerate(ENGINE_READ)}
               for u in range(units)]
    fabric = {name: await read_register(dut, GLOBAL_UNIT, i) for i, name in enumerate(MESH_GLOBAL_READ)}
    return {"engines": engines, "global": fabric}


@cocotb.test()
async def run_program(dut):
    """Load, run to completion or to the watchdog, record the counters."""
    params = bench_params()
    await power_on(dut, ("start", "prog_we", "rd_unit", "rd_reg"))
    await write_programs(dut, params["writes"])
    elapsed, stalled, sim_s = await run_to_completion(dut, watchdog=params["watchdog_cycles"],
                                                      poll=params["poll"])
    await settle(dut)
    after = await read_mesh(dut, params["units"])
    metrics.record(stalled=stalled, elapsed_cycles=elapsed, sim_s=sim_s, after=after)
