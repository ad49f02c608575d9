"""``fred cluster``: one training iteration on a cluster of wafers (MP, PP and DP inside each
wafer, DP or PP across as --mapping says), or the cluster studies' tables (docs/cluster.md)."""

from __future__ import annotations

import argparse

from fred.cli import print_json
from fred.commands._option_types import RANGES
from fred.table import format_table
from hdl.contracts.errors import FredError

HELP = ("a training iteration on a cluster of wafers (DP or PP across wafers, fixed or Themis chunk order), "
        "or the cluster studies")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from sysmodel.multidim_collectives import DEFAULT_CHUNKS, SCHEDULES
    parser.add_argument("--platform", help="cluster platform TOML (a path, or a shipped name such as "
                                           "cluster-fred-wafers.toml)")
    parser.add_argument("--workload", help="workload preset or file")
    parser.add_argument("--strategy", help="in-wafer MP<a>-DP<b>-PP<c> (default: the workload's)")
    parser.add_argument("--schedule", choices=SCHEDULES, default="themis",
                        help="dimension order of the cross-wafer all-reduce's chunks (default themis)")
    parser.add_argument("--chunks", type=RANGES["chunks"], default=DEFAULT_CHUNKS,
                        help=f"chunks of the cross-wafer all-reduce (default {DEFAULT_CHUNKS})")
    parser.add_argument("--samples-per-dp", type=RANGES["samples_per_dp"], default=None, help="minibatch per DP replica")
    parser.add_argument("--characterization", default=None, metavar="PATH",
                        help="measured switch timing of the wafers (default: the shipped one)")
    parser.add_argument("--mapping", default=None, metavar="DIM=dp|pp,...",
                        help="what each outer dimension carries across wafers: dp (default) or pp, "
                             "e.g. rack=pp,spine=dp")
    parser.add_argument("--sweep", action="store_true",
                        help="every in-wafer strategy MP x DP x PP = the wafer's NPUs, ranked by time per sample")
    parser.add_argument("--study", action="store_true",
                        help="print the cluster study's tables (Markdown; docs/cluster.md) instead")
    parser.add_argument("--resize-study", action="store_true",
                        help="print the chunk-resizing check (fixed, Themis, ASTRA-sim-style resizing; "
                             "Markdown; docs/cluster.md; about 30 s) instead")
    parser.add_argument("--megatron-study", action="store_true",
                        help="print the Megatron-style GPT-3 175B run (MP on each wafer, PP and DP across "
                             "wafers; 1,000 and 10,000 NPUs; Markdown; docs/cluster.md) instead")
    parser.add_argument("--themis-sensitivity", action="store_true",
                        help="print how the Themis gain moves with the inputs its paper leaves unknown "
                             "(bandwidth profile, chunks, latency, size, dimension count; Markdown; "
                             "docs/cluster.md) instead")
    parser.add_argument("--optical-study", action="store_true",
                        help="print the optical study's tables (WRHT, optical vs electrical scale-out, the "
                             "bandwidth optimizer's splits; Markdown; docs/optical.md) instead")


#: each study flag -> the module whose ``render()`` prints it (each computes its own platforms)
_STUDIES = {"resize_study": "studies.resize_study", "optical_study": "studies.optical_study",
            "megatron_study": "studies.megatron_study", "themis_sensitivity": "studies.themis_sensitivity",
            "study": "studies.cluster_study"}


def _run_study(args) -> bool:
    """Print the one study asked for (True), or nothing (False); a study with --platform or
    --workload, or two studies at once, is an error."""
    asked = [flag for flag in _STUDIES if getattr(args, flag)]
    if not asked:
        return False
    names = ", ".join("--" + flag.replace("_", "-") for flag in asked)
    if len(asked) > 1:
        raise FredError(f"{names}: one study at a time")
    if args.platform or args.workload:
        raise FredError(f"{names} computes its own platforms and workloads; drop --platform/--workload")
    import importlib
    print(importlib.import_module(_STUDIES[asked[0]]).render(), end="")
    return True


def run(args) -> int:
    if _run_study(args):
        return 0
    if not args.platform or not args.workload:
        raise FredError("fred cluster needs --platform CLUSTER.toml and --workload W (or --study)")
    from hdl.contracts.placement import parse_strategy
    from sysmodel.cluster_training import parse_mapping, simulate_cluster_iteration
    from sysmodel.dimensions import load_cluster
    from sysmodel.workload_file import get_workload
    cluster = load_cluster(args.platform, characterization=args.characterization)
    if args.sweep:
        if args.strategy:
            raise FredError("--sweep tries every in-wafer strategy; drop --strategy")
        return _sweep(args, cluster)
    strategy = parse_strategy(args.strategy) if args.strategy else None
    result = simulate_cluster_iteration(cluster, get_workload(args.workload), strategy,
                                        schedule=args.schedule, chunks=args.chunks,
                                        samples_per_dp=args.samples_per_dp, mapping=parse_mapping(args.mapping))
    if args.json:
        print_json({"platform": cluster.to_dict(), **result.to_dict()})
        return 0
    print_iteration(result, cluster, args.schedule)
    return 0


def print_iteration(result, cluster, schedule: str) -> None:
    """The console table of one cluster iteration (also ``fred sweep --strategy`` on a cluster)."""
    rows = [["iteration", f"{result.time_s * 1e3:.3f} ms"],
            ["  of which one wafer's iteration" if result.pp_across == 1 else
             f"  of which the slowest of {result.pp_across} pipelined wafers", f"{result.wafer.time_s * 1e3:.3f} ms"],
            ["  of which the pipeline across wafers (bubble, transfers)",
             f"{(result.pipeline_s - result.wafer.time_s) * 1e3:.3f} ms"],
            ["  of which the cross-wafer gradient all-reduce",
             f"{(result.cross_wafer.time_s if result.cross_wafer else 0.0) * 1e3:.3f} ms"],
            ["mapping of the outer dimensions", ", ".join(f"{k}={v}" for k, v in result.mapping.items()) or "-"],
            ["NPUs used / global DP", f"{result.npus_used} / {result.dp_global}"],
            ["all-reduced per NPU across wafers", f"{result.gradient_bytes_per_npu:.6g} B"],
            ["per-NPU memory (most loaded stage)",
             f"{result.wafer.memory.total / 1e9:.2f} of {result.wafer.memory.capacity / 1e9:.0f} GB"]]
    rows += [[f"exposed/busy on {name}", f"{t * 1e3:.3f} ms"] for name, t in result.exposed_by_dimension.items()]
    if result.cross_wafer:
        rows += [[f"utilization of {u.name} in the cross-wafer all-reduce",
                  f"{u.utilization:.3f} busy, {u.bandwidth_utilization:.3f} of bandwidth"]
                 for u in result.cross_wafer.dimensions]
    print(format_table(["figure", "value"], rows, align="ll",
                       title=f"{result.workload} {result.strategy} per wafer on {cluster.name} "
                             f"({schedule} schedule)"))


def _sweep(args, cluster) -> int:
    from sysmodel.cluster_training import sweep_cluster_strategies
    from sysmodel.workload_file import get_workload
    from sysmodel.cluster_training import parse_mapping
    rows = sweep_cluster_strategies(cluster, get_workload(args.workload), schedule=args.schedule,
                                    chunks=args.chunks, samples_per_dp=args.samples_per_dp,
                                    mapping=parse_mapping(args.mapping))
    if args.json:
        print_json({"platform": cluster.to_dict(), "workload": args.workload, "schedule": args.schedule,
                    "strategies": [{"strategy": str(s), "error": why or None,
                                    **(r.to_dict() if r else {})} for s, r, why in rows]})
        return 0
    table = [[str(i + 1), str(s), f"{r.time_per_sample_s * 1e6:.3f}", f"{r.time_s * 1e3:.3f}",
              f"{(r.cross_wafer.time_s if r.cross_wafer else 0.0) * 1e3:.3f}",
              f"{r.wafer.memory.total / 1e9:.1f}"] if r else [str(i + 1), str(s), "-", "-", "-", why]
             for i, (s, r, why) in enumerate(rows)]
    print(format_table(["rank", "strategy", "us/sample", "iteration ms", "cross-wafer ms", "GB/NPU"],
                       table, align="llrrrr",
                       title=f"{args.workload} on {cluster.name}: in-wafer strategies ({args.schedule} schedule)"))
    return 0
