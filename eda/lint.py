"""Verilator ``--lint-only -Wall`` on generated Verilog, with the project's waivers.

Usage: ``fred lint FILE.v [FILE.v ...]`` (``make lint`` lints ``build/*.v``).
The top module of each file is taken from the file name. Waivers live in
``eda/lint_waivers.vlt``, each with the reason it is acceptable.

Hierarchical Verilog (``hdl.emit.verilog.to_verilog``) is linted **module by module**: Verilator
elaborates every instance of every module, so one run over a Fred_3(64) takes minutes (about
0.2 s per microswitch instance, 1,087 of them), although the file holds only a few dozen
distinct modules. :func:`lint` therefore lints each design module (a plain-named module plus the
``\\name.sub`` submodules Amaranth writes for it) once, as its own top, with every other design
module it instantiates replaced by a *stub*: the same port declarations (so every connection is
still checked for width and direction) and no body. The stubs are not design code; the only rule
switched off for them is ``UNDRIVEN`` (their outputs have no driver), inside the stub text
itself. The design's own code is checked with exactly the waivers of the file above.
``whole=True`` runs the single whole-file lint instead (what flat Verilog always gets).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from eda.toolchain import setup_verilator
from hdl.contracts.text_file import read_text_file

WAIVERS = Path(__file__).with_name("lint_waivers.vlt")

_MODULE = re.compile(r"^module (\\?\S+?) ?\((.*?)\);\n(.*?)^endmodule\n", re.S | re.M)
_PORT = re.compile(r"^\s*(input|output|inout)\s+(\[\d+:\d+\]\s+)?(\\\S+ |[A-Za-z_][A-Za-z0-9_$]*)\s*;",
                   re.M)
#: an instance line as yosys writes it: ``  type name (`` (either name may be escaped: ``\\x ``)
_INSTANCE = re.compile(r"^  (\\?[^\s(]+) +(?:\\\S+|[^\s(]+) *\($", re.M)


@dataclass
class LintResult:
    """Outcome of linting one file: ``returncode`` 0 when clean; ``stdout``/``stderr`` of the
    failing runs; ``modules`` linted (1 for a whole-file run)."""

    returncode: int
    stdout: str
    stderr: str
    modules: int


def _run(tool, top: str, path: Path) -> subprocess.CompletedProcess:
    command = [str(tool.executable), "--lint-only", "-Wall", "--top-module", top, str(WAIVERS),
               str(path)]
    return subprocess.run(command, capture_output=True, text=True)


def split_modules(text: str) -> dict[str, str]:
    """``{name: text}`` of every module in ``text`` (escaped names without the backslash)."""
    return {m.group(1).lstrip("\\"): m.group(0) for m in _MODULE.finditer(text)}


def _stub(name: str, module_text: str) -> str:
    header = _MODULE.match(module_text)
    ports = "".join(f"  {m.group(1)} {m.group(2) or ''}{m.group(3)};\n"
                    for m in _PORT.finditer(header.group(3)))
    return (f"/* verilator lint_off UNDRIVEN */\nmodule {name}({header.group(2)});\n{ports}"
            f"endmodule\n/* verilator lint_on UNDRIVEN */\n")


def design_modules(text: str) -> dict[str, list[str]]:
    """``{design module: [its own submodules]}``: plain-named modules and, for each, the
    ``\\name.sub`` modules Amaranth writes for it (escaped names prefixed by ``name.``)."""
    modules = split_modules(text)
    plain = [name for name in modules if "." not in name]
    groups = {name: [name] for name in plain}
    for name in modules:
        if "." in name:
            owner = max((p for p in plain if name.startswith(p + ".")), key=len, default=None)
            if owner is None:
                raise ValueError(f"module {name} belongs to no design module")
            groups[owner].append(name)
    return groups


def lint(path: Path | str, *, top: str | None = None, whole: bool = False) -> LintResult:
    """Lint one file (module by module when it holds several design modules, see above)."""
    tool = setup_verilator()
    path = Path(path)
    top = top or path.stem
    text = read_text_file(path, "Verilog file")
    groups = design_modules(text)
    if whole or len(groups) <= 1:
        done = _run(tool, top, path)
        return LintResult(done.returncode, done.stdout, done.stderr, 1)
    modules = split_modules(text)
    failures, out, err = 0, [], []
    with tempfile.TemporaryDirectory(prefix="fred-lint-") as folder:
        for name, members in groups.items():
            body = "".join(modules[m] for m in members)
            used = {m.group(1).lstrip("\\") for member in members
                    for m in _INSTANCE.finditer(modules[member])}
            stubs = "".join(_stub(child, modules[child]) for child in groups if child in used
                            and child != name)
            part = Path(folder) / f"{name}.v"
            part.write_text(body + stubs)
            done = _run(tool, name, part)
            if done.returncode:
                failures += 1
                out.append(done.stdout)
                err.append(f"module {name}:\n{done.stderr}")
    return LintResult(1 if failures else 0, "".join(out), "".join(err), len(groups))
