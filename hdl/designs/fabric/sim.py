"""Amaranth-simulator helper for the fabric's programmable blocks (tests only; the Verilator
fabric is programmed through :class:`~hdl.designs.fabric.fabric_top.FabricTop`'s ports by cocotb)."""

from __future__ import annotations

__all__ = ["program_and_start"]


async def program_and_start(ctx, dut, writes) -> None:
    """Write ``writes`` ((register address, value) pairs) through ``dut``'s program port
    (``we``/``waddr``/``wdata``: an :class:`~hdl.designs.fabric.npu_engine.NpuEngine` or a
    :class:`~hdl.designs.fabric.phase_sequencer.PhaseSequencer`), one per cycle, then pulse ``start``
    for one cycle."""
    for reg, value in writes:
        ctx.set(dut.we, 1)
        ctx.set(dut.waddr, reg)
        ctx.set(dut.wdata, value)
        await ctx.tick()
    ctx.set(dut.we, 0)
    ctx.set(dut.start, 1)
    await ctx.tick()
    ctx.set(dut.start, 0)
