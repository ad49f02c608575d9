"""``fred load-curve``: latency against offered load on the packet switch's RTL, or with ``--mesh`` on
the 2D-mesh RTL (docs/load_curve.md)."""

from __future__ import annotations

import argparse

from fred.cli import print_json
from fred.commands._option_types import RANGES, output_path
from fred.table import format_table

HELP = ("latency vs offered load (uniform, transpose, hotspot) on the packet switch RTL or (--mesh) "
        "the mesh RTL; saturation point")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ports", type=RANGES["load_ports"], default=None, help="P, switch ports (default 8)")
    parser.add_argument("--middle", type=RANGES["middle"], default=None, help="m, middle subnetworks (default 3)")
    parser.add_argument("--mesh", type=RANGES["load_mesh"], default=None, metavar="ROWSxCOLS",
                        help="run on a ROWS x COLS mesh of the mesh routers (docs/mesh_rtl.md) instead of "
                             "the packet switch; packets default to 4 flits")
    parser.add_argument("--patterns", default="uniform,transpose,hotspot",
                        help="comma list of traffic patterns: uniform, transpose, hotspot (default all)")
    parser.add_argument("--rates", type=RANGES["load_rates"], default=(0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 0.9),
                        help="offered loads, flits per cycle per input (default 0.05,0.1,0.2,0.3,0.4,0.5,0.7,0.9)")
    parser.add_argument("--packet-flits", type=RANGES["packet_flits"], default=None,
                        help="flits per packet (default 8; 4 with --mesh)")
    parser.add_argument("--warmup", type=RANGES["load_cycles"], default=100,
                        help="cycles of traffic before the measurement (default 100)")
    parser.add_argument("--measure", type=RANGES["load_cycles"], default=400,
                        help="cycles whose packets are measured (default 400)")
    parser.add_argument("--seed", type=RANGES["seed"], default=0, help="random seed (default 0)")
    parser.add_argument("-o", "--output", default=None, metavar="DIR",
                        help="write load_curve.csv, .json and .png into DIR")


def run(args) -> int:
    from hdl.contracts.errors import FredError
    from studies.load_curve import PATTERNS, run_load_curve
    patterns = tuple(p.strip() for p in args.patterns.split(",") if p.strip())
    unknown = [p for p in patterns if p not in PATTERNS]
    if unknown or not patterns:
        raise FredError(f"--patterns: unknown pattern(s) {', '.join(unknown) or '(none given)'}; "
                        f"expected a comma list of {', '.join(PATTERNS)}")
    if args.output:
        output_path(args.output, "--output", folder=True)
    if args.mesh:
        return _run_mesh(args, patterns)
    args.ports, args.middle = args.ports or 8, args.middle or 3
    curve = run_load_curve(ports=args.ports, middle=args.middle, patterns=patterns, rates=args.rates,
                           packet_flits=args.packet_flits or 8, warmup=args.warmup, measure=args.measure,
                           seed=args.seed, progress=not args.json)
    title = (f"Fred_{curve.middle}({curve.ports}) packet switch, online unicast, {curve.packet_flits}-flit "
             f"packets; zero-load latency {curve.zero_load_latency} cycles (throughput in flits/cycle/port, "
             "latency in cycles)")
    return _report(args, curve, patterns, title)


def _run_mesh(args, patterns) -> int:
    from hdl.contracts.errors import FredError
    from studies.mesh_load_curve import run_mesh_load_curve
    if args.ports or args.middle:
        raise FredError("--ports/--middle are the packet switch's; --mesh runs the mesh routers")
    rows, cols = args.mesh
    curve = run_mesh_load_curve(rows=rows, cols=cols, patterns=patterns, rates=args.rates,
                                packet_flits=args.packet_flits or 4, warmup=args.warmup, measure=args.measure,
                                seed=args.seed, progress=not args.json)
    title = (f"{rows} x {cols} mesh of mesh routers, dimension-order routing on 2 VCs, {curve.packet_flits}-flit "
             f"packets, links 1 flit/cycle; zero-load latency {curve.zero_load_latency:g} cycles mean over "
             f"all pairs, {curve.zero_load_max} farthest (throughput in flits/cycle/NPU, latency in cycles)")
    return _report(args, curve, patterns, title)


def _report(args, curve, patterns, title) -> int:
    from studies.load_curve import write_load_curve
    if args.output:
        write_load_curve(args.output, curve)
    if args.json:
        from studies.report import to_json_dict
        print_json(to_json_dict(curve))
        return 0
    rows = [[p.pattern, f"{p.offered:g}", f"{p.generated:.3f}", f"{p.accepted:.3f}",
             "-" if p.mean_latency is None else f"{p.mean_latency:.1f}",
             "-" if p.p99_latency is None else str(p.p99_latency),
             f"{p.delivered_packets}/{p.measured_packets}", "yes" if p.saturated else ""] for p in curve.points]
    print(format_table(["pattern", "offered", "generated", "accepted", "mean latency", "p99", "delivered",
                        "saturated"], rows, title=title))
    for pattern in patterns:
        sat = curve.saturation[pattern]
        print(f"{pattern}: " + (f"saturates at offered {sat:g}" if sat is not None else "no point saturated")
              + f"; highest accepted throughput {curve.saturation_throughput[pattern]:.3f}")
    if args.output:
        print(f"wrote {args.output}/load_curve.csv, load_curve.json, load_curve.png")
    return 0
