"""``fred sweep``: every MP x DP x PP factorisation of the NPU count, ranked by iteration time."""

from __future__ import annotations

import argparse
import math

from fred.cli import print_json

HELP = "rank every MP x DP x PP strategy of a workload on a fabric"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from sysmodel.platform import FABRICS
    from sysmodel.workloads import WORKLOADS
    parser.add_argument("--workload", required=True, choices=WORKLOADS)
    parser.add_argument("--fabric", required=True, choices=FABRICS)
    parser.add_argument("--samples-per-dp", type=int, default=40,
                        help="minibatch per DP replica (paper's sweep: 40)")
    parser.add_argument("--platform", default=None, help="platform TOML (default: shipped paper platform)")


def run(args) -> int:
    from sysmodel.evaluation import sweep
    from sysmodel.platform import default_platform, load_platform
    from fred.errors import FredError
    if args.samples_per_dp < 1:
        raise FredError(f"--samples-per-dp must be a positive integer, got {args.samples_per_dp}")
    platform = load_platform(args.platform) if args.platform else default_platform()
    rows = sweep(args.workload, args.fabric, platform, samples_per_dp=args.samples_per_dp,
                 progress=not args.json)
    if args.json:
        print_json({"workload": args.workload, "fabric": args.fabric,
                    "ranking": [{k: (None if isinstance(v, float) and math.isinf(v) else v)
                                 for k, v in r.items()} for r in rows]})
        return 0
    print(f"{'rank':>4s} {'strategy':14s} {'ms/sample':>10s} {'iter_s':>10s} {'compute':>9s} "
          f"{'exposed':>9s} {'bubble':>9s}")
    for r in rows:
        if r["feasible"]:
            print(f"{r['rank']:4d} {r['strategy']:14s} {r['time_per_sample_s'] * 1e3:10.4f} "
                  f"{r['time_s']:10.4f} {r['compute_s']:9.4f} "
                  f"{r['exposed_comm_s']:9.4f} {r['bubble_s']:9.4f}")
        else:
            print(f"{r['rank']:4d} {r['strategy']:14s} does not fit: {r['notes']}")
    return 0
