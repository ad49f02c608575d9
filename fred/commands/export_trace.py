"""``fred export-trace``: one training iteration of the model as Chakra execution traces, one
file per NPU (docs/chakra_export.md); ``fred replay`` runs them again."""

from __future__ import annotations

import argparse

from fred.cli import print_json
from fred.commands._model_options import add_platform_arguments, model_platform, switch_timing_text
from fred.commands._option_types import RANGES, output_path
from fred.table import format_table

HELP = "export one training iteration of the model as Chakra traces, one file per NPU (--scale K)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from sysmodel.workloads import WORKLOADS
    parser.add_argument("--workload", required=True, metavar="NAME_OR_FILE",
                        help=f"a preset ({', '.join(WORKLOADS)}) or a workload file (.toml / .json)")
    parser.add_argument("-o", "--output", required=True, metavar="FOLDER",
                        help="folder for the files <prefix>.<rank>.et (created if missing)")
    parser.add_argument("--prefix", default="iteration",
                        help="file name prefix (default: iteration)")
    parser.add_argument("--fabric", action="append", default=None,
                        help="fabric whose model iteration time is reported (repeatable; default: "
                             "every fabric of the platform; the files do not depend on it)")
    parser.add_argument("--strategy", default=None,
                        help="MP<a>-DP<b>-PP<c> (default: the workload's)")
    parser.add_argument("--samples-per-dp", type=RANGES["samples_per_dp"], default=None,
                        help="minibatch per DP replica (default: the workload's)")
    parser.add_argument("--schedule", default="1f1b", choices=("1f1b", "gpipe"),
                        help="pipeline schedule (default 1f1b)")
    parser.add_argument("--scale", type=RANGES["trace_scale"], default=1.0, metavar="K",
                        help="divide every compute time and every collective's bytes by K "
                             "(layers and microbatches are kept; default 1: the model's iteration)")
    parser.add_argument("--no-overlap", action="store_true",
                        help="serialised mode: communication never overlaps compute (docs/sysmodel.md)")
    parser.add_argument("--network-platform", default=None, metavar="TOML",
                        help="time the communication on this platform's fabrics instead (e.g. an RTL "
                             "fabric's, printed by fred fabric-sim --json as model_platform_toml); "
                             "--platform still gives memory, microbatches and compute times")
    add_platform_arguments(parser)


def run(args) -> int:
    from hdl.contracts.placement import parse_strategy
    from sysmodel.chakra_writer import write_chakra_ranks
    from sysmodel.iteration_export import export_iteration
    from sysmodel.workload_file import get_workload
    output_path(args.output, "--output", folder=True)
    platform = model_platform(args)
    network = platform
    if args.network_platform is not None:
        from sysmodel.platform import load_platform
        network = load_platform(args.network_platform, characterization=args.characterization)
    workload = get_workload(args.workload)
    strategy = parse_strategy(args.strategy) if args.strategy else None
    fabrics = args.fabric or list(network.fabrics)
    for fabric in fabrics:
        network.check_fabric(fabric)
    exports = {f: export_iteration(platform, f, workload, strategy, schedule=args.schedule,
                                   samples_per_dp=args.samples_per_dp, overlap=not args.no_overlap,
                                   scale=args.scale, network=network) for f in fabrics}
    first = exports[fabrics[0]]
    paths = write_chakra_ranks(args.output, args.prefix, first.ranks, description=first.description)
    if args.json:
        print_json({"description": first.description, "files": [str(p) for p in paths],
                    "nodes_per_rank": {r: len(n) for r, n in first.ranks.items()},
                    "tasks": first.tasks, "scale": args.scale,
                    "model": {f: {"time_s": e.time_s, "breakdown": e.breakdown,
                                  "comm_busy": e.comm_busy, "config_load_s": e.config_load_s}
                              for f, e in exports.items()}})
        return 0
    print(switch_timing_text(network))
    if network is not platform:
        print(f"communication timed on {network.name!r} ({args.network_platform}); compute on "
              f"{platform.name!r}")
    print()
    cats = list(first.breakdown)
    rows = [[f, f"{e.time_s:.6g}", *(f"{e.breakdown[c]:.4g}" for c in cats)]
            for f, e in exports.items()]
    print(format_table(["fabric", "s/iteration", *cats], rows,
                       title=f"model: {first.description} (one iteration, without the one-time "
                             f"switch configuration load)"))
    nodes = sorted({len(n) for n in first.ranks.values()})
    print(f"wrote {len(paths)} files {paths[0].parent}/{args.prefix}.<0..{len(paths) - 1}>.et "
          f"({first.tasks} model tasks; {nodes[0]}..{nodes[-1]} nodes per rank)")
    print(f"replay: fred replay {paths[0]}")
    for note in first.notes:
        print(f"note: {note}")
    return 0
