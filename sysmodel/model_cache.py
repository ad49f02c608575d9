"""The model's one cache owner (docs/sysmodel.md, "Speed").

Every memo the system model keeps across calls lives in a :class:`ModelCache`: one named
:class:`Memo` per kind of result, each with its bound and what its key is. There is one key
rule: **a key is a hashable value** that compares equal exactly when the computation it names
would give the same result. The platform is such a value
(:class:`sysmodel.platform.Platform` is a frozen dataclass), and so are its sections
(``platform.network_spec``, ``platform.npu_compute``, ``platform.training_spec``): a cache
keys on the section its result depends on, so e.g. two platforms that differ only in compute
speed share networks and collective results; a workload's layers are values too. An object
that is not a value (a workload: its type holds a dict) enters a key as :class:`Ref`, which
hashes by identity and holds the object, so its id cannot be reused by another object while
the entry exists.

The model uses the process-wide instance (:func:`current`); a caller or a test that wants
isolation runs under ``with using(ModelCache()):``. Every cache is emptied by
:meth:`ModelCache.clear`. A bounded memo that reaches its bound is emptied (a run's working set
is far below every bound; emptying is cheaper than LRU bookkeeping on every hit) -- but the
memos of few, large entries whose bound is below a run's working set
(:data:`ModelCache.KEEP_RECENT`), which drop their oldest entry instead (first in, first out:
still no bookkeeping on a hit).

Not here, on purpose: memos local to one object whose lifetime bounds them and whose key is
that object's own argument -- a network's hop paths (``Network.path``), a compute model's GEMM
times (``ComputeModel._cache``), a compute timer's per-layer times, a communication timer's
tasks (one iteration's), an engine run's max-min rates -- and the code fingerprint
of the point cache (``studies.points.model_fingerprint``: the code loaded in this process, not
a model input, so clearing the model's caches must not recompute it from files that may have
changed on disk).
"""

from __future__ import annotations

from contextlib import contextmanager

__all__ = ["ModelCache", "Memo", "Ref", "FrozenDict", "hash_once", "current", "using"]

_MISSING = object()


class Memo(dict):
    """One named cache: a dict (``get`` and ``in`` as fast as a dict's) with a bound.

    ``name``: what it holds; ``bound``: entries kept before it is emptied (None: unbounded,
    the docs of :data:`ModelCache.CACHES` say why that is safe); ``keep_recent``: when full,
    drop only the oldest entry instead (a memo of few, large entries whose hits come a few
    dozen entries after their first use: :data:`ModelCache.KEEP_RECENT`)."""

    __slots__ = ("name", "bound", "keep_recent")

    def __init__(self, name: str, bound: int | None, keep_recent: bool = False):
        super().__init__()
        self.name, self.bound, self.keep_recent = name, bound, keep_recent

    def put(self, key, value):
        """Store ``value`` under ``key`` (emptying the memo first when it is full, or dropping its
        oldest entry with ``keep_recent``); returns it."""
        if self.bound is not None and len(self) >= self.bound and key not in self:
            if self.keep_recent:
                del self[next(iter(self))]
            else:
                self.clear()
        self[key] = value
        return value

    def get_or_make(self, key, make):
        """The value under ``key``, else ``make()`` stored under it."""
        hit = self.get(key, _MISSING)
        return self.put(key, make()) if hit is _MISSING else hit

    def __reduce__(self):   # a memo is process state: it never travels to a worker process
        raise TypeError(f"the model's {self.name} cache is not picklable")


class ModelCache:
    """All the model's caches (module docstring); :data:`CACHES` names each one, its bound and
    its key. Attributes of the same names are the :class:`Memo` objects."""

    #: name -> (bound, key -> value). Unbounded ones grow with the inputs of a run, not with its
    #: length: one entry per distinct platform network, preset, design or (stage, kind).
    CACHES = {
        "networks": (None, "(platform.network_spec, fabric) -> Network"),
        "collectives": (100_000, "(platform.network_spec, fabric, collectives, algorithm) -> CollectiveResult"),
        "comm_times": (100_000, "(platform.network_spec, fabric, collectives) -> a memoising "
                                "CommTimer's time of the collectives run at once, with their link "
                                "data, and the configurations they store (sysmodel.comm_timing)"),
        "group_comm_times": (100_000, "(platform.network_spec, fabric, op, groups, size, roots) -> the "
                                      "comm_times entry of [Collective(op, g, size, root) for g in groups] (CommTimer.each_group: "
                                      "the collectives not made again per timer)"),
        "group_collectives": (100_000, "(op, groups, size, roots) -> the tuple of Collective(op, g, size, root) "
                                       "for g in groups (CommTimer.each_group: made once for every network "
                                       "they are timed on)"),
        "pp_comm_times": (100_000, "(platform.network_spec, fabric, platform.pp_scatter_gather, strategy, "
                                   "source stage, destination stage, bytes) -> a memoising CommTimer's "
                                   "pipeline hand-over time and the configurations it stores "
                                   "(CommTimer.pp: its collectives not made again per timer)"),
        "transfer_entry_arrays": (64, "(entries, the bytes of their loads and of their bandwidths, preemption "
                                      "costs, shared phases, every task's entry: each as its bits) -> an "
                                      "engine graph's transfer entry arrays, read-only (sysmodel.engine."
                                      "_kept_stacked_entry_arrays: stackable entries only, at most "
                                      "STACKED_ENTRY_CELLS values each, so the bound keeps it to a few MB)"),
        "engine_runs": (64, "(Ref(a sealed graph), the bits of a relinked copy's durations, entries' loads "
                            "and bandwidths, preemption costs and shared phases: sysmodel.engine._run_key) "
                            "-> the compiled loop's (start, end) times and makespan (Engine.run; a Transformer-1T "
                            "design-space graph's entry is about 0.4 MB, so the bound keeps it to tens of MB)"),
        "routing_phases": (65_536, "(ports, middle, flows) -> phases the compiler routes them in"),
        "network_routes": (256, "(network spec with link and in-switch efficiency 1, fabric) -> the "
                                "routes, route latencies and switch ports its networks share "
                                "(sysmodel.collectives.build_network)"),
        "switch_phases": (65_536, "(network spec with link and in-switch efficiency 1, fabric, up paths, "
                                  "down paths, top) -> an in-switch collective's phases, selects and "
                                  "configurations (sysmodel.collectives._switch_phases)"),
        "in_switch_plans": (100_000, "(network spec with every link rate 0, fabric, op, group, root) -> an "
                                     "in-switch collective's senders, link sets, latency, phases, selects, "
                                     "configurations and uplink users: everything but its bytes "
                                     "(sysmodel.collectives._in_switch_plan)"),
        "in_switch_shapes": (100_000, "(the network's topology (sysmodel.collectives._topology_key), op, "
                                      "group, root, controllers) -> an in-switch collective's paths, senders, "
                                      "link sets, uplink users, rows and switch flows: what its plan reads "
                                      "of the topology alone (sysmodel.collectives._in_switch_shape)"),
        "io_chain_plans": (100_000, "(what the plan reads of the network: topology, link and node latencies, "
                                    "forwarding latency (sysmodel.collectives._io_chain_plan_key), op, group) "
                                    "-> an I/O chain's routes, senders and latency: everything but its bytes "
                                    "(sysmodel.collectives._io_chain_plan)"),
        "io_chain_layouts": (100_000, "an I/O chain plan's heads (a value: per controller its (link, head) "
                                      "pairs and latency) -> (one object of those heads, its layout for "
                                      "sysmodel.collectives._io_chain_time): equal heads of plans with "
                                      "different keys become one object"),
        "io_chain_rows": (100_000, "(the io_chain_plans key, the stripe's bytes, its wire bytes) -> an I/O "
                                   "chain's link loads and bytes sent per NPU, read-only "
                                   "(sysmodel.collectives._fred_io_chain: the plan's rows, the network's links "
                                   "and NPUs by the key, the stripe and its wire bytes)"),
        "io_chain_times": (100_000, "(Ref(the layout from io_chain_layouts: its heads' value), wire bytes of "
                                    "a stripe, a controller's paced flit in s, the bytes of link_bw at the "
                                    "links the chains cross) -> the striped chains' time "
                                    "(sysmodel.collectives._io_chain_time reads nothing else)"),
        "rate_free_traffic": (100_000, "(network spec with every link rate 0, fabric, collectives, algorithm) "
                                       "-> the merged traffic of collectives none of which reads a link rate, "
                                       "and their algorithms (sysmodel.collectives._merged_traffic)"),
        "layer_times": (200_000, "(layer_shape(layer), backward, platform.npu_compute, shards, microbatch "
                                 "samples, recompute mode, sequence parallel, dtype) -> seconds"),
        "layer_shapes": (100_000, "layer -> the equal layer named \"\" (sysmodel.workloads.layer_shape), "
                                  "and that layer -> itself: one object per shape"),
        "workload_shapes": (256, "Ref(workload) -> layer_shape of each of its layers, in order "
                                 "(sysmodel.workloads.layer_shapes)"),
        "pass_skeletons": (4096, "(Ref(workload), a pass's layer numbers in pass order, backward, its "
                                 "recomputation) -> its PassSkeleton: per layer its name, source and shape number, per shape its "
                                 "first layer, the interleaved task names and sources (sysmodel.task_graphs)"),
        "pass_block_shapes": (4096, "(Ref(PassSkeleton), the pass's compute and MP resources, its NPU, the "
                                    "send's name, resource, NPU and whether it blocks compute, or None) -> "
                                    "the pass's LayerBlock without durations and entries: names, categories, "
                                    "NPUs, sources, dependencies, queues (sysmodel.task_graphs."
                                    "StageEngine._pass_block_shape)"),
        "block_codes": (4096, "Ref(a block's category or NPU column: a tuple, immutable) -> its categories "
                              "in name order and each task's number among them, or its NPU codes (False "
                              "where one is not codable); read-only arrays (sysmodel.engine.Engine."
                              "_category_codes / task_kinds: a kept pass block's columns coded once)"),
        "iteration_shapes": (4096, "(platform.memory_capacity_gb, platform.optimizer_bytes_per_param, "
                                   "Ref(workload), strategy, schedule, samples per DP and its type, requested "
                                   "microbatches and their type, whether they are fixed) -> an iteration "
                                   "plan's chunks, stages, virtual stages, microbatches and memory plan, "
                                   "handed out as copies (sysmodel.iteration_plan.plan_iteration)"),
        "graph_templates": (256, "(platform.network_spec, platform.training_spec, fabric, "
                                 "Ref(workload), strategy, schedule, samples per DP, microbatches, "
                                 "overlap) -> GraphTemplate"),
        "network_free_templates": (256, "(\"any network\", platform.training_spec, fabric, Ref(workload), "
                                        "strategy, schedule, samples per DP, microbatches, overlap) -> "
                                        "GraphTemplate copied onto other networks (sysmodel.graph_template)"),
        "derived_workloads": (256, "(Ref(workload), microbatches) -> the workload with that many "
                                   "microbatches (Workload.with_microbatches: one object, so graph "
                                   "templates keyed on it are found again)"),
        "iterations": (4096, "(platform, fabric, Ref(workload), strategy, options) -> IterationResult"),
        "resource_names": (None, "(stage, kind) -> the stage resource's name"),
        "pipeline_orders": (256, "(schedule, PP, microbatches, chunks) -> every stage's passes in the "
                                 "order the task graph adds them (sysmodel.pipeline_schedules)"),
        "workloads": (None, "preset name -> Workload (files given by path are read every time)"),
        "platforms": (64, "(platform file, characterization file, compute scale) -> Platform"),
        "design_platforms": (4096, "(platform, FabricDesign) -> the design's Platform (studies.dse)"),
        "characterizations": (64, "(characterization file as named, its resolved path, mtime in ns, size) "
                                  "-> the validated Characterization (studies.cost; a file changed on "
                                  "disk is read again)"),
    }

    #: the memos that drop their oldest entry when full rather than emptying (:class:`Memo`)
    KEEP_RECENT = frozenset({"engine_runs"})

    networks: Memo
    collectives: Memo
    comm_times: Memo
    group_comm_times: Memo
    group_collectives: Memo
    pp_comm_times: Memo
    transfer_entry_arrays: Memo
    engine_runs: Memo
    routing_phases: Memo
    switch_phases: Memo
    network_routes: Memo
    in_switch_plans: Memo
    in_switch_shapes: Memo
    io_chain_plans: Memo
    io_chain_layouts: Memo
    io_chain_rows: Memo
    io_chain_times: Memo
    rate_free_traffic: Memo
    layer_times: Memo
    layer_shapes: Memo
    workload_shapes: Memo
    pass_skeletons: Memo
    pass_block_shapes: Memo
    block_codes: Memo
    iteration_shapes: Memo
    graph_templates: Memo
    network_free_templates: Memo
    derived_workloads: Memo
    iterations: Memo
    resource_names: Memo
    pipeline_orders: Memo
    workloads: Memo
    platforms: Memo
    design_platforms: Memo
    characterizations: Memo

    def __init__(self):
        for name, (bound, _) in self.CACHES.items():
            setattr(self, name, Memo(name, bound, name in self.KEEP_RECENT))

    def memos(self) -> dict[str, Memo]:
        return {name: getattr(self, name) for name in self.CACHES}

    def sizes(self) -> dict[str, int]:
        """Entries per cache (for tests and speed figures)."""
        return {name: len(memo) for name, memo in self.memos().items()}

    def clear(self) -> None:
        """Empty every cache."""
        for memo in self.memos().values():
            memo.clear()


_PROCESS_CACHE = ModelCache()
_active = _PROCESS_CACHE


def current() -> ModelCache:
    """The cache the model uses now: the process-wide one unless :func:`using` says otherwise."""
    return _active


@contextmanager
def using(cache: ModelCache):
    """Run the model with ``cache`` instead of the current one (restored on exit). Process-wide,
    not per thread: the model is single-threaded (parallel points run in processes)."""
    global _active
    previous, _active = _active, cache
    try:
        yield cache
    finally:
        _active = previous


class Ref:
    """An object that is not a value, in a cache key: equal only to itself, and kept alive by
    the key (so its id is not reused while the entry exists)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, Ref) and other.obj is self.obj

    def __repr__(self):
        return f"Ref({type(self.obj).__name__} at {id(self.obj):#x})"


class FrozenDict(dict):
    """A dict that cannot change, hence hashable (the platform's ``variants`` and ``chiplets``,
    a compute model's ``dtype_speed``). It is a ``dict`` for every reader (equality with plain
    dicts, JSON, its repr); nested dicts given to it become FrozenDicts too."""

    __slots__ = ()

    def __init__(self, items=()):
        super().__init__((k, FrozenDict(v) if isinstance(v, dict) else v)
                         for k, v in dict(items).items())

    def __hash__(self):
        return hash(frozenset(self.items()))

    def _refuse(self, *args, **kwargs):
        raise TypeError("a platform's tables cannot change: build a new platform (Platform.scaled)")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self):
        return FrozenDict, (dict(self),)


def hash_once(cls):
    """Class decorator for a frozen dataclass used in keys: its (dataclass) hash computed once
    per instance, then kept. The kept hash is not pickled: string hashes differ between
    processes, so an unpickled copy computes its own."""
    compute = cls.__hash__

    def __hash__(self):
        state = self.__dict__
        h = state.get("_hash")
        if h is None:
            h = state["_hash"] = compute(self)
        return h

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    cls.__hash__ = __hash__
    cls.__getstate__ = __getstate__
    return cls
