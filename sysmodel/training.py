"""One 3D-parallel training iteration: task graph, memory check, schedule and breakdown.

:func:`simulate_iteration` builds, for one representative NPU per pipeline stage (every MP
rank and DP replica of a stage runs the same schedule, so one NPU per stage is exact under
this symmetric placement), a graph of compute and communication tasks and runs it on
:class:`sysmodel.engine.Engine`:

* **compute** (one resource per NPU): per layer and microbatch, forward and backward, timed
  by a roofline ``max(FLOPs / (peak * efficiency), HBM bytes / HBM bandwidth)``; FLOPs and
  weights of MP-shardable layers are divided by MP. Backward = 2x forward FLOPs (3x with
  activation recomputation, chosen only when the activations would not fit otherwise).
* **MP** (Megatron): after each layer's compute, its all-reduces (2 per transformer layer per
  pass) of the microbatch's activation, on all MP groups of the stage at once; blocking (the
  next layer waits), so MP time is exposed unless it is zero.
* **PP**: the activation (forward) or its gradient (backward) of each microbatch crosses
  each stage boundary as a multicast from MP rank 0 of one stage to the MP group of the
  next, for all DP replicas at once. Schedules: ``1f1b`` (default) or ``gpipe``.
* **DP** (weight-stationary): during the last microbatch's backward, gradients (FP16, /MP)
  fill buckets of ``platform.dp_bucket_elements`` elements in backward order; each bucket is
  all-reduced over its DP group when it is full (and the last, partial one when the
  backward ends), on the DP channel (ZeRO-2's reduce-scatter + all-gather moves the same
  bytes as an all-reduce). With ``platform.dp_overlap`` false (DeepSpeed's ZeRO-2 default)
  the reduction blocks the stage's compute; with true it overlaps the remaining backward.
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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hdl.base.errors import FredError
from sysmodel.collectives import Collective, evaluate
from sysmodel.engine import Engine
from sysmodel.platform import Platform
from hdl.base.placement import Strategy
from sysmodel.workloads import BYTES, Workload

__all__ = ["IterationResult", "simulate_iteration", "memory_plan", "MemoryPlan", "SCHEDULES"]

SCHEDULES = ("1f1b", "gpipe")
CATEGORIES = ("compute", "mp", "pp", "io", "dp", "bubble")


@dataclass
class MemoryPlan:
    """Per-NPU memory of the most loaded stage (bytes) and whether recomputation or
    checkpoint offload is used."""

    stage: int
    weights: float
    gradients: float
    optimizer: float
    activations: float
    recompute: bool
    offload: bool
    capacity: float
    recompute_mode: str = "none"   # none | selective | full

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations

    def to_dict(self) -> dict:
        return {**self.__dict__, "total": self.total}


@dataclass
class IterationResult:
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
    notes: list = field(default_factory=list)
    npus_used: int = 0
    idle_npus: int = 0

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["memory"] = self.memory.to_dict()
        return d


@dataclass(frozen=True)
class CommTime:
    """A communication task's time alone (s) and its link loads (bytes per directed link) for
    link sharing in the engine; ``k * c`` is k back-to-back repetitions."""

    time_s: float
    loads: object = None
    bw: object = None

    def times(self, k: float) -> "CommTime":
        return CommTime(self.time_s * k, None if self.loads is None else self.loads * k, self.bw)

    __mul__ = times

    def __gt__(self, other) -> bool:
        return self.time_s > other


def _stages(workload: Workload, pp: int) -> list[list[int]]:
    """Contiguous layer ranges per stage, balanced by forward FLOPs (each stage >= 1 layer),
    or with ``workload.pipeline_split == "layers"`` Megatron's split: the inner layers evenly
    (the first stages take one more when they do not divide), the first layer (embedding)
    with the first stage and the last (head) with the last."""
    layers = workload.layers
    if pp > len(layers):
        raise FredError(f"PP({pp}) exceeds the {len(layers)} layers of {workload.name}")
    if workload.pipeline_split == "layers" and pp > 1:
        inner = len(layers) - 2
        if inner < pp:
            raise FredError(f"PP({pp}) exceeds the {inner} inner layers of {workload.name}")
        out, start = [], 1
        for k in range(pp):
            size = inner // pp + (1 if k < inner % pp else 0)
            out.append(list(range(start, start + size)))
            start += size
        out[0].insert(0, 0)
        out[-1].append(len(layers) - 1)
        return out
    weights = [max(l.fwd_flops, 1.0) for l in layers]
    total = sum(weights)
    bounds, acc, k = [0], 0.0, 1
    for i, w in enumerate(weights):
        acc += w
        remaining_layers = len(layers) - (i + 1)
        remaining_stages = pp - k
        if k < pp and (acc >= total * k / pp or remaining_layers == remaining_stages):
            bounds.append(i + 1)
            k += 1
    bounds.append(len(layers))
    return [list(range(a, b)) for a, b in zip(bounds, bounds[1:])]


def _shard(layer, mp):
    return mp if layer.mp_shardable else 1


def memory_plan(platform: Platform, workload: Workload, strategy: Strategy, stages, mb: float,
                microbatches: int, schedule: str) -> MemoryPlan:
    """Memory per NPU of the worst stage; raises naming what overflows when nothing fits.

    Recomputation follows ``workload.recompute``: ``auto`` keeps every activation when it
    fits and recomputes fully otherwise (then, in weight streaming, offloads checkpoints);
    ``none`` / ``selective`` / ``full`` are fixed (selective keeps all but the attention core,
    full keeps each layer's input)."""
    cap = platform.memory_capacity_bytes
    policy = workload.recompute
    sp = workload.sequence_parallel
    worst = None
    for s, layer_ids in enumerate(stages):
        layers = [workload.layers[i] for i in layer_ids]
        inflight = microbatches if (schedule == "gpipe" or workload.mode == "weight-streaming") \
            else min(microbatches, strategy.pp - s)
        stored = [l.stored_bytes(strategy.mp, sequence_parallel=sp) for l in layers]
        full = inflight * mb * sum(stored)
        selective = inflight * mb * sum(l.stored_bytes(strategy.mp, sequence_parallel=sp, selective=True)
                                        for l in layers)
        ckpt = inflight * mb * sum(l.in_bytes / (strategy.mp if sp else 1) for l in layers) \
            + mb * max(stored)
        if workload.mode == "weight-stationary":
            p = sum(l.params / _shard(l, strategy.mp) for l in layers)
            weights, grads = BYTES * p, BYTES * p / strategy.dp
            opt = platform.optimizer_bytes_per_param * p / strategy.dp
        else:
            biggest = sorted((l.params / _shard(l, strategy.mp) for l in layers), reverse=True)
            p = sum(biggest[:workload.layers_on_wafer])
            weights, grads, opt = BYTES * p, BYTES * p, 0.0
        base = weights + grads + opt
        mode, offload = {"auto": "none", "none": "none", "selective": "selective",
                         "full": "full"}[policy], False
        acts = {"none": full, "selective": selective, "full": ckpt}[mode]
        if policy == "auto" and base + acts > cap:
            mode, acts = "full", ckpt
        if base + acts > cap:
            one = mb * max(stored)
            if policy in ("auto", "full") and workload.mode == "weight-streaming" and base + one <= cap:
                offload, acts = True, one
            else:
                how = {"none": "without recomputation", "selective": "with selective recomputation",
                       "full": "even with activation recomputation"}[mode]
                raise FredError(
                    f"{workload.name} with {strategy} does not fit in "
                    f"{platform.memory_capacity_gb:g} GB per NPU: stage {s} needs "
                    f"{(base + acts) / 1e9:.1f} GB {how} "
                    f"(weights {weights / 1e9:.1f}, gradients {grads / 1e9:.1f}, optimizer "
                    f"{opt / 1e9:.1f}, activations {acts / 1e9:.1f} GB)")
        plan = MemoryPlan(s, weights, grads, opt, acts, mode == "full", offload, cap, mode)
        if worst is None or plan.total > worst.total:
            worst = plan
        if s == 0 or mode != "none" or offload:
            rank = {"none": 0, "selective": 1, "full": 2}
            if rank[mode] > rank[worst.recompute_mode]:
                worst.recompute_mode = mode
            worst.recompute = worst.recompute or mode == "full"
            worst.offload = worst.offload or offload
    return worst


def _schedule_ops(schedule: str, stage: int, pp: int, m: int, chunks: int = 1) -> list[tuple[str, int, int]]:
    """(kind, microbatch, model chunk) in the order stage ``stage`` runs them.

    ``chunks`` > 1: Megatron's interleaved 1F1B (Narayanan et al. 2021): forward k runs chunk
    (k // pp) % chunks of microbatch (k // (pp*chunks))*pp + k % pp; backward k the chunks in
    reverse; (pp - stage - 1)*2 + (chunks - 1)*pp warm-up forwards, then one forward / one
    backward alternately, then the remaining backwards."""
    if chunks > 1:
        if schedule != "1f1b":
            raise FredError("the interleaved pipeline schedule is a 1F1B schedule; use --schedule 1f1b")
        if m % pp:
            raise FredError(f"the interleaved schedule needs the microbatches ({m}) to be a "
                            f"multiple of PP ({pp})")
        total = m * chunks

        def fwd(k):
            return ("F", (k // (pp * chunks)) * pp + k % pp, (k // pp) % chunks)

        def bwd(k):
            return ("B", (k // (pp * chunks)) * pp + k % pp, chunks - 1 - (k // pp) % chunks)

        warm = min((pp - stage - 1) * 2 + (chunks - 1) * pp, total)
        ops = [fwd(k) for k in range(warm)]
        for k in range(total - warm):
            ops += [fwd(warm + k), bwd(k)]
        ops += [bwd(k) for k in range(total - warm, total)]
        return ops
    if schedule == "gpipe":
        return [("F", i, 0) for i in range(m)] + [("B", i, 0) for i in reversed(range(m))]
    warm = min(pp - stage - 1, m)
    ops = [("F", i, 0) for i in range(warm)]
    for i in range(m - warm):
        ops += [("F", warm + i, 0), ("B", i, 0)]
    ops += [("B", i, 0) for i in range(m - warm, m)]
    return ops


def simulate_iteration(platform: Platform, fabric: str, workload: Workload,
                       strategy: Strategy | None = None, *, schedule: str = "1f1b",
                       samples_per_dp: int | None = None,
                       microbatches: int | None = None, overlap: bool = True) -> IterationResult:
    """Time of one training iteration of ``workload`` on ``fabric`` (see the module docstring).

    ``overlap=False`` is the serialised mode: every communication task blocks the compute unit
    of the stage it belongs to (it starts after that stage's previous compute task and the next
    one waits for it), so nothing overlaps compute: DP all-reduces, PP sends and weight
    streams are all exposed. It brackets the paper's unknown overlap policy (see
    docs/sysmodel.md); the default overlaps as a framework would."""
    strategy = strategy or workload.strategy
    if strategy.npus > platform.npus:
        raise FredError(f"strategy {strategy} uses MP*DP*PP = {strategy.mp}*{strategy.dp}*"
                        f"{strategy.pp} = {strategy.npus} NPUs but the platform has {platform.npus}")
    platform.check_fabric(fabric)
    if schedule not in SCHEDULES:
        raise FredError(f"unknown pipeline schedule {schedule!r}; expected {' or '.join(SCHEDULES)}")
    samples = workload.samples_per_dp if samples_per_dp is None else samples_per_dp
    if not isinstance(samples, int) or samples < 1:
        raise FredError(f"samples per DP replica must be a positive integer, got {samples!r}")
    m = microbatches or (workload.microbatches if strategy.pp > 1 else 1)
    if m < 1 or m > samples:
        raise FredError(f"{m} microbatches cannot split {samples} samples per DP replica")
    streaming = workload.mode == "weight-streaming"
    if streaming:  # layer l on stage l % PP: PP consecutive layers form one pipeline wave
        stages = [list(range(s, len(workload.layers), strategy.pp)) for s in range(strategy.pp)]
        if strategy.pp > len(workload.layers):
            raise FredError(f"PP({strategy.pp}) exceeds the {len(workload.layers)} layers of {workload.name}")
    else:
        chunks = workload.interleave if strategy.pp > 1 else 1
        vstages = _stages(workload, strategy.pp * chunks)
        # device s holds virtual stages s, s + PP, s + 2 PP, ... (Megatron's interleaving)
        stages = [[i for c in range(chunks) for i in vstages[c * strategy.pp + s]]
                  for s in range(strategy.pp)]
    # More microbatches (smaller working set) only when the requested count does not fit:
    # the same gradient accumulation a framework would fall back to.
    candidates = [k for k in range(m, samples + 1) if samples % k == 0] or [m]
    if microbatches:
        candidates = [m]
    error = None
    for k in candidates:
        try:
            mem = memory_plan(platform, workload, strategy, stages, samples / k, k, schedule)
            m = k
            break
        except FredError as exc:
            error = error or exc
    else:
        raise error
    mb = samples / m
    eff_flops = platform.peak_flops * platform.compute_efficiency
    hbm = platform.memory_bandwidth_gbps * 1e9
    cm = platform.compute
    sp = workload.sequence_parallel
    recompute = mem.recompute_mode
    times: dict = {}

    def compute_time(layer, backward: bool) -> float:
        key = (id(layer), backward)
        if key in times:
            return times[key]
        shard = _shard(layer, strategy.mp)
        if cm is not None and (layer.gemms or layer.vectors):
            # shape-dependent: GEMMs by their efficiency, element-wise work bandwidth-bound
            args = dict(samples=mb, mp=shard, dtype=workload.dtype, sequence_parallel=sp)
            fwd = cm.layer_time(layer.gemms, layer.vectors, backward=False, **args)
            if layer.fwd_flops and not layer.gemms:
                fwd += layer.fwd_flops * mb / shard / eff_flops
            t = fwd
            if backward:
                t = cm.layer_time(layer.gemms, layer.vectors, backward=True, **args)
                if layer.fwd_flops and not layer.gemms:
                    t += 2 * layer.fwd_flops * mb / shard / eff_flops
                if recompute == "full":
                    t += fwd
                elif recompute == "selective":
                    t += cm.layer_time(layer.gemms, layer.vectors, backward=False, only_core=True, **args)
        else:   # the flat roofline: every FLOP at compute_efficiency of peak
            flops = layer.fwd_flops * mb / shard
            nbytes = BYTES * layer.params / shard + mb * (layer.in_bytes + layer.out_bytes)
            if backward:
                flops *= 3 if recompute == "full" else 2
                nbytes *= 2
            t = max(flops / eff_flops, nbytes / hbm)
        times[key] = t
        return t

    # Megatron MP collectives per backward pass, relative to the forward's: the backward's own,
    # the recomputed forward's (full recomputation), and under sequence parallelism the
    # all-gathers of the forward redone in the backward (half an all-reduce's bytes each)
    mp_backward = 1.0 + (1.0 if recompute == "full" else 0.0) + (0.5 if sp and recompute != "full" else 0.0)

    def comm(collectives) -> "CommTime":
        if not collectives:
            return CommTime(0.0)
        r = evaluate(platform, fabric, collectives)
        return CommTime(r.time_s, r.link_loads, r.link_bw)

    mp_groups_of = {s: [tuple(strategy.rank(mp=k, dp=dp, pp=s) for k in range(strategy.mp))
                        for dp in range(strategy.dp)] for s in range(strategy.pp)}
    dp_of_stage = {s: [tuple(strategy.rank(mp=mp, dp=dp, pp=s) for dp in range(strategy.dp))
                       for mp in range(strategy.mp)] for s in range(strategy.pp)}

    def mp_time(layer, stage, backward: bool = False) -> "CommTime":
        if strategy.mp == 1 or not layer.mp_shardable or layer.out_bytes == 0 and layer.in_bytes == 0:
            return CommTime(0.0)
        size = mb * (layer.out_bytes or layer.in_bytes)
        one = comm([Collective("all-reduce", g, size) for g in mp_groups_of[stage]])
        return one.times(layer.mp_allreduces * (mp_backward if backward else 1.0))

    def pp_time(a: int, b: int, nbytes: float) -> "CommTime":
        """Stage a -> stage b hand-over of every DP replica (multicast to b's MP group; with
        ``platform.pp_scatter_gather`` each MP rank sends 1/MP to its peer, then b's MP group
        all-gathers)."""
        if platform.pp_scatter_gather and strategy.mp > 1:
            pairs = tuple((strategy.rank(mp=k, dp=dp, pp=a), strategy.rank(mp=k, dp=dp, pp=b))
                          for dp in range(strategy.dp) for k in range(strategy.mp))
            send = comm([Collective("point-to-point", size=nbytes / strategy.mp, pairs=pairs)])
            gather = comm([Collective("all-gather", g, nbytes) for g in mp_groups_of[b]])
            return CommTime(send.time_s + gather.time_s)
        out = []
        for dp in range(strategy.dp):
            out.append(Collective("multicast",
                                  tuple(strategy.rank(mp=k, dp=dp, pp=b) for k in range(strategy.mp)),
                                  nbytes, root=strategy.rank(mp=0, dp=dp, pp=a)))
        return comm(out)

    def dp_time(elements, stage) -> "CommTime":
        """One gradient bucket of ``elements`` reduced over every DP group of the stage."""
        if strategy.dp == 1 or elements == 0:
            return CommTime(0.0)
        return comm([Collective("all-reduce", g, BYTES * elements) for g in dp_of_stage[stage]])

    def io_time(layer, stage, op) -> "CommTime":
        if layer.params == 0:
            return CommTime(0.0)
        size = BYTES * layer.params / _shard(layer, strategy.mp)
        return comm([Collective(op, g, size) for g in dp_of_stage[stage]])

    def spill_time(layer, op) -> "CommTime":
        size = mb * layer.in_bytes
        return comm([Collective(op, tuple(range(strategy.npus)), size)])

    eng = _StageEngine(blocking=not overlap)
    eng.pp_block = not platform.pp_overlap   # Megatron-style blocking pipeline sends
    pp_fwd: dict = {}          # (stage boundary, micro) -> send task
    pp_bwd: dict = {}
    rep = {s: strategy.rank(mp=0, dp=0, pp=s) for s in range(strategy.pp)}

    def res(s, kind):
        return f"s{s}.{kind}"

    if not streaming:
        pp = strategy.pp
        last_vs = pp * chunks - 1
        ops = {s: _schedule_ops(schedule, s, pp, m, chunks) for s in range(pp)}
        # Resource order must be a valid interleaving across stages, so add the tasks in
        # an order that respects dependencies: round-robin over stages, one op at a time.
        # Virtual stage vs = chunk * PP + device; its output goes to vs + 1 (forward) or
        # vs - 1 (backward), which always lives on another device when PP > 1.
        pos = {s: 0 for s in range(pp)}
        done_b: dict = {}
        progress = True
        while progress:
            progress = False
            for s in range(pp):
                while pos[s] < len(ops[s]):
                    kind, i, c = ops[s][pos[s]]
                    vs = c * pp + s
                    if kind == "F" and vs > 0 and (vs - 1, i) not in pp_fwd:
                        break
                    if kind == "B" and vs < last_vs and (vs + 1, i) not in pp_bwd:
                        break
                    layer_ids = vstages[vs] if kind == "F" else list(reversed(vstages[vs]))
                    prev = pp_fwd.get((vs - 1, i)) if kind == "F" else pp_bwd.get((vs + 1, i))
                    if kind == "B":
                        done_b[vs] = done_b.get(vs, 0) + 1
                    final_b = kind == "B" and done_b[vs] == m
                    bucket, bucket_elements = [], 0.0
                    tag = f"c{c} " if chunks > 1 else ""
                    for li in layer_ids:
                        layer = workload.layers[li]
                        t = eng.add(f"{kind}{i} s{s} {tag}{layer.name}", res(s, "compute"),
                                    compute_time(layer, kind == "B"), [prev], npu=rep[s])
                        prev = t
                        d = mp_time(layer, s, kind == "B")
                        if d > 0:
                            prev = eng.add(f"{kind}{i} s{s} {tag}{layer.name} mp", res(s, "mp"), d, [t],
                                           category="mp", npu=rep[s], block=True)
                        if final_b:
                            # ZeRO-2 gradient buckets: reduced once full (or at the end of
                            # the backward), blocking compute unless training.dp_overlap
                            bucket.append(layer)
                            bucket_elements += layer.params / _shard(layer, strategy.mp)
                            if bucket_elements >= platform.dp_bucket_elements or li == layer_ids[-1]:
                                d = dp_time(bucket_elements, s)
                                if d > 0:
                                    names = bucket[0].name if len(bucket) == 1 else \
                                        f"{bucket[0].name}..{bucket[-1].name}"
                                    eng.add(f"dp s{s} {names}", res(s, "dp"), d, [t], category="dp",
                                            npu=rep[s], block=not platform.dp_overlap)
                                bucket, bucket_elements = [], 0.0
                    last = workload.layers[vstages[vs][-1] if kind == "F" else vstages[vs][0]]
                    if kind == "F" and vs < last_vs:
                        pp_fwd[(vs, i)] = eng.add(f"F{i} s{s} {tag}send", res(s, "pp"),
                                                  pp_time(s, (vs + 1) % pp, mb * last.out_bytes), [prev],
                                                  category="pp", npu=rep[s], block=not platform.pp_overlap)
                    if kind == "B" and vs > 0:
                        pp_bwd[(vs, i)] = eng.add(f"B{i} s{s} {tag}send", res(s, "pp"),
                                                  pp_time(s, (vs - 1) % pp, mb * last.in_bytes), [prev],
                                                  category="pp", npu=rep[s], block=not platform.pp_overlap)
                    pos[s] += 1
                    progress = True
        if any(pos[s] < len(ops[s]) for s in ops):
            raise FredError("internal: pipeline schedule could not be ordered")
        # sharded optimizer step (memory-bound: FP32 master + moments + FP16 weight and grad)
        for s in range(strategy.pp):
            p = sum(workload.layers[i].params / _shard(workload.layers[i], strategy.mp) for i in stages[s])
            per_param = platform.optimizer_step_bytes_per_param or \
                (platform.optimizer_bytes_per_param * 2 + 2 * BYTES)
            opt_bytes = p / strategy.dp * per_param
            dps = [i for i, t in enumerate(eng.tasks) if t.resource == res(s, "dp")]
            eng.add(f"optimizer s{s}", res(s, "compute"),
                    cm.vector_time(opt_bytes) if cm else opt_bytes / hbm, dps, npu=rep[s])
    else:
        _streaming_tasks(eng, workload, strategy, stages, m, mb, mem, compute_time, mp_time,
                         pp_time, io_time, spill_time, rep, res)
    schedule_result = eng.run()
    breakdown, busy, stage = _breakdown(schedule_result, strategy, rep, res)
    notes = []
    if m != (microbatches or (workload.microbatches if strategy.pp > 1 else 1)):
        notes.append(f"{m} microbatches (more than requested) so the working set fits")
    if mem.recompute_mode == "full":
        notes.append("full activation recomputation (each layer's forward again before its backward)")
    elif mem.recompute_mode == "selective":
        notes.append("selective activation recomputation (the attention core)")
    if strategy.npus < platform.npus:
        notes.append(f"{platform.npus - strategy.npus} of {platform.npus} NPUs idle")
    if mem.offload:
        notes.append("activation checkpoints offloaded to external memory through the I/O controllers")
    return IterationResult(workload=workload.name, fabric=fabric, strategy=str(strategy),
                           schedule=schedule, time_s=schedule_result.makespan, breakdown=breakdown,
                           comm_busy=busy, memory=mem, microbatches=m, samples_per_dp=samples,
                           tasks=len(eng.tasks), notes=notes, npus_used=strategy.npus,
                           idle_npus=platform.npus - strategy.npus)


class _StageEngine(Engine):
    """The engine, told which pipeline stage each task belongs to (``stage=``, else read from a
    ``s<stage>.<kind>`` resource name). With ``blocking`` (``overlap=False``) a communication
    task first waits for its stage's latest compute task, and the stage's next compute task
    waits for every communication task added since: communication never overlaps compute
    (although one stage's communication may overlap another stage's compute)."""

    def __init__(self, *, blocking: bool):
        super().__init__()
        self.blocking = blocking
        self._last_compute: dict[int, int] = {}
        self._pending: dict[int, list[int]] = {}

    def add(self, name, resource, duration, deps=(), *, stage=None, block=False, **kwargs) -> int:
        """``block``: this communication task blocks its stage's compute even when the engine
        does not block every task (DeepSpeed's ZeRO-2 gradient reduction without
        ``overlap_comm`` runs on the compute stream)."""
        compute = resource.endswith(".compute")
        blocking = self.blocking or block
        if not (compute or blocking):
            return super().add(name, resource, duration, deps, **kwargs)
        if stage is None:
            if not resource.startswith("s"):
                raise FredError(f"internal: task {name} on {resource} has no stage")
            stage = int(resource[1:].split(".")[0])
        elif not resource.startswith("s"):
            # the wafer-wide I/O channel gets one queue per stage, or stage s's stream (now
            # waiting for s's compute) would hold up the other stages' streams behind it; the
            # streams still share the controllers' links through their link loads
            resource = f"s{stage}.{resource}"
        deps = list(deps)
        if compute:
            deps += self._pending.pop(stage, [])
            tid = super().add(name, resource, duration, deps, **kwargs)
            self._last_compute[stage] = tid
        else:
            deps.append(self._last_compute.get(stage))
            tid = super().add(name, resource, duration, deps, **kwargs)
            self._pending.setdefault(stage, []).append(tid)
        return tid


def _streaming_tasks(eng, workload, strategy, stages, m, mb, mem, compute_time, mp_time, pp_time,
                     io_time, spill_time, rep, res):
    """Weight streaming: layers in order, layer l on stage l % PP; a layer's weights load
    (I/O in) once resident slots allow, then all microbatches run through it; consecutive
    layers on different stages hand each microbatch over by a PP multicast."""
    keep = workload.layers_on_wafer
    pp = strategy.pp
    n = len(workload.layers)
    stage_of = {li: li % pp for li in range(n)}
    done = {s: [] for s in range(pp)}   # per stage: task ending each of its layers (last mb)

    def run_pass(order, backward):
        order = list(order)
        prev = {i: None for i in range(m)}
        kind = "B" if backward else "F"
        for position, li in enumerate(order):
            layer = workload.layers[li]
            s = stage_of[li]
            j = len(done[s])
            gate = done[s][j - keep] if j >= keep else None  # a free resident slot
            load = eng.add(f"load {kind} {layer.name}", "io.in", io_time(layer, s, "io-load"),
                           [gate], category="io", stage=s)
            deps = [load]
            if backward and mem.offload:
                deps.append(eng.add(f"unspill {layer.name}", "io.in", spill_time(layer, "io-read") * m,
                                    [gate], category="io", stage=s))
            following = order[position + 1] if position + 1 < len(order) else None
            hand_over = following is not None and stage_of[following] != s
            for i in range(m):
                t = eng.add(f"{kind}{i} {layer.name}", res(s, "compute"), compute_time(layer, backward),
                            [*deps, prev[i]], npu=rep[s])
                d = mp_time(layer, s, backward)
                prev[i] = eng.add(f"{kind}{i} {layer.name} mp", res(s, "mp"), d, [t],
                                  category="mp", npu=rep[s], block=True) if d > 0 else t
                if mem.offload and not backward:
                    eng.add(f"spill {layer.name} {i}", "io.out", spill_time(layer, "io-write"),
                            [t], category="io", stage=s)
                if hand_over:
                    # each microbatch crosses to the next layer's stage as soon as it is done
                    # (added here, in program order, so that the serialised mode blocks the
                    # sender's next microbatch rather than its next layer)
                    nbytes = mb * (workload.layers[following].in_bytes if not backward else layer.in_bytes)
                    prev[i] = eng.add(f"{kind}{i} send to s{stage_of[following]}", res(s, "pp"),
                                      pp_time(s, stage_of[following], nbytes), [prev[i]],
                                      category="pp", npu=rep[s], block=eng.pp_block)
            done[s].append(prev[m - 1])
            if backward:
                eng.add(f"store {layer.name}", "io.out", io_time(layer, s, "io-store"),
                        [prev[m - 1]], category="io", stage=s)

    run_pass(range(n), backward=False)
    run_pass(reversed(range(n)), backward=True)


def _union(intervals):
    out = []
    for a, b in sorted(intervals):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _overlap(segments, intervals):
    """Portions of ``segments`` covered by ``intervals`` (both unions); returns (covered, rest)."""
    covered, rest = 0.0, []
    for a, b in segments:
        cur = a
        for x, y in intervals:
            if y <= cur or x >= b:
                continue
            if x > cur:
                rest.append([cur, x])
            lo, hi = max(cur, x), min(b, y)
            covered += hi - lo
            cur = hi
            if cur >= b:
                break
        if cur < b:
            rest.append([cur, b])
    return covered, rest


def _breakdown(sched, strategy, rep, res):
    makespan = sched.makespan
    best = None
    for s in range(strategy.pp):
        comp = [t for t in sched.tasks if t.resource == res(s, "compute")]
        busy = sum(t.duration for t in comp)
        if best is None or busy > best[1]:
            best = (s, busy, comp)
    s, busy, comp = best
    idle = _gaps(comp, makespan)
    out = {"compute": busy}
    comm_busy = {}
    for cat in ("mp", "pp", "io", "dp"):
        mine = [t for t in sched.tasks if t.category == cat and (t.npu in (None, rep[s]))]
        comm_busy[cat] = sum(t.duration for t in mine)
        covered, idle = _overlap(idle, _union([(t.start, t.end) for t in mine]))
        out[cat] = covered
    out["bubble"] = sum(b - a for a, b in idle)
    return out, comm_busy, s


def _gaps(tasks, makespan):
    gaps, cur = [], 0.0
    for t in sorted(tasks, key=lambda t: t.start):
        if t.start > cur:
            gaps.append([cur, t.start])
        cur = max(cur, t.end)
    if cur < makespan:
        gaps.append([cur, makespan])
    return gaps
