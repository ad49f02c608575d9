"""``fred collective`` on a cluster platform (a file listing ``[[dimensions]]``): one collective
across the dimensions, chunked and scheduled (docs/cluster.md)."""

from __future__ import annotations

from fred.cli import print_json
from fred.table import format_table
from hdl.contracts.errors import FredError


def run_cluster(args) -> int:
    """Time ``args.op`` of ``args.size`` bytes per NPU on the cluster ``args.platform`` over
    ``args.group`` (``all`` or comma-separated dimension names) with ``args.schedule``."""
    from sysmodel.dimensions import load_cluster
    from sysmodel.multidim_collectives import DEFAULT_CHUNKS, MULTIDIM_OPS, run_collective
    if args.op not in MULTIDIM_OPS:
        raise FredError(f"--op {args.op} has no multi-dimensional form; on a cluster use one of "
                        f"{', '.join(MULTIDIM_OPS)}")
    for option in ("strategy", "dim", "root", "fabric"):
        if getattr(args, option, None) is not None:
            raise FredError(f"--{option} applies to a wafer platform; {args.platform} is a cluster "
                            f"(its dimensions name their fabrics)")
    schedule = args.schedule or "themis"
    chunks = DEFAULT_CHUNKS if args.chunks is None else args.chunks
    if args.group is None:
        raise FredError("a cluster takes --group all or --group DIM,DIM (dimension names)")
    cluster = load_cluster(args.platform, characterization=args.characterization)
    group = args.group.strip()
    dimensions = None if group.lower() == "all" else [g.strip() for g in group.split(",") if g.strip()]
    result = run_collective(cluster, args.op, args.size, dimensions=dimensions,
                            schedule=schedule, chunks=chunks)
    if args.json:
        print_json({"platform": cluster.to_dict(), **result.to_dict(),
                    "effective_bandwidth_per_npu_gbps": args.size / result.time_s / 1e9})
        return 0
    dims = {d.name: d for d in cluster.dimensions}
    rows = [[u.name, dims[u.name].kind, str(dims[u.name].size), f"{dims[u.name].bandwidth_gbps:g}",
             f"{u.busy_s * 1e6:.3f}", f"{u.utilization:.3f}", f"{u.bandwidth_utilization:.3f}"]
            for u in result.dimensions]
    title = (f"{cluster.name}: {args.op} {args.size:g} B per NPU over {args.group}, "
             f"{schedule} schedule, {chunks} chunks: {result.time_s * 1e6:.3f} us, "
             f"bandwidth utilization {result.bandwidth_utilization:.3f}")
    print(format_table(["dimension", "kind", "size", "GBps/NPU", "busy us", "busy/time", "bw util"],
                       rows, align="llrrrrr", title=title))
    return 0
