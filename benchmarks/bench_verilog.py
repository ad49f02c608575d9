"""Speed and size of Verilog generation, lint and the Verilator build (``make bench-verilog``).

Prints (and with ``--json`` writes) the figures issue 13 asks for; nothing here is asserted:

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

Usage: ``python benchmarks/bench_verilog.py [--ports 4,8,...] [--no-flat] [--no-build]
[--json FILE]``. Run it on an otherwise idle machine (``flock /tmp/fred-heavy.lock``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=ROOT, env=env)
    if done.returncode:
        raise SystemExit(f"failed: {done.stderr[-3000:]}")
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ports", default=",".join(map(str, DEFAULT_PORTS)))
    parser.add_argument("--flat-ports", default=",".join(map(str, FLAT_PORTS)),
                        help="P of the flat generations for comparison ('' for none)")
    parser.add_argument("--whole-lint", action="store_true",
                        help="also lint the largest P as one file (elaborates every instance)")
    parser.add_argument("--no-flat", action="store_true", help="skip the flat Verilator build")
    parser.add_argument("--no-build", action="store_true", help="skip the Verilator builds")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    ports = [int(p) for p in args.ports.split(",") if p.strip()]
    figures = {"command": "python benchmarks/bench_verilog.py " + " ".join(argv or sys.argv[1:]),
               "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "generation": {}}
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
        flat_ports = [int(p) for p in args.flat_ports.split(",") if p.strip()]
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
        if args.whole_lint:
            started = time.time()
            result = lint(path, whole=True)
            figures["whole_lint"] = {"ports": largest, "seconds": time.time() - started,
                                     "clean": result.returncode == 0}
            print(f"lint Fred_3({largest}) fp16 x 4 as one file: {figures['whole_lint']['seconds']:.1f} s, "
                  f"{'clean' if result.returncode == 0 else 'FAILED'}", flush=True)
        if not args.no_build:
            figures["build"] = {}
            hier = folder / "p16.v"
            if not hier.exists():
                generate(16, hier)
            figures["build"]["hierarchical"] = build(hier)
            print(f"Verilator build Fred_3(16) fp16 x 4, hierarchical: "
                  f"{figures['build']['hierarchical']['seconds']:.0f} s", flush=True)
            if not args.no_flat:
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
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
