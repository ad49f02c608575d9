"""``CollectiveBarrier`` (hdl/designs/iteration/collective_barrier.py) cycle by cycle in the
Amaranth simulator, hand-computed: 3 NPUs whose runs end at different cycles."""

from __future__ import annotations

import pytest


def _simulate(module, bench) -> None:
    """Run ``bench`` (an async testbench) on ``module`` in Amaranth's simulator, 1 MHz clock."""
    from amaranth.sim import Simulator
    sim = Simulator(module)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def _run(events, cycles, parts=None):
    """``events``: {cycle: (run_over bits, trace_done bits)} (held for that cycle only; the
    start pulse in cycle 0). Returns ``may_start`` of the 3 NPUs per cycle, sampled before the
    clock edge. ``parts`` (default None: one barrier of the 3): the NPUs of each of two halves,
    ``CollectiveBarrier(split=True)`` whose ``ended`` feed each other's ``others_ended`` in the
    same cycle (what the lock-step driver's cut carries)."""
    from amaranth import Module

    from hdl.designs.iteration import CollectiveBarrier
    m = Module()
    if parts is None:
        parts = [(0, 1, 2)]
        m.submodules.whole = CollectiveBarrier(3)
        halves = [m.submodules.whole]
    else:
        halves = [CollectiveBarrier(len(p), split=True) for p in parts]
        m.submodules.a, m.submodules.b = halves
        m.d.comb += [halves[0].others_ended.eq(halves[1].ended), halves[1].others_ended.eq(halves[0].ended)]
    seen = []

    def bits(value, members):
        return sum(((value >> npu) & 1) << i for i, npu in enumerate(members))

    async def bench(ctx):
        for cycle in range(cycles):
            over, done = events.get(cycle, (0, 0))
            word = 0
            for half, members in zip(halves, parts):
                ctx.set(half.start, cycle == 0)
                ctx.set(half.run_over, bits(over, members))
                ctx.set(half.trace_done, bits(done, members))
            for half, members in zip(halves, parts):
                allowed = ctx.get(half.may_start)
                word |= sum(((allowed >> i) & 1) << npu for i, npu in enumerate(members))
            seen.append(word)
            await ctx.tick()

    _simulate(m, bench)
    return seen


def test_an_npu_that_finished_a_run_waits_until_every_npu_has_finished_it():
    # NPU 0 ends its run in cycle 2, NPU 2 in cycle 4, NPU 1 in cycle 6; NPU 1 again in 9
    seen = _run({2: (0b001, 0), 4: (0b100, 0), 6: (0b010, 0), 9: (0b010, 0)}, 12)
    assert seen[:3] == [0b111] * 3
    assert seen[3:5] == [0b110] * 2           # NPU 0 finished: it waits
    assert seen[5:7] == [0b010] * 2           # and NPU 2
    assert seen[7:10] == [0b111] * 3          # the last one ended in 6: everyone may start in 7
    assert seen[10:] == [0b101] * 2           # NPU 1 finished its next run first


def test_runs_ending_in_one_cycle_and_ended_traces_hold_nobody():
    # all three in cycle 2: free the next cycle; then NPU 2's trace is over (bit held), so the
    # runs of 0 and 1 ending free them
    seen = _run({2: (0b111, 0), 5: (0b001, 0b100), 6: (0b010, 0b100)}, 9)
    assert seen == [0b111] * 6 + [0b110, 0b111, 0b111]


def test_a_barrier_of_no_npu_is_refused():
    from hdl.contracts.errors import FredError
    from hdl.designs.iteration import CollectiveBarrier
    with pytest.raises(FredError, match="at least 1 NPU"):
        CollectiveBarrier(0)


@pytest.mark.parametrize("parts", [((0,), (1, 2)), ((0, 2), (1,))])
def test_a_barrier_split_in_two_halves_is_the_whole_barrier_cycle_for_cycle(parts):
    """The lock-step simulator's cut mesh (``MeshIterationTop`` with a partition): each part's
    half over its own NPUs, their ``ended`` crossing the cut; the same ``may_start`` as the
    whole barrier on both hand-computed schedules above."""
    for events, cycles in (({2: (0b001, 0), 4: (0b100, 0), 6: (0b010, 0), 9: (0b010, 0)}, 12),
                           ({2: (0b111, 0), 5: (0b001, 0b100), 6: (0b010, 0b100)}, 9)):
        assert _run(events, cycles, parts) == _run(events, cycles)


def test_a_stage_barrier_split_in_two_halves_is_the_whole_barrier_cycle_for_cycle():
    """``StageBarrier(split=True)`` (the packet iteration top cut for the lock-step simulator):
    two halves over NPUs {0} and {1, 2}, their ``ended`` crossing: ``open`` per cycle equals
    the whole barrier's over a hand-made schedule of ``past`` bits (each stage boundary opens
    the cycle after the last NPU is past it; start clears)."""
    from amaranth import Module

    from hdl.designs.iteration import StageBarrier
    from hdl.designs.iteration.stage_barrier import BOUNDARIES
    schedule = {1: [1, 0, 0], 2: [1, 1, 0], 3: [1, 1, 1], 5: [3, 1, 1], 6: [3, 3, 3], 8: [0, 0, 0]}

    def run(split: bool) -> list[int]:
        m = Module()
        if split:
            a, b = StageBarrier(1, split=True), StageBarrier(2, split=True)
            m.submodules.a, m.submodules.b = a, b
            m.d.comb += [a.others_ended.eq(b.ended), b.others_ended.eq(a.ended)]
            halves = [(a, [0]), (b, [1, 2])]
        else:
            whole = m.submodules.whole = StageBarrier(3)
            halves = [(whole, [0, 1, 2])]
        seen, past = [], [0, 0, 0]

        async def bench(ctx):
            for cycle in range(10):
                past[:] = schedule.get(cycle, past)
                for barrier, members in halves:
                    ctx.set(barrier.start, cycle == 0)
                    ctx.set(barrier.past, sum(past[npu] << (BOUNDARIES * i) for i, npu in enumerate(members)))
                seen.append(ctx.get(halves[0][0].open))
                await ctx.tick()

        _simulate(m, bench)
        return seen

    whole = run(False)
    assert whole == run(True)
    assert whole[:4] == [0, 0, 0, 0] and whole[4] == 1 and whole[7] == 3 and whole[9] == 0
