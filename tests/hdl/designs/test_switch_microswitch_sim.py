"""Every microswitch mode in Amaranth's simulator: routing, broadcast, reduce, blocking, latency
(input, output and RD microswitches, and the last port's demux and mux of an odd Fred_m(P)).

Fast tests (seconds): int32 and fp16 flits with the real ReductionUnit, random idle cycles and
backpressure; each output is compared with what the mode must produce, bit for bit.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cocotb_tests.lib.seeds import seeded_rng
from hdl.contracts.encoding import DemuxMode, InputMode, MuxMode, OutputMode, RDMode
from hdl.contracts.dtypes import get_dtype
from hdl.contracts.flit import FlitFormat
from hdl.designs.switch import Demux, InputMicroswitch, Mux, OutputMicroswitch, RDMicroswitch
from hdl.designs.switch.select_fork import SelectFork


FLITS = 12


def _packets(fmt: FlitFormat, rng, *, tag_base: int, count: int = FLITS):
    """``count`` random flits: (packed word, lanes, last, tag)."""
    dt = fmt.element
    items = []
    for n in range(count):
        lanes = [int(x) for x in dt.random_bits(np.random.default_rng(rng.getrandbits(32)), fmt.lanes)]
        last = int(n == count - 1)
        tag = (tag_base + n) % (1 << fmt.tag_width)
        items.append((fmt.pack(lanes, last=last, tag=tag), lanes, last, tag))
    return items


def _sum_flits(fmt: FlitFormat, a_items, b_items):
    dt = fmt.element
    out = []
    for (_, la, last, tag), (_, lb, _, _) in zip(a_items, b_items):
        lanes = [int(x) for x in dt.add(la, lb)]
        out.append(fmt.pack(lanes, last=last, tag=tag))  # framing of in0
    return out


def _payloads(received):
    return [payload for _, payload in received]


RD_LEGAL = [(a, b) for a, b in itertools.product(range(4), repeat=2)
            if not (3 in (a, b) and ({a, b} & {1, 2}))]


RD_CASES = [("int32", a, b) for a, b in RD_LEGAL] + [("fp16", a, b) for a, b in RD_LEGAL if 3 in (a, b)]


@pytest.mark.parametrize("dtype,out0,out1", RD_CASES)
def test_rd_microswitch_every_legal_mode(dtype, out0, out1, run_streams):
    fmt = FlitFormat(dtype=dtype, lanes=2, tag_width=8)
    rng = seeded_rng(f"rd.{dtype}.{out0}{out1}")
    dut = RDMicroswitch(flit=fmt)
    in0, in1 = _packets(fmt, rng, tag_base=0), _packets(fmt, rng, tag_base=100)
    result = run_streams(dut, inputs={"in0": (dut.in0, [w for w, *_ in in0]),
                                      "in1": (dut.in1, [w for w, *_ in in1])},
                         outputs={"out0": dut.out0, "out1": dut.out1},
                         settings=[(dut.mode, RDMode(out0, out1).pack(2))],
                         idle=0.3, backpressure=0.3, rng=rng, max_cycles=600)
    source = {0: [], 1: [w for w, *_ in in0], 2: [w for w, *_ in in1], 3: _sum_flits(fmt, in0, in1)}
    assert _payloads(result["received"]["out0"]) == source[out0]
    assert _payloads(result["received"]["out1"]) == source[out1]
    # an input that no output uses is never consumed (flits wait, never dropped)
    used0 = {1, 3} & {out0, out1}
    used1 = {2, 3} & {out0, out1}
    assert len(result["sent"]["in0"]) == (FLITS if used0 else 0)
    assert len(result["sent"]["in1"]) == (FLITS if used1 else 0)


def _input_modes(middle):
    modes = [InputMode()]
    for k in range(middle):
        modes.append(InputMode(True, k, False, 0))
        modes.append(InputMode(False, 0, True, k))
        modes.append(InputMode(True, k, True, k, reduce=True))
    for k0, k1 in itertools.permutations(range(middle), 2):
        modes.append(InputMode(True, k0, True, k1))
    return modes


@pytest.mark.parametrize("middle", [2, 3])
def test_input_microswitch_every_mode(middle, run_streams):
    fmt = FlitFormat(dtype="int32", lanes=1, tag_width=8)
    rng = seeded_rng(f"input.{middle}")
    dut = InputMicroswitch(flit=fmt, middle=middle)
    # one simulation per mode, on the same component (modes change only when drained)
    for mode in _input_modes(middle):
        in0, in1 = _packets(fmt, rng, tag_base=0), _packets(fmt, rng, tag_base=50)
        result = run_streams(dut, inputs={"in0": (dut.in0, [w for w, *_ in in0]),
                                          "in1": (dut.in1, [w for w, *_ in in1])},
                             outputs={f"w{k}": dut.wire[k] for k in range(middle)},
                             settings=[(dut.mode, mode.pack(middle))],
                             idle=0.25, backpressure=0.35, rng=rng, max_cycles=500)
        expected = {k: [] for k in range(middle)}
        if mode.reduce:
            expected[mode.in0_wire] = _sum_flits(fmt, in0, in1)
        else:
            if mode.in0_en:
                expected[mode.in0_wire] = [w for w, *_ in in0]
            if mode.in1_en:
                expected[mode.in1_wire] = [w for w, *_ in in1]
        for k in range(middle):
            assert _payloads(result["received"][f"w{k}"]) == expected[k], (mode, k)
        assert len(result["sent"]["in0"]) == (FLITS if mode.in0_en else 0), mode
        assert len(result["sent"]["in1"]) == (FLITS if mode.in1_en else 0), mode


def _output_modes(middle):
    modes = [OutputMode()]
    for k in range(middle):
        modes += [OutputMode(True, k, False, 0), OutputMode(False, 0, True, k),
                  OutputMode(True, k, True, k)]  # broadcast
    for k0, k1 in itertools.permutations(range(middle), 2):
        modes.append(OutputMode(True, k0, True, k1))
    return modes


@pytest.mark.parametrize("middle", [2, 3])
def test_output_microswitch_every_mode(middle, run_streams):
    fmt = FlitFormat(dtype="fp16", lanes=1, tag_width=8)
    rng = seeded_rng(f"output.{middle}")
    dut = OutputMicroswitch(flit=fmt, middle=middle)
    for mode in _output_modes(middle):
        wires = [_packets(fmt, rng, tag_base=30 * k) for k in range(middle)]
        result = run_streams(dut, inputs={f"w{k}": (dut.wire[k], [w for w, *_ in wires[k]])
                                          for k in range(middle)},
                             outputs={"out0": dut.out0, "out1": dut.out1},
                             settings=[(dut.mode, mode.pack(middle))],
                             idle=0.25, backpressure=0.5, rng=rng, max_cycles=500)
        for j in (0, 1):
            en, wire = getattr(mode, f"out{j}_en"), getattr(mode, f"out{j}_wire")
            expected = [w for w, *_ in wires[wire]] if en else []
            assert _payloads(result["received"][f"out{j}"]) == expected, (mode, j)
        for k in range(middle):
            taken = (mode.out0_en and mode.out0_wire == k) or (mode.out1_en and mode.out1_wire == k)
            assert len(result["sent"][f"w{k}"]) == (FLITS if taken else 0), (mode, k)


def _single_wire_modes(cls, middle):
    return [cls()] + [cls(True, k) for k in range(middle)]


@pytest.mark.parametrize("middle", [2, 3, 4])
@pytest.mark.parametrize("dtype", ["int32", "fp16"])
def test_demux_every_mode(middle, dtype, run_streams):
    """The last port of an odd Fred_m(P) onto one of m wires; disabled: never consumed."""
    fmt = FlitFormat(dtype=dtype, lanes=2, tag_width=8)
    rng = seeded_rng(f"demux.{middle}.{dtype}")
    dut = Demux(flit=fmt, middle=middle)
    for mode in _single_wire_modes(DemuxMode, middle):
        items = [w for w, *_ in _packets(fmt, rng, tag_base=0)]
        result = run_streams(dut, inputs={"port": (dut.port, items)},
                             outputs={f"w{k}": dut.wire[k] for k in range(middle)},
                             settings=[(dut.mode, mode.pack(middle))],
                             idle=0.3, backpressure=0.4, rng=rng, max_cycles=500)
        for k in range(middle):
            expected = items if mode.en and mode.wire == k else []
            assert _payloads(result["received"][f"w{k}"]) == expected, (mode, k)
        assert len(result["sent"]["port"]) == (FLITS if mode.en else 0), mode


@pytest.mark.parametrize("middle", [2, 3, 4])
def test_mux_every_mode(middle, run_streams):
    """One of m wires onto the last port of an odd Fred_m(P); unselected wires wait."""
    fmt = FlitFormat(dtype="fp16", lanes=1, tag_width=8)
    rng = seeded_rng(f"mux.{middle}")
    dut = Mux(flit=fmt, middle=middle)
    for mode in _single_wire_modes(MuxMode, middle):
        wires = [[w for w, *_ in _packets(fmt, rng, tag_base=30 * k)] for k in range(middle)]
        result = run_streams(dut, inputs={f"w{k}": (dut.wire[k], wires[k]) for k in range(middle)},
                             outputs={"port": dut.port}, settings=[(dut.mode, mode.pack(middle))],
                             idle=0.3, backpressure=0.4, rng=rng, max_cycles=500)
        assert _payloads(result["received"]["port"]) == (wires[mode.wire] if mode.en else []), mode
        for k in range(middle):
            taken = mode.en and mode.wire == k
            assert len(result["sent"][f"w{k}"]) == (FLITS if taken else 0), (mode, k)


def test_broadcast_consumes_each_flit_once_after_both_outputs_took_it(run_streams):
    """The fork alone (no buffers): out1 stalls often; out0 must not take a flit twice, and the
    input flit is consumed exactly in the cycle the later of the two outputs takes it."""
    rng = seeded_rng("fork.broadcast.stall")
    dut = SelectFork(16, inputs=1, outputs=2)
    items = list(range(1, 41))
    result = run_streams(dut, inputs={"i": (dut.i[0], items)},
                         outputs={"o0": dut.o[0], "o1": dut.o[1]},
                         settings=[(dut.enable, 0b11), (dut.select[0], 0), (dut.select[1], 0)],
                         backpressure=0.6, rng=rng, max_cycles=2000)
    assert _payloads(result["received"]["o0"]) == items
    assert _payloads(result["received"]["o1"]) == items
    for n, consumed in enumerate(result["sent"]["i"]):
        taken = [result["received"][o][n][0] for o in ("o0", "o1")]
        assert consumed == max(taken)
    assert any(a != b for (a, _), (b, _) in zip(result["received"]["o0"], result["received"]["o1"])), \
        "the outputs never took a flit in different cycles: the pending mask was not exercised"


@pytest.mark.parametrize("dtype", ["int32", "fp16"])
def test_microswitch_latency_equals_property_and_full_throughput(dtype, run_streams):
    fmt = FlitFormat(dtype=dtype, lanes=1, tag_width=8)
    rng = seeded_rng("latency")
    cases = []
    rd = RDMicroswitch(flit=fmt)
    cases.append((rd, {"in0": rd.in0, "in1": rd.in1}, {"out0": rd.out0, "out1": rd.out1},
                  [(rd.mode, RDMode(3, 3).pack(2))]))
    ims = InputMicroswitch(flit=fmt, middle=3)
    cases.append((ims, {"in0": ims.in0, "in1": ims.in1}, {f"w{k}": ims.wire[k] for k in range(3)},
                  [(ims.mode, InputMode(True, 2, True, 0).pack(3))]))
    oms = OutputMicroswitch(flit=fmt, middle=3)
    cases.append((oms, {f"w{k}": oms.wire[k] for k in range(3)}, {"out0": oms.out0, "out1": oms.out1},
                  [(oms.mode, OutputMode(True, 1, True, 1).pack(3))]))
    demux = Demux(flit=fmt, middle=3)
    cases.append((demux, {"port": demux.port}, {f"w{k}": demux.wire[k] for k in range(3)},
                  [(demux.mode, DemuxMode(True, 2).pack(3))]))
    mux = Mux(flit=fmt, middle=3)
    cases.append((mux, {"w1": mux.wire[1]}, {"port": mux.port}, [(mux.mode, MuxMode(True, 1).pack(3))]))
    # the demux and mux stand beside an input and an output microswitch: same latency
    assert demux.latency == ims.latency and mux.latency == oms.latency
    for dut, ins, outs, settings in cases:
        n = 50
        inputs = {name: (s, [fmt.pack([i], tag=i % 256) for i in range(n)]) for name, s in ins.items()}
        result = run_streams(dut, inputs=inputs, outputs=outs, settings=settings, rng=rng)
        sent = [c for c in result["sent"].values() if c]
        got = [r for r in result["received"].values() if r]
        assert got, type(dut).__name__
        first_in = min(c[0] for c in sent)
        for received in got:
            cycles = [c for c, _ in received]
            assert len(cycles) == n
            assert cycles[0] - first_in == dut.latency, type(dut).__name__
            assert cycles[-1] - cycles[0] == n - 1, "not one flit per cycle"
