"""Compute time of one layer on one NPU: the timers the iteration's compute tasks use.

:func:`compute_timer` picks the platform's: :class:`ShapeCompute` when the platform has a
``[compute]`` model (:class:`sysmodel.compute.ComputeModel`), else :class:`RooflineCompute`.

:class:`RooflineCompute` times a layer's forward or backward for one microbatch as
``max(FLOPs / (peak * efficiency), HBM bytes / HBM bandwidth)``; FLOPs and weights of
MP-shardable layers are divided by the MP degree. Backward = 2x the forward's FLOPs (3x with
full activation recomputation; the roofline has no attention core to recompute selectively) and
2x its HBM bytes. It also times the sharded optimizer step, which
is memory-bound. Every large GEMM runs at the same efficiency here.

:class:`ShapeCompute` times a layer's GEMMs by their shape-dependent efficiency and its
element-wise work as HBM-bound (:meth:`sysmodel.compute.ComputeModel.layer_time`); the backward
adds the recomputed forward (full recomputation) or the recomputed attention core (selective).
Layers without GEMM shapes or element-wise work fall back to the roofline.

The recomputation is not the timer's: it is a property of the pipeline stage a backward runs on
(:attr:`sysmodel.memory.MemoryPlan.stage_recompute`), so ``layer_s`` takes it per call and a
task's source names it (``("layer", layer, backward, recompute)``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from hdl.contracts.placement import Strategy
from sysmodel.model_cache import current
from sysmodel.platform import Platform
from sysmodel.workloads import BYTES, Layer, checked_recompute_mode, layer_shape

__all__ = ["RooflineCompute", "ShapeCompute", "compute_timer"]


@dataclass(frozen=True)
class RooflineCompute:
    """Compute times on one NPU of ``platform`` under ``strategy``.

    Members: ``platform``, ``strategy``, ``microbatch_samples`` (samples per microbatch)."""

    platform: Platform
    strategy: Strategy
    microbatch_samples: float

    @property
    def flops_per_s(self) -> float:
        """Sustained FLOP/s: peak x compute efficiency."""
        return self.platform.peak_flops * self.platform.compute_efficiency

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.platform.memory_bandwidth_gbps * 1e9

    def layer_s(self, layer: Layer, *, backward: bool, recompute: str = "none") -> float:
        """Seconds of ``layer``'s forward (or backward) for one microbatch on one NPU;
        ``recompute``: the recomputation of the stage the backward runs on (one of
        :data:`~sysmodel.workloads.RECOMPUTE_MODES`; only ``full`` adds work here: the forward's
        FLOPs again); a forward ignores it."""
        checked_recompute_mode(recompute)
        shard = layer.shards(self.strategy.mp)
        mb = self.microbatch_samples
        flops = layer.fwd_flops * mb / shard
        nbytes = BYTES * layer.params / shard + mb * (layer.in_bytes + layer.out_bytes)
        if backward:
            flops *= 3 if recompute == "full" else 2
            nbytes *= 2
        return max(flops / self.flops_per_s, nbytes / self.hbm_bytes_per_s)

    def optimizer_step_s(self, params: float) -> float:
        """Seconds of the ZeRO-2-sharded optimizer step over ``params`` (the stage's MP shard;
        each DP rank updates 1/DP of it): memory-bound, reading and writing the optimizer
        state (FP32 master + moments) and the FP16 weight and gradient once each."""
        return optimizer_step_bytes(self.platform, self.strategy, params) / self.hbm_bytes_per_s


def optimizer_step_bytes(platform: Platform, strategy: Strategy, params: float) -> float:
    """HBM bytes of one DP rank's share of the optimizer step over ``params``:
    ``platform.optimizer_step_bytes_per_param`` per parameter when set, else the optimizer
    state (FP32 master + moments) read and written and the FP16 weight and gradient."""
    per_param = platform.optimizer_step_bytes_per_param or \
        (platform.optimizer_bytes_per_param * 2 + 2 * BYTES)
    return params / strategy.dp * per_param


@dataclass(frozen=True)
class ShapeCompute:
    """Shape-dependent compute times on one NPU of ``platform`` (which has a ``compute``
    model) under ``strategy``.

    Members: ``platform``, ``strategy``, ``microbatch_samples``, ``sequence_parallel``,
    ``dtype`` (the GEMMs' data type)."""

    platform: Platform
    strategy: Strategy
    microbatch_samples: float
    sequence_parallel: bool = False
    dtype: str = "fp16"

    def __post_init__(self):
        object.__setattr__(self, "_times", {})
        object.__setattr__(self, "_roofline", RooflineCompute(self.platform, self.strategy, self.microbatch_samples))

    def layer_s(self, layer: Layer, *, backward: bool, recompute: str = "none") -> float:
        """Seconds of ``layer``'s forward (or backward) for one microbatch on one NPU;
        ``recompute``: the recomputation of the stage the backward runs on (one of
        :data:`~sysmodel.workloads.RECOMPUTE_MODES`); a forward ignores it. Layers of one shape
        (equal but for their names: a transformer's blocks) are timed once per timer: the time
        reads no name (:func:`~sysmodel.workloads.layer_shape`)."""
        key = (id(layer), backward, recompute)
        t = self._times.get(key)
        if t is None:
            # the key holds the shape: its id stays its own; one forward time whatever the
            # stage recomputes
            mode = checked_recompute_mode(recompute)
            shape_key = (layer_shape(layer), backward, mode if backward else "none")
            t = self._times.get(shape_key)
            if t is None:
                t = self._times[shape_key] = self._shared_layer_s(*shape_key)
            self._times[key] = t
        return t

    def _shared_layer_s(self, layer: Layer, backward: bool, recompute: str) -> float:
        # A layer's time depends only on the values below, which repeat across the
        # iterations of an evaluation (every fabric of a strategy, every fabric variant of a
        # design-space sweep): computed once per model cache
        # (:mod:`sysmodel.model_cache`, ``layer_times``; a layer is a value: equal layers of
        # different workloads share their times).
        memo = current().layer_times
        key = (layer, backward, self.platform.npu_compute, layer.shards(self.strategy.mp),
               self.microbatch_samples, recompute, self.sequence_parallel, self.dtype)
        hit = memo.get(key)
        return memo.put(key, self._layer_s(layer, backward, recompute)) if hit is None else hit

    def _layer_s(self, layer: Layer, backward: bool, recompute: str) -> float:
        if not (layer.gemms or layer.vectors):
            return self._roofline.layer_s(layer, backward=backward, recompute=recompute)
        cm, shard, mb = self.platform.compute, layer.shards(self.strategy.mp), self.microbatch_samples
        args = dict(samples=mb, mp=shard, dtype=self.dtype, sequence_parallel=self.sequence_parallel)
        # FLOPs the file gives beside no GEMM shapes run at the flat efficiency
        flat = layer.fwd_flops * mb / shard / self._roofline.flops_per_s if not layer.gemms else 0.0
        fwd = cm.layer_time(layer.gemms, layer.vectors, backward=False, **args) + flat
        if not backward:
            return fwd
        t = cm.layer_time(layer.gemms, layer.vectors, backward=True, **args) + 2 * flat
        if recompute == "full":
            t += fwd
        elif recompute == "selective":
            t += cm.layer_time(layer.gemms, layer.vectors, backward=False, only_core=True, **args)
        return t

    def optimizer_step_s(self, params: float) -> float:
        """The sharded optimizer step as element-wise (HBM-bound) work (see
        :meth:`RooflineCompute.optimizer_step_s` for the bytes)."""
        return self.platform.compute.vector_time(optimizer_step_bytes(self.platform, self.strategy, params))


def timer_key(timer) -> tuple:
    """What a compute timer's times depend on besides the layer (a value, for memos): its kind,
    its platform's compute and training sections (the optimizer step reads the latter) and its
    other members."""
    return (type(timer), timer.platform.npu_compute, timer.platform.training_spec,
            *(getattr(timer, f.name) for f in fields(timer) if f.name != "platform"))


def compute_timer(plan):
    """The compute timer of ``plan`` (an :class:`~sysmodel.iteration_plan.IterationPlan`):
    shape-dependent when its platform has a compute model, else the roofline. Each backward is
    asked for with its stage's recomputation (``plan.memory.stage_recompute``)."""
    if plan.platform.compute is not None:
        return ShapeCompute(plan.platform, plan.strategy, plan.microbatch_samples,
                            sequence_parallel=plan.workload.sequence_parallel, dtype=plan.workload.dtype)
    return RooflineCompute(plan.platform, plan.strategy, plan.microbatch_samples)
