"""Compute time of one layer on one NPU: the roofline the iteration's compute tasks use.

:class:`RooflineCompute` times a layer's forward or backward for one microbatch as
``max(FLOPs / (peak * efficiency), HBM bytes / HBM bandwidth)``; FLOPs and weights of
MP-shardable layers are divided by the MP degree. Backward = 2x the forward's FLOPs (3x with
activation recomputation) and 2x its HBM bytes. It also times the sharded optimizer step, which
is memory-bound. Every large GEMM runs at the same efficiency here; a shape-dependent model
replaces :meth:`RooflineCompute.layer_s`.
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.base.placement import Strategy
from sysmodel.platform import Platform
from sysmodel.workloads import BYTES, Layer

__all__ = ["RooflineCompute"]


@dataclass(frozen=True)
class RooflineCompute:
    """Compute times on one NPU of ``platform`` under ``strategy``.

    Members: ``platform``, ``strategy``, ``microbatch_samples`` (samples per microbatch),
    ``recompute`` (activation recomputation: the backward repeats the forward)."""

    platform: Platform
    strategy: Strategy
    microbatch_samples: float
    recompute: bool = False

    @property
    def flops_per_s(self) -> float:
        """Sustained FLOP/s: peak x compute efficiency."""
        return self.platform.peak_flops * self.platform.compute_efficiency

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.platform.memory_bandwidth_gbps * 1e9

    def layer_s(self, layer: Layer, *, backward: bool) -> float:
        """Seconds of ``layer``'s forward (or backward) for one microbatch on one NPU."""
        shard = layer.shards(self.strategy.mp)
        mb = self.microbatch_samples
        flops = layer.fwd_flops * mb / shard
        nbytes = BYTES * layer.params / shard + mb * (layer.in_bytes + layer.out_bytes)
        if backward:
            flops *= 3 if self.recompute else 2
            nbytes *= 2
        return max(flops / self.flops_per_s, nbytes / self.hbm_bytes_per_s)

    def optimizer_step_s(self, params: float) -> float:
        """Seconds of the ZeRO-2-sharded optimizer step over ``params`` (the stage's MP shard;
        each DP rank updates 1/DP of it): memory-bound, reading and writing the optimizer
        state (FP32 master + moments) and the FP16 weight and gradient once each."""
        opt_bytes = params / self.strategy.dp * (self.platform.optimizer_bytes_per_param * 2 + 2 * BYTES)
        return opt_bytes / self.hbm_bytes_per_s
