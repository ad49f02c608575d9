"""Recomputation per pipeline stage (session 23): the memory plan states each stage's fallback,
and the compute and MP timers apply each stage's own, not the strongest on every stage.

Until then ``memory_plan`` folded a stage's fallback into the most loaded stage found so far: a
later, heavier stage that needed none dropped an earlier stage's recomputation (Transformer-17B
MP3-DP3-PP2 at 35 GB: stage 0 recomputes fully, the plan said ``none``)."""

from __future__ import annotations

import dataclasses

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.placement import parse_strategy
from sysmodel.compute_timing import compute_timer
from sysmodel.graph_template import GraphTemplate
from sysmodel.iteration_plan import plan_iteration
from sysmodel.platform import default_platform
from sysmodel.task_graphs import StageEngine
from sysmodel.training import build_task_graph, comm_timer, simulate_iteration
from sysmodel.workload_file import get_workload
from sysmodel.workloads import Layer, Workload

P = default_platform()
#: the flat roofline (no compute model): a backward is 2x the forward's FLOPs, 3x recomputing
FLAT = P.scaled(compute=None, optimizer_bytes_per_param=12)
FLOPS_PER_S = FLAT.peak_flops * FLAT.compute_efficiency


def two_stages(a_stored: float, b_stored: float) -> Workload:
    """Two layers of 2 TFLOPs per sample, one per stage of MP1-DP10-PP2, 4 microbatches of one
    sample (1F1B: stage 0 keeps 2 in flight, stage 1 one). Layer a (stage 0): 1e8 parameters,
    ``a_stored`` activation bytes per sample; b (stage 1): 1e9 parameters, ``b_stored``. Both
    compute-bound (weights over HBM: 0.06 and 0.6 ms, against 4 ms of FLOPs)."""
    layers = (Layer("a", fwd_flops=2e12, params=1e8, out_bytes=1e6, in_bytes=1e6, stored_coeff=(0.0, a_stored)),
              Layer("b", fwd_flops=2e12, params=1e9, out_bytes=1e6, in_bytes=1e6, stored_coeff=(0.0, b_stored)))
    return Workload(name="two", layers=layers, mode="weight-stationary", strategy=parse_strategy("MP1-DP10-PP2"),
                    microbatches=4, samples_per_dp=4)


def test_only_stage_0_recomputes_by_hand():
    """By hand (bytes, 12 optimizer bytes per parameter, ZeRO-2 over DP 10):
    stage 0: weights 2e8 + gradients 2e7 + optimizer 1.2e8 = 3.4e8; activations of 2
    microbatches 2 x 4e9 = 8e9: 8.34 GB > 8 GB; recomputing, 2 inputs (2e6) + one layer's
    activations (4e9): 4.342 GB. Stage 1: 2e9 + 2e8 + 1.2e9 = 3.4e9 and one microbatch's 4e9:
    7.4 GB, fits, and is the most loaded stage -- the one the old plan started from, dropping
    stage 0's recomputation."""
    plan = plan_iteration(FLAT.scaled(memory_capacity_gb=8.0), two_stages(4e9, 4e9))
    m = plan.memory
    assert m.stage_recompute == ("full", "none") and m.stage_offload == (False, False)
    assert m.strongest_recompute == "full" and not m.offload and m.stages_recomputing("full") == (0,)
    assert m.stage == 1
    assert (m.weights, m.gradients, m.optimizer, m.activations) == pytest.approx((2e9, 2e8, 1.2e9, 4e9), rel=1e-12)
    assert m.total == pytest.approx(7.4e9, rel=1e-12)
    assert plan.notes()[0] == "full activation recomputation (each layer's forward again before its backward) on stage 0"
    # with room for stage 0's 8.34 GB nothing recomputes
    assert plan_iteration(FLAT.scaled(memory_capacity_gb=8.4), two_stages(4e9, 4e9)).memory.stage_recompute == \
        ("none", "none")


def test_the_forward_again_is_in_stage_0s_backwards_only():
    """The plan above in the task graph: every backward on stage 0 takes 3 x 2e12 FLOPs (its
    forward again), every backward on stage 1 and every forward 2x / 1x; a task's source names
    its stage's recomputation (a graph template re-times by it)."""
    plan = plan_iteration(FLAT.scaled(memory_capacity_gb=8.0), two_stages(4e9, 4e9))
    eng = StageEngine(blocking=False)
    build_task_graph(eng, plan, "fred-d")
    names, duration = eng.names(), eng.arrays().duration
    forward, by_stage = 2e12 / FLOPS_PER_S, {0: 3, 1: 2}
    seen = {0: 0, 1: 0}
    for s, factor in by_stage.items():
        for t in eng.queues[f"s{s}.compute"]:
            src = eng.sources[t]
            if src is None or src[0] != "layer":
                continue
            backward = names[t].startswith("B")
            assert src[2] is backward and src[3] == ("full" if backward and s == 0 else "none")
            assert duration[t] == pytest.approx(forward * (factor if backward else 1), rel=1e-12), names[t]
            seen[s] += backward
    assert seen == {0: 4, 1: 4}   # each stage's 4 microbatches' backwards


def _t17(capacity_gb: float, **workload):
    w = get_workload("transformer-17b")
    if workload:
        w = w.with_(**workload)
    return plan_iteration(P.scaled(memory_capacity_gb=capacity_gb), w, parse_strategy("MP3-DP3-PP2"))


def test_transformer_17b_mp3_dp3_pp2_at_35_gb():
    """The example that showed the defect: at 35 GB stage 0 (two microbatches in flight)
    recomputes fully and stage 1 (one in flight, more weights: the head) does not, and is the
    most loaded; at 80 GB neither. In the graph, stage 0's backward blocks take the forward
    again and their MP all-reduces twice the forward's; stage 1's once."""
    plan = _t17(35.0)
    assert plan.memory.stage_recompute == ("full", "none") and plan.memory.stage == 1
    assert _t17(80.0).memory.stage_recompute == ("none", "none")
    timer = compute_timer(plan)
    eng = StageEngine(blocking=False)
    build_task_graph(eng, plan, "fred-d")
    names, duration = eng.names(), eng.arrays().duration
    block = {s: plan.workload.layers[plan.stages[s][5]] for s in (0, 1)}   # a transformer block per stage
    for s, mode in ((0, "full"), (1, "none")):
        layer = block[s]
        fwd, bwd = timer.layer_s(layer, backward=False), timer.layer_s(layer, backward=True)
        tag = f" s{s} {layer.name}"
        compute = {n.split(" ")[0][0]: duration[t] for t in eng.queues[f"s{s}.compute"]
                   if (n := names[t]).endswith(tag)}
        mp = {n.split(" ")[0][0]: duration[t] for t in eng.queues[f"s{s}.mp"] if (n := names[t]).endswith(tag + " mp")}
        assert compute["F"] == fwd
        assert compute["B"] == pytest.approx(bwd + fwd if mode == "full" else bwd, rel=1e-12)
        assert mp["B"] == pytest.approx(mp["F"] * (2.0 if mode == "full" else 1.0), rel=1e-12)


def test_the_iteration_lies_between_no_and_every_stage_recomputing():
    """Transformer-17B MP3-DP3-PP2 at 35 GB (stage 0 recomputes) takes longer than without any
    recomputation and less than with full recomputation on both stages (the naive fix's
    figure), on the mesh and on Fred-D."""
    w = get_workload("transformer-17b")
    s = parse_strategy("MP3-DP3-PP2")
    for fabric in ("mesh", "fred-d"):
        none = simulate_iteration(P.scaled(memory_capacity_gb=80.0), fabric, w.with_(recompute="none"), s)
        stage0 = simulate_iteration(P.scaled(memory_capacity_gb=35.0), fabric, w, s)
        every = simulate_iteration(P.scaled(memory_capacity_gb=80.0), fabric, w.with_(recompute="full"), s)
        assert stage0.memory.stage_recompute == ("full", "none")
        assert none.time_s < stage0.time_s < every.time_s, fabric


def test_the_heavier_stage_recomputing():
    """GPipe (every stage keeps the 4 microbatches), stage 1 the one out of room, by hand:
    stage 0: 3.4e8 + 4 x 1e9 = 4.34 GB fits 10 GB; stage 1: 3.4e9 + 4 x 2e9 = 11.4 GB does not,
    recomputing 3.4e9 + 4 x 1e6 + 2e9 = 5.404 GB, the most loaded stage. Only stage 1
    recomputes (the old plan, starting from it, applied it to both). With a fixed policy every
    stage runs it."""
    w = two_stages(1e9, 2e9)
    plan = plan_iteration(FLAT.scaled(memory_capacity_gb=10.0), w, schedule="gpipe")
    assert plan.memory.stage_recompute == ("none", "full") and plan.memory.stage == 1
    assert plan.memory.total == pytest.approx(3.4e9 + 4e6 + 2e9, rel=1e-12)
    fixed = plan_iteration(FLAT.scaled(memory_capacity_gb=80.0), w.with_(recompute="selective"))
    assert fixed.memory.stage_recompute == ("selective", "selective")
    assert fixed.notes()[0] == "selective activation recomputation (the attention core)"


def test_a_recomputation_mode_that_is_none_of_the_three_is_refused_by_name():
    """The timers take a stage's resolved mode: ``auto`` (a policy) or a typo is an error."""
    plan = _t17(35.0)
    layer = plan.workload.layers[5]
    for timer in (compute_timer(plan), compute_timer(plan_iteration(FLAT, plan.workload, plan.strategy))):
        for backward in (False, True):
            with pytest.raises(FredError, match="recomputation must be one of none, selective, full, got 'auto'"):
                timer.layer_s(layer, backward=backward, recompute="auto")
    with pytest.raises(FredError, match="got 'ful'"):
        comm_timer(plan, "mesh").mp(layer, 0, backward=True, recompute="ful")


def test_a_template_retimes_each_stage_by_its_own_recomputation():
    """A graph kept as a template (its compute tasks' sources name their stage's
    recomputation) re-timed at another compute speed is the graph built at that speed, task
    for task, with stages recomputing differently."""
    plan = _t17(35.0)
    eng = StageEngine(blocking=False)
    build_task_graph(eng, plan, "fred-d")
    template = GraphTemplate(eng, 0.0)
    faster = P.scaled(memory_capacity_gb=35.0).with_compute_scale(1.7)
    fresh_plan = plan_iteration(faster, plan.workload, plan.strategy)
    assert fresh_plan.memory.stage_recompute == ("full", "none")
    fresh = StageEngine(blocking=False)
    build_task_graph(fresh, fresh_plan, "fred-d")
    assert template.instantiate(compute_timer(fresh_plan)).arrays().duration.tobytes() == \
        fresh.arrays().duration.tobytes()
