"""Per-NPU memory of a training iteration: does it fit, and with what fallback.

:func:`memory_plan` sums, for every pipeline stage, weights, ZeRO-2 gradients and optimizer
state (weight-stationary) or the resident layers' weights and gradients (weight-streaming), and
the activations kept for the backward (all, all but the attention core under selective
recomputation, or each layer's input under full recomputation: ``Workload.recompute``); in
``auto`` mode, when a stage's sum exceeds the NPU's HBM that stage falls back to full
activation recomputation, then (weight streaming only) to offloading activation checkpoints
through the I/O controllers, and otherwise raises naming what overflows. Each stage's fallback
is its own (:attr:`MemoryPlan.stage_recompute`): under 1F1B the first stages keep more
microbatches in flight, so a stage may need recomputation that a heavier later one does not.
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.contracts.errors import FredError
from hdl.contracts.placement import Strategy
from sysmodel.platform import Platform
from sysmodel.workloads import BYTES, RECOMPUTE_MODES, Workload

__all__ = ["MemoryPlan", "memory_plan"]


@dataclass
class MemoryPlan:
    """Per-NPU memory of an iteration: the most loaded stage's bytes and each stage's fallback.

    Members: ``stage`` (index of the most loaded stage), its ``weights``, ``gradients``,
    ``optimizer``, ``activations`` (bytes), ``capacity`` (HBM bytes per NPU),
    ``stage_recompute`` (per pipeline stage, the recomputation it runs: ``none``,
    ``selective`` -- all but the attention core kept -- or ``full`` -- each layer's input kept;
    the compute and communication timers apply each stage's own) and ``stage_offload`` (per
    stage, whether its activation checkpoints go to external memory). The plan-wide aggregates
    are properties: :attr:`strongest_recompute` (for reporting) and :attr:`offload` (any stage:
    the iteration's spills are one collective of every NPU, ``CommTimer.spill``)."""

    stage: int
    weights: float
    gradients: float
    optimizer: float
    activations: float
    capacity: float
    stage_recompute: tuple
    stage_offload: tuple

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations

    @property
    def strongest_recompute(self) -> str:
        """The strongest recomputation any stage runs (``none`` < ``selective`` < ``full``)."""
        return max(self.stage_recompute, key=RECOMPUTE_MODES.index)

    @property
    def offload(self) -> bool:
        """Whether any stage offloads its activation checkpoints."""
        return any(self.stage_offload)

    def stages_recomputing(self, mode: str) -> tuple[int, ...]:
        """The stages that run recomputation ``mode``."""
        return tuple(s for s, m in enumerate(self.stage_recompute) if m == mode)

    def to_dict(self) -> dict:
        return {**self.__dict__, "strongest_recompute": self.strongest_recompute, "offload": self.offload,
                "total": self.total}


def memory_plan(platform: Platform, workload: Workload, strategy: Strategy, stages, mb: float,
                microbatches: int, schedule: str) -> MemoryPlan:
    """Memory per NPU of every stage, each with its own fallback; raises naming what overflows
    when a stage fits nothing.

    ``stages``: layer indices per pipeline stage; ``mb``: samples per microbatch;
    ``microbatches``: microbatches per iteration; ``schedule``: ``1f1b`` or ``gpipe`` (how many
    microbatches' activations a stage keeps at once).

    Recomputation follows ``workload.recompute``, stage by stage: ``auto`` keeps every
    activation of a stage when they fit and recomputes that stage fully otherwise (then, in
    weight streaming, offloads its checkpoints); ``none`` / ``selective`` / ``full`` are fixed
    for every stage (selective keeps all but the attention core, full keeps each layer's
    input). Under ``workload.sequence_parallel`` the replicated activations and checkpoints are
    split over the MP group. The returned plan's bytes are the most loaded stage's (the first
    of equals)."""
    cap = platform.memory_capacity_bytes
    policy = workload.recompute
    sp = workload.sequence_parallel
    worst, modes, offloads = None, [], []
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
        modes.append(mode)
        offloads.append(offload)
        if worst is None or base + acts > sum(worst[1:]):
            worst = (s, weights, grads, opt, acts)
    return MemoryPlan(*worst, capacity=cap, stage_recompute=tuple(modes), stage_offload=tuple(offloads))
