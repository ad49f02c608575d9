"""``fred coverage`` (``make coverage``): functional and code coverage of the switch benches,
merged and reported.

``fred coverage [--functional] [--code] [--report-only] [--out DIR] [--lock FILE]`` calls
:func:`run_coverage`:

* functional (``cocotb-coverage``, :mod:`cocotb_tests.lib.coverage`): the switch benches of the
  default suite and of ``-m full`` on Fred_3(8) and Fred_3(12) (int32 and fp16), each run writing
  its own YAML file (``FRED_COVERAGE_DIR``), merged with cocotb-coverage's ``merge_coverage``
  into ``DIR/functional/merged.yml``; prints covered bins / bins per cover group and every hole.
* code (Verilator ``--coverage-line --coverage-toggle``, :mod:`eda.code_coverage`): the
  same benches on separate flat coverage builds (``FRED_CODE_COVERAGE=1``, their own build
  folder ``DIR/code/sim_build``, so the default suite's builds are untouched) of Fred_3(8) int32,
  Fred_3(5) int32 (odd P: demux/mux at two levels) and Fred_2(4) fp16 (the floating-point
  adder); merged into ``DIR/code/merged.dat``; prints line and toggle coverage per module and
  every uncovered line/branch point.

Each pytest run takes ``flock /tmp/fred-heavy.lock`` (``--lock``, '' for none) for itself only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from hdl.contracts.errors import FredError
from studies.report import check_writable, write_text

__all__ = ["FUNCTIONAL_BUILDS", "CODE_BUILDS", "LOCK", "run_coverage"]

#: Builds (pytest ids of tests/cocotb_tests/test_switch_cocotb.py) of the functional-coverage runs, default +
#: full; one pytest run (and one hold of the lock) per build.
FUNCTIONAL_BUILDS = ("P8-m3-int32", "P8-m3-fp16", "P12-m3-int32", "P12-m3-fp16")
#: Builds of the code-coverage runs.
CODE_BUILDS = ("P8-m3-int32", "P5-m3-int32", "P4-m2-fp16")
TEST_FILE = "tests/cocotb_tests/test_switch_cocotb.py"
LOCK = "/tmp/fred-heavy.lock"

#: Line/branch points that cannot be counted by construction, with the reason; matched on the
#: source text of the point's line (see docs/verification.md for the ones explained by hand).
ARTEFACTS = [
    ("if (\\$auto$verilog_backend.cc",
     "Yosys write_verilog's dummy `if ($auto$...) begin end` that opens every combinational "
     "process (the register is a constant 0 that only makes the process sensitive): never true"),
]


def _pytest(builds, env: dict, lock: str) -> int:
    status = 0
    for build in builds:
        cmd = [sys.executable, "-m", "pytest", TEST_FILE, "-m", "full or not full", "-k",
               f"{build} and not total", "-q", "-p", "no:cacheprovider"]
        if lock and shutil.which("flock"):
            cmd = ["flock", lock] + cmd
        print("$ " + " ".join(cmd), flush=True)
        status |= subprocess.run(cmd, env=dict(os.environ, **env)).returncode
    return status


def functional(out: Path, *, run: bool, lock: str) -> int:
    from cocotb_tests.lib import coverage
    runs = (out / "functional" / "runs").resolve()
    status = 0
    if run:
        shutil.rmtree(runs, ignore_errors=True)
        status = _pytest(FUNCTIONAL_BUILDS, {coverage.ENV_DIR: str(runs)}, lock)
    # the runs of FUNCTIONAL_BUILDS only (a run file is named ...-P8m3int32.yml)
    tokens = tuple(b.replace("-", "") + ".yml" for b in FUNCTIONAL_BUILDS)
    files = sorted(f for f in runs.glob("*.yml") if f.name.endswith(tokens))
    if not files:
        print(f"no functional coverage files in {runs}", file=sys.stderr)
        return status or 1
    merged = coverage.merge(files, out / "functional" / "merged.yml")
    lines, _ = coverage.report(coverage.load(merged))
    text = "\n".join([f"functional coverage: {len(files)} runs merged into {merged}"] + lines)
    write_text(out / "functional" / "report.txt", text + "\n")
    print(text)
    return status


def code(out: Path, *, run: bool, lock: str) -> int:
    from eda import code_coverage
    build = (out / "code" / "sim_build").resolve()
    status = 0
    if run:
        shutil.rmtree(build / "runs", ignore_errors=True)
        for folder in build.glob("*/runs"):
            shutil.rmtree(folder, ignore_errors=True)
        status = _pytest(CODE_BUILDS, {"FRED_CODE_COVERAGE": "1", "FRED_SIM_BUILD": str(build)},
                         lock)
    files = sorted(build.glob("*/runs/*/coverage.dat"))
    if not files:
        print(f"no coverage.dat under {build}", file=sys.stderr)
        return status or 1
    points = code_coverage.merge(files)
    merged = code_coverage.write(points, out / "code" / "merged.dat")
    lines, data = code_coverage.report(points, artefacts=ARTEFACTS)
    text = "\n".join([f"code coverage: {len(files)} runs merged into {merged}"] + lines)
    write_text(out / "code" / "report.txt", text + "\n")
    print(text)
    return status


def run_coverage(out: Path | str = "build/coverage", *, functional_part: bool = True,
                 code_part: bool = True, report_only: bool = False, lock: str = LOCK) -> int:
    """Run (unless ``report_only``), merge and report the coverage campaigns; 0 when every run
    passed and every report was written.

    ``out``: the folder of the runs and reports (created); ``functional_part`` / ``code_part``:
    which of the two campaigns; ``report_only``: merge and report the files of an earlier run;
    ``lock``: the ``flock`` file each pytest run takes for itself ('' for none). Each report is
    printed and written as ``report.txt`` next to its merged database.
    """
    if not report_only and not Path(TEST_FILE).is_file():
        # the campaigns run the benches through pytest: they need the source tree's tests
        raise FredError(f"{TEST_FILE} not found: run the coverage campaigns from the project's "
                        f"source tree (or --report-only on the files of an earlier run)")
    out = check_writable(out, folder=True)   # an unwritable folder fails before the campaigns
    out.mkdir(parents=True, exist_ok=True)
    status = 0
    if functional_part:
        status |= functional(out, run=not report_only, lock=lock)
    if code_part:
        status |= code(out, run=not report_only, lock=lock)
    return status
