"""``fred eval``: the main job -- the paper's end-to-end results, sweeps and plots into results/."""

from __future__ import annotations

import argparse

from fred.cli import print_json
from fred.commands._model_options import add_model_arguments, model_platform

HELP = "evaluate the four workloads on the mesh and Fred-A..D; write results/ (CSV, JSON, PNG)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", default="results", help="output folder (default: results)")
    parser.add_argument("--no-files", action="store_true", help="print only; write nothing")
    parser.add_argument("--no-diagnostic", action="store_true",
                        help="skip the implied-compute-scale diagnostic (faster)")
    add_model_arguments(parser)


def run(args) -> int:
    from sysmodel.evaluation import FRED_FABRICS, PAPER_SPEEDUP, run_evaluation
    from sysmodel.workloads import WORKLOADS
    platform = model_platform(args)
    summary = run_evaluation(None if args.no_files else args.output, progress=True,
                             platform=platform, with_diagnostic=not args.no_diagnostic,
                             overlap=not args.no_overlap)
    if args.json:
        print_json({"speedup": summary["speedup"]})
        return 0
    mode = "serialised: no communication/compute overlap" if args.no_overlap else "overlap"
    print(f"speedup over the 2D mesh (model, {mode}; paper in brackets)")
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
    spread = summary["implied_compute_scale"].get("spread")
    if spread:
        print("compute speed-up each paper figure implies (one global value would need them equal):")
        for policy, s in spread.items():
            shown = f"x{s['min']:.3g} .. x{s['max']:.3g}" if s["min"] else "none reached"
            missing = f"; never reached: {', '.join(s['unreachable'])}" if s["unreachable"] else ""
            print(f"  {policy:10s} {shown}{missing}")
    cal = summary.get("calibration")
    if cal and cal["scale"]:
        print(f"one compute factor fitted on {cal['anchor']} (x{cal['scale']:.3g}) predicts "
              f"(paper in brackets):")
        for w in WORKLOADS:
            cells = [f"{cal['speedup'][f][w]:.2f} [{PAPER_SPEEDUP[f][w]:.2f}] {100 * cal['error'][f][w]:+.0f}%"
                     for f in ("fred-c", "fred-d")]
            print(f"  {w:18s} fred-c {cells[0]:>22s}   fred-d {cells[1]:>22s}")
        print(f"  within 10 %: {', '.join(cal['within_10pct']) or 'none'}")
    return 0
