"""Bit layouts: one table per packed format, read by the Python packers and by the RTL.

The RTL's ``StructLayout`` s are made from the same :class:`BitLayout` tables the compiler, the
benches and the system model pack with; these tests pin the mechanism (same offsets, exact hand
values) rather than today's numbers.
"""

from __future__ import annotations

import pytest
from amaranth import Shape
from amaranth.lib import data

from hdl.contracts.bitfields import BitLayout
from hdl.contracts.encoding import DemuxMode, InputMode, MuxMode, OutputMode, RDMode
from hdl.contracts.config_port import config_word_layout
from hdl.contracts.errors import FredError
from hdl.contracts.flit import FlitFormat
from hdl.designs.layouts import flit_layout, framing_layout, struct_layout
from hdl.designs.switch.modes import RD_MODE_LAYOUT, input_mode_layout, output_mode_layout


def _offsets(layout: data.StructLayout) -> dict[str, tuple[int, int]]:
    return {name: (field.offset, Shape.cast(field.shape).width) for name, field in layout}


def _table(layout: BitLayout) -> dict[str, tuple[int, int]]:
    return {f.name: (f.offset, f.width) for f in layout}


def test_pack_and_unpack_by_hand():
    layout = BitLayout("example", [("data", 12), ("last", 1), ("tag", 7)])
    word = layout.pack(data=0xABC, last=1, tag=0x55)
    assert word == 0xABC | (1 << 12) | (0x55 << 13)
    assert layout.unpack(word) == {"data": 0xABC, "last": 1, "tag": 0x55}
    assert layout.get(word, "tag") == 0x55
    assert layout.width == 20 and layout["tag"].offset == 13


@pytest.mark.parametrize("call, message", [
    (lambda l: l.pack(a=16, b=0), r"example\.a = 0x10 does not fit in 4 bits"),
    (lambda l: l.pack(a=1), "missing b"),
    (lambda l: l.pack(a=1, b=2, c=3), "unknown c"),
    (lambda l: l.pack(a=-1, b=0), "does not fit"),
    (lambda l: l.unpack(1 << 8), "does not fit in 8 bits"),
    (lambda l: l["c"], "has no field 'c'"),
])
def test_bad_values_are_named(call, message):
    layout = BitLayout("example", [("a", 4), ("b", 4)])
    with pytest.raises(FredError, match=message):
        call(layout)


@pytest.mark.parametrize("fields, message", [
    ([("a", 0)], "width >= 1"), ([("a", 1), ("a", 2)], "repeat"), ([], "at least one field")])
def test_bad_layouts_are_refused(fields, message):
    with pytest.raises(FredError, match=message):
        BitLayout("bad", fields)


@pytest.mark.parametrize("middle", [2, 3, 4, 5, 8, 9])
def test_rtl_mode_layouts_are_the_compiler_tables(middle):
    assert _offsets(input_mode_layout(middle)) == _table(InputMode.layout(middle))
    assert _offsets(output_mode_layout(middle)) == _table(OutputMode.layout(middle))
    assert _offsets(RD_MODE_LAYOUT) == _table(RDMode.layout(middle))
    for cls in (InputMode, OutputMode, RDMode, DemuxMode, MuxMode):
        assert cls.width(middle) == cls.layout(middle).width


def test_mode_packing_by_hand():
    # docs/configuration.md: in[0] of Fred_3(4) reducing ports 0, 1 onto wire 0 is 0b1001001
    assert InputMode(True, 0, True, 0, True).pack(3) == 0b1001001
    assert OutputMode(True, 0, True, 0).pack(3) == 0b001001
    assert RDMode(out0=2, out1=1).pack(2) == 0b0110   # cross
    assert RDMode(out0=3, out1=3).pack(2) == 0b1111   # all-reduce of both ports
    assert InputMode.unpack(0b1001001, 3) == InputMode(True, 0, True, 0, True)


@pytest.mark.parametrize("dtype, lanes, tag_width", [("fp16", 1, 8), ("int32", 4, 16), ("bf16", 3, 5)])
def test_flit_layout_is_the_flit_table(dtype, lanes, tag_width):
    flit = FlitFormat(dtype=dtype, lanes=lanes, tag_width=tag_width)
    assert _offsets(flit_layout(flit)) == _table(flit.fields)
    assert _offsets(framing_layout(flit)) == _table(flit.framing)
    assert flit_layout(flit).size == flit.width == flit.data_width + 1 + tag_width
    lanes_in = list(range(1, lanes + 1))
    assert flit.unpack(flit.pack(lanes_in, last=1, tag=3)) == (lanes_in, 1, 3)


@pytest.mark.parametrize("phases, width", [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3), (256, 8)])
def test_config_word_layout(phases, width):
    layout = config_word_layout(phases)
    assert _table(layout) == {"data": (0, 32), "last": (32, 1), "phase": (33, width)}
    assert _offsets(struct_layout(layout)) == _table(layout)
    assert layout.pack(data=5, last=1, phase=phases - 1) == 5 | 1 << 32 | (phases - 1) << 33
