"""Weak scaling over data parallelism: with the same pipeline replica, more DP replicas add only
the exposed gradient reduction and the optimizer step's change (docs/sysmodel.md, "Overlap
policy": a blocking reduction with PP > 1 runs after the stage's pipeline schedule)."""

import pytest

from hdl.contracts.placement import parse_strategy
from sysmodel.comm_timing import CommTimer
from sysmodel.compute_timing import compute_timer
from sysmodel.iteration_plan import plan_iteration
from sysmodel.platform import default_platform
from sysmodel.training import simulate_iteration
from studies.validation import cluster_platform
from sysmodel.workloads import transformer

MICROBATCHES = 8


def replica(mp: int, pp: int, dp: int):
    """A small Megatron-style model: the same pipeline replica (MP ``mp``, PP ``pp``, 8
    microbatches of 1 sample) at any DP; full recomputation as in the validation cases."""
    return transformer(name=f"weak-pp{pp}-dp{dp}", layers=18, hidden=512, heads=8, seq=256,
                       vocab=8192, mode="weight-stationary", strategy=f"MP{mp}-DP{dp}-PP{pp}",
                       microbatches=MICROBATCHES, samples_per_dp=MICROBATCHES,
                       pipeline_split="layers", recompute="full")


#: where -> (fabric, MP, DP, platform): the GPU cluster (blocking PP sends, as Megatron-LM; 64
#: GPUs) and the paper's 20-NPU wafer on Fred-C (PP sends overlap compute). A 1-element bucket
#: makes every layer's gradient a bucket of its own, so each stage's reductions add up by hand.
SETUPS = {"cluster": ("cluster", 2, 4, lambda: cluster_platform().scaled(npus=64, dp_bucket_elements=1.0)),
          "wafer": ("fred-c", 1, 2, lambda: default_platform().scaled(dp_bucket_elements=1.0))}


def hand_bound(platform, fabric, mp, pp, dp) -> float:
    """The most a DP-``dp`` iteration may exceed the DP-1 one by: each stage's gradient buckets
    all-reduced one after another alone (no link shared with anything), plus its optimizer
    step at DP ``dp`` (ZeRO-2: 1/DP of it), less the fastest stage's optimizer step at DP 1.
    Assumes the pipeline's own tasks end when they do at DP 1 (the reduction delays no send)."""
    def per_stage(d):
        wl = replica(mp, pp, d)
        plan = plan_iteration(platform, wl, microbatches=MICROBATCHES)
        comm = CommTimer(platform, fabric, plan.strategy, plan.microbatch_samples)
        compute = compute_timer(plan)
        out = []
        for s, layers in enumerate(plan.stages):
            shards = [wl.layers[i].params / wl.layers[i].shards(mp) for i in layers]
            reduce_s = sum(comm.dp(e, s).time_s for e in shards if e > 0)
            out.append((reduce_s, compute.optimizer_step_s(sum(shards))))
        return out
    at_dp, at_1 = per_stage(dp), per_stage(1)
    return max(r + o for r, o in at_dp) - min(o for _, o in at_1)


@pytest.mark.parametrize("where", ["cluster", "wafer"])
@pytest.mark.parametrize("pp", [1, 2, 8])
def test_more_replicas_add_no_more_than_the_reduction_and_the_optimizer(where, pp):
    fabric, mp, dp, make = SETUPS[where]
    platform = make()
    one = simulate_iteration(platform, fabric, replica(mp, pp, 1), microbatches=MICROBATCHES)
    many = simulate_iteration(platform, fabric, replica(mp, pp, dp), microbatches=MICROBATCHES)
    bound = hand_bound(platform, fabric, mp, pp, dp)
    growth = many.steady_time_s - one.steady_time_s
    assert growth <= bound * (1 + 1e-9) + 1e-12, (growth, bound)
    # the replica's compute is the same (less the sharded optimizer step); the idle time it
    # gains is at most the bound too: no bubble appears that the reduction does not explain
    assert many.breakdown["compute"] <= one.breakdown["compute"] * (1 + 1e-9)
    assert many.breakdown["bubble"] - one.breakdown["bubble"] <= max(bound, 0.0) * (1 + 1e-9) + 1e-12
