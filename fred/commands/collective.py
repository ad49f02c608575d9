"""``fred collective``: time one collective (or one per group of a strategy dimension) on a fabric."""

from __future__ import annotations

import argparse

from fred.cli import print_json
from fred.commands._model_options import add_platform_arguments, model_platform, switch_timing_json, switch_timing_text
from fred.table import format_table
from hdl.contracts.errors import FredError
from fred.commands._option_types import RANGES

HELP = ("time a collective on the mesh or a FRED variant (per-link byte accounting), or across the "
        "dimensions of a cluster platform (fixed or Themis scheduling)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from sysmodel.collectives import OPS
    from sysmodel.platform import FABRICS
    from sysmodel.multidim_collectives import DEFAULT_CHUNKS, SCHEDULES
    parser.add_argument("--fabric", choices=FABRICS,
                        help="fabric to evaluate (wafer platforms; required there)")
    parser.add_argument("--op", required=True, choices=OPS, help="collective operation")
    parser.add_argument("--size", required=True, type=RANGES["bytes"],
                        help="bytes (all-reduce: buffer per NPU; see docs/sysmodel.md)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--group", help="'wafer' or 'all' (every NPU) or a comma list of NPU ranks, "
                                       "e.g. 0,1,4; on a cluster platform: 'all' or a comma list "
                                       "of dimension names")
    where.add_argument("--strategy", help="MP<a>-DP<b>-PP<c>: run the op on every group of --dim")
    parser.add_argument("--dim", choices=("mp", "dp", "pp"),
                        help="with --strategy: the dimension whose groups run the op concurrently "
                             "(pp with multicast/point-to-point: the stage-boundary transfers)")
    parser.add_argument("--root", type=RANGES["rank"], default=None,
                        help="root NPU of broadcast/reduce/multicast (default: lowest rank)")
    add_platform_arguments(parser)
    parser.add_argument("--schedule", choices=SCHEDULES, default=None,
                        help="cluster platforms: each chunk's dimension order, the file's (fixed) or "
                             "Themis' load-balancing one (default themis)")
    parser.add_argument("--chunks", type=int, default=None,
                        help=f"cluster platforms: chunks a collective is split into (default {DEFAULT_CHUNKS})")


def build_collectives(args, platform):
    from sysmodel.collectives import Collective
    from hdl.contracts.placement import parse_strategy
    if args.size <= 0:
        raise FredError(f"--size must be a positive number of bytes, got {args.size:g}")
    if args.group is not None:
        if args.dim:
            raise FredError("--dim needs --strategy, not --group")
        if args.group.strip().lower() in ("wafer", "all"):
            group = tuple(range(platform.npus))
        else:
            try:
                group = tuple(int(x) for x in args.group.split(",") if x.strip())
            except ValueError:
                raise FredError(f"--group {args.group!r}: expected 'wafer' or ranks like 0,1,4") from None
        if args.op == "point-to-point":
            if len(group) != 2:
                raise FredError("point-to-point with --group needs exactly two ranks: SRC,DST")
            return [Collective("point-to-point", size=args.size, pairs=((group[0], group[1]),))]
        return [Collective(args.op, group, args.size, root=args.root)]
    if not args.dim:
        raise FredError("--strategy needs --dim mp|dp|pp")
    strategy = parse_strategy(args.strategy)
    strategy.check(platform.npus)
    if args.root is not None:
        raise FredError("--root applies to --group only; with --strategy each group's root is its first member")
    if args.dim == "pp" and args.op in ("multicast", "point-to-point", "broadcast"):
        if strategy.pp < 2:
            raise FredError(f"{strategy} has no pipeline boundary (PP = 1)")
        out = []
        for stage in range(strategy.pp - 1):
            for src, dests in strategy.stage_transfers(stage):
                if args.op == "point-to-point":
                    out.append(Collective("point-to-point", size=args.size,
                                          pairs=tuple((src + (d - dests[0]), d) for d in dests)))
                else:
                    out.append(Collective("multicast", dests, args.size, root=src))
        return out
    return [Collective(args.op, g, args.size) for g in strategy.groups(args.dim)]


def run(args) -> int:
    from sysmodel.collectives import evaluate
    from sysmodel.dimensions import is_cluster_file
    if args.size <= 0:
        raise FredError(f"--size must be a positive number of bytes, got {args.size:g}")
    if args.platform is not None and is_cluster_file(args.platform):
        from fred.commands._cluster_collective import run_cluster
        return run_cluster(args)
    if args.fabric is None:
        raise FredError("--fabric is required on a wafer platform")
    for option in ("schedule", "chunks"):
        if getattr(args, option) is not None:
            raise FredError(f"--{option} applies to a cluster platform (a file listing [[dimensions]])")
    platform = model_platform(args)
    collectives = build_collectives(args, platform)
    result = evaluate(platform, args.fabric, collectives)
    out = {"fabric": args.fabric, "op": args.op, "size_bytes": args.size,
           "groups": len(collectives), "time_s": result.time_s,
           "bytes_sent_per_npu": result.bytes_sent_per_npu,
           "effective_bandwidth_per_npu_gbps": result.effective_bandwidth_per_npu_gbps,
           "busiest_link": result.busiest_link, "busiest_link_bytes": result.busiest_link_bytes,
           "latency_s": result.latency_s, "phases": result.phases,
           "algorithms": result.algorithms, "switch_timing": switch_timing_json(platform)}
    if args.json:
        print_json(out)
        return 0
    print(switch_timing_text(platform))
    print()
    rows = [["time", f"{result.time_s * 1e6:.4f} us"],
            ["  of which latency and phase switches", f"{result.latency_s * 1e6:.4f} us"],
            ["bytes sent per NPU", f"{result.bytes_sent_per_npu:.6g}"],
            ["effective bandwidth", f"{result.effective_bandwidth_per_npu_gbps:.1f} GBps per NPU"],
            ["busiest link", f"{result.busiest_link} ({result.busiest_link_bytes:.6g} B)"],
            ["phases", result.phases]]
    print(format_table(["figure", "value"], rows, align="ll",
                       title=f"{args.fabric} {args.op} {args.size:g} B on {len(collectives)} group(s) "
                             f"[{', '.join(result.algorithms)}]"))
    return 0
