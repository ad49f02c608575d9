"""The steps every fabric bench shares, written once (``bench_fabric``, ``bench_mesh_fabric``,
``cocotb_tests.iteration.bench_iteration``).

The fabric tops share one control interface (``hdl.designs.fabric.fabric_top``): a power-on
reset counted by the fabric itself (``POR_CYCLES``), a configuration stream (``cfg_*``, with
``cfg_ready``; the mesh has none), a program port (``prog_we/unit/reg/data``), a registered
read port (``rd_unit/rd_reg`` -> ``rd_data``), ``start`` and ``all_done``. The benches drive
these between long free runs: the clock is cocotb's GPI clock and the run is polled every
``poll`` cycles with one ``Timer``, so Verilator runs free (no Python per cycle); cycle counts
come from the RTL's own counters, so the polling does not change them.
"""

from __future__ import annotations

import time

from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer

from hdl.designs.fabric.fabric_top import POR_CYCLES

__all__ = ["PERIOD_NS", "power_on", "load_configurations", "write_register", "write_programs",
           "read_register", "run_to_completion", "settle"]

#: Clock period of every fabric bench (the cycle counts do not depend on it).
PERIOD_NS = 10


async def power_on(dut, idle_inputs) -> None:
    """Start the clock, hold ``idle_inputs`` (control input names) at 0 and wait out the
    fabric's own power-on reset."""
    Clock(dut.clk, PERIOD_NS, unit="ns").start()
    for name in idle_inputs:
        getattr(dut, name).value = 0
    for _ in range(POR_CYCLES + 2):
        await RisingEdge(dut.clk)


async def load_configurations(dut, config) -> int:
    """Stream every ``(switch, phase, last, word)`` of ``config`` into the configuration port,
    one word per accepted cycle (``valid`` held until ``cfg_ready``); returns the cycles the
    port was not ready."""
    stalls = 0
    for switch, phase, last, word in config:
        dut.cfg_valid.value = 1
        dut.cfg_switch.value = switch
        dut.cfg_data.value = word
        dut.cfg_last.value = last
        dut.cfg_phase.value = phase
        while True:
            await RisingEdge(dut.clk)
            if int(dut.cfg_ready.value):
                break
            stalls += 1
    dut.cfg_valid.value = 0
    return stalls


async def write_register(dut, unit: int, reg: int, value: int) -> None:
    """One program-port write (``prog_we`` stays high: the caller lowers it after its last)."""
    dut.prog_we.value = 1
    dut.prog_unit.value = unit
    dut.prog_reg.value = reg
    dut.prog_data.value = value
    await RisingEdge(dut.clk)


async def write_programs(dut, writes) -> None:
    """Every ``(unit, register, value)`` of ``writes``, one a cycle, then two idle cycles (the
    program port is registered)."""
    for unit, reg, value in writes:
        await write_register(dut, unit, reg, value)
    dut.prog_we.value = 0
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)


async def deposit_memories(dut, memories) -> int:
    """Write every word of ``memories`` (``(path, {index: word})``, the path below the top,
    e.g. ``npu_3.sequencer.loader.entries``) straight into the model's memory (VPI, no clock
    cycle: the build must make those memories public, ``build_top_public_only(public_vars=...)``),
    then one clock edge so the writes land (none without memories); returns the words
    written."""
    count = 0
    for path, words in memories:
        handle = dut
        for part in path.split("."):
            handle = handle[part]
        for index, word in words.items():
            handle[int(index)].value = word
        count += len(words)
    await RisingEdge(dut.clk)
    return count


async def read_register(dut, unit: int, reg: int) -> int:
    """One read through the registered read port (a cycle of latency)."""
    dut.rd_unit.value = unit
    dut.rd_reg.value = reg
    await RisingEdge(dut.clk)
    await Timer(1, "ns")
    return int(dut.rd_data.value)


async def run_to_completion(dut, *, watchdog: int, poll: int) -> tuple[int, bool, float]:
    """Pulse ``start``, then poll ``all_done`` every ``poll`` cycles until it is high or
    ``watchdog`` cycles have passed. Returns ``(elapsed cycles at the last poll, stalled,
    wall seconds of the run)``; a stall is reported, not raised (the run's judge names it)."""
    dut.start.value = 1
    started = time.perf_counter()
    await RisingEdge(dut.clk)
    dut.start.value = 0
    elapsed = 0
    while True:
        await Timer(poll * PERIOD_NS, "ns")
        elapsed += poll
        if int(dut.all_done.value):
            return elapsed, False, time.perf_counter() - started
        if elapsed >= watchdog:
            return elapsed, True, time.perf_counter() - started


async def settle(dut, cycles: int = 64) -> None:
    """Let late (duplicated) flits surface before the counters are read: the checks count
    extras, so a flit delivered twice is seen."""
    await Timer(cycles * PERIOD_NS, "ns")
