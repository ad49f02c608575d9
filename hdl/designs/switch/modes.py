"""Microswitch mode layouts for the RTL, made from the compiler's tables.

The bit layout of every mode is the compiler's (``hdl.contracts.encoding``, one
:class:`~hdl.contracts.bitfields.BitLayout` per kind, documented in ``docs/configuration.md``); this
module only turns those tables into Amaranth ``StructLayout`` views:

* input microswitch  ``in0_en(1) in0_wire(w) in1_en(1) in1_wire(w) reduce(1)``  (LSB first)
* output microswitch ``out0_en(1) out0_wire(w) out1_en(1) out1_wire(w)``
* RD microswitch     ``out0(2) out1(2)``: 0 none, 1 in0, 2 in1, 3 in0 + in1
* demux / mux        ``en(1) wire(w)`` (odd P: the last port's way into / out of the middles)
"""

from __future__ import annotations

from amaranth.lib import data

from hdl.contracts.encoding import DemuxMode, InputMode, MuxMode, OutputMode, RDMode
from hdl.contracts.errors import FredError
from hdl.designs.layouts import struct_layout

__all__ = ["input_mode_layout", "output_mode_layout", "demux_mode_layout", "mux_mode_layout",
           "RD_MODE_LAYOUT", "mode_layout"]


def input_mode_layout(middle: int) -> data.StructLayout:
    return struct_layout(InputMode.layout(middle))


def output_mode_layout(middle: int) -> data.StructLayout:
    return struct_layout(OutputMode.layout(middle))


def demux_mode_layout(middle: int) -> data.StructLayout:
    return struct_layout(DemuxMode.layout(middle))


def mux_mode_layout(middle: int) -> data.StructLayout:
    return struct_layout(MuxMode.layout(middle))


RD_MODE_LAYOUT = struct_layout(RDMode.layout(2))


def mode_layout(kind: str, middle: int) -> data.StructLayout:
    """The StructLayout of a microswitch ``kind`` (``input``, ``output``, ``rd``, ``demux``,
    ``mux``)."""
    if kind == "input":
        return input_mode_layout(middle)
    if kind == "output":
        return output_mode_layout(middle)
    if kind == "rd":
        return RD_MODE_LAYOUT
    if kind == "demux":
        return demux_mode_layout(middle)
    if kind == "mux":
        return mux_mode_layout(middle)
    raise FredError(f"unknown microswitch kind {kind!r}")
