"""Verilator ``--lint-only -Wall`` on generated Verilog, with the project's waivers.

Usage: ``python -m cocotb_tests.lint FILE.v [FILE.v ...]`` (``make lint`` lints ``build/*.v``).
The top module of each file is taken from the file name. Waivers live in
``cocotb_tests/lint_waivers.vlt``, each with the reason it is acceptable.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cocotb_tests.toolchain import setup_verilator

WAIVERS = Path(__file__).with_name("lint_waivers.vlt")


def lint(path: Path | str, *, top: str | None = None) -> subprocess.CompletedProcess:
    """Lint one file; returns the completed process (``returncode`` 0 when clean)."""
    tool = setup_verilator()
    path = Path(path)
    command = [str(tool.executable), "--lint-only", "-Wall", "--top-module", top or path.stem,
               str(WAIVERS), str(path)]
    return subprocess.run(command, capture_output=True, text=True)


def main(argv: list[str] | None = None) -> int:
    paths = [Path(p) for p in (sys.argv[1:] if argv is None else argv)]
    if not paths:
        print("usage: python -m cocotb_tests.lint FILE.v [FILE.v ...]", file=sys.stderr)
        return 2
    failures = 0
    for path in paths:
        result = lint(path)
        status = "clean" if result.returncode == 0 else "FAILED"
        print(f"lint {path}: {status}")
        if result.returncode:
            failures += 1
            sys.stdout.write(result.stdout + result.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
