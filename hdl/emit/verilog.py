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

``zero_memory_init=False`` leaves out the initial values of every memory whose initial contents
are all zero (Amaranth writes every memory's contents, zeros included, as one ``initial``
statement per word). Why: a design with large memories -- the packet I/O iteration top's
program loaders, 20 x 16,384 words on the Fred-C wafer -- spent 40 % of its 40.8 MB of Verilog
on ``entries[i] = 41'h0;`` lines, which Verilator verilates and compiles as straight-line
code. Only for a simulator that starts every variable at zero: Verilator with ``--x-initial
0`` (or ``fast``, which the builds of :data:`eda.toolchain.BUILD_ARGS` use and which zeroes
every array in the model's constructor). Memories with any non-zero word keep their contents.
"""

from __future__ import annotations

from pathlib import Path

from amaranth.back import verilog

from hdl.contracts.errors import FredError
from hdl.emit.hierarchy import Hierarchy

__all__ = ["to_verilog", "write_verilog"]


def to_verilog(component, *, name: str, flat: bool = False, prefix: str = "",
               zero_memory_init: bool = True) -> str:
    """Verilog text of ``component`` as top module ``name``; ports come from its signature.
    Hierarchical unless ``flat``. ``prefix`` starts the name of every submodule, so that two
    designs generated with different prefixes (and tops) can be compiled together without two
    modules of one name (``fred verilog --name``; Amaranth's flat output already names its
    submodules after the top). ``zero_memory_init=False``: memories whose initial contents are
    all zero get no ``initial`` block (module docstring: for a simulator that zeroes them)."""
    if flat:
        if not zero_memory_init:
            component._MustUse__silence = True   # never converted: no "created but never used" warning
            raise FredError("zero_memory_init=False is for hierarchical Verilog (flat=False)")
        return verilog.convert(component, name=name, emit_src=False)
    return Hierarchy(prefix=prefix, zero_memory_init=zero_memory_init).verilog(component, name)


def write_verilog(component, *, name: str, path: Path | str, flat: bool = False) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_verilog(component, name=name, flat=flat))
    return path
