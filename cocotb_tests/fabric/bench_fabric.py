"""cocotb bench of the fabric top ``fred_fabric`` (:class:`hdl.designs.fabric.FabricTop`).

The Python side only loads (switch configurations, sequencer and engine programs), pulses
``start`` and polls ``all_done`` every ``poll`` cycles with one ``Timer`` (no Python per cycle:
the clock is cocotb's GPI clock, so Verilator runs free between polls); ``cycles`` is counted by
the RTL, so the polling does not affect it. At the end (or when the watchdog's cycle budget is
spent) every engine's and switch's counters are read and recorded as metrics; the bench never
fails by itself: ``cocotb_tests.fabric.run`` judges the metrics.

Bench parameters (``FRED_BENCH_PARAMS``): ``config`` and ``writes`` (the load sequence,
``cocotb_tests.fabric.run.load_sequence``), ``npus``, ``switch_count``, ``watchdog_cycles``,
``poll``; optionally ``engine_read`` / ``switch_read``, the read registers' names of another
top with the same ports (the packet fabric's ``fred_packet_fabric``).
"""

from __future__ import annotations

import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer

from cocotb_tests.lib import bench_params, metrics
from hdl.designs.fabric.fabric_top import ENGINE_READ, GLOBAL_READ, GLOBAL_UNIT, POR_CYCLES, SWITCH_READ

PERIOD_NS = 10


async def _read(dut, unit: int, reg: int) -> int:
    dut.rd_unit.value = unit
    dut.rd_reg.value = reg
    await RisingEdge(dut.clk)   # the read port is registered
    await Timer(1, "ns")
    return int(dut.rd_data.value)


async def _read_all(dut, npus: int, switches: int, engine_read=ENGINE_READ,
                    switch_read=SWITCH_READ) -> dict:
    out = {"engines": [], "switches": [], "global": {}}
    for rank in range(npus):
        out["engines"].append({name: await _read(dut, rank, i) for i, name in enumerate(engine_read)})
    for s in range(switches):
        out["switches"].append({name: await _read(dut, npus + s, i) for i, name in enumerate(switch_read)})
    out["global"] = {name: await _read(dut, GLOBAL_UNIT, i) for i, name in enumerate(GLOBAL_READ)}
    return out


@cocotb.test()
async def run_program(dut):
    """Load the program, run it to completion or to the watchdog, record the counters."""
    params = bench_params()
    npus, switches = params["npus"], params["switch_count"]
    names = {key: params[key] for key in ("engine_read", "switch_read") if key in params}
    Clock(dut.clk, PERIOD_NS, unit="ns").start()
    for name in ("start", "prog_we", "cfg_valid", "cfg_last", "rd_unit", "rd_reg"):
        getattr(dut, name).value = 0
    for _ in range(POR_CYCLES + 2):   # the fabric's own power-on reset
        await RisingEdge(dut.clk)
    load_start = time.perf_counter()
    # -- configurations: every phase of every switch, one word per cycle ------------------
    cfg_stalls = 0
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
            cfg_stalls += 1
    dut.cfg_valid.value = 0
    # -- programs: sequencers (unit npus + s), engines (unit rank) -------------------------
    for unit, reg, value in params["writes"]:
        dut.prog_we.value = 1
        dut.prog_unit.value = unit
        dut.prog_reg.value = reg
        dut.prog_data.value = value
        await RisingEdge(dut.clk)
    dut.prog_we.value = 0
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    before = await _read_all(dut, npus, switches, **names)
    load_s = time.perf_counter() - load_start
    # -- run ----------------------------------------------------------------------------
    watchdog, poll = params["watchdog_cycles"], params["poll"]
    dut.start.value = 1
    sim_start = time.perf_counter()
    await RisingEdge(dut.clk)
    dut.start.value = 0
    elapsed = 0
    stalled = False
    while True:
        await Timer(poll * PERIOD_NS, "ns")
        elapsed += poll
        if int(dut.all_done.value):
            break
        if elapsed >= watchdog:
            stalled = True
            break
    sim_s = time.perf_counter() - sim_start
    # let late (duplicated) flits surface before the counters are read: the check counts extras
    await Timer(params.get("settle", 64) * PERIOD_NS, "ns")
    after = await _read_all(dut, npus, switches, **names)
    metrics.record(stalled=stalled, elapsed_cycles=elapsed, sim_s=sim_s, load_s=load_s,
                   cfg_stalls=cfg_stalls, before=before, after=after)
