"""Collectives across the dimensions of a cluster, chunked and scheduled (docs/cluster.md).

A collective of ``size`` bytes per NPU over some dimensions of a :class:`~sysmodel.dimensions.Cluster`
is split into ``chunks`` equal chunks. Each chunk gets a dimension order ``(d_1, ..., d_k)``
(the dimension that carries the most data first) and runs as stages, each a collective on
every group of one dimension (:func:`sysmodel.dimension_timing.stage_time`):

* **all-reduce** (hierarchical): reduce-scatter on ``d_1`` with the chunk ``c``, on ``d_2``
  with ``c / n_1``, ..., an all-reduce on ``d_k`` with ``c / (n_1 ... n_{k-1})`` (one pass
  on an in-network dimension), then all-gather back in reverse order;
* **reduce-scatter**: reduce-scatter ``d_1 .. d_k`` (``c`` the chunk's input);
* **all-gather**: all-gather ``d_k .. d_1`` (``c`` the chunk's output; ``d_1`` the last and
  largest stage), the mirror of the reduce-scatter;
* **all-to-all**: all-to-all on ``d_1 .. d_k``, each with the whole chunk (each stage moves
  the data to its coordinate in one dimension).

Two schedulers choose the orders:

* ``fixed``: every chunk in the file's order, innermost dimension first (ASTRA-sim's
  ``baseline`` inter-dimension scheduling);
* ``themis``: the chunks are scheduled one after another; each keeps the time it puts on every
  dimension (the accumulated load), and each chunk takes the dimensions in increasing order of
  that load, so the least-loaded dimension gets the chunk's largest stage (Themis, Rashidi et
  al., ISCA 2022, Sec. 4); every chunk has the same size;
* ``themis-resize``: as ASTRA-sim's ``OfflineGreedy`` (read, not copied): the chunks are cut
  one after another from the remaining data; each takes the dimensions in increasing load and
  is resized so that its stage on the least-loaded dimension fills the gap to the most-loaded
  one (bandwidth-only estimate: ``gap x B x n / (n-1)`` bytes); when that size is below 0.128
  MiB (the loads are balanced) the chunk takes the file's order at the recommended size
  ``size / chunks`` (:func:`resized_plans`). The number of chunks follows from the sizes.

Execution: every dimension runs one stage at a time, first come first served (ASTRA-sim's
FIFO intra-dimension scheduling); a chunk's stages run in order. All NPUs are symmetric, so one
NPU's timeline is the collective's. Per dimension the result gives the time it was busy, the
bytes one NPU sent into it and its utilization (busy / total; bytes / (bandwidth x total)).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from hdl.contracts.errors import FredError
from sysmodel.dimension_timing import stage_bytes_sent, stage_time
from sysmodel.dimensions import Cluster, Dimension

__all__ = ["MULTIDIM_OPS", "SCHEDULES", "DEFAULT_CHUNKS", "DimensionUse", "MultiDimResult",
           "chunk_stages", "schedule_orders", "resized_plans", "run_collective", "RESIZE_FLOOR_BYTES"]

MULTIDIM_OPS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")
SCHEDULES = ("fixed", "themis", "themis-resize")
#: ASTRA-sim's OfflineGreedy: a chunk resized to a load gap worth less than 0.128 MiB of data
#: takes the baseline (file) order at the recommended size instead
RESIZE_FLOOR_BYTES = 0.128 * 2**20
#: assumed default: ASTRA-sim's sample system inputs split a collective into 64 chunks
#: (``preferred-dataset-splits``); Themis does not fix a number in its text we could read.
DEFAULT_CHUNKS = 64
#: more chunks than this only costs time (each is scheduled on its own; docs/cli.md)
MAX_CHUNKS = 4096


@dataclass(frozen=True)
class DimensionUse:
    """One dimension's share of a collective."""

    name: str
    busy_s: float
    bytes_sent_per_npu: float
    utilization: float             # busy_s / time_s
    bandwidth_utilization: float   # bytes_sent_per_npu / (bandwidth x time_s)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class MultiDimResult:
    """A scheduled multi-dimensional collective: ``time_s``, per-dimension use, the overall
    bandwidth utilization (bytes sent into every dimension / (sum of their bandwidths x
    time)) and the first chunks' dimension orders."""

    op: str
    size_bytes: float
    schedule: str
    chunks: int
    time_s: float
    dimensions: tuple[DimensionUse, ...]
    bandwidth_utilization: float
    orders: tuple[tuple[str, ...], ...]

    def to_dict(self) -> dict:
        return {"op": self.op, "size_bytes": self.size_bytes, "schedule": self.schedule,
                "chunks": self.chunks, "time_s": self.time_s,
                "bandwidth_utilization": self.bandwidth_utilization,
                "dimensions": [d.to_dict() for d in self.dimensions],
                "first_chunk_orders": [list(o) for o in self.orders[:8]]}


def chunk_stages(op: str, order: tuple[Dimension, ...], chunk: float) -> list[tuple[Dimension, str, float]]:
    """The stages ``(dimension, stage op, bytes per NPU)`` of one chunk of ``chunk`` bytes
    taking ``order`` (module docstring), in execution order."""
    if op not in MULTIDIM_OPS:
        raise FredError(f"multi-dimensional op {op!r} is not one of {', '.join(MULTIDIM_OPS)}")
    if not order:
        return []
    if op == "all-to-all":
        return [(d, "all-to-all", chunk) for d in order]
    sizes, size = [], chunk
    for d in order:               # the data each dimension sees, shrinking through the order
        sizes.append(size)
        size /= d.size
    scatter = [(d, "reduce-scatter", s) for d, s in zip(order, sizes)]
    if op == "reduce-scatter":
        return scatter
    gather = [(d, "all-gather", s) for d, s in zip(order, sizes)][::-1]
    if op == "all-gather":
        return gather
    last, _, s = scatter[-1]
    return scatter[:-1] + [(last, "all-reduce", s)] + gather[1:]


def schedule_orders(op: str, dims: tuple[Dimension, ...], chunk: float, chunks: int,
                    schedule: str) -> list[tuple[Dimension, ...]]:
    """Each chunk's dimension order under ``schedule`` (``fixed`` or ``themis``)."""
    if schedule == "fixed":
        return [dims] * chunks
    if schedule != "themis":
        raise FredError(f"schedule {schedule!r} is not one of {', '.join(SCHEDULES)}")
    load = {d.name: 0.0 for d in dims}
    index = {d.name: i for i, d in enumerate(dims)}
    orders = []
    for _ in range(chunks):
        # least-loaded first: it takes the chunk's largest stage (ties: the file's order)
        order = tuple(sorted(dims, key=lambda d: (load[d.name], index[d.name])))
        _add_load(load, op, order, chunk)
        orders.append(order)
    return orders


def _add_load(load: dict, op: str, order, nbytes: float) -> None:
    for d, stage_op, stage_bytes in chunk_stages(op, order, nbytes):
        load[d.name] += stage_time(d, stage_op, stage_bytes)


def resized_plans(op: str, dims: tuple[Dimension, ...], size: float, chunk: float, *,
                  max_growth: float = math.inf) -> list:
    """``themis-resize`` (module docstring): ``[(order, bytes)]`` per chunk, cut from ``size``
    with ``chunk`` the recommended size. ``max_growth``: a resized chunk is at most this many
    recommended sizes (ASTRA-sim: unbounded; 1 = resizing only shrinks, an experiment in
    docs/cluster.md). At most :data:`MAX_CHUNKS` resized chunks; the rest at the recommended
    size in the file's order."""
    load = {d.name: 0.0 for d in dims}
    index = {d.name: i for i, d in enumerate(dims)}
    plans, remaining = [], size
    while remaining > size * 1e-12:
        order = tuple(sorted(dims, key=lambda d: (load[d.name], index[d.name])))
        first = order[0] if order else None
        gap = max(load.values(), default=0.0) - (load[first.name] if first else 0.0)
        resized = gap * first.bandwidth_bps * first.size / (first.size - 1) if first else 0.0
        if resized < RESIZE_FLOOR_BYTES or len(plans) >= MAX_CHUNKS:
            order, nbytes = dims, min(remaining, chunk)
        else:
            nbytes = min(remaining, resized, chunk * max_growth)
        _add_load(load, op, order, nbytes)
        plans.append((order, nbytes))
        remaining -= nbytes
    return plans


def _execute(op: str, chunk_plans) -> tuple[float, dict, dict]:
    """Run the chunks ``[(order, bytes)]``' stages, one at a time per dimension, first come
    first served: ``(finish time, busy seconds per dimension, bytes sent per NPU per dimension)``."""
    plans = [chunk_stages(op, order, nbytes) for order, nbytes in chunk_plans]
    free_at, busy, sent = {}, {}, {}
    ready = [(0.0, i, 0) for i, plan in enumerate(plans) if plan]
    heapq.heapify(ready)
    finish = 0.0
    while ready:
        # popped in order of readiness: a dimension serves its stages in arrival order
        t, i, k = heapq.heappop(ready)
        dim, stage_op, nbytes = plans[i][k]
        duration = stage_time(dim, stage_op, nbytes)
        start = max(t, free_at.get(dim.name, 0.0))
        end = start + duration
        free_at[dim.name] = end
        busy[dim.name] = busy.get(dim.name, 0.0) + duration
        sent[dim.name] = sent.get(dim.name, 0.0) + stage_bytes_sent(dim, stage_op, nbytes)
        finish = max(finish, end)
        if k + 1 < len(plans[i]):
            heapq.heappush(ready, (end, i, k + 1))
    return finish, busy, sent


def run_collective(cluster: Cluster, op: str, size: float, *, dimensions=None,
                   schedule: str = "themis", chunks: int = DEFAULT_CHUNKS,
                   resize_max_growth: float = math.inf) -> MultiDimResult:
    """``op`` of ``size`` bytes per NPU on the groups spanning ``dimensions`` (names; default
    every dimension) of ``cluster``, split into ``chunks`` chunks scheduled by ``schedule``."""
    if op not in MULTIDIM_OPS:
        raise FredError(f"op {op!r} has no multi-dimensional form; expected one of {', '.join(MULTIDIM_OPS)}")
    if isinstance(size, bool) or not isinstance(size, (int, float)) or not math.isfinite(size) or size <= 0:
        raise FredError(f"collective size must be a positive number of bytes, got {size!r}")
    if isinstance(chunks, bool) or not isinstance(chunks, int) or not 1 <= chunks <= MAX_CHUNKS:
        raise FredError(f"chunks must be an integer >= 1 and <= {MAX_CHUNKS}, got {chunks!r}")
    if schedule not in SCHEDULES:
        raise FredError(f"schedule {schedule!r} is not one of {', '.join(SCHEDULES)}")
    names = [d.name for d in cluster.dimensions] if dimensions is None else list(dimensions)
    if len(set(names)) != len(names):
        raise FredError(f"dimensions {names} name one twice")
    chosen = {cluster.dimension(n).name for n in names}      # errors name unknown dimensions
    # the file's order, without single-member dimensions (nothing to exchange)
    dims = tuple(d for d in cluster.dimensions if d.name in chosen and d.size > 1)
    chunk = size / chunks
    if schedule == "themis-resize":
        plans = resized_plans(op, dims, size, chunk, max_growth=resize_max_growth)
    else:
        plans = [(order, chunk) for order in schedule_orders(op, dims, chunk, chunks, schedule)]
    time, busy, sent = _execute(op, plans)
    uses = tuple(DimensionUse(d.name, busy.get(d.name, 0.0), sent.get(d.name, 0.0),
                              busy.get(d.name, 0.0) / time if time > 0 else 0.0,
                              sent.get(d.name, 0.0) / (d.bandwidth_bps * time) if time > 0 else 0.0)
                 for d in dims)
    capacity = sum(d.bandwidth_bps for d in dims)
    overall = sum(sent.values()) / (capacity * time) if time > 0 and capacity > 0 else 0.0
    return MultiDimResult(op, float(size), schedule, len(plans), time, uses, overall,
                          tuple(tuple(d.name for d in o) for o, _ in plans))
