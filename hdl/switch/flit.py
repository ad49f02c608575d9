"""The flit format of the switch: ``lanes`` elements of one dtype plus framing.

A flit is ``StructLayout({"data": unsigned(lanes * width), "last": 1, "tag": unsigned(tag_width)})``,
fields LSB first (``data`` lane 0 at bit 0, then ``last``, then ``tag``). ``last`` marks the
final flit of a packet; ``tag`` is an opaque label that the switch carries unchanged (tests key
their scoreboards on it). A reduced flit carries the framing (``last``, ``tag``) of its ``in0``
operand (contract: docs/configuration.md).

Pure Python configuration only; no hardware here.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.lib import data
from amaranth.hdl import unsigned

from fred.errors import FredError
from hdl.dtypes import DType, get_dtype, pack_lanes, unpack_lanes

__all__ = ["FlitFormat"]


@dataclass(frozen=True)
class FlitFormat:
    """Parameters of a flit.

    Parameters (keyword-only, validated):
        dtype: element format name (``fp16``, ``bf16``, ``fp32``, ``int32``).
        lanes: elements per flit (>= 1).
        tag_width: bits of the ``tag`` framing field (>= 1).
    """

    dtype: str = "fp16"
    lanes: int = 1
    tag_width: int = 8

    def __init__(self, *, dtype: str = "fp16", lanes: int = 1, tag_width: int = 8):
        get_dtype(dtype)  # raises FredError naming the valid dtypes
        if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 1:
            raise FredError(f"lanes must be an integer >= 1, got {lanes!r}")
        if not isinstance(tag_width, int) or isinstance(tag_width, bool) or not 1 <= tag_width <= 64:
            raise FredError(f"tag_width must be an integer in 1..64, got {tag_width!r}")
        object.__setattr__(self, "dtype", get_dtype(dtype).name)
        object.__setattr__(self, "lanes", lanes)
        object.__setattr__(self, "tag_width", tag_width)

    @property
    def element(self) -> DType:
        return get_dtype(self.dtype)

    @property
    def data_width(self) -> int:
        return self.lanes * self.element.width

    @property
    def framing_layout(self) -> data.StructLayout:
        """The framing fields; the reduction unit carries them as its sideband."""
        return data.StructLayout({"last": 1, "tag": unsigned(self.tag_width)})

    @property
    def layout(self) -> data.StructLayout:
        return data.StructLayout({
            "data": unsigned(self.data_width),
            "last": 1,
            "tag": unsigned(self.tag_width),
        })

    @property
    def width(self) -> int:
        return self.data_width + 1 + self.tag_width

    def pack(self, lanes, *, last: int = 0, tag: int = 0) -> int:
        """Flit bit pattern from lane bit patterns (a sequence of ``lanes`` ints) and framing."""
        lanes = [int(x) for x in lanes]
        if len(lanes) != self.lanes:
            raise FredError(f"flit needs {self.lanes} lanes, got {len(lanes)}")
        if not 0 <= int(tag) < (1 << self.tag_width):
            raise FredError(f"tag {tag} does not fit in {self.tag_width} bits")
        word = pack_lanes(lanes, self.element.width)
        return word | (int(bool(last)) << self.data_width) | (int(tag) << (self.data_width + 1))

    def unpack(self, word: int) -> tuple[list[int], int, int]:
        """Inverse of :meth:`pack`: ``(lanes, last, tag)``."""
        word = int(word)
        if word < 0 or word >> self.width:
            raise FredError(f"flit {word:#x} does not fit in {self.width} bits")
        lanes = unpack_lanes(word & ((1 << self.data_width) - 1), self.element.width, self.lanes)
        last = (word >> self.data_width) & 1
        tag = word >> (self.data_width + 1)
        return lanes, last, tag
