"""Microswitch mode layouts and where each microswitch's mode sits in the configuration vector.

Pure Python configuration (no hardware). The bit layout is the shared contract owned by the
compiler (``hdl.compiler.encoding``, ``docs/configuration.md``); this module gives the RTL the
same layout as Amaranth ``StructLayout`` views, and tests check it against the compiler's encoder.

Fred_m(P), P a power of two >= 2, r = P/2, ``w = max(1, ceil(log2(m)))`` bits per wire index:

* input microswitch  ``in0_en(1) in0_wire(w) in1_en(1) in1_wire(w) reduce(1)``  (LSB first)
* output microswitch ``out0_en(1) out0_wire(w) out1_en(1) out1_wire(w)``
* RD microswitch     ``out0(2) out1(2)``: 0 none, 1 in0, 2 in1, 3 in0 + in1

Order in the vector, recursively: Fred_m(2) = [rd];
Fred_m(P) = [in[0..r-1]] + mid[0] + ... + mid[m-1] + [out[0..r-1]].
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from amaranth.hdl import unsigned
from amaranth.lib import data

from fred.errors import FredError

__all__ = ["wire_index_width", "input_mode_layout", "output_mode_layout", "RD_MODE_LAYOUT",
           "MicroswitchSlot", "config_slots", "config_bits", "config_words", "check_geometry",
           "RD_NONE", "RD_IN0", "RD_IN1", "RD_SUM"]

RD_NONE, RD_IN0, RD_IN1, RD_SUM = 0, 1, 2, 3


def check_geometry(*, ports, middle) -> None:
    """Raise FredError unless ``ports`` is a power of two >= 2 and ``middle`` an integer >= 2."""
    if not isinstance(ports, int) or isinstance(ports, bool) or ports < 2 or ports & (ports - 1):
        raise FredError(f"ports must be a power of two >= 2, got {ports!r}")
    if not isinstance(middle, int) or isinstance(middle, bool) or middle < 2:
        raise FredError(f"middle (number of middle subnetworks m) must be an integer >= 2, got {middle!r}")


def wire_index_width(middle: int) -> int:
    """Bits of a wire index: ``max(1, ceil(log2(m)))``."""
    return max(1, (middle - 1).bit_length())


def input_mode_layout(middle: int) -> data.StructLayout:
    w = wire_index_width(middle)
    return data.StructLayout({"in0_en": 1, "in0_wire": unsigned(w),
                              "in1_en": 1, "in1_wire": unsigned(w), "reduce": 1})


def output_mode_layout(middle: int) -> data.StructLayout:
    w = wire_index_width(middle)
    return data.StructLayout({"out0_en": 1, "out0_wire": unsigned(w),
                              "out1_en": 1, "out1_wire": unsigned(w)})


RD_MODE_LAYOUT = data.StructLayout({"out0": 2, "out1": 2})


@dataclass(frozen=True)
class MicroswitchSlot:
    """One microswitch's mode field in the configuration vector."""

    name: str     #: e.g. ``in[0]``, ``mid[1].out[0]``, ``mid[0].mid[1].rd``
    kind: str     #: ``input``, ``output`` or ``rd``
    offset: int   #: first bit (LSB) in the vector
    width: int


@lru_cache(maxsize=None)
def config_slots(ports: int, middle: int) -> tuple[MicroswitchSlot, ...]:
    """Every microswitch of Fred_middle(ports) in configuration order, with its bit offset."""
    check_geometry(ports=ports, middle=middle)
    slots: list[MicroswitchSlot] = []
    in_width = input_mode_layout(middle).size
    out_width = output_mode_layout(middle).size

    def walk(p: int, prefix: str, offset: int) -> int:
        if p == 2:
            slots.append(MicroswitchSlot(prefix + "rd", "rd", offset, RD_MODE_LAYOUT.size))
            return offset + RD_MODE_LAYOUT.size
        r = p // 2
        for u in range(r):
            slots.append(MicroswitchSlot(f"{prefix}in[{u}]", "input", offset, in_width))
            offset += in_width
        for k in range(middle):
            offset = walk(r, f"{prefix}mid[{k}].", offset)
        for v in range(r):
            slots.append(MicroswitchSlot(f"{prefix}out[{v}]", "output", offset, out_width))
            offset += out_width
        return offset

    walk(ports, "", 0)
    return tuple(slots)


def config_bits(ports: int, middle: int) -> int:
    """Total bits of one phase's configuration."""
    last = config_slots(ports, middle)[-1]
    return last.offset + last.width


def config_words(ports: int, middle: int, word_width: int = 32) -> int:
    """Words of ``word_width`` bits one phase takes (the last one zero-padded)."""
    return -(-config_bits(ports, middle) // word_width)
