"""A long 1F1B pipeline iteration from two short ones: its steady-state periods collapsed
(docs/sysmodel.md, Speed, twenty-second increment; issue 31).

In a weight-stationary 1F1B pipeline every stage runs, after its warm-up, one forward and one
backward per microbatch; with more microbatches the schedule only has more of these steady
periods (a period: one microbatch; with the interleaved schedule, PP microbatches, the
schedule's own repeat). If the engine's state repeats exactly from one period to the next --
the same tasks running, with the same progress, one period's time ``P`` later -- then an
iteration of ``m`` microbatches is one of ``m_a`` with ``(m - m_a) / q`` periods of ``P``
inserted, and every figure it reports (the makespan, each breakdown part, each category's busy
time) grows by the same amount per period.

:func:`collapsed_iteration` runs the iteration at ``m_a`` and at ``m_b = m_a + q`` microbatches
(the same microbatch size, so the same tasks per microbatch) and **checks** that the second
run is the first with one period inserted, on every resource of the graph: its queue of tasks
has ``k`` more tasks, the ones before some place ``x`` start and end when the first run's do,
and every one from ``x`` on starts and ends exactly ``P`` after the first run's task ``k``
places earlier (so the inserted period is a copy of the one before it, shifted by ``P``, and
everything after it is the first run's, shifted) -- :func:`inserted_period`. It also checks
that the representative (busiest) stage is the same in both runs and stays the busiest when
its compute time is carried to ``m``. Only then are the figures carried to ``m``
(``figure(m_b) + n * (figure(m_b) - figure(m_a))``, ``n = (m - m_b) / q``); otherwise it
returns None and the caller runs the whole iteration. Compared to the whole iteration, the
figures are equal to 1e-9 of the iteration (tests/sysmodel/test_pipeline_collapse.py), not to
the bit: the engine's times are running sums, and a carried figure adds its periods in another
order.

Used where the two runs cost much less than the whole one (``m_a + m_b <= m / 2``): the
validation's Megatron-1T cases (PP 64, 512 microbatches: runs of 65 and 66). What the check
compares is the executed timelines, not a proof from the graph: a case whose state does not
repeat (a transfer whose rate changes from one period to the next, a busiest stage that
changes) fails it and is run whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hdl.contracts.errors import FredError
from sysmodel.breakdown import attribute_time
from sysmodel.iteration_plan import plan_iteration
from sysmodel.platform import Platform
from sysmodel.task_graphs import StageEngine, stage_resource
from sysmodel.training import (IterationResult, _cyclic_gc_paused, build_task_graph, link_priority,
                               mean_iteration_s)
from sysmodel.workloads import Workload

__all__ = ["collapsed_iteration", "inserted_period", "short_runs", "TOLERANCE"]

#: Largest difference, relative to the longer run's makespan, at which two event times count as
#: equal in :func:`inserted_period` (the engine's times are running sums: a shifted copy
#: differs from its original in the last bits, about 1e-15 of the makespan; 1e-12 carried over
#: 500 periods stays below 1e-9).
TOLERANCE = 1e-12


@dataclass(frozen=True)
class _Run:
    """One short run's figures and executed timeline."""

    microbatches: int
    makespan: float
    breakdown: dict
    busy: dict
    stage: int
    stage_compute: list     # each stage's compute seconds
    tasks: int
    config_load: float
    queues: dict            # resource -> (starts, ends) of its tasks, in order


def short_runs(platform: Platform, workload: Workload, microbatches: int, pp: int,
               chunks: int) -> tuple[int, int] | None:
    """(m_a, m_b) for an iteration of ``microbatches``: ``m_a`` the first multiple of the
    period ``q`` (1 microbatch; PP with ``chunks`` > 1, the interleaved schedule's repeat) at
    which stage 0 -- the longest warm-up, ``PP - 1`` forwards, or ``2 (PP - 1) + (chunks - 1)
    PP`` interleaved -- runs more than one period's passes (``q * chunks`` forward-backward
    pairs) in its steady part, ``m_b = m_a + q``; None when the two together are more than
    half of ``microbatches`` (then the whole run costs little more) or there is no pipeline.
    (Below that count the check fails: measured on PP 4 and 64, plain and interleaved.)"""
    if pp < 2:
        return None
    q = pp if chunks > 1 else 1
    warm = 2 * (pp - 1) + (chunks - 1) * pp if chunks > 1 else pp - 1
    m_a = q
    while chunks * m_a - warm < q * chunks + 1:
        m_a += q
    m_b = m_a + q
    if m_a + m_b > microbatches / 2 or (microbatches - m_b) % q:
        return None
    return m_a, m_b


def collapsed_iteration(platform: Platform, fabric: str, workload: Workload, *,
                        microbatches: int | None = None) -> tuple[IterationResult, tuple] | None:
    """What ``simulate_iteration(platform, fabric, workload, microbatches=microbatches)`` gives
    (the 1F1B schedule, overlapped communication, the workload's strategy and samples), to 1e-9
    of the iteration, from two short runs (see the module docstring), with the runs'
    microbatches ``(m_a, m_b)``; None where it does not
    apply (not a weight-stationary pipeline, too few microbatches to gain) or the check fails.
    Latency: two iterations of ``m_a`` and ``m_b`` microbatches instead of one of ``m``."""
    if workload.mode != "weight-stationary":
        return None
    plan = plan_iteration(platform, workload, None, schedule="1f1b", microbatches=microbatches)
    pp, m = plan.strategy.pp, plan.microbatches
    runs = short_runs(platform, workload, m, pp, plan.chunks)
    if runs is None:
        return None
    with _cyclic_gc_paused():   # as simulate_iteration: the graphs' objects are acyclic
        a, b = (_short_run(platform, fabric, workload, plan, k) for k in runs)
    if a is None or b is None:
        return None
    shift = b.makespan - a.makespan
    if not _repeats(a, b, shift):
        return None
    n = (m - b.microbatches) // (b.microbatches - a.microbatches)

    def carried(x: float, y: float) -> float:
        return y + n * (y - x)

    compute = [carried(x, y) for x, y in zip(a.stage_compute, b.stage_compute)]
    if a.stage != b.stage or _busiest(compute) != b.stage:
        return None
    makespan = carried(a.makespan, b.makespan)
    breakdown = {part: carried(a.breakdown[part], value) for part, value in b.breakdown.items()}
    breakdown["config_load"] = b.config_load / platform.iterations
    busy = {part: carried(a.busy[part], value) for part, value in b.busy.items()}
    return IterationResult(workload=workload.name, fabric=fabric, strategy=str(plan.strategy),
                           schedule="1f1b",
                           time_s=mean_iteration_s(makespan, b.config_load, platform.iterations),
                           breakdown=breakdown, comm_busy=busy, memory=plan.memory,
                           microbatches=m, samples_per_dp=plan.samples_per_dp,
                           tasks=b.tasks + n * (b.tasks - a.tasks), notes=plan.notes(),
                           steady_time_s=makespan, config_load_s=b.config_load,
                           iterations=platform.iterations, npus_used=plan.strategy.npus,
                           idle_npus=plan.idle_npus), runs


def _short_run(platform, fabric, workload, plan, k: int) -> _Run | None:
    """The iteration of ``plan`` at ``k`` microbatches of the same size, run as
    :func:`sysmodel.training.simulate_iteration` runs it (overlapped, the compiled engine)."""
    if plan.samples_per_dp % plan.microbatches:
        return None
    try:   # a short run that does not plan as the whole one (memory, microbatches) is not used
        short = plan_iteration(platform, workload, None, schedule="1f1b",
                               samples_per_dp=k * (plan.samples_per_dp // plan.microbatches), microbatches=k)
    except FredError:
        return None
    if short.microbatches != k or short.microbatch_samples != plan.microbatch_samples \
            or short.chunks != plan.chunks or short.strategy != plan.strategy:
        return None
    eng = StageEngine(blocking=False, **link_priority(platform, fabric))
    comm = build_task_graph(eng, short, fabric)
    executed = eng.run()
    breakdown, busy, stage = attribute_time(executed, short.strategy.pp, short.representative)
    timeline = executed.timeline()
    start, end = np.asarray(timeline.start, dtype=np.float64), np.asarray(timeline.end, dtype=np.float64)
    stage_compute = []
    for s in range(short.strategy.pp):
        tasks = timeline.queues.get(stage_resource(s, "compute"), [])
        stage_compute.append(float(np.asarray(timeline.duration, dtype=np.float64)[tasks].sum()) if tasks else 0.0)
    queues = {r: (start[q], end[q]) for r, q in timeline.queues.items()}
    return _Run(k, executed.makespan, breakdown, busy, stage, stage_compute, len(eng),
                comm.config_load_s(), queues)


def _repeats(a: _Run, b: _Run, shift: float) -> bool:
    """Whether run ``b`` is run ``a`` with one period of ``shift`` seconds inserted, on every
    resource (:func:`inserted_period`)."""
    if set(a.queues) != set(b.queues) or not shift > 0:
        return False
    tol = TOLERANCE * b.makespan
    return all(inserted_period(a.queues[r], b.queues[r], shift, tol) for r in b.queues)


def inserted_period(a: tuple, b: tuple, shift: float, tol: float) -> bool:
    """Whether the (starts, ends) ``b`` of a resource's tasks are ``a``'s with ``k = len(b) -
    len(a)`` tasks inserted at some place ``x``: ``b[i] == a[i]`` for ``i < x`` and ``b[i] ==
    a[i - k] + shift`` for ``i >= x`` (within ``tol`` seconds, starts and ends alike), with
    ``x >= k`` (the inserted tasks are a copy of the ``k`` before them, shifted)."""
    (sa, ea), (sb, eb) = a, b
    k = len(sb) - len(sa)
    if k < 0:
        return False
    # the longest prefix equal to a's
    n = len(sa)
    same = (np.abs(sb[:n] - sa) <= tol) & (np.abs(eb[:n] - ea) <= tol)
    prefix = n if same.all() else int(np.argmin(same))
    # the shortest suffix (from place >= k) equal to a's, k places earlier, shifted
    moved = (np.abs(sb[k:] - (sa + shift)) <= tol) & (np.abs(eb[k:] - (ea + shift)) <= tol)
    bad = np.flatnonzero(~moved)
    suffix_from = k + (int(bad[-1]) + 1 if len(bad) else 0)
    return suffix_from <= prefix


def _busiest(compute: list) -> int:
    """The stage :func:`sysmodel.breakdown.attribute_time` picks: the first of the largest."""
    best = 0
    for s, c in enumerate(compute):
        if c > compute[best]:
            best = s
    return best
