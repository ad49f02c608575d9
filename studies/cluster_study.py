"""The cluster study (docs/cluster.md): FRED wafers against mesh wafers in a 1,000-NPU cluster.

Four tables, each computed here from the model (nothing stored):

* :func:`themis_table`: one all-reduce on the Themis-style topologies, fixed order against
  Themis (the bandwidth-utilization gain = time ratio, the bytes being the same);
* :func:`scale_out_table`: one 1 GB all-reduce on the FRED-wafer and the mesh-wafer cluster as
  the scale-out bandwidth per NPU grows: where the wafer fabric starts to matter;
* :func:`training_table`: the paper's four workloads on both clusters (two and three
  dimensions), fixed and Themis: iteration time, FRED's speedup, exposed communication per
  dimension;
* :func:`scaling_table`: the workloads at 1,000 and 10,000 NPUs (50 and 500 wafers) and with
  the scale-out bandwidth per NPU swept: where the wafer fabric matters in training.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from studies.report import table_text
from sysmodel.cluster_training import simulate_cluster_iteration
from sysmodel.dimensions import Cluster, Dimension, load_cluster
from sysmodel.multidim_collectives import run_collective
from sysmodel.workload_file import get_workload
from sysmodel.workloads import WORKLOADS

__all__ = ["THEMIS_TOPOLOGIES", "ThemisRow", "ScaleOutRow", "TrainingRow", "ScalingRow", "themis_table",
           "scale_out_table", "training_table", "scaling_table", "three_dimensional", "render"]

THEMIS_TOPOLOGIES = ("themis-2d.toml", "themis-3d.toml", "themis-3d-homo.toml", "themis-4d.toml",
                     "themis-4d-homo.toml")
CLUSTERS = {"fred": "cluster-fred-wafers.toml", "mesh": "cluster-mesh-wafers.toml"}


@dataclass(frozen=True)
class ThemisRow:
    topology: str
    fixed_s: float
    themis_s: float
    fixed_utilization: float
    themis_utilization: float

    @property
    def gain(self) -> float:
        return self.fixed_s / self.themis_s


@dataclass(frozen=True)
class ScaleOutRow:
    scale_out_gbps: float
    fred_s: float
    mesh_s: float

    @property
    def speedup(self) -> float:
        return self.mesh_s / self.fred_s


@dataclass(frozen=True)
class TrainingRow:
    workload: str
    cluster: str
    schedule: str
    strategy: str
    fred_s: float
    mesh_s: float
    fred_exposed: dict
    mesh_exposed: dict

    @property
    def speedup(self) -> float:
        return self.mesh_s / self.fred_s


def themis_table(size: float = 1e9, chunks: int = 64) -> list[ThemisRow]:
    rows = []
    for name in THEMIS_TOPOLOGIES:
        c = load_cluster(name)
        f = run_collective(c, "all-reduce", size, schedule="fixed", chunks=chunks)
        t = run_collective(c, "all-reduce", size, schedule="themis", chunks=chunks)
        rows.append(ThemisRow(c.name, f.time_s, t.time_s, f.bandwidth_utilization, t.bandwidth_utilization))
    return rows


def _with_scale_out(cluster: Cluster, gbps: float) -> Cluster:
    outer = tuple(replace(d, bandwidth_gbps=gbps) for d in cluster.dimensions[1:])
    return replace(cluster, dimensions=cluster.dimensions[:1] + outer)


def scale_out_table(size: float = 1e9, bandwidths=(50.0, 100.0, 200.0, 400.0, 800.0, 1600.0, 3000.0),
                    schedule: str = "themis") -> list[ScaleOutRow]:
    fred, mesh = (load_cluster(CLUSTERS[k]) for k in ("fred", "mesh"))
    return [ScaleOutRow(b, run_collective(_with_scale_out(fred, b), "all-reduce", size, schedule=schedule).time_s,
                        run_collective(_with_scale_out(mesh, b), "all-reduce", size, schedule=schedule).time_s)
            for b in bandwidths]


def three_dimensional(cluster: Cluster) -> Cluster:
    """``cluster`` with its scale-out switch of 50 wafers split into a rack switch of 10 wafers
    at twice the bandwidth and a spine of 5 racks at the original bandwidth (assumed: a
    two-level scale-out whose inner level is faster, the case Themis balances)."""
    wafer, out = cluster.dimensions
    rack = Dimension("rack", "switch", 10, out.bandwidth_gbps * 2, out.latency_ns, False)
    spine = Dimension("spine", "switch", out.size // 10, out.bandwidth_gbps, out.latency_ns, False)
    return replace(cluster, name=cluster.name + "-3d", dimensions=(wafer, rack, spine))


def training_table(workloads=WORKLOADS) -> list[TrainingRow]:
    rows = []
    base = {k: load_cluster(v) for k, v in CLUSTERS.items()}
    for shape in ("2d", "3d"):
        clusters = base if shape == "2d" else {k: three_dimensional(v) for k, v in base.items()}
        for w in workloads:
            workload = get_workload(w)
            for schedule in ("fixed", "themis"):
                f = simulate_cluster_iteration(clusters["fred"], workload, schedule=schedule)
                m = simulate_cluster_iteration(clusters["mesh"], workload, schedule=schedule)
                rows.append(TrainingRow(w, shape, schedule, f.strategy, f.time_s, m.time_s,
                                        f.exposed_by_dimension, m.exposed_by_dimension))
    return rows


@dataclass(frozen=True)
class ScalingRow:
    workload: str
    npus: int
    scale_out_gbps: float
    fred_s: float
    mesh_s: float
    fred_cross_s: float

    @property
    def speedup(self) -> float:
        return self.mesh_s / self.fred_s


def _with_wafers(cluster: Cluster, wafers: int) -> Cluster:
    wafer, out = cluster.dimensions
    return replace(cluster, npus=wafer.size * wafers, dimensions=(wafer, replace(out, size=wafers)))


def scaling_table(workloads=WORKLOADS, wafers=(50, 500), bandwidths=(50.0, 400.0, 3000.0)) -> list[ScalingRow]:
    """Each workload (its in-wafer strategy, Themis) on ``wafers`` wafers with the scale-out
    bandwidth per NPU of ``bandwidths`` (one outer switch dimension)."""
    base = {k: load_cluster(v) for k, v in CLUSTERS.items()}
    rows = []
    for w in workloads:
        workload = get_workload(w)
        for n in wafers:
            for b in bandwidths:
                f, m = (simulate_cluster_iteration(_with_scale_out(_with_wafers(base[k], n), b), workload)
                        for k in ("fred", "mesh"))
                rows.append(ScalingRow(w, f.npus_used if f.npus_used == m.npus_used else -1, b, f.time_s,
                                       m.time_s, f.cross_wafer.time_s))
    return rows


def _exposed(d: dict) -> str:
    return ", ".join(f"{k} {v * 1e3:.2f}" for k, v in d.items())


def render() -> str:
    """The four tables as Markdown (what docs/cluster.md quotes)."""
    themis = themis_table()
    gains = [r.gain for r in themis]
    parts = ["### All-reduce of 1 GB per NPU, 64 chunks: fixed order vs Themis", table_text(
        ["topology", "fixed (ms)", "Themis (ms)", "BW util fixed", "BW util Themis", "gain"],
        [[r.topology, f"{r.fixed_s * 1e3:.3f}", f"{r.themis_s * 1e3:.3f}", f"{r.fixed_utilization:.3f}",
          f"{r.themis_utilization:.3f}", f"{r.gain:.2f}x"] for r in themis]),
        f"\nmean gain {sum(gains) / len(gains):.2f}x, max {max(gains):.2f}x\n",
        "### All-reduce of 1 GB per NPU on 50 wafers, scale-out bandwidth per NPU swept", table_text(
        ["scale-out GBps/NPU", "FRED wafers, Themis (ms)", "mesh wafers, Themis (ms)", "FRED speedup, Themis",
         "FRED wafers, fixed (ms)", "mesh wafers, fixed (ms)", "FRED speedup, fixed"],
        [[f"{t.scale_out_gbps:g}", f"{t.fred_s * 1e3:.3f}", f"{t.mesh_s * 1e3:.3f}", f"{t.speedup:.3f}x",
          f"{f.fred_s * 1e3:.3f}", f"{f.mesh_s * 1e3:.3f}", f"{f.speedup:.3f}x"]
         for t, f in zip(scale_out_table(), scale_out_table(schedule="fixed"))]),
        "\n### Training iteration on 1,000 NPUs (50 wafers), the workloads' in-wafer strategy, DP across wafers",
        table_text(["workload", "cluster", "schedule", "strategy", "FRED (ms)", "mesh (ms)", "FRED speedup",
                "FRED exposed comm per dim (ms)", "mesh exposed comm per dim (ms)"],
               [[r.workload, r.cluster, r.schedule, r.strategy, f"{r.fred_s * 1e3:.2f}", f"{r.mesh_s * 1e3:.2f}",
                 f"{r.speedup:.3f}x", _exposed(r.fred_exposed), _exposed(r.mesh_exposed)]
                for r in training_table()]),
        "\n### Training at 1,000 and 10,000 NPUs (50 and 500 wafers), scale-out bandwidth per NPU swept (Themis)",
        table_text(["workload", "NPUs used", "scale-out GBps/NPU", "FRED (ms)", "mesh (ms)", "FRED speedup",
                "cross-wafer all-reduce on FRED (ms)"],
               [[r.workload, str(r.npus), f"{r.scale_out_gbps:g}", f"{r.fred_s * 1e3:.2f}", f"{r.mesh_s * 1e3:.2f}",
                 f"{r.speedup:.3f}x", f"{r.fred_cross_s * 1e3:.2f}"] for r in scaling_table()])]
    return "\n".join(parts) + "\n"
