"""Latency of the switch and its parts, computed from parameters (pure Python, no hardware).

These figures are the RTL's contract: every component exposes its latency as a property that
reads the functions here, the Amaranth-simulator tests and the cocotb benches measure it, and
the system model and the characterization use it without building anything.

* one lane's adder: :data:`FLOAT_ADDER_STAGES` registers for floating-point formats,
  :data:`INT_ADDER_STAGES` for integers (``hdl.reduction.FloatAdder`` / ``IntAdder``);
* the reduction unit: the adder plus its output register (:func:`reduction_latency`);
* an input or RD microswitch: the reduction latency (pass paths are delay-matched) plus its
  registered output buffer; an output microswitch: the buffer alone (:func:`microswitch_latency`);
* Fred_m(P): log2(P) input/RD stages and log2(P) - 1 output stages on every path
  (:func:`switch_latency`), the same for every path and configuration.
"""

from __future__ import annotations

from hdl.base.compiler.encoding import check_size
from hdl.base.dtypes import get_dtype
from hdl.base.errors import FredError

__all__ = ["FLOAT_ADDER_STAGES", "INT_ADDER_STAGES", "OUTPUT_REGISTER_LATENCY", "BUFFER_LATENCY",
           "adder_stages", "reduction_latency", "microswitch_latency", "switch_stages",
           "switch_latency"]

#: Registers in one lane of the floating-point adder (``hdl.reduction.FloatAdder.latency``).
FLOAT_ADDER_STAGES = 6
#: Registers in one lane of the integer adder (``hdl.reduction.IntAdder.latency``): a carry chain.
INT_ADDER_STAGES = 0
#: The reduction unit's output stream buffer.
OUTPUT_REGISTER_LATENCY = 1
#: A microswitch's registered output buffer (``hdl.stream_buffer.StreamBuffer.latency``).
BUFFER_LATENCY = 1


def adder_stages(dtype) -> int:
    """Pipeline registers of one lane's adder for ``dtype``."""
    return FLOAT_ADDER_STAGES if get_dtype(dtype).is_float else INT_ADDER_STAGES


def reduction_latency(dtype) -> int:
    """Cycles from the joint operand transfer into the reduction unit to the sum on its output."""
    return adder_stages(dtype) + OUTPUT_REGISTER_LATENCY


def microswitch_latency(kind: str, dtype) -> int:
    """Latency of an ``input``, ``rd`` or ``output`` microswitch (every path through it)."""
    if kind in ("input", "rd"):
        return reduction_latency(dtype) + BUFFER_LATENCY
    if kind == "output":
        return BUFFER_LATENCY
    raise FredError(f"unknown microswitch kind {kind!r}; expected input, rd or output")


def switch_stages(ports: int) -> int:
    """Microswitches on every port-to-port path of Fred_m(P): 2 log2(P) - 1."""
    check_size(ports, 2)
    return 2 * (ports.bit_length() - 1) - 1


def switch_latency(*, ports: int, middle: int, dtype) -> int:
    """Cycles from an input transfer to the flit (or sum) offered at the output, no backpressure:
    log2(P) input/RD stages and log2(P) - 1 output stages."""
    check_size(ports, middle)
    levels = ports.bit_length() - 1
    return (levels * microswitch_latency("input", dtype)
            + (levels - 1) * microswitch_latency("output", dtype))
