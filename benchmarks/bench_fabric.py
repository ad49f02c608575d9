"""Simulation speed of the fabric RTL under Verilator (issue 15): fabric cycles per wall-clock
second on a bandwidth-bound case, plus the build time.

Usage: ``python benchmarks/bench_fabric.py [--fabric fred-b fred-d] [--size FLITS] [--json]``
(``make bench-fabric``; run it under the shared lock on the project machine). Each fabric is
built once (cached in ``sim_build/``; the build time printed is the one measured when it was
built, from its ``build_seconds``), then the wafer-wide all-reduce of ``--size`` flits per NPU
runs with every NPU sink always ready; ``cycles/s`` = the RTL's cycle count over the wall-clock
seconds of the timed window (``FabricRun.sim_s``: from start to the last poll that saw every
engine done).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cocotb_tests.fabric.run import (DEFAULT_SIMULATOR, SIMULATORS, build_fabric,  # noqa: E402
                                     build_options, run_fabric)
from hdl.contracts.fabric import fabric_spec, make_request  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fabric", nargs="+", default=["fred-b", "fred-d"])
    parser.add_argument("--size", type=int, default=20000, help="flits per NPU (default 20000)")
    parser.add_argument("--cflags", default=None,
                        help="C++ optimisation of the model (default: the fabric's, "
                             "cocotb_tests.fabric.run.default_cflags: -O2 with PGO, else -O1 or -Os); "
                             "give it as --cflags=-O1")
    parser.add_argument("--verilator-args", default=None,
                        help="further Verilator options, one string (default: the fabric build's, "
                             "cocotb_tests.fabric.run.VERILATOR_ARGS); give it with '=' since it "
                             "starts with '-', e.g. --verilator-args=\"--threads 2\"")
    parser.add_argument("--no-pgo", action="store_true",
                        help="compile without profile-guided optimization")
    parser.add_argument("--simulator", choices=SIMULATORS, default=DEFAULT_SIMULATOR,
                        help="lockstep: the fabric in two parts on two cores (the default); "
                             "cocotb: one model under the cocotb bench")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    extra = None if args.verilator_args is None else tuple(args.verilator_args.split())
    rows = []
    for name in args.fabric:
        spec = fabric_spec(name)
        start = time.perf_counter()
        cflags, pgo = build_options(spec, args.cflags, False if args.no_pgo else None)
        build_dir, _ = build_fabric(spec, args.cflags, verilator_args=extra, pgo=pgo,
                                    simulator=args.simulator)
        elapsed = time.perf_counter() - start
        recorded = (build_dir / "build_seconds")
        build_s = float(recorded.read_text()) if recorded.exists() else elapsed
        run = run_fabric(spec, make_request(spec, op="all-reduce", size_flits=args.size, group="wafer"),
                         cflags=args.cflags, verilator_args=extra, pgo=pgo, simulator=args.simulator)
        if run.errors:
            print(f"{name}: errors: {run.errors}", file=sys.stderr)
            return 1
        rows.append(dict(fabric=name, simulator=args.simulator, cflags=cflags, pgo=pgo,
                         size_flits=args.size, cycles=run.cycles, sim_s=run.sim_s,
                         cycles_per_s=run.cycles_per_s, build_s=round(build_s, 1),
                         verilog_and_cache_check_s=round(elapsed, 1), flits_checked=run.flits_checked,
                         part_wait_s=run.part_wait_s))
    meta = dict(date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                machine=platform.machine(), python=platform.python_version(),
                command="python benchmarks/bench_fabric.py " + " ".join(argv or sys.argv[1:]))
    if args.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=2))
    else:
        print(f"{'fabric':8} {'simulator':>9} {'C++':>4} {'PGO':>3} {'size':>7} {'cycles':>9} {'sim s':>8} {'cycles/s':>10} {'build s':>8}  parts waited s")
        for r in rows:
            waits = " / ".join(f"{w:.2f}" for w in r["part_wait_s"]) or "-"
            print(f"{r['fabric']:8} {r['simulator']:>9} {r['cflags']:>4} {'yes' if r['pgo'] else 'no':>3} {r['size_flits']:>7} {r['cycles']:>9} {r['sim_s']:>8.2f} "
                  f"{r['cycles_per_s']:>10.0f} {r['build_s']:>8.1f}  {waits}")
        print(f"({meta['date']}, {meta['command']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
