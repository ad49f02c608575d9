"""The port plumbing every microswitch repeats: gated inputs and buffered outputs.

Two helpers, not components: each adds statements and one submodule to the caller's module in
the order the caller asks, so the generated Verilog is the same as if written out in place.
"""

from __future__ import annotations

from amaranth.lib import wiring

from hdl.designs.stream_buffer import StreamBuffer

__all__ = ["gate_input", "buffer_output"]


def gate_input(m, port, lane_in, enable) -> None:
    """Connect input stream ``port`` to ``lane_in`` only while ``enable``: a disabled input is
    held at its port (``ready`` low), so no flit enters and gets stuck inside."""
    m.d.comb += [
        lane_in.valid.eq(port.valid & enable),
        lane_in.payload.eq(port.payload),
        port.ready.eq(lane_in.ready & enable),
    ]


def buffer_output(m, source, port, *, name: str, layout):
    """``source`` -> a registered :class:`StreamBuffer` (submodule ``name``) -> output stream
    ``port`` (a port of the caller, connected flipped). Returns the buffer's busy term (it holds
    a flit or cannot take one), which the caller ORs into its ``busy``. Latency: 1 cycle
    (``hdl.contracts.timing.BUFFER_LATENCY``)."""
    buffer = m.submodules[name] = StreamBuffer(layout)
    wiring.connect(m, source, buffer.i)
    wiring.connect(m, buffer.o, wiring.flipped(port))
    return buffer.o.valid | ~buffer.i.ready
