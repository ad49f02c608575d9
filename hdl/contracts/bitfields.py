"""Bit layouts as data: one table per packed format, read by Python and by the RTL alike.

A :class:`BitLayout` is an ordered list of named fields laid out from the least significant bit
upwards, like an Amaranth ``StructLayout``. Every packed format of the project (the flit, each
microswitch mode, the configuration word) is written once, as a ``BitLayout``; the Python
packers and decoders are :meth:`BitLayout.pack` / :meth:`BitLayout.unpack` of that table, and the
RTL's ``StructLayout`` is made from the same table (:func:`hdl.designs.layouts.struct_layout`), so the
benches, the compiler and the hardware cannot disagree on an offset.

Pure Python (no Amaranth).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from hdl.contracts.errors import FredError

__all__ = ["Field", "BitLayout"]


@dataclass(frozen=True)
class Field:
    """One field: ``name``, ``width`` bits, starting at bit ``offset`` (LSB = 0)."""

    name: str
    width: int
    offset: int

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1


class BitLayout:
    """Named fields, LSB first.

    Parameters:
        name: what the layout is (used in error messages), e.g. ``"flit"``.
        fields: ``[(field name, width), ...]`` in order from bit 0 upwards; widths >= 1, names
            distinct.

    Members:
        fields: tuple of :class:`Field` with their offsets; ``width``: total bits.
    """

    __slots__ = ("name", "fields", "width", "_by_name")

    def __init__(self, name: str, fields: Iterable[tuple[str, int]]):
        self.name = name
        placed, offset = [], 0
        for field_name, width in fields:
            if isinstance(width, bool) or not isinstance(width, int) or width < 1:
                raise FredError(f"{name}: field {field_name!r} needs a width >= 1, got {width!r}")
            placed.append(Field(field_name, width, offset))
            offset += width
        names = [f.name for f in placed]
        if len(set(names)) != len(names):
            raise FredError(f"{name}: field names repeat: {names}")
        if not placed:
            raise FredError(f"{name}: a layout needs at least one field")
        self.fields = tuple(placed)
        self.width = offset
        self._by_name = {f.name: f for f in placed}

    def __getitem__(self, name: str) -> Field:
        try:
            return self._by_name[name]
        except KeyError:
            raise FredError(f"{self.name} has no field {name!r}; fields: "
                            f"{', '.join(self._by_name)}") from None

    def __iter__(self):
        return iter(self.fields)

    def __eq__(self, other) -> bool:
        return isinstance(other, BitLayout) and self.fields == other.fields

    def __hash__(self) -> int:
        return hash(self.fields)

    def __repr__(self) -> str:
        return f"BitLayout({self.name!r}, {[(f.name, f.width) for f in self.fields]})"

    def pack(self, **values) -> int:
        """The integer whose fields hold ``values`` (every field must be given, each must fit)."""
        missing = [f.name for f in self.fields if f.name not in values]
        unknown = sorted(set(values) - set(self._by_name))
        if missing or unknown:
            raise FredError(f"{self.name}: pack needs exactly the fields "
                            f"{', '.join(self._by_name)}"
                            + (f"; missing {', '.join(missing)}" if missing else "")
                            + (f"; unknown {', '.join(unknown)}" if unknown else ""))
        word = 0
        for f in self.fields:
            value = values[f.name]
            if isinstance(value, bool):
                value = int(value)
            value = int(value)
            if not 0 <= value <= f.mask:
                raise FredError(f"{self.name}.{f.name} = {value:#x} does not fit in {f.width} bits")
            word |= value << f.offset
        return word

    def unpack(self, word: int) -> dict[str, int]:
        """Inverse of :meth:`pack`; rejects a word wider than the layout."""
        word = int(word)
        if word < 0 or word >> self.width:
            raise FredError(f"{self.name}: {word:#x} does not fit in {self.width} bits")
        return {f.name: (word >> f.offset) & f.mask for f in self.fields}

    def get(self, word: int, name: str) -> int:
        """One field of ``word`` (no width check on the rest of the word)."""
        f = self[name]
        return (int(word) >> f.offset) & f.mask
