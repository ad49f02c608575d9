"""The one-way stack: every import in the project's packages points down, never up or sideways,
and no module imports itself back through others.

Layers, bottom up (the package docstrings describe them):

    hdl.contracts  pure Python: errors, formats and golden arithmetic, bit layouts, the switch's
                   contract (flit, configuration port and encoding, packet, latency), rank
                   placement, the fabric's description and partition, the characterization
                   schema and the input files' schemas       -> stdlib, numpy, pydantic
    hdl.compiler   pure Python: the configuration compiler, the online-routing reference
                   model, the fabric's engine programs and golden data  -> hdl.contracts
    hdl.emit       the Verilog emitter: any Amaranth component to hierarchical Verilog
                   (the designs mark their modules with its ``Hierarchy``)  -> amaranth
    hdl.designs    the Amaranth designs and their registry   -> hdl.compiler, hdl.emit
    eda            Verilator locator and builds, lint, synthesis, equivalence, code coverage,
                   the fabric's lock-step simulator                 -> hdl
    cocotb_tests   the cocotb benches, their library, the runner    -> eda, hdl, cocotb
    sysmodel       the system model                  -> hdl.contracts and hdl.compiler only
    studies        evaluation, calibration, validation, DSE and cost, characterization,
                   RTL-versus-model fabric cases, verification campaigns
                                                     -> sysmodel, cocotb_tests, eda, hdl
    fred           the command line                  -> anything; imported by nothing

Imports are read with ``ast`` (every ``import`` statement, also inside functions), so an import
done lazily to dodge a cycle is still an import against the direction, and still an edge of the
module graph whose cycles :func:`test_no_module_import_cycle` forbids.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Which project layers each layer may import (besides itself), and which third-party packages
#: it may use. The standard library is always allowed.
_HDL = {"hdl.contracts", "hdl.compiler", "hdl.designs", "hdl.emit"}
LAYERS = {
    # pydantic: the input files' schemas (hdl/contracts/input_schema.py, the characterization
    # schema; the model's and the studies' file readers build on them)
    "hdl.contracts": {"project": set(), "third_party": {"numpy", "pydantic"}},
    "hdl.compiler": {"project": {"hdl.contracts"}, "third_party": {"numpy"}},
    "hdl.emit": {"project": {"hdl.contracts"}, "third_party": {"amaranth"}},
    "hdl.designs": {"project": {"hdl.contracts", "hdl.compiler", "hdl.emit"},
                    "third_party": {"numpy", "amaranth"}},
    "hdl": {"project": _HDL, "third_party": set()},   # the package's own __init__
    "eda": {"project": _HDL, "third_party": {"verilator", "cocotb_tools"}},
    "cocotb_tests": {"project": _HDL | {"eda"},
                     "third_party": {"numpy", "amaranth", "cocotb", "cocotb_tools", "vcdvcd",
                                     # functional coverage (cocotb-coverage; its databases are
                                     # YAML, pyyaml is its dependency)
                                     "cocotb_coverage", "yaml"}},
    # chakra (mlc-chakra) and its protobuf runtime: sysmodel/chakra_trace.py decodes Chakra
    # execution traces with the schema MLCommons publishes
    # numba compiles the engine's event loop (sysmodel/engine_compiled.py)
    "sysmodel": {"project": {"hdl.contracts", "hdl.compiler"},
                 "third_party": {"numpy", "matplotlib", "chakra", "google", "pydantic", "numba"}},
    # scipy: studies/bandwidth_optimizer.py's local search (scipy.optimize)
    "studies": {"project": _HDL | {"eda", "cocotb_tests", "sysmodel"},
                "third_party": {"numpy", "matplotlib", "amaranth", "cocotb", "vcdvcd", "pydantic", "scipy"}},
    # dask / distributed: fred/parallel.py runs points on a Dask cluster (--scheduler); tqdm:
    # fred/progress.py's progress bars. The model below never imports them.
    "fred": {"project": _HDL | {"eda", "cocotb_tests", "sysmodel", "studies"},
             "third_party": {"numpy", "amaranth", "cocotb", "matplotlib", "dask", "distributed", "tqdm"}},
}
PROJECT = ("hdl", "eda", "cocotb_tests", "sysmodel", "studies", "fred", "configs")
#: Top-level folders of scripts that use the stack but are not part of it (they may import any
#: layer except the command line). Every user-facing action of the project is a ``fred``
#: subcommand (README, "Layout"); ``examples/`` holds the testbenches a user copies to drive the
#: generated RTL in their own design, with the script that builds them (``make examples``).
CONSUMERS = ("examples",)


def layer_of(module: str) -> str | None:
    """The layer a dotted module name belongs to: the longest layer name that is the module or
    one of its parents (``hdl.compiler.router`` -> ``hdl.compiler``, ``hdl`` -> ``hdl``)."""
    for layer in sorted(LAYERS, key=len, reverse=True):
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


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
    ("hdl/contracts/injected.py", "from hdl.designs.switch import FredSwitch\n", "against the stack"),
    ("hdl/contracts/injected.py", "import amaranth\n", "third-party 'amaranth'"),
    ("hdl/designs/switch/injected.py", "from cocotb_tests.runner import run_bench\n", "against the stack"),
    ("hdl/designs/switch/injected.py", "def f():\n    import sysmodel.platform\n", "against the stack"),
    ("sysmodel/injected.py", "from hdl.designs.switch.modes import mode_layout\n", "against the stack"),
    ("sysmodel/injected.py", "from cocotb_tests.lib import metrics\n", "against the stack"),
    ("cocotb_tests/injected.py", "from fred.cli import main\n", "against the stack"),
    ("cocotb_tests/injected.py", "from sysmodel.platform import Platform\n", "against the stack"),
    ("benchmarks/injected.py", "from fred.cli import main\n", "nothing may import the command line"),
    ("eda/injected.py", "from cocotb_tests.runner import run_bench\n", "against the stack"),
    ("eda/injected.py", "def f():\n    from sysmodel import platform\n", "against the stack"),
    ("sysmodel/injected.py", "from studies.evaluation import evaluate\n", "against the stack"),
    ("hdl/compiler/injected.py", "from hdl.designs.registry import get_design\n", "against the stack"),
    ("hdl/emit/injected.py", "from hdl.designs.registry import get_design\n", "against the stack"),
    ("hdl/compiler/injected.py", "from ..contracts.dtypes import get_dtype\nfrom ..designs.switch import modes\n",
     "hdl.designs.switch"),
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
    target.write_text("import json\nimport numpy as np\nfrom hdl.compiler import route\n"
                      "from . import platform\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert violations(target) == []


def module_graph(files: list[Path]) -> dict[str, set[str]]:
    """Project module -> the project modules it imports (``from a import b`` counts as an
    import of ``a.b`` when ``a.b`` is a module, else of ``a``)."""
    modules = {module_name(f) for f in files}
    graph = {}
    for f in files:
        here = module_name(f)
        edges = set()
        tree = ast.parse(f.read_text(), filename=str(f))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                package = here.split(".") if f.name == "__init__.py" else here.split(".")[:-1]
                base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else node.module
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for name in names:
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name and name != here:
                    edges.add(name)
        graph[here] = edges
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted. An
    import of a package by its own sub-module (``a.b`` importing ``a``) is left out: that is how
    a package's ``__init__`` re-exports its modules, not a cycle between modules."""
    graph = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()}
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_module_import_cycle():
    """No two modules import each other, directly or through others, not even lazily inside a
    function: a cycle means two modules are one concept split in two (or one is in the wrong
    place)."""
    cycles = import_cycles(module_graph([f for f in project_files()
                                         if f.relative_to(ROOT).parts[0] in PROJECT]))
    assert not cycles, "module import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_lazy_cycle(tmp_path, monkeypatch):
    """Not vacuous: a cycle closed by an import inside a function is found."""
    (tmp_path / "sysmodel").mkdir()
    (tmp_path / "sysmodel" / "a.py").write_text("from sysmodel import b\n")
    (tmp_path / "sysmodel" / "b.py").write_text("def f():\n    from sysmodel.a import x\n")
    (tmp_path / "sysmodel" / "c.py").write_text("from sysmodel import a\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    files = sorted((tmp_path / "sysmodel").glob("*.py"))
    assert import_cycles(module_graph(files)) == [["sysmodel.a", "sysmodel.b"]]


def search_path_uses(path: Path) -> list[str]:
    """``file:line`` of every use of the interpreter's module search path (the ``path``
    attribute of ``sys``) in ``path``, read with ``ast``: strings and comments do not count."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "path"
            and isinstance(node.value, ast.Name) and node.value.id == "sys"]


def test_nothing_edits_the_module_search_path():
    """Every module is imported as the installed (or editable) package provides it: no module,
    script or test reaches into the tree by editing the search path, so what runs in the tree
    is what runs from a non-editable install."""
    files = project_files() + sorted((ROOT / "tests").rglob("*.py"))
    found = [hit for f in files for hit in search_path_uses(f)]
    assert not found, "the module search path is edited in:\n" + "\n".join(found)


def test_a_search_path_edit_is_found(tmp_path, monkeypatch):
    """Not vacuous: an insertion inside a function is reported with its line."""
    edit = "sys" + ".path.insert(0, 'here')"   # spelled in two parts so this file has none
    (tmp_path / "x.py").write_text(f"import sys\n\ndef f():\n    {edit}\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert search_path_uses(tmp_path / "x.py") == ["x.py:4"]
