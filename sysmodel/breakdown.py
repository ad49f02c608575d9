"""Where an iteration's time goes: the breakdown of the busiest stage's timeline.

:func:`attribute_time` takes the executed schedule and picks the pipeline stage whose compute
unit is busiest (the representative stage). Its compute time is ``compute``; every interval in
which that compute unit is idle goes to the communication active in it -- MP first, then PP,
I/O, DP, each taking only what the earlier ones left -- and what no communication covers is
``bubble``. The parts add up to the makespan.
"""

from __future__ import annotations

from sysmodel.engine import Schedule, Timeline
from sysmodel.task_graphs import stage_resource

__all__ = ["COMM_CATEGORIES", "attribute_time"]

#: Communication categories in the order they claim idle compute time.
COMM_CATEGORIES = ("mp", "pp", "io", "dp")


def attribute_time(schedule: Schedule, stages: int, representative) -> tuple[dict, dict, int]:
    """(breakdown, comm_busy, stage) of ``schedule`` with ``stages`` pipeline stages.

    ``representative(stage)``: the NPU whose timeline stands for the stage (tasks of other NPUs
    of it are ignored; tasks with no NPU, such as wafer-wide I/O streams, count for every stage).
    ``breakdown``: seconds of compute, of each of :data:`COMM_CATEGORIES` and of ``bubble``;
    ``comm_busy``: seconds each category's tasks of the stage run, exposed or not; ``stage``:
    the stage chosen."""
    timeline = schedule.timeline()
    s, busy, compute = _busiest_stage(timeline, stages)
    npu = representative(s)
    idle = _gaps([(timeline.start[i], timeline.end[i]) for i in compute], schedule.makespan)
    breakdown = {"compute": busy}
    comm_busy = {}
    by_category: dict[str, list] = {c: [] for c in COMM_CATEGORIES}   # one pass over the tasks
    for i, (category, on) in enumerate(zip(timeline.category, timeline.npu)):
        if category in by_category and on in (None, npu):
            by_category[category].append(i)
    start, end, duration = timeline.start, timeline.end, timeline.duration
    for category in COMM_CATEGORIES:
        mine = by_category[category]
        comm_busy[category] = sum([duration[i] for i in mine])
        breakdown[category], idle = _overlap(idle, _union([(start[i], end[i]) for i in mine]))
    breakdown["bubble"] = sum(b - a for a, b in idle)
    return breakdown, comm_busy, s


def _busiest_stage(timeline: Timeline, stages: int):
    """(stage, compute seconds, its compute tasks) of the stage whose compute unit is busiest
    (the first such stage on a tie); the tasks as numbers, in task order."""
    best = None
    duration = timeline.duration
    for s in range(stages):
        tasks = timeline.queues.get(stage_resource(s, "compute"), [])
        busy = sum([duration[i] for i in tasks])
        if best is None or busy > best[1]:
            best = (s, busy, tasks)
    return best


def _union(intervals) -> list[list[float]]:
    """Sorted, disjoint union of (start, end) intervals (empty ones dropped)."""
    out = []
    for a, b in sorted(intervals):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _overlap(segments, intervals) -> tuple[float, list]:
    """Portions of ``segments`` covered by ``intervals`` (both sorted, disjoint unions); returns
    (covered, rest). One sweep over both: intervals that end before a segment starts are
    passed for good, and none after one that starts past a segment's end is looked at."""
    covered, rest = 0.0, []
    j, n = 0, len(intervals)
    for a, b in segments:
        while j < n and intervals[j][1] <= a:
            j += 1
        cur = a
        for k in range(j, n):
            x, y = intervals[k]
            if x >= b:
                break   # sorted: every later interval starts past the segment too
            if y <= cur:
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


def _gaps(intervals, makespan: float) -> list[list[float]]:
    """Intervals in [0, makespan] covered by none of ``intervals`` ((start, end) pairs)."""
    gaps, cur = [], 0.0
    for start, end in sorted(intervals, key=lambda se: se[0]):
        if start > cur:
            gaps.append([cur, start])
        cur = max(cur, end)
    if cur < makespan:
        gaps.append([cur, makespan])
    return gaps
