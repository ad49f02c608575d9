"""The online router's RTL (hdl/designs/switch/online_router.py) against its reference model
(hdl/compiler/online_routing.py): random set-ups and (several at once) releases, the modes register compared with the
model's configuration vector every cycle (Amaranth simulator)."""

import random

import pytest
from amaranth.sim import Simulator

from hdl.compiler.online_routing import OnlineRoutingModel as Reference
from hdl.designs.switch.online_router import OnlineRouter


def _run(ports, middle, steps, seed):
    dut = OnlineRouter(ports=ports, middle=middle)
    ref = Reference(ports, middle)
    rng = random.Random(seed)
    stats = {"routed": 0, "released": 0, "both": 0, "blocked": 0, "multi": 0}

    async def bench(ctx):
        for _ in range(steps):
            paths = ref.paths
            free_in = [p for p in range(ports) if p not in paths.values()]
            free_out = [p for p in range(ports) if p not in paths]
            req = bool(free_in) and rng.random() < 0.6
            rel = sorted(d for d in paths if rng.random() < 0.3)
            src = rng.choice(free_in) if req else 0
            dst = rng.choice(free_out) if req else 0
            ctx.set(dut.req, req)
            ctx.set(dut.src, src)
            ctx.set(dut.dst, dst)
            ctx.set(dut.rel, sum(1 << d for d in rel))
            if req:
                choice = ref.route(src, dst)   # the model sees the state before the release
                assert ctx.get(dut.ok) == (choice is not None)
                stats["routed" if choice is not None else "blocked"] += 1
            for d in rel:
                ref.release(d)
            stats["released"] += len(rel)
            stats["both"] += req and bool(rel)
            stats["multi"] += len(rel) > 1
            await ctx.tick()
            assert ctx.get(dut.modes) == ref.config().to_int()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return stats


@pytest.mark.parametrize("ports,middle", [(2, 3), (3, 3), (4, 3), (5, 3), (8, 3), (6, 4), (4, 2)])
def test_matches_reference(ports, middle):
    stats = _run(ports, middle, 200, seed=ports * 10 + middle)
    assert stats["routed"] > 50 and stats["released"] > 30 and stats["both"] > 5
    if ports > 2:
        assert stats["multi"] > 5
    if middle >= 3:
        assert stats["blocked"] == 0
