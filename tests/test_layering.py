"""The one-way stack: every import in the project's packages points down, never up or sideways.

Layers, bottom up (``hdl/base/__init__.py`` describes them):

    hdl.base      pure Python: errors, formats and golden arithmetic, bit layouts, the switch's
                  contract (flit, configuration port, latency), the compiler, placement, the
                  characterization schema                  -> stdlib, numpy
    hdl           the Amaranth designs                     -> hdl.base, amaranth
    cocotb_tests  verification: benches, runner, Verilator locator, lint, synthesis and the
                  characterization pipeline                -> hdl, cocotb, vcdvcd
    sysmodel      the system model                         -> hdl.base (numpy, pydantic...)
    fred          the command line                         -> anything; imported by nothing

Imports are read with ``ast`` (every ``import`` statement, also inside functions), so an import
done lazily to dodge a cycle is still an import against the direction.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Which project packages each layer may import (besides itself), and which third-party
#: packages it may use. The standard library is always allowed.
LAYERS = {
    # pydantic: the input files' schemas (hdl/base/input_schema.py, the characterization
    # schema; issue 27)
    "hdl.base": {"project": set(), "third_party": {"numpy", "pydantic"}},
    "hdl": {"project": {"hdl.base"}, "third_party": {"numpy", "amaranth"}},
    "cocotb_tests": {"project": {"hdl", "hdl.base"},
                     "third_party": {"numpy", "amaranth", "cocotb", "cocotb_tools", "vcdvcd",
                                     "verilator", "matplotlib",
                                     # issue 18: functional coverage (cocotb-coverage; its
                                     # databases are YAML, pyyaml is its dependency)
                                     "cocotb_coverage", "yaml"}},
    # chakra (mlc-chakra) and its protobuf runtime: sysmodel/chakra_trace.py decodes Chakra
    # execution traces with the schema MLCommons publishes (issue 14)
    # pydantic: the platform, workload, validation-case and cost files' schemas (issue 27)
    "sysmodel": {"project": {"hdl.base"},
                 "third_party": {"numpy", "matplotlib", "chakra", "google", "pydantic"}},
    # dask / distributed: fred/parallel.py runs points on a Dask cluster (--scheduler); tqdm:
    # fred/progress.py's progress bars (issue 16). The model below never imports them.
    "fred": {"project": {"hdl", "hdl.base", "cocotb_tests", "sysmodel"},
             "third_party": {"numpy", "amaranth", "cocotb", "matplotlib", "dask", "distributed", "tqdm"}},
}
PROJECT = ("hdl", "cocotb_tests", "sysmodel", "fred", "configs")
#: Top-level folders of scripts that use the stack but are not part of it (they may import any
#: layer except the command line).
CONSUMERS = ("benchmarks", "scripts")


def layer_of(module: str) -> str | None:
    """The layer a dotted module name belongs to (``hdl.base.x`` -> ``hdl.base``)."""
    if module == "hdl.base" or module.startswith("hdl.base."):
        return "hdl.base"
    top = module.split(".")[0]
    return top if top in LAYERS else None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``; relative imports resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            found.append((node.lineno, name))
    return found


def violations(path: Path) -> list[str]:
    """Imports of ``path`` that go against the stack, each as ``file:line: what``."""
    here = layer_of(module_name(path))
    consumer = here is None
    out = []
    for line, name in imports_of(path):
        top = name.split(".")[0]
        where = f"{path.relative_to(ROOT)}:{line}"
        if top in PROJECT:
            target = layer_of(name)
            if consumer:
                if target == "fred":
                    out.append(f"{where}: imports {name}; nothing may import the command line")
                continue
            if target is None:
                continue   # data packages (configs)
            if target != here and target not in LAYERS[here]["project"]:
                out.append(f"{where}: {here} imports {name} ({target}), against the stack")
        elif not consumer and top not in sys.stdlib_module_names \
                and top not in LAYERS[here]["third_party"]:
            out.append(f"{where}: {here} imports third-party {top!r}, which this layer may not use")
    return out


def project_files() -> list[Path]:
    files = []
    for folder in (*PROJECT, *CONSUMERS):
        files += sorted((ROOT / folder).rglob("*.py")) if (ROOT / folder).is_dir() else []
    return [f for f in files if ".venv" not in f.parts and not f.is_symlink()
            and not any(p.is_symlink() for p in f.relative_to(ROOT).parents if p != Path("."))]


def test_every_import_follows_the_stack():
    files = project_files()
    assert len(files) > 50, "the walk found too few files: is ROOT right?"
    problems = [v for f in files for v in violations(f)]
    assert not problems, "imports against the one-way stack:\n" + "\n".join(problems)


@pytest.mark.parametrize("layer, source, expected", [
    ("hdl/base/injected.py", "from hdl.switch import FredSwitch\n", "against the stack"),
    ("hdl/base/injected.py", "import amaranth\n", "third-party 'amaranth'"),
    ("hdl/switch/injected.py", "from cocotb_tests.runner import run_bench\n", "against the stack"),
    ("hdl/switch/injected.py", "def f():\n    import sysmodel.platform\n", "against the stack"),
    ("sysmodel/injected.py", "from hdl.switch.modes import mode_layout\n", "against the stack"),
    ("sysmodel/injected.py", "from cocotb_tests.lib import metrics\n", "against the stack"),
    ("cocotb_tests/injected.py", "from fred.cli import main\n", "against the stack"),
    ("cocotb_tests/injected.py", "from sysmodel.platform import Platform\n", "against the stack"),
    ("benchmarks/injected.py", "from fred.cli import main\n", "nothing may import the command line"),
    ("hdl/base/compiler/injected.py", "from ..dtypes import get_dtype\nfrom ...switch import modes\n",
     "hdl.switch"),
])
def test_an_injected_upward_import_is_caught(tmp_path, monkeypatch, layer, source, expected):
    """The checker is not vacuous: an import against the direction, written in any form
    (absolute, relative, inside a function), is reported with its file and line."""
    fake_root = tmp_path
    target = fake_root / layer
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", fake_root)
    problems = violations(target)
    assert problems and expected in problems[-1], problems


def test_allowed_imports_pass(tmp_path, monkeypatch):
    target = tmp_path / "sysmodel" / "fine.py"
    target.parent.mkdir(parents=True)
    target.write_text("import json\nimport numpy as np\nfrom hdl.base.compiler import route\n"
                      "from . import platform\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert violations(target) == []
