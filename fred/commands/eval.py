"""``fred eval``: the main job -- the paper's end-to-end results, sweeps and plots into results/."""

from __future__ import annotations

import argparse

from fred.cli import print_json

HELP = "evaluate the four workloads on the mesh and Fred-A..D; write results/ (CSV, JSON, PNG)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", default="results", help="output folder (default: results)")
    parser.add_argument("--no-files", action="store_true", help="print only; write nothing")
    parser.add_argument("--no-diagnostic", action="store_true",
                        help="skip the implied-compute-scale diagnostic (faster)")
    parser.add_argument("--platform", default=None, help="platform TOML (default: shipped paper platform)")


def run(args) -> int:
    from sysmodel.evaluation import FRED_FABRICS, PAPER_SPEEDUP, run_evaluation
    from sysmodel.platform import default_platform, load_platform
    from sysmodel.workloads import WORKLOADS
    platform = load_platform(args.platform) if args.platform else default_platform()
    summary = run_evaluation(None if args.no_files else args.output, progress=True,
                             platform=platform, with_diagnostic=not args.no_diagnostic)
    if args.json:
        print_json({"speedup": summary["speedup"]})
        return 0
    print("speedup over the 2D mesh (model; paper in brackets)")
    print(f"{'workload':18s}" + "".join(f"{f:>16s}" for f in FRED_FABRICS))
    for w in WORKLOADS:
        cells = []
        for f in FRED_FABRICS:
            paper = PAPER_SPEEDUP.get(f, {}).get(w)
            cells.append(f"{summary['speedup'][f][w]:.3f}" + (f" [{paper:.2f}]" if paper else "       "))
        print(f"{w:18s}" + "".join(f"{c:>16s}" for c in cells))
    print("why (from the breakdown; docs/sysmodel.md explains):")
    for w in WORKLOADS:
        print(f"  {w}: {summary['explanation'][w]['text']}")
    for key, s in summary["sweep_summary"].items():
        print(f"sweep {key}: {s}")
    return 0
