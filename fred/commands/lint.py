"""``fred lint``: Verilator ``--lint-only -Wall`` on generated Verilog with the project's waivers
(:mod:`eda.lint`; ``make lint`` lints ``build/*.v``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fred.cli import print_json

HELP = "Verilator --lint-only -Wall on Verilog files, with the project's waivers"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE.v",
                        help="Verilog files; the top module of each is its file name "
                             "(fred_switch.v: fred_switch) unless --top is given")
    parser.add_argument("--top", default=None,
                        help="top module (one file only; default: the file name)")
    parser.add_argument("--whole", action="store_true",
                        help="lint each file in one Verilator run (elaborates every instance: "
                             "slow for large switches) instead of module by module")


def run(args) -> int:
    from eda.lint import lint
    from hdl.contracts.errors import FredError
    paths = [Path(name) for name in args.files]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FredError(f"no such file: {', '.join(missing)}")
    if args.top is not None and len(paths) > 1:
        raise FredError(f"--top names the top module of one file, not of {len(paths)}")
    failures, report = 0, []
    for path in paths:
        result = lint(path, top=args.top, whole=args.whole)
        failures += result.returncode != 0
        report.append({"file": str(path), "clean": result.returncode == 0,
                       "modules": result.modules, "output": result.stdout + result.stderr})
        if args.json:
            continue
        status = "clean" if result.returncode == 0 else "FAILED"
        print(f"lint {path}: {status} ({result.modules} module{'s' * (result.modules != 1)})")
        if result.returncode:
            sys.stdout.write(result.stdout + result.stderr)
    if args.json:
        print_json(report)
    return 1 if failures else 0
