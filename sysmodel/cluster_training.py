"""One training iteration on a cluster of wafers (docs/cluster.md, "Training across dimensions").

Mapping (the default, and for now the only one): the cluster's first dimension is a wafer
(``fred`` or ``mesh``) that runs the in-wafer strategy ``MPa-DPb-PPc`` (a x b x c <= its
NPUs) exactly as the wafer model does (:func:`sysmodel.training.simulate_iteration`: its
compute, MP, PP, in-wafer DP all-reduces, overlap policy, FRED's priorities and per-NPU memory
check), and every further dimension is data parallelism across wafers: the wafers are
replicas, ``W`` = the product of the outer dimensions' sizes, and the global DP degree is
``b x W``.

The cross-wafer gradient reduction is hierarchical: the wafer model's in-wafer DP all-reduce
stands for the reduce-scatter inside the wafer and the all-gather after it (the same bytes on
the wafer's links), and between them each NPU all-reduces its 1/b share of the stage's
gradient (FP16; the most loaded stage's parameters / MP) over the outer dimensions, chunked
and scheduled by :func:`sysmodel.multidim_collectives.run_collective` (fixed or Themis). That
reduction is exposed: it is added to the wafer's iteration time (ZeRO-2's default blocking
reduction, the wafer platform's ``dp_overlap = false``; with overlap it would be an upper
bound). PP across wafers, MP across wafers and a cross-wafer reduction overlapped with the
backward are not modelled.

Weight-streaming workloads (the wafer streams weights from its I/O controllers and stores the
gradients reduced over its DP group): each wafer's reduced gradient is assumed split evenly
over the NPUs the strategy uses, which all-reduce their share across wafers through their
scale-out bandwidth; moving it between external memory and the NPUs is not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.contracts.errors import FredError
from hdl.contracts.placement import Strategy, factorisations
from sysmodel.dimensions import WAFER_KINDS, Cluster
from sysmodel.iteration_plan import stage_layers
from sysmodel.multidim_collectives import DEFAULT_CHUNKS, run_collective
from sysmodel.training import IterationResult, simulate_iteration
from sysmodel.workloads import DTYPE_BYTES, Workload

__all__ = ["ClusterIterationResult", "simulate_cluster_iteration", "gradient_bytes_per_npu",
           "sweep_cluster_strategies"]


@dataclass(frozen=True)
class ClusterIterationResult:
    """A cluster iteration: the wafer's (``wafer``), the cross-wafer gradient all-reduce
    (``cross_wafer``, a :class:`~sysmodel.multidim_collectives.MultiDimResult`; None with one
    wafer), ``time_s`` = the wafer's time + the cross-wafer reduction's, ``npus_used``,
    ``dp_global`` and the exposed communication per dimension (``exposed_by_dimension``: the
    wafer's MP + PP + DP + I/O exposure for the wafer dimension; each outer dimension's busy
    time in the cross-wafer reduction)."""

    workload: str
    strategy: str
    schedule: str
    time_s: float
    wafer: IterationResult
    cross_wafer: object
    gradient_bytes_per_npu: float      # what each NPU all-reduces across wafers
    npus_used: int
    dp_global: int
    exposed_by_dimension: dict

    @property
    def time_per_sample_s(self) -> float:
        """Iteration time / the samples of the whole cluster's iteration."""
        return self.time_s / (self.wafer.samples_per_dp * self.dp_global)

    def to_dict(self) -> dict:
        return {"workload": self.workload, "strategy": self.strategy, "schedule": self.schedule,
                "time_per_sample_s": self.time_per_sample_s,
                "time_s": self.time_s, "wafer_time_s": self.wafer.time_s,
                "cross_wafer_time_s": self.cross_wafer.time_s if self.cross_wafer else 0.0,
                "cross_wafer": self.cross_wafer.to_dict() if self.cross_wafer else None,
                "gradient_bytes_per_npu": self.gradient_bytes_per_npu,
                "npus_used": self.npus_used, "dp_global": self.dp_global,
                "exposed_by_dimension": dict(self.exposed_by_dimension),
                "wafer_breakdown": dict(self.wafer.breakdown), "memory": self.wafer.memory.to_dict()}


def gradient_bytes_per_npu(workload: Workload, strategy: Strategy) -> float:
    """Gradient bytes one NPU of the most loaded pipeline stage holds: its layers' parameters
    divided by MP (where the layer is MP-shardable), in the workload's element format."""
    stages = stage_layers(workload, strategy.pp)
    per_stage = [sum(workload.layers[i].params / workload.layers[i].shards(strategy.mp) for i in s)
                 for s in stages]
    return max(per_stage) * DTYPE_BYTES[workload.dtype]


#: the wafer model's breakdown categories that are exposed communication
_COMM_PARTS = ("mp", "pp", "dp", "io")


def simulate_cluster_iteration(cluster: Cluster, workload: Workload, strategy: Strategy | None = None,
                               *, schedule: str = "themis", chunks: int = DEFAULT_CHUNKS,
                               samples_per_dp: int | None = None,
                               overlap: bool = True) -> ClusterIterationResult:
    """One iteration of ``workload`` with the in-wafer ``strategy`` (default: the workload's)
    on every wafer of ``cluster``, DP across the outer dimensions (module docstring)."""
    wafer_dim, *outer = cluster.dimensions
    if wafer_dim.kind not in WAFER_KINDS:
        raise FredError(f"cluster {cluster.name!r}: the strategy maps MP, PP and in-wafer DP onto the "
                        f"first dimension, which must be a wafer (fred or mesh), not a {wafer_dim.kind}")
    strategy = strategy or workload.strategy
    if strategy.npus > wafer_dim.size:
        raise FredError(f"strategy {strategy} needs {strategy.npus} NPUs per wafer; the wafer dimension "
                        f"{wafer_dim.name!r} has {wafer_dim.size} (MP, PP and DP inside a wafer; DP across)")
    wafer = simulate_iteration(wafer_dim.wafer, wafer_dim.fabric, workload, strategy,
                               samples_per_dp=samples_per_dp, overlap=overlap)
    replicas = 1
    for d in outer:
        replicas *= d.size
    grad = gradient_bytes_per_npu(workload, strategy)
    # weight-stationary: each NPU's 1/DP share of its stage's gradient after the in-wafer
    # reduce-scatter; weight streaming: the wafer's whole reduced gradient (in external memory)
    # split evenly over the NPUs the strategy uses
    share = grad / strategy.dp if workload.mode == "weight-stationary" \
        else workload.params * DTYPE_BYTES[workload.dtype] / strategy.npus
    cross = None
    if replicas > 1:
        cross = run_collective(cluster, "all-reduce", share,
                               dimensions=[d.name for d in outer], schedule=schedule, chunks=chunks)
    exposed = {wafer_dim.name: sum(wafer.breakdown.get(p, 0.0) for p in _COMM_PARTS)}
    for use in (cross.dimensions if cross else ()):
        exposed[use.name] = use.busy_s
    time = wafer.time_s + (cross.time_s if cross else 0.0)
    return ClusterIterationResult(workload.name, str(strategy), schedule, time, wafer, cross, share,
                                  strategy.npus * replicas, strategy.dp * replicas, exposed)


def sweep_cluster_strategies(cluster: Cluster, workload: Workload, *, schedule: str = "themis",
                             chunks: int = DEFAULT_CHUNKS, samples_per_dp: int | None = None) -> list:
    """Every in-wafer strategy MP x DP x PP = the wafer dimension's size, each as
    ``(strategy, result or None, why not)``, fastest per sample first (those that do not fit
    the NPU's memory last, with the wafer model's reason)."""
    rows = []
    for strategy in factorisations(cluster.dimensions[0].size):
        try:
            result = simulate_cluster_iteration(cluster, workload, strategy, schedule=schedule,
                                                chunks=chunks, samples_per_dp=samples_per_dp)
        except FredError as exc:
            rows.append((strategy, None, str(exc)))
            continue
        rows.append((strategy, result, ""))
    return sorted(rows, key=lambda r: (r[1] is None, r[1].time_per_sample_s if r[1] else 0.0))
