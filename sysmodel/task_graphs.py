"""The task graph of one training iteration, one builder per execution mode.

Each builder adds, for one representative NPU per pipeline stage, the iteration's compute and
communication tasks to a :class:`StageEngine` in an order every resource can run them in:

* :func:`weight_stationary_graph`: the pipeline schedule (:func:`pipeline_ops`: 1F1B or
  GPipe; :func:`interleaved_ops`: Megatron's interleaved 1F1B over the plan's model chunks)
  of forward and backward passes per microbatch; after each layer its MP all-reduces
  (blocking the stage's compute: the next layer waits); a PP send per microbatch at each
  (virtual) stage boundary, blocking the stage's compute unless ``platform.pp_overlap``;
  ZeRO-2 gradient buckets reduced over the DP group: during the last microbatch's backward
  when full, or -- when the reduction blocks compute and PP > 1 -- after the stage's whole
  pipeline schedule (its last send included), as Megatron-LM and DeepSpeed's pipeline engine
  reduce gradients (docs/sysmodel.md, "Overlap policy"); then the sharded optimizer step.
* :func:`weight_streaming_graph`: layers in order, layer l on stage l % PP; a layer's weights
  stream in once a resident slot is free, all microbatches run through it, each hands over to
  the next layer's stage; the backward streams weights in again and gradients out.

Task times come from a compute timer (:func:`sysmodel.compute_timing.compute_timer`) and a
:class:`sysmodel.comm_timing.CommTimer`; :data:`TASK_GRAPHS` maps a workload's mode to its
builder.
"""

from __future__ import annotations

import dataclasses
import itertools
from array import array
from dataclasses import dataclass

import numpy as np

from hdl.contracts.errors import FredError
from sysmodel.engine import Engine, TaskBlock
from sysmodel.model_cache import Ref, current
from sysmodel.pipeline_schedules import interleaved_ops, pipeline_ops, schedule_order
from sysmodel.workloads import layer_shape, layer_shapes
from sysmodel import schedule_append

__all__ = ["StageEngine", "stage_resource", "pipeline_ops", "interleaved_ops", "weight_stationary_graph",
           "weight_streaming_graph", "TASK_GRAPHS"]


def stage_resource(stage: int, kind: str) -> str:
    """Name of pipeline stage ``stage``'s resource ``kind`` (compute, mp, pp, dp). Builders ask
    for the same few names once per task: one string per name, kept in the model's cache
    (:mod:`sysmodel.model_cache`, ``resource_names``)."""
    names = current().resource_names
    name = names.get((stage, kind))
    if name is None:
        name = names.put((stage, kind), f"s{stage}.{kind}")
    return name


class StageEngine(Engine):
    """The engine, told which pipeline stage each task belongs to (``stage=``, else read from a
    :func:`stage_resource` name). With ``blocking`` (``overlap=False``) a communication
    task first waits for its stage's latest compute task, and the stage's next compute task
    waits for every communication task added since: communication never overlaps compute
    (although one stage's communication may overlap another stage's compute)."""

    def __init__(self, *, blocking: bool, priority: dict | None = None, preempt_s=0.0, shared_phase=None,
                 hold=None):
        super().__init__(priority=priority, preempt_s=preempt_s, shared_phase=shared_phase, hold=hold)
        self.blocking = blocking
        self._last_compute: dict[int, int] = {}
        self._pending: dict[int, list[int]] = {}
        self._stage_of: dict[str, int] = {}     # resource name -> its stage (parsed once)

    def add(self, name, resource, duration, deps=(), *, stage=None, block=False, **kwargs) -> int:
        """``block``: this communication task blocks its stage's compute even when the engine
        does not block every task (DeepSpeed's ZeRO-2 gradient reduction without
        ``overlap_comm`` runs on the compute stream)."""
        compute = resource.endswith(".compute")
        if not (compute or self.blocking or block):
            return Engine.add(self, name, resource, duration, deps, **kwargs)
        if stage is None:
            stage = self._stage_of.get(resource)
            if stage is None:
                if not resource.startswith("s"):
                    raise FredError(f"internal: task {name} on {resource} has no stage")
                stage = self._stage_of[resource] = int(resource[1:].split(".")[0])
        elif not resource.startswith("s"):
            # the wafer-wide I/O channel gets one queue per stage, or stage s's stream (now
            # waiting for s's compute) would hold up the other stages' streams behind it; the
            # streams still share the controllers' links through their link loads
            resource = f"s{stage}.{resource}"
        if compute:
            pending = self._pending.pop(stage, None)
            tid = Engine.add(self, name, resource, duration, [*deps, *pending] if pending else deps, **kwargs)
            self._last_compute[stage] = tid
        else:
            tid = Engine.add(self, name, resource, duration, [*deps, self._last_compute.get(stage)], **kwargs)
            self._hold_next_compute(stage, tid)
        return tid

    def _hold_next_compute(self, stage: int, tid: int) -> None:
        """The stage's next compute task waits for communication task ``tid``."""
        pending = self._pending.get(stage)
        if pending is None:
            self._pending[stage] = [tid]
        else:
            pending.append(tid)


    def add_layer(self, stage: int, name: str, resource: str, duration: float, deps, npu, source,
                  mp_name: str, mp_resource: str, mp) -> tuple[int, int]:
        """A layer's compute task after ``deps`` (task ids or None) and, when ``mp`` (a
        communication time) is not None, its MP all-reduces blocking the stage's compute: the
        two tasks :meth:`add` would add (``block=True`` for the MP task), for the builders' hot
        loops, without re-checking what the builder guarantees (numbers, earlier
        dependencies); returns (compute task, last task)."""
        pending = self._pending.pop(stage, None)
        deps = tuple([d for d in (*deps, *pending) if d is not None]) if pending else \
            tuple([d for d in deps if d is not None])
        t = self._append(name, resource, duration, deps, "compute", npu, None, None, source)
        self._last_compute[stage] = t
        if mp is None:
            return t, t
        m = self._append(mp_name, mp_resource, mp.time_s, (t, t), "mp", npu, mp.loads, mp.bw, None)
        self._pending[stage] = [m]
        return t, m


    def add_computes(self, stage: int, names: list, resource: str, duration: float, deps, prevs: list,
                     npu, source, spill: tuple | None = None) -> list[int]:
        """For each microbatch ``i`` the compute task :meth:`add_layer` adds for a layer
        without MP (named ``names[i]``, after ``deps`` and ``prevs[i]``: task ids or None), each
        followed, with ``spill`` = ``(names, resource, communication time, blocks)``, by its
        spill after it: the task :meth:`add` adds on the stage's own channel when ``blocks``
        (the serialised mode: the next compute waits for it), else on the wafer-wide
        ``resource``, as the streaming builder's loop adds them one by one; for its hottest
        loop, without re-checking what the builder guarantees (``duration`` and the spill's
        time >= 0, earlier dependencies). Returns the compute tasks."""
        n, m = len(self._duration), len(names)
        step = 1 if spill is None else 2
        computes = list(range(n, n + step * m, step))
        base = tuple([d for d in deps if d is not None])
        first = [base if p is None else (*base, p) for p in prevs]
        pending = self._pending.pop(stage, None)
        if pending:
            first[0] = (*first[0], *pending)
        duration = float(duration)
        if spill is None:
            self._name_parts.extend(names)
            self._duration.extend([duration] * m)
            self._category.extend(["compute"] * m)
            self._npu.extend([npu] * m)
            self._entry.extend([-1] * m)
            self.sources.extend([source] * m)
            self._dep_count.extend(map(len, first))
            self._dep_flat.extend(itertools.chain.from_iterable(first))
        else:
            spill_names, spill_resource, d, blocks = spill
            if blocks:   # StageEngine.add: the stage's own channel, after the compute; holds the next
                spill_resource = f"s{stage}.{spill_resource}"
                first = [f if i == 0 else (*f, computes[i - 1] + 1) for i, f in enumerate(first)]
                spill_deps = [(t, t) for t in computes]
            else:
                spill_deps = [(t,) for t in computes]
            entry = -1 if d.loads is None else self.entry(d.loads, d.bw)
            self._name_parts.extend(itertools.chain.from_iterable(zip(names, spill_names)))
            self._duration.extend([duration, float(d.time_s)] * m)
            self._category.extend(["compute", "io"] * m)
            self._npu.extend([npu, None] * m)
            self._entry.extend([-1, entry] * m)
            self.sources.extend([source, None] * m)
            self._dep_count.extend(itertools.chain.from_iterable(zip(map(len, first), map(len, spill_deps))))
            self._dep_flat.extend(itertools.chain.from_iterable(itertools.chain.from_iterable(zip(first, spill_deps))))
            self.queues.setdefault(spill_resource, []).extend([t + 1 for t in computes])
            if blocks:
                self._pending[stage] = [computes[-1] + 1]
        self.queues.setdefault(resource, []).extend(computes)
        self._last_compute[stage] = computes[-1]
        self._arrays = None
        return computes

    def add_transfer(self, stage: int, name: str, resource: str, d, prev, category: str, npu,
                     block: bool) -> int:
        """The communication task :meth:`add` adds on ``stage``'s own channel ``resource``
        after ``prev`` (a task id or None), for the builders' hot loops; ``d``: a number or a
        communication time (with its link loads)."""
        if type(d) is not float and hasattr(d, "time_s"):
            loads, bw, duration = d.loads, d.bw, d.time_s
        else:
            loads = bw = None
            duration = d
        if duration < 0:
            raise FredError(f"task {name}: negative duration {duration}")
        if not (self.blocking or block):
            return self._append(name, resource, duration, () if prev is None else (prev,), category,
                                npu, loads, bw, None)
        last = self._last_compute.get(stage)
        deps = tuple([x for x in (prev, last) if x is not None])
        tid = self._append(name, resource, duration, deps, category, npu, loads, bw, None)
        self._hold_next_compute(stage, tid)
        return tid

    def layer_block(self, run: list | PassColumns, send: tuple | None = None) -> LayerBlock:
        """The tasks :meth:`add_layer` adds for each layer of ``run`` in turn, each after the
        previous one's last task, as one block to append once per microbatch
        (:meth:`add_layer_run`); ``run``: per layer ``(name, compute resource, compute s,
        source, npu, mp resource, mp time or None)`` (:meth:`_StationaryPipeline._layer_run`),
        at least one layer, every duration >= 0. ``send``: ``(name, resource, communication
        time, npu, whether it blocks compute)`` of the task :meth:`add_transfer` adds after the
        last one (the pass's PP send), or None.""" 
        if type(run) is PassColumns:
            return self._mp_pass_block(run, send)
        names, duration, category, npu, entry, sources, dep_count, deps = ([] for _ in range(8))
        queues: dict[str, list[int]] = {}
        computes = []
        # the layers of one shape share their MP time object (layer_timing): its entry looked
        # up once per object of the run, not per layer (the run keeps the objects alive)
        mp_entry: dict[int, int] = {}
        extend_names, extend_duration, extend_category = names.extend, duration.extend, category.extend
        extend_npu, extend_entry, extend_sources = npu.extend, entry.extend, sources.extend
        after_mp = False
        k = 0
        for name, on_compute, compute_s, source, rep, on_mp, mp in run:
            computes.append(k)
            if k:   # after the previous layer's MP task (add_layer names it twice) or compute
                if after_mp:
                    dep_count.append(2)
                    deps.extend((k - 1, k - 1))
                else:
                    dep_count.append(1)
                    deps.append(k - 1)
            queue = queues.get(on_compute)
            if queue is None:
                queue = queues[on_compute] = []
            queue.append(k)
            last_compute = k
            after_mp = mp is not None
            if after_mp:
                e = mp_entry.get(id(mp))
                if e is None:
                    e = mp_entry[id(mp)] = self.entry(mp.loads, mp.bw)
                extend_names((name, name + " mp"))
                extend_duration((float(compute_s), float(mp.time_s)))
                extend_category(("compute", "mp"))
                extend_npu((rep, rep))
                extend_entry((-1, e))
                extend_sources((source, None))
                dep_count.append(2)
                deps.extend((k, k))
                queue = queues.get(on_mp)
                if queue is None:
                    queue = queues[on_mp] = []
                queue.append(k + 1)
                k += 2
            else:
                names.append(name)
                duration.append(float(compute_s))
                category.append("compute")
                npu.append(rep)
                entry.append(-1)
                sources.append(source)
                k += 1
        return self._with_send(names, duration, category, npu, entry, sources, dep_count, deps, queues,
                               last_compute, after_mp, computes, send)

    def _mp_pass_block(self, run: PassColumns, send: tuple | None) -> LayerBlock:
        """:meth:`layer_block` of a pass whose every layer has MP, made by columns: task 2j is
        layer j's compute, 2j + 1 its MP all-reduce, each task after the previous one (named
        twice, as :meth:`add_layer` names an MP task's compute, and a compute task the MP task
        before it); the transfer entries asked per distinct MP time object in layer order,
        as the layer loop asks them, then the send's. Why: per layer the loop costs about a
        microsecond of Python, a pass's columns a few list operations (docs/sysmodel.md,
        Speed, twenty-third increment). Only the durations and the entries are made per
        call; the rest of the block is kept per pass shape (:meth:`_pass_block_shape`)."""
        mp = run.mp
        tasks = 2 * len(mp)
        entry_of: dict = {}
        for d in mp:   # first seen first: the engine numbers new entries in this order
            if id(d) not in entry_of:
                entry_of[id(d)] = self.entry(d.loads, d.bw)
        shape = self._pass_block_shape(run, send)   # asks the send's entry (after the layers')
        duration = [0.0] * tasks
        duration[0::2] = run.compute_s
        duration[1::2] = [float(d.time_s) for d in mp]
        entry = [-1] * tasks
        entry[1::2] = [entry_of[id(d)] for d in mp]
        if send is not None:
            d = send[2]
            duration.append(float(d.time_s))
            entry.append(self.entry(d.loads, d.bw))
        kept = shape.block
        block = TaskBlock(kept.names, array("d", duration), kept.category, kept.npu, array("q", entry),
                          kept.sources, kept.dep_count, kept.deps, kept.queues)
        return LayerBlock(block, shape.last_compute, shape.last, shape.ends_with_mp, shape.send_blocks,
                          shape.computes)

    def _pass_block_shape(self, run: PassColumns, send: tuple | None) -> LayerBlock:
        """The :meth:`_mp_pass_block` of ``run`` and ``send`` without its durations and
        entries (both empty): its names, categories, NPUs, sources, dependencies and queues,
        which depend only on the pass's skeleton, its compute and MP resources, its NPU and
        the send's name, resource, NPU and whether it blocks compute (with this engine's
        ``blocking``). Kept in the model's cache (``pass_block_shapes``) under exactly those,
        so each evaluation of a pass shape -- each microbatch count, network, bench rebuild --
        makes only its durations and entries; its typed columns are shared read-only by the
        blocks made from it, as a block's are by its appends (:meth:`Engine._extend`)."""
        send_shape = None if send is None else (send[0], send[1], send[3], bool(self.blocking or send[4]))
        key = (Ref(run.skeleton), run.on_compute, run.on_mp, run.npu, send_shape)
        memo = current().pass_block_shapes
        shape = memo.get(key)
        if shape is not None:
            return shape
        tasks = 2 * len(run.mp)
        deps = [None] * (2 * tasks - 2)   # task k (k >= 1) after task k - 1, named twice
        deps[0::2] = deps[1::2] = range(tasks - 1)
        computes = range(0, tasks, 2)
        queues = {run.on_compute: list(computes), run.on_mp: list(range(1, tasks, 2))}
        # the names and sources interleaved once per pass shape (PassSkeleton); copied: the
        # send is appended to them
        made = self._with_send(list(run.skeleton.task_names), [0.0] * tasks, ["compute", "mp"] * len(run.mp),
                               [run.npu] * tasks, [-1] * tasks, list(run.skeleton.task_sources),
                               [2] * (tasks - 1), deps, queues, tasks - 2, True, computes, send)
        block = dataclasses.replace(made.block, duration=array("d"), entry=array("q"))
        return memo.put(key, dataclasses.replace(made, block=block))

    def _with_send(self, names: list, duration: list, category: list, npu: list, entry: list, sources: list,
                   dep_count: list, deps: list, queues: dict, last_compute: int, after_mp: bool, computes,
                   send: tuple | None) -> LayerBlock:
        """The :class:`LayerBlock` of a pass's layer columns (:meth:`layer_block`), with
        ``send`` (its fields, or None) appended after the last task."""
        last = len(names) - 1
        blocks = None
        if send is not None:
            send_name, on_pp, d, rep, blocks = send
            blocks = bool(self.blocking or blocks)
            names.append(send_name)
            duration.append(float(d.time_s))
            category.append("pp")
            npu.append(rep)
            entry.append(self.entry(d.loads, d.bw))
            sources.append(None)
            dep_count.append(2 if blocks else 1)
            deps.extend((last, last_compute) if blocks else (last,))
            queues.setdefault(on_pp, []).append(last + 1)
        # the names as a tuple (of strings): the cyclic garbage collector stops tracking it and
        # the (prefix, names) parts a kept graph holds per appended block (Engine._extend)
        block = TaskBlock.typed(tuple(names), duration, category, npu, entry, sources, dep_count, deps,
                                list(queues.items()))
        return LayerBlock(block, last_compute, last, after_mp, blocks, tuple(computes))

    def add_layer_run(self, stage: int, prefix: str, run: LayerBlock, prev, after=()) -> int:
        """The tasks of ``run`` (:meth:`layer_block`), the first after the tasks ``after``,
        ``prev`` (task ids or None) and the stage's pending communication, for the builders'
        hottest loops (a pipeline stage's pass over its layers, once per microbatch); task names
        are ``prefix`` + the layer's name (+ " mp"). Returns the last layer's last task."""
        pending = self._pending.pop(stage, None)
        if pending or after:
            first = tuple([d for d in (*after, prev, *(pending or ())) if d is not None])
        else:
            first = () if prev is None else (prev,)
        t0 = self._extend(run.block, prefix, first)
        self._last_compute[stage] = t0 + run.last_compute
        if run.ends_with_mp:
            self._pending[stage] = [t0 + run.last]
        if run.send_blocks:
            self._hold_next_compute(stage, t0 + run.last + 1)
        return t0 + run.last


@dataclass(frozen=True)
class PassSkeleton:
    """What a pass over a workload's layers is whatever the platform, the timers and the
    stage: per layer (in pass order) its ``names``, its ``sources`` (``("layer", layer,
    backward, recompute)``) and ``which``: the number of its shape (:func:`~sysmodel.workloads.layer_shape`,
    numbered as the layers first show them); per shape, ``firsts``: its first layer (the
    workload's layer number: the one :func:`layer_timing` is asked for); and the pass's tasks
    made by columns (:meth:`StageEngine._mp_pass_block`): ``task_names`` (each layer's name,
    then it + " mp") and ``task_sources`` (its source, then None). Made by :meth:`of` from the
    per-layer fields; :func:`pass_skeleton` keeps one per workload and pass."""

    names: tuple
    sources: tuple
    which: tuple
    firsts: tuple
    task_names: tuple
    task_sources: tuple

    @staticmethod
    def of(names, sources, which, firsts=()) -> PassSkeleton:
        """The skeleton of these per-layer fields, its task columns interleaved."""
        tasks = 2 * len(names)
        task_names: list = [None] * tasks
        task_names[0::2] = names
        task_names[1::2] = [name + " mp" for name in names]
        task_sources: list = [None] * tasks
        task_sources[0::2] = sources
        return PassSkeleton(tuple(names), tuple(sources), tuple(which), tuple(firsts), tuple(task_names),
                            tuple(task_sources))


def pass_skeleton(workload, layer_ids, backward: bool, recompute: str = "none") -> PassSkeleton:
    """The :class:`PassSkeleton` of ``workload``'s pass over ``layer_ids`` (its layer numbers in
    pass order; ``backward``: a backward pass's sources; ``recompute``: the recomputation the
    pass runs, :meth:`~sysmodel.iteration_plan.IterationPlan.pass_recompute`). Every field is a
    function of those four alone, so it is kept in the model's cache (``pass_skeletons``, the workload by
    identity, as ``workload_shapes``) and each evaluation of the workload's passes -- a sweep's
    strategies with the same stage split, a bench's graphs built anew -- reads it instead of
    making a name, a source and a shape look-up per layer again (docs/sysmodel.md, Speed)."""
    memo = current().pass_skeletons
    key = (Ref(workload), tuple(layer_ids), backward, recompute)
    skeleton = memo.get(key)
    if skeleton is None:
        skeleton = memo.put(key, _made_pass_skeleton(workload, key[1], backward, recompute))
    return skeleton


def _made_pass_skeleton(workload, layer_ids: tuple, backward: bool, recompute: str) -> PassSkeleton:
    """:func:`pass_skeleton` made: the shapes told apart by identity
    (:func:`~sysmodel.workloads.layer_shapes`: one object per shape, alive while the
    workload's tuple holds them)."""
    layers, shapes = workload.layers, layer_shapes(workload)
    number: dict = {}
    firsts, which = [], []
    for li in layer_ids:
        k = number.get(id(shapes[li]))
        if k is None:
            k = number[id(shapes[li])] = len(firsts)
            firsts.append(li)
        which.append(k)
    return PassSkeleton.of([layers[li].name for li in layer_ids],
                           [("layer", layers[li], backward, recompute) for li in layer_ids], which, firsts)


@dataclass
class PassColumns:
    """A stage's pass over its layers, every layer with MP, as :meth:`StageEngine.layer_block`
    takes it by columns (what its per-layer tuples would hold): its ``skeleton`` (the layers'
    names and sources, :class:`PassSkeleton`), per layer its ``compute_s`` (s) and ``mp``
    (communication time objects, each with link loads); the stage's ``on_compute`` and
    ``on_mp`` resources and its ``npu``, the same for every layer
    (:meth:`_StationaryPipeline._shared_run_fields`)."""

    skeleton: PassSkeleton
    compute_s: list
    mp: list
    on_compute: str
    on_mp: str
    npu: int

    @property
    def names(self) -> tuple:
        return self.skeleton.names

    @property
    def sources(self) -> tuple:
        return self.skeleton.sources


@dataclass(frozen=True)
class LayerBlock:
    """A stage's pass over its layers as a :class:`~sysmodel.engine.TaskBlock`, with the offsets
    of its last compute task and of its last layer's last task, whether that one is an MP task,
    and whether the block ends with a send (at offset ``last`` + 1) that blocks compute (True),
    one that does not (False), or has none (None); ``computes``: the offset of each layer's
    compute task, in pass order (empty where the builder does not need them)."""

    block: TaskBlock
    last_compute: int
    last: int
    ends_with_mp: bool
    send_blocks: bool | None = None
    computes: tuple = ()


class _StationaryPipeline:
    """Adds a weight-stationary iteration's tasks (see :func:`weight_stationary_graph`)."""

    def __init__(self, eng: StageEngine, plan, compute, comm):
        self.eng, self.plan, self.compute, self.comm = eng, plan, compute, comm
        self.pp = plan.strategy.pp
        self.chunks = plan.chunks
        self.last_virtual = self.pp * self.chunks - 1
        # virtual stage v = chunk * PP + stage; its output goes to v + 1 (forward) or v - 1
        # (backward), which lives on another stage when PP > 1
        self.sends_forward: dict = {}    # (virtual stage v -> v+1, microbatch) -> send task
        self.sends_backward: dict = {}   # (virtual stage v -> v-1, microbatch) -> send task
        self.backwards_done: dict = {}   # virtual stage -> backwards added
        # A blocking gradient reduction between a stage's last backward layers would hold up
        # that backward's send, and with it every earlier stage's last backward: the pipeline's
        # drain would pay one reduction per stage (docs/sysmodel.md, "Overlap policy"). With
        # PP > 1 it therefore runs after the stage's schedule, as the frameworks run it.
        self.defer_dp = self.pp > 1 and (eng.blocking or not plan.platform.dp_overlap)
        self.deferred_dp: dict = {}      # stage -> [(name, time, compute task)] to reduce after it
        self.last_send: dict = {}        # stage -> its latest send task
        # (stage, kind, id(layer)) -> what every microbatch's task needs; and layer_timing's entries
        self._timings: dict = {}
        self._runs: dict = {}            # (stage, kind, virtual stage) -> its layer run, or None
        self._sends: dict = {}           # (virtual stage, kind) -> its sends' fields, or None
        self.order = None                # the schedule order (add_schedule)
        self._fields: dict = {}          # (stage, kind, virtual stage) -> its layer run's fields, once checked

    def add_schedule(self) -> None:
        """Every stage's passes in :func:`~sysmodel.pipeline_schedules.schedule_order`'s order
        (round-robin over the stages, each once the send it waits for exists: resource order
        is then a valid interleaving across stages); as arrays (:func:`append_passes`) when
        every pass but the last backwards is one block with its send, else pass by pass."""
        order = self.order = schedule_order(self.plan.schedule, self.pp, self.plan.microbatches, self.chunks)
        virtual_stages = self.pp * self.chunks
        # no stretch is longer than the order: a short order (Transformer-17B's 32 passes) skips
        # the stretches' numpy calls (about 4 % of its evaluation)
        if (len(order.stage) >= schedule_append.STRETCH_AS_ARRAYS
                and schedule_append.longest_stretch(order, virtual_stages, blocks=self.defer_dp)
                >= schedule_append.STRETCH_AS_ARRAYS and self._passes_as_blocks(order)):
            send = schedule_append.append_passes(self.eng, order, virtual_stages, self._block_of,
                                                 self._general_pass,
                                                 self._last_backward_filled if self.defer_dp else None)
            with_send = np.flatnonzero(send >= 0)
            for s, tid in zip(order.stage[with_send].tolist(), send[with_send].tolist()):
                self.last_send[s] = tid   # in pass order: each stage's last send stays
            return
        for s, backward, i, c in zip(order.stage.tolist(), order.backward.tolist(),
                                     order.microbatch.tolist(), order.chunk.tolist()):
            self._add_op(s, "B" if backward else "F", i, c)

    def _passes_as_blocks(self, order) -> bool:
        """Whether every pass but the virtual stages' last backwards is one layer block ending
        with its send (:meth:`_layer_run`; the send may be timed once: the communication timer
        memoises), as :func:`append_passes` needs; checked without touching the engine."""
        if not self.comm.memoised or type(self.eng).add is not StageEngine.add:
            return False
        virtual_stages = self.pp * self.chunks
        blocks = ~order.last_backward
        for key in np.unique(order.backward[blocks] * virtual_stages + order.virtual[blocks]).tolist():
            backward, v = divmod(key, virtual_stages)
            kind, s = "B" if backward else "F", v % self.pp
            fields = self._fields[(s, kind, v)] = self._run_fields(s, kind, v)
            if fields is None:
                return False
            if self._block_send(s, v, kind) is None and self._sends[(v, kind)] is not None:
                return False
        return True

    def _block_of(self, key: int) -> LayerBlock:
        """The layer block of pass kind and virtual stage ``key`` (see :func:`append_passes`)."""
        backward, v = divmod(key, self.pp * self.chunks)
        return self._layer_run(v % self.pp, "B" if backward else "F", v, self._layer_ids(v, backward))

    def _general_pass(self, j: int, prev: int) -> int:
        """Pass ``j`` of the schedule order (a virtual stage's last backward) through
        :meth:`_add_op`, after the send ``prev`` (-1: none); returns its send (-1: none)."""
        order = self.order
        s, i, c = int(order.stage[j]), int(order.microbatch[j]), int(order.chunk[j])
        v = c * self.pp + s
        if prev >= 0:
            self.sends_backward[(v + 1, i)] = prev
        self.backwards_done[v] = self.plan.microbatches - 1
        self._add_op(s, "B", i, c)
        return self.sends_backward.get((v, i), -1)

    def _last_backward_filled(self, j: int, t0: int) -> None:
        """Pass ``j`` of the schedule order (a virtual stage's last backward, its gradient
        buckets deferred), appended as its kind's block from task ``t0`` on: what
        :meth:`_add_op` does besides adding that block -- its buckets filled from the block's
        compute tasks (see :func:`~sysmodel.schedule_append.append_passes`)."""
        order = self.order
        s, c = int(order.stage[j]), int(order.chunk[j])
        v = c * self.pp + s
        self.backwards_done[v] = self.plan.microbatches
        self._fill_buckets(s, v, t0, self._runs[(s, "B", v)].computes)

    def _add_op(self, s: int, kind: str, i: int, c: int) -> None:
        """One forward or backward pass of microbatch ``i`` through chunk ``c`` of stage ``s``
        (virtual stage c * PP + s), then its send."""
        backward = kind == "B"
        v = c * self.pp + s
        prev = self.sends_backward.get((v + 1, i)) if backward else self.sends_forward.get((v - 1, i))
        last_backward = False
        if backward:
            done = self.backwards_done[v] = self.backwards_done.get(v, 0) + 1
            last_backward = done == self.plan.microbatches
        tag = f"c{c} " if self.chunks > 1 else ""
        run = None
        if not last_backward:
            run = self._runs.get((s, kind, v), False)
            if run is False:
                run = self._layer_run(s, kind, v, self._layer_ids(v, backward))
        elif self.defer_dp:
            # The last backward fills the gradient buckets. Deferred, they add no task during
            # the pass, which then adds exactly the tasks of the virtual stage's backward block
            # (when an earlier backward built it: the communication timer is asked in the
            # general path's order); the buckets are filled from its compute tasks after it.
            run = self._runs.get((s, kind, v))
        if run is not None:
            prev = self.eng.add_layer_run(s, f"{kind}{i} s{s} {tag}", run, prev)
            if last_backward:
                self._fill_buckets(s, v, prev - run.last, run.computes)
            if run.send_blocks is not None:   # its send is the block's last task
                sends = self.sends_backward if backward else self.sends_forward
                sends[(v, i)] = self.last_send[s] = prev + 1
                return
        else:
            buckets = _GradientBuckets(self, s) if last_backward else None
            layer_ids = self._layer_ids(v, backward)
            for li in layer_ids:
                layer = self.plan.workload.layers[li]
                compute_task, prev = self._add_layer(s, kind, i, layer, prev, tag)
                if buckets is not None:
                    buckets.add(layer, compute_task, last=li == layer_ids[-1])
        self._add_send(s, v, kind, i, prev, tag)

    def _fill_buckets(self, s: int, v: int, t0: int, computes: tuple) -> None:
        """Stage ``s``'s gradient buckets of virtual stage ``v``'s last backward, added as one
        block from task ``t0`` on (``computes``: the offsets of its layers' compute tasks in
        pass order), as the general path fills them layer by layer; only where the buckets
        are deferred (:attr:`defer_dp`: they add no task during the pass)."""
        buckets = _GradientBuckets(self, s)
        layer_ids = self._layer_ids(v, True)
        layers = self.plan.workload.layers
        final = len(layer_ids) - 1
        # _GradientBuckets.add's sums and tests, layer by layer, without a call per layer
        mp, limit = buckets.mp, buckets.bucket_elements
        elements, start = 0.0, 0
        for k, li in enumerate(layer_ids):
            layer = layers[li]
            elements += layer.params / layer.shards(mp)
            if elements < limit and k != final:
                continue
            buckets.reduce(layers[layer_ids[start]], layer, k == start, elements, t0 + computes[k])
            elements, start = 0.0, k + 1

    def _layer_ids(self, v: int, backward: bool) -> list:
        """Virtual stage ``v``'s layers in the order a pass runs them."""
        stage = self.plan.virtual_stages[v]
        return list(reversed(stage)) if backward else stage

    def _layer_run(self, s: int, kind: str, v: int, layer_ids) -> LayerBlock | None:
        """What :meth:`StageEngine.add_layer_run` needs of virtual stage ``v``'s pass ``kind``
        over ``layer_ids`` (the same for every microbatch: built once), or None where the
        general path must add the tasks (see :meth:`_add_layer`)."""
        key = (s, kind, v)
        run = self._runs.get(key, False)
        if run is not False:
            return run
        fields = self._fields.pop(key, False)   # kept by _passes_as_blocks
        if fields is False:
            fields = self._run_fields(s, kind, v, layer_ids)
        run = self.eng.layer_block(fields, self._block_send(s, v, kind)) if fields else None
        self._runs[key] = run
        return run

    def _run_fields(self, s: int, kind: str, v: int, layer_ids=None) -> list | None:
        """Per layer of virtual stage ``v``'s pass ``kind`` (``layer_ids``: its layers in pass
        order, None: :meth:`_layer_ids`) what :meth:`StageEngine.layer_block` takes, or None
        where a layer must take the general path (:meth:`_fast`); no task is added."""
        if layer_ids is None:
            layer_ids = self._layer_ids(v, kind == "B")
        if self.comm.memoised:
            return self._shared_run_fields(s, kind, layer_ids)
        run = []
        for li in layer_ids:
            layer = self.plan.workload.layers[li]
            self._add_layer_timing(s, kind, layer)
            rep, on_compute, on_mp, compute_s, d, with_mp, source = self._timings[(s, kind, id(layer))]
            if not self._fast(compute_s, d, with_mp):
                return None
            run.append((layer.name, on_compute, float(compute_s), source, rep, on_mp, d if with_mp else None))
        return run

    def _shared_run_fields(self, s: int, kind: str, layer_ids) -> list | PassColumns | None:
        """:meth:`_run_fields` with a memoising communication timer: :func:`layer_timing`
        asked once per layer shape of the pass (in the order the layers first show each
        shape, as asking per layer would), since it gives every layer of one shape the same
        timing; each layer keeps its own name and source. The names, sources and shapes come
        from the pass's :class:`PassSkeleton` (:func:`pass_skeleton`: made once per workload
        and pass, not per evaluation). Where every layer of the pass has MP (a transformer's
        stage), the fields as columns (:class:`PassColumns`: no tuple per layer), else one
        tuple per layer."""
        backward = kind == "B"
        layers = self.plan.workload.layers
        skeleton = pass_skeleton(self.plan.workload, layer_ids, backward, self.plan.pass_recompute(s, backward))
        timings = []   # per distinct shape, in the order the layers first show it
        for li in skeleton.firsts:
            rep, on_compute, on_mp, compute_s, d, with_mp = layer_timing(self, s, layers[li], backward)
            if not self._fast(compute_s, d, with_mp):
                return None
            timings.append((on_compute, float(compute_s), rep, on_mp, d if with_mp else None))
        which = skeleton.which
        if all(t[4] is not None for t in timings) and len({(t[0], t[2], t[3]) for t in timings}) == 1:
            on_compute, _, rep, on_mp, _ = timings[0]
            compute_s, mp = [t[1] for t in timings], [t[4] for t in timings]
            return PassColumns(skeleton, list(map(compute_s.__getitem__, which)),
                               list(map(mp.__getitem__, which)), on_compute, on_mp, rep)
        return [(name, *timings[k][:2], source, *timings[k][2:])
                for name, source, k in zip(skeleton.names, skeleton.sources, which)]

    def _block_send(self, s: int, v: int, kind: str) -> tuple | None:
        """The send of virtual stage ``v``'s pass ``kind`` as :meth:`StageEngine.layer_block`
        takes it, when it may be timed once for every microbatch (the communication timer
        memoises: the reference path times every task) and add() would accept it; else None."""
        send = self._sends.get((v, kind), False)
        if send is False:
            send = self._sends[(v, kind)] = self._send_of(s, v, kind)
        if send is None or not self.comm.memoised:
            return None
        resource, dst, nbytes, npu, block = send
        d = self.comm.pp(s, dst, nbytes)
        if not hasattr(d, "time_s") or d.time_s < 0:
            return None
        return "send", resource, d, npu, block

    def _fast(self, compute_s, d, with_mp) -> bool:
        """Whether a layer's tasks may skip :meth:`StageEngine.add`: an engine that keeps
        StageEngine's add(), and durations add() would accept. The serialised mode too: a
        layer's compute and MP tasks depend on the same tasks in it (its MP blocks compute in
        both modes), and :meth:`StageEngine.layer_block` makes the send block compute."""
        eng = self.eng
        return not (type(eng).add is not StageEngine.add or compute_s < 0 or (with_mp and d.time_s < 0))

    def _add_layer(self, s, kind, i, layer, prev, tag="") -> tuple[int, int]:
        """``layer``'s compute task and its MP all-reduces (blocking the stage's compute);
        returns (compute task, last task)."""
        eng = self.eng
        rep, on_compute, on_mp, compute_s, d, with_mp, source = self._add_layer_timing(s, kind, layer)
        name = f"{kind}{i} s{s} {tag}{layer.name}"
        if not self._fast(compute_s, d, with_mp):
            # the serialised mode (every communication task blocks), an engine that changes
            # add(), or a bad duration for add() to report: the general path
            t = eng.add(name, on_compute, compute_s, [prev], npu=rep, source=source)
            if with_mp:
                return t, eng.add(f"{name} mp", on_mp, d, [t], category="mp", npu=rep, block=True)
            return t, t
        return eng.add_layer(s, name, on_compute, compute_s, (prev,), rep, source,
                             f"{name} mp", on_mp, d if with_mp else None)

    def _add_layer_timing(self, s, kind, layer) -> tuple:
        """What every microbatch's tasks of ``layer``'s pass ``kind`` on stage ``s`` need:
        (NPU, compute resource, MP resource, compute s, MP time, whether MP runs, source);
        computed once."""
        key = (s, kind, id(layer))
        timing = self._timings.get(key)
        if timing is None:
            backward = kind == "B"
            timing = self._timings[key] = (*layer_timing(self, s, layer, backward),
                                           ("layer", layer, backward, self.plan.pass_recompute(s, backward)))
        return timing

    def _add_send(self, s, v, kind, i, prev, tag="") -> None:
        """The PP hand-over of microbatch ``i`` from virtual stage ``v`` to the next (forward)
        or the previous one (backward) once its last task ``prev`` is done; it blocks the
        stage's compute unless ``platform.pp_overlap``."""
        send = self._sends.get((v, kind), False)
        if send is False:
            send = self._sends[(v, kind)] = self._send_of(s, v, kind)
        if send is None:
            return
        resource, dst, nbytes, npu, block = send
        name = f"{kind}{i} s{s} {tag}send"
        d = self.comm.pp(s, dst, nbytes)
        if type(self.eng).add is StageEngine.add:   # what add() would do, without its checks
            tid = self.eng.add_transfer(s, name, resource, d, prev, "pp", npu, block)
        else:
            tid = self.eng.add(name, resource, d, [prev], category="pp", npu=npu, block=block)
        (self.sends_forward if kind == "F" else self.sends_backward)[(v, i)] = self.last_send[s] = tid

    def _send_of(self, s, v, kind) -> tuple | None:
        """(resource, destination stage, bytes, NPU, whether it blocks compute) of virtual stage
        ``v``'s sends in pass ``kind`` (the same for every microbatch), or None: no send."""
        stage, layers = self.plan.virtual_stages[v], self.plan.workload.layers
        mb = self.plan.microbatch_samples
        if kind == "F" and v < self.last_virtual:
            dst, nbytes = (v + 1) % self.pp, mb * layers[stage[-1]].out_bytes
        elif kind == "B" and v > 0:
            dst, nbytes = (v - 1) % self.pp, mb * layers[stage[0]].in_bytes
        else:
            return None
        return (stage_resource(s, "pp"), dst, nbytes, self.plan.representative(s),
                not self.plan.platform.pp_overlap)

    def add_optimizer_steps(self) -> None:
        """Each stage's deferred gradient buckets (see :meth:`add_deferred_reductions`), then its
        sharded optimizer step, after all its gradient buckets are reduced."""
        layers, mp = self.plan.workload.layers, self.plan.strategy.mp
        for s in range(self.pp):
            self.add_deferred_reductions(s)
            params = sum(layers[i].params / layers[i].shards(mp) for i in self.plan.stages[s])
            dps = list(self.eng.queues.get(stage_resource(s, "dp"), ()))  # the stage's DP tasks
            self.eng.add(f"optimizer s{s}", stage_resource(s, "compute"),
                         self.compute.optimizer_step_s(params), dps, npu=self.plan.representative(s),
                         source=("optimizer", params))

    def add_deferred_reductions(self, s: int) -> None:
        """Stage ``s``'s gradient buckets whose reduction blocks compute, when PP > 1: all-reduced
        back to back after the stage's last backward and its last send (Megatron-LM reduces the
        gradients once its pipeline schedule returns, DeepSpeed's pipeline engine in the
        ReduceGrads step after the last backward; neither holds a send up behind a reduction)."""
        for name, d, compute_task in self.deferred_dp.pop(s, ()):
            self.eng.add(name, stage_resource(s, "dp"), d,
                         [compute_task, self.last_send.get(s)], category="dp",
                         npu=self.plan.representative(s), block=True)


class _GradientBuckets:
    """ZeRO-2 gradient buckets of one stage's last backward: layers' gradients (their MP shard)
    fill a bucket of ``platform.dp_bucket_elements`` elements in backward order; a full bucket,
    and the last one when the backward ends, is all-reduced over the DP groups, blocking the
    stage's compute unless ``platform.dp_overlap``; a blocking reduction with PP > 1 is deferred
    until the stage's schedule is over (:meth:`_StationaryPipeline.add_deferred_reductions`)."""

    def __init__(self, pipeline: _StationaryPipeline, stage: int):
        self.pipeline, self.stage = pipeline, stage
        self.layers: list = []
        self.elements = 0.0
        # read once per stage: add() runs once per layer of the stage's last backward
        self.mp = pipeline.plan.strategy.mp
        self.bucket_elements = pipeline.plan.platform.dp_bucket_elements

    def add(self, layer, compute_task: int, *, last: bool) -> None:
        """``layer``'s gradient, ready when ``compute_task`` ends; ``last``: the backward ends."""
        self.layers.append(layer)
        self.elements += layer.params / layer.shards(self.mp)
        if self.elements < self.bucket_elements and not last:
            return
        self.reduce(self.layers[0], self.layers[-1], len(self.layers) == 1, self.elements, compute_task)
        self.layers, self.elements = [], 0.0

    def reduce(self, first_layer, final_layer, alone: bool, elements: float, compute_task: int) -> None:
        """The all-reduce of a bucket of ``elements`` from ``first_layer`` to ``final_layer``
        (``alone``: one layer), its gradients ready when ``compute_task`` ends (see :meth:`add`)."""
        p = self.pipeline
        platform = p.plan.platform
        d = p.comm.dp(elements, self.stage)
        if d > 0:
            first, final = first_layer.name, final_layer.name
            names = first if alone else f"{first}..{final}"
            name = f"dp s{self.stage} {names}"
            if p.defer_dp:
                p.deferred_dp.setdefault(self.stage, []).append((name, d, compute_task))
            else:
                p.eng.add(name, stage_resource(self.stage, "dp"), d, [compute_task],
                          category="dp", npu=p.plan.representative(self.stage),
                          block=not platform.dp_overlap)


def layer_timing(builder, s: int, layer, backward: bool) -> tuple:
    """What every microbatch's tasks of ``layer``'s pass on stage ``s`` need, for a builder
    with ``plan``, ``compute``, ``comm`` and a ``_timings`` dict: (NPU, compute resource, MP
    resource, compute s, MP time, whether MP runs). Computed once per layer *shape*
    (:func:`~sysmodel.workloads.layer_shape`: a transformer's blocks share it) when the
    communication timer memoises: neither timer reads a name, and a memoising timer returns
    the same time object for equal layers, so each layer gets what asking for it would give
    (the reference path asks for every layer: its transfers stay one link entry each). Both
    timers are given the stage's recomputation (:meth:`~sysmodel.iteration_plan.IterationPlan.pass_recompute`)."""
    shared_key = (s, backward, layer_shape(layer)) if builder.comm.memoised else None
    timing = builder._timings.get(shared_key)
    if timing is None:
        recompute = builder.plan.pass_recompute(s, backward)
        d = builder.comm.mp(layer, s, backward, recompute)
        timing = (builder.plan.representative(s), stage_resource(s, "compute"), stage_resource(s, "mp"),
                  builder.compute.layer_s(layer, backward=backward, recompute=recompute), d, d > 0)
        if shared_key is not None:
            builder._timings[shared_key] = timing
    return timing


def weight_stationary_graph(eng: StageEngine, plan, compute, comm) -> None:
    """Add a weight-stationary iteration of ``plan`` to ``eng`` (see the module docstring);
    ``compute``: a compute timer (:func:`~sysmodel.compute_timing.compute_timer`); ``comm``: a
    :class:`~sysmodel.comm_timing.CommTimer`."""
    pipeline = _StationaryPipeline(eng, plan, compute, comm)
    pipeline.add_schedule()
    pipeline.add_optimizer_steps()


class _StreamingPasses:
    """Adds a weight-streaming iteration's tasks (see :func:`weight_streaming_graph`)."""

    def __init__(self, eng: StageEngine, plan, compute, comm):
        self.eng, self.plan, self.compute, self.comm = eng, plan, compute, comm
        self.pp = plan.strategy.pp
        self.resident = plan.workload.layers_on_wafer
        self.done = {s: [] for s in range(self.pp)}   # per stage: task ending each of its layers
        self._timings: dict = {}   # (stage, backward, layer shape) -> layer_timing's (memoising timers)
        self._blocks: dict = {}    # (stage, backward, layer shape, hand-over) -> _shape_block's block

    def stage_of(self, li: int) -> int:
        return li % self.pp

    def add_pass(self, order, *, backward: bool) -> None:
        """The forward (or backward) pass over the layers in ``order``."""
        order = list(order)
        prev = {i: None for i in range(self.plan.microbatches)}
        for position, li in enumerate(order):
            following = order[position + 1] if position + 1 < len(order) else None
            self._add_layer(li, following, prev, backward)

    def _add_layer(self, li: int, following, prev: dict, backward: bool) -> None:
        """Layer ``li``: its weights stream in, every microbatch runs through it (updating
        ``prev``, microbatch -> its last task) and hands over to ``following``'s stage."""
        eng, layer, s = self.eng, self.plan.workload.layers[li], self.stage_of(li)
        kind, m = ("B" if backward else "F"), self.plan.microbatches
        deps = self._add_loads(layer, s, kind, backward)
        hand_over = following is not None and self.stage_of(following) != s
        # the same for every microbatch: computed once per layer (once per shape)
        rep, on_compute, on_mp, compute_s, d, with_mp = layer_timing(self, s, layer, backward)
        source = ("layer", layer, backward, self.plan.pass_recompute(s, backward))
        # the compute and MP tasks add() would add, in either mode (the MP task blocks compute
        # in both); blocks only when communication does not block compute (their spill skips
        # the serialised mode's bookkeeping)
        fast = type(eng).add is StageEngine.add and compute_s >= 0 and not (with_mp and d.time_s < 0)
        # a block costs about what adding three or four tasks one by one does: it pays for
        # itself with two tasks or more per microbatch (MP or a hand-over) and a few microbatches
        spill = False if with_mp or hand_over or not fast else self._compute_spill(layer, backward)
        if fast and not eng.blocking and m >= 4 and (with_mp or hand_over):
            self._add_layer_runs(layer, s, following if hand_over else None, prev, deps, backward,
                                 (layer.name, on_compute, compute_s, source, rep, on_mp, d if with_mp else None))
        elif spill is not False:   # one compute task per microbatch (and its spill): columns at once
            names = [f"{kind}{i} {layer.name}" for i in range(m)]
            if spill is not None:
                spill = ([f"spill {layer.name} {i}" for i in range(m)], "io.out", spill, eng.blocking)
            computes = eng.add_computes(s, names, on_compute, compute_s, deps, [prev[i] for i in range(m)],
                                        rep, source, spill)
            prev.update(enumerate(computes))
        else:
            self._add_layer_tasks(layer, s, following if hand_over else None, prev, deps, backward, fast,
                                  (on_compute, compute_s, source, rep, on_mp, d, with_mp))
        self.done[s].append(prev[m - 1])
        if backward:
            eng.add(f"store {layer.name}", "io.out", self.comm.io(layer, s, "io-store"),
                    [prev[m - 1]], category="io", stage=s)

    def _add_layer_tasks(self, layer, s: int, following, prev: dict, deps: list, backward: bool, fast: bool,
                         timing: tuple) -> None:
        """Every microbatch's tasks of ``layer`` added one by one (what :meth:`_add_layer` adds when
        no block applies): its compute and MP tasks (``timing``: :func:`layer_timing`'s on
        compute, compute time, source, NPU, on MP, MP time, with MP), its spill and its hand-over
        to ``following``'s stage (None: none). ``fast``: add them as :meth:`StageEngine.add_layer`
        does."""
        eng, kind, m = self.eng, "B" if backward else "F", self.plan.microbatches
        on_compute, compute_s, source, rep, on_mp, d, with_mp = timing
        hand_over = following is not None
        spill = self._spill(layer, backward, fast)
        # the hand-over's resource, time, NPU and blocking are the same for every
        # microbatch: asked for once (the timer's memo would return the same time object)
        send = self._hand_over_task(layer, s, following, backward) if hand_over and \
            self.comm.memoised and type(eng).add is StageEngine.add else None
        for i in range(m):
            name = f"{kind}{i} {layer.name}"
            if fast:   # the two tasks add() would add (see StageEngine.add_layer)
                t, prev[i] = eng.add_layer(s, name, on_compute, compute_s, (*deps, prev[i]), rep, source,
                                           f"{name} mp", on_mp, d if with_mp else None)
            else:
                t = eng.add(name, on_compute, compute_s, [*deps, prev[i]], npu=rep, source=source)
                prev[i] = eng.add(f"{name} mp", on_mp, d, [t],
                                  category="mp", npu=rep, block=True) if with_mp else t
            if spill is not None:   # the task add() adds: on the wafer-wide channel, after t
                eng._append(f"spill {layer.name} {i}", "io.out", spill.time_s, (t,), "io", None,
                            spill.loads, spill.bw, None)
            elif self.plan.memory.offload and not backward:
                eng.add(f"spill {layer.name} {i}", "io.out", self.comm.spill(layer, "io-write"),
                        [t], category="io", stage=s)
            if send is not None:   # what _add_hand_over adds
                prev[i] = eng.add_transfer(s, f"{kind}{i} {send[0]}", send[1], send[2], prev[i], "pp",
                                           send[3], send[4])
            elif hand_over:
                prev[i] = self._add_hand_over(layer, s, following, i, prev[i], backward)

    def _add_layer_runs(self, layer, s: int, following, prev: dict, deps: list, backward: bool,
                        run: tuple) -> None:
        """Every microbatch's tasks of ``layer`` (``run``: the layer as
        :meth:`StageEngine.layer_block` takes it), its activations' spill (with offload, in the
        forward) and its hand-over to ``following``'s stage (None: none), the tasks
        :meth:`_add_layer`'s loop adds one by one: the layer's tasks as one block per microbatch,
        with the hand-over in it when the communication timer memoises and no spill comes between."""
        eng, kind = self.eng, "B" if backward else "F"
        spill = self.plan.memory.offload and not backward
        send = None
        dst = nbytes = None
        if following is not None and self.comm.memoised and not spill:
            dst, nbytes = self._hand_over(layer, following, backward)
            d = self.comm.pp(s, dst, nbytes)
            if hasattr(d, "time_s") and d.time_s >= 0:
                send = (f"send to s{dst}", stage_resource(s, "pp"), d, self.plan.representative(s),
                        not self.plan.platform.pp_overlap)
        block = self._shape_block(layer, s, backward, run, send, dst, nbytes)
        spill_time = self._spill(layer, backward, True) if spill else None
        for i in range(self.plan.microbatches):
            prev[i] = eng.add_layer_run(s, f"{kind}{i} ", block, prev[i], deps)
            if spill_time is not None:   # the spill add() adds: on the wafer-wide channel, after the compute task
                eng._append(f"spill {layer.name} {i}", "io.out", spill_time.time_s,
                            (prev[i] - block.last + block.last_compute,), "io", None,
                            spill_time.loads, spill_time.bw, None)
            elif spill:
                Engine.add(eng, f"spill {layer.name} {i}", "io.out", self.comm.spill(layer, "io-write"),
                           (prev[i] - block.last + block.last_compute,), category="io")
            if send is not None:
                prev[i] += 1   # the block's hand-over, after the layer's last task
            elif following is not None:
                prev[i] = self._add_hand_over(layer, s, following, i, prev[i], backward)

    def _shape_block(self, layer, s: int, backward: bool, run: tuple, send, dst, nbytes) -> LayerBlock:
        """:meth:`StageEngine.layer_block` of ``[run]`` (``layer``'s tasks) and ``send``, built
        once per (stage, pass, layer shape, hand-over) when the communication timer memoises:
        every layer of one shape then has the same timings, the same time objects
        (:func:`layer_timing`; the hand-over's by its destination and bytes) and so the same
        transfer entries, and its block is the shape's but for the task names and the compute
        task's source, which are the layer's own (a graph template re-times by the source)."""
        if not self.comm.memoised:
            return self.eng.layer_block([run], send)
        key = (s, backward, layer_shape(layer), send is not None, dst, nbytes)
        shared = self._blocks.get(key)
        if shared is None:
            shared = self._blocks[key] = self.eng.layer_block([run], send)
        b = shared.block
        name = layer.name
        names = (name, f"{name} mp", *b.names[2:]) if run[6] is not None else (name, *b.names[1:])
        return LayerBlock(TaskBlock(names, b.duration, b.category, b.npu, b.entry, [run[3], *b.sources[1:]],
                                    b.dep_count, b.deps, b.queues),
                          shared.last_compute, shared.last, shared.ends_with_mp, shared.send_blocks)

    def _compute_spill(self, layer, backward: bool):
        """For a layer with one compute task per microbatch, added by
        :meth:`StageEngine.add_computes`: the time of each microbatch's spill (with offload, in
        the forward) when it may be timed once for all (the timer memoises) and add() would
        accept it, None with no spill, False where the builder's loop must add the tasks."""
        if backward or not self.plan.memory.offload:
            return None
        if not self.comm.memoised:
            return False
        spill = self.comm.spill(layer, "io-write")
        return spill if hasattr(spill, "time_s") and spill.time_s >= 0 else False

    def _spill(self, layer, backward: bool, fast: bool):
        """The time of each microbatch's activation spill of ``layer`` (with offload, in the
        forward), timed once for the layer's microbatches when the builder may append it
        without :meth:`StageEngine.add` (``fast``, communication not blocking compute, the
        timer memoising, a duration add() accepts); else None (add() adds each spill)."""
        if backward or not self.plan.memory.offload or not fast or self.eng.blocking or not self.comm.memoised:
            return None
        spill = self.comm.spill(layer, "io-write")
        return spill if hasattr(spill, "time_s") and spill.time_s >= 0 else None

    def _hand_over(self, layer, following: int, backward: bool) -> tuple[int, float]:
        """(destination stage, bytes) of a microbatch's hand-over from ``layer`` to ``following``."""
        layers = self.plan.workload.layers
        nbytes = self.plan.microbatch_samples * (layer.in_bytes if backward else layers[following].in_bytes)
        return self.stage_of(following), nbytes

    def _add_loads(self, layer, s: int, kind: str, backward: bool) -> list[int]:
        """The layer's weight stream (and, in the backward with offload, its checkpoints read
        back), started once one of the stage's ``layers_on_wafer`` resident slots is free."""
        j = len(self.done[s])
        gate = self.done[s][j - self.resident] if j >= self.resident else None
        deps = [self.eng.add(f"load {kind} {layer.name}", "io.in", self.comm.io(layer, s, "io-load"),
                             [gate], category="io", stage=s)]
        if backward and self.plan.memory.offload:
            deps.append(self.eng.add(f"unspill {layer.name}", "io.in",
                                     self.comm.unspill(layer, self.plan.microbatches),
                                     [gate], category="io", stage=s))
        return deps

    def _hand_over_task(self, layer, s: int, following: int, backward: bool) -> tuple:
        """(name after the microbatch's tag, resource, time, NPU, whether it blocks compute) of
        every microbatch's hand-over from ``layer`` to ``following`` (:meth:`_add_hand_over`)."""
        dst, nbytes = self._hand_over(layer, following, backward)
        return (f"send to s{dst}", stage_resource(s, "pp"), self.comm.pp(s, dst, nbytes),
                self.plan.representative(s), not self.plan.platform.pp_overlap)

    def _add_hand_over(self, layer, s: int, following: int, i: int, prev: int, backward: bool) -> int:
        """Microbatch ``i`` crosses to ``following``'s stage as soon as it is done (added in
        program order, so that the serialised mode blocks the sender's next microbatch rather
        than its next layer)."""
        suffix, resource, d, rep, block = self._hand_over_task(layer, s, following, backward)
        name = f"{'B' if backward else 'F'}{i} {suffix}"
        if type(self.eng).add is StageEngine.add:   # what add() would do, without its checks
            return self.eng.add_transfer(s, name, resource, d, prev, "pp", rep, block)
        return self.eng.add(name, resource, d, [prev], category="pp", npu=rep, block=block)


def weight_streaming_graph(eng: StageEngine, plan, compute, comm) -> None:
    """Add a weight-streaming iteration of ``plan`` to ``eng``: the forward pass over the
    layers in order, then the backward in reverse (see the module docstring)."""
    passes = _StreamingPasses(eng, plan, compute, comm)
    n = len(plan.workload.layers)
    passes.add_pass(range(n), backward=False)
    passes.add_pass(reversed(range(n)), backward=True)


#: The task-graph builder of each execution mode (``Workload.mode``).
TASK_GRAPHS = {"weight-stationary": weight_stationary_graph, "weight-streaming": weight_streaming_graph}
