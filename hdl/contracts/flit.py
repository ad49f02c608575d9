"""The flit format of the switch: ``lanes`` elements of one dtype plus framing.

A flit is the :class:`~hdl.contracts.bitfields.BitLayout` ``data(lanes * width) last(1)
tag(tag_width)``, fields LSB first (``data`` lane 0 at bit 0, then ``last``, then ``tag``).
``last`` marks the final flit of a packet; ``tag`` is an opaque label that the switch carries
unchanged (tests key their scoreboards on it). A reduced flit carries the framing (``last``,
``tag``) of its ``in0`` operand (contract: docs/configuration.md).

Pure Python; the RTL's ``StructLayout`` is made from :attr:`FlitFormat.fields` by
:func:`hdl.designs.layouts.flit_layout`.
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.contracts.bitfields import BitLayout
from hdl.contracts.dtypes import DType, get_dtype, pack_lanes, unpack_lanes
from hdl.contracts.errors import FredError

__all__ = ["FlitFormat"]


@dataclass(frozen=True)
class FlitFormat:
    """Parameters of a flit.

    Parameters (keyword-only, validated):
        dtype: element format name (``fp16``, ``bf16``, ``fp32``, ``int32``).
        lanes: elements per flit (>= 1).
        tag_width: bits of the ``tag`` framing field (1..64).
    """

    dtype: str
    lanes: int
    tag_width: int

    def __init__(self, *, dtype: str, lanes: int, tag_width: int):
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
    def fields(self) -> BitLayout:
        """The flit: ``data last tag``, LSB first."""
        return BitLayout("flit", [("data", self.data_width), ("last", 1), ("tag", self.tag_width)])

    @property
    def framing(self) -> BitLayout:
        """The framing fields alone; the reduction unit carries them as its sideband."""
        return BitLayout("flit framing", [("last", 1), ("tag", self.tag_width)])

    @property
    def width(self) -> int:
        return self.fields.width

    def pack(self, lanes, *, last: int = 0, tag: int = 0) -> int:
        """Flit bit pattern from lane bit patterns (a sequence of ``lanes`` ints) and framing."""
        lanes = [int(x) for x in lanes]
        if len(lanes) != self.lanes:
            raise FredError(f"flit needs {self.lanes} lanes, got {len(lanes)}")
        return self.fields.pack(data=pack_lanes(lanes, self.element.width), last=int(bool(last)),
                                tag=tag)

    def unpack(self, word: int) -> tuple[list[int], int, int]:
        """Inverse of :meth:`pack`: ``(lanes, last, tag)``."""
        values = self.fields.unpack(word)
        return (unpack_lanes(values["data"], self.element.width, self.lanes), values["last"],
                values["tag"])
