"""One training iteration of the model as per-rank execution traces (docs/chakra_export.md).

:func:`export_iteration` builds the iteration's task graph exactly as
:func:`sysmodel.training.simulate_iteration` does (same plan, same builder of
:data:`sysmodel.task_graphs.TASK_GRAPHS`, same engine settings), recording which collectives
every communication task consists of, runs it, and turns it into one node list per NPU the
strategy uses (:class:`sysmodel.trace.TraceNode`, written as Chakra files by
:mod:`sysmodel.chakra_writer`):

* every task of pipeline stage ``s`` appears, with the model's task id as its node id, in the
  file of every rank of stage ``s`` (the model runs one representative NPU per stage; every
  MP rank and DP replica of a stage runs the same schedule);
* a compute task is a compute node of its duration;
* a communication task is a collective node (an MP all-reduce, a DP gradient bucket, a PP
  hand-over multicast, a weight stream or checkpoint spill as a memory node) carrying this
  rank's collective: its group (the one containing the rank, or rooted at it; the PP multicast
  of the rank's DP replica for an MP rank other than the root), its bytes (``size x repeat``
  for the model's back-to-back repetitions), its traffic class (mp, pp, dp, io) and the class's
  virtual-channel level (FRED: MP > PP > DP; the mesh ignores it), and the model's queue (the
  stage resource that runs one task at a time in order);
* a communication task the model times at zero (a layer without weights to stream) is a
  metadata node on its queue, so the queue order is kept;
* a dependency on a task of another stage (the PP hand-over a stage waits for) becomes a receive
  node (id ``tasks + that task's id``) naming the sending rank and the task (``tag``).

``scale`` K divides every compute duration and every collective's bytes by K before the
iteration is timed (layers and microbatches are not cut: the graph is the full iteration's),
so the exported files and the reported model time describe the same scaled iteration. A
collective's time is not linear in its bytes (per-step latency, phase switches), so the scaled
iteration is not the full one divided by K; K = 1 is the model's own iteration.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hdl.contracts.errors import FredError
from sysmodel.breakdown import attribute_time
from sysmodel.collectives import evaluate
from sysmodel.comm_timing import CommTime, CommTimer
from sysmodel.compute_timing import compute_timer
from sysmodel.iteration_plan import plan_iteration
from sysmodel.task_graphs import TASK_GRAPHS, StageEngine
from sysmodel.trace import TraceNode
from sysmodel.training import FRED_PRIORITY, link_priority

__all__ = ["IterationExport", "export_iteration", "IO_OPS"]

#: The model's I/O collectives, exported as memory nodes: reads (True) and writes (False).
IO_OPS = {"io-load": True, "io-read": True, "io-store": False, "io-write": False}


@dataclass(frozen=True)
class _DescribedCommTime(CommTime):
    """A :class:`CommTime` that remembers the concurrent ``collectives`` it times, each run
    ``repeat`` times back to back."""

    collectives: tuple = ()
    repeat: float = 1.0
    #: header-selected stored phases (``[fred] phase_select = "header"``, one phase): the
    #: switch configurations the run selects (its stored program) and the seconds of one run's
    #: header selects (``phase_overhead_s``), which a run whose switches have that program
    #: selected already does not pay (:meth:`_RecordingEngine.add`); else ``None`` and 0
    selected: frozenset | None = None
    select_s: float = 0.0

    def times(self, k: float) -> "_DescribedCommTime":
        return _DescribedCommTime(self.time_s * k, None if self.loads is None else self.loads * k,
                                  self.bw, self.collectives, self.repeat * k, self.selected, self.select_s)

    __mul__ = times


class _ScaledCommTimer(CommTimer):
    """The model's communication timer with every collective's bytes divided by ``scale``,
    returning :class:`_DescribedCommTime`."""

    def __init__(self, *args, scale: float, **kwargs):
        super().__init__(*args, **kwargs)
        self.scale = scale

    def concurrent(self, collectives) -> CommTime:
        scaled = tuple(replace(c, size=c.size / self.scale) for c in collectives)
        base = super().concurrent(list(scaled))
        if not scaled:
            return base
        selected, select_s = None, 0.0
        if self.platform.phase_select == "header":
            # the whole result of the collectives timed above (the timer keeps their time and
            # link data alone: collective_timing), for its phases and selects
            r = evaluate(self.platform, self.fabric, scaled)
            if r.phases == 1 and r.configurations:
                selected, select_s = r.configurations, r.phase_overhead_s
        return _DescribedCommTime(base.time_s, base.loads, base.bw, scaled, 1.0, selected, select_s)


class _ScaledCompute:
    """A compute timer (:func:`sysmodel.compute_timing.compute_timer`) divided by ``scale``."""

    def __init__(self, timer, scale: float):
        self.timer, self.scale = timer, scale

    def layer_s(self, layer, *, backward: bool, recompute: str = "none") -> float:
        return self.timer.layer_s(layer, backward=backward, recompute=recompute) / self.scale

    def optimizer_step_s(self, params: float) -> float:
        return self.timer.optimizer_step_s(params) / self.scale


class _RecordingEngine(StageEngine):
    """A :class:`StageEngine` that keeps each task's duration object (a compute time or a
    :class:`CommTime`) and pipeline stage. Overriding ``add`` makes the builders take their
    general path (``StageEngine.add`` for every task), which adds the same tasks as their
    fast path. ``one_collective``: a communication task also waits for its stage's
    communication tasks added since the stage's last compute task (with ``blocking``: the
    stage runs one task at a time, e.g. the last backward layer's MP all-reduce and the DP
    all-reduce after each other instead of at once); without ``blocking`` (overlap), for the
    stage's communication task added before it: the stage's collectives run one after the
    other in the order they are added, under its compute."""

    def __init__(self, *, one_collective: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.recorded: list = []
        self.one_collective = one_collective
        self._selected: dict = {}     # stage -> the stored program its last collective selected
        self._last_comm: dict = {}    # stage -> its communication task added last (overlap)

    def add(self, name, resource, duration, deps=(), *, stage=None, block=False, **kwargs) -> int:
        one = self.one_collective and not resource.endswith(".compute")
        if one:
            # StageEngine keeps the stage's communication tasks since its last compute task
            # (the next compute task waits for them); this one waits for them too
            mine = stage if stage is not None or not resource.startswith("s") else int(resource[1:].split(".")[0])
            deps = (*deps, *self._pending.get(mine, ()))
            if not self.blocking and mine in self._last_comm:
                deps = (*deps, self._last_comm[mine])
            duration = self._without_repeated_selects(mine, duration)
        tid = super().add(name, resource, duration, deps, stage=stage, block=block, **kwargs)
        if one:
            self._last_comm[mine] = tid
        if stage is None:
            stage = int(resource[1:].split(".")[0])
        if tid != len(self.recorded):
            raise FredError(f"internal: task {name} added out of order")
        self.recorded.append((duration, stage))
        return tid

    def _without_repeated_selects(self, stage: int, duration):
        """``duration`` less the header selects its runs do not pay, one collective at a time on
        header-selected packet switches: a packet switch keeps its phase selected after a run,
        and a packet whose header names the selected phase starts without a select
        (``hdl.designs.switch.control_unit``: RUN with the active phase), so of the runs of a
        stored one-phase program only the first after another program (or the first of the
        iteration: nothing is selected at reset) selects; its repeats, and the next
        collectives of the same program, do not. The stage's collectives run in the order
        they are added (``one_collective``), so the previous one added is the previous one run.
        Conservative where programs differ: a run after another program pays its whole select
        even at switches whose phase the two share."""
        if not isinstance(duration, _DescribedCommTime) or duration.time_s == 0:
            return duration
        last = self._selected.get(stage)
        self._selected[stage] = duration.selected
        if duration.selected is None:
            return duration
        warm = duration.repeat - (0.0 if duration.selected == last else 1.0)
        return replace(duration, time_s=duration.time_s - warm * duration.select_s)


@dataclass
class IterationExport:
    """An exported iteration. ``ranks``: rank -> its node list; ``time_s``: the (scaled)
    iteration's makespan in the model (one iteration, without the one-time switch
    configuration load ``config_load_s``); ``breakdown`` / ``comm_busy``: as
    :class:`sysmodel.training.IterationResult`'s; ``tasks``: tasks in the model's graph;
    ``description``: workload, strategy, schedule, microbatches, scale."""

    ranks: dict
    time_s: float
    breakdown: dict
    comm_busy: dict
    config_load_s: float
    tasks: int
    microbatches: int
    strategy: str
    description: str
    notes: list = field(default_factory=list)


def export_iteration(platform, fabric: str, workload, strategy=None, *, schedule: str = "1f1b",
                     samples_per_dp: int | None = None, microbatches: int | None = None,
                     overlap: bool = True, scale: float = 1.0, network=None,
                     one_collective: bool = False) -> IterationExport:
    """One iteration of ``workload`` on ``fabric`` of ``platform``, divided by ``scale``, as
    per-rank node lists (module docstring). The arguments are those of
    :func:`sysmodel.training.simulate_iteration`; ``network``: another platform whose fabric
    times the communication (e.g. an RTL fabric's, :mod:`sysmodel.fabric_model`), while
    ``platform`` still gives the plan (memory, microbatches) and the compute times; default
    ``platform`` itself. ``one_collective``: a stage's communication tasks also run one at a
    time, in the order the graph adds them -- the schedule of a sequencer that runs one
    collective at a time (the fabric RTL's, docs/fabric_iteration.md); the model's
    ``overlap=False`` alone lets two collectives of a stage run at once (MP and DP after the
    last backward layer). With ``overlap`` they still run under the stage's compute (the
    overlapped sequencer's collective lane). The model times that schedule: ``time_s`` is its
    makespan."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 1 <= scale <= 1e9:
        raise FredError(f"scale must be a number in [1, 1e9], got {scale!r}")
    network = platform if network is None else network
    network.check_fabric(fabric)
    plan = plan_iteration(platform, workload, strategy, schedule=schedule,
                          samples_per_dp=samples_per_dp, microbatches=microbatches)
    if plan.strategy.npus > network.npus:
        raise FredError(f"strategy {plan.strategy} uses {plan.strategy.npus} NPUs but the network "
                        f"platform {network.name!r} has {network.npus}")
    if (plan.streaming or plan.memory.offload) and network.io_controllers == 0:
        what = "streams its weights" if plan.streaming else "spills activation checkpoints"
        raise FredError(f"{workload.name} {what} through the I/O controllers, but platform "
                        f"{network.name!r} has none")
    eng = _RecordingEngine(blocking=not overlap, one_collective=one_collective, **link_priority(network, fabric))
    comm = _ScaledCommTimer(network, fabric, plan.strategy, plan.microbatch_samples,
                            sequence_parallel=plan.workload.sequence_parallel, scale=float(scale))
    TASK_GRAPHS[plan.workload.mode](eng, plan, _ScaledCompute(compute_timer(plan), scale), comm)
    executed = eng.run()
    breakdown, busy, _ = attribute_time(executed, plan.strategy.pp, plan.representative)
    ranks = _rank_nodes(eng, plan.strategy)
    s = plan.strategy
    description = (f"{workload.name} {s} {schedule}, {plan.microbatches} microbatches of "
                   f"{plan.microbatch_samples:g} samples, scale 1/{scale:g}")
    return IterationExport(ranks=ranks, time_s=executed.makespan, breakdown=breakdown,
                           comm_busy=busy, config_load_s=comm.config_load_s(), tasks=len(eng.tasks),
                           microbatches=plan.microbatches, strategy=str(s), description=description,
                           notes=plan.notes())


def _mine(collectives, rank: int, strategy):
    """The collective of a concurrent set that concerns ``rank``: the one whose group holds it
    or which it roots, else (a stage's PP multicast for an MP rank other than the root) the
    one of its DP replica."""
    for c in collectives:
        if c.root == rank or rank in c.group or any(rank in p for p in c.pairs):
            return c
    replica = strategy.coords(rank)[1]
    for c in collectives:
        source = c.root if c.root is not None else (c.group or c.pairs[0])[0]
        if strategy.coords(source)[1] == replica:
            return c
    raise FredError(f"internal: no collective of {collectives!r} concerns rank {rank}")


def _rank_nodes(eng: _RecordingEngine, strategy) -> dict:
    """rank -> [TraceNode] for every rank the strategy uses (module docstring)."""
    tasks, recorded = eng.tasks, eng.recorded
    stage_of = [stage for _, stage in recorded]
    ranks = {}
    for rank in range(strategy.npus):
        stage = strategy.coords(rank)[2]
        nodes, mirrored = [], set()
        for tid, task in enumerate(tasks):
            if stage_of[tid] != stage:
                continue
            deps = []
            for d in task.deps:
                if stage_of[d] == stage:
                    deps.append(d)
                    continue
                if d not in mirrored:   # a receive node before its first user
                    mirrored.add(d)
                    nodes.append(_receive(tasks[d], recorded[d][0], d, stage_of[d], len(tasks),
                                            rank, strategy))
                deps.append(len(tasks) + d)
            nodes.append(_task_node(task, recorded[tid][0], tid, tuple(dict.fromkeys(deps)),
                                    rank, strategy))
        ranks[rank] = nodes
    return ranks


def _task_node(task, duration, tid: int, deps: tuple, rank: int, strategy) -> TraceNode:
    base = dict(id=tid, name=task.name, deps=deps, queue=task.resource)
    if task.category == "compute":
        return TraceNode(kind="compute", duration_s=task.duration, **base)
    level = FRED_PRIORITY.get(task.category, 0)
    if not isinstance(duration, _DescribedCommTime):
        if task.duration == 0:
            return TraceNode(kind="marker", category=task.category, priority=level, **base)
        raise FredError(f"task {task.name}: a communication task of several collectives in "
                        f"sequence (platform pp_scatter_gather) is not exported yet")
    c = _mine(duration.collectives, rank, strategy)
    kind = "comm" if c.op not in IO_OPS else ("mem-read" if IO_OPS[c.op] else "mem-write")
    return TraceNode(kind=kind, op=c.op, size=c.size * duration.repeat, group=c.group,
                     root=c.root, fred_op=c.op, repeat=duration.repeat, priority=level,
                     category=task.category, **base)


def _receive(task, duration, tid: int, stage: int, offset: int, rank: int, strategy) -> TraceNode:
    """The receive node on ``rank`` standing for task ``tid`` of stage ``stage``."""
    peer = None
    if isinstance(duration, _DescribedCommTime):
        for c in duration.collectives:
            if rank in c.group and c.root is not None:
                peer = c.root
    if peer is None:   # the rank with this rank's MP and DP coordinates in the task's stage
        mp, dp, _ = strategy.coords(rank)
        peer = strategy.rank(mp=mp, dp=dp, pp=stage)
    size = duration.collectives[0].size * duration.repeat \
        if isinstance(duration, _DescribedCommTime) else 0.0
    return TraceNode(id=offset + tid, name=f"recv {task.name}", kind="recv", size=size,
                     peer=peer, tag=tid)
