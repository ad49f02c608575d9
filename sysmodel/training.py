"""One 3D-parallel training iteration: task graph, memory check, schedule and breakdown.

:func:`simulate_iteration` builds, for one representative NPU per pipeline stage (every MP
rank and DP replica of a stage runs the same schedule, so one NPU per stage is exact under
this symmetric placement), a graph of compute and communication tasks and runs it on
:class:`sysmodel.engine.Engine`:

* **compute** (one resource per NPU): per layer and microbatch, forward and backward, timed
  by a roofline ``max(FLOPs / (peak * efficiency), HBM bytes / HBM bandwidth)``, or, when the
  platform has a ``[compute]`` model, by the GEMMs' shape-dependent efficiency and HBM-bound
  element-wise work (:mod:`sysmodel.compute_timing`); FLOPs and weights of MP-shardable layers
  are divided by MP. Backward = 2x forward FLOPs plus the recomputed forward under full
  activation recomputation (or its attention core under selective recomputation; the
  workload's ``recompute``, by default only when the activations would not fit otherwise).
* **MP** (Megatron): after each layer's compute, its all-reduces (2 per transformer layer per
  pass; in the backward also the recomputed forward's, and under sequence parallelism the
  re-gathered inputs) of the microbatch's activation, on all MP groups of the stage at once;
  blocking the stage's compute, so MP time is exposed unless it is zero.
* **PP**: the activation (forward) or its gradient (backward) of each microbatch crosses
  each stage boundary as a multicast from MP rank 0 of one stage to the MP group of the
  next (or, with ``platform.pp_scatter_gather``, 1/MP per MP rank then an all-gather), for
  all DP replicas at once; blocking the sender's compute unless ``platform.pp_overlap``.
  Schedules: ``1f1b`` (default) or ``gpipe``; a workload with ``interleave`` > 1 runs
  Megatron's interleaved 1F1B over that many model chunks per stage.
* **DP** (weight-stationary): during the last microbatch's backward, gradients (FP16, /MP)
  fill buckets of ``platform.dp_bucket_elements`` elements in backward order; each bucket is
  all-reduced over its DP group when it is full (and the last, partial one when the
  backward ends), on the DP channel (ZeRO-2's reduce-scatter + all-gather moves the same
  bytes as an all-reduce). With ``platform.dp_overlap`` false (DeepSpeed's ZeRO-2 default)
  the reduction blocks the stage's compute; with true it overlaps the remaining backward.
  With PP > 1 a blocking reduction runs after the stage's pipeline schedule instead (its last
  backward and that backward's send first), as Megatron-LM and DeepSpeed's pipeline engine
  run it, so that it never holds up the pipeline's drain (docs/sysmodel.md, "Overlap policy").
  Then the (sharded) optimizer step.
* **I/O** (weight-streaming): each layer's weights (MP shard) stream from the I/O
  controllers to the stage's DP group before its forward and again before its backward
  (one wafer-wide I/O-in channel; at most ``layers_on_wafer`` layers resident per stage,
  so a load waits until the layer ``layers_on_wafer`` back has finished); gradients
  stream out reduced over the DP group (I/O-out channel). Layers are processed layer-major
  (all microbatches of a layer while its weights are resident). The optimizer runs near
  storage. Activation checkpoints that do not fit in HBM are written out after a layer's
  forward and read back before its backward.

Communication times come from :func:`sysmodel.collectives.evaluate` on the fabric, with all
groups of a dimension (within a stage) running concurrently; each task carries its link loads,
so communication tasks that overlap in the schedule (other stages' MP, DP during backward,
I/O, PP) share links in the engine (max-min fair).

The breakdown attributes the representative stage's timeline: compute, then each idle
interval of the compute unit to the communication active in it (MP, then PP, I/O, DP), and
the rest to pipeline bubble.

**Iterations** (``platform.iterations``, the paper's 2): iterations are separated by the
optimizer step (synchronous training), so every iteration runs the schedule above; the first
also pays the one-time loads: every switch configuration the iteration's in-switch collectives
use is loaded once (``config_load_cycles`` per stored phase, switches in parallel; none on the
mesh or on FRED without in-switch collectives, whose unicasts route online). The reported
``time_s`` is the mean over the iterations; the breakdown's ``config_load`` is that load's
share of it.

Each step is a module of its own, so that it can change (and is tested) alone:
:mod:`sysmodel.iteration_plan` (stages, microbatches, memory via :mod:`sysmodel.memory`),
:mod:`sysmodel.compute_timing` (the roofline), :mod:`sysmodel.comm_timing` (communication
tasks as collectives on the fabric), :mod:`sysmodel.task_graphs` (one graph builder per
execution mode, the stage-aware engine) and :mod:`sysmodel.breakdown`.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field

from hdl.contracts.placement import Strategy
from sysmodel.breakdown import COMM_CATEGORIES, attribute_time
from sysmodel import graph_template
from sysmodel.comm_timing import CommTimer
from sysmodel.compute_timing import compute_timer
from sysmodel.iteration_plan import SCHEDULES, IterationPlan, plan_iteration
from sysmodel.memory import MemoryPlan
from sysmodel.platform import Platform
from sysmodel.graph_template import GraphTemplate, network_free_key, structure_key
from sysmodel.task_graphs import TASK_GRAPHS, StageEngine
from sysmodel.workloads import Workload

__all__ = ["IterationResult", "simulate_iteration", "build_task_graph", "mean_iteration_s",
           "SCHEDULES", "CATEGORIES"]

#: The breakdown's categories, in the order they are reported: the iteration's timeline, then
#: the one-time switch configuration load per iteration (see the module docstring).
CATEGORIES = ("compute", *COMM_CATEGORIES, "bubble", "config_load")


@dataclass
class IterationResult:
    """One simulated iteration.

    Members: ``workload``, ``fabric``, ``strategy`` (as text), ``schedule``, ``time_s`` (mean
    per iteration over ``iterations``), ``breakdown`` (seconds per :data:`CATEGORIES`, adding up
    to ``time_s``) and ``comm_busy`` (seconds each communication category runs; see
    :func:`sysmodel.breakdown.attribute_time`), ``memory`` (:class:`MemoryPlan`),
    ``microbatches``, ``samples_per_dp``, ``tasks`` (in the task graph), ``notes``,
    ``steady_time_s`` (one iteration without one-time costs), ``config_load_s`` (the one-time
    switch configuration load of the first iteration), ``iterations``, ``npus_used`` (MP x DP
    x PP) and ``idle_npus`` (the platform's NPUs the strategy leaves idle)."""

    workload: str
    fabric: str
    strategy: str
    schedule: str
    time_s: float
    breakdown: dict
    comm_busy: dict
    memory: MemoryPlan
    microbatches: int
    samples_per_dp: int
    tasks: int
    steady_time_s: float
    config_load_s: float
    iterations: int
    npus_used: int
    idle_npus: int
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["memory"] = self.memory.to_dict()
        return d


def simulate_iteration(platform: Platform, fabric: str, workload: Workload,
                       strategy: Strategy | None = None, *, schedule: str = "1f1b",
                       samples_per_dp: int | None = None,
                       microbatches: int | None = None, overlap: bool = True,
                       reference: bool = False) -> IterationResult:
    """Time of one training iteration of ``workload`` on ``fabric`` (see the module docstring).

    The steps: :func:`~sysmodel.iteration_plan.plan_iteration` (stages, microbatches, memory),
    the task graph of the workload's mode (:data:`~sysmodel.task_graphs.TASK_GRAPHS`) timed by
    :func:`~sysmodel.compute_timing.compute_timer` and
    :class:`~sysmodel.comm_timing.CommTimer`, its execution on a
    :class:`~sysmodel.task_graphs.StageEngine`, the breakdown
    (:func:`~sysmodel.breakdown.attribute_time`), and the mean over ``platform.iterations``
    iterations, the first of which loads the switch configurations (:func:`mean_iteration_s`).

    ``overlap=False`` is the serialised mode: every communication task blocks the compute unit
    of the stage it belongs to (it starts after that stage's previous compute task and the next
    one waits for it), so nothing overlaps compute: DP all-reduces, PP sends and weight
    streams are all exposed. It brackets the paper's unknown overlap policy (see
    docs/sysmodel.md); the default overlaps as a framework would.

    ``reference=True`` computes the same iteration on the unoptimised path (every
    communication task timed anew, the engine's reference loop of
    :mod:`sysmodel.engine_reference`, the graph always built): slower, and the specification
    the fast path is tested against (to 1e-9 relative). The fast path re-times a graph built
    for another compute speed instead of building it again (:mod:`sysmodel.graph_template`)."""
    with _cyclic_gc_paused():
        return _simulate(platform, fabric, workload, strategy, schedule, samples_per_dp,
                         microbatches, overlap, reference)


@contextmanager
def _cyclic_gc_paused():
    """Pause Python's cyclic garbage collector for one iteration: building and running a graph
    allocates some 10^5 short-lived, acyclic objects, and every collection they trigger would
    traverse the model's long-lived caches (networks, collective results, graph templates),
    which cost 10-30 % of the time. Reference counting still frees everything; any cycles are
    collected once the collector runs again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _simulate(platform, fabric, workload, strategy, schedule, samples_per_dp, microbatches,
              overlap, reference) -> IterationResult:
    platform.check_fabric(fabric)
    plan = plan_iteration(platform, workload, strategy, schedule=schedule,
                          samples_per_dp=samples_per_dp, microbatches=microbatches)
    key = None if reference else structure_key(platform, fabric, workload, strategy, schedule,
                                                samples_per_dp, microbatches, overlap)
    template = None if key is None else graph_template.lookup(key)
    eng = None
    if template is not None:   # the same graph at another compute speed: re-timed, not rebuilt
        eng = template.instantiate(compute_timer(plan))
        config_load = template.config_load_s
    elif key is not None:      # the same graph on another network, if its times keep their signs
        free_key = network_free_key(platform, fabric, workload, strategy, schedule, samples_per_dp,
                                    microbatches, overlap)
        template = graph_template.lookup(free_key)
        if template is not None:
            comm = comm_timer(plan, fabric)
            eng = template.on_network(compute_timer(plan), comm, link_priority(platform, fabric), plan)
            if eng is not None:   # kept for this network too (another compute speed re-times it)
                config_load = comm.config_load_s()
                graph_template.store(key, GraphTemplate(eng, config_load, comm))
    if eng is None:
        eng = StageEngine(blocking=not overlap, **link_priority(platform, fabric))
        comm = build_task_graph(eng, plan, fabric, memo=not reference)
        config_load = comm.config_load_s()
        if key is not None:   # kept whether or not it can be re-timed: lookup asks that
            built = GraphTemplate(eng, config_load, comm, plan)
            graph_template.store(key, built)
            graph_template.store(network_free_key(platform, fabric, workload, strategy, schedule,
                                                  samples_per_dp, microbatches, overlap), built)
    executed = eng.run(reference=reference)
    breakdown, busy, _ = attribute_time(executed, plan.strategy.pp, plan.representative)
    iterations = platform.iterations
    breakdown["config_load"] = config_load / iterations
    return IterationResult(workload=workload.name, fabric=fabric, strategy=str(plan.strategy),
                           schedule=schedule,
                           time_s=mean_iteration_s(executed.makespan, config_load, iterations),
                           breakdown=breakdown, comm_busy=busy, memory=plan.memory,
                           microbatches=plan.microbatches, samples_per_dp=plan.samples_per_dp,
                           tasks=len(eng), notes=plan.notes(), steady_time_s=executed.makespan,
                           config_load_s=config_load, iterations=iterations,
                           npus_used=plan.strategy.npus, idle_npus=plan.idle_npus)


#: FRED's virtual-channel priority (shared spec ``FRED.md``: MP > PP > DP); other categories
#: (I/O streams) share the lowest level with DP.
FRED_PRIORITY = {"mp": 2, "pp": 1, "dp": 0}


def link_priority(platform, fabric: str) -> dict:
    """Engine arguments for ``fabric``: on FRED fabrics MP > PP > DP strict priority where
    transfers share links, a preemption costing the measured drain of the switches where it
    happens, added along the path where the lower class keeps flowing online
    (:func:`sysmodel.preemption.preemption_costs`: one cost per link, and a further-on row;
    0 without a ``packet_switch`` block), each switch's default phase shared by the online transfers
    of one class (:func:`sysmodel.switch_phases.shared_phase_links`); the mesh shares links
    max-min fairly (no priority)."""
    if fabric == "mesh":
        return {}
    from sysmodel.collectives import build_network
    from sysmodel.preemption import preemption_costs
    from sysmodel.switch_phases import shared_phase_links
    net = build_network(platform, fabric)
    # a switch held per switch (``hold``, :func:`sysmodel.switch_phases.hold_offsets`) is not
    # given here: it moves make eval's figures by <= 0.25 % but makes fred validate's cluster
    # graphs 4-16 times slower to run (docs/sysmodel.md, "A switch held per switch")
    return {"priority": FRED_PRIORITY, "preempt_s": preemption_costs(platform, net),
            "shared_phase": shared_phase_links(platform, net)}


def mean_iteration_s(steady_s: float, one_time_s: float, iterations: int) -> float:
    """Mean time per iteration over ``iterations`` iterations of ``steady_s`` each, the first
    of which also pays ``one_time_s`` (seconds)."""
    return steady_s + one_time_s / iterations


def build_task_graph(eng: StageEngine, plan: IterationPlan, fabric: str, *,
                     memo: bool = True) -> CommTimer:
    """Add ``plan``'s iteration on ``fabric`` to ``eng``; returns the communication timer used
    (``memo``: it times each distinct communication task once; see :class:`CommTimer`)."""
    comm = comm_timer(plan, fabric, memo=memo)
    TASK_GRAPHS[plan.workload.mode](eng, plan, compute_timer(plan), comm)
    return comm


def comm_timer(plan: IterationPlan, fabric: str, *, memo: bool = True) -> CommTimer:
    """The communication timer of ``plan``'s iteration on ``fabric`` (see :class:`CommTimer`)."""
    return CommTimer(plan.platform, fabric, plan.strategy, plan.microbatch_samples,
                     sequence_parallel=plan.workload.sequence_parallel, memo=memo)
