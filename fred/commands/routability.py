"""``fred routability``: how often port partitions (all-reduce groups) and 3D-parallel
placements route on Fred_m(P) in one phase."""

from __future__ import annotations

import argparse

from fred.cli import print_json
from hdl.contracts.errors import FredError
from hdl.compiler.routability import partition_stats, placement_report
from hdl.compiler.router import DEFAULT_BUDGET
from fred.commands._option_types import RANGES

HELP = "fraction of port partitions and 3D-parallel placements routable in one phase"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ports", type=RANGES["routability_ports"], required=True, help="P, number of switch ports")
    parser.add_argument("--middle", type=RANGES["middle"], default=3, help="m, middle subnetworks (default 3)")
    how = parser.add_mutually_exclusive_group(required=True)
    how.add_argument("--exhaustive", action="store_true", help="every partition of the ports")
    how.add_argument("--samples", type=RANGES["samples"], help="this many uniformly random partitions")
    parser.add_argument("--seed", type=RANGES["seed"], default=0, help="random seed for --samples (default 0)")
    parser.add_argument("--npus", type=RANGES["npus"], default=None,
                        help="placements of this many NPUs on ports 0..N-1 (default: P)")
    parser.add_argument("--no-placements", action="store_true", help="skip the 3D-parallel placements")
    parser.add_argument("--no-backtrack", action="store_true",
                        help="first valid colouring per level only (the paper's greedy algorithm), "
                             "for comparison; its failures count as 'search bound'")
    parser.add_argument("--budget", type=RANGES["budget"], default=DEFAULT_BUDGET,
                        help=f"search bound in nodes per one-phase attempt (default {DEFAULT_BUDGET})")


def run(args) -> int:
    if args.samples is not None and args.samples < 1:
        raise FredError(f"--samples must be >= 1, got {args.samples}")
    stats = partition_stats(ports=args.ports, middle=args.middle, exhaustive=args.exhaustive,
                            samples=args.samples or 0, seed=args.seed, budget=args.budget,
                            backtrack=not args.no_backtrack)
    if not args.no_placements:
        stats["placements"] = placement_report(ports=args.ports, middle=args.middle,
                                               npus=args.npus, budget=args.budget)
    if args.json:
        print_json(stats)
        return 0
    source = ("all" if stats["mode"] == "exhaustive" else f"{stats['total']} random (seed {args.seed})")
    print(f"Fred_{args.middle}({args.ports}), {source} partitions of the ports into all-reduce groups:")
    print(f"  routable in one phase: {stats['one_phase_count']}/{stats['total']} = "
          f"{stats['one_phase_fraction']:.4f}; mean phases {stats['mean_phases']:.4f}; "
          f"phases histogram {stats['phase_histogram']}"
          + (f"; {stats['search_bound_count']} hit the search bound" if stats["search_bound_count"] else ""))
    if "placements" in stats:
        npus = args.npus or args.ports
        print(f"3D-parallel placements of {npus} NPUs (port = mp + MP*(pp + PP*dp)):")
        for entry in stats["placements"]:
            kinds = ", ".join(f"{k} {'1 phase' if v['one_phase'] == 'routed' else str(v['phase_count']) + ' phases'}"
                              for k, v in entry["phases"].items()) or "no traffic"
            print(f"  {entry['placement']:22s} {'OK ' if entry['all_one_phase'] else 'NO '} {kinds}")
            for kind, value in entry["phases"].items():
                if "why" in value:
                    why = value["why"]
                    print(f"      {kind}: {why['reason']}; minimal core {why['core']}")
                    for line in why["conflicts"][:4]:
                        print(f"        {line}")
    return 0
