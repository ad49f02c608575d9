"""Latency of the switch and its parts, computed from parameters (pure Python, no hardware).

These figures are the RTL's contract: every component exposes its latency as a property that
reads the functions here, the Amaranth-simulator tests and the cocotb benches measure it, and
the system model and the characterization use it without building anything.

* one lane's adder: :data:`FLOAT_ADDER_STAGES` registers for floating-point formats,
  :data:`INT_ADDER_STAGES` for integers (``hdl.designs.reduction.FloatAdder`` / ``IntAdder``);
* the reduction unit: the adder plus its output register (:func:`reduction_latency`);
* an input or RD microswitch: the reduction latency (pass paths are delay-matched) plus its
  registered output buffer; an output microswitch: the buffer alone (:func:`microswitch_latency`);
  an odd P's last-port demux is delayed to match an input microswitch, its mux matches an
  output microswitch;
* Fred_m(P): L = ceil(log2 P) levels (:func:`switch_levels`; Fred_m(2) is one, Fred_m(P) is
  one more than its Fred_m(ceil(P/2)) middles), so L input/RD stages and L - 1 output stages on
  every path (:func:`switch_latency`), the same for every path and configuration.
"""

from __future__ import annotations

from hdl.contracts.encoding import check_size, layout
from hdl.contracts.dtypes import get_dtype
from hdl.contracts.errors import FredError

__all__ = ["FLOAT_ADDER_STAGES", "INT_ADDER_STAGES", "OUTPUT_REGISTER_LATENCY", "BUFFER_LATENCY",
           "adder_stages", "reduction_latency", "microswitch_latency", "switch_levels",
           "switch_stages", "switch_latency", "microswitch_offsets"]

#: Registers in one lane of the floating-point adder (``hdl.designs.reduction.FloatAdder.latency``).
FLOAT_ADDER_STAGES = 6
#: Registers in one lane of the integer adder (``hdl.designs.reduction.IntAdder.latency``): a carry chain.
INT_ADDER_STAGES = 0
#: The reduction unit's output stream buffer.
OUTPUT_REGISTER_LATENCY = 1
#: A microswitch's registered output buffer (``hdl.designs.stream_buffer.StreamBuffer.latency``).
BUFFER_LATENCY = 1


def adder_stages(dtype) -> int:
    """Pipeline registers of one lane's adder for ``dtype``."""
    return FLOAT_ADDER_STAGES if get_dtype(dtype).is_float else INT_ADDER_STAGES


def reduction_latency(dtype) -> int:
    """Cycles from the joint operand transfer into the reduction unit to the sum on its output."""
    return adder_stages(dtype) + OUTPUT_REGISTER_LATENCY


def microswitch_latency(kind: str, dtype) -> int:
    """Latency of an ``input``, ``rd``, ``output``, ``demux`` or ``mux`` microswitch (every
    path through it). The last port's demux is delayed to match an input microswitch and its
    mux matches an output microswitch, so that every port-to-port path has one latency."""
    if kind in ("input", "rd", "demux"):
        return reduction_latency(dtype) + BUFFER_LATENCY
    if kind in ("output", "mux"):
        return BUFFER_LATENCY
    raise FredError(f"unknown microswitch kind {kind!r}; expected input, rd, output, demux or mux")


def switch_levels(ports: int) -> int:
    """Recursion levels of Fred_m(P), ceil(log2 P): Fred_m(2) has one, Fred_m(P) one more than
    its middles Fred_m(ceil(P/2)) (log2 P for powers of two)."""
    check_size(ports, 2)
    return (ports - 1).bit_length()


def switch_stages(ports: int) -> int:
    """Microswitches on every port-to-port path of Fred_m(P): 2 ceil(log2 P) - 1."""
    return 2 * switch_levels(ports) - 1


def switch_latency(*, ports: int, middle: int, dtype) -> int:
    """Cycles from an input transfer to the flit (or sum) offered at the output, no backpressure:
    L = ceil(log2 P) input/RD stages and L - 1 output stages (odd P: the last port's demux and
    mux are delay-matched to them)."""
    check_size(ports, middle)
    levels = switch_levels(ports)
    return (levels * microswitch_latency("input", dtype)
            + (levels - 1) * microswitch_latency("output", dtype))


def microswitch_offsets(*, ports: int, middle: int, dtype) -> tuple[int, ...]:
    """Per microswitch of Fred_m(P), in configuration order (``hdl.contracts.encoding.layout``):
    the cycles from a flit's transfer into the switch to its transfer into that microswitch, no
    backpressure (every path to it is delay-matched, so one figure each). An input, RD or
    demux microswitch then reads its mode again :func:`reduction_latency` cycles later (where
    its pass line or adder hands the flit to its wires); an output or mux reads it once.
    The packet switch's shared flows delay each microswitch's mode by this offset, so that a
    flit sees, everywhere, the modes of the cycle it entered (docs/switch.md, "Shared stored
    flows")."""
    check_size(ports, middle)
    step = microswitch_latency("input", dtype)
    offsets = []
    for slot in layout(ports, middle):
        *mids, own = slot.name.split(".")
        sub = ports
        for _ in mids:
            sub = (sub + 1) // 2
        offset = step * len(mids)
        if slot.kind in ("output", "mux"):
            offset += step + switch_latency(ports=(sub + 1) // 2, middle=middle, dtype=dtype)
        offsets.append(offset)
    return tuple(offsets)
