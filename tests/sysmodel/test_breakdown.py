"""The breakdown's interval sweeps over numpy arrays (sysmodel/breakdown.py) give what the plain
sweep they replaced gave, to the last bit (docs/sysmodel.md, Speed).

The plain sweep, one interval at a time in Python, is kept here as the specification
(``_plain_*``: the code of sysmodel/breakdown.py before the arrays). Both sides are computed in
the test: random interval sets (with ties, touching and empty intervals) and the schedules of
real iterations; plus one timeline whose breakdown is worked out by hand.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from hdl.contracts.placement import parse_strategy
from sysmodel import breakdown
from sysmodel.breakdown import COMM_CATEGORIES, attribute_time
from sysmodel.engine import Schedule, Task
from sysmodel.platform import default_platform
from sysmodel.task_graphs import stage_resource
from sysmodel.training import simulate_iteration
from sysmodel.workload_file import get_workload


def _plain_union(intervals):
    out = []
    for a, b in sorted(intervals):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _plain_overlap(segments, intervals):
    covered, rest = 0.0, []
    j, n = 0, len(intervals)
    for a, b in segments:
        while j < n and intervals[j][1] <= a:
            j += 1
        cur = a
        for k in range(j, n):
            x, y = intervals[k]
            if x >= b:
                break
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


def _plain_gaps(intervals, makespan):
    gaps, cur = [], 0.0
    for start, end in sorted(intervals, key=lambda se: se[0]):
        if start > cur:
            gaps.append([cur, start])
        cur = max(cur, end)
    if cur < makespan:
        gaps.append([cur, makespan])
    return gaps


def _plain_attribute_time(schedule, stages, representative):
    timeline = schedule.timeline()
    s, busy, compute = breakdown._busiest_stage(timeline, stages)
    npu = representative(s)
    idle = _plain_gaps([(timeline.start[i], timeline.end[i]) for i in compute], schedule.makespan)
    parts, comm_busy = {"compute": busy}, {}
    by_category = {c: [] for c in COMM_CATEGORIES}
    for i, (category, on) in enumerate(zip(timeline.category, timeline.npu)):
        if category in by_category and on in (None, npu):
            by_category[category].append(i)
    start, end, duration = timeline.start, timeline.end, timeline.duration
    for category in COMM_CATEGORIES:
        mine = by_category[category]
        comm_busy[category] = sum([duration[i] for i in mine])
        parts[category], idle = _plain_overlap(idle, _plain_union([(start[i], end[i]) for i in mine]))
    parts["bubble"] = sum(b - a for a, b in idle)
    return parts, comm_busy, s


def _pairs(lo_hi):
    return [[a, b] for a, b in zip(lo_hi[0].tolist(), lo_hi[1].tolist())]


def _arrays(intervals):
    return (np.array([a for a, _ in intervals], dtype=np.float64),
            np.array([b for _, b in intervals], dtype=np.float64))


def _random_intervals(rng, n, grid):
    """``n`` intervals; on a coarse ``grid`` (ties, touching and empty ones are common) or
    with arbitrary float ends (``grid`` None)."""
    out = []
    for _ in range(n):
        if grid:
            a = rng.randrange(grid) * 0.25
            out.append((a, a + rng.randrange(-1, 4) * 0.25))
        else:
            a = rng.uniform(0, 10)
            out.append((a, a + rng.expovariate(1.0) * rng.choice([0, 1, 1, 1])))
    return out


@pytest.mark.parametrize("grid", [12, 40, None])
def test_interval_sweeps_equal_the_plain_sweep(grid):
    rng = random.Random(7 + (grid or 0))
    for _ in range(600):
        compute = [(a, b) for a, b in _random_intervals(rng, rng.randrange(0, 12), grid) if b >= a]
        makespan = max([b for _, b in compute] + [0.0]) + rng.choice([0.0, 0.5, 1.3])
        gaps = _plain_gaps(compute, makespan)
        got = breakdown.interval_gaps(*_arrays(compute), makespan)
        assert _pairs(got) == gaps
        for _ in range(3):
            comm = _random_intervals(rng, rng.randrange(0, 15), grid)
            union = _plain_union(comm)
            got_union = breakdown.interval_union(*_arrays(comm))
            assert _pairs(got_union) == union
            covered, rest = _plain_overlap(gaps, union)
            got_covered, got = breakdown.interval_overlap(_arrays(gaps) if gaps else (np.zeros(0), np.zeros(0)),
                                                  got_union)
            assert repr(got_covered) == repr(covered)   # bit for bit, and a float
            assert _pairs(got) == rest
            gaps = rest


def test_a_timeline_worked_out_by_hand():
    """Stage 0's compute runs [0, 2] and [5, 6]; makespan 10. Its idle time: [2, 5] and [6, 10].
    MP [1, 3] and [2.5, 4] (union [1, 4]) covers 2 of it ([2, 4]); PP [3.5, 7] covers what MP
    left of it: [4, 5] and [6, 7], 2; an NPU-less I/O stream [8, 8.5] 0.5; DP of NPU 1 (not
    the representative) nothing; the bubble is the rest: [7, 8] and [8.5, 10], 2.5."""
    c = stage_resource(0, "compute")

    def task(resource, category, start, end, npu=0):
        return Task("t", resource, end - start, category=category, npu=npu, start=start, end=end)
    tasks = [task(c, "compute", 0, 2), task("s0.mp", "mp", 1, 3), task("s0.mp", "mp", 2.5, 4),
             task(c, "compute", 5, 6), task("s0.pp", "pp", 3.5, 7), task("io", "io", 8, 8.5, None),
             task("s0.dp", "dp", 0, 10, npu=1)]
    parts, busy, stage = attribute_time(Schedule(tasks, makespan=10.0), 1, lambda s: 0)
    assert stage == 0
    assert parts == {"compute": 3.0, "mp": 2.0, "pp": 2.0, "io": 0.5, "dp": 0.0, "bubble": 2.5}
    assert busy == {"mp": 3.5, "pp": 3.5, "io": 0.5, "dp": 0}
    assert sum(parts.values()) == 10.0


CASES = [("resnet-152", "fred-d", None, {}), ("transformer-17b", "fred-d", None, {}),
         ("transformer-17b", "mesh", "MP2-DP4-PP2", {"dp_overlap": True}),
         ("gpt-3", "fred-c", "MP2-DP2-PP5", {"pp_overlap": True}),
         ("transformer-1t", "fred-b", None, {"dp_overlap": True, "pp_overlap": True})]


def _attribute_time_calls(name, fabric, strategy, changes, monkeypatch) -> list:
    """The arguments of every ``attribute_time`` call one simulated iteration of the case makes."""
    captured = []

    def keep(*args):
        captured.append(args)
        return attribute_time(*args)
    import sysmodel.training as training
    monkeypatch.setattr(training, "attribute_time", keep)
    platform = default_platform().scaled(**changes) if changes else default_platform()
    simulate_iteration(platform, fabric, get_workload(name),
                       parse_strategy(strategy) if strategy else None)
    return captured


@pytest.mark.parametrize("name,fabric,strategy,changes", CASES)
def test_attribute_time_equals_the_plain_sweep_on_real_schedules(name, fabric, strategy, changes, monkeypatch):
    captured = _attribute_time_calls(name, fabric, strategy, changes, monkeypatch)
    assert captured
    for args in captured:
        # repr: every float to its last bit, and int 0 where the sweep gave int 0
        assert repr(attribute_time(*args)) == repr(_plain_attribute_time(*args))


@pytest.mark.parametrize("name,fabric,strategy,changes", CASES)
def test_the_engines_task_codes_give_what_the_task_columns_give(name, fabric, strategy, changes, monkeypatch):
    """attribute_time over an engine's timeline (categories and NPUs as codes,
    Engine.task_kinds, filtered in numpy) equals it over the same run's task objects (the
    columns filtered by map/compress), to the last bit; the codes are the columns' own."""
    captured = _attribute_time_calls(name, fabric, strategy, changes, monkeypatch)
    for schedule, stages, representative in captured:
        timeline = schedule.timeline()
        assert timeline.kinds is not None
        code, names, npus = timeline.kinds
        assert [names[k] for k in code] == list(timeline.category)
        assert [None if x < 0 else x for x in npus.tolist()] == list(timeline.npu)
        plain = Schedule(schedule.tasks, makespan=schedule.makespan)
        assert plain.timeline().kinds is None
        assert repr(attribute_time(schedule, stages, representative)) == \
            repr(attribute_time(plain, stages, representative))


@pytest.mark.parametrize("name,fabric,strategy,changes", CASES)
def test_the_runs_queue_arrays_are_the_engines_queues(name, fabric, strategy, changes, monkeypatch):
    """The timeline's ``queue_array`` (slices of the compiled run's queue, which the busiest
    stage reads instead of making an array of each stage's compute queue) gives every
    resource's tasks in the queue's own order, nothing for a resource with no task; and the
    busiest stage's tasks read so are those of the queue list."""
    captured = _attribute_time_calls(name, fabric, strategy, changes, monkeypatch)
    for schedule, stages, _ in captured:
        timeline = schedule.timeline()
        assert timeline.queue_array is not None
        for resource, tasks in timeline.queues.items():
            assert timeline.queue_array(resource).tolist() == list(tasks)
        assert timeline.queue_array("s999.compute").tolist() == []
        s, busy, tasks = breakdown._busiest_stage(timeline, stages)
        assert list(tasks) == list(timeline.queues.get(stage_resource(s, "compute"), []))
        plain = Schedule(schedule.tasks, makespan=schedule.makespan).timeline()
        assert plain.queue_array is None
        assert breakdown._busiest_stage(plain, stages)[:2] == (s, busy)


def test_task_codes_are_refused_for_an_npu_that_is_no_number():
    """Engine.task_kinds gives None (the breakdown then filters the columns) where an NPU is not
    an int >= 0: -1 would read as no NPU."""
    from sysmodel.engine import Engine
    eng = Engine()
    eng.add("a", "s0.compute", 1.0, npu=0)
    eng.add("b", "s0.mp", 1.0, npu=None, category="mp")
    assert eng.task_kinds() is not None
    eng.add("c", "s0.compute", 1.0, npu=-1)
    assert eng.task_kinds() is None


def test_task_codes_keep_every_npu_number_and_refuse_what_a_float_would_round():
    """The NPU codes go through float64 (None as NaN): an NPU up to 2**53 - 1 keeps its number,
    None becomes -1, and from 2**53 on (where a float rounds) the codes are refused."""
    from sysmodel.engine import Engine
    eng = Engine()
    for k, npu in enumerate((3, None, 2 ** 53 - 1, 0, None)):
        eng.add(f"t{k}", "s0.compute", 1.0, npu=npu)
    assert eng.task_kinds()[2].tolist() == [3, -1, 2 ** 53 - 1, 0, -1]
    eng.add("big", "s0.compute", 1.0, npu=2 ** 53 + 1)
    assert eng.task_kinds() is None


def test_the_running_sum_is_sums_to_the_last_bit():
    """breakdown._running_sum (numpy's cumsum over a typed column) gives sum()'s float, bit for
    bit: random magnitudes over 30 orders (where the order of the additions shows), a sum of
    negative zeros (+0.0 in sum()), and one value."""
    from array import array
    rng = random.Random(7)
    for _ in range(200):
        values = [rng.choice((1, -1)) * 10 ** rng.uniform(-15, 15) for _ in range(rng.randint(1, 60))]
        column = array("d", values)
        tasks = sorted(rng.sample(range(len(values)), rng.randint(1, len(values))))
        assert breakdown._running_sum(column, tasks).hex() == sum([values[i] for i in tasks]).hex()
    zeros = array("d", [-0.0, -0.0])
    assert breakdown._running_sum(zeros, [0, 1]).hex() == sum([-0.0, -0.0]).hex() == (0.0).hex()
    assert breakdown._running_sum(array("d", [-0.0, 2.5]), [1, 0]) == 2.5
    assert breakdown._running_sum(array("d", [0.1, 0.2, 0.3]), [2]) == 0.3


def test_the_ordered_sum_adds_as_a_reduce_from_zero_does():
    """breakdown._ordered_sum (interval_overlap's covered time) gives functools.reduce(add, ...,
    0.0)'s float bit for bit (what interval_overlap summed before): random magnitudes over 30
    orders, none (0.0), negative zeros; and the running sum of a typed column's tasks,
    gathered from a list or from an intp array (the busiest stage's), is the same float."""
    import functools
    import operator
    from array import array
    rng = random.Random(11)
    for _ in range(200):
        values = [rng.choice((1, -1)) * 10 ** rng.uniform(-15, 15) for _ in range(rng.randint(1, 60))]
        assert breakdown._ordered_sum(np.array(values)).hex() == \
            functools.reduce(operator.add, values, 0.0).hex()
        tasks = sorted(rng.sample(range(len(values)), rng.randint(1, len(values))))
        column = array("d", values)
        assert breakdown._running_sum(column, tasks).hex() == \
            breakdown._running_sum(column, np.array(tasks, dtype=np.intp)).hex()
    assert breakdown._ordered_sum(np.zeros(0)) == 0.0
    assert breakdown._ordered_sum(np.array([-0.0, -0.0])).hex() == (0.0).hex()


@pytest.mark.parametrize("grid", [12, 40, None])
def test_compiled_sweeps_equal_the_numpy_sweeps(grid):
    """sysmodel.breakdown_compiled's gaps, union and overlap give the numpy functions' arrays
    and covered seconds bit for bit (random sets with ties, touching and empty intervals, each
    category's rest fed to the next as attribute_time does)."""
    from sysmodel import breakdown_compiled as compiled
    rng = random.Random(11 + (grid or 0))
    for _ in range(400):
        compute = _random_intervals(rng, rng.randrange(0, 12), grid)
        makespan = max([b for _, b in compute] + [0.0]) + rng.choice([0.0, 0.5, 1.3])
        want = breakdown.interval_gaps(*_arrays(compute), makespan)
        got = compiled._gaps(*_arrays(compute), makespan)
        assert _pairs(got) == _pairs(want)
        for _ in range(3):
            comm = _arrays(_random_intervals(rng, rng.randrange(0, 15), grid))
            union = breakdown.interval_union(*comm)
            assert _pairs(compiled._union(*comm)) == _pairs(union)
            if not len(want[0]) or not len(union[0]):
                continue   # attribute_time claims nothing then (its numpy path does not call)
            covered, want = breakdown.interval_overlap(want, union)
            got_covered, *got = compiled._overlap(*got, *union)
            assert repr(got_covered) == repr(covered)
            assert _pairs(got) == _pairs(want)


def test_compiled_attribution_by_hand_and_sums_of_none():
    """attribute_columns on test_a_timeline_worked_out_by_hand's run: the same seconds; a
    category with no task of the stage counts 0 tasks (its busy seconds the integer 0 for the
    caller), and an idle time fully covered leaves 0 intervals for the bubble."""
    from sysmodel.breakdown_compiled import attribute_columns
    # tasks: compute [0,2], mp [1,3], mp [2.5,4], compute [5,6], pp [3.5,7], io [8,8.5] (no NPU),
    # dp [0,10] on NPU 1; codes: compute 0, mp 1, pp 2, io 3, dp 4
    start = np.array([0, 1, 2.5, 5, 3.5, 8, 0.0])
    end = np.array([2, 3, 4, 6, 7, 8.5, 10.0])
    code = np.array([0, 1, 1, 0, 2, 3, 4])
    npus = np.array([0, 0, 0, 0, 0, -1, 1])
    claimed, busy, counts = attribute_columns(start, end, end - start, np.array([0, 3]), 10.0, code, npus, 0,
                                              np.array([1, 2, 3, 4]))
    assert claimed.tolist() == [2.0, 2.0, 0.5, 0.0, 2.5]
    assert busy.tolist() == [3.5, 3.5, 0.5, 0.0] and counts.tolist() == [2, 1, 1, 0, 2]
    # NPU 1's view: the dp task [0, 10] covers all the idle time
    claimed, busy, counts = attribute_columns(start, end, end - start, np.array([0, 3]), 10.0, code, npus, 1,
                                              np.array([-1, -1, 3, 4]))
    assert claimed.tolist() == [0.0, 0.0, 0.5, 6.5, 0.0] and counts.tolist() == [0, 0, 1, 1, 0]
