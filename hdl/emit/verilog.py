"""Deterministic Verilog generation from Amaranth components: the one entry point.

:func:`to_verilog` is what ``fred verilog``/``make verilog``, the cocotb runner, lint, synthesis
and the characterization all call. By default it writes **hierarchical** Verilog
(:mod:`hdl.emit.hierarchy`): each distinct component (class and parameters: the microswitches, each
Fred_m(r) level, the reduction unit, the configuration memory) is one module, emitted once and
instantiated wherever it is used. ``flat=True`` gives Amaranth's own output, one module per
instance, byte-identical to what this function produced before hierarchical generation existed;
it is kept for the equivalence cross-check (``tests/hdl/emit/test_verilog_hierarchy.py``).

``emit_src=False`` keeps source paths out of the output, so the same design gives
byte-identical Verilog in any checkout; designs must also never iterate a ``set``
while elaborating (tests/hdl/emit/test_verilog.py checks both).
"""

from __future__ import annotations

from pathlib import Path

from amaranth.back import verilog

from hdl.emit.hierarchy import Hierarchy

__all__ = ["to_verilog", "write_verilog"]


def to_verilog(component, *, name: str, flat: bool = False, prefix: str = "") -> str:
    """Verilog text of ``component`` as top module ``name``; ports come from its signature.
    Hierarchical unless ``flat``. ``prefix`` starts the name of every submodule, so that two
    designs generated with different prefixes (and tops) can be compiled together without two
    modules of one name (``fred verilog --name``; Amaranth's flat output already names its
    submodules after the top)."""
    if flat:
        return verilog.convert(component, name=name, emit_src=False)
    return Hierarchy(prefix=prefix).verilog(component, name)


def write_verilog(component, *, name: str, path: Path | str, flat: bool = False) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_verilog(component, name=name, flat=flat))
    return path
