"""The Megatron-style GPT run across wafers (docs/cluster.md, "Megatron-style GPT across
wafers"): GPT-3 175B as Megatron-LM trains it (``configs/workloads/megatron-gpt-175b.toml``:
tensor parallelism over the wafer, micro-batch 1), pipeline parallelism across the wafers of a
rack and data parallelism across racks, on FRED wafers and on mesh wafers, at 1,000 and 10,000
NPUs, with the fixed and the Themis chunk order for the cross-wafer gradient all-reduce.

The clusters (all assumed, built from the shipped ``cluster-{fred,mesh}-wafers.toml``: paper
wafers, 1 us per scale-out step, no in-network reduction):

* 1,000 NPUs: wafer (20) x rack switch (10 wafers, 100 GBps per NPU) x spine (5 racks, 50 GBps
  per NPU): :func:`studies.cluster_study.three_dimensional`;
* 10,000 NPUs: wafer (20) x rack (10, 100 GBps) x pod (10 racks, 50 GBps) x spine (5 pods,
  50 GBps): two DP dimensions, so the chunk order has a choice to make.

Mapping: ``rack=pp`` (10 pipeline stages of 9-10 layers, one per wafer), every other outer
dimension DP. Global batch: about GPT-3's 1,536 sequences (strong scaling, as Megatron runs):
the samples per DP replica are ``ceil(1536 / DP)`` and, micro-batch size 1, as many
microbatches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from hdl.contracts.errors import FredError
from sysmodel.cluster_training import ClusterIterationResult, simulate_cluster_iteration
from sysmodel.dimensions import Cluster, Dimension, load_cluster
from sysmodel.workload_file import get_workload
from sysmodel.workloads import Workload
from studies.cluster_study import CLUSTERS, three_dimensional

__all__ = ["MEGATRON_WORKLOAD", "GLOBAL_BATCH", "MegatronRow", "megatron_clusters", "megatron_mapping",
           "megatron_workload", "megatron_iteration", "megatron_table", "render"]

MEGATRON_WORKLOAD = "megatron-gpt-175b"
#: GPT-3's batch: 3.2M tokens of 2048 (Brown et al. 2020, Table 2.1)
GLOBAL_BATCH = 1536
#: what each outer dimension carries (Megatron: pipeline inside the rack, data across racks)
PIPELINE_DIMENSION = "rack"


def _ten_thousand(cluster: Cluster) -> Cluster:
    """The 1,000-NPU three-dimensional cluster grown to 500 wafers: its spine of 5 racks becomes
    a pod switch of 10 racks, and a spine of 5 pods at the same bandwidth per NPU is added."""
    wafer, rack, spine = cluster.dimensions
    pod = replace(spine, name="pod", size=10)
    top = replace(spine, name="spine", size=5)
    return replace(cluster, name=cluster.name + "-10k", npus=wafer.size * rack.size * 10 * 5,
                   dimensions=(wafer, rack, pod, top))


def megatron_clusters(npus: int) -> dict:
    """``{"fred": Cluster, "mesh": Cluster}`` of ``npus`` (1,000 or 10,000) NPUs."""
    base = {k: three_dimensional(load_cluster(v)) for k, v in CLUSTERS.items()}
    if npus == 1000:
        return base
    if npus == 10000:
        return {k: _ten_thousand(v) for k, v in base.items()}
    raise FredError(f"the Megatron study has clusters of 1000 and 10000 NPUs, not {npus}")


def megatron_mapping(cluster: Cluster) -> dict:
    """Megatron's placement across wafers: the rack carries PP, every other outer dimension DP."""
    return {d.name: ("pp" if d.name == PIPELINE_DIMENSION else "dp") for d in cluster.dimensions[1:]}


def _replicas(cluster: Cluster, mapping: dict) -> int:
    return math.prod(d.size for d in cluster.dimensions[1:] if mapping[d.name] == "dp")


@dataclass(frozen=True)
class MegatronRow:
    npus: int
    schedule: str
    samples_per_dp: int
    fred: ClusterIterationResult
    mesh: ClusterIterationResult

    @property
    def speedup(self) -> float:
        return self.mesh.time_s / self.fred.time_s


def megatron_workload(cluster: Cluster, mapping: dict) -> Workload:
    """The workload with ``ceil(GLOBAL_BATCH / DP)`` samples per DP replica, one microbatch each."""
    base = get_workload(MEGATRON_WORKLOAD)
    samples = math.ceil(GLOBAL_BATCH / (_replicas(cluster, mapping) * base.strategy.dp))
    return replace(base, samples_per_dp=samples, microbatches=samples)


def megatron_iteration(cluster: Cluster, schedule: str = "themis") -> ClusterIterationResult:
    """One iteration of the Megatron-style run on ``cluster`` (a :func:`megatron_clusters` one)."""
    mapping = megatron_mapping(cluster)
    return simulate_cluster_iteration(cluster, megatron_workload(cluster, mapping), schedule=schedule,
                                      mapping=mapping)


def megatron_table(npus_list=(1000, 10000), schedules=("fixed", "themis")) -> list[MegatronRow]:
    rows = []
    for npus in npus_list:
        clusters = megatron_clusters(npus)
        for schedule in schedules:
            fred, mesh = (megatron_iteration(clusters[k], schedule) for k in ("fred", "mesh"))
            rows.append(MegatronRow(npus, schedule, fred.wafer.samples_per_dp, fred, mesh))
    return rows


def _exposed(d: dict) -> str:
    return ", ".join(f"{k} {v * 1e3:.1f}" for k, v in d.items())


def render() -> str:
    """The table as Markdown (what docs/cluster.md quotes)."""
    from studies.report import table_text
    rows = megatron_table()
    return "\n".join([
        f"### {MEGATRON_WORKLOAD}: MP20 on each wafer, rack=pp, other outer dimensions dp, "
        f"global batch ~{GLOBAL_BATCH}", table_text(
            ["NPUs", "schedule", "global batch", "FRED (ms)", "mesh (ms)", "FRED speedup",
             "FRED ms/sample", "per-NPU memory (GB)", "FRED exposed comm per dim (ms)",
             "mesh exposed comm per dim (ms)"],
            [[str(r.fred.npus_used), r.schedule, str(r.samples_per_dp * r.fred.dp_global),
              f"{r.fred.time_s * 1e3:.1f}", f"{r.mesh.time_s * 1e3:.1f}", f"{r.speedup:.3f}x",
              f"{r.fred.time_per_sample_s * 1e3:.3f}", f"{r.fred.wafer.memory.total / 1e9:.1f}",
              _exposed(r.fred.exposed_by_dimension), _exposed(r.mesh.exposed_by_dimension)] for r in rows])]) + "\n"
