"""The circuit FRED fabric whose NPUs run iteration traces (docs/fabric_iteration.md)."""

from __future__ import annotations

from functools import partial

from hdl.contracts.fabric import FabricSpec
from hdl.designs.fabric.fabric_top import FabricTop

from .trace_npu import TraceNpu

__all__ = ["iteration_fabric_top"]


def iteration_fabric_top(spec: FabricSpec, *, depth: int) -> FabricTop:
    """:class:`FabricTop` of ``spec`` with a :class:`TraceNpu` of ``depth`` trace nodes at every
    NPU port: the same switches, links, phase sequencers, harness ports and cycle counter
    (``cycles`` ends when every NPU's trace is done)."""
    return FabricTop(spec, npu=partial(TraceNpu, depth=depth))
