"""``fred dse --optimize bandwidth``: the per-dimension bandwidth optimizer on a cluster
platform (studies/bandwidth_optimizer.py, docs/bandwidth_optimizer.md)."""

from __future__ import annotations

import argparse

from fred.cli import print_json
from fred.commands._option_types import RANGES
from fred.table import format_table
from hdl.contracts.errors import FredError


def add_optimize_arguments(parser: argparse.ArgumentParser) -> None:
    from studies.bandwidth_optimizer import BUDGET_UNITS, OBJECTIVES
    from sysmodel.multidim_collectives import DEFAULT_CHUNKS, SCHEDULES
    group = parser.add_argument_group("bandwidth optimizer (--optimize bandwidth; --platform a cluster file)")
    group.add_argument("--optimize", choices=("bandwidth",), default=None,
                       help="choose each cluster dimension's bandwidth under --budget instead of sweeping fabric designs")
    group.add_argument("--budget", type=RANGES["network_budget"], default=None,
                       help="GBps per NPU over the free dimensions (--budget-unit gbps) or network cost per NPU "
                            "(--budget-unit cost; configs/cost.toml [network])")
    group.add_argument("--budget-unit", choices=BUDGET_UNITS, default="gbps", help="unit of --budget (default gbps)")
    group.add_argument("--objective", choices=OBJECTIVES, default="time",
                       help="minimise the (weighted, relative) iteration time, or maximise performance per cost")
    group.add_argument("--weights", default=None, metavar="LIST",
                       help="comma-separated weight per --workload (default: 1 each)")
    group.add_argument("--schedule", choices=SCHEDULES, default="themis",
                       help="dimension order of the cross-wafer all-reduce's chunks (default themis)")
    group.add_argument("--chunks", type=RANGES["chunks"], default=DEFAULT_CHUNKS,
                       help=f"chunks of the cross-wafer all-reduce (default {DEFAULT_CHUNKS})")
    group.add_argument("--grid", type=RANGES["grid"], default=20,
                       help="grid step 1/N of the budget shares printed beside the optimum (default 20)")


def _workloads(args) -> list:
    from sysmodel.workload_file import get_workload
    names = [w.strip() for w in args.workload.split(",") if w.strip()]
    if args.weights is None:
        weights = [1.0] * len(names)
    else:
        try:
            weights = [float(v) for v in args.weights.split(",")]
        except ValueError:
            raise FredError(f"--weights: expected comma-separated numbers, got {args.weights!r}") from None
        if len(weights) != len(names) or any(not w > 0 for w in weights):
            raise FredError(f"--weights needs one number > 0 per workload ({len(names)}: {', '.join(names)}), "
                            f"got {args.weights!r}")
    return [(get_workload(n), w) for n, w in zip(names, weights)]


def run_optimize(args) -> int:
    import time
    from studies.bandwidth_optimizer import NetworkCost, optimize_bandwidth, workload_time_function
    from studies.cost import load_cost_model
    from sysmodel.dimensions import is_cluster_file, load_cluster
    if args.budget is None:
        raise FredError("--optimize bandwidth needs --budget (GBps per NPU, or a cost with --budget-unit cost)")
    if not args.platform or not is_cluster_file(args.platform):
        raise FredError(f"--optimize bandwidth needs a cluster platform (--platform, e.g. cluster-fred-wafers-3d.toml), "
                        f"got {args.platform or 'none'}")
    start = time.perf_counter()
    cluster = load_cluster(args.platform, characterization=args.characterization)
    model = load_cost_model(args.cost)
    cost = NetworkCost(model.network["npu_cost"], dict(model.network["gbps_cost"]), model.source) \
        if model.network else None
    workloads = _workloads(args)
    fn = workload_time_function(cluster, workloads, schedule=args.schedule, chunks=args.chunks)
    opt = optimize_bandwidth(cluster, fn, budget=args.budget, unit=args.budget_unit, objective=args.objective,
                             cost=cost, grid=args.grid)
    times = fn.times(opt.bandwidths)
    grid_times = fn.times(opt.grid_best["bandwidths"])
    file_bw = {n: cluster.dimension(n).bandwidth_gbps for n in opt.bandwidths}
    file_times = fn.times(file_bw)
    elapsed = time.perf_counter() - start
    if args.json:
        print_json({"platform": cluster.to_dict(), "workloads": {w.name: weight for w, weight in workloads},
                    "schedule": args.schedule, "chunks": args.chunks, "optimum": opt.to_dict(),
                    "iteration_s": {"optimum": times, "grid_best": grid_times, "file": file_times},
                    "file_bandwidths": file_bw, "cost_model": model.source, "elapsed_s": elapsed})
        return 0
    _print(cluster, opt, times, grid_times, file_bw, file_times, elapsed)
    return 0


_OBJECTIVE_LABEL = {"time": "objective: relative time",
                    "perf-per-cost": "objective: relative time x $/NPU (lower = more perf per cost)"}


def _print(cluster, opt, times, grid_times, file_bw, file_times, elapsed) -> None:
    names = list(opt.bandwidths)
    rows = [["optimum"] + [f"{opt.bandwidths[n]:.2f}" for n in names] + [f"{opt.objective:.6g}"],
            [f"grid best (step {opt.grid_best['step']:g})"] + [f"{opt.grid_best['bandwidths'][n]:.2f}" for n in names]
            + [f"{opt.grid_best['objective']:.6g}"]]
    rows += [[f"closed form ({rule})"] + [f"{split[n]:.2f}" for n in names] + [""]
             for rule, split in opt.closed_form.items()]
    rows.append(["the file's bandwidths"] + [f"{file_bw[n]:.2f}" for n in names] + [""])
    unit = "GBps/NPU" if opt.budget_unit == "gbps" else "cost/NPU"
    print(format_table(["split"] + [f"{n} GBps" for n in names] + [_OBJECTIVE_LABEL[opt.objective_name]], rows,
                       align="l" + "r" * (len(names) + 1),
                       title=f"{cluster.name}: budget {opt.budget:g} {unit}, {opt.evaluations} model evaluations, {elapsed:.1f} s"))
    print()
    print(format_table(["workload", "optimum ms", "grid best ms", "file's bandwidths ms"],
                       [[w, f"{times[w] * 1e3:.3f}", f"{grid_times[w] * 1e3:.3f}", f"{file_times[w] * 1e3:.3f}"]
                        for w in times], align="lrrr", title="iteration time"))
    print()
    print(format_table(["bandwidth of", "objective change at +1 %", "at -1 %"],
                       [[k, f"{100 * up:+.3e} %", f"{100 * down:+.3e} %"] for k, (up, down) in opt.sensitivity.items()],
                       align="lrr", title="sensitivity at the optimum ('budget': every dimension)"))
