"""System model II: engine, training iterations, memory check, speedup table, sweep, CLI."""

import json
import subprocess
import sys

import pytest

from hdl.contracts.errors import FredError
from sysmodel.engine import Engine
from studies.evaluation import FRED_FABRICS, PAPER_SPEEDUP, speedup_table, sweep
from sysmodel.platform import default_platform
from hdl.contracts.placement import Strategy, factorisations, parse_strategy
from sysmodel.training import simulate_iteration
from sysmodel.workloads import WORKLOADS, transformer
from sysmodel.workload_file import get_workload

P = default_platform()


@pytest.fixture(scope="module")
def table():
    return speedup_table(P)


# -- engine ------------------------------------------------------------------------------------
def test_engine_overlaps_channels_and_serialises_compute():
    e = Engine()
    a = e.add("fwd", "npu.compute", 1.0)
    ar = e.add("mp", "npu.mp", 0.5, [a], category="mp")
    b = e.add("next", "npu.compute", 1.0, [ar])
    dp = e.add("dp", "npu.dp", 3.0, [a], category="dp")
    c = e.add("other", "npu.compute", 0.25)  # queued behind `next` on the compute unit
    s = e.run()
    assert (s.tasks[b].start, s.tasks[b].end) == (1.5, 2.5)
    assert s.tasks[dp].start == 1.0 and s.tasks[dp].end == 4.0  # overlaps compute
    assert s.tasks[c].start == 2.5
    assert s.makespan == 4.0


def test_engine_link_sharing_is_max_min_fair():
    import numpy as np
    bw = np.array([1.0, 1.0])
    e = Engine()
    a = e.add("a", "x.mp", 1.0, loads=np.array([1.0, 0.0]), bw=bw, category="mp")
    b = e.add("b", "y.dp", 1.0, loads=np.array([1.0, 0.0]), bw=bw, category="dp")
    c = e.add("c", "z.pp", 1.0, loads=np.array([0.0, 1.0]), bw=bw, category="pp")
    s = e.run()
    assert s.tasks[a].end == pytest.approx(2.0) and s.tasks[b].end == pytest.approx(2.0)
    assert s.tasks[c].end == pytest.approx(1.0)  # its own link: full speed

    e = Engine()
    gate = e.add("compute", "n.compute", 1.0)
    a = e.add("a", "x.mp", 2.0, loads=np.array([2.0, 0.0]), bw=bw)
    b = e.add("b", "y.dp", 1.0, [gate], loads=np.array([1.0, 0.0]), bw=bw)
    s = e.run()
    # a runs alone for 1 s (half done), then a and b share the link at half speed each
    assert s.tasks[b].start == pytest.approx(1.0)
    assert s.tasks[a].end == pytest.approx(3.0) and s.tasks[b].end == pytest.approx(3.0)

    e = Engine()  # a fixed latency tail follows the bandwidth part
    a = e.add("a", "x.mp", 1.5, loads=np.array([1.0, 0.0]), bw=bw)
    assert e.run().tasks[a].end == pytest.approx(1.5)


def test_engine_rejects_forward_dependencies():
    """Dependencies must name tasks already added; with per-resource order = add order this
    makes a deadlock impossible by construction."""
    e = Engine()
    e.add("first", "r", 1.0)
    with pytest.raises(FredError, match="unknown dependency 5"):
        e.add("second", "q", 1.0, [5])
    with pytest.raises(FredError, match="negative duration"):
        e.add("third", "q", -1.0)


# -- strategies and workloads -----------------------------------------------------------------
def test_strategy_parsing_and_groups():
    s = parse_strategy("MP(2)-DP(5)-PP(2)")
    assert s == Strategy(mp=2, dp=5, pp=2)
    assert s.groups("mp")[0] == (0, 1)
    assert s.groups("dp")[0] == (0, 4, 8, 12, 16)
    assert sorted(r for g in s.groups("pp") for r in g) == list(range(20))
    assert len(factorisations(20)) == 18
    for bad in ("MP2-DP5", "2-5-2", "MP0-DP20-PP1"):
        with pytest.raises(FredError):
            parse_strategy(bad)


def test_workload_sizes():
    assert get_workload("resnet-152").params == pytest.approx(60.2e6, rel=0.02)
    assert get_workload("resnet-152").fwd_flops_per_sample == pytest.approx(23e9, rel=0.05)
    assert get_workload("transformer-17b").params == pytest.approx(17.2e9, rel=0.02)
    assert get_workload("gpt-3").params == pytest.approx(175e9, rel=0.01)
    assert get_workload("transformer-1t").params == pytest.approx(1.0e12, rel=0.02)
    with pytest.raises(FredError, match="unknown workload"):
        get_workload("bert")
    with pytest.raises(FredError, match="hidden"):
        transformer(name="x", layers=2, hidden=0, heads=1, seq=8, vocab=8, mode="weight-stationary",
                    strategy="MP1-DP20-PP1", microbatches=1)


# -- invalid strategies and memory ---------------------------------------------------------------
def test_strategy_on_fewer_npus_leaves_the_rest_idle():
    """MP3-DP3-PP2 runs on 18 of the 20 NPUs (the paper's Transformer-17B); the result says
    2 are idle; a strategy needing more NPUs than the wafer has is refused."""
    r = simulate_iteration(P, "mesh", get_workload("transformer-17b"), parse_strategy("MP3-DP3-PP2"))
    assert (r.npus_used, r.idle_npus) == (18, 2)
    assert "2 of 20 NPUs idle" in r.notes
    with pytest.raises(FredError, match="24 NPUs but the platform has 20"):
        simulate_iteration(P, "mesh", get_workload("transformer-17b"), parse_strategy("MP3-DP4-PP2"))


def test_model_that_does_not_fit_is_rejected_naming_what_overflows():
    small = P.scaled(memory_capacity_gb=8.0)
    with pytest.raises(FredError, match=r"does not fit in 8 GB.*weights .*optimizer .*activations"):
        simulate_iteration(small, "mesh", get_workload("transformer-17b"), parse_strategy("MP1-DP20-PP1"))


def test_memory_plan_fits_capacity():
    for w in WORKLOADS:
        r = simulate_iteration(P, "fred-d", get_workload(w))
        assert r.memory.total <= P.memory_capacity_bytes


# -- iteration mechanics --------------------------------------------------------------------------
def test_breakdown_sums_to_iteration_time():
    for w in ("transformer-17b", "gpt-3"):
        r = simulate_iteration(P, "mesh", get_workload(w))
        assert sum(r.breakdown.values()) == pytest.approx(r.time_s, rel=1e-9)


def test_gpipe_bubble_and_memory_vs_1f1b():
    w = get_workload("transformer-17b")
    s = parse_strategy("MP1-DP4-PP5")
    f1 = simulate_iteration(P, "fred-d", w, s, schedule="1f1b")
    gp = simulate_iteration(P, "fred-d", w, s, schedule="gpipe")
    assert f1.breakdown["bubble"] > 0 and gp.breakdown["bubble"] > 0
    # GPipe stashes all 8 microbatches' activations: they no longer fit, so it recomputes
    # (backward 3x forward) and is slower; 1F1B stashes at most PP - stage.
    assert gp.memory.stage_recompute == ("full",) * 5 and f1.memory.stage_recompute == ("none",) * 5
    assert gp.time_s > f1.time_s
    with pytest.raises(FredError, match="schedule"):
        simulate_iteration(P, "fred-d", w, s, schedule="zigzag")


def test_dp_gradient_all_reduce_overlaps_backward_only_when_asked():
    """DeepSpeed's ZeRO-2 default (one 5e8-element bucket, no overlap_comm): ResNet-152's
    120 MB of gradients are reduced after the backward, fully exposed. With dp_overlap and
    per-layer buckets (DDP-like), the all-reduces hide behind the remaining backward."""
    w = get_workload("resnet-152")
    blocking = simulate_iteration(P, "mesh", w)
    dp_tasks = blocking.comm_busy["dp"]
    assert dp_tasks > 0
    assert blocking.breakdown["dp"] == pytest.approx(dp_tasks, rel=1e-9)
    ddp = P.scaled(dp_overlap=True, dp_bucket_elements=1.0)
    overlapped = simulate_iteration(ddp, "mesh", w)
    assert overlapped.breakdown["dp"] < 0.2 * overlapped.comm_busy["dp"]
    assert overlapped.time_s < blocking.time_s


def test_dp_buckets_split_the_gradient():
    """Smaller buckets mean more, smaller all-reduces carrying the same bytes (each is
    latency-bound sooner), and the bucket size is validated."""
    w = get_workload("transformer-17b")
    one = simulate_iteration(P.scaled(dp_overlap=True), "fred-c", w)
    many = simulate_iteration(P.scaled(dp_overlap=True, dp_bucket_elements=1e7), "fred-c", w)
    assert many.comm_busy["dp"] > one.comm_busy["dp"]
    with pytest.raises(FredError, match="dp_bucket_elements"):
        P.scaled(dp_bucket_elements=0)
    with pytest.raises(FredError, match="dp_overlap"):
        P.scaled(dp_overlap="yes")


@pytest.mark.parametrize("workload", ["resnet-152", "transformer-17b"])
def test_speedup_grows_as_compute_gets_faster(workload):
    """Faster NPUs shrink compute, not communication, so the share FRED accelerates grows."""
    w = get_workload(workload)
    for fabric in ("fred-c", "fred-d"):
        speedups = []
        for k in (1, 4, 16):
            fast = P.with_compute_scale(k)
            speedups.append(simulate_iteration(fast, "mesh", w).time_s / simulate_iteration(fast, fabric, w).time_s)
        assert speedups == sorted(speedups) and speedups[0] < speedups[-1], (fabric, speedups)


def test_weight_streaming_io_hotspot_reaches_paper_limit_when_io_bound():
    """With compute made negligible, Transformer-1T's speedup tends to the I/O rate ratio
    between FRED (every controller at 128 GBps) and the mesh (hot link) where the switches
    share their time as links do (``one_phase_per_switch = false``, the paper's fluid
    picture). With one phase active per switch (the spec's switch, the default) its weight
    streams, gradient reduce-outs and offload reads/writes -- all on DP's VC -- take turns at
    the switches they share, and it stays below that limit (docs/sysmodel.md, "One phase
    active at a time per switch")."""
    fast = P.scaled(peak_tflops=P.peak_tflops * 1e4, memory_bandwidth_gbps=P.memory_bandwidth_gbps * 1e4)
    w = get_workload("transformer-1t")
    mesh = simulate_iteration(fast, "mesh", w).time_s
    links_only = fast.scaled(one_phase_per_switch=False)
    x = mesh / simulate_iteration(links_only, "fred-d", w).time_s
    from sysmodel.collectives import Collective, evaluate
    load = [Collective("io-load", tuple(range(P.npus)), 1e9)]
    io_ratio = evaluate(P, "mesh", load).time_s / evaluate(P, "fred-d", load).time_s
    assert 1.1 < x < io_ratio * 1.05
    assert mesh / simulate_iteration(fast, "fred-d", w).time_s < x


# -- serialised mode (overlap=False) ------------------------------------------------------------
def test_serialised_mode_exposes_every_communication_task():
    """Single-stage DP: serialised, the iteration is compute + every gradient all-reduce, back
    to back (none hidden), and it is slower than the overlapped iteration."""
    fast = P.scaled(peak_tflops=P.peak_tflops * 16, memory_bandwidth_gbps=P.memory_bandwidth_gbps * 16,
                    dp_overlap=True, dp_bucket_elements=1.0)
    w = get_workload("resnet-152")
    serial = simulate_iteration(fast, "mesh", w, overlap=False)
    overlapped = simulate_iteration(fast, "mesh", w)
    assert serial.breakdown["dp"] == pytest.approx(serial.comm_busy["dp"], rel=1e-9)
    assert serial.time_s == pytest.approx(serial.breakdown["compute"] + serial.comm_busy["dp"], rel=1e-9)
    assert serial.breakdown["bubble"] == pytest.approx(0.0, abs=1e-12)
    assert overlapped.breakdown["dp"] < 0.6 * overlapped.comm_busy["dp"]
    assert serial.time_s > overlapped.time_s


@pytest.mark.parametrize("workload", ["transformer-17b", "gpt-3"])
def test_serialised_mode_is_never_faster(workload):
    """Pipelines and weight streaming: blocking communication can only lengthen the
    iteration, and the breakdown still accounts for all of it.

    The precise bound: the serialised graph is the overlapped one plus dependencies, and each
    task starts at the latest end of its dependencies and of its resource's previous task, so
    with every communication task at its solo time the serialised makespan is >= the overlapped
    one exactly. Link sharing only ever slows a task (max-min rates never exceed the solo
    rate), so the serialised iteration with sharing is >= that too. It is NOT always >= the
    overlapped iteration with sharing: overlapped pipeline sends share links with the MP
    all-reduces that block compute and can slow them more than serialising them costs
    (Transformer-17B on the mesh: about 0.1 %)."""
    from sysmodel.iteration_plan import plan_iteration
    from sysmodel.task_graphs import StageEngine
    from sysmodel.training import build_task_graph

    class SoloEngine(StageEngine):   # every communication task at its solo time
        def add(self, name, resource, duration, deps=(), **kw):
            return super().add(name, resource, getattr(duration, "time_s", duration), deps, **kw)

    def solo_makespan(fabric, overlap):
        eng = SoloEngine(blocking=not overlap)
        build_task_graph(eng, plan_iteration(P, w), fabric)
        return eng.run().makespan

    w = get_workload(workload)
    for fabric in ("mesh", "fred-d"):
        serial = simulate_iteration(P, fabric, w, overlap=False)
        serial_solo, overlapped_solo = solo_makespan(fabric, False), solo_makespan(fabric, True)
        assert serial_solo >= overlapped_solo * (1 - 1e-12), fabric
        assert serial.steady_time_s >= serial_solo * (1 - 1e-12), fabric
        assert sum(serial.breakdown.values()) == pytest.approx(serial.time_s, rel=1e-9)


def test_serialised_engine_orders_communication_between_computes():
    from sysmodel.task_graphs import StageEngine
    eng = StageEngine(blocking=True)
    a = eng.add("compute a", "s0.compute", 1.0)
    c = eng.add("grad comm", "s0.dp", 5.0, [a], category="dp")
    b = eng.add("compute b", "s0.compute", 1.0)          # no explicit dependency on the comm
    load = eng.add("stream", "io.in", 2.0, category="io", stage=0)
    d = eng.add("compute d", "s0.compute", 1.0)
    sched = eng.run()
    assert sched.tasks[b].start == pytest.approx(sched.tasks[c].end)
    assert sched.tasks[load].start == pytest.approx(sched.tasks[b].end)
    assert sched.tasks[d].start == pytest.approx(sched.tasks[load].end)
    assert sched.tasks[load].resource == "s0.io.in"
    with pytest.raises(FredError, match="no stage"):
        eng.add("stream", "io.out", 1.0)
    free = StageEngine(blocking=False)
    a = free.add("compute a", "s0.compute", 1.0)
    c = free.add("grad comm", "s0.dp", 5.0, [a], category="dp")
    b = free.add("compute b", "s0.compute", 1.0)
    sched = free.run()
    assert sched.tasks[b].start == pytest.approx(1.0) and sched.makespan == pytest.approx(6.0)


def test_one_global_compute_speed_cannot_reproduce_the_paper():
    """The diagnostic behind docs/sysmodel.md: ONE global compute speed-up fitted on
    ResNet-152/Fred-C reproduces that figure (and ResNet's Fred-D from in-switch reduction),
    but not the other workloads: their figures imply other compute speeds, which is why
    `--calibration paper` fits one per workload."""
    from studies.evaluation import calibrate
    cal = calibrate(P)
    assert cal.error["fred-c"]["resnet-152"] == pytest.approx(0.0, abs=0.01)   # the fit
    assert abs(cal.error["fred-d"]["resnet-152"]) <= 0.10
    assert len(cal.within_10pct) < 8
    assert not {"transformer-17b/fred-c", "transformer-1t/fred-c"} & set(cal.within_10pct)


def test_calibration_fits_its_anchor_and_compares_the_rest():
    """The calibration finds the one compute factor at which its anchor figure is the paper's,
    and reports the whole table at that factor with each figure's error against the paper."""
    from studies.evaluation import CALIBRATION_ANCHOR, calibrate
    cal = calibrate(P)
    workload, fabric = CALIBRATION_ANCHOR
    assert cal.anchor == f"{workload}/{fabric}" and cal.scale > 1
    assert cal.error[fabric][workload] == pytest.approx(0.0, abs=0.01)   # the fit
    for f, per in cal.error.items():
        for w, e in per.items():
            assert e == pytest.approx(cal.speedup[f][w] / PAPER_SPEEDUP[f][w] - 1)
    assert cal.within_10pct == sorted(f"{w}/{f}" for f, per in cal.error.items()
                                         for w, e in per.items() if abs(e) <= 0.10)


def test_spread_summarises_implied_scales():
    from studies.evaluation import Spread, _spread
    spread = _spread({"fred-c": {"a": 2.0, "b": None}, "fred-d": {"a": 8.0}})
    assert spread == Spread(min=2.0, max=8.0, ratio=4.0, unreachable=["b/fred-c"])


# -- the speedup table ---------------------------------------------------------------------------
def test_speedup_table_shape_and_ordering(table):
    speedup, runs = table
    assert set(speedup) == set(FRED_FABRICS)
    for f in FRED_FABRICS:
        assert set(speedup[f]) == set(WORKLOADS)
    for w in WORKLOADS:
        # more bisection and in-switch collectives do not hurt, up to small static-schedule
        # effects: e.g. GPT-3 on Fred-C is 0.02 % slower than on Fred-A because its faster
        # I/O streams overlap more with (and, sharing links, slow) the PP hand-overs
        assert speedup["fred-d"][w] >= speedup["fred-c"][w] * 0.995
        assert speedup["fred-b"][w] >= speedup["fred-a"][w] * 0.995
        assert speedup["fred-c"][w] >= speedup["fred-a"][w] * 0.995


@pytest.mark.parametrize("fabric", ["fred-c", "fred-d"])
def test_speedup_is_bounded_by_the_mesh_communication_it_removes(table, fabric):
    """FRED accelerates communication only: a fabric's speedup can never exceed the mesh
    iteration over its compute (the documented platform's small speedups come from compute
    dominating the mesh iteration, docs/sysmodel.md)."""
    speedup, runs = table
    for w in WORKLOADS:
        mesh = runs[(w, "mesh")]
        assert speedup[fabric][w] <= mesh.time_s / mesh.breakdown["compute"] * (1 + 1e-9), w


def test_implied_compute_scale_finds_where_the_speedup_reaches_a_target():
    """Bracketed on the compute-scale grid, then bisected: for a target the model reaches at
    k = 8 (ResNet-152 on Fred-D, whose speedup grows with compute speed), the factor found lies
    in the bracket (4, 8] and gives the target to within the bisection's resolution."""
    from studies.evaluation import implied_compute_scale
    w = get_workload("resnet-152")

    def speedup(k):
        fast = P.with_compute_scale(k)
        return simulate_iteration(fast, "mesh", w).time_s / simulate_iteration(fast, "fred-d", w).time_s

    target = speedup(8)
    k = implied_compute_scale("resnet-152", "fred-d", target, P)
    assert 4 < k <= 8
    assert speedup(k) == pytest.approx(target, rel=0.02)
    assert implied_compute_scale("resnet-152", "fred-d", 1e6, P) is None   # never reached


# -- sweep and CLI -------------------------------------------------------------------------------
def test_sweep_ranks_every_factorisation():
    rows = sweep("transformer-17b", "fred-d")
    assert len(rows) == 18
    times = [r.time_per_sample_s for r in rows if r.feasible]
    assert times == sorted(times)
    assert [r.rank for r in rows] == list(range(1, 19))


def test_cli_sweep_errors():
    proc = subprocess.run([sys.executable, "-m", "fred", "sweep", "--workload", "bert",
                           "--fabric", "mesh"], capture_output=True, text=True)
    assert proc.returncode == 1 and "unknown workload 'bert'" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "fred", "sweep", "--workload", "gpt-3",
                           "--fabric", "torus"], capture_output=True, text=True)
    assert proc.returncode == 1 and "fabric 'torus' is not defined" in proc.stderr


@pytest.mark.parametrize("argv, message", [
    (["--workload", "gpt-3", "--fabric", "mesh", "--strategy", "MP3-DP7-PP1"], "21 NPUs but the platform has 20"),
    (["--workload", "gpt-3", "--fabric", "mesh", "--strategy", "MP2xDP10"], "not of the form"),
    (["--workload", "gpt-3", "--fabric", "mesh", "--samples-per-dp", "0"], "--samples-per-dp"),
    (["--workload", "gpt-3", "--fabric", "mesh", "--compute-scale", "-2"], "--compute-scale: expected a finite number"),
])
def test_cli_sweep_rejects_bad_strategies(argv, message):
    proc = subprocess.run([sys.executable, "-m", "fred", "sweep", *argv], capture_output=True, text=True)
    # an option out of its range is argparse's one-line usage error (exit 2), the rest exit 1
    assert proc.returncode in (1, 2) and message in proc.stderr


def test_cli_sweep_single_strategy_json():
    proc = subprocess.run([sys.executable, "-m", "fred", "sweep", "--workload", "transformer-17b",
                           "--fabric", "fred-d", "--strategy", "MP5-DP2-PP2", "--samples-per-dp", "16",
                           "--json"], capture_output=True, text=True, check=True)
    data = json.loads(proc.stdout)
    assert data["strategy"] == "MP5-DP2-PP2"
    assert sum(data["breakdown"].values()) == pytest.approx(data["time_s"])


def test_cli_sweep_compute_scale_and_serialised_mode():
    """--compute-scale K is the documented platform with K times the compute; --no-overlap is
    the serialised mode; both reach simulate_iteration unchanged."""
    def one(*extra):
        proc = subprocess.run([sys.executable, "-m", "fred", "sweep", "--workload", "resnet-152",
                               "--fabric", "mesh", "--strategy", "MP1-DP20-PP1", "--samples-per-dp", "16",
                               "--json", *extra], capture_output=True, text=True, check=True)
        return json.loads(proc.stdout)
    fast = P.scaled(peak_tflops=P.peak_tflops * 8, memory_bandwidth_gbps=P.memory_bandwidth_gbps * 8,
                    dp_overlap=True, dp_bucket_elements=1.0)
    w = get_workload("resnet-152")
    assert one("--compute-scale", "8")["time_s"] == pytest.approx(
        simulate_iteration(P.scaled(peak_tflops=P.peak_tflops * 8,
                                    memory_bandwidth_gbps=P.memory_bandwidth_gbps * 8), "mesh", w).time_s)
    assert one("--no-overlap")["time_s"] == pytest.approx(simulate_iteration(P, "mesh", w, overlap=False).time_s)
    assert simulate_iteration(fast, "mesh", w, overlap=False).time_s > simulate_iteration(fast, "mesh", w).time_s
