"""Configuration encoding: field layout, order, encode/decode, validation (docs/configuration.md)."""

import random

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.encoding import DemuxMode, MuxMode, check_size
from hdl.compiler import (Flow, InputMode, OutputMode, RDMode, SwitchConfig, config_bits, layout,
                          microswitch_count, parse_flows, wire_bits)


def test_wire_bits():
    assert [wire_bits(m) for m in (2, 3, 4, 5, 8, 9)] == [1, 2, 2, 3, 3, 4]


@pytest.mark.parametrize("ports,middle,count,bits", [
    (2, 2, 1, 4), (4, 2, 6, 26), (4, 3, 7, 38), (8, 3, 29, 166), (64, 3, 1087, 6458)])
def test_sizes(ports, middle, count, bits):
    assert microswitch_count(ports, middle) == count
    assert config_bits(ports, middle) == bits


def test_order_fred3_8():
    names = [s.name for s in layout(8, 3)]
    assert names[:4] == ["in[0]", "in[1]", "in[2]", "in[3]"]
    assert names[4:11] == ["mid[0].in[0]", "mid[0].in[1]", "mid[0].mid[0].rd", "mid[0].mid[1].rd",
                           "mid[0].mid[2].rd", "mid[0].out[0]", "mid[0].out[1]"]
    assert names[-4:] == ["out[0]", "out[1]", "out[2]", "out[3]"]
    offsets = [s.offset for s in layout(8, 3)]
    widths = [s.width for s in layout(8, 3)]
    assert offsets[0] == 0 and all(o + w == n for o, w, n in zip(offsets, widths, offsets[1:]))


def test_field_positions():
    # m = 3, w = 2: in0_en bit0, in0_wire bits 1-2, in1_en bit 3, in1_wire bits 4-5, reduce bit 6
    assert InputMode(in0_en=1, in0_wire=2).pack(3) == 0b0000101
    assert InputMode(in1_en=1, in1_wire=1).pack(3) == 0b0011000
    assert InputMode(1, 1, 1, 1, 1).pack(3) == 0b1011011
    assert OutputMode(out0_en=1, out0_wire=1, out1_en=1, out1_wire=2).pack(3) == 0b101011
    assert RDMode(out0=3, out1=0).pack(3) == 0b0011 and RDMode(1, 2).pack(2) == 0b1001


def test_worked_example_in_docs():
    config = SwitchConfig.from_modes(4, 3, {
        "in[0]": InputMode(1, 0, 1, 0, 1), "mid[0].rd": RDMode(1, 0), "out[0]": OutputMode(1, 0, 1, 0)})
    assert config.encode() == [0x24004049, 0x0]


def _random_mode(kind, middle, rng):
    while True:
        try:
            if kind in ("demux", "mux"):
                cls = DemuxMode if kind == "demux" else MuxMode
                en = rng.randrange(2)
                return cls(en, rng.randrange(middle) if en else 0)
            if kind == "rd":
                return RDMode(rng.randrange(4), rng.randrange(4))
            if kind == "input":
                e0, e1 = rng.randrange(2), rng.randrange(2)
                w0 = rng.randrange(middle) if e0 else 0
                w1 = rng.randrange(middle) if e1 else 0
                return InputMode(e0, w0, e1, w1, int(e0 and e1 and w0 == w1))
            e0, e1 = rng.randrange(2), rng.randrange(2)
            return OutputMode(e0, rng.randrange(middle) if e0 else 0, e1, rng.randrange(middle) if e1 else 0)
        except FredError:
            continue


@pytest.mark.parametrize("ports,middle", [(2, 2), (4, 2), (8, 3), (16, 4), (32, 3),
                                          (3, 2), (5, 3), (6, 3), (12, 3), (20, 4)])
@pytest.mark.parametrize("word_width", [32, 8, 7, 64])
def test_encode_decode_roundtrip(ports, middle, word_width):
    rng = random.Random(ports * 100 + middle + word_width)
    for _ in range(5):
        config = SwitchConfig(ports, middle,
                              tuple(_random_mode(s.kind, middle, rng) for s in layout(ports, middle)))
        words = config.encode(word_width)
        assert len(words) == -(-config.bit_width // word_width)
        assert all(0 <= w < (1 << word_width) for w in words)
        assert SwitchConfig.decode(words, ports=ports, middle=middle, word_width=word_width) == config
        for k in range(middle if ports > 2 else 0):
            assert config.subnetwork(k).modes == tuple(
                m for s, m in zip(config.slots, config.modes) if s.name.startswith(f"mid[{k}]."))


def test_idle_is_zero():
    assert SwitchConfig.idle(16, 3).encode() == [0] * 19


@pytest.mark.parametrize("build,message", [
    (lambda: InputMode(reduce=1, in0_en=1), "needs both"),
    (lambda: InputMode(1, 0, 1, 1, 1), "in0_wire == in1_wire"),
    (lambda: InputMode(1, 1, 1, 1, 0), "without reduce"),
    (lambda: InputMode(0, 1), "disabled"),
    (lambda: OutputMode(0, 2), "disabled"),
    (lambda: RDMode(3, 1), "sums"),
    (lambda: RDMode(4, 0), "out0"),
    (lambda: SwitchConfig.from_modes(4, 3, {"in[0]": InputMode(1, 3)}), "only 3 middle"),
    (lambda: SwitchConfig.from_modes(4, 3, {"in[5]": InputMode()}), "no microswitch named"),
    (lambda: SwitchConfig.from_modes(4, 3, {"in[0]": OutputMode()}), "needs InputMode"),
    (lambda: check_size(1, 3), "ports"),   # the RTL's and the compiler's validator: any P >= 2
    (lambda: check_size(4.0, 3), "integer"),
    (lambda: SwitchConfig.idle(1, 3), "ports must be >= 2"),
    (lambda: SwitchConfig.idle(8, 1), "middle"),
    (lambda: SwitchConfig.decode([0], ports=8, middle=3), "got 1 words"),
    (lambda: SwitchConfig.decode([0, 1 << 10], ports=4, middle=3), "padding"),
    (lambda: SwitchConfig.decode([0b0000111, 0], ports=4, middle=3), r"in\[0\]"),  # wire 3 >= m
])
def test_invalid(build, message):
    with pytest.raises(FredError, match=message):
        build()


def test_flow_normalises_and_validates():
    assert Flow(inputs=[2, 0], outputs={1}) == Flow(inputs=(0, 2), outputs=(1,))
    with pytest.raises(FredError, match="empty"):
        Flow(inputs=(), outputs=(1,))
    with pytest.raises(FredError, match="more than once"):
        Flow(inputs=(1, 1), outputs=(1,))
    with pytest.raises(FredError, match="negative"):
        Flow(inputs=(-1,), outputs=(1,))
    assert parse_flows("0,1,2>0,1,2; 3>4,5") == [Flow((0, 1, 2), (0, 1, 2)), Flow((3,), (4, 5))]
    assert parse_flows("0-3>0-3") == [Flow((0, 1, 2, 3), (0, 1, 2, 3))]
    with pytest.raises(FredError, match="INPUTS>OUTPUTS"):
        parse_flows("0,1")


def test_odd_order_and_fields():
    """Non-power-of-two P (compiler extension): the last port of an odd Fred_m(P) has a
    demux before and a mux after the middle subnetworks, each Fred_m(ceil(P/2))."""
    names = [s.name for s in layout(5, 3)]
    assert names[:3] == ["in[0]", "in[1]", "demux"] and names[-3:] == ["out[0]", "out[1]", "mux"]
    assert names[3:10] == ["mid[0].in[0]", "mid[0].demux", "mid[0].mid[0].rd", "mid[0].mid[1].rd",
                           "mid[0].mid[2].rd", "mid[0].out[0]", "mid[0].mux"]
    assert [s.width for s in layout(5, 3) if s.kind in ("demux", "mux")] == [3] * 8
    assert DemuxMode(1, 2).pack(3) == 0b101 and MuxMode.unpack(0b011, 3) == MuxMode(1, 1)
    assert [s.name for s in layout(6, 2)][:4] == ["in[0]", "in[1]", "in[2]", "mid[0].in[0]"]
    config = SwitchConfig.idle(12, 3)
    assert config.demux is None and config.subnetwork(1).ports == 6
    assert config.subnetwork(1).subnetwork(0).demux == DemuxMode()
    with pytest.raises(FredError, match="disabled"):
        DemuxMode(0, 1)
