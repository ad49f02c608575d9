"""Amaranth ``StructLayout`` s made from the base's bit-layout tables.

Each packed format is written once, as a :class:`hdl.contracts.bitfields.BitLayout`; the RTL views it
through :func:`struct_layout`, so hardware and Python packers share their offsets by
construction. Field shapes are ``unsigned(width)``, in the table's order (LSB first).
"""

from __future__ import annotations

from amaranth.hdl import unsigned
from amaranth.lib import data

from hdl.contracts.bitfields import BitLayout
from hdl.contracts.flit import FlitFormat

__all__ = ["struct_layout", "flit_layout", "chunked_flit_layout", "framing_layout"]


def struct_layout(layout: BitLayout) -> data.StructLayout:
    """The ``StructLayout`` with the same fields, widths and offsets as ``layout``."""
    return data.StructLayout({f.name: unsigned(f.width) for f in layout})


def flit_layout(flit: FlitFormat) -> data.StructLayout:
    """A flit: ``data last tag`` (:attr:`FlitFormat.fields`)."""
    return struct_layout(flit.fields)


def chunked_flit_layout(flit: FlitFormat) -> data.StructLayout:
    """A flit on its way from an NPU engine to its packetizer through a pacer: ``data last
    tag`` and ``cut`` (the flit ends its chunk, so it ends a packet: the engine's
    ``chunk_end``, docs/fabric_rtl.md, "Four DP rings across the one-port uplinks")."""
    return data.StructLayout({**flit_layout(flit).members, "cut": unsigned(1)})


def framing_layout(flit: FlitFormat) -> data.StructLayout:
    """The flit's framing ``last tag``, carried by the reduction unit as its sideband."""
    return struct_layout(flit.framing)
