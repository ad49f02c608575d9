"""Stage count and latency of Fred_m(P) without building the switch (pure Python)."""

from __future__ import annotations

from .delay_line import BUFFER_LATENCY
from .flit import FlitFormat
from .modes import check_size

__all__ = ["reduction_latency", "switch_stages", "switch_latency"]


def reduction_latency(*, dtype: str, lanes: int = 1, reduction=None) -> int:
    """Latency of the reduction unit the switch instantiates for ``dtype``."""
    from .reduce_path import default_reduction
    fmt = FlitFormat(dtype=dtype, lanes=lanes)
    unit = (reduction or default_reduction)(dtype=fmt.dtype, lanes=fmt.lanes,
                                            sideband=fmt.framing_layout)
    unit._MustUse__silence = True   # built only to ask its latency
    return unit.latency


def switch_stages(ports: int) -> int:
    """Microswitches on every port-to-port path of Fred_m(P): 2 log2(P) - 1."""
    check_size(ports, 2)
    return 2 * (ports.bit_length() - 1) - 1


def switch_latency(*, ports: int, middle: int, dtype: str, lanes: int = 1, reduction=None) -> int:
    """Cycles from an input transfer to the flit (or sum) offered at the output, no backpressure:
    log2(P) input/RD stages of (reduction latency + 1) and log2(P) - 1 output stages of 1."""
    check_size(ports, middle)
    levels = ports.bit_length() - 1
    return (levels * (reduction_latency(dtype=dtype, lanes=lanes, reduction=reduction) + BUFFER_LATENCY)
            + (levels - 1) * BUFFER_LATENCY)
