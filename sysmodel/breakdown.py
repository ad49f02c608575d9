"""Where an iteration's time goes: the breakdown of the busiest stage's timeline.

:func:`attribute_time` takes the executed schedule and picks the pipeline stage whose compute
unit is busiest (the representative stage). Its compute time is ``compute``; every interval in
which that compute unit is idle goes to the communication active in it -- MP first, then PP,
I/O, DP, each taking only what the earlier ones left -- and what no communication covers is
``bubble``. The parts add up to the makespan.
"""

from __future__ import annotations

import itertools
from array import array
import operator

import numpy as np

from sysmodel.engine import Schedule, Timeline
from sysmodel.task_graphs import stage_resource

__all__ = ["COMM_CATEGORIES", "attribute_time", "interval_union", "interval_gaps", "interval_overlap"]

#: Communication categories in the order they claim idle compute time.
COMM_CATEGORIES = ("mp", "pp", "io", "dp")


def attribute_time(schedule: Schedule, stages: int, representative) -> tuple[dict, dict, int]:
    """(breakdown, comm_busy, stage) of ``schedule`` with ``stages`` pipeline stages.

    ``representative(stage)``: the NPU whose timeline stands for the stage (tasks of other NPUs
    of it are ignored; tasks with no NPU, such as wafer-wide I/O streams, count for every stage).
    ``breakdown``: seconds of compute, of each of :data:`COMM_CATEGORIES` and of ``bubble``;
    ``comm_busy``: seconds each category's tasks of the stage run, exposed or not; ``stage``:
    the stage chosen. The interval sweeps run over numpy arrays; every sum is taken in the
    order the plain sweep (one interval at a time) took it, so the figures are its own to the
    last bit (tests/sysmodel/test_breakdown.py)."""
    timeline = schedule.timeline()
    s, busy, compute = _busiest_stage(timeline, stages)
    npu = representative(s)
    start, end = timeline.start, timeline.end
    if timeline.kinds is not None and type(start) is array and type(end) is array \
            and type(timeline.duration) is array:
        return _attribute_compiled(timeline, s, busy, compute, npu, schedule.makespan)
    idle = interval_gaps(_floats(start, compute), _floats(end, compute), schedule.makespan)
    breakdown = {"compute": busy}
    comm_busy = {}
    # the stage's tasks (its NPU's, and those of no NPU), then each category's among them, in
    # task order: filters in numpy over the engine's codes, else by map/compress (no Python
    # frame per task either way); each sum adds the same floats in the same order
    duration = timeline.duration
    for category, tasks, durations in _category_tasks(timeline, npu):
        comm_busy[category] = sum(durations)
        if len(tasks) and len(idle[0]):
            breakdown[category], idle = interval_overlap(idle, interval_union(_floats(start, tasks), _floats(end, tasks)))
        else:
            breakdown[category] = 0.0   # what the sweep gives: nothing covered, idle unchanged
    breakdown["bubble"] = sum((idle[1] - idle[0]).tolist())
    return breakdown, comm_busy, s


def _attribute_compiled(timeline: Timeline, s: int, busy: float, compute, npu, makespan: float):
    """attribute_time's sweeps as one compiled call over an engine run's typed columns
    (:mod:`sysmodel.breakdown_compiled`: the same figures to the last bit); ``sum()`` of no
    values gives the integer 0 there, as the sweeps' ``sum()`` does."""
    from sysmodel.breakdown_compiled import attribute_columns   # numba: loaded with the engine's loop
    code, names, npus = timeline.kinds
    wanted = np.array([names.index(c) if c in names else -1 for c in COMM_CATEGORIES], dtype=np.int64)
    as_floats = np.frombuffer
    claimed, seconds, counts = attribute_columns(
        as_floats(timeline.start, dtype=np.float64), as_floats(timeline.end, dtype=np.float64),
        as_floats(timeline.duration, dtype=np.float64), compute if len(compute) else np.zeros(0, dtype=np.int64),
        makespan, code, npus, -1 if npu is None else npu, wanted)
    claimed, seconds, counts = claimed.tolist(), seconds.tolist(), counts.tolist()
    breakdown = {"compute": busy}
    comm_busy = {}
    for k, category in enumerate(COMM_CATEGORIES):
        comm_busy[category] = seconds[k] if counts[k] else 0
        breakdown[category] = claimed[k]
    breakdown["bubble"] = claimed[-1] if counts[-1] else 0
    return breakdown, comm_busy, s


def _category_tasks(timeline: Timeline, npu):
    """Per category of :data:`COMM_CATEGORIES`, (the category, its tasks of NPU ``npu`` or of
    none, in task order, their durations as a list of floats)."""
    duration = timeline.duration
    if timeline.kinds is not None:
        code, names, npus = timeline.kinds
        mine = np.flatnonzero((npus == -1) | (npus == (-1 if npu is None else npu)))
        kinds = code[mine]
        durations = np.frombuffer(duration, dtype=np.float64) if type(duration) is array else \
            np.array(duration, dtype=np.float64)
        for category in COMM_CATEGORIES:
            if category in names:
                tasks = mine[kinds == names.index(category)]
                yield category, tasks, durations[tasks].tolist()
            else:
                yield category, mine[:0], []
        return
    mine = list(itertools.compress(range(len(duration)), map({None, npu}.__contains__, timeline.npu)))
    kinds = list(map(timeline.category.__getitem__, mine))
    for category in COMM_CATEGORIES:
        tasks = list(itertools.compress(mine, map(operator.eq, kinds, itertools.repeat(category))))
        yield category, tasks, [duration[i] for i in tasks]


def _floats(column, tasks: list) -> np.ndarray:
    """``column``'s values of ``tasks`` (task numbers) as an array; ``column``: a sequence of
    floats, or a typed float64 array (an engine's run, :class:`~sysmodel.engine.Timeline`),
    gathered by numpy without a Python float per value."""
    if not len(tasks):
        return np.zeros(0)
    if type(column) is array:
        return np.frombuffer(column, dtype=np.float64).take(tasks)   # tasks: a list or a tuple
    return np.array(operator.itemgetter(*tasks)(column) if len(tasks) > 1 else [column[tasks[0]]],
                    dtype=np.float64)


def _busiest_stage(timeline: Timeline, stages: int):
    """(stage, compute seconds, its compute tasks) of the stage whose compute unit is busiest
    (the first such stage on a tie); the tasks as numbers, in task order (an intp array where
    the durations are a typed column, else the queue itself)."""
    best = None
    duration = timeline.duration
    typed = type(duration) is array
    queue_array = timeline.queue_array if typed else None
    for s in range(stages):
        name = stage_resource(s, "compute")
        if queue_array is not None:   # the run's own array of them: none made (about 20 us a stage)
            tasks = queue_array(name)
        else:
            tasks = timeline.queues.get(name, [])
            if typed and len(tasks):   # as an array once: gathered again for the chosen stage's intervals
                tasks = np.array(tasks, dtype=np.intp)
        busy = _running_sum(duration, tasks) if typed and len(tasks) else sum([duration[i] for i in tasks])
        if best is None or busy > best[1]:
            best = (s, busy, tasks)
    return best


def _running_sum(column: array, tasks) -> float:
    """``sum()`` of the typed float64 ``column``'s values of ``tasks`` (at least one), to the
    last bit, gathered by numpy: a running sum (``cumsum``) adds left to right one float at a
    time as ``sum()`` does; ``sum()`` starts from the integer 0, so a sum of negative zeros
    is +0.0 (the only difference, which adding 0.0 at the end removes)."""
    return _ordered_sum(np.frombuffer(column, dtype=np.float64).take(tasks))


def _ordered_sum(values: np.ndarray) -> float:
    """The float64 ``values`` added left to right one at a time from 0.0, as ``sum()`` (or
    ``functools.reduce(operator.add, values, 0.0)``) adds them, to the last bit: numpy's
    running sum (``cumsum``) adds in that order; starting from 0.0 differs only for a sum of
    negative zeros (+0.0, not -0.0), which adding 0.0 at the end gives. 0.0 for none."""
    if not len(values):
        return 0.0
    return 0.0 + float(values.cumsum()[-1])


def interval_union(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, disjoint union of the intervals [``start[i]``, ``end[i]``] (empty ones dropped),
    as (starts, ends). Sorted by start, an interval opens a new piece exactly when it starts
    after every earlier one has ended, and a piece ends at the running maximum of the ends
    (comparisons and maxima only: exact)."""
    kept = end > start
    a, b = start[kept], end[kept]
    order = a.argsort(kind="stable")
    a, b = a[order], b[order]
    if not len(a):
        return a, b
    reach = np.maximum.accumulate(b)
    opens = np.empty(len(a), dtype=bool)
    opens[0] = True
    np.greater(a[1:], reach[:-1], out=opens[1:])
    first = opens.nonzero()[0]
    last = np.empty_like(first)
    last[:-1] = first[1:] - 1
    last[-1] = len(a) - 1
    return a[first], reach[last]


def interval_overlap(segments: tuple[np.ndarray, np.ndarray], intervals: tuple[np.ndarray, np.ndarray]) -> tuple[float, tuple]:
    """Portions of ``segments`` covered by ``intervals`` (both sorted, disjoint unions, as
    (starts, ends)); returns (covered, rest). Segment ``i`` meets the intervals from the first
    that ends after it starts to the last that starts before it ends; each meeting covers
    [max of the starts, min of the ends], and what lies between the covered pieces of a
    segment is its rest. ``covered`` adds the pieces segment by segment, left to right, one
    at a time (the order of a sweep over both lists)."""
    seg_lo, seg_hi = segments
    iv_lo, iv_hi = intervals
    first = iv_hi.searchsorted(seg_lo, side="right")
    count = np.maximum(iv_lo.searchsorted(seg_hi, side="left") - first, 0)
    before = count.cumsum() - count                   # pieces of the earlier segments
    total = int(before[-1] + count[-1]) if len(count) else 0
    seg = np.repeat(np.arange(len(seg_lo)), count)   # the segment of each piece
    within = np.arange(total) - before[seg]           # its number within the segment
    k = first[seg] + within                           # the interval it comes from
    lo = np.maximum(seg_lo[seg], iv_lo[k])
    hi = np.minimum(seg_hi[seg], iv_hi[k])
    covered = _ordered_sum(hi - lo)
    # per segment: its start, then each piece's end; each piece's start, then its end
    at = np.arange(len(seg_lo)) + before
    rest_lo = np.empty(len(seg_lo) + total)
    rest_hi = np.empty(len(seg_lo) + total)
    rest_lo[at] = seg_lo
    rest_lo[at[seg] + 1 + within] = hi
    rest_hi[at[seg] + within] = lo
    rest_hi[at + count] = seg_hi
    open_ = rest_lo < rest_hi
    return covered, (rest_lo[open_], rest_hi[open_])


def interval_gaps(start: np.ndarray, end: np.ndarray, makespan: float) -> tuple[np.ndarray, np.ndarray]:
    """Intervals in [0, ``makespan``] covered by none of [``start[i]``, ``end[i]``], as
    (starts, ends): taken by start, an interval leaves a gap before it when it starts after
    every earlier one (and 0) has ended."""
    order = start.argsort(kind="stable")
    a, b = start[order], end[order]
    reach = np.empty(len(a) + 1)
    reach[0] = 0.0
    np.maximum.accumulate(np.maximum(b, 0.0), out=reach[1:])
    gap = a > reach[:-1]
    lo, hi = reach[:-1][gap], a[gap]
    if reach[-1] < makespan:
        lo, hi = np.concatenate((lo, reach[-1:])), np.concatenate((hi, [makespan]))
    return lo, hi
