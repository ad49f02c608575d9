"""``fred eval``: the main job -- the paper's end-to-end results, sweeps and plots into results/."""

from __future__ import annotations

import argparse

from fred.cli import print_json
from fred.commands._cluster_model import add_cluster_arguments, cluster_spec_of, refuse_on_cluster
from fred.commands._option_types import RANGES
from fred.commands._model_options import add_model_arguments, model_platform, switch_timing_text
from fred.table import format_table

HELP = "evaluate the four workloads on the mesh and Fred-A..D; write results/ (CSV, JSON, PNG)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", default=None,
                        help="output folder (default: results; with --json nothing is written "
                             "unless -o is given)")
    parser.add_argument("--no-files", action="store_true", help="print only; write nothing")
    parser.add_argument("--no-diagnostic", action="store_true",
                        help="skip the implied-compute-scale diagnostic (faster)")
    parser.add_argument("--calibration", choices=("none", "paper"), default="none",
                        help="paper: fit one compute factor per workload on its Fred-C figure and "
                             "predict Fred-A, B, D (labelled; the headline stays the documented "
                             "platform's)")
    parser.add_argument("--trace", default=None, metavar="FILE",
                        help="write the executed schedules of the headline iterations as Chrome "
                             "trace-event JSON (Perfetto, chrome://tracing): one process per "
                             "workload and fabric (the mesh and Fred-A..D, the paper's strategies, "
                             "the documented platform, not the calibrated one; each simulated "
                             "once more), one track per stage resource")
    from studies.uncertainty import DEFAULT_SAMPLES
    parser.add_argument("--uncertainty-samples", type=RANGES["uncertainty_samples"], default=DEFAULT_SAMPLES,
                        metavar="N",
                        help=f"Latin-hypercube points per overlap policy for every speedup's interval "
                             f"from the uncertain inputs (compute speed, link and in-switch efficiency, "
                             f"overlap; results/report.md says how); 0: no intervals "
                             f"(default {DEFAULT_SAMPLES})")
    add_model_arguments(parser)
    add_cluster_arguments(parser)


def run(args) -> int:
    from fred.gc_policy import survivors_frozen
    from fred.progress import progress_bar, wanted
    from sysmodel.chrome_trace import TraceRecorder
    from studies.evaluation import evaluation_steps, run_evaluation
    if args.output is None:               # --json prints; it writes files only when asked (-o)
        args.no_files = args.no_files or args.json
        args.output = "results"
    cluster = cluster_spec_of(args)
    if cluster is not None:
        return _cluster(args, cluster)
    recorder = TraceRecorder(args.trace) if args.trace else None   # a bad path fails before the work
    platform = model_platform(args)
    # a progress bar on a terminal; else the step-by-step log on stderr (none with --json)
    steps = evaluation_steps(with_diagnostic=not args.no_diagnostic, calibration_mode=args.calibration,
                             uncertainty_samples=args.uncertainty_samples)
    # the collector skips what survived the set-up and each step (fred/gc_policy.py, Speed)
    with progress_bar(steps, "eval", json_output=args.json, unit="step") as bar, \
            survivors_frozen(keep_frozen=args._process_exits) as checkpoint:
        def tick(n: int = 1) -> None:
            bar.update(n)
            checkpoint()
        summary = run_evaluation(None if args.no_files else args.output,
                                 progress=not args.json and not wanted(args.json),
                                 platform=platform, with_diagnostic=not args.no_diagnostic,
                                 overlap=not args.no_overlap, calibration_mode=args.calibration,
                                 uncertainty_samples=args.uncertainty_samples, tick=tick)
    if recorder:
        _trace(recorder, platform, overlap=not args.no_overlap)
    if args.json:
        print_json(json_summary(summary))
        return 0
    print(switch_timing_text(platform))
    mode = "serialised: no communication/compute overlap" if args.no_overlap else "overlap"
    sections = [_speedups(summary, mode), _why(summary), *_sweeps(summary),
                _spread(summary), _calibration(summary),
                _paper_calibration(summary), _in_switch(summary), *_intervals(summary)]
    for section in sections:
        if section:
            print()
            print(section)
    return 0


def json_summary(summary) -> dict:
    """The ``--json`` document: the headline speedups, the switch timing and, with
    ``--calibration paper``, the calibration without its curves."""
    from studies.report import to_json_dict
    out = {"speedup": summary.speedup, "switch_timing": summary.switch_timing}
    if summary.calibration_paper:
        out["calibration"] = {k: v for k, v in to_json_dict(summary.calibration_paper).items()
                              if k != "curves"}
    return out


def _speedups(summary, mode: str) -> str:
    from studies.evaluation import FRED_FABRICS, PAPER_SPEEDUP
    from sysmodel.workloads import WORKLOADS
    rows = []
    for w in WORKLOADS:
        cells = []
        for f in FRED_FABRICS:
            paper = PAPER_SPEEDUP.get(f, {}).get(w)
            cells.append(f"{summary.speedup[f][w]:.3f}" + (f" [{paper:.2f}]" if paper else ""))
        rows.append([w, *cells])
    return format_table(["workload", *FRED_FABRICS], rows,
                        title=f"speedup over the 2D mesh (model, {mode}; paper in brackets)")


def _why(summary) -> str:
    from studies.evaluation import PAPER_SPEEDUP
    from sysmodel.workloads import WORKLOADS
    rows = []
    for w in WORKLOADS:
        e = summary.explanation[w]
        comm = e.exposed_comm_s
        gaps = [f"{100 * (summary.speedup[f][w] / PAPER_SPEEDUP[f][w] - 1):+.0f} %"
                for f in ("fred-c", "fred-d")]
        rows.append([w, f"{e.mesh_time_s:.4g}", f"{100 * e.compute_fraction_of_mesh_iteration:.1f}",
                     *(f"{1e3 * comm[f]:.4g}" for f in ("mesh", "fred-c", "fred-d")), *gaps])
    return format_table(
        ["workload", "mesh s/iteration", "compute % of mesh", "exposed comm ms: mesh", "fred-c", "fred-d",
         "fred-c vs paper", "fred-d vs paper"], rows,
        title="why (from the iteration breakdown; docs/sysmodel.md explains)")


def _sweeps(summary) -> list[str]:
    from studies.evaluation import SweepComparison
    ranked, compared = [], []
    for key, s in summary.sweep_summary.items():
        if isinstance(s, SweepComparison):
            compared.append([key.split("/")[0], f"{s.exposed_comm_reduction:.2f}x",
                             f"{s.mean_speedup:.3f}", s.strategies])
        else:
            best = s.best_time_per_sample_s
            exposed = s.mean_exposed_comm_per_sample_s
            ranked.append([key, s.best or "none fits", "" if best is None else f"{1e3 * best:.3f}",
                           s.most_compute_efficient or "",
                           "" if exposed is None else f"{1e3 * exposed:.4g}", f"{s.feasible}/{s.total}"])
    out = [format_table(["sweep", "best", "ms/sample", "most compute-efficient",
                         "mean exposed comm ms/sample", "fit"], ranked, align="llrlrr",
                        title="strategy sweeps (ranked by time per sample)")]
    if compared:
        out.append(format_table(["fred-d vs mesh", "exposed comm reduction", "mean speedup", "strategies"],
                                compared, title="the sweeps compared (same strategies on both fabrics)"))
    return out


def _spread(summary) -> str | None:
    spread = summary.implied_compute_scale.spread
    if not spread:
        return None
    rows = [[policy, f"x{s.min:.3g}" if s.min else "none", f"x{s.max:.3g}" if s.max else "none",
             ", ".join(s.unreachable) or "-"] for policy, s in spread.items()]
    return format_table(["policy", "smallest", "largest", "never reached"], rows, align="lrrl",
                        title="compute speed-up each paper figure implies (one global value would "
                              "need them equal)")


def _calibration(summary) -> str | None:
    from studies.evaluation import PAPER_SPEEDUP
    from sysmodel.workloads import WORKLOADS
    cal = summary.calibration
    if not cal or not cal.scale:
        return None
    rows = [[w, *(f"{cal.speedup[f][w]:.2f} [{PAPER_SPEEDUP[f][w]:.2f}] {100 * cal.error[f][w]:+.0f} %"
                  for f in ("fred-c", "fred-d"))] for w in WORKLOADS]
    table = format_table(["workload", "fred-c", "fred-d"], rows,
                         title=f"one compute factor fitted on {cal.anchor} (x{cal.scale:.3g}) "
                               f"predicts (paper in brackets)")
    return f"{table}\nwithin 10 %: {', '.join(cal.within_10pct) or 'none'}"


def _paper_calibration(summary) -> str | None:
    from studies.evaluation import FRED_FABRICS, PAPER_SPEEDUP
    paper_cal = summary.calibration_paper
    if not paper_cal:
        return None
    rows = []
    for w, fit in paper_cal.fitted.items():
        cells = []
        for f in FRED_FABRICS:
            paper = PAPER_SPEEDUP.get(f, {}).get(w)
            cells.append(f"{paper_cal.speedup[f][w]:.3f}" + (f" [{paper:.2f}]" if paper else ""))
        rows.append([w + ("" if fit.reached else " (closest)"), f"{fit.compute_scale:.3g}",
                     f"{fit.compute_s_per_iteration_mesh:.4g}", *cells])
    table = format_table(["workload", "k", "compute s", *FRED_FABRICS], rows,
                         title="calibration 'paper': one compute factor per workload fitted on its "
                               "Fred-C figure (paper in brackets; Fred-A/B are not in the paper)")
    return (f"{table}\nFred-D within 10 % of the paper: "
            f"{'yes' if paper_cal.fred_d_within_10pct else 'NO'} "
            f"(worst {100 * paper_cal.fred_d_worst_error:.1f} %)")


def _intervals(summary) -> list[str]:
    """Each uncertainty block's table: point (low-high) [paper] per fabric and workload."""
    from studies.evaluation import FRED_FABRICS as FABRICS
    from sysmodel.workloads import WORKLOADS
    out = []
    for block in summary.uncertainty:
        rows = [[w, f"{block.compute_scales[w]:.3g}",
                 *(f"{i.point:.3f} ({i.low:.3f}-{i.high:.3f})"
                   for i in (block.intervals[f][w] for f in FABRICS))] for w in WORKLOADS]
        out.append(format_table(["workload", "compute x", *FABRICS], rows,
                                title=f"{block.name}: speedup (smallest-largest over the uncertain "
                                      f"inputs; results/report.md) -- assumes {block.assumes}"))
    return out


def _trace(recorder, platform, *, overlap: bool) -> None:
    """The headline iterations (every workload on the mesh and Fred-A..D) into ``recorder``."""
    import sys
    from studies.evaluation import FRED_FABRICS
    from sysmodel.workload_file import get_workload
    from sysmodel.workloads import WORKLOADS
    for w in WORKLOADS:
        for fabric in ("mesh", *FRED_FABRICS):
            recorder.add(f"{w} on {fabric}", platform, fabric, get_workload(w), overlap=overlap)
    print(f"trace: {len(recorder.iterations)} iteration(s) written to {recorder.write()}", file=sys.stderr)


def _in_switch(summary) -> str:
    """Fred-B/D at NVLink SHARP's measured in-switch efficiency (docs/sysmodel.md, "In-switch
    efficiency"); the headline above stays at the RTL's line rate."""
    study = summary.in_switch_sensitivity
    if study is None:
        return ""
    rows = [[r.setting, r.workload, f"{r.compute_scale:.4g}",
             f"{r.fred_b_line_rate:.3f} -> {r.fred_b_nvls:.3f}",
             f"{r.fred_d_line_rate:.3f} -> {r.fred_d_nvls:.3f}", f"{r.fred_c:.3f}",
             "never" if r.fred_d_break_even_efficiency is None else f"{r.fred_d_break_even_efficiency:.3f}"]
            for r in study.rows]
    return format_table(
        ["setting", "workload", "compute x", "fred-b: line rate -> NVLS", "fred-d: line rate -> NVLS",
         "fred-c", "fred-d beats fred-c above"], rows, align="llrrrrr",
        title=f"in-switch efficiency: speedups over the mesh with in-switch flows at NVLink SHARP's "
              f"measured {study.nvls_efficiency:g} of line rate ({study.source}); the headline "
              f"stays at the RTL's line rate (1.0)")


def _cluster(args, spec: dict) -> int:
    """``fred eval`` on a cluster platform: the four workloads on the cluster with mesh wafers and
    with each Fred variant's wafers, under both chunk schedules (or ``--dimension-schedule``):
    speedup over mesh wafers, iteration parts, exposed communication per dimension; files
    ``cluster_iterations.csv`` and ``cluster_results.json`` in the output folder."""
    from pathlib import Path
    from studies.uncertainty import DEFAULT_SAMPLES
    from studies.cluster_points import CLUSTER_EVAL_FIELDS, cluster_evaluation, cluster_from_spec
    from studies.report import check_writable, to_json_dict, write_csv, write_json
    from sysmodel.multidim_collectives import SCHEDULES
    from sysmodel.workload_file import get_workload
    from sysmodel.workloads import WORKLOADS
    refuse_on_cluster(args, "eval", {
        "calibration": ("none", "the paper's figures are for one wafer"),
        "trace": (None, "the trace records one wafer's task graph; a cluster iteration composes several"),
        "no_diagnostic": (False, "the implied-compute diagnostic is the one-wafer paper comparison's"),
        "uncertainty_samples": (DEFAULT_SAMPLES, "the intervals are on the one-wafer speedup tables")})
    if not args.no_files:
        check_writable(args.output, folder=True)
    cluster = cluster_from_spec(spec)
    schedules = (args.dimension_schedule,) if args.dimension_schedule else SCHEDULES
    rows, skipped = cluster_evaluation(cluster, [get_workload(w) for w in WORKLOADS], schedules=schedules,
                              chunks=spec["chunks"], mapping=spec["mapping"], overlap=not args.no_overlap)
    dims = [d.name for d in cluster.dimensions]
    flat = [{**{k: getattr(r, k) for k in CLUSTER_EVAL_FIELDS},
             **{f"exposed_{d}_s": r.exposed_by_dimension.get(d, 0.0) for d in dims}} for r in rows]
    speedup = {}
    for r in rows:
        speedup.setdefault(r.schedule, {}).setdefault(r.fabric, {})[r.workload] = r.speedup_over_mesh
    document = {"platform": cluster.to_dict(), "mapping": spec["mapping"], "chunks": spec["chunks"],
                "compute_scale": spec["compute_scale"], "overlap": not args.no_overlap,
                "speedup": speedup, "rows": flat, "not_mapped": skipped}
    files = []
    if not args.no_files:
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        files = [write_csv(out / "cluster_iterations.csv", flat, [*CLUSTER_EVAL_FIELDS, *(f"exposed_{d}_s" for d in dims)]),
                 write_json(out / "cluster_results.json", document)]
    if args.json:
        print_json(to_json_dict(document))
        return 0
    _cluster_tables(cluster, rows, schedules)
    for why in skipped.values():
        print(f"\nnot evaluated: {why}")
    if files:
        print(f"\nwrote {', '.join(str(f) for f in files)}")
    return 0


def _cluster_tables(cluster, rows, schedules) -> None:
    """The console tables of ``fred eval`` on a cluster: per chunk schedule, the speedups over
    mesh wafers and the iterations with their exposed time per dimension."""
    dims = [d.name for d in cluster.dimensions]
    print(switch_timing_text(cluster.dimensions[0].wafer))
    for schedule in schedules:
        mine = [r for r in rows if r.schedule == schedule]
        fabrics = list(dict.fromkeys(r.fabric for r in mine))
        table = [[w, *(f"{next(r.speedup_over_mesh for r in mine if r.workload == w and r.fabric == f):.3f}"
                       for f in fabrics if f != "mesh")] for w in dict.fromkeys(r.workload for r in mine)]
        print()
        print(format_table(["workload", *(f for f in fabrics if f != "mesh")], table,
                           title=f"{cluster.name}: speedup over mesh wafers ({schedule} chunk schedule)"))
        print()
        print(format_table(["workload", "wafers", "iteration ms", "wafer ms", "cross-wafer ms",
                            *(f"exposed {d} ms" for d in dims)],
                           [[r.workload, r.fabric, f"{r.time_s * 1e3:.4g}", f"{r.wafer_time_s * 1e3:.4g}",
                             f"{r.cross_wafer_s * 1e3:.4g}",
                             *(f"{r.exposed_by_dimension.get(d, 0.0) * 1e3:.4g}" for d in dims)] for r in mine],
                           title=f"{cluster.name}: iterations and exposed communication per dimension "
                                 f"({schedule} chunk schedule)"))
