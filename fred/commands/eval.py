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
    parser.add_argument("--calibration", choices=("none", "paper"), default="none",
                        help="paper: fit one compute factor per workload on its Fred-C figure and "
                             "predict Fred-A, B, D (labelled; the headline stays the documented "
                             "platform's)")
    add_model_arguments(parser)


def run(args) -> int:
    from sysmodel.evaluation import FRED_FABRICS, PAPER_SPEEDUP, run_evaluation
    from sysmodel.workloads import WORKLOADS
    platform = model_platform(args)
    summary = run_evaluation(None if args.no_files else args.output, progress=True,
                             platform=platform, with_diagnostic=not args.no_diagnostic,
                             overlap=not args.no_overlap, calibration_mode=args.calibration)
    paper_cal = summary.get("calibration_paper")
    if args.json:
        out = {"speedup": summary["speedup"]}
        if paper_cal:
            out["calibration"] = {k: v for k, v in paper_cal.items() if k != "curves"}
        print_json(out)
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
    if paper_cal:
        print("calibration 'paper': one compute factor per workload fitted on its Fred-C figure "
              "(paper in brackets; Fred-A/B are not in the paper)")
        print(f"{'workload':18s} {'k':>8s} {'compute s':>10s}" + "".join(f"{f:>16s}" for f in FRED_FABRICS))
        for w, fit in paper_cal["fitted"].items():
            cells = []
            for f in FRED_FABRICS:
                paper = PAPER_SPEEDUP.get(f, {}).get(w)
                cells.append(f"{paper_cal['speedup'][f][w]:.3f}" + (f" [{paper:.2f}]" if paper else "       "))
            mark = "" if fit["reached"] else " (closest)"
            print(f"{w:18s} {fit['compute_scale']:8.3g} {fit['compute_s_per_iteration_mesh']:10.4g}"
                  + "".join(f"{c:>16s}" for c in cells) + mark)
        print(f"  Fred-D within 10 % of the paper: {'yes' if paper_cal['fred_d_within_10pct'] else 'NO'} "
              f"(worst {100 * paper_cal['fred_d_worst_error']:.1f} %)")
    return 0
