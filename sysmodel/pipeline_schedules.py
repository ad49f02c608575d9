"""Pipeline schedules: the order in which one pipeline stage runs its forward and backward
passes (GPipe, 1F1B, and Megatron's interleaved 1F1B over several model chunks per stage).
:mod:`sysmodel.task_graphs` turns these orders into tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hdl.contracts.errors import FredError
from sysmodel.model_cache import current

__all__ = ["pipeline_ops", "interleaved_ops", "ScheduleOrder", "schedule_order"]


def pipeline_ops(schedule: str, stage: int, pp: int, m: int) -> list[tuple[str, int]]:
    """Order of ``stage``'s forward ("F", microbatch) and backward ("B", microbatch) passes
    over ``m`` microbatches in a ``pp``-stage pipeline: GPipe (all forwards, then all backwards
    in reverse) or 1F1B (PP - stage - 1 warm-up forwards, then alternating, then the rest)."""
    if schedule == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in reversed(range(m))]
    warm = min(pp - stage - 1, m)
    ops = [("F", i) for i in range(warm)]
    for i in range(m - warm):
        ops += [("F", warm + i), ("B", i)]
    ops += [("B", i) for i in range(m - warm, m)]
    return ops


def interleaved_ops(stage: int, pp: int, m: int, chunks: int) -> list[tuple[str, int, int]]:
    """Order of ``stage``'s (kind, microbatch, model chunk) passes in Megatron's interleaved
    1F1B (Narayanan et al. 2021) with ``chunks`` model chunks per stage: forward k runs chunk
    (k // pp) % chunks of microbatch (k // (pp*chunks))*pp + k % pp; backward k the chunks in
    reverse; (pp - stage - 1)*2 + (chunks - 1)*pp warm-up forwards, then one forward / one
    backward alternately, then the remaining backwards. ``m`` must be a multiple of ``pp``."""
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


@dataclass(frozen=True)
class ScheduleOrder:
    """Every stage's passes in the order the task graph adds them (:func:`schedule_order`), as
    arrays indexed by pass: ``stage``, ``backward`` (bool), ``microbatch``, ``chunk``,
    ``virtual`` (virtual stage chunk * PP + stage), ``producer`` (the pass whose send it waits
    for: the previous virtual stage's forward, the next one's backward; -1: none),
    ``previous`` (the stage's pass before it; -1: none), ``last_backward`` (the virtual stage's
    last backward, which fills the gradient buckets) and ``prefix`` (its tasks' name prefix,
    ``"F3 s1 "``, with ``"c2 "`` after it when there are several chunks); ``longest_stretch``:
    the most passes in a row between last backwards."""

    stage: np.ndarray
    backward: np.ndarray
    microbatch: np.ndarray
    chunk: np.ndarray
    virtual: np.ndarray
    producer: np.ndarray
    previous: np.ndarray
    last_backward: np.ndarray
    prefix: tuple
    longest_stretch: int

    def __post_init__(self):   # shared through the model's cache: nobody may change it
        for value in vars(self).values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False

    def __len__(self) -> int:
        return len(self.stage)


def schedule_order(schedule: str, pp: int, m: int, chunks: int) -> ScheduleOrder:
    """Every stage's (kind, microbatch, chunk) passes (:func:`pipeline_ops`, or
    :func:`interleaved_ops` with ``chunks`` > 1), round-robin over the stages one pass at a
    time, each once the send it waits for exists (a forward after the previous virtual
    stage's forward of its microbatch, a backward after the next one's backward): every
    resource can then run its tasks in the order they are added. It depends only on its
    arguments (kept in the model's cache, ``pipeline_orders``)."""
    key = (schedule, pp, m, chunks)
    memo = current().pipeline_orders
    found = memo.get(key)
    if found is None:
        found = memo.put(key, _schedule_order(schedule, pp, m, chunks))
    return found


def _stage_ops(schedule: str, s: int, pp: int, m: int, chunks: int) -> list[tuple[str, int, int]]:
    """Stage ``s``'s (kind, microbatch, chunk) passes in order."""
    if chunks > 1:
        if schedule != "1f1b":
            raise FredError("the interleaved pipeline schedule is a 1F1B schedule; use --schedule 1f1b")
        return interleaved_ops(s, pp, m, chunks)
    return [(kind, i, 0) for kind, i in pipeline_ops(schedule, s, pp, m)]


def _schedule_order(schedule: str, pp: int, m: int, chunks: int) -> ScheduleOrder:
    # a pass is numbered (backward * virtual stages + virtual stage) * m + microbatch; the
    # round-robin runs over those numbers (one list lookup per pass), the rest in numpy
    virtual_stages = pp * chunks
    last_virtual = virtual_stages - 1
    ops, waits = [], []
    for s in range(pp):
        codes, needs = [], []
        for kind, i, c in _stage_ops(schedule, s, pp, m, chunks):
            v = c * pp + s
            if kind == "F":
                codes.append(v * m + i)
                needs.append((v - 1) * m + i if v > 0 else -1)
            else:
                codes.append((virtual_stages + v) * m + i)
                needs.append((virtual_stages + v + 1) * m + i if v < last_virtual else -1)
        ops.append(codes)
        waits.append(needs)
    number = [-1] * (2 * virtual_stages * m)   # pass code -> its place in the order
    order: list = []
    pos = [0] * pp
    progress = True
    while progress:
        progress = False
        for s in range(pp):
            codes, needs, p = ops[s], waits[s], pos[s]
            while p < len(codes) and (needs[p] < 0 or number[needs[p]] >= 0):
                number[codes[p]] = len(order)
                order.append(codes[p])
                p += 1
            if p > pos[s]:
                pos[s], progress = p, True
    if any(pos[s] < len(ops[s]) for s in range(pp)):
        raise FredError("internal: pipeline schedule could not be ordered")
    return _order_arrays(np.array(order, dtype=np.int64), np.array(number, dtype=np.int64), pp, m, chunks)


def _order_arrays(code: np.ndarray, number: np.ndarray, pp: int, m: int, chunks: int) -> ScheduleOrder:
    """The :class:`ScheduleOrder` of the passes ``code`` (in order; ``number``: code -> place)."""
    virtual_stages = pp * chunks
    n = len(code)
    microbatch = code % m
    backward = code // m >= virtual_stages
    virtual = code // m % virtual_stages
    stage, chunk = virtual % pp, virtual // pp
    waits_for = np.where(backward, (virtual_stages + virtual + 1) * m + microbatch, (virtual - 1) * m + microbatch)
    has_producer = np.where(backward, virtual < virtual_stages - 1, virtual > 0)
    producer = np.where(has_producer, number[np.where(has_producer, waits_for, 0)], -1)
    # the stage's previous pass: passes sorted by stage, in order within each (stable)
    by_stage = np.argsort(stage, kind="stable")
    previous = np.full(n, -1, dtype=np.int64)
    same = stage[by_stage[1:]] == stage[by_stage[:-1]]
    previous[by_stage[1:][same]] = by_stage[:-1][same]
    # each virtual stage's last backward: its backward of the largest place
    last_backward = np.zeros(n, dtype=bool)
    places = np.flatnonzero(backward)
    latest = np.full(virtual_stages, -1, dtype=np.int64)
    np.maximum.at(latest, virtual[places], places)
    last_backward[latest[latest >= 0]] = True
    bounds = [-1, *np.flatnonzero(last_backward).tolist(), n]
    kinds = np.where(backward, "B", "F").tolist()
    columns = zip(kinds, microbatch.tolist(), stage.tolist(), chunk.tolist())
    prefix = (tuple(f"{k}{i} s{s} c{c} " for k, i, s, c in columns) if chunks > 1
              else tuple(f"{k}{i} s{s} " for k, i, s, _ in columns))
    return ScheduleOrder(stage=stage, backward=backward, microbatch=microbatch, chunk=chunk, virtual=virtual,
                         producer=producer, previous=previous, last_backward=last_backward, prefix=prefix,
                         longest_stretch=max(b - a - 1 for a, b in zip(bounds, bounds[1:])))
