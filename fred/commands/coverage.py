"""``fred coverage``: functional (cocotb-coverage) and code (Verilator line/toggle) coverage of
the switch benches, merged and reported (:mod:`studies.verification.coverage_run`;
``make coverage``, docs/verification.md). Runs the benches through pytest: start it in the
project's source tree."""

from __future__ import annotations

import argparse

HELP = "functional and code coverage of the switch benches, merged and reported"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from studies.verification.coverage_run import LOCK
    parser.add_argument("--functional", action="store_true", help="functional coverage only")
    parser.add_argument("--code", action="store_true", help="code coverage only")
    parser.add_argument("--report-only", action="store_true",
                        help="merge and report the files of an earlier run")
    parser.add_argument("--out", default="build/coverage",
                        help="folder of the runs and reports (default build/coverage)")
    parser.add_argument("--lock", default=LOCK,
                        help=f"flock file each pytest run takes ('' for none; default {LOCK})")


def run(args) -> int:
    from hdl.contracts.errors import FredError
    from studies.verification.coverage_run import run_coverage
    if args.json:
        raise FredError("--json: the coverage reports are text (OUT/*/report.txt)")
    both = not (args.functional or args.code)
    return run_coverage(args.out, functional_part=args.functional or both,
                        code_part=args.code or both, report_only=args.report_only, lock=args.lock)
