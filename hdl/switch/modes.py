"""Microswitch mode layouts and where each microswitch's mode sits in the configuration vector.

Pure Python configuration (no hardware). The bit layout is the shared contract owned by the
compiler (``hdl.compiler.encoding``, ``docs/configuration.md``): the order and offsets come from
its :func:`~hdl.compiler.encoding.layout`; this module adds the same fields as Amaranth
``StructLayout`` views for the RTL (tests check they agree with the compiler's ``pack``).

Fred_m(P), P a power of two >= 2, r = P/2, ``w = max(1, ceil(log2(m)))`` bits per wire index:

* input microswitch  ``in0_en(1) in0_wire(w) in1_en(1) in1_wire(w) reduce(1)``  (LSB first)
* output microswitch ``out0_en(1) out0_wire(w) out1_en(1) out1_wire(w)``
* RD microswitch     ``out0(2) out1(2)``: 0 none, 1 in0, 2 in1, 3 in0 + in1

Order in the vector, recursively: Fred_m(2) = [rd];
Fred_m(P) = [in[0..r-1]] + mid[0] + ... + mid[m-1] + [out[0..r-1]].
"""

from __future__ import annotations

from amaranth.hdl import unsigned
from amaranth.lib import data

from fred.errors import FredError
from hdl.compiler.encoding import (DEFAULT_WORD_WIDTH, RD_IN0, RD_IN1, RD_NONE, RD_SUM, check_size,
                                   config_bits, layout, wire_bits)

__all__ = ["wire_bits", "input_mode_layout", "output_mode_layout", "RD_MODE_LAYOUT", "mode_layout",
           "layout", "config_bits", "config_words", "check_size",
           "RD_NONE", "RD_IN0", "RD_IN1", "RD_SUM"]


def input_mode_layout(middle: int) -> data.StructLayout:
    w = wire_bits(middle)
    return data.StructLayout({"in0_en": 1, "in0_wire": unsigned(w),
                              "in1_en": 1, "in1_wire": unsigned(w), "reduce": 1})


def output_mode_layout(middle: int) -> data.StructLayout:
    w = wire_bits(middle)
    return data.StructLayout({"out0_en": 1, "out0_wire": unsigned(w),
                              "out1_en": 1, "out1_wire": unsigned(w)})


RD_MODE_LAYOUT = data.StructLayout({"out0": 2, "out1": 2})


def config_words(ports: int, middle: int, word_width: int = DEFAULT_WORD_WIDTH) -> int:
    """Words of ``word_width`` bits one phase takes (the last one zero-padded)."""
    return -(-config_bits(ports, middle) // word_width)


def mode_layout(kind: str, middle: int) -> data.StructLayout:
    """The StructLayout of a microswitch ``kind`` (``input``, ``output``, ``rd``)."""
    if kind == "input":
        return input_mode_layout(middle)
    if kind == "output":
        return output_mode_layout(middle)
    if kind == "rd":
        return RD_MODE_LAYOUT
    raise FredError(f"unknown microswitch kind {kind!r}")
