"""cocotb bench: every legal configuration of Fred_m(3) on the RTL, against the functional model.

The DUT is the datapath alone (``hdl.designs.switch.FredSwitch``, top ``fred_datapath``) so that a
configuration is applied in one cycle. For each configuration of
:func:`cocotb_tests.exhaustive.legal_configurations` (in order):

1. drive ``modes`` and offer one flit on every port (random int32 data, ``tag`` = the port);
2. in the settled cycle, every port the configuration accepts must be ready and every other
   port not (a disabled input is never consumed), and ``busy`` must be low (the previous
   configuration left nothing behind);
3. the flits enter at the next edge; ``latency`` cycles later every output the functional model
   (``simulate``) gives data must offer exactly that data, with the framing of the leftmost
   leaf of its addition tree (``symbolic``), and every other output nothing; every output is
   ready, so the flits leave at that edge.

About latency + 1 cycles per configuration, with the Python work per configuration kept small.
Bench parameters: ``ports`` (3), ``middle``, ``latency``, ``tag_width``.
"""

from __future__ import annotations

import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from cocotb_tests.exhaustive import accepted_ports, legal_configurations
from cocotb_tests.lib import bench_params, metrics, seeded_rng
from hdl.compiler.functional import simulate, symbolic
from hdl.contracts.flit import FlitFormat


def _leftmost_leaf(tree):
    while isinstance(tree, tuple):
        tree = tree[1]
    return tree


@cocotb.test()
async def every_legal_configuration(dut):
    p = bench_params()
    ports, middle, latency = p["ports"], p["middle"], p["latency"]
    fmt = FlitFormat(dtype="int32", lanes=1, tag_width=p["tag_width"])
    rng: random.Random = seeded_rng(f"exhaustive.P{ports}m{middle}")
    ins = [(getattr(dut, f"i__{n}__valid"), getattr(dut, f"i__{n}__ready"),
            getattr(dut, f"i__{n}__payload")) for n in range(ports)]
    outs = [(getattr(dut, f"o__{n}__valid"), getattr(dut, f"o__{n}__ready"),
             getattr(dut, f"o__{n}__payload")) for n in range(ports)]
    Clock(dut.clk, 10, unit="ns").start()
    dut.rst.value = 1
    for valid, _, _ in ins:
        valid.value = 0
    for _, ready, _ in outs:
        ready.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    edge, settled = RisingEdge(dut.clk), ReadOnly()
    await edge
    checked = configurations = flits = 0
    for config in legal_configurations(middle, ports):
        accepted = set(accepted_ports(config))
        data = [[rng.getrandbits(32)] for _ in range(ports)]
        expected = simulate(ports, middle, config, "int32", [np.array(d, dtype=np.uint32) for d in data])
        trees, problems = symbolic(config, sorted(accepted))
        assert not problems, (config.describe(), problems)
        dut.modes.value = config.to_int()
        for n, (valid, _, payload) in enumerate(ins):
            valid.value = 1
            payload.value = fmt.pack(data[n], last=1, tag=n)
        await settled
        assert int(dut.busy.value) == 0, f"busy before {config.describe()}"
        ready = [int(r.value) for _, r, _ in ins]
        want = [int(n in accepted) for n in range(ports)]
        assert ready == want, f"{config.describe()}: input ready {ready}, expected {want}"
        await edge   # the accepted flits enter
        for valid, _, _ in ins:
            valid.value = 0
        await ClockCycles(dut.clk, latency - 1)
        await settled
        for n, (valid, _, payload) in enumerate(outs):
            got = int(valid.value)
            if expected[n] is None:
                assert got == 0, f"{config.describe()}: output {n} offers a flit, expected none"
                continue
            assert got == 1, f"{config.describe()}: output {n} offers nothing after {latency} cycles"
            word = fmt.pack([int(expected[n][0])], last=1, tag=_leftmost_leaf(trees[n]))
            value = int(payload.value)
            assert value == word, (f"{config.describe()}: output {n} = {value:#x}, model {word:#x} "
                                   f"(inputs {data})")
            checked += 1
        flits += len(accepted)
        configurations += 1
        await edge   # the outputs leave (every output is ready)
    await settled
    assert int(dut.busy.value) == 0
    dut._log.info("%d configurations, %d input flits, %d output flits checked", configurations,
                  flits, checked)
    metrics.record(configurations=configurations, input_flits=flits, output_flits=checked)
