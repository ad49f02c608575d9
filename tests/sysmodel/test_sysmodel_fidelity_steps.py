"""The fidelity mechanisms (docs/sysmodel.md, Fidelity) inside s12's iteration steps: each checked alone, by hand.

Plan (fewer NPUs, interleaved virtual stages), compute timing (shape-dependent timer and its
recomputation terms), communication timing (MP backward factor, pipeline scatter/all-gather)
and the task graph (blocking pipeline sends).
"""

from __future__ import annotations

import pytest

from hdl.contracts.placement import parse_strategy
from sysmodel.collectives import Collective, evaluate
from sysmodel.comm_timing import CommTimer
from sysmodel.compute import Gemm, VectorOp
from sysmodel.compute_timing import RooflineCompute, ShapeCompute, compute_timer
from sysmodel.iteration_plan import interleaved_stages, plan_iteration, stage_layers
from sysmodel.platform import default_platform
from sysmodel.task_graphs import StageEngine, interleaved_ops
from sysmodel.training import build_task_graph
from sysmodel.workloads import Layer, Workload

P = default_platform()


def shaped(name="g", core=False):
    """A layer with one GEMM (and one element-wise op) per sample, or none (``core``: the GEMM
    is attention core, recomputed by selective recomputation)."""
    return Layer(name, fwd_flops=2 * 512 * 1024 * 1024, params=1024 * 1024, out_bytes=2 * 512 * 1024,
                 in_bytes=2 * 512 * 1024, gemms=(Gemm(512, 1024, 1024, core=core),),
                 vectors=(VectorOp(4 * 512 * 1024),))


def workload(layers, strategy="MP1-DP20-PP1", microbatches=1, samples=4, **kw):
    return Workload(name="w", layers=tuple(layers), mode="weight-stationary",
                    strategy=parse_strategy(strategy), microbatches=microbatches,
                    samples_per_dp=samples, **kw)


# -- plan ----------------------------------------------------------------------------------------
def test_plan_on_fewer_npus_counts_the_idle_ones():
    w = workload([shaped("a"), shaped("b")], strategy="MP3-DP3-PP2", microbatches=2)
    plan = plan_iteration(P, w)
    assert plan.idle_npus == 2 and "2 of 20 NPUs idle" in plan.notes()


def test_interleaved_stages_give_each_stage_every_pp_th_virtual_stage():
    w = workload([shaped(str(i)) for i in range(8)])
    stages, virtual = interleaved_stages(w, 2, 2)
    assert len(virtual) == 4 and [i for v in virtual for i in v] == list(range(8))
    assert stages == [virtual[0] + virtual[2], virtual[1] + virtual[3]]
    plain, same = interleaved_stages(w, 2, 1)
    assert plain == same == stage_layers(w, 2)


def test_interleaved_ops_two_stages_two_chunks_by_hand():
    # PP 2, 2 microbatches, 2 chunks: stage 0 warms up with (2-0-1)*2 + (2-1)*2 = 4 forwards
    assert interleaved_ops(0, 2, 2, 2) == [("F", 0, 0), ("F", 1, 0), ("F", 0, 1), ("F", 1, 1),
                                           ("B", 0, 1), ("B", 1, 1), ("B", 0, 0), ("B", 1, 0)]
    # stage 1: (2-1-1)*2 + 2 = 2 warm-up forwards, then one forward / one backward
    assert interleaved_ops(1, 2, 2, 2) == [("F", 0, 0), ("F", 1, 0), ("F", 0, 1), ("B", 0, 1),
                                           ("F", 1, 1), ("B", 1, 1), ("B", 0, 0), ("B", 1, 0)]


# -- compute timing ------------------------------------------------------------------------------
def test_compute_timer_follows_the_platform_compute_section():
    w = workload([shaped()])
    assert isinstance(compute_timer(plan_iteration(P, w)), ShapeCompute)
    flat = P.scaled(compute=None)
    assert isinstance(compute_timer(plan_iteration(flat, w)), RooflineCompute)


def test_shape_compute_recomputation_terms_by_hand():
    s, cm = parse_strategy("MP1-DP20-PP1"), P.compute
    layer, core = shaped(), shaped(core=True)
    args = dict(samples=2, mp=1, dtype="fp16", sequence_parallel=False)

    timer = ShapeCompute(P, s, microbatch_samples=2)

    fwd = cm.layer_time(layer.gemms, layer.vectors, backward=False, **args)
    bwd = cm.layer_time(layer.gemms, layer.vectors, backward=True, **args)
    assert timer.layer_s(layer, backward=False) == pytest.approx(fwd, rel=1e-12)
    assert timer.layer_s(layer, backward=False, recompute="full") == timer.layer_s(layer, backward=False)
    assert timer.layer_s(layer, backward=True, recompute="none") == pytest.approx(bwd, rel=1e-12)
    assert timer.layer_s(layer, backward=True, recompute="full") == pytest.approx(bwd + fwd, rel=1e-12)
    # selective recomputes only the attention core: nothing for a non-core GEMM, the GEMM for a core one
    assert timer.layer_s(layer, backward=True, recompute="selective") == pytest.approx(bwd, rel=1e-12)
    core_fwd = cm.layer_time(core.gemms, core.vectors, backward=False, only_core=True, **args)
    assert core_fwd > 0
    assert timer.layer_s(core, backward=True, recompute="selective") == pytest.approx(
        cm.layer_time(core.gemms, core.vectors, backward=True, **args) + core_fwd, rel=1e-12)


def test_shape_compute_falls_back_to_the_roofline_without_shapes():
    s = parse_strategy("MP2-DP10-PP1")
    bare = Layer("bare", fwd_flops=2e9, params=6e5, out_bytes=4e4, in_bytes=1e4)
    shape = ShapeCompute(P, s, microbatch_samples=4)
    roof = RooflineCompute(P, s, microbatch_samples=4)
    for backward in (False, True):
        assert shape.layer_s(bare, backward=backward, recompute="full") == \
            roof.layer_s(bare, backward=backward, recompute="full")
    # the optimizer step is element-wise: HBM at the vector efficiency
    assert shape.optimizer_step_s(1e6) == pytest.approx(
        roof.optimizer_step_s(1e6) / P.compute.vector_efficiency, rel=1e-12)
    fixed = P.scaled(optimizer_step_bytes_per_param=38.0)
    assert RooflineCompute(fixed, s, 4).optimizer_step_s(1e6) == pytest.approx(
        1e6 / 10 * 38 / (P.memory_bandwidth_gbps * 1e9), rel=1e-12)


# -- communication timing ------------------------------------------------------------------------
@pytest.mark.parametrize("mode, sp, factor", [("none", False, 1.0), ("selective", False, 1.0),
                                              ("full", False, 2.0), ("selective", True, 1.5),
                                              ("full", True, 2.0)])
def test_mp_backward_factor(mode, sp, factor):
    """Backward MP collectives relative to the forward's: its own, the recomputed forward's,
    and under sequence parallelism the re-gathered inputs (half an all-reduce each)."""
    s = parse_strategy("MP2-DP10-PP1")
    comm = CommTimer(P, "fred-c", s, 2, sequence_parallel=sp)
    assert comm.mp_backward_factor(mode) == factor
    layer = shaped()
    assert comm.mp(layer, 0, backward=True, recompute=mode).time_s == pytest.approx(
        comm.mp(layer, 0).time_s * factor, rel=1e-12)


def test_pipeline_scatter_gather_is_a_split_send_then_an_all_gather():
    s = parse_strategy("MP2-DP5-PP2")
    p = P.scaled(pp_scatter_gather=True)
    nbytes = 1e7
    pairs = tuple((s.rank(mp=k, dp=dp, pp=0), s.rank(mp=k, dp=dp, pp=1))
                  for dp in range(5) for k in range(2))
    send = evaluate(p, "fred-c", [Collective("point-to-point", size=nbytes / 2, pairs=pairs)]).time_s
    groups = [tuple(s.rank(mp=k, dp=dp, pp=1) for k in range(2)) for dp in range(5)]
    gather = evaluate(p, "fred-c", [Collective("all-gather", g, nbytes) for g in groups]).time_s
    assert CommTimer(p, "fred-c", s, 1).pp(0, 1, nbytes).time_s == pytest.approx(send + gather, rel=1e-12)


# -- task graph ----------------------------------------------------------------------------------
@pytest.mark.parametrize("pp_overlap", [True, False])
def test_blocking_pipeline_sends_hold_the_stage_compute(pp_overlap):
    """``pp_overlap = false`` (Megatron): stage 0's next forward starts only after its previous
    forward's send; with overlap it starts as soon as the compute unit is free."""
    w = workload([shaped("a"), shaped("b")], strategy="MP1-DP10-PP2", microbatches=2)
    plan = plan_iteration(P.scaled(pp_overlap=pp_overlap), w)
    eng = StageEngine(blocking=False)
    build_task_graph(eng, plan, "mesh")
    sched = eng.run()
    by_name = {t.name: t for t in sched.tasks}
    send, next_forward = by_name["F0 s0 send"], by_name["F1 s0 a"]
    if pp_overlap:
        assert next_forward.start == pytest.approx(by_name["F0 s0 a"].end)
        assert next_forward.start < send.end
    else:
        assert next_forward.start == pytest.approx(send.end)
