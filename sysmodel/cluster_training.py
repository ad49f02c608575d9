"""One training iteration on a cluster of wafers (docs/cluster.md, "Training across dimensions").

Mapping: the cluster's first dimension is a wafer (``fred`` or ``mesh``) that runs the
in-wafer strategy ``MPa-DPb-PPc`` (a x b x c <= its NPUs) exactly as the wafer model does
(:func:`sysmodel.training.simulate_iteration`: its compute, MP, PP, in-wafer DP all-reduces,
overlap policy, FRED's priorities and per-NPU memory check). Each further (outer) dimension
carries data parallelism (``dp``, the default) or pipeline parallelism (``pp``) across wafers,
as the ``mapping`` says (e.g. ``{"scale-out": "pp"}``; :func:`parse_mapping` reads
``scale-out=pp,spine=dp``). With ``P`` = the product of the PP dimensions' sizes and ``W``
that of the DP dimensions', the workload's layers are split into ``P`` contiguous ranges (the
wafer model's own stage split), each wafer runs its range with the in-wafer strategy (so the
memory check is per range), the wafers form a 1F1B pipeline (:func:`pipeline_across_time`),
and the global DP degree is ``b x W``. MP across wafers is an error (not modelled).

The cross-wafer gradient reduction is hierarchical: the wafer model's in-wafer DP all-reduce
stands for the reduce-scatter inside the wafer and the all-gather after it (the same bytes on
the wafer's links), and between them each NPU all-reduces its 1/b share of the stage's
gradient (FP16; the most loaded stage's parameters / MP) over the outer dimensions, chunked
and scheduled by :func:`sysmodel.multidim_collectives.run_collective` (fixed or Themis). That
reduction is exposed: it is added to the wafer's iteration time (ZeRO-2's default blocking
reduction, the wafer platform's ``dp_overlap = false``; with overlap it would be an upper
bound). MP across wafers and a cross-wafer reduction overlapped with the backward are not
modelled; the pipeline across wafers is an analytic composition of the wafers' simulated
iterations (its formula and assumptions: :func:`pipeline_across_time`), not a simulation of
one task graph spanning the wafers.

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

__all__ = ["ClusterIterationResult", "OUTER_PARALLELISMS", "simulate_cluster_iteration",
           "gradient_bytes_per_npu", "sweep_cluster_strategies", "parse_mapping", "resolve_mapping",
           "pipeline_across_time"]

#: what an outer dimension (between wafers) can carry
OUTER_PARALLELISMS = ("dp", "pp")


@dataclass(frozen=True)
class ClusterIterationResult:
    """A cluster iteration: the wafer's (``wafer``), the cross-wafer gradient all-reduce
    (``cross_wafer``, a :class:`~sysmodel.multidim_collectives.MultiDimResult`; None with one
    wafer), ``time_s`` = the pipeline's time (``pipeline_s``: the wafer's own with no PP
    across wafers) + the cross-wafer reduction's, ``npus_used``, ``dp_global``, ``pp_across``
    and the exposed communication per dimension (``exposed_by_dimension``: the wafer's MP + PP
    + DP + I/O exposure for the wafer dimension -- the slowest pipeline wafer's with PP across;
    what the pipeline across wafers adds (bubble, exposed transfers) for the PP dimension that
    carries it; each DP dimension's busy time in the cross-wafer reduction). ``wafer``: the
    slowest wafer's iteration."""

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
    pp_across: int = 1                 # wafers one pipeline spans (the PP dimensions' sizes)
    pipeline_s: float = 0.0            # the pipeline's time before the cross-wafer reduction
    mapping: dict = None               # outer dimension -> "dp" / "pp"

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
                "pp_across": self.pp_across, "pipeline_s": self.pipeline_s,
                "mapping": dict(self.mapping or {}),
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


def parse_mapping(text: str | None) -> dict:
    """``"scale-out=pp,spine=dp"`` -> ``{"scale-out": "pp", "spine": "dp"}`` (None or empty: {});
    a malformed item is an error naming it. What the names mean is checked against a cluster
    by :func:`resolve_mapping`."""
    mapping = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, sep, parallelism = item.partition("=")
        name, parallelism = name.strip(), parallelism.strip().lower()
        if not sep or not name or not parallelism:
            raise FredError(f"mapping item {item.strip()!r} is not DIMENSION=dp|pp")
        if name in mapping:
            raise FredError(f"mapping names dimension {name!r} twice")
        mapping[name] = parallelism
    return mapping


def resolve_mapping(cluster: Cluster, mapping: dict | None) -> tuple[tuple, tuple]:
    """The outer dimensions carrying PP across wafers and those carrying DP across wafers
    (file order), from ``mapping`` (dimension name -> ``dp`` or ``pp``; unnamed outer
    dimensions: ``dp``). Errors name what does not fit: an unknown dimension, the wafer
    dimension (its MP/PP/DP come from the strategy), MP or anything else across wafers."""
    wafer_dim, *outer = cluster.dimensions
    for name, parallelism in (mapping or {}).items():
        dim = cluster.dimension(name)            # an unknown name is an error listing the names
        if dim is wafer_dim:
            raise FredError(f"mapping: dimension {name!r} is the wafer; MP, PP and DP inside it come "
                            f"from the in-wafer strategy (MP<a>-DP<b>-PP<c>), the mapping names outer "
                            f"dimensions only")
        if parallelism == "mp":
            raise FredError(f"mapping: MP across wafers ({name!r}) is not modelled (a layer's "
                            f"all-reduces would cross the scale-out every layer); map it to dp or pp")
        if parallelism not in OUTER_PARALLELISMS:
            raise FredError(f"mapping: {name!r}={parallelism!r}; an outer dimension carries "
                            f"{' or '.join(OUTER_PARALLELISMS)}")
    chosen = mapping or {}
    pp = tuple(d for d in outer if chosen.get(d.name, "dp") == "pp" and d.size > 1)
    dp = tuple(d for d in outer if chosen.get(d.name, "dp") == "dp" and d.size > 1)
    return pp, dp


def pipeline_across_time(stage_times: list, stage_dp_times: list, microbatches: int,
                         transfer_s: float) -> float:
    """A 1F1B pipeline of ``P = len(stage_times)`` wafers (docs/cluster.md, "PP across wafers"):
    wafer ``w`` alone takes ``stage_times[w]`` for its layers, of which ``stage_dp_times[w]``
    is its once-per-iteration in-wafer DP reduction; the rest is ``M = microbatches`` equal
    microbatch slots. The slowest slot ``t = max_w (T_w - dp_w) / M`` paces the pipeline, a
    microbatch's activation (forward) and its gradient (backward) cross a wafer boundary in
    ``transfer_s`` each, which hides behind the slot unless longer:
    ``(M + P - 1) max(t, transfer) + 2 (P - 1) transfer + max_w dp_w``. With P = 1 this is
    the wafer's own time."""
    stages = len(stage_times)
    if stages == 1:
        return stage_times[0]
    slot = max((t - d) / microbatches for t, d in zip(stage_times, stage_dp_times))
    return ((microbatches + stages - 1) * max(slot, transfer_s) + 2 * (stages - 1) * transfer_s
            + max(stage_dp_times))


def _product(dims) -> int:
    n = 1
    for d in dims:
        n *= d.size
    return n


def _stage_workloads(workload: Workload, stages: int) -> list:
    """The workload split into ``stages`` contiguous layer ranges, one per wafer of the
    pipeline (the wafer model's own split: :func:`sysmodel.iteration_plan.stage_layers`)."""
    if stages == 1:
        return [workload]
    if workload.mode != "weight-stationary":
        raise FredError(f"{workload.name}: PP across wafers needs a weight-stationary workload; "
                        f"a weight-streaming wafer streams every layer through itself (map the "
                        f"outer dimensions to dp)")
    if stages > len(workload.layers):
        raise FredError(f"PP across wafers of degree {stages} needs at least {stages} layers; "
                        f"{workload.name} has {len(workload.layers)}")
    return [workload.with_(name=f"{workload.name}[{k + 1}/{stages}]",
                           layers=tuple(workload.layers[i] for i in group))
            for k, group in enumerate(stage_layers(workload, stages))]


def _boundary_transfer(pp_dims, wafer: IterationResult, strategy: Strategy,
                       stage_workloads: list, microbatches: int) -> tuple[float, object]:
    """One microbatch's activation crossing a wafer boundary: the largest boundary layer's
    output for the microbatch's samples, split over the MP shards of the sending stage (each
    NPU sends its shard; Megatron's scatter-gather), at the slowest PP dimension's bandwidth
    plus its step latency: ``(seconds, that dimension)``; ``(0, None)`` without PP across."""
    if not pp_dims:
        return 0.0, None
    samples = wafer.samples_per_dp / microbatches
    boundary = max(w.layers[-1].out_bytes for w in stage_workloads[:-1])
    nbytes = boundary * samples / strategy.mp
    return max(((nbytes / d.bandwidth_bps + d.latency_s, d) for d in pp_dims), key=lambda t: t[0])


def simulate_cluster_iteration(cluster: Cluster, workload: Workload, strategy: Strategy | None = None,
                               *, schedule: str = "themis", chunks: int = DEFAULT_CHUNKS,
                               samples_per_dp: int | None = None, overlap: bool = True,
                               mapping: dict | None = None,
                               pipeline_schedule: str = "1f1b") -> ClusterIterationResult:
    """One iteration of ``workload`` with the in-wafer ``strategy`` (default: the workload's)
    on every wafer of ``cluster``; the outer dimensions carry DP, or PP where ``mapping``
    (outer dimension name -> ``dp`` / ``pp``) says so (module docstring). ``schedule`` and
    ``chunks``: the cross-wafer all-reduce's; ``pipeline_schedule``: the in-wafer pipeline's."""
    wafer_dim = cluster.dimensions[0]
    if wafer_dim.kind not in WAFER_KINDS:
        raise FredError(f"cluster {cluster.name!r}: the strategy maps MP, PP and in-wafer DP onto the "
                        f"first dimension, which must be a wafer (fred or mesh), not a {wafer_dim.kind}")
    strategy = strategy or workload.strategy
    if strategy.npus > wafer_dim.size:
        raise FredError(f"strategy {strategy} needs {strategy.npus} NPUs per wafer; the wafer dimension "
                        f"{wafer_dim.name!r} has {wafer_dim.size} (MP, PP and DP inside a wafer; DP or PP across)")
    pp_dims, dp_dims = resolve_mapping(cluster, mapping)
    pp_across, replicas = _product(pp_dims), _product(dp_dims)
    parts = _stage_workloads(workload, pp_across)
    # a wafer without in-wafer PP would run its minibatch in as few microbatches as fit its
    # memory; inside a pipeline across wafers it runs the pipeline's (the workload's), so its
    # MP collectives, recomputation and memory are those of that microbatch size
    wafer_microbatches = workload.microbatches if pp_across > 1 and strategy.pp == 1 else None
    wafers = [simulate_iteration(wafer_dim.wafer, wafer_dim.fabric, part, strategy,
                                 schedule=pipeline_schedule, samples_per_dp=samples_per_dp,
                                 microbatches=wafer_microbatches, overlap=overlap) for part in parts]
    wafer = max(wafers, key=lambda r: r.time_s)
    # the wafers' microbatches: the workload's (a wafer without in-wafer PP runs its minibatch
    # as one; across wafers it is cut into the workload's microbatches all the same)
    microbatches = max(workload.microbatches, wafer.microbatches)
    transfer, carrier = _boundary_transfer(pp_dims, wafer, strategy, parts, microbatches)
    pipeline = pipeline_across_time([r.time_s for r in wafers], [r.breakdown.get("dp", 0.0) for r in wafers],
                                    microbatches, transfer)
    # weight-stationary: each NPU's 1/DP share of its stage's gradient after the in-wafer
    # reduce-scatter (the most loaded wafer of the pipeline); weight streaming: the wafer's whole
    # reduced gradient (in external memory) split evenly over the NPUs the strategy uses
    share = max(gradient_bytes_per_npu(p, strategy) for p in parts) / strategy.dp \
        if workload.mode == "weight-stationary" else workload.params * DTYPE_BYTES[workload.dtype] / strategy.npus
    cross = None
    if replicas > 1:
        cross = run_collective(cluster, "all-reduce", share, dimensions=[d.name for d in dp_dims],
                               schedule=schedule, chunks=chunks)
    exposed = {wafer_dim.name: sum(wafer.breakdown.get(p, 0.0) for p in _COMM_PARTS)}
    if carrier is not None:           # what the pipeline across wafers adds to its slowest wafer
        exposed[carrier.name] = pipeline - wafer.time_s
    for use in (cross.dimensions if cross else ()):
        exposed[use.name] = use.busy_s
    time = pipeline + (cross.time_s if cross else 0.0)
    return ClusterIterationResult(workload.name, str(strategy), schedule, time, wafer, cross, share,
                                  strategy.npus * replicas * pp_across, strategy.dp * replicas, exposed,
                                  pp_across=pp_across, pipeline_s=pipeline,
                                  mapping={d.name: "pp" for d in pp_dims} | {d.name: "dp" for d in dp_dims})


def sweep_cluster_strategies(cluster: Cluster, workload: Workload, *, schedule: str = "themis",
                             chunks: int = DEFAULT_CHUNKS, samples_per_dp: int | None = None,
                             mapping: dict | None = None, overlap: bool = True) -> list:
    """Every in-wafer strategy MP x DP x PP = the wafer dimension's size, each as
    ``(strategy, result or None, why not)``, fastest per sample first (those that do not fit
    the NPU's memory last, with the wafer model's reason)."""
    rows = []
    for strategy in factorisations(cluster.dimensions[0].size):
        try:
            result = simulate_cluster_iteration(cluster, workload, strategy, schedule=schedule,
                                                chunks=chunks, samples_per_dp=samples_per_dp,
                                                mapping=mapping, overlap=overlap)
        except FredError as exc:
            rows.append((strategy, None, str(exc)))
            continue
        rows.append((strategy, result, ""))
    return sorted(rows, key=lambda r: (r[1] is None, r[1].time_per_sample_s if r[1] else 0.0))
