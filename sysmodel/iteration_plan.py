"""What one training iteration runs: strategy, stages, microbatches and memory plan.

:func:`plan_iteration` validates the request and fixes everything the task graph needs before
any time is computed: the layers of each pipeline stage (weight-stationary: contiguous ranges
balanced by forward FLOPs, or Megatron's even split of the inner layers; weight-streaming:
layer l on stage l % PP; with ``Workload.interleave`` > 1, PP x interleave virtual stages, NPU
stage s holding virtual stages s, s + PP, ...), the microbatch count
(the requested one, or more when the working set does not fit: the gradient accumulation a
framework would fall back to) and the per-NPU :class:`~sysmodel.memory.MemoryPlan`. A strategy may use fewer NPUs than the
platform has (MP x DP x PP < NPUs): the rest stay idle.
"""

from __future__ import annotations

from copy import copy
from dataclasses import dataclass
from numbers import Integral

from hdl.contracts.errors import FredError
from hdl.contracts.placement import Strategy
from sysmodel.memory import MemoryPlan, memory_plan
from sysmodel.model_cache import Ref, current
from sysmodel.platform import Platform
from sysmodel.workloads import Workload

__all__ = ["SCHEDULES", "IterationPlan", "plan_iteration", "stage_layers", "interleaved_stages"]

#: Pipeline schedules of weight-stationary training.
SCHEDULES = ("1f1b", "gpipe")


@dataclass(frozen=True)
class IterationPlan:
    """One iteration's fixed shape.

    Members: ``platform``, ``workload``, ``strategy``, ``schedule`` (one of
    :data:`SCHEDULES`), ``samples_per_dp`` (minibatch per DP replica), ``microbatches``
    (used), ``requested_microbatches``, ``stages`` (layer indices per pipeline stage),
    ``memory`` (:class:`~sysmodel.memory.MemoryPlan`), ``virtual_stages`` (layer indices per
    virtual stage: ``stages`` itself without interleaving; virtual stage v = chunk x PP + stage),
    ``chunks`` (model chunks per pipeline stage: the interleaved schedule's, else 1)."""

    platform: Platform
    workload: Workload
    strategy: Strategy
    schedule: str
    samples_per_dp: int
    microbatches: int
    requested_microbatches: int
    stages: list
    memory: MemoryPlan
    virtual_stages: list
    chunks: int = 1

    @property
    def microbatch_samples(self) -> float:
        return self.samples_per_dp / self.microbatches

    @property
    def streaming(self) -> bool:
        return self.workload.mode == "weight-streaming"

    @property
    def idle_npus(self) -> int:
        """NPUs of the platform the strategy leaves idle."""
        return self.platform.npus - self.strategy.npus

    def representative(self, stage: int) -> int:
        """The NPU whose timeline stands for ``stage`` (MP rank 0 of DP replica 0)."""
        return self.strategy.rank(mp=0, dp=0, pp=stage)

    def pass_recompute(self, stage: int, backward: bool) -> str:
        """The recomputation a pass on pipeline stage ``stage`` runs: a backward's is its
        stage's (``memory.stage_recompute``), a forward recomputes nothing (``none``)."""
        return self.memory.stage_recompute[stage] if backward else "none"

    def notes(self) -> list[str]:
        """What the plan changed or needed beyond the request, in words."""
        notes = []
        if self.microbatches != self.requested_microbatches:
            notes.append(f"{self.microbatches} microbatches (more than requested) so the working set fits")
        for mode, what in (("full", "full activation recomputation (each layer's forward again before its backward)"),
                           ("selective", "selective activation recomputation (the attention core)")):
            stages = self.memory.stages_recomputing(mode)
            if stages and len(stages) < len(self.memory.stage_recompute):
                what += f" on stage{'s' if len(stages) > 1 else ''} {', '.join(map(str, stages))}"
            if stages:
                notes.append(what)
        if self.idle_npus:
            notes.append(f"{self.idle_npus} of {self.platform.npus} NPUs idle")
        if self.memory.offload:
            notes.append("activation checkpoints offloaded to external memory through the I/O controllers")
        return notes


def stage_layers(workload: Workload, pp: int) -> list[list[int]]:
    """Layer indices of each of ``pp`` pipeline stages (raises when ``pp`` exceeds the layers).

    Weight-streaming: layer l on stage l % PP (PP consecutive layers form one pipeline wave).
    Weight-stationary: contiguous ranges balanced by forward FLOPs, each stage >= 1 layer, or
    with ``workload.pipeline_split == "layers"`` Megatron's split: the inner layers evenly (the
    first stages take one more when they do not divide), the first layer (embedding) with the
    first stage and the last (head) with the last."""
    layers = workload.layers
    if pp > len(layers):
        raise FredError(f"PP({pp}) exceeds the {len(layers)} layers of {workload.name}")
    if workload.mode == "weight-streaming":
        return [list(range(s, len(layers), pp)) for s in range(pp)]
    if workload.pipeline_split == "layers" and pp > 1:
        return _even_split(workload, pp)
    weights = [max(l.fwd_flops, 1.0) for l in layers]
    total = sum(weights)
    bounds, acc, k = [0], 0.0, 1
    for i, w in enumerate(weights):
        acc += w
        remaining_layers = len(layers) - (i + 1)
        remaining_stages = pp - k
        if k < pp and (acc >= total * k / pp or remaining_layers == remaining_stages):
            bounds.append(i + 1)
            k += 1
    bounds.append(len(layers))
    return [list(range(a, b)) for a, b in zip(bounds, bounds[1:])]


def _even_split(workload: Workload, pp: int) -> list[list[int]]:
    """Megatron's pipeline split (see :func:`stage_layers`)."""
    n = len(workload.layers)
    inner = n - 2
    if inner < pp:
        raise FredError(f"PP({pp}) exceeds the {inner} inner layers of {workload.name}")
    out, start = [], 1
    for k in range(pp):
        size = inner // pp + (1 if k < inner % pp else 0)
        out.append(list(range(start, start + size)))
        start += size
    out[0].insert(0, 0)
    out[-1].append(n - 1)
    return out


def interleaved_stages(workload: Workload, pp: int, chunks: int) -> tuple[list, list]:
    """(stages, virtual stages) of a ``pp``-stage pipeline with ``chunks`` model chunks per
    stage (Megatron's interleaving): ``pp * chunks`` virtual stages split as by
    :func:`stage_layers`; NPU stage s holds virtual stages s, s + PP, s + 2 PP, ..."""
    virtual = stage_layers(workload, pp * chunks)
    if chunks == 1:
        return virtual, virtual
    stages = [[i for c in range(chunks) for i in virtual[c * pp + s]] for s in range(pp)]
    return stages, virtual


def plan_iteration(platform: Platform, workload: Workload, strategy: Strategy | None = None, *,
                   schedule: str = "1f1b", samples_per_dp: int | None = None,
                   microbatches: int | None = None) -> IterationPlan:
    """Validate the request and fix stages, microbatches and memory (see the module docstring).

    ``strategy`` defaults to the workload's, ``samples_per_dp`` to its minibatch per DP replica,
    ``microbatches`` to its pipeline microbatches (1 without PP); an explicit ``microbatches`` is
    used as given (an error when it does not fit)."""
    strategy = strategy or workload.strategy
    if strategy.npus > platform.npus:
        raise FredError(f"strategy {strategy} uses MP*DP*PP = {strategy.mp}*{strategy.dp}*"
                        f"{strategy.pp} = {strategy.npus} NPUs but the platform has {platform.npus}")
    if schedule not in SCHEDULES:
        raise FredError(f"unknown pipeline schedule {schedule!r}; expected {' or '.join(SCHEDULES)}")
    samples = workload.samples_per_dp if samples_per_dp is None else samples_per_dp
    if not isinstance(samples, int) or samples < 1:
        raise FredError(f"samples per DP replica must be a positive integer, got {samples!r}")
    if microbatches is not None and not isinstance(microbatches, Integral):
        raise FredError(f"microbatches must be a whole number, got {microbatches!r}")
    requested = microbatches or (workload.microbatches if strategy.pp > 1 else 1)
    if requested < 1 or requested > samples:
        raise FredError(f"{requested} microbatches cannot split {samples} samples per DP replica")
    fixed = bool(microbatches)
    # everything below reads of the platform only its memory capacity and optimizer bytes per
    # parameter (memory_plan), so those two key it, not the whole platform; the requested
    # count's and the samples' types too: True equals 1 in a key but is kept as given
    key = (platform.memory_capacity_gb, platform.optimizer_bytes_per_param, Ref(workload), strategy,
           schedule, samples, type(samples), requested, type(requested), fixed)
    memo = current().iteration_shapes
    kept = memo.get(key)
    if kept is None:   # a request that fits nothing raises here every time: errors are not kept
        kept = memo.put(key, _iteration_shape(platform, workload, strategy, schedule, samples, requested,
                                              fixed))
    chunks, stages, virtual, m, memory = kept
    # copies: the kept entry is never shared with a caller that could change it
    stages = [list(layer_ids) for layer_ids in stages]
    virtual = stages if virtual is None else [list(layer_ids) for layer_ids in virtual]
    return IterationPlan(platform=platform, workload=workload, strategy=strategy, schedule=schedule,
                         samples_per_dp=samples, microbatches=m, requested_microbatches=requested,
                         stages=stages, memory=copy(memory), virtual_stages=virtual, chunks=chunks)


def _iteration_shape(platform, workload, strategy, schedule, samples, requested, fixed: bool) -> tuple:
    """(chunks, stages, virtual stages or None where they are the stages, microbatches, memory
    plan) of a validated request (:func:`plan_iteration`), as the model's cache keeps it
    (``iteration_shapes``)."""
    chunks = workload.interleave if strategy.pp > 1 and workload.mode == "weight-stationary" else 1
    stages, virtual = interleaved_stages(workload, strategy.pp, chunks)
    m, memory = _fitting_microbatches(platform, workload, strategy, stages, samples, requested,
                                      schedule, fixed=fixed)
    return chunks, stages, None if virtual is stages else virtual, m, memory


def _fitting_microbatches(platform, workload, strategy, stages, samples, requested, schedule, *,
                          fixed: bool) -> tuple[int, MemoryPlan]:
    """The first microbatch count from ``requested`` up (divisors of ``samples`` only; just
    ``requested`` when ``fixed``) whose working set fits, with its memory plan; else the
    first count's error."""
    candidates = [k for k in range(requested, samples + 1) if samples % k == 0] or [requested]
    if fixed:
        candidates = [requested]
    error = None
    for k in candidates:
        try:
            return k, memory_plan(platform, workload, strategy, stages, samples / k, k, schedule)
        except FredError as exc:
            error = error or exc
    raise error
