"""Per-NPU memory of a training iteration: does it fit, and with what fallback.

:func:`memory_plan` sums, for every pipeline stage, weights, ZeRO-2 gradients and optimizer
state (weight-stationary) or the resident layers' weights and gradients (weight-streaming), and
the activations kept for the backward; when that exceeds the NPU's HBM it falls back to
activation recomputation, then (weight streaming only) to offloading activation checkpoints
through the I/O controllers, and otherwise raises naming what overflows.
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.base.errors import FredError
from hdl.base.placement import Strategy
from sysmodel.platform import Platform
from sysmodel.workloads import BYTES, Workload

__all__ = ["MemoryPlan", "memory_plan"]


@dataclass
class MemoryPlan:
    """Per-NPU memory of the most loaded stage (bytes) and whether recomputation or
    checkpoint offload is used.

    Members: ``stage`` (index of that stage), ``weights``, ``gradients``, ``optimizer``,
    ``activations`` (bytes), ``recompute`` and ``offload`` (any stage needs them),
    ``capacity`` (HBM bytes per NPU)."""

    stage: int
    weights: float
    gradients: float
    optimizer: float
    activations: float
    recompute: bool
    offload: bool
    capacity: float

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
    microbatches' activations a stage keeps at once)."""
    cap = platform.memory_capacity_bytes
    worst = None
    for s, layer_ids in enumerate(stages):
        layers = [workload.layers[i] for i in layer_ids]
        inflight = microbatches if (schedule == "gpipe" or workload.mode == "weight-streaming") \
            else min(microbatches, strategy.pp - s)
        full = inflight * mb * sum(l.stored_bytes(strategy.mp) for l in layers)
        ckpt = inflight * mb * sum(l.in_bytes for l in layers) \
            + mb * max(l.stored_bytes(strategy.mp) for l in layers)
        if workload.mode == "weight-stationary":
            p = sum(l.params / l.shards(strategy.mp) for l in layers)
            weights, grads = BYTES * p, BYTES * p / strategy.dp
            opt = platform.optimizer_bytes_per_param * p / strategy.dp
        else:
            biggest = sorted((l.params / l.shards(strategy.mp) for l in layers), reverse=True)
            p = sum(biggest[:workload.layers_on_wafer])
            weights, grads, opt = BYTES * p, BYTES * p, 0.0
        base = weights + grads + opt
        recompute = offload = False
        acts = full
        if base + full > cap:
            recompute, acts = True, ckpt
            if base + ckpt > cap:
                if workload.mode == "weight-streaming" and base + mb * max(
                        l.stored_bytes(strategy.mp) for l in layers) <= cap:
                    offload, acts = True, mb * max(l.stored_bytes(strategy.mp) for l in layers)
                else:
                    raise FredError(
                        f"{workload.name} with {strategy} does not fit in "
                        f"{platform.memory_capacity_gb:g} GB per NPU: stage {s} needs "
                        f"{(base + ckpt) / 1e9:.1f} GB even with activation recomputation "
                        f"(weights {weights / 1e9:.1f}, gradients {grads / 1e9:.1f}, optimizer "
                        f"{opt / 1e9:.1f}, activations {ckpt / 1e9:.1f} GB)")
        plan = MemoryPlan(s, weights, grads, opt, acts, recompute, offload, cap)
        if worst is None or plan.total > worst.total:
            worst = plan
        if s == 0 or recompute or offload:
            worst_flags = (worst.recompute or recompute, worst.offload or offload)
            worst.recompute, worst.offload = worst_flags
    return worst
