"""Deterministic Verilog generation from Amaranth components.

``emit_src=False`` keeps source paths out of the output, so the same design gives
byte-identical Verilog in any checkout; designs must also never iterate a ``set``
while elaborating (tests/test_verilog_determinism.py checks both).
"""

from __future__ import annotations

from pathlib import Path

from amaranth.back import verilog

__all__ = ["to_verilog", "write_verilog"]


def to_verilog(component, *, name: str) -> str:
    """Verilog text of ``component`` as top module ``name``; ports come from its signature."""
    return verilog.convert(component, name=name, emit_src=False)


def write_verilog(component, *, name: str, path: Path | str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_verilog(component, name=name))
    return path
