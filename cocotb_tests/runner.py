"""Build a DUT once per configuration and run a cocotb module on it under Verilator.

:func:`run_bench` is what pytest calls. The Verilog is generated first (cheap), and its text,
the top module name, the Verilator version and the build options are hashed: the build lives in
``sim_build/<hash>/`` and is reused as long as nothing that affects it changes. Waveforms are
opt-in: ``WAVES=1`` in the environment (or ``waves=True``) builds with ``--trace`` and the run
writes ``sim_build/<hash>/<run>/dump.vcd``.

Parameters reach the cocotb module as JSON in the run folder's ``bench_params.json``, named by
``FRED_BENCH_PARAMS_FILE`` (:func:`cocotb_tests.lib.bench_params`; a file, because one
environment variable holds at most 128 kB and a mesh iteration's programs are more); the run's
base seed travels as ``FRED_SEED``.

Hierarchical Verilog (``hdl.emit.verilog.to_verilog``) is built with Verilator's *hierarchical
verilation* (:func:`hierarchical_blocks`): Verilator otherwise generates code per instance (a
Fred_3(16) fp16 x 4 becomes 84 MB of C++, mostly copies of the same adder), while a hierarchical
block is verilated and compiled once however often it is instantiated.

The Verilator it runs and the build settings every build shares (``SIM_BUILD``, ``BUILD_ARGS``,
``MAKE_VARIABLES``) come from :mod:`eda.toolchain`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from hdl.contracts.errors import FredError
from eda.toolchain import BUILD_ARGS, SIM_BUILD, build_lock, make_variables_in_environ, setup_verilator

#: make jobs of a hierarchical ``--build`` (:func:`build_dut`): 1, because Verilator 5.048's
#: generated ``Vtop_hier.mk`` verilates each block by one rule with two targets (the block's
#: ``.sv`` and ``.mk``, not grouped), which a parallel make runs twice at once: two Verilator
#: runs writing one block's files (seen once in a fresh clone's ``make test``, 2026-11-29: the
#: block's model object compiled empty and the link failed). The test suite's workers keep the
#: cores busy.
HIERARCHICAL_BUILD_JOBS = 1

__all__ = ["BenchResult", "SIM_BUILD", "run_bench", "build_dut", "hierarchical_blocks"]



@dataclass(frozen=True)
class BenchResult:
    build_dir: Path
    test_dir: Path
    tests: int
    failed: int
    waves: Path | None
    metrics: dict   #: what the bench recorded with cocotb_tests.lib.metrics.record()

    def to_dict(self) -> dict:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in self.__dict__.items()}


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _design_verilog(unit: str, params: dict) -> tuple[str, str]:
    from hdl.designs.registry import get_design
    from hdl.emit.verilog import to_verilog
    design = get_design(unit)
    return to_verilog(design.build(**params), name=design.top), design.top


#: Design modules that stay in their parent's model (no hierarchical block): the Fred_m(r) levels
#: are wiring between blocks, the configuration memory and checker exist once per design.
#: Measured on Fred_3(16) fp16 x 4 (2 cores, empty build folder, one after the other):
#: microswitches, demux/mux and reduction unit as blocks 22.9 s, every design module a block
#: 28.3 s (each block costs a verilation and a compile of its own), flat 151.3 s.
WIRING_MODULES = re.compile(r"fred_m\d+_p\d+_|fred_config_")


def hierarchical_blocks(verilog: str, top: str) -> list[str]:
    """The modules of ``verilog`` that Verilator verilates and compiles once each as hierarchical
    blocks (``--hierarchical``): the design modules (plain-named modules, as ``hdl.emit.hierarchy``
    writes one per distinct component) that hold logic and are instantiated many times: the
    microswitches, demux, mux and reduction unit; not the top nor :data:`WIRING_MODULES`.
    Verilator 5.048 writes a block's ports unescaped into the wrapper it generates, so a module
    with a port named after a keyword (``config``) cannot be a block and stays in its parent's
    model (the switch's components name their configuration vector ``modes``). Flat Verilog has
    no such modules and gets an ordinary build."""
    from eda.lint import design_modules, split_modules
    texts = split_modules(verilog)
    blocks = []
    for name in design_modules(verilog):
        header = texts[name][:texts[name].index(");")]
        if name != top and "\\" not in header and not WIRING_MODULES.match(name):
            blocks.append(name)
    return blocks


#: Verilator options of a code-coverage build (``code_coverage=True``): line and toggle
#: coverage; the simulator writes ``coverage.dat`` into the run's folder when it exits.
COVERAGE_ARGS = ("--coverage-line", "--coverage-toggle")


def build_dut(verilog: str, top: str, *, waves: bool = False, build_args=(),
              hier_blocks: bool = True, code_coverage: bool = False) -> Path:
    """Build ``verilog`` (top module ``top``) with Verilator unless an identical build exists.

    ``hier_blocks=False``: no hierarchical blocks, Verilator inlines every module (the fabric of
    docs/fabric_rtl.md: its switches' blocks have combinational paths through their ports, which
    Verilator evaluates by iterating across blocks, ~1000x slower than the inlined model).
    ``code_coverage``: a separate, flat build with :data:`COVERAGE_ARGS` (its own cache key, so
    it never replaces the default build); flat because the coverage points of a hierarchical
    block live in that block's own model, and one flat model names every point by its module."""
    tool = setup_verilator()
    blocks = hierarchical_blocks(verilog, top) if hier_blocks and not code_coverage else []
    args = tuple(BUILD_ARGS) + tuple(build_args) + (COVERAGE_ARGS if code_coverage else ())
    if blocks:   # --build: Verilator builds the blocks and the model (cocotb's make is then a no-op)
        args += ("--hierarchical", "--build", "-j", str(HIERARCHICAL_BUILD_JOBS))
    key_source = json.dumps([verilog, top, tool.version, args, blocks, bool(waves)])
    key = hashlib.sha256(key_source.encode()).hexdigest()[:16]
    build_dir = SIM_BUILD / f"{top}-{key}"
    with build_lock(build_dir):
        stamp = build_dir / "build.ok"
        if stamp.is_file() and (build_dir / top).is_file():
            return build_dir
        from cocotb_tools.runner import get_runner
        build_dir.mkdir(parents=True, exist_ok=True)
        source = build_dir / f"{top}.v"
        source.write_text(verilog)
        if blocks:
            control = build_dir / "hierarchical_blocks.vlt"
            control.write_text("`verilator_config\n" + "".join(f'hier_block -module "{name}"\n'
                                                                 for name in blocks))
            args += (str(control),)
        runner = get_runner("verilator")
        try:
            with make_variables_in_environ():
                runner.build(sources=[source], hdl_toplevel=top, build_dir=build_dir, always=True,
                             build_args=list(args), waves=waves, timescale=("1ns", "1ps"),
                             log_file=build_dir / "build.log")
        except BaseException:
            _clear_failed_build(build_dir)
            raise
        stamp.write_text(key_source[:200] + "\n")
        return build_dir


def _clear_failed_build(build_dir: Path) -> None:
    """Remove what a failed build left in ``build_dir`` but its ``build.log``: make takes the
    objects of an interrupted or broken build as up to date, so every later attempt would fail
    the same way (seen in a fresh clone, 2026-11-29: a hierarchical block's object compiled
    empty by two Verilator runs at once, then four benches failed at the link); the next
    attempt starts from an empty folder, the log of this one kept to read."""
    for child in build_dir.iterdir():
        if child.name == "build.log":
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def run_folder(build_dir: Path, name: str) -> Path:
    """The folder of the run ``name`` on the build ``build_dir``: ``runs/<name>``, and
    ``runs/<name>-<worker>`` under a parallel test session (pytest-xdist names each worker in
    ``PYTEST_XDIST_WORKER``), so two workers running the same bench on one build never share
    a results file. Every run of characters other than letters, digits, ``_``, ``.`` and
    ``-`` in ``name`` becomes one ``_`` (a request label such as ``MP2-DP5-PP2 dp`` names a
    folder)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return Path(build_dir) / "runs" / (f"{name}-{worker}" if worker else name)


def run_bench(*, test_module: str, unit: str | None = None, params: dict | None = None,
              verilog: tuple[str, str] | None = None, testcase: str | list[str] | None = None,
              bench_params: dict | None = None, env: dict | None = None,
              waves: bool | None = None, run_name: str | None = None,
              build_args=(), hier_blocks: bool = True, prebuilt: Path | None = None,
              code_coverage: bool | None = None) -> BenchResult:
    """Build (once) and run cocotb ``test_module`` on a design; raise if any test fails.

    Give either ``unit`` + ``params`` (a design registered in :mod:`hdl.designs.registry`) or
    ``verilog=(text, top)``. ``bench_params`` (default: ``params``) reach the cocotb module
    through :func:`cocotb_tests.lib.bench_params`. ``testcase`` selects cocotb tests by name.
    """
    if (unit is None) == (verilog is None):
        raise FredError("run_bench needs exactly one of unit= or verilog=")
    params = dict(params or {})
    if unit is not None:
        text, top = _design_verilog(unit, params)
    else:
        text, top = verilog
    waves = _env_flag("WAVES") if waves is None else waves
    code_coverage = _env_flag("FRED_CODE_COVERAGE") if code_coverage is None else code_coverage
    if prebuilt is not None:   # a build folder made elsewhere (eda/fabric/build.py)
        build_dir = Path(prebuilt)
    else:
        build_dir = build_dut(text, top, waves=waves, build_args=build_args, hier_blocks=hier_blocks,
                              code_coverage=code_coverage)

    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    from cocotb_tests.lib.seeds import base_seed
    base_seed()  # fixes FRED_SEED in os.environ so the simulator inherits it
    name = run_name or "-".join(
        [test_module.rsplit(".", 1)[-1]] + ([testcase] if isinstance(testcase, str) else list(testcase or [])))
    test_dir = run_folder(build_dir, name)
    test_dir.mkdir(parents=True, exist_ok=True)
    results_xml = (test_dir / "results.xml").resolve()
    (test_dir / "coverage.dat").unlink(missing_ok=True)   # a run's own points, not a sum of runs
    metrics_file = (test_dir / "metrics.json").resolve()
    metrics_file.unlink(missing_ok=True)
    params_file = (test_dir / "bench_params.json").resolve()
    params_file.write_text(json.dumps(bench_params if bench_params is not None else params))
    extra_env = {
        "FRED_BENCH_PARAMS_FILE": str(params_file),
        "FRED_SEED": os.environ["FRED_SEED"],
        "COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "INFO"),
        "FRED_METRICS_FILE": str(metrics_file),
    }
    coverage_dir = os.environ.get("FRED_COVERAGE_DIR")
    if coverage_dir:   # functional coverage (cocotb_tests.lib.coverage): one YAML file per run
        extra_env["FRED_COVERAGE_FILE"] = str(Path(coverage_dir).resolve() / f"{top}-{name}.yml")
    extra_env.update(env or {})
    runner = get_runner("verilator")
    try:
        runner.test(test_module=test_module, hdl_toplevel=top, hdl_toplevel_lang="verilog",
                    build_dir=build_dir, test_dir=test_dir,
                    testcase=testcase, extra_env=extra_env, waves=waves, results_xml=str(results_xml),
                    timescale=("1ns", "1ps"), log_file=test_dir / "sim.log")
    except SystemExit:
        pass  # the runner exits on failing tests; the results file below says which
    tests, failed = get_results(results_xml)
    log_text = (test_dir / "sim.log").read_text(errors="replace") if (test_dir / "sim.log").exists() else ""
    if tests == 0:
        raise AssertionError(f"cocotb ran no test from {test_module} (testcase={testcase}); log: {test_dir / 'sim.log'}")
    if failed:
        tail = "\n".join(log_text.splitlines()[-60:])
        raise AssertionError(f"{failed} of {tests} cocotb test(s) failed in {test_module}; "
                             f"log {test_dir / 'sim.log'}:\n{tail}")
    vcd = test_dir / "dump.vcd"
    metrics = json.loads(metrics_file.read_text()) if metrics_file.exists() else {}
    return BenchResult(build_dir, test_dir, tests, failed, vcd if waves and vcd.exists() else None,
                       metrics)
