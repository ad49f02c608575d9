"""The 2D-mesh router of the baseline (docs/mesh_rtl.md): five ports, dimension-order routing,
two virtual channels (XY and YX), credit-based virtual cut-through, one flit per cycle per port."""

from .mesh_router import MeshRouter

__all__ = ["MeshRouter"]
