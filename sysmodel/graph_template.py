"""An iteration's task graph kept for re-timing at another compute speed (docs/sysmodel.md, Speed).

The evaluation simulates the same iteration at many NPU compute speeds (the sensitivity curves,
the diagnostic's bisections, the calibration): the platforms differ only in peak FLOPS and HBM
bandwidth (:meth:`sysmodel.platform.Platform.with_compute_scale`). Nothing of the task graph
but its compute durations depends on those -- the plan (stages, microbatches, memory), every
communication task and its link loads, the dependencies added by the builders and by the
serialised mode -- so the graph built once is kept as a :class:`GraphTemplate` and, for another
compute speed, copied with its compute tasks re-timed by the new compute timer (each compute
task records its ``source``: the layer and pass, or the optimizer step). The copy is the graph
the builders would add, task for task, so the iteration is the same, not an approximation.

:func:`structure_key` names what the graph depends on: the platform but its compute speed (its
``network_spec`` and ``training_spec`` sections, :mod:`sysmodel.platform`), the fabric, the
workload (by identity), the strategy, schedule, minibatch, microbatches and the overlap policy.
Templates are kept in the model's cache (:mod:`sysmodel.model_cache`, ``graph_templates``;
under :func:`network_free_key`, ``network_free_templates``).

**On another network.** The network (``network_spec``: link rates and latencies, efficiencies,
switch timing, topology) enters the graph only through its communication tasks' times and link
loads, and through the builders' choices that read them: whether a time is above, at or below
zero (``d > 0``: an MP task is added or not). A template that knows which communication task
(:class:`~sysmodel.comm_timing.CommTimer` memo key) timed each of its tasks is therefore also
kept under :func:`network_free_key`; for another network, :meth:`GraphTemplate.on_network` asks
that network's timer for the same tasks (:meth:`~sysmodel.comm_timing.CommTimer.replay`) and,
when every one of them keeps its sign and whether it loads a link (so the builders would take
the same branches and number the same transfers), copies the graph with those times and link
loads: the graph a fresh build adds on that network, task for task. Otherwise it returns None
and the caller builds the graph (the template is stale for that network). A task whose time
cannot be traced to a memo key (no link loaded, a time other than zero, no compute source)
makes the template unusable on other networks.
"""

from __future__ import annotations

import numpy as np

from sysmodel.compute_timing import timer_key
from sysmodel.engine import Engine
from sysmodel.model_cache import Ref, current
from sysmodel.workloads import layer_shape

__all__ = ["GraphTemplate", "structure_key", "network_free_key", "lookup", "store", "clear"]

#: the marker that starts a :func:`network_free_key`
ANY_NETWORK = "any network"

#: compute timers whose times a template keeps (a sensitivity curve's speeds; emptied when full)
TIMERS_KEPT = 64


def structure_key(platform, fabric: str, workload, strategy, schedule: str, samples_per_dp,
                  microbatches, overlap: bool) -> tuple:
    """What an iteration's task graph depends on, besides compute speed (module docstring)."""
    return (platform.network_spec, platform.training_spec, fabric, Ref(workload),
            str(strategy) if strategy else None, schedule, samples_per_dp, microbatches, overlap)


def network_free_key(platform, fabric: str, workload, strategy, schedule: str, samples_per_dp,
                     microbatches, overlap: bool) -> tuple:
    """What an iteration's task graph depends on besides compute speed and the network's
    figures (module docstring, "On another network"): :func:`structure_key` without
    ``network_spec``, marked apart from it."""
    return (ANY_NETWORK, *structure_key(platform, fabric, workload, strategy, schedule,
                                          samples_per_dp, microbatches, overlap)[1:])


def _kind(t) -> tuple:
    """What the builders and the engine read of a communication time besides its figures: its
    sign, whether it has link loads, and whether it loads a link (:meth:`Engine.entry`)."""
    loads = t.loads
    has = loads is not None and t.bw is not None
    return (t.time_s > 0) - (t.time_s < 0), loads is None, has and bool(np.any(loads > 0))


class GraphTemplate:
    """A built graph (its engine, read and copied, never run again), each task's compute source
    numbered, the one-time configuration load of its communication and, when given, the
    (memoising) communication timer that timed its communication tasks (``comm``)."""

    def __init__(self, eng: Engine, config_load_s: float, comm=None, plan=None):
        eng.seal()     # kept as long as the cache: no further tasks, columns the collector skips
        self.engine = eng
        self.config_load_s = config_load_s
        self.comm = comm if comm is not None and comm.memoised else None
        # The plan's shape the graph was built for: the plan is made from the whole platform,
        # so a copy on another network checks it is still the same plan (on_network).
        self.plan_shape = None if plan is None else plan_shape(plan)
        self._code = None   # per task, its source's number (-1: none); made when first re-timed
        self._trace = None  # see _comm_trace; made when first used on another network
        self._values: dict = {}   # timer_key -> the distinct sources' times (see _durations)
        self._usable = None       # usable(engine), asked when first looked up (reusable)

    def _sources(self) -> tuple[np.ndarray, list]:
        """(per task its source's number or -1, the distinct sources): a graph is re-timed for
        each distinct source once, however many tasks it times. Layers of one shape (equal
        but for their names, :func:`~sysmodel.workloads.layer_shape`: a transformer's blocks)
        are one source, timed by the first of them: no compute timer reads a layer's name, so
        each of them would be given the same time (``compute_timing``: the roofline and the
        shape timer read only the layer's other fields)."""
        if self._code is None:
            number: dict = {}
            distinct: list = []   # kept: their ids key ``number``
            shapes: dict = {}     # id(layer) -> its shape, kept while ``number`` is made
            code = []
            for src in self.engine.sources:
                if src is None:
                    code.append(-1)
                    continue
                if src[0] == "layer":
                    shape = shapes.get(id(src[1]))
                    if shape is None:
                        shape = shapes[id(src[1])] = layer_shape(src[1])
                    key = ("layer", id(shape), src[2], src[3])
                else:
                    key = (src[0], id(src[1]), src[2] if len(src) > 2 else None)
                c = number.get(key)
                if c is None:
                    c = number[key] = len(distinct)
                    distinct.append(src)
                code.append(c)
            self._code = (np.array(code, dtype=np.int64), distinct)
        return self._code

    @staticmethod
    def usable(eng: Engine) -> bool:
        """Whether every compute task records its source (else it cannot be re-timed)."""
        sources = eng.sources
        # ``None in`` runs in C (a source is a tuple, which equals None only by being it)
        return len(sources) == len(eng) and not any(
            None in map(sources.__getitem__, q) for r, q in eng.queues.items() if r.endswith(".compute"))

    def reusable(self) -> bool:
        """:meth:`usable` of this template's graph, asked once, when it is first looked up: an
        iteration whose graph is never asked for again (a design search's many strategies, each
        evaluated once) does not pay for the check (about 3 % of a Transformer-17B evaluation)."""
        if self._usable is None:
            self._usable = self.usable(self.engine)
        return self._usable

    def _durations(self, compute) -> np.ndarray:
        """Every task's duration, compute tasks timed by ``compute`` (a compute timer). The
        distinct sources' times are kept per :func:`~sysmodel.compute_timing.timer_key` (at most
        :data:`TIMERS_KEPT`): copies onto other networks at one compute speed time them once."""
        base = self.engine.arrays().duration
        code, distinct = self._sources()
        if not distinct:
            return base.copy()
        key = timer_key(compute)
        values = self._values.get(key)
        if values is None:
            if len(self._values) >= TIMERS_KEPT:
                self._values.clear()
            values = self._values[key] = np.array([
                float(compute.layer_s(src[1], backward=src[2], recompute=src[3]) if src[0] == "layer"
                      else compute.optimizer_step_s(src[1])) for src in distinct])
        return np.where(code >= 0, values[np.maximum(code, 0)], base)

    def instantiate(self, compute) -> Engine:
        """A fresh engine with this graph, compute tasks timed by ``compute`` (a compute timer)."""
        return self.engine.retimed(self._durations(compute))

    def _comm_trace(self):
        """(per task the number of the memo key that timed it, or -1; the memo keys; per
        transfer entry its key's number; each key's :func:`_kind`), or None where some task's
        time cannot be traced (module docstring)."""
        if self._trace is None:
            self._trace = self._traced() or False
        return self._trace or None

    def _traced(self):
        if self.comm is None:
            return None
        timed = self.comm.timed()
        keys = list(timed)
        of_loads = {}
        for j, key in enumerate(keys):
            if timed[key].loads is not None:
                of_loads.setdefault(id(timed[key].loads), j)
        entry_key = []
        for loads, bw in self.engine.entries:
            j = of_loads.get(id(loads))
            if j is None or timed[keys[j]].bw is not bw:
                return None   # a transfer whose loads no timed task gave (e.g. scaled by a builder)
            entry_key.append(j)
        arrays = self.engine.arrays()
        entry, duration = arrays.entry, arrays.duration
        code, _ = self._sources()
        if np.any((code >= 0) & (entry >= 0)) or np.any((code < 0) & (entry < 0) & (duration != 0)):
            return None       # a time neither a compute source, a transfer nor zero gives
        task_key = np.where(entry >= 0, np.array(entry_key + [-1], dtype=np.int64)[entry], -1)
        key_time = np.array([timed[key].time_s for key in keys] + [0.0])
        if np.any(duration != np.where(task_key >= 0, key_time[task_key], duration)):
            return None       # a transfer's time is not its key's (changed by a builder)
        return task_key, keys, entry_key, [_kind(timed[key]) for key in keys]

    def on_network(self, compute, comm, link_args: dict, plan) -> Engine | None:
        """A fresh engine with this graph on ``comm``'s network (``comm``: a new memoising
        :class:`~sysmodel.comm_timing.CommTimer` of ``plan``; it times every communication
        task again), compute tasks timed by ``compute``, that network's per-link engine
        arguments ``link_args`` (:func:`sysmodel.training.link_priority`: ``preempt_s``, a
        number or one cost per link, and ``shared_phase``; :class:`~sysmodel.engine.Engine`);
        None where the graph on that network is not this one (module docstring), or where
        ``plan`` is not the plan the graph was built for (its stages, microbatches, memory)."""
        if self.plan_shape is None or plan_shape(plan) != self.plan_shape:
            return None
        trace = self._comm_trace()
        if trace is None:
            return None
        task_key, keys, entry_key, kinds = trace
        new = self.comm.replay(comm)
        if [_kind(new[key]) for key in keys] != kinds:
            return None
        entries = [(new[keys[j]].loads, new[keys[j]].bw) for j in entry_key]
        if len({(id(loads), id(bw)) for loads, bw in entries}) != len(entries):
            return None       # two transfers merged into one entry: not the entries a build numbers
        times = np.array([new[key].time_s for key in keys] + [0.0])
        duration = np.where(task_key >= 0, times[task_key], self._durations(compute))
        return self.engine.relinked(duration, entries, link_args.get("preempt_s", 0.0),
                                    link_args.get("shared_phase"), link_args.get("hold"))


def plan_shape(plan) -> tuple:
    """What of an :class:`~sysmodel.iteration_plan.IterationPlan` shapes its task graph beyond
    the keys: the stages and virtual stages (layer indices), microbatches, chunks and the memory
    plan (recomputation and offload choose tasks)."""
    memory = plan.memory
    return (plan.microbatches, plan.chunks, tuple(map(tuple, plan.stages)),
            tuple(map(tuple, plan.virtual_stages)),
            tuple(sorted(memory.__dict__.items())))


def _memo(key):
    """Where templates under ``key`` are kept: those for other networks apart (a sweep over
    networks fills ``graph_templates`` with one per network, which must not evict them)."""
    cache = current()
    return cache.network_free_templates if key[0] == ANY_NETWORK else cache.graph_templates


def lookup(key) -> GraphTemplate | None:
    """The template stored under ``key`` (a :func:`structure_key` or :func:`network_free_key`),
    else None; None too where its graph cannot be re-timed (:meth:`GraphTemplate.reusable`:
    a compute task without its source): the caller builds the graph, as if none were kept."""
    template = _memo(key).get(key)
    return template if template is not None and template.reusable() else None


def store(key, template: GraphTemplate) -> None:
    _memo(key).put(key, template)


def clear() -> None:
    """Forget every template (both memos): the next iterations build their graphs."""
    cache = current()
    cache.graph_templates.clear()
    cache.network_free_templates.clear()
