"""``fred replay``: an ASTRA-sim 1.0 text workload or a Chakra execution trace on the fabrics."""

from __future__ import annotations

import argparse

from fred.cli import print_json
from fred.commands._model_options import add_platform_arguments, model_platform, switch_timing_text
from fred.table import format_table
from fred.commands._option_types import RANGES

HELP = "replay an ASTRA-sim 1.0 text workload or a Chakra trace (its own compute times) on the fabrics"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help="ASTRA-sim 1.0 workload (.txt) or Chakra trace (<prefix>.<rank>.et)")
    parser.add_argument("--format", choices=("auto", "astra-sim", "chakra"), default="auto",
                        help="input format (auto: .et is Chakra, anything else ASTRA-sim text)")
    parser.add_argument("--fabric", action="append", default=None,
                        help="fabric to run on (repeatable; default: every fabric of the platform)")
    add_platform_arguments(parser)
    parser.add_argument("--npus", type=RANGES["npus"], default=None,
                        help="NPUs running the trace (default: the file's, else the platform's)")
    parser.add_argument("--mp", type=RANGES["npus"], default=1,
                        help="Chakra: model-parallel group size for nodes with pg_name mp/tp/dp")
    parser.add_argument("--cycle-ns", type=RANGES["cycle_ns"], default=1.0,
                        help="ASTRA-sim: nanoseconds per compute cycle (default 1: ASTRA-sim's 1 GHz)")


def run(args) -> int:
    from hdl.contracts.errors import FredError
    from sysmodel.rank_replay import has_explicit_groups
    from sysmodel.trace import replay
    platform = model_platform(args)
    fmt = args.format
    if fmt == "auto":
        fmt = "chakra" if args.trace.endswith(".et") else "astra-sim"
    if args.npus is not None and args.npus < 1:
        raise FredError(f"--npus must be a positive integer, got {args.npus}")
    if fmt == "chakra":
        from sysmodel.chakra_trace import load_chakra
        trace = load_chakra(args.trace, npus=args.npus, mp=args.mp,
                            peak_flops=platform.peak_flops * platform.compute_efficiency)
        if has_explicit_groups(trace):   # per-rank files (fred export-trace): every rank read
            return _print(args, platform, trace, _replay_ranks(args, platform, trace), per_rank=True)
    else:
        from sysmodel.astrasim import load_astrasim
        try:
            trace = load_astrasim(args.trace, npus=args.npus, cycle_ns=args.cycle_ns)
        except FredError as exc:
            if "no all_gpus" not in str(exc):
                raise
            trace = load_astrasim(args.trace, npus=platform.npus, cycle_ns=args.cycle_ns)
    fabrics = args.fabric or list(platform.fabrics)
    return _print(args, platform, trace, {f: replay(platform, f, trace) for f in fabrics})


def _replay_ranks(args, platform, trace) -> dict:
    """Every rank's file beside ``args.trace`` replayed together (docs/chakra_export.md)."""
    from hdl.contracts.errors import FredError
    from sysmodel.chakra_trace import load_chakra_ranks
    from sysmodel.rank_replay import replay_ranks
    if args.npus is not None:
        raise FredError("--npus: a trace set whose collectives name their groups has one file "
                        "per NPU; the NPU count is the number of files")
    traces = load_chakra_ranks(args.trace, mp=args.mp,
                               peak_flops=platform.peak_flops * platform.compute_efficiency)
    trace.npus = len(traces)
    trace.source = f"{trace.source}, {len(traces)} ranks"
    return {f: replay_ranks(platform, f, traces, name=trace.name)
            for f in args.fabric or list(platform.fabrics)}


def _print(args, platform, trace, results, *, per_rank: bool = False) -> int:
    base = results.get("mesh")
    if args.json:
        out = {"trace": trace.name, "source": trace.source, "npus": trace.npus, "mp": trace.mp,
               "results": {f: r.to_dict() for f, r in results.items()}}
        if base:
            out["speedup"] = {f: base.time_s / r.time_s for f, r in results.items() if f != "mesh"}
        print_json(out)
        return 0
    print(switch_timing_text(platform))
    print()
    cats = [k for k in next(iter(results.values())).breakdown]
    rows = [[f, f"{r.time_s:.6g}", *(f"{r.breakdown[c]:.4g}" for c in cats),
             *([f"{base.time_s / r.time_s:.3f}"] if base else [])] for f, r in results.items()]
    print(format_table(["fabric", "s/iteration", *cats, *(["speedup"] if base else [])], rows,
                       title=f"{trace.source}: {len(trace.nodes)} nodes, {trace.npus} NPUs"
                             + ("" if per_rank else f", MP groups of {trace.mp}")))
    for note in next(iter(results.values())).notes:
        print(f"note: {note}")
    return 0
