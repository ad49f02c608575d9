"""Does chunk resizing keep Themis' greedy from losing to the fixed order? (docs/cluster.md,
"Chunk resizing"). One 1 GB all-reduce per NPU, 64 recommended chunks, on the FRED-wafer and
mesh-wafer clusters as the scale-out bandwidth per NPU grows, and on the Themis-style
topologies: ``fixed``, ``themis`` (equal chunks), ``themis-resize`` (ASTRA-sim OfflineGreedy's
resizing: a chunk may grow to fill the load gap) and the same resizing shrink-only (a chunk
at most the recommended size; an experiment, not a schedule name). Everything is computed here
(``fred cluster --resize-study``, about 30 s: resized chunks of many sizes each cost a wafer
model evaluation)."""

from __future__ import annotations

from dataclasses import replace

from studies.cluster_study import CLUSTERS, THEMIS_TOPOLOGIES
from sysmodel.dimensions import load_cluster
from sysmodel.multidim_collectives import run_collective

__all__ = ["SCALE_OUT_GBPS", "resize_row", "resize_table", "render"]

SCALE_OUT_GBPS = (50, 100, 200, 400, 800, 1600, 3000)
VARIANTS = (("fixed", "fixed", None), ("themis", "themis", None), ("themis-resize", "themis-resize", None),
            ("shrink-only", "themis-resize", 1.0))


def resize_row(cluster, label: str, size: float = 1e9, chunks: int = 64) -> dict:
    """One case: each variant's time and chunk count."""
    row = {"case": label}
    for name, schedule, growth in VARIANTS:
        extra = {} if growth is None else {"resize_max_growth": growth}
        r = run_collective(cluster, "all-reduce", size, schedule=schedule, chunks=chunks, **extra)
        row[name] = (r.time_s, r.chunks)
    return row


def resize_table(scale_out=SCALE_OUT_GBPS) -> list[dict]:
    rows = []
    for kind, path in CLUSTERS.items():
        base = load_cluster(path)
        wafer, out = base.dimensions
        for gbps in scale_out:
            c = replace(base, dimensions=(wafer, replace(out, bandwidth_gbps=float(gbps))))
            rows.append(resize_row(c, f"{kind} wafers, scale-out {gbps} GBps/NPU"))
    rows += [resize_row(load_cluster(t), t) for t in THEMIS_TOPOLOGIES]
    return rows


def render() -> str:
    head = "| case | fixed ms | themis ms | themis-resize ms (chunks) | shrink-only ms (chunks) | best |\n|---|---|---|---|---|---|\n"
    lines = []
    for r in resize_table():
        best = min((n for n, _, _ in VARIANTS), key=lambda n: r[n][0])
        lines.append(f"| {r['case']} | {r['fixed'][0] * 1e3:.3f} | {r['themis'][0] * 1e3:.3f} | "
                     f"{r['themis-resize'][0] * 1e3:.3f} ({r['themis-resize'][1]}) | "
                     f"{r['shrink-only'][0] * 1e3:.3f} ({r['shrink-only'][1]}) | {best} |")
    return head + "\n".join(lines) + "\n"
