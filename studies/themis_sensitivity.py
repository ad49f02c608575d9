"""How the Themis gain moves with the inputs the Themis paper's text (abstract only) leaves
unknown (docs/cluster.md, "Themis reproduction"): each shipped ``themis-*.toml`` topology
with one input changed at a time, gain = fixed-order time / Themis time of one all-reduce
(equal chunks, ``sysmodel.multidim_collectives``).

Inputs varied (base: 1 GB per NPU, 64 chunks, the file's bandwidths, 500 ns per step):

* the bandwidth profile across dimensions: the file's; all equal (100 GBps); falling outwards
  by 2x per dimension; rising outwards by 2x per dimension (the innermost, which the fixed
  order loads most, the slowest); all from 100 GBps at the innermost;
* the chunk count: 16, 64, 256;
* the latency per step: 0, 500 ns, 5 us;
* the all-reduce size: 64 MB, 1 GB.

And the dimension count alone (:func:`dimension_count_table`): 1,024 NPUs as 2, 3 and 4
switch dimensions of equal bandwidth, beside the balance estimate ``k L_1 / sum L_i`` (``L_i``
the bytes per NPU the fixed order puts on dimension ``i``, ``(n_i - 1)/n_i`` of what reaches
it, times 2; Themis at best spreads the same bytes evenly over the ``k`` equal dimensions).

End to end (:func:`end_to_end_table`): the paper's workloads this project models, on the
10,000-NPU four-dimensional cluster of FRED wafers (:func:`studies.megatron_study.megatron_clusters`;
wafer x rack x pod x spine, DP across all three outer dimensions), fixed order against Themis
for the cross-wafer gradient all-reduce, with the wafers' compute as documented and 10x and
100x faster (``Platform.with_compute_scale``): the end-to-end gain follows the share of the
iteration the exposed cross-wafer reduction takes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
import math

from sysmodel.dimensions import Cluster, Dimension, load_cluster
from sysmodel.multidim_collectives import run_collective

__all__ = ["PROFILES", "EQUAL_SWITCH_SHAPES", "SensitivityRow", "sensitivity_table", "balance_estimate",
           "dimension_count_table", "EndToEndRow", "end_to_end_table", "render"]

#: 1,024 NPUs as equal-bandwidth switch dimensions (innermost first)
EQUAL_SWITCH_SHAPES = ((32, 32), (8, 8, 16), (4, 4, 8, 8))

#: bandwidth profile name -> GBps per NPU of dimension i of k (None: the file's)
PROFILES = {
    "file": None,
    "equal": lambda i, k: 100.0,
    "falling 2x": lambda i, k: 100.0 / 2 ** i,
    "rising 2x": lambda i, k: 100.0 * 2 ** i,
}


@dataclass(frozen=True)
class SensitivityRow:
    topology: str
    varied: str          # which input, and its value
    fixed_s: float
    themis_s: float

    @property
    def gain(self) -> float:
        return self.fixed_s / self.themis_s


def _profiled(cluster: Cluster, profile: str) -> Cluster:
    bandwidth = PROFILES[profile]
    if bandwidth is None:
        return cluster
    k = len(cluster.dimensions)
    return replace(cluster, dimensions=tuple(replace(d, bandwidth_gbps=bandwidth(i, k))
                                             for i, d in enumerate(cluster.dimensions)))


def _latency(cluster: Cluster, ns: float) -> Cluster:
    return replace(cluster, dimensions=tuple(replace(d, latency_ns=ns) for d in cluster.dimensions))


def _row(name: str, varied: str, cluster: Cluster, size: float, chunks: int) -> SensitivityRow:
    f, t = (run_collective(cluster, "all-reduce", size, schedule=s, chunks=chunks) for s in ("fixed", "themis"))
    return SensitivityRow(name, varied, f.time_s, t.time_s)


def sensitivity_table(topologies=None) -> list[SensitivityRow]:
    from studies.cluster_study import THEMIS_TOPOLOGIES
    rows = []
    for name in topologies or THEMIS_TOPOLOGIES:
        base = load_cluster(name)
        label = base.name
        for profile in PROFILES:
            rows.append(_row(label, f"bandwidth {profile}", _profiled(base, profile), 1e9, 64))
        for chunks in (16, 256):
            rows.append(_row(label, f"chunks {chunks}", base, 1e9, chunks))
        for ns in (0.0, 5000.0):
            rows.append(_row(label, f"latency {ns:g} ns", _latency(base, ns), 1e9, 64))
        rows.append(_row(label, "size 64 MB", base, 64e6, 64))
    return rows


def _equal_switches(sizes) -> Cluster:
    dims = tuple(Dimension(f"d{i}", "switch", n, 100.0, 500.0, False) for i, n in enumerate(sizes))
    return Cluster("x".join(map(str, sizes)) + " switches, 100 GBps each", "", math.prod(sizes), dims)


def balance_estimate(sizes) -> float:
    """``k L_1 / sum L_i`` for equal-bandwidth dimensions of ``sizes`` (module docstring)."""
    loads, reaching = [], 1.0
    for n in sizes:
        loads.append((n - 1) / n * reaching)
        reaching /= n
    return len(sizes) * loads[0] / sum(loads)


def dimension_count_table(shapes=EQUAL_SWITCH_SHAPES) -> list[tuple[SensitivityRow, float]]:
    return [(_row(_equal_switches(s).name, "equal switches", _equal_switches(s), 1e9, 64), balance_estimate(s))
            for s in shapes]


@dataclass(frozen=True)
class EndToEndRow:
    workload: str
    compute_scale: float
    fixed_s: float
    themis_s: float
    reduction_share: float     # the fixed order's cross-wafer reduction / its iteration

    @property
    def gain(self) -> float:
        return self.fixed_s / self.themis_s


def end_to_end_table(workloads=None, scales=(1.0, 10.0, 100.0)) -> list[EndToEndRow]:
    from studies.megatron_study import megatron_clusters
    from sysmodel.cluster_training import simulate_cluster_iteration
    from sysmodel.dimensions import with_wafer
    from sysmodel.workload_file import get_workload
    from sysmodel.workloads import WORKLOADS
    base = megatron_clusters(10000)["fred"]
    wafer = base.dimensions[0]
    rows = []
    for scale in scales:
        cluster = base if scale == 1.0 else with_wafer(base, wafer.wafer.with_compute_scale(scale), wafer.fabric)
        for w in workloads or WORKLOADS:
            f, t = (simulate_cluster_iteration(cluster, get_workload(w), schedule=s) for s in ("fixed", "themis"))
            rows.append(EndToEndRow(w, scale, f.time_s, t.time_s, f.cross_wafer.time_s / f.time_s))
    return rows


def _summary(rows, varied: str) -> tuple[float, float]:
    gains = [r.gain for r in rows if r.varied == varied]
    return sum(gains) / len(gains), max(gains)


def render() -> str:
    """The table (topologies as columns) and the mean / max gain over the topologies per
    variant, as Markdown."""
    from studies.report import table_text
    rows = sensitivity_table()
    topologies = list(dict.fromkeys(r.topology for r in rows))
    variants = list(dict.fromkeys(r.varied for r in rows))
    gain = {(r.topology, r.varied): r.gain for r in rows}
    body = []
    for v in variants:
        mean, top = _summary(rows, v)
        body.append([v] + [f"{gain[t, v]:.2f}x" for t in topologies] + [f"{mean:.2f}x", f"{top:.2f}x"])
    counts = table_text(["1,024 NPUs as", "fixed (ms)", "Themis (ms)", "gain", "balance estimate"],
                    [[r.topology, f"{r.fixed_s * 1e3:.3f}", f"{r.themis_s * 1e3:.3f}", f"{r.gain:.2f}x",
                      f"{est:.2f}x"] for r, est in dimension_count_table()])
    e2e = table_text(["workload", "compute", "fixed (ms)", "Themis (ms)", "end-to-end gain",
                  "cross-wafer reduction / iteration (fixed)"],
                 [[r.workload, f"{r.compute_scale:g}x", f"{r.fixed_s * 1e3:.2f}", f"{r.themis_s * 1e3:.2f}",
                   f"{r.gain:.3f}x", f"{r.reduction_share:.3f}"] for r in end_to_end_table()])
    return ("### Themis gain (fixed time / Themis time) with one unknown input changed at a time\n"
            + table_text(["input changed (base: file bandwidths, 64 chunks, 500 ns, 1 GB)"] + topologies
                     + ["mean", "max"], body) + "\n\npaper (arXiv v1 abstract, as the issue quotes): mean 1.88x, max 2.92x; "
            "later abstract (ISCA'22): mean 1.72x, max 2.70x\n\n"
            "### Dimension count alone: equal-bandwidth switch dimensions, 1 GB, 64 chunks\n" + counts + "\n\n"
            "### End to end: 10,000 NPUs (500 FRED wafers, DP across rack, pod and spine), fixed vs Themis\n"
            + e2e + "\n\npaper end to end (arXiv v1 as the issue quotes): 1.49x / 1.41x / 1.42x / 1.35x on "
            "ResNet, GNMT, DLRM, Transformer-1T; later abstract: ResNet-152 1.49x, GNMT 1.30x, DLRM 1.30x, "
            "Transformer-1T 1.25x\n")
