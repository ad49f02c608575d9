"""The steps of a training iteration, each on its own: plan, compute timing, communication
timing, task graphs, breakdown, the iteration mean -- and one iteration computed by hand."""

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.placement import parse_strategy
from sysmodel.breakdown import attribute_time
from sysmodel.collectives import Collective, evaluate
from sysmodel.comm_timing import CommTimer
from sysmodel.compute_timing import RooflineCompute
from sysmodel.engine import Schedule, Task
from sysmodel.iteration_plan import plan_iteration, stage_layers
from sysmodel.platform import default_platform
from sysmodel.task_graphs import StageEngine, pipeline_ops, stage_resource
from sysmodel.training import build_task_graph, mean_iteration_s, simulate_iteration
from sysmodel.workloads import Layer, Workload
from sysmodel.workload_file import get_workload

P = default_platform()


def tiny(strategy="MP1-DP20-PP1", samples=4, microbatches=1, mode="weight-stationary", layers=None):
    """A two-layer workload whose every figure is easy to compute by hand."""
    layers = layers or (
        Layer("a", fwd_flops=2e9, params=6e5, out_bytes=4e4, in_bytes=1e4, mp_allreduces=2),
        Layer("b", fwd_flops=1e9, params=400_100, out_bytes=1e3, in_bytes=4e4, mp_allreduces=1,
              mp_shardable=False))
    return Workload(name="tiny", layers=layers, mode=mode, strategy=parse_strategy(strategy),
                    microbatches=microbatches, samples_per_dp=samples)


# -- plan ----------------------------------------------------------------------------------------
def test_stage_layers_per_mode():
    w = get_workload("transformer-17b")
    stationary = stage_layers(w, 2)
    assert [i for s in stationary for i in s] == list(range(len(w.layers)))   # contiguous, in order
    first = [w.layers[i].fwd_flops for i in stationary[0]]
    total = sum(l.fwd_flops for l in w.layers)
    assert sum(first) >= total / 2 > sum(first[:-1])           # cut at the layer that reaches half
    streaming = stage_layers(w.with_(mode="weight-streaming"), 3)
    assert streaming[1] == list(range(1, len(w.layers), 3))                 # layer l on stage l % PP
    with pytest.raises(FredError, match="PP\\(3\\) exceeds the 2 layers of tiny"):
        stage_layers(tiny(), 3)


def test_plan_takes_more_microbatches_only_when_memory_needs_them():
    w = tiny(strategy="MP1-DP10-PP2", samples=8, microbatches=2)
    assert plan_iteration(P, w).microbatches == 2
    heavy = tiny(strategy="MP1-DP10-PP2", samples=8, microbatches=2, layers=(
        Layer("a", fwd_flops=1e9, params=1e6, out_bytes=1e3, in_bytes=1e3, stored_coeff=(0.0, 2.5e10)),
        Layer("b", fwd_flops=1e9, params=1e6, out_bytes=1e3, in_bytes=1e3, stored_coeff=(0.0, 2.5e10))))
    # 2 microbatches of 4 samples: even with recomputation one layer's activations (100 GB)
    # exceed 80 GB; 4 microbatches of 2 fit (50 GB)
    plan = plan_iteration(P, heavy, schedule="gpipe")
    assert plan.microbatches == 4 and plan.memory.stage_recompute == ("full", "full")
    assert plan.notes()[0].startswith("4 microbatches (more than requested)")
    with pytest.raises(FredError, match="does not fit"):
        plan_iteration(P, heavy, schedule="gpipe", microbatches=2)
    with pytest.raises(FredError, match="9 microbatches cannot split 8"):
        plan_iteration(P, w, microbatches=9)


# -- compute timing ------------------------------------------------------------------------------
def test_roofline_compute_by_hand():
    s = parse_strategy("MP2-DP10-PP1")
    a, b = tiny().layers
    c = RooflineCompute(P, s, microbatch_samples=4)
    flops_per_s = P.peak_tflops * 1e12 * P.compute_efficiency
    hbm = P.memory_bandwidth_gbps * 1e9
    # a is MP-shardable (FLOPs and weights / 2) and compute-bound
    assert c.layer_s(a, backward=False) == pytest.approx(2e9 * 4 / 2 / flops_per_s, rel=1e-12)
    assert c.layer_s(a, backward=True) == pytest.approx(2 * 2e9 * 4 / 2 / flops_per_s, rel=1e-12)
    assert c.layer_s(a, backward=True, recompute="full") == pytest.approx(3 * 2e9 * 4 / 2 / flops_per_s,
                                                                          rel=1e-12)
    # the roofline has no attention core: selective recomputation adds nothing; a forward recomputes nothing
    assert c.layer_s(a, backward=True, recompute="selective") == c.layer_s(a, backward=True)
    assert c.layer_s(a, backward=False, recompute="full") == c.layer_s(a, backward=False)
    with pytest.raises(FredError, match="recomputation must be one of none, selective, full, got 'auto'"):
        c.layer_s(a, backward=True, recompute="auto")
    # a memory-bound layer: weights + activations in and out over HBM
    lean = Layer("lean", fwd_flops=1.0, params=1e9, out_bytes=1e3, in_bytes=1e3, mp_shardable=False)
    assert c.layer_s(lean, backward=False) == pytest.approx((2 * 1e9 + 4 * 2e3) / hbm, rel=1e-12)
    assert c.optimizer_step_s(1e6) == pytest.approx(1e6 / 10 * (2 * P.optimizer_bytes_per_param + 4) / hbm)


# -- communication timing ------------------------------------------------------------------------
def test_comm_timer_turns_tasks_into_concurrent_collectives():
    s = parse_strategy("MP2-DP5-PP2")
    comm = CommTimer(P, "fred-d", s, microbatch_samples=2)
    a, b = tiny().layers
    assert comm.mp(b, 0).time_s == 0                                # not MP-shardable
    # a: its 2 all-reduces of the microbatch's activation, on the 5 MP groups of stage 0 at once
    stage0 = [Collective("all-reduce", (s.rank(mp=0, dp=d, pp=0), s.rank(mp=1, dp=d, pp=0)), 2 * 4e4)
              for d in range(5)]
    assert comm.mp(a, 0).time_s == pytest.approx(2 * evaluate(P, "fred-d", stage0).time_s, rel=1e-12)
    assert comm.dp(1e6, 1).time_s == pytest.approx(evaluate(
        P, "fred-d", [Collective("all-reduce", g, 2e6) for g in comm.dp_groups[1]]).time_s, rel=1e-12)
    assert CommTimer(P, "fred-d", parse_strategy("MP20-DP1-PP1"), 1).dp(1e6, 0).time_s == 0
    assert comm.configurations and comm.config_load_s() > 0         # in-switch: stored configurations
    mesh = CommTimer(P, "mesh", s, microbatch_samples=2)
    mesh.mp(a, 0)
    mesh.dp(1e6, 1)
    assert mesh.config_load_s() == 0


# -- task graphs ---------------------------------------------------------------------------------
def test_pipeline_ops():
    assert pipeline_ops("gpipe", 0, 2, 3) == [("F", 0), ("F", 1), ("F", 2), ("B", 2), ("B", 1), ("B", 0)]
    assert pipeline_ops("1f1b", 0, 3, 3) == [("F", 0), ("F", 1), ("F", 2), ("B", 0), ("B", 1), ("B", 2)]
    assert pipeline_ops("1f1b", 1, 3, 3) == [("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("B", 2)]
    assert pipeline_ops("1f1b", 2, 3, 3) == [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2)]


def test_weight_stationary_graph_follows_the_schedule():
    """Two stages, two microbatches: every stage's compute runs its 1F1B order, sends cross
    each boundary once per microbatch and direction, one DP bucket and an optimizer step per
    stage."""
    plan = plan_iteration(P, tiny(strategy="MP1-DP10-PP2", samples=4, microbatches=2))
    eng = StageEngine(blocking=False)
    build_task_graph(eng, plan, "fred-d")
    for s in range(2):
        compute = [t.name.split()[0] for t in eng.tasks if t.resource == stage_resource(s, "compute")]
        passes = [f"{k}{i}" for k, i in pipeline_ops("1f1b", s, 2, 2)]
        assert compute == [p for p in passes for _ in plan.stages[s]] + ["optimizer"]
    sends = sorted(t.name for t in eng.tasks if t.category == "pp")
    assert sends == ["B0 s1 send", "B1 s1 send", "F0 s0 send", "F1 s0 send"]
    assert sorted(t.name for t in eng.tasks if t.category == "dp") == ["dp s0 a", "dp s1 b"]


def test_weight_streaming_graph_loads_before_compute_and_stores_after():
    plan = plan_iteration(P, tiny(mode="weight-streaming"))
    eng = StageEngine(blocking=False)
    build_task_graph(eng, plan, "mesh")
    names = [t.name for t in eng.tasks]
    assert names == ["load F a", "F0 a", "load F b", "F0 b", "load B b", "B0 b", "store b",
                     "load B a", "B0 a", "store a"]
    executed = eng.run()
    end = {t.name: t.end for t in executed.tasks}
    start = {t.name: t.start for t in executed.tasks}
    assert start["F0 a"] >= end["load F a"] and start["store a"] >= end["B0 a"]


# -- breakdown -----------------------------------------------------------------------------------
def _task(name, resource, start, end, category="compute", npu=0):
    return Task(name, resource, end - start, category=category, npu=npu, start=start, end=end)


def test_breakdown_attributes_idle_compute_time_in_order():
    """Compute 0-1 and 4-5; MP 1-2; DP 1.5-3 (MP claims the overlap first); nothing 3-4: bubble.
    Another NPU's MP task and a lighter stage do not count."""
    tasks = [_task("c1", "s0.compute", 0, 1), _task("mp", "s0.mp", 1, 2, "mp"),
             _task("dp", "s0.dp", 1.5, 3, "dp"), _task("c2", "s0.compute", 4, 5),
             _task("other npu", "s0.mp", 3, 4, "mp", npu=7), _task("light", "s1.compute", 0, 0.5, npu=1)]
    breakdown, busy, stage = attribute_time(Schedule(tasks, makespan=5.0), 2, lambda s: s)
    assert stage == 0
    assert breakdown == pytest.approx({"compute": 2.0, "mp": 1.0, "pp": 0.0, "io": 0.0, "dp": 1.0,
                                       "bubble": 1.0})
    assert busy == pytest.approx({"mp": 1.0, "pp": 0.0, "io": 0.0, "dp": 1.5})


# -- iterations and one iteration by hand --------------------------------------------------------
def test_mean_iteration_pays_the_one_time_load_once():
    assert mean_iteration_s(1.0, 0.5, 1) == 1.5
    assert mean_iteration_s(1.0, 0.5, 2) == 1.25
    assert mean_iteration_s(1.0, 0.0, 3) == 1.0


def test_one_iteration_by_hand_on_fred_d():
    """DP(20), one microbatch: forward a, b; backward b, a; the gradient bucket (all of it)
    reduced in-switch over the wafer, blocking; the sharded optimizer step (element-wise work:
    HBM at the [compute] model's vector efficiency); plus half the switch configuration load
    (2 iterations, only the first loads). The layers give no GEMM shapes, so they take the
    roofline even though the platform has a shape-dependent compute model."""
    assert P.compute is not None
    w = tiny()
    a, b = w.layers
    flops_per_s = P.peak_tflops * 1e12 * P.compute_efficiency
    hbm = P.memory_bandwidth_gbps * 1e9
    roofline = [max(l.fwd_flops * 4 * k / flops_per_s, (2 * l.params + 4 * (l.in_bytes + l.out_bytes)) * k / hbm)
                for l in (a, b) for k in (1, 2)]
    gradient = 2 * (a.params + b.params)                           # FP16, 2,000,200 B
    flit = P.switch.flit_bytes
    wire = -(-gradient // flit) * flit                             # 3907 flits
    l1, l2 = P.switch_at("l1"), P.switch_at("l2")                  # each level's chiplet
    up = 2 * P.link_latency_s + l1.latency_s                       # NPU -> L1 -> L2
    dp = (wire / (P.npu_send_gbps * 1e9) + 2 * up + l2.latency_s   # up, back down, through L2
          + max(l1.phase_select_s - P.link_latency_s,         # selects start with the collective:
                    l2.phase_select_s - up, 0))                # only what is left when flits arrive
    optimizer = (a.params + b.params) / 20 * (2 * P.optimizer_bytes_per_param + 4) / (hbm * P.compute.vector_efficiency)
    config_load = max(l1.config_load_s, l2.config_load_s)          # one phase on every switch
    r = simulate_iteration(P, "fred-d", w)
    assert r.steady_time_s == pytest.approx(sum(roofline) + dp + optimizer, rel=1e-9)
    assert r.config_load_s == pytest.approx(config_load, rel=1e-12)
    assert r.iterations == P.iterations == 2
    assert r.time_s == pytest.approx(r.steady_time_s + config_load / 2, rel=1e-12)
    assert r.breakdown["dp"] == pytest.approx(dp, rel=1e-9)
    assert r.breakdown["config_load"] == pytest.approx(config_load / 2, rel=1e-12)
    assert r.breakdown["bubble"] == pytest.approx(0.0, abs=1e-15)


def test_iterations_amortise_the_configuration_load():
    w = get_workload("transformer-17b")
    runs = {n: simulate_iteration(P.scaled(iterations=n), "fred-d", w) for n in (1, 4)}
    assert runs[1].config_load_s > 0 and runs[1].config_load_s == runs[4].config_load_s
    assert runs[1].steady_time_s == runs[4].steady_time_s
    assert runs[1].time_s - runs[4].time_s == pytest.approx(0.75 * runs[1].config_load_s, rel=1e-6)
    for fabric in ("mesh", "fred-a", "fred-c"):                    # no stored configurations
        r = simulate_iteration(P, fabric, w)
        assert r.config_load_s == 0 and r.time_s == r.steady_time_s
