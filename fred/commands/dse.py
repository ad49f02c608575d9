"""``fred dse``: design-space exploration of the FRED fabric -- performance and performance per
cost of fabric designs x strategies for each workload (docs/dse.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from fred.cli import print_json
from fred.commands._dse_optimize import add_optimize_arguments, run_optimize
from fred.commands._model_options import add_model_arguments, model_platform, switch_timing_json, switch_timing_text
from fred.commands._parallel_options import add_parallel_arguments, parallel_settings
from fred.table import format_table
from fred.commands._option_types import RANGES
from hdl.contracts.errors import FredError

HELP = ("sweep fabric designs x strategies per workload; rank by time per sample and per cost; Pareto front; "
        "or --optimize bandwidth: each cluster dimension's bandwidth under a budget")


def _ints(text: str) -> tuple:
    return tuple(int(v) for v in _items(text))


def _floats(text: str) -> tuple:
    return tuple(float(v) for v in _items(text))


def _switches(text: str) -> tuple:
    table = {"on": True, "off": False, "true": True, "false": False}
    out = []
    for v in _items(text):
        if v.lower() not in table:
            raise argparse.ArgumentTypeError(f"expected on/off, got {v!r}")
        out.append(table[v.lower()])
    return tuple(out)


def _items(text: str) -> list[str]:
    items = [v.strip() for v in text.split(",") if v.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from studies.dse import DseGrid
    from sysmodel.workloads import WORKLOADS
    g = DseGrid()

    def default(values) -> str:
        return ",".join(("on" if v else "off") if isinstance(v, bool) else f"{v:g}" for v in values)
    parser.add_argument("--workload", default=",".join(WORKLOADS), metavar="NAMES",
                        help=f"comma-separated presets or workload files (default: {','.join(WORKLOADS)})")
    parser.add_argument("--npus-per-l1", type=_ints, default=g.npus_per_l1, metavar="LIST",
                        help=f"NPUs per L1 switch (default {default(g.npus_per_l1)})")
    parser.add_argument("--l1-l2-fraction", type=_floats, default=g.l1_l2_fraction, metavar="LIST",
                        help="L1-L2 bandwidth per L1 as a fraction of its NPUs' bandwidth "
                             f"(default {default(g.l1_l2_fraction)}; 1 = Fred-C/D, 0.125 = Fred-A/B)")
    parser.add_argument("--in-switch", type=_switches, default=g.in_switch, metavar="LIST",
                        help=f"in-switch collectives on/off (default {default(g.in_switch)})")
    parser.add_argument("--middle", type=_ints, default=g.middle, metavar="LIST",
                        help=f"middle subnetworks m of the Fred_m(P) chiplets (default {default(g.middle)})")
    parser.add_argument("--chiplet-ports", type=_ints, default=g.chiplet_ports, metavar="LIST",
                        help=f"ports P of a switch chiplet (characterized sizes; default "
                             f"{default(g.chiplet_ports)})")
    parser.add_argument("--io-controllers", type=_ints, default=g.io_controllers, metavar="LIST",
                        help=f"I/O controllers (default {default(g.io_controllers)})")
    parser.add_argument("--strategies", default="all", metavar="LIST",
                        help="MP<a>-DP<b>-PP<c> strategies to run on every design (default: all)")
    parser.add_argument("--samples-per-dp", type=RANGES["samples_per_dp"], default=40,
                        help="minibatch per DP replica (default 40, as the strategy sweep)")
    parser.add_argument("--cost", default=None, metavar="FILE",
                        help="cost model TOML (default: the shipped configs/cost.toml)")
    parser.add_argument("-o", "--output", default=None,
                        help="folder for CSV, JSON and the Pareto plot (default results/dse; with "
                             "--json nothing is written unless -o is given)")
    parser.add_argument("--no-files", action="store_true", help="print only; write nothing")
    parser.add_argument("--top", type=RANGES["top"], default=8, help="designs listed per ranking (default 8)")
    add_model_arguments(parser)
    add_parallel_arguments(parser, cache_default="results/dse/points.jsonl")
    add_optimize_arguments(parser)
    parser.add_argument("--mapping", default=None, metavar="DIM=dp|pp,...",
                        help="cluster platforms: what each outer dimension carries across wafers, dp "
                             "(default) or pp, e.g. rack=pp,spine=dp (the designs replace the wafers)")


def run(args) -> int:
    from fred.parallel import run_points
    from fred.progress import progress_bar
    from studies.cost import load_cost_model
    from studies.dse import DseGrid, DseMeta, dse_group, dse_point, summarise, write_dse
    from studies.points import model_fingerprint, prepare_model
    from studies.report import check_writable
    if args.optimize:
        return run_optimize(args)
    if args.budget is not None:
        raise FredError("--budget applies to --optimize bandwidth")
    if args.samples_per_dp < 1:
        raise FredError(f"--samples-per-dp must be a positive integer, got {args.samples_per_dp}")
    if args.top < 1:
        raise FredError(f"--top must be a positive integer, got {args.top}")
    if args.output is None:               # --json prints; it writes files only when asked (-o)
        args.no_files = args.no_files or args.json
        args.output = "results/dse"
    settings = parallel_settings(args)
    if args.no_files and args.cache == "results/dse/points.jsonl":
        settings["cache"] = None          # --no-files writes nothing, the default cache included
    elif settings["cache"]:
        Path(settings["cache"]).parent.mkdir(parents=True, exist_ok=True)
    if not args.no_files:
        check_writable(args.output, folder=True)   # an unwritable folder fails before the work
    cluster = _cluster_spec(args)
    ref, platform = _platform(args, cluster)
    cost = load_cost_model(args.cost)
    grid = DseGrid(npus_per_l1=args.npus_per_l1, l1_l2_fraction=args.l1_l2_fraction,
                   in_switch=args.in_switch, middle=args.middle, chiplet_ports=args.chiplet_ports,
                   io_controllers=args.io_controllers)
    designs = grid.designs(platform, cost.reference)
    strategies = None if args.strategies == "all" else _items(args.strategies)
    workloads = _items(args.workload)
    report = {}
    for workload in workloads:
        specs = _specs(workload, ref, cluster, designs, samples_per_dp=args.samples_per_dp,
                       overlap=not args.no_overlap, strategies=strategies)
        with progress_bar(len(specs), f"dse {workload}", json_output=args.json) as bar:
            results = run_points(dse_point, specs, progress=bar, version=model_fingerprint(),
                                 group=dse_group, prepare=prepare_model, **settings)
        rows = [r.value for r in results if r.ok]
        summary = summarise(rows, designs, platform, cost)
        meta = DseMeta(workload=workload, grid=grid.to_dict(), cost_model=cost.source,
                       switch_timing=switch_timing_json(platform), samples_per_dp=args.samples_per_dp,
                       compute_scale=args.compute_scale, overlap=not args.no_overlap,
                       points=len(specs), cached=sum(r.cached for r in results),
                       failed=[{"spec": r.spec, "error": r.error} for r in results if not r.ok])
        files = [] if args.no_files else write_dse(Path(args.output), workload, rows, summary, meta)
        report[workload] = (meta, summary, [str(f) for f in files])
    failed = any(meta.failed for meta, _, _ in report.values())
    if args.json:
        print_json({w: _json(meta, summary, files, args.top) for w, (meta, summary, files) in report.items()})
        return 1 if failed else 0
    print(switch_timing_text(platform))
    if cluster is not None:
        mapping = ", ".join(f"{k}={v}" for k, v in cluster["mapping"].items()) or "dp across every outer dimension"
        print(f"cluster: {args.platform}, every wafer a design; {mapping}; cross-wafer all-reduce "
              f"{cluster['schedule']}, {cluster['chunks']} chunks")
    print(f"cost model: {cost.source}; {len(designs)} designs x "
          f"{len(strategies) if strategies else 'all'} strategies per workload")
    for workload, (meta, summary, files) in report.items():
        _print(workload, meta, summary, files, args.top)
    return 1 if failed else 0


def _platform(args, cluster: dict | None) -> tuple:
    """``(platform ref or None, the wafer platform the designs start from)``: the options' wafer
    platform, or the cluster's wafers (which the designs replace)."""
    from studies.points import platform_from_ref, platform_ref
    if cluster is None:
        model_platform(args)              # validates the platform options with their messages
        ref = platform_ref(args.platform, args.characterization, args.compute_scale)
        return ref, platform_from_ref(ref)
    from studies.cluster_points import cluster_from_spec
    return None, cluster_from_spec(cluster).dimensions[0].wafer


def _specs(workload: str, ref, cluster, designs, **options) -> list[dict]:
    from studies.cluster_points import cluster_dse_specs
    from studies.dse import dse_specs
    return dse_specs(workload, ref, designs, **options) if cluster is None else \
        cluster_dse_specs(workload, cluster, designs, **options)


def _cluster_spec(args) -> dict | None:
    """The cluster ``--platform`` names (the designs then replace its wafers; its cross-wafer
    all-reduce runs ``--schedule`` in ``--chunks``, its outer dimensions as ``--mapping``
    says), or None for a wafer platform (where ``--mapping`` is an error)."""
    from studies.cluster_points import cluster_spec
    from sysmodel.cluster_training import parse_mapping
    from sysmodel.dimensions import is_cluster_file
    if args.platform is None or not is_cluster_file(args.platform):
        if args.mapping is not None:
            raise FredError("--mapping applies to a cluster platform (a file listing [[dimensions]])")
        return None
    if not args.compute_scale > 0:
        raise FredError(f"--compute-scale must be > 0, got {args.compute_scale}")
    return cluster_spec(args.platform, characterization=args.characterization, compute_scale=args.compute_scale,
                        schedule=args.schedule, chunks=args.chunks, mapping=parse_mapping(args.mapping))


def _json(meta, summary, files: list[str], top: int) -> dict:
    """One workload's ``--json`` entry."""
    from studies.report import to_json_dict
    return to_json_dict({"finding": summary.reference,
                         "pareto": [summary.design(n) for n in summary.pareto],
                         "by_time": summary.by_time[:top], "by_perf_per_cost": summary.by_perf_per_cost[:top],
                         "points": meta.points, "cached": meta.cached, "failed": meta.failed,
                         "files": files})


def _print(workload: str, meta, s, files: list[str], top: int) -> None:
    from studies.cost import FabricDesign
    ref = s.reference

    def cells(e):
        vs = f"{e.time_per_sample_s / ref.reference_time_per_sample_s:.3f}" if ref else ""
        return [e.design, e.best_strategy, f"{e.time_per_sample_s * 1e3:.4f}", vs,
                f"{e.area_mm2:.0f}", f"{e.power_w:.1f}", f"{e.samples_per_s_per_mm2 * 1e3:.4g}"]
    header = ["design", "best strategy", "ms/sample", "vs Fred-D", "area mm2", "power W", "samples/s/kmm2"]
    print()
    print(format_table(header, [cells(s.design(n)) for n in s.pareto], align="llrrrrr",
                       title=f"{workload}: Pareto front (time per sample vs fabric area; "
                             f"{meta.points} points, {meta.cached} from the cache)"))
    print()
    print(format_table(header, [cells(s.design(n)) for n in s.by_perf_per_cost[:top]], align="llrrrrr",
                       title=f"{workload}: best performance per cost (samples/s per 1000 mm2 of fabric)"))
    if ref:
        print(f"Fred-D ({ref.reference}, {ref.reference_strategy}): "
              f"{ref.reference_time_per_sample_s * 1e3:.4f} ms/sample, {ref.reference_area_mm2:.0f} mm2; "
              f"cheapest within {100 * ref.within:.0f} %: {ref.cheapest_within} "
              f"({ref.cheapest_within_strategy}, {ref.cheapest_within_time_per_sample_s * 1e3:.4f} ms/sample, "
              f"{ref.cheapest_within_area_mm2:.0f} mm2, {100 * ref.area_saving:.0f} % less area); "
              f"fastest: {ref.fastest}")
    for f in meta.failed:
        print(f"FAILED point {FabricDesign(**f['spec']['design']).name} {f['spec']['strategy']}: {f['error']}")
    if files:
        print(f"wrote {', '.join(files)}")
