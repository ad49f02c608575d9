"""Pipeline schedules: the order in which one pipeline stage runs its forward and backward
passes (GPipe, 1F1B, and Megatron's interleaved 1F1B over several model chunks per stage).
:mod:`sysmodel.task_graphs` turns these orders into tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hdl.contracts.errors import FredError
from sysmodel.model_cache import current

__all__ = ["pipeline_ops", "interleaved_ops", "stage_passes", "ScheduleOrder", "PassPrefixes", "schedule_order"]


def pipeline_ops(schedule: str, stage: int, pp: int, m: int) -> list[tuple[str, int]]:
    """Order of ``stage``'s forward ("F", microbatch) and backward ("B", microbatch) passes
    over ``m`` microbatches in a ``pp``-stage pipeline: GPipe (all forwards, then all backwards
    in reverse) or 1F1B (PP - stage - 1 warm-up forwards, then alternating, then the rest)."""
    backward, microbatch, _ = stage_passes(schedule, np.array([stage]), pp, m, 1)
    return [("B" if b else "F", i) for b, i in zip(backward[0].tolist(), microbatch[0].tolist())]


def interleaved_ops(stage: int, pp: int, m: int, chunks: int) -> list[tuple[str, int, int]]:
    """Order of ``stage``'s (kind, microbatch, model chunk) passes in Megatron's interleaved
    1F1B (Narayanan et al. 2021) with ``chunks`` model chunks per stage: forward k runs chunk
    (k // pp) % chunks of microbatch (k // (pp*chunks))*pp + k % pp; backward k the chunks in
    reverse; (pp - stage - 1)*2 + (chunks - 1)*pp warm-up forwards, then one forward / one
    backward alternately, then the remaining backwards. ``m`` must be a multiple of ``pp``."""
    backward, microbatch, chunk = stage_passes("1f1b", np.array([stage]), pp, m, chunks)
    return [("B" if b else "F", i, c)
            for b, i, c in zip(backward[0].tolist(), microbatch[0].tolist(), chunk[0].tolist())]


def stage_passes(schedule: str, stages: np.ndarray, pp: int, m: int, chunks: int) -> tuple:
    """(backward, microbatch, chunk): (len(stages), 2 m chunks) arrays, row r the passes of
    stage ``stages[r]`` in its order -- GPipe, 1F1B (:func:`pipeline_ops`) or, with ``chunks``
    > 1, the interleaved 1F1B (:func:`interleaved_ops`) -- written as arrays, all stages at
    once: row r holds ``warm`` forwards, then forward and backward alternately, then the
    backwards left; the k-th forward (backward) of a row is the schedule's k-th."""
    if chunks > 1:
        if schedule != "1f1b":
            raise FredError("the interleaved pipeline schedule is a 1F1B schedule; use --schedule 1f1b")
        if m % pp:
            raise FredError(f"the interleaved schedule needs the microbatches ({m}) to be a "
                            f"multiple of PP ({pp})")
    total = m * chunks
    t = np.arange(2 * total)[None, :]
    s = np.asarray(stages, dtype=np.int64)[:, None]
    if schedule == "gpipe":
        backward = np.broadcast_to(t >= total, (len(s), 2 * total))
        k = np.where(backward, t - total, t)
        return backward, np.where(backward, m - 1 - k, k), np.zeros_like(k)
    warm = np.minimum((pp - s - 1) * 2 + (chunks - 1) * pp if chunks > 1 else pp - s - 1, total)
    backward = (t >= 2 * total - warm) | ((t >= warm) & ((t - warm) % 2 == 1))
    k = np.where(backward, np.cumsum(backward, axis=1), np.cumsum(~backward, axis=1)) - 1
    microbatch = k // (pp * chunks) * pp + k % pp
    chunk = k // pp % chunks
    return backward, microbatch, np.where(backward, chunks - 1 - chunk, chunk)


class PassPrefixes:
    """Each pass's task-name prefix (``"F3 s1 "``, with ``"c2 "`` after it when there are
    several chunks), made when read: a sequence over a :class:`ScheduleOrder`'s passes (or a
    slice of them). Why not strings made up front: one per pass cost 10-20 ms on the
    validation's 60,000-pass pipelines, and a graph reads them only one at a time for the
    passes it appends singly (some 2,000-3,400 of them: each made once and kept, so a graph
    built again from the kept order reads them as fast as from a tuple), or all of a stretch
    when its task names are asked for."""

    __slots__ = ("_backward", "_microbatch", "_stage", "_chunk", "_chunks", "_made")

    def __init__(self, backward: np.ndarray, microbatch: np.ndarray, stage: np.ndarray, chunk: np.ndarray,
                 chunks: bool):
        self._backward, self._microbatch, self._stage, self._chunk = backward, microbatch, stage, chunk
        self._chunks = chunks   # whether the names carry the chunk
        self._made: dict = {}   # pass -> its prefix, read one at a time

    def __len__(self) -> int:
        return len(self._stage)

    def __getitem__(self, j):
        if isinstance(j, slice):
            return PassPrefixes(self._backward[j], self._microbatch[j], self._stage[j], self._chunk[j], self._chunks)
        name = self._made.get(j)
        if name is None:   # .item: Python numbers, which format several times faster than numpy's
            name = f"{'B' if self._backward.item(j) else 'F'}{self._microbatch.item(j)} s{self._stage.item(j)} "
            if self._chunks:
                name += f"c{self._chunk.item(j)} "
            self._made[j] = name
        return name

    def __iter__(self):
        kinds = np.where(self._backward, "B", "F").tolist()
        columns = zip(kinds, self._microbatch.tolist(), self._stage.tolist(), self._chunk.tolist())
        if self._chunks:
            return (f"{k}{i} s{s} c{c} " for k, i, s, c in columns)
        return (f"{k}{i} s{s} " for k, i, s, _ in columns)

    def __array__(self, dtype=None, copy=None):   # np.array(prefixes, dtype=object): the strings
        return np.array(list(self), dtype=object if dtype is None else dtype)


@dataclass(frozen=True)
class ScheduleOrder:
    """Every stage's passes in the order the task graph adds them (:func:`schedule_order`), as
    arrays indexed by pass: ``stage``, ``backward`` (bool), ``microbatch``, ``chunk``,
    ``virtual`` (virtual stage chunk * PP + stage), ``producer`` (the pass whose send it waits
    for: the previous virtual stage's forward, the next one's backward; -1: none),
    ``previous`` (the stage's pass before it; -1: none), ``last_backward`` (the virtual stage's
    last backward, which fills the gradient buckets) and ``prefix`` (its tasks' name prefix,
    ``"F3 s1 "``, with ``"c2 "`` after it when there are several chunks: :class:`PassPrefixes`,
    made when read)."""

    stage: np.ndarray
    backward: np.ndarray
    microbatch: np.ndarray
    chunk: np.ndarray
    virtual: np.ndarray
    producer: np.ndarray
    previous: np.ndarray
    last_backward: np.ndarray
    prefix: PassPrefixes

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


def _schedule_order(schedule: str, pp: int, m: int, chunks: int) -> ScheduleOrder:
    # a pass is numbered (backward * virtual stages + virtual stage) * m + microbatch; the
    # round-robin runs over those numbers, compiled (sysmodel.schedule_order_compiled)
    from sysmodel.schedule_order_compiled import round_robin
    virtual_stages = pp * chunks
    backward, microbatch, chunk = stage_passes(schedule, np.arange(pp), pp, m, chunks)
    v = chunk * pp + np.arange(pp)[:, None]
    codes = np.where(backward, (virtual_stages + v) * m + microbatch, v * m + microbatch)
    needs = np.where(backward, np.where(v < virtual_stages - 1, (virtual_stages + v + 1) * m + microbatch, -1),
                     np.where(v > 0, (v - 1) * m + microbatch, -1))
    order, number, placed = round_robin(codes, needs, 2 * virtual_stages * m)
    if placed < codes.size:
        raise FredError("internal: pipeline schedule could not be ordered")
    return _order_arrays(order, number, codes, pp, m, chunks)


def _order_arrays(code: np.ndarray, number: np.ndarray, rows: np.ndarray, pp: int, m: int, chunks: int) -> ScheduleOrder:
    """The :class:`ScheduleOrder` of the passes ``code`` (in order; ``number``: code -> place;
    ``rows``: each stage's codes in its own order)."""
    virtual_stages = pp * chunks
    n = len(code)
    microbatch = code % m
    backward = code // m >= virtual_stages
    virtual = code // m % virtual_stages
    stage, chunk = virtual % pp, virtual // pp
    waits_for = np.where(backward, (virtual_stages + virtual + 1) * m + microbatch, (virtual - 1) * m + microbatch)
    has_producer = np.where(backward, virtual < virtual_stages - 1, virtual > 0)
    producer = np.where(has_producer, number[np.where(has_producer, waits_for, 0)], -1)
    # the stage's previous pass: the one before it in the stage's own order
    previous = np.full(n, -1, dtype=np.int64)
    previous[number[rows[:, 1:]]] = number[rows[:, :-1]]
    # each virtual stage's last backward: its backward of the largest place
    last_backward = np.zeros(n, dtype=bool)
    places = np.flatnonzero(backward)
    _, from_last = np.unique(virtual[places][::-1], return_index=True)   # each one's last, read backwards
    last_backward[places[len(places) - 1 - from_last]] = True
    prefix = PassPrefixes(backward, microbatch, stage, chunk, chunks > 1)
    return ScheduleOrder(stage=stage, backward=backward, microbatch=microbatch, chunk=chunk, virtual=virtual,
                         producer=producer, previous=previous, last_backward=last_backward, prefix=prefix)
