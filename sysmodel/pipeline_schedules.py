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
    ops = [_stage_ops(schedule, s, pp, m, chunks) for s in range(pp)]
    last_virtual = pp * chunks - 1
    index: dict = {}    # (kind, virtual stage, microbatch) -> its pass's number
    order: list = []    # (stage, kind, microbatch, chunk) per pass
    pos = [0] * pp
    progress = True
    while progress:
        progress = False
        for s in range(pp):
            stage_ops = ops[s]
            while pos[s] < len(stage_ops):
                kind, i, c = stage_ops[pos[s]]
                v = c * pp + s
                if kind == "F" and not (v == 0 or ("F", v - 1, i) in index):
                    break
                if kind == "B" and not (v == last_virtual or ("B", v + 1, i) in index):
                    break
                index[(kind, v, i)] = len(order)
                order.append((s, kind, i, c))
                pos[s] += 1
                progress = True
    if any(pos[s] < len(ops[s]) for s in range(pp)):
        raise FredError("internal: pipeline schedule could not be ordered")
    n = len(order)
    producer, previous, last_backward = [-1] * n, [-1] * n, [False] * n
    latest = [-1] * pp
    backwards: dict = {}
    for j, (s, kind, i, c) in enumerate(order):
        v = c * pp + s
        if kind == "F" and v > 0:
            producer[j] = index[("F", v - 1, i)]
        elif kind == "B" and v < last_virtual:
            producer[j] = index[("B", v + 1, i)]
        if kind == "B":
            backwards[v] = backwards.get(v, 0) + 1
            last_backward[j] = backwards[v] == m
        previous[j], latest[s] = latest[s], j
    tag = chunks > 1
    ends = [-1, *[j for j in range(n) if last_backward[j]], n]
    return ScheduleOrder(
        stage=np.array([o[0] for o in order], dtype=np.int64),
        backward=np.array([o[1] == "B" for o in order], dtype=bool),
        microbatch=np.array([o[2] for o in order], dtype=np.int64),
        chunk=np.array([o[3] for o in order], dtype=np.int64),
        virtual=np.array([o[3] * pp + o[0] for o in order], dtype=np.int64),
        producer=np.array(producer, dtype=np.int64), previous=np.array(previous, dtype=np.int64),
        last_backward=np.array(last_backward, dtype=bool),
        prefix=tuple(f"{kind}{i} s{s} c{c} " if tag else f"{kind}{i} s{s} " for s, kind, i, c in order),
        longest_stretch=max(b - a - 1 for a, b in zip(ends, ends[1:])))
