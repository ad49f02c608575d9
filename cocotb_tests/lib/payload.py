"""Pack and unpack stream payloads made of named bit fields (LSB first, like Amaranth layouts)."""

from __future__ import annotations

__all__ = ["PayloadCodec"]


class PayloadCodec:
    """Fields ``[(name, width), ...]`` laid out from the least significant bit upwards.

    ``PayloadCodec.from_layout(layout)`` takes an Amaranth ``StructLayout`` so the bench and
    the RTL cannot disagree on offsets.
    """

    def __init__(self, fields):
        self.fields = []
        offset = 0
        for name, width in fields:
            if width <= 0:
                raise ValueError(f"field {name!r}: width must be positive, got {width}")
            self.fields.append((name, offset, width))
            offset += width
        self.width = offset

    @classmethod
    def from_layout(cls, layout) -> "PayloadCodec":
        from amaranth import Shape
        from amaranth.lib import data
        layout = data.Layout.cast(layout)
        items = sorted(((name, field.offset, Shape.cast(field.shape).width)
                        for name, field in layout), key=lambda item: item[1])
        codec = cls.__new__(cls)
        codec.fields = items
        codec.width = layout.size
        return codec

    def pack(self, **values) -> int:
        unknown = set(values) - {name for name, _, _ in self.fields}
        if unknown:
            raise ValueError(f"unknown payload fields {sorted(unknown)}")
        word = 0
        for name, offset, width in self.fields:
            value = int(values.get(name, 0))
            if not 0 <= value < (1 << width):
                raise ValueError(f"field {name!r}: {value:#x} does not fit in {width} bits")
            word |= value << offset
        return word

    def unpack(self, word: int) -> dict:
        word = int(word)
        return {name: (word >> offset) & ((1 << width) - 1) for name, offset, width in self.fields}
