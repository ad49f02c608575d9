"""``fred sweep``: every MP x DP x PP factorisation of the NPU count, ranked by iteration time."""

from __future__ import annotations

import argparse
import math

from fred.cli import print_json
from fred.commands._cluster_model import (POINT_RUNNER_OPTIONS, add_cluster_arguments, cluster_spec_of,
                                          refuse_on_cluster)
from fred.commands._model_options import add_model_arguments, model_platform, switch_timing_json, switch_timing_text
from fred.commands._parallel_options import add_parallel_arguments, parallel_settings
from fred.table import format_table
from studies.report import to_json_dict
from fred.commands._option_types import RANGES

HELP = "rank every MP x DP x PP strategy of a workload on a fabric"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from sysmodel.platform import FABRICS
    from sysmodel.workloads import WORKLOADS
    parser.add_argument("--workload", required=True, metavar="NAME_OR_FILE",
                        help=f"a preset ({', '.join(WORKLOADS)}) or a workload file (.toml / .json)")
    parser.add_argument("--fabric", default=None,
                        help=f"a fabric of the platform ({', '.join(FABRICS)} on the paper's; required "
                             f"on a wafer platform; on a cluster: its wafers' fabric, default the file's)")
    parser.add_argument("--samples-per-dp", type=RANGES["samples_per_dp"], default=40,
                        help="minibatch per DP replica (paper's sweep: 40)")
    parser.add_argument("--strategy", default=None,
                        help="evaluate only this MP<a>-DP<b>-PP<c> (with its breakdown) instead of all")
    parser.add_argument("--schedule", default="1f1b", choices=("1f1b", "gpipe"),
                        help="pipeline schedule with --strategy (default 1f1b)")
    parser.add_argument("--trace", default=None, metavar="FILE",
                        help="write the executed schedule as Chrome trace-event JSON (Perfetto, "
                             "chrome://tracing): the --strategy iteration, else the best-ranked "
                             "strategy's (simulated once more); one track per stage resource")
    add_model_arguments(parser)
    add_parallel_arguments(parser)
    add_cluster_arguments(parser)


def run(args) -> int:
    from hdl.contracts.errors import FredError
    if args.samples_per_dp < 1:
        raise FredError(f"--samples-per-dp must be a positive integer, got {args.samples_per_dp}")
    cluster = cluster_spec_of(args, fabric=args.fabric)
    if cluster is not None:
        return _cluster(args, cluster)
    if args.fabric is None:
        raise FredError("--fabric is required on a wafer platform")
    from sysmodel.chrome_trace import TraceRecorder
    recorder = TraceRecorder(args.trace) if args.trace else None   # a bad path fails before the work
    platform = model_platform(args)
    if args.strategy:
        return _one(args, platform, recorder)
    rows, failed = _points(args)
    best = next((r for r in rows if r.feasible), None)
    if recorder and best:
        from hdl.contracts.placement import parse_strategy
        from sysmodel.workload_file import get_workload
        wl = get_workload(args.workload)
        recorder.add(f"{args.workload} {best.strategy} on {args.fabric} (rank 1)", platform, args.fabric,
                     wl.with_(microbatches=best.microbatches), parse_strategy(best.strategy),
                     samples_per_dp=args.samples_per_dp, overlap=not args.no_overlap)
        _wrote(recorder)
    if args.json:
        print_json({"workload": args.workload, "fabric": args.fabric,
                    "switch_timing": switch_timing_json(platform), "failed": failed,
                    "ranking": [_finite(to_json_dict(r)) for r in rows]})
        return 1 if failed else 0
    print(switch_timing_text(platform))
    print()
    table = [_cells(r) for r in rows]
    mode = ", serialised" if args.no_overlap else ""
    print(format_table(["rank", "strategy", "ms/sample", "s/iteration", "compute s", "exposed comm s",
                        "bubble s", "notes"], table, align="rlrrrrrl",
                       title=f"{args.workload} on {args.fabric} ({args.samples_per_dp} samples per DP "
                             f"replica{mode}), ranked by time per sample"))
    for f in failed:
        print(f"FAILED point {f['strategy']}: {f['error']}")
    return 1 if failed else 0


def _cells(r) -> list:
    """The console row of one ranked :class:`~studies.evaluation.SweepRow`."""
    if not r.feasible:
        return [r.rank, r.strategy, "", "", "", "", "", f"does not fit: {r.notes}"]
    return [r.rank, r.strategy, f"{r.time_per_sample_s * 1e3:.4f}", f"{r.time_s:.4f}",
            f"{r.compute_s:.4f}", f"{r.exposed_comm_s:.4f}", f"{r.bubble_s:.4f}", r.notes]


def _finite(row: dict) -> dict:
    """A ranking row for JSON: an infinite time (a strategy that does not fit) as null."""
    return {k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in row.items()}


def _points(args) -> tuple[list, list[dict]]:
    """The ranked rows of every strategy, computed by :func:`fred.parallel.run_points` (in
    process, in a pool or on a Dask cluster), and the points that failed."""
    from fred.parallel import run_points
    from fred.progress import progress_bar
    from studies.evaluation import rank_rows
    from studies.points import model_fingerprint, platform_ref, prepare_model, sweep_point, sweep_specs
    settings = parallel_settings(args)
    ref = platform_ref(args.platform, args.characterization, args.compute_scale)
    specs = sweep_specs(args.workload, args.fabric, ref, samples_per_dp=args.samples_per_dp,
                        overlap=not args.no_overlap)
    with progress_bar(len(specs), f"sweep {args.workload} {args.fabric}", json_output=args.json,
                      unit="strategy") as bar:
        results = run_points(sweep_point, specs, progress=bar, version=model_fingerprint(),
                             prepare=prepare_model, **settings)
    failed = [{"strategy": r.spec["strategy"], "error": r.error} for r in results if not r.ok]
    return rank_rows([r.value for r in results if r.ok]), failed


def _one(args, platform, recorder=None) -> int:
    from hdl.contracts.placement import parse_strategy
    from sysmodel.training import simulate_iteration
    from sysmodel.workload_file import get_workload
    strategy = parse_strategy(args.strategy)
    r = simulate_iteration(platform, args.fabric, get_workload(args.workload), strategy,
                           schedule=args.schedule, samples_per_dp=args.samples_per_dp,
                           overlap=not args.no_overlap)
    if recorder:
        recorder.add(f"{args.workload} {strategy} on {args.fabric}", platform, args.fabric,
                     get_workload(args.workload), strategy, schedule=args.schedule,
                     samples_per_dp=args.samples_per_dp, overlap=not args.no_overlap)
        _wrote(recorder)
    if args.json:
        print_json({**r.to_dict(), "switch_timing": switch_timing_json(platform)})
        return 0
    print(switch_timing_text(platform))
    print()
    mode = ", serialised" if args.no_overlap else ""
    rows = [[name, f"{value:.6g}", f"{100 * value / r.time_s:.1f}"] for name, value in r.breakdown.items()]
    rows.append(["iteration", f"{r.time_s:.6g}", "100.0"])
    print(format_table(["part", "seconds", "% of iteration"], rows,
                       title=f"{args.workload} {strategy} on {args.fabric} ({args.schedule}{mode}, "
                             f"{r.microbatches} microbatches, {args.samples_per_dp} samples per DP replica)"))
    print(f"memory: {r.memory.total / 1e9:.2f} GB per NPU (stage {r.memory.stage})")
    for note in r.notes:
        print(f"note: {note}")
    return 0


def _wrote(recorder) -> None:
    import sys
    print(f"trace: {len(recorder.iterations)} iteration(s) written to {recorder.write()}", file=sys.stderr)


def _cluster(args, spec: dict) -> int:
    """The sweep (or, with ``--strategy``, one iteration) on a cluster platform: every in-wafer
    strategy of the wafer dimension, the outer dimensions mapped by ``--mapping``, ranked and
    printed as on a wafer (:mod:`studies.cluster_points`)."""
    from hdl.contracts.placement import factorisations, parse_strategy
    from studies.cluster_points import cluster_from_spec, cluster_strategy_row
    from studies.evaluation import rank_rows
    from sysmodel.workload_file import get_workload
    refuse_on_cluster(args, "sweep", {
        "trace": (None, "the trace records one wafer's task graph; a cluster iteration composes several"),
        "cache": (None, "a cluster's points run in this process"), **POINT_RUNNER_OPTIONS})
    cluster = cluster_from_spec(spec)
    workload = get_workload(args.workload)
    run_args = dict(overlap=not args.no_overlap, schedule=spec["schedule"], chunks=spec["chunks"],
                    mapping=spec["mapping"])
    wafer = cluster.dimensions[0]
    if args.strategy:
        from fred.commands.cluster import print_iteration
        from sysmodel.cluster_training import simulate_cluster_iteration
        r = simulate_cluster_iteration(cluster, workload, parse_strategy(args.strategy),
                                       samples_per_dp=args.samples_per_dp, pipeline_schedule=args.schedule,
                                       **run_args)
        if args.json:
            print_json({"platform": cluster.to_dict(), **r.to_dict()})
            return 0
        print(switch_timing_text(wafer.wafer))
        print()
        print_iteration(r, cluster, spec["schedule"])
        return 0
    if args.schedule != "1f1b":
        raise FredError("--schedule (the pipeline schedule) applies with --strategy; the sweep runs 1f1b")
    rows = rank_rows([cluster_strategy_row(cluster, workload, s, args.samples_per_dp, **run_args)
                      for s in factorisations(wafer.size)])
    if args.json:
        print_json({"workload": args.workload, "fabric": wafer.fabric, "platform": cluster.to_dict(),
                    "dimension_schedule": spec["schedule"], "chunks": spec["chunks"],
                    "mapping": spec["mapping"], "switch_timing": switch_timing_json(wafer.wafer),
                    "failed": [], "ranking": [_finite(to_json_dict(r)) for r in rows]})
        return 0
    print(switch_timing_text(wafer.wafer))
    print()
    mode = ", serialised" if args.no_overlap else ""
    mapping = ", ".join(f"{k}={v}" for k, v in spec["mapping"].items()) or "dp across every outer dimension"
    print(format_table(["rank", "strategy", "ms/sample", "s/iteration", "compute s", "exposed comm s",
                        "bubble s", "notes"], [_cells(r) for r in rows], align="rlrrrrrl",
                       title=f"{args.workload} on {cluster.name} ({wafer.fabric} wafers; {mapping}; "
                             f"{spec['schedule']} chunk schedule; {args.samples_per_dp} samples per DP "
                             f"replica{mode}), in-wafer strategies ranked by time per sample"))
    return 0
