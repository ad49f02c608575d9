"""The AXI4-Stream wrapper (hdl/designs/switch/axis_switch.py, docs/switch.md "AXI4-Stream
wrapper") in Amaranth's simulator: a configuration loaded and selected through s_cfg_axis /
s_sel_axis, then a reduction of four streams and a multicast, with random tvalid gaps and random
tready backpressure: every beat's sum (tdata), tlast and tuser arrive, none lost or duplicated,
in order; and the Verilog port names."""

from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator

from hdl.compiler.flows import Flow
from hdl.compiler.router import route
from hdl.contracts.errors import FredError
from hdl.designs.registry import get_design
from hdl.emit.verilog import to_verilog

PORTS, MIDDLE = 4, 3
MASK = 0xFFFF_FFFF


def _top():
    return get_design("axis_switch").build(ports=PORTS, middle=MIDDLE, dtype="int32", phases=2)


async def _axis_send(ctx, top, prefix, beats, rng, gap=0.0):
    """Offer ``beats`` [(tdata, tlast, tuser)] on slave ``prefix`` (tvalid raised without waiting
    for tready; a beat transfers on an edge where both are high); ``gap``: chance of an idle cycle."""
    for tdata, tlast, tuser in beats:
        while rng.random() < gap:
            ctx.set(getattr(top, f"{prefix}_tvalid"), 0)
            await ctx.tick()
        ctx.set(getattr(top, f"{prefix}_tvalid"), 1)
        ctx.set(getattr(top, f"{prefix}_tdata"), tdata)
        if hasattr(top, f"{prefix}_tlast"):
            ctx.set(getattr(top, f"{prefix}_tlast"), tlast)
        if hasattr(top, f"{prefix}_tuser"):
            ctx.set(getattr(top, f"{prefix}_tuser"), tuser)
        while True:
            _, _, ready = await ctx.tick().sample(getattr(top, f"{prefix}_tready"))
            if ready:
                break
    ctx.set(getattr(top, f"{prefix}_tvalid"), 0)


def _run(flows, inputs, *, n_beats, seed, outputs):
    """Load ``flows`` into slot 1, select it, send ``inputs`` {port: [(data, last, user)]} with
    random gaps while each output in ``outputs`` takes beats with random tready; returns
    {output: [(tdata, tlast, tuser)]} and the error/active status after the select."""
    top = _top()
    rng = random.Random(seed)
    words = route(ports=PORTS, middle=MIDDLE, flows=flows).phases[0].config.encode(top.params["word_width"])
    got, status = {o: [] for o in outputs}, {}

    async def configure(ctx):
        await _axis_send(ctx, top, "s_cfg_axis", [(w, int(n == len(words) - 1), 1) for n, w in enumerate(words)], rng)
        await ctx.tick().repeat(2)
        await _axis_send(ctx, top, "s_sel_axis", [(1, 0, 0)], rng)
        await ctx.tick()
        status.update(error=ctx.get(top.error), active=ctx.get(top.active_phase),
                      valid=ctx.get(top.active_valid), loaded=ctx.get(top.loaded))
        for port, beats in inputs.items():
            ctx.set(getattr(top, f"s{port}_axis_tvalid"), 0)
        return True

    async def bench(ctx):
        await configure(ctx)
        senders = {p: iter(b) for p, b in inputs.items()}
        current = {p: next(it, None) for p, it in senders.items()}
        for _ in range(40 * n_beats + 200):
            for p, beat in current.items():       # offer (valid never waits for ready)
                if beat is not None and rng.random() < 0.7:
                    ctx.set(getattr(top, f"s{p}_axis_tvalid"), 1)
                    ctx.set(getattr(top, f"s{p}_axis_tdata"), beat[0])
                    ctx.set(getattr(top, f"s{p}_axis_tlast"), beat[1])
                    ctx.set(getattr(top, f"s{p}_axis_tuser"), beat[2])
                else:
                    ctx.set(getattr(top, f"s{p}_axis_tvalid"), 0)
            for o in outputs:
                ctx.set(getattr(top, f"m{o}_axis_tready"), int(rng.random() < 0.6))
            watched = []
            for p in current:
                watched += [getattr(top, f"s{p}_axis_tvalid"), getattr(top, f"s{p}_axis_tready")]
            for o in outputs:
                watched += [getattr(top, f"m{o}_axis_{x}") for x in ("tvalid", "tready", "tdata", "tlast", "tuser")]
            values = list((await ctx.tick().sample(*watched))[2:])
            for p in list(current):
                valid, ready = values.pop(0), values.pop(0)
                if valid and ready:
                    current[p] = next(senders[p], None)
            for o in outputs:
                valid, ready, tdata, tlast, tuser = values[:5]
                del values[:5]
                if valid and ready:
                    got[o].append((int(tdata), int(tlast), int(tuser)))
            if all(b is None for b in current.values()) and all(len(got[o]) == n_beats for o in outputs):
                break
        await ctx.tick().repeat(10)

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got, status


def test_reduction_through_the_axi4_stream_ports_under_backpressure():
    rng = random.Random(5)
    n = 24
    inputs = {p: [(rng.getrandbits(32), int(k % 8 == 7), (p * 16 + k) & 0xFF) for k in range(n)]
              for p in range(PORTS)}
    got, status = _run([Flow(inputs=(0, 1, 2, 3), outputs=(0,))], inputs, n_beats=n, seed=7, outputs=(0,))
    assert status == {"error": 0, "active": 1, "valid": 1, "loaded": 0b10}
    # int32 sum of the four beats; tlast and tuser are the first input's (docs/switch.md, Datapath)
    assert got[0] == [(sum(inputs[p][k][0] for p in range(PORTS)) & MASK, inputs[0][k][1], inputs[0][k][2])
                      for k in range(n)]


def test_multicast_through_the_axi4_stream_ports_under_backpressure():
    rng = random.Random(6)
    n = 16
    beats = [(rng.getrandbits(32), int(k == n - 1), k) for k in range(n)]
    got, _ = _run([Flow(inputs=(1,), outputs=(0, 2, 3))], {1: beats}, n_beats=n, seed=8, outputs=(0, 2, 3))
    assert got == {0: beats, 2: beats, 3: beats}


def test_verilog_ports_have_axi4_stream_names():
    design = get_design("axis_switch")
    text = to_verilog(design.build(ports=3, middle=3, dtype="fp16", lanes=2, tag_width=4), name=design.top)
    header = text[text.index("module fred_axis_switch("):]
    header = header[:header.index(");")]
    names = {x.strip() for x in header[header.index("(") + 1:].split(",")}
    expected = {f"{side}{n}_axis_{sig}" for side in "sm" for n in range(3)
                for sig in ("tdata", "tvalid", "tready", "tlast", "tuser")}
    expected |= {f"s_cfg_axis_{s}" for s in ("tdata", "tvalid", "tready", "tlast", "tuser")}
    expected |= {f"s_sel_axis_{s}" for s in ("tdata", "tvalid", "tready")}
    expected |= {"clk", "rst", "busy", "error", "active_phase", "active_valid", "loaded"}
    assert names == expected
    assert "input [31:0] s0_axis_tdata;" in text and "input [3:0] s2_axis_tuser;" in text   # 2 fp16 lanes, tag 4
    with pytest.raises(FredError):
        design.build(ports=1)
