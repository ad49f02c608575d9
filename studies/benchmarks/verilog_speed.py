"""Speed and size of Verilog generation, lint and the Verilator build (``fred bench verilog``,
``make bench-verilog``; docs/switch.md).

Prints (and with ``--json FILE`` writes) these figures; nothing here is asserted:

1. generation of Fred_3(P), fp16 x 4 lanes (``fred verilog --ports P --middle 3 --dtype fp16
   --lanes 4``, hierarchical) for P = 4..64: wall time, bytes, modules, peak memory, each in a
   fresh process (peak memory: the largest maximum resident set of that Python process and the
   yosys process Amaranth starts, which run one after the other);
   and the same for the flat output at a few small P (``--flat-ports``);
2. lint (``eda.lint``, module by module) of Fred_3(64) fp16 x 4, and with
   ``--whole-lint`` the single whole-file Verilator run as well;
3. the Verilator build (``cocotb_tests.runner.build_dut``: the test suite's options) of
   Fred_3(16) fp16 x 4 from hierarchical Verilog and, unless ``--no-flat``, from the flat Verilog
   (``to_verilog(flat=True)``, one module per instance: what every build was before), each in an
   empty build folder.

Usage: ``fred bench verilog [--ports 4,8,...] [--no-flat] [--no-build] [--json FILE]``. Run it
on an otherwise idle machine (``flock /tmp/fred-heavy.lock``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hdl.contracts.errors import FredError
from studies.report import check_writable, write_json

DEFAULT_PORTS = (4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64)
#: flat generation (Amaranth's own output, one module per instance) for comparison
FLAT_PORTS = (4, 8, 16)

_GENERATE = r"""
import json, resource, sys, time
started = time.time()
from hdl.designs.registry import get_design
from hdl.emit.verilog import to_verilog
ports, flat, path = int(sys.argv[1]), sys.argv[2] == "flat", sys.argv[3]
design = get_design("switch")
text = to_verilog(design.build(ports=ports, middle=3, dtype="fp16", lanes=4), name=design.top, flat=flat)
open(path, "w").write(text)
print(json.dumps({"seconds": time.time() - started, "bytes": len(text.encode()),
                  "modules": text.count("\nmodule "),
                  "peak_mb": max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                                 resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024}))
"""

_BUILD = r"""
import json, sys, time
from pathlib import Path
from cocotb_tests.runner import build_dut
text = Path(sys.argv[1]).read_text()
started = time.time()
build_dut(text, "fred_switch")
print(json.dumps({"seconds": time.time() - started}))
"""


def _python(code: str, *args: str, env=None) -> dict:
    # a fresh interpreter of this environment: it imports the project as this process does
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env)
    if done.returncode:
        raise FredError(f"failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def generate(ports: int, path: Path, *, flat: bool = False) -> dict:
    """Figures of one generation in a fresh process; ``process_seconds`` is the wall time of
    the whole process as the parent sees it (interpreter start and imports included)."""
    started = time.time()
    figures = _python(_GENERATE, str(ports), "flat" if flat else "hier", str(path))
    figures["process_seconds"] = time.time() - started
    return figures


def _row(p, g):
    return (f"{p:>4} {g['seconds']:>8.1f} {g['process_seconds']:>9.1f} {g['bytes'] / 1e6:>11.2f} "
            f"{g['modules']:>8} {g['peak_mb']:>8.0f}")


def build(path: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="fred-bench-build-") as folder:
        return _python(_BUILD, str(path), env=dict(os.environ, FRED_SIM_BUILD=folder))


def run(ports=DEFAULT_PORTS, flat_ports=FLAT_PORTS, *, whole_lint: bool = False,
        flat_build: bool = True, verilator_build: bool = True, json_path: Path | None = None,
        command: str = "") -> dict:
    """Measure and print the figures; return them (and write them to ``json_path`` if given).

    ``ports``: P of the hierarchical generations (the largest is linted); ``flat_ports``: P of
    the flat generations for comparison; ``whole_lint``: also lint the largest as one file;
    ``verilator_build``: the Verilator builds of Fred_3(16), ``flat_build`` the flat one among them;
    ``command``: how the run was started, recorded with the figures.
    """
    if json_path:   # an unwritable file fails now, not after the builds
        check_writable(json_path)
    ports, flat_ports = list(ports), list(flat_ports)
    figures = {"command": command, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "generation": {}}
    with tempfile.TemporaryDirectory(prefix="fred-bench-verilog-") as folder:
        folder = Path(folder)
        print("Fred_3(P) fp16 x 4, hierarchical Verilog (fred verilog --ports P --middle 3 "
              "--dtype fp16 --lanes 4)")
        header = (f"{'P':>4} {'time s':>8} {'process s':>9} {'Verilog MB':>11} {'modules':>8} "
                  f"{'peak MB':>8}")
        print(header)
        for p in ports:
            g = generate(p, folder / f"p{p}.v")
            figures["generation"][p] = g
            print(_row(p, g), flush=True)
        if flat_ports:
            figures["flat_generation"] = {}
            print("the same, flat Verilog (to_verilog(flat=True), one module per instance)")
            print(header)
            for p in flat_ports:
                g = generate(p, folder / f"p{p}-flat.v", flat=True)
                figures["flat_generation"][p] = g
                print(_row(p, g), flush=True)
        from eda.lint import lint
        largest = max(ports)
        path = folder / "lint" / "fred_switch.v"
        path.parent.mkdir()
        path.write_text((folder / f"p{largest}.v").read_text())
        started = time.time()
        result = lint(path)
        figures["lint"] = {"ports": largest, "seconds": time.time() - started,
                           "clean": result.returncode == 0, "modules": result.modules}
        print(f"lint Fred_3({largest}) fp16 x 4 (module by module, {result.modules} modules): "
              f"{figures['lint']['seconds']:.1f} s, {'clean' if result.returncode == 0 else 'FAILED'}",
              flush=True)
        if whole_lint:
            started = time.time()
            result = lint(path, whole=True)
            figures["whole_lint"] = {"ports": largest, "seconds": time.time() - started,
                                     "clean": result.returncode == 0}
            print(f"lint Fred_3({largest}) fp16 x 4 as one file: {figures['whole_lint']['seconds']:.1f} s, "
                  f"{'clean' if result.returncode == 0 else 'FAILED'}", flush=True)
        if verilator_build:
            figures["build"] = {}
            hier = folder / "p16.v"
            if not hier.exists():
                generate(16, hier)
            figures["build"]["hierarchical"] = build(hier)
            print(f"Verilator build Fred_3(16) fp16 x 4, hierarchical: "
                  f"{figures['build']['hierarchical']['seconds']:.0f} s", flush=True)
            if flat_build:
                flat = folder / "p16-flat.v"
                g = figures.get("flat_generation", {}).get(16) or generate(16, flat, flat=True)
                figures["build"]["flat_generation"] = g
                print(f"flat Verilog of Fred_3(16) fp16 x 4: {g['seconds']:.0f} s, "
                      f"{g['bytes'] / 1e6:.1f} MB, {g['modules']} modules, {g['peak_mb']:.0f} MB peak",
                      flush=True)
                figures["build"]["flat"] = build(flat)
                ratio = figures["build"]["flat"]["seconds"] / figures["build"]["hierarchical"]["seconds"]
                figures["build"]["speedup"] = ratio
                print(f"Verilator build Fred_3(16) fp16 x 4, flat: "
                      f"{figures['build']['flat']['seconds']:.0f} s (hierarchical is {ratio:.1f}x faster)")
    if json_path:
        write_json(json_path, figures, indent=1, sort_keys=False)
    return figures
