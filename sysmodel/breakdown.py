"""Where an iteration's time goes: the breakdown of the busiest stage's timeline.

:func:`attribute_time` takes the executed schedule and picks the pipeline stage whose compute
unit is busiest (the representative stage). Its compute time is ``compute``; every interval in
which that compute unit is idle goes to the communication active in it -- MP first, then PP,
I/O, DP, each taking only what the earlier ones left -- and what no communication covers is
``bubble``. The parts add up to the makespan.
"""

from __future__ import annotations

from sysmodel.engine import Schedule
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
    s, busy, compute = _busiest_stage(schedule, stages)
    npu = representative(s)
    idle = _gaps(compute, schedule.makespan)
    breakdown = {"compute": busy}
    comm_busy = {}
    for category in COMM_CATEGORIES:
        mine = [t for t in schedule.tasks if t.category == category and t.npu in (None, npu)]
        comm_busy[category] = sum(t.duration for t in mine)
        breakdown[category], idle = _overlap(idle, _union([(t.start, t.end) for t in mine]))
    breakdown["bubble"] = sum(b - a for a, b in idle)
    return breakdown, comm_busy, s


def _busiest_stage(schedule: Schedule, stages: int):
    """(stage, compute seconds, its compute tasks) of the stage whose compute unit is busiest
    (the first such stage on a tie)."""
    best = None
    for s in range(stages):
        tasks = [t for t in schedule.tasks if t.resource == stage_resource(s, "compute")]
        busy = sum(t.duration for t in tasks)
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


def _gaps(tasks, makespan: float) -> list[list[float]]:
    """Intervals in [0, makespan] in which none of ``tasks`` runs."""
    gaps, cur = [], 0.0
    for t in sorted(tasks, key=lambda t: t.start):
        if t.start > cur:
            gaps.append([cur, t.start])
        cur = max(cur, t.end)
    if cur < makespan:
        gaps.append([cur, makespan])
    return gaps
