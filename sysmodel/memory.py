"""Per-NPU memory of a training iteration: does it fit, and with what fallback.

:func:`memory_plan` sums, for every pipeline stage, weights, ZeRO-2 gradients and optimizer
state (weight-stationary) or the resident layers' weights and gradients (weight-streaming), and
the activations kept for the backward (all, all but the attention core under selective
recomputation, or each layer's input under full recomputation: ``Workload.recompute``); in
``auto`` mode, when that exceeds the NPU's HBM it falls back to full activation
recomputation, then (weight streaming only) to offloading activation checkpoints through the
I/O controllers, and otherwise raises naming what overflows.
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.contracts.errors import FredError
from hdl.contracts.placement import Strategy
from sysmodel.platform import Platform
from sysmodel.workloads import BYTES, Workload

__all__ = ["MemoryPlan", "memory_plan"]

_RANK = {"none": 0, "selective": 1, "full": 2}


@dataclass
class MemoryPlan:
    """Per-NPU memory of the most loaded stage (bytes) and whether recomputation or
    checkpoint offload is used.

    Members: ``stage`` (index of that stage), ``weights``, ``gradients``, ``optimizer``,
    ``activations`` (bytes), ``recompute`` (full recomputation) and ``offload`` (any stage
    needs them), ``capacity`` (HBM bytes per NPU), ``recompute_mode`` (the strongest any stage
    uses: ``none``, ``selective`` -- all but the attention core kept -- or ``full`` -- each
    layer's input kept)."""

    stage: int
    weights: float
    gradients: float
    optimizer: float
    activations: float
    recompute: bool
    offload: bool
    capacity: float
    recompute_mode: str = "none"

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations

    def to_dict(self) -> dict:
        return {**self.__dict__, "total": self.total}


def memory_plan(platform: Platform, workload: Workload, strategy: Strategy, stages, mb: float,
                microbatches: int, schedule: str) -> MemoryPlan:
    """Memory per NPU of the worst stage; raises naming what overflows when nothing fits.

    ``stages``: layer indices per pipeline stage; ``mb``: samples per microbatch;
    ``microbatches``: microbatches per iteration; ``schedule``: ``1f1b`` or ``gpipe`` (how many
    microbatches' activations a stage keeps at once).

    Recomputation follows ``workload.recompute``: ``auto`` keeps every activation when it
    fits and recomputes fully otherwise (then, in weight streaming, offloads checkpoints);
    ``none`` / ``selective`` / ``full`` are fixed (selective keeps all but the attention core,
    full keeps each layer's input). Under ``workload.sequence_parallel`` the replicated
    activations and checkpoints are split over the MP group."""
    cap = platform.memory_capacity_bytes
    policy = workload.recompute
    sp = workload.sequence_parallel
    worst = None
    for s, layer_ids in enumerate(stages):
        layers = [workload.layers[i] for i in layer_ids]
        inflight = microbatches if (schedule == "gpipe" or workload.mode == "weight-streaming") \
            else min(microbatches, strategy.pp - s)
        stored = [l.stored_bytes(strategy.mp, sequence_parallel=sp) for l in layers]
        full = inflight * mb * sum(stored)
        selective = inflight * mb * sum(l.stored_bytes(strategy.mp, sequence_parallel=sp, selective=True)
                                        for l in layers)
        ckpt = inflight * mb * sum(l.in_bytes / (strategy.mp if sp else 1) for l in layers) \
            + mb * max(stored)
        if workload.mode == "weight-stationary":
            p = sum(l.params / l.shards(strategy.mp) for l in layers)
            weights, grads = BYTES * p, BYTES * p / strategy.dp
            opt = platform.optimizer_bytes_per_param * p / strategy.dp
        else:
            biggest = sorted((l.params / l.shards(strategy.mp) for l in layers), reverse=True)
            p = sum(biggest[:workload.layers_on_wafer])
            weights, grads, opt = BYTES * p, BYTES * p, 0.0
        base = weights + grads + opt
        mode, offload = ("none" if policy == "auto" else policy), False
        acts = {"none": full, "selective": selective, "full": ckpt}[mode]
        if policy == "auto" and base + acts > cap:
            mode, acts = "full", ckpt
        if base + acts > cap:
            one = mb * max(stored)
            if policy in ("auto", "full") and workload.mode == "weight-streaming" and base + one <= cap:
                offload, acts = True, one
            else:
                how = {"none": "without recomputation", "selective": "with selective recomputation",
                       "full": "even with activation recomputation"}[mode]
                raise FredError(
                    f"{workload.name} with {strategy} does not fit in "
                    f"{platform.memory_capacity_gb:g} GB per NPU: stage {s} needs "
                    f"{(base + acts) / 1e9:.1f} GB {how} "
                    f"(weights {weights / 1e9:.1f}, gradients {grads / 1e9:.1f}, optimizer "
                    f"{opt / 1e9:.1f}, activations {acts / 1e9:.1f} GB)")
        plan = MemoryPlan(s, weights, grads, opt, acts, mode == "full", offload, cap, mode)
        if worst is None or plan.total > worst.total:
            worst = plan
        if s == 0 or mode != "none" or offload:
            if _RANK[mode] > _RANK[worst.recompute_mode]:
                worst.recompute_mode = mode
            worst.recompute = worst.recompute or mode == "full"
            worst.offload = worst.offload or offload
    return worst
