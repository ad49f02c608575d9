"""Communication task times of one training iteration on one fabric.

:class:`CommTimer` turns each communication task of the iteration's task graph (an MP
all-reduce after a layer, a PP hand-over, a DP gradient bucket, a weight stream, an
activation-checkpoint spill) into the collectives it consists of -- with every group of that
dimension within the stage active at once, as under the symmetric placement -- and times them
with :func:`sysmodel.collectives.evaluate` (a memoising timer with
:func:`~sysmodel.collectives.collective_timing`: the same time and link data, without the rest of
the result). The result, :class:`CommTime`, carries the
bytes per directed link too, so the engine can share links between overlapping tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.contracts.placement import Strategy
from sysmodel.collectives import Collective, build_network, collective_timing, configuration_load_s, evaluate
from sysmodel.model_cache import current
from sysmodel.platform import Platform
from sysmodel.switch_phases import collective_links
from sysmodel.workloads import BYTES, Layer, checked_recompute_mode

__all__ = ["CommTime", "CommTimer"]


@dataclass(frozen=True)
class CommTime:
    """A communication task's time alone (``time_s``) and its link loads (``loads``: bytes per
    directed link; ``bw``: the links' bandwidths, bytes/s) for link sharing in the engine;
    ``k * c`` is k back-to-back repetitions."""

    time_s: float
    loads: object = None
    bw: object = None

    def times(self, k: float) -> "CommTime":
        return CommTime(self.time_s * k, None if self.loads is None else self.loads * k, self.bw)

    __mul__ = times

    def __gt__(self, other) -> bool:
        return self.time_s > other


class CommTimer:
    """Times of an iteration's communication tasks on ``fabric``.

    Members: ``platform``, ``fabric``, ``strategy``, ``microbatch_samples`` (samples per
    microbatch), ``mp_groups[stage]`` / ``dp_groups[stage]`` (the rank tuples of every MP / DP
    group of a pipeline stage), ``configurations`` (every switch configuration the tasks timed
    so far need stored; see :meth:`config_load_s`)."""

    def __init__(self, platform: Platform, fabric: str, strategy: Strategy, microbatch_samples: float,
                 *, sequence_parallel: bool = False, memo: bool = True):
        self.platform = platform
        self.sequence_parallel = sequence_parallel
        self.fabric = fabric
        self.strategy = strategy
        self.microbatch_samples = microbatch_samples
        s = strategy
        # tuples: a stage's groups are part of each_group's cache key
        self.mp_groups = {p: tuple(tuple(s.rank(mp=k, dp=dp, pp=p) for k in range(s.mp)) for dp in range(s.dp))
                          for p in range(s.pp)}
        self.dp_groups = {p: tuple(tuple(s.rank(mp=mp, dp=dp, pp=p) for dp in range(s.dp)) for mp in range(s.mp))
                          for p in range(s.pp)}
        self.configurations: frozenset = frozenset()
        # An iteration asks for the same communication thousands of times (every layer of
        # every microbatch); each distinct task is built and timed once. The memo is exact:
        # a task's time depends only on its key, and the configurations it stores were added
        # when it was first timed. ``memo=False`` (the reference path) recomputes every time.
        self._memo: dict | None = {} if memo else None
        # per memo key, the call that timed it (method name, arguments): replayed on another
        # network's timer by a graph template (sysmodel.graph_template, comm_retimed)
        self._calls: dict = {}

    @property
    def memoised(self) -> bool:
        """Whether each distinct task is timed once (else every time it is asked for)."""
        return self._memo is not None

    def _memoised(self, key, compute, call: tuple) -> "CommTime":
        """The time of the task ``key`` (``compute()`` the first time); ``call``: the public
        method and arguments that ask for it, kept for :meth:`replay`."""
        if self._memo is None:
            return compute()
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = compute()
            self._calls[key] = call
        return hit

    def timed(self) -> dict:
        """Every distinct task timed so far: memo key -> :class:`CommTime` (memoising timers)."""
        return dict(self._memo or {})

    def replay(self, other: "CommTimer") -> dict:
        """Ask ``other`` (a memoising timer of the same strategy and microbatch on another
        network) for every task this timer timed, in the same order; returns memo key -> its
        :class:`CommTime` on ``other`` (whose ``configurations`` then hold theirs)."""
        for name, args in self._calls.values():
            getattr(other, name)(*args)
        return {key: other._memo[key] for key in self._calls}

    def config_load_s(self) -> float:
        """One-time load of every switch configuration the timed tasks use (each stored
        configuration once; :func:`sysmodel.collectives.configuration_load_s`)."""
        if not self.configurations:   # endpoint algorithms and the mesh store none
            return 0.0
        return configuration_load_s(build_network(self.platform, self.fabric), self.configurations)

    def concurrent(self, collectives) -> CommTime:
        """``collectives`` running at once (none: zero time); its link data holds the switches
        where it stores a phase on a FRED fabric (:func:`sysmodel.switch_phases.collective_links`)."""
        if not collectives:
            return CommTime(0.0)
        if self._memo is None:   # the reference path: every task timed anew
            r = evaluate(self.platform, self.fabric, collectives)
            self.configurations |= r.configurations
            return CommTime(r.time_s, *collective_links(self.platform, self.fabric, r))
        # A memoising timer shares the result across timers (iterations) of one network: it is
        # a function of the network (evaluate and the switch links read the platform's
        # network_spec alone) and the collectives. Within a timer two memo keys ask for the same
        # collectives only where the task keeps their time alone (a scatter-gather hand-over's
        # all-gather) or scales it (an MP task: new arrays): the MP, PP, DP, I/O and spill keys
        # differ in op, groups or size. So every task gets link arrays shared with exactly the
        # tasks it shared them with before (the engine numbers transfers by these arrays).
        hit = self._shared(tuple(collectives))
        self.configurations |= hit[1]
        return hit[0]

    def _shared(self, collectives: tuple) -> tuple:
        """(the time of ``collectives`` at once with its link data, the configurations they
        store), shared by every memoising timer of this network (model cache ``comm_times``)."""
        key = (self.platform.network_spec, self.fabric, collectives)
        memo = current().comm_times
        hit = memo.get(key)
        if hit is None:
            r = collective_timing(self.platform, self.fabric, collectives)
            hit = memo.put(key, (CommTime(r.time_s, *collective_links(self.platform, self.fabric, r)),
                                 r.configurations))
        return hit

    def each_group(self, op: str, groups: tuple, size: float, roots: tuple | None = None) -> CommTime:
        """``op`` of ``size`` bytes on every group of ``groups`` (a tuple of rank tuples) at once:
        :meth:`concurrent` of ``[Collective(op, g, size) for g in groups]`` (with ``roots``, group
        i's root ``roots[i]``), found by ``(op, groups, size, roots)`` (model cache
        ``group_comm_times``) without making the collectives
        and hashing them again: a new timer per iteration asks for the same ones (a
        Transformer-17B iteration for thirty). Exact: equal ``(op, groups, size)`` make equal
        collectives, and the entry is the very pair :meth:`concurrent` shares (``comm_times``).
        The reference path and subclasses that override :meth:`concurrent` make them as asked."""
        if not groups or not self._shares_across_timers():
            return self.concurrent(self._each(op, groups, size, roots))
        hit = self._group_shared(op, groups, size, roots)
        self.configurations |= hit[1]
        return hit[0]

    def _shares_across_timers(self) -> bool:
        """Whether this timer takes its tasks from the model cache's shared entries: a memoising
        timer whose :meth:`concurrent` is this class's (the reference path and subclasses that
        override it make every collective as asked)."""
        return self._memo is not None and type(self).concurrent is CommTimer.concurrent

    def _group_shared(self, op: str, groups: tuple, size: float, roots: tuple | None) -> tuple:
        """The :meth:`_shared` pair of :meth:`each_group`'s collectives, found by
        ``(op, groups, size, roots)`` (model cache ``group_comm_times``)."""
        key = (self.platform.network_spec, self.fabric, op, groups, size, roots)
        cache = current()
        hit = cache.group_comm_times.get(key)
        if hit is None:
            # the collectives are values of (op, groups, size, roots) alone: made (and checked)
            # once, not again for every network they are timed on (a design-space grid's)
            made = cache.group_collectives.get(key[2:])
            if made is None:
                made = cache.group_collectives.put(key[2:], tuple(self._each(op, groups, size, roots)))
            hit = cache.group_comm_times.put(key, self._shared(made))
        return hit

    @staticmethod
    def _each(op: str, groups: tuple, size: float, roots: tuple | None) -> list:
        """The collectives :meth:`each_group` stands for."""
        if roots is None:
            return [Collective(op, g, size) for g in groups]
        return [Collective(op, g, size, root=r) for g, r in zip(groups, roots, strict=True)]

    def mp_backward_factor(self, recompute: str) -> float:
        """Megatron MP collectives of a backward pass relative to the forward's, on a stage
        that runs recomputation ``recompute`` (one of :data:`~sysmodel.workloads.RECOMPUTE_MODES`):
        the backward's own, plus the recomputed forward's (full recomputation), plus under
        sequence parallelism the forward's all-gathers redone in the backward (half an
        all-reduce's bytes each)."""
        full = checked_recompute_mode(recompute) == "full"
        return 1.0 + (1.0 if full else 0.0) + (0.5 if self.sequence_parallel and not full else 0.0)

    def mp(self, layer: Layer, stage: int, backward: bool = False, recompute: str = "none") -> CommTime:
        """Megatron MP after ``layer``'s compute: its ``mp_allreduces`` all-reduces of the
        microbatch's activation, back to back, on every MP group of ``stage`` (in a backward
        pass x :meth:`mp_backward_factor` of ``recompute``, the stage's recomputation: the
        memory plan's ``stage_recompute[stage]``; a forward ignores it)."""
        if self.strategy.mp == 1 or not layer.mp_shardable or layer.out_bytes == 0 and layer.in_bytes == 0:
            return CommTime(0.0)
        size = self.microbatch_samples * (layer.out_bytes or layer.in_bytes)
        repeat = layer.mp_allreduces * (self.mp_backward_factor(recompute) if backward else 1.0)

        def compute():
            one = self.each_group("all-reduce", self.mp_groups[stage], size)
            return one.times(repeat)
        return self._memoised(("mp", stage, size, repeat), compute, ("mp", (layer, stage, backward, recompute)))

    def pp(self, src: int, dst: int, nbytes: float) -> CommTime:
        """Stage ``src`` -> stage ``dst`` hand-over of ``nbytes`` for every DP replica: a
        multicast from MP rank 0 of ``src`` to the MP group of ``dst``; with
        ``platform.pp_scatter_gather`` (and MP > 1) each MP rank sends 1/MP to its peer, then
        ``dst``'s MP groups all-gather (Megatron-LM), back to back."""
        return self._memoised(("pp", src, dst, nbytes), lambda: self._pp(src, dst, nbytes),
                              ("pp", (src, dst, nbytes)))

    def _pp(self, src: int, dst: int, nbytes: float) -> CommTime:
        if not self._shares_across_timers():
            return self._pp_timed(src, dst, nbytes)
        # Shared by every memoising timer (model cache ``pp_comm_times``): the hand-over is a
        # function of the network (network_spec, fabric), pp_scatter_gather, the strategy (its
        # ranks and MP groups) and (src, dst, nbytes) -- all _pp_timed reads -- so a new graph
        # does not build the scatter's pairs and Collective again only to find its timing.
        key = (self.platform.network_spec, self.fabric, self.platform.pp_scatter_gather, self.strategy,
               src, dst, nbytes)
        memo = current().pp_comm_times
        hit = memo.get(key)
        if hit is None:
            hit = memo.put(key, self._pp_shared(src, dst, nbytes))
        self.configurations |= hit[1]
        return hit[0]

    def _pp_timed(self, src: int, dst: int, nbytes: float) -> CommTime:
        """The hand-over timed through :meth:`concurrent` and :meth:`each_group` (the reference
        path, and timers whose :meth:`concurrent` differs)."""
        s = self.strategy
        if self.platform.pp_scatter_gather and s.mp > 1:
            send = self.concurrent([self._pp_scatter(src, dst, nbytes)])
            gather = self.each_group("all-gather", self.mp_groups[dst], nbytes)
            return CommTime(send.time_s + gather.time_s)
        return self.each_group("multicast", self.mp_groups[dst], nbytes, roots=self._pp_roots(src))

    def _pp_shared(self, src: int, dst: int, nbytes: float) -> tuple:
        """(the hand-over's time, the configurations it stores) from the shared entries of its
        collectives (:meth:`_shared`, :meth:`_group_shared`): what :meth:`_pp_timed` returns and
        adds to ``configurations``."""
        s = self.strategy
        if self.platform.pp_scatter_gather and s.mp > 1:
            send = self._shared((self._pp_scatter(src, dst, nbytes),))
            gather = self._group_shared("all-gather", self.mp_groups[dst], nbytes, None)
            return CommTime(send[0].time_s + gather[0].time_s), send[1] | gather[1]
        return self._group_shared("multicast", self.mp_groups[dst], nbytes, self._pp_roots(src))

    def _pp_scatter(self, src: int, dst: int, nbytes: float) -> Collective:
        """A scatter-gather hand-over's send: each MP rank of ``src`` sends 1/MP to its peer
        in ``dst``, for every DP replica at once."""
        s = self.strategy
        pairs = tuple((s.rank(mp=k, dp=dp, pp=src), s.rank(mp=k, dp=dp, pp=dst))
                      for dp in range(s.dp) for k in range(s.mp))
        return Collective("point-to-point", size=nbytes / s.mp, pairs=pairs)

    def _pp_roots(self, src: int) -> tuple:
        """Per DP replica, MP rank 0 of ``src``: the root of its multicast to the destination's
        MP group (mp_groups[p][dp] lists the ranks of (mp = 0, 1, ..., dp, p): its first)."""
        return tuple(g[0] for g in self.mp_groups[src])

    def dp(self, elements: float, stage: int) -> CommTime:
        """One gradient bucket of ``elements`` (FP16) all-reduced over every DP group of
        ``stage`` (ZeRO-2's reduce-scatter + all-gather move the same bytes)."""
        if self.strategy.dp == 1 or elements == 0:
            return CommTime(0.0)
        return self._memoised(("dp", stage, elements), lambda: self.each_group(
            "all-reduce", self.dp_groups[stage], BYTES * elements),
            ("dp", (elements, stage)))

    def io(self, layer: Layer, stage: int, op: str) -> CommTime:
        """``op`` (``io-load``: weights in; ``io-store``: gradients out, reduced) of ``layer``'s
        MP shard between the I/O controllers and every DP group of ``stage``."""
        if layer.params == 0:
            return CommTime(0.0)
        size = BYTES * layer.params / layer.shards(self.strategy.mp)
        return self._memoised(("io", stage, op, size), lambda: self.each_group(
            op, self.dp_groups[stage], size), ("io", (layer, stage, op)))

    def spill(self, layer: Layer, op: str) -> CommTime:
        """``op`` (``io-write`` / ``io-read``) of one microbatch's activation checkpoint of
        ``layer`` by every NPU the strategy uses to / from external memory."""
        size = self.microbatch_samples * layer.in_bytes
        return self._memoised(("spill", op, size), lambda: self.concurrent(
            [Collective(op, tuple(range(self.strategy.npus)), size)]), ("spill", (layer, op)))

    def unspill(self, layer: Layer, microbatches: int) -> CommTime:
        """Every microbatch's activation checkpoint of ``layer`` read back from external memory:
        the ``io-read`` :meth:`spill`, ``microbatches`` times back to back (one task, timed
        once, so a graph template can trace it; :mod:`sysmodel.graph_template`)."""
        size = self.microbatch_samples * layer.in_bytes
        return self._memoised(("unspill", size, microbatches),
                              lambda: self.spill(layer, "io-read") * microbatches,
                              ("unspill", (layer, microbatches)))
