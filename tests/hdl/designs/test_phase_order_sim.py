"""The packet switch's phase order built deeper than its slots
(:class:`~hdl.designs.switch.phase_order.PhaseOrder`'s ``entries``, session 22, issue 32):
one order, loaded once, holds an iteration's every ordered run (docs/switch.md, "Phase order").
Checked cycle by cycle against a naive model; bad parameters refused by name."""

from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator

from hdl.contracts.errors import FredError
from hdl.designs.switch.phase_order import MAX_ORDER_ENTRIES, PhaseOrder


class _NaiveOrder:
    """The order as a list: entries written by index, ``set`` restarts at entry 0, ``advance``
    moves on while fewer than ``length`` entries are complete."""

    def __init__(self, entries):
        self.table = [(0, 0)] * entries
        self.length, self.vc, self.position = 0, 0, 0

    def outputs(self):
        active = self.position < self.length
        slot, last = self.table[self.position] if self.position < len(self.table) else self.table[0]
        return active, slot, last, self.vc

    def step(self, we, index, slot, last, set_we, length, vc, advance):
        active = self.position < self.length
        if we:
            self.table[index] = (slot, last)
        if set_we:
            self.length, self.vc, self.position = length, vc, 0
        elif advance and active:
            self.position += 1


@pytest.mark.parametrize("entries", [None, 13, 32])
def test_an_order_deeper_than_the_slots_reads_every_entry_in_order(entries):
    """8 slots, an order of ``entries`` (None: 8): random writes, sets and advances, the
    outputs equal to the naive model's every cycle; every entry index reached (an order of 32
    served to its end)."""
    dut = PhaseOrder(phases=8, seq_bits=10, entries=entries)
    depth = dut.entries
    model = _NaiveOrder(depth)
    rng = random.Random(depth)
    reached = set()

    async def bench(ctx):
        for cycle in range(40 * depth):
            write = cycle < 2 * depth          # fill the table, then set it full, then mix
            ins = {"we": int(write or rng.random() < 0.1), "index": cycle % depth if write else rng.randrange(depth),
                   "slot": rng.randrange(8), "last": rng.randrange(1 << 10),
                   "set_we": int(cycle == 2 * depth or cycle > 2 * depth and rng.random() < 0.02),
                   "length": depth if cycle == 2 * depth else rng.randrange(depth + 1),
                   "vc": rng.randrange(3), "advance": int(rng.random() < 0.5)}
            for name, value in ins.items():
                ctx.set(getattr(dut, name), value)
            got = (ctx.get(dut.active), ctx.get(dut.current_slot), ctx.get(dut.current_last), ctx.get(dut.current_vc))
            assert got == model.outputs(), (cycle, got, model.outputs())
            if got[0]:
                reached.add(model.position)
            model.step(**{k: ins[k] for k in ("we", "index", "slot", "last", "set_we", "length", "vc")},
                       advance=ins["advance"])
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert reached == set(range(depth))


def test_bad_order_depths_are_refused_by_name():
    from hdl.contracts.fabric import fabric_spec
    from hdl.designs.fabric.packet_fabric_top import PacketFabricTop
    from hdl.designs.switch.packet_switch import PacketSwitch
    from cocotb_tests.iteration.packet_loading import packet_iteration_format
    from tests.studies.test_iteration_case import SMALL
    for bad in (0, MAX_ORDER_ENTRIES + 1, True, 4.0):
        with pytest.raises(FredError, match=r"entries must be None \(one per slot\) or a whole number in 1\.\.255"):
            PhaseOrder(phases=8, seq_bits=10, entries=bad)
    spec = fabric_spec("fred-b", **SMALL)
    kw = dict(ports=3, middle=spec.middle, dtype=spec.dtype, lanes=spec.lanes, phases=8,
              packet=packet_iteration_format(spec, False), depth=24)
    with pytest.raises(FredError, match=r"order_entries must be None .* got 16 without ordered"):
        PacketSwitch(**kw, order_entries=16)
    with pytest.raises(FredError, match=r"order_entries must be None .* in 1\.\.255, got 256"):
        PacketSwitch(**kw, ordered=True, order_entries=256)
    for order_entries, depth in ((32, 32), (None, 8)):
        switch = PacketSwitch(**kw, ordered=True, order_entries=order_entries)
        switch._MustUse__silence = True            # not elaborated: its parameters checked only
        assert switch.order_entries == depth
    with pytest.raises(FredError, match=r"order_entries sizes the in-switch fabrics' phase orders"):
        PacketFabricTop(fabric_spec("fred-a", **SMALL), online=True, order_entries=16)
