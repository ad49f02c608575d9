"""cocotb bench of the fabric top ``fred_fabric`` (:class:`hdl.designs.fabric.FabricTop`).

The Python side only loads (switch configurations, sequencer and engine programs), pulses
``start`` and polls ``all_done`` every ``poll`` cycles with one ``Timer`` (no Python per cycle:
the clock is cocotb's GPI clock, so Verilator runs free between polls); ``cycles`` is counted by
the RTL, so the polling does not affect it. At the end (or when the watchdog's cycle budget is
spent) every engine's and switch's counters are read and recorded as metrics; the bench never
fails by itself: ``cocotb_tests.fabric.run`` judges the metrics.

Bench parameters (``bench_params()``): ``config`` and ``writes`` (the load sequence,
``cocotb_tests.fabric.run.load_sequence``), ``npus``, ``switch_count``, ``watchdog_cycles``,
``poll``; optionally ``engine_read`` / ``switch_read``, the read registers' names of another
top with the same ports (the packet fabric's ``fred_packet_fabric``).
"""

from __future__ import annotations

import time

import cocotb

from cocotb_tests.fabric.harness import (load_configurations, power_on, read_register, run_to_completion,
                                         settle, write_programs)
from cocotb_tests.lib import bench_params, metrics
from hdl.designs.fabric.fabric_top import ENGINE_READ, GLOBAL_READ, GLOBAL_UNIT, SWITCH_READ

#: The fabric top's control inputs, held at 0 through the power-on reset.
CONTROL_INPUTS = ("start", "prog_we", "cfg_valid", "cfg_last", "rd_unit", "rd_reg")


async def read_all(dut, npus: int, switches: int, engine_read=ENGINE_READ,
                   switch_read=SWITCH_READ) -> dict:
    """Every engine's (units 0..npus-1), switch's (units npus..) and the fabric's counters."""
    out = {"engines": [], "switches": [], "global": {}}
    for rank in range(npus):
        out["engines"].append({name: await read_register(dut, rank, i) for i, name in enumerate(engine_read)})
    for s in range(switches):
        out["switches"].append({name: await read_register(dut, npus + s, i)
                                for i, name in enumerate(switch_read)})
    out["global"] = {name: await read_register(dut, GLOBAL_UNIT, i) for i, name in enumerate(GLOBAL_READ)}
    return out


@cocotb.test()
async def run_program(dut):
    """Load the program, run it to completion or to the watchdog, record the counters."""
    params = bench_params()
    npus, switches = params["npus"], params["switch_count"]
    names = {key: params[key] for key in ("engine_read", "switch_read") if key in params}
    await power_on(dut, CONTROL_INPUTS)
    load_start = time.perf_counter()
    cfg_stalls = await load_configurations(dut, params["config"])   # every phase of every switch
    await write_programs(dut, params["writes"])   # sequencers (unit npus + s), engines (unit rank)
    before = await read_all(dut, npus, switches, **names)
    load_s = time.perf_counter() - load_start
    elapsed, stalled, sim_s = await run_to_completion(dut, watchdog=params["watchdog_cycles"],
                                                      poll=params["poll"])
    await settle(dut, params.get("settle", 64))
    after = await read_all(dut, npus, switches, **names)
    metrics.record(stalled=stalled, elapsed_cycles=elapsed, sim_s=sim_s, load_s=load_s,
                   cfg_stalls=cfg_stalls, before=before, after=after)
