"""The executed schedule of training iterations as a Chrome trace-event JSON file.

``fred sweep/eval/validate --trace FILE`` write one: it opens in Perfetto
(https://ui.perfetto.dev) or ``chrome://tracing`` and shows where a pipeline stage computes,
communicates and waits. (:mod:`sysmodel.trace` is something else: imported execution traces
replayed on a fabric.)

Layout (the Trace Event Format's JSON object form, ``{"traceEvents": [...]}``):

* one **process** per iteration written (e.g. one per workload and fabric), named after it;
  its ``args`` carry the makespan and the breakdown;
* one **track** (thread) per resource of the task-graph engine: each pipeline stage's compute
  unit (its representative NPU, MP rank 0 of DP replica 0) and each of its communication
  channels -- the link classes MP, PP, DP and I/O (FRED's virtual channels) -- plus any
  wafer-wide channel; sorted by stage, then compute before MP, PP, DP, I/O;
* one **complete event** (``"ph": "X"``) per task: its name (e.g. ``B3 s1 block7``,
  ``F0 s0 send``, ``dp s2 block9..block8``, ``optimizer s0``), its category (compute, mp, pp,
  dp, io) and its start and duration in microseconds (the format's unit) from the start of
  the iteration. A resource runs one task at a time, so events on a track never overlap; a
  gap on a compute track is time the stage waits.

One iteration is the steady one (:attr:`sysmodel.training.IterationResult.steady_time_s`:
without the first iteration's one-time switch configuration load).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hdl.contracts.errors import FredError

__all__ = ["executed_iteration", "trace_events", "write_trace", "check_writable", "TraceRecorder"]

#: track order within a stage: compute first, then the link classes
_KIND_ORDER = {"compute": 0, "mp": 1, "pp": 2, "dp": 3, "io.in": 4, "io.out": 5}


def check_writable(path) -> Path:
    """``path`` as a :class:`Path`, or a :class:`FredError` naming it when a file cannot be
    written there (its folder missing or not writable, or it is a folder): checked before a
    command does its work, so that a long run does not fail at its end."""
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise FredError(f"--trace {path}: is a directory")
    if not folder.is_dir():
        raise FredError(f"--trace {path}: folder {folder} does not exist")
    if p.exists() and not os.access(p, os.W_OK) or not p.exists() and not os.access(folder, os.W_OK):
        raise FredError(f"--trace {path}: not writable")
    return p


def executed_iteration(platform, fabric: str, workload, strategy=None, *, schedule: str = "1f1b",
                       samples_per_dp: int | None = None, microbatches: int | None = None,
                       overlap: bool = True):
    """(plan, executed :class:`~sysmodel.engine.Schedule`) of one iteration: the arguments
    of :func:`sysmodel.training.simulate_iteration`, the graph built and run as it does
    (without its re-timed graph templates, whose schedules are the same to 1e-9)."""
    from sysmodel.iteration_plan import plan_iteration
    from sysmodel.task_graphs import StageEngine
    from sysmodel.training import build_task_graph, link_priority
    platform.check_fabric(fabric)
    plan = plan_iteration(platform, workload, strategy, schedule=schedule,
                          samples_per_dp=samples_per_dp, microbatches=microbatches)
    eng = StageEngine(blocking=not overlap, **link_priority(platform, fabric))
    build_task_graph(eng, plan, fabric)
    return plan, eng.run()


def _track_key(resource: str) -> tuple:
    """Sort key of a resource's track: stage, then compute before each link class; wafer-wide
    channels (no ``s<stage>.`` prefix) last."""
    head, _, kind = resource.partition(".")
    if head.startswith("s") and head[1:].isdigit():
        return (0, int(head[1:]), _KIND_ORDER.get(kind, 9), kind)
    return (1, 0, _KIND_ORDER.get(resource, 9), resource)


def _track_name(resource: str, plan) -> str:
    head, _, kind = resource.partition(".")
    if head.startswith("s") and head[1:].isdigit():
        stage = int(head[1:])
        return f"stage {stage} (NPU {plan.representative(stage)}) {kind}"
    return f"wafer {resource}"


def trace_events(plan, executed, *, pid: int, label: str, args: dict | None = None) -> list[dict]:
    """The trace events of one executed iteration (see the module docstring) as process
    ``pid`` named ``label``; ``args``: shown with the process (e.g. the breakdown)."""
    resources = sorted({t.resource for t in executed.tasks}, key=_track_key)
    tid = {r: i + 1 for i, r in enumerate(resources)}
    events = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": label}},
              {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}}]
    if args:
        events.append({"ph": "M", "name": "process_labels", "pid": pid, "tid": 0,
                       "args": {"labels": ", ".join(f"{k} {v}" for k, v in args.items())}})
    for r in resources:
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid[r],
                       "args": {"name": _track_name(r, plan)}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid[r],
                       "args": {"sort_index": tid[r]}})
    for t in executed.tasks:
        events.append({"ph": "X", "name": t.name, "cat": t.category, "pid": pid, "tid": tid[t.resource],
                       "ts": t.start * 1e6, "dur": (t.end - t.start) * 1e6})
    return events


class TraceRecorder:
    """Collects iterations (:meth:`add`) and writes them to one file (:meth:`write`)."""

    def __init__(self, path):
        self.path = check_writable(path)
        self.events: list[dict] = []
        self.iterations: list[dict] = []

    def add(self, label: str, platform, fabric: str, workload, strategy=None, **options) -> None:
        """Simulate one iteration (:func:`executed_iteration`'s arguments) and keep its
        events as a process named ``label``."""
        from sysmodel.breakdown import attribute_time
        plan, executed = executed_iteration(platform, fabric, workload, strategy, **options)
        breakdown, _, stage = attribute_time(executed, plan.strategy.pp, plan.representative)
        pid = len(self.iterations) + 1
        summary = {"makespan_s": round(executed.makespan, 9), "strategy": str(plan.strategy),
                   "busiest_stage": stage,
                   **{f"{k}_s": round(v, 9) for k, v in breakdown.items()}}
        self.events += trace_events(plan, executed, pid=pid, label=label, args=summary)
        self.iterations.append({"pid": pid, "label": label, "tasks": len(executed.tasks), **summary})

    def write(self) -> Path:
        """Write the file; returns its path."""
        write_trace(self.path, self.events, self.iterations)
        return self.path


def write_trace(path, events: list[dict], iterations: list[dict]) -> None:
    """Write ``events`` as a trace-event JSON object to ``path``, with ``iterations`` (what
    each process is) in its ``otherData``."""
    data = {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"source": "fred system model: executed task graph (docs/sysmodel.md)",
                          "time_unit": "microseconds from the start of the iteration",
                          "iterations": iterations}}
    try:
        with open(path, "w") as f:
            json.dump(data, f, separators=(",", ":"))
    except OSError as exc:
        raise FredError(f"--trace {path}: {exc.strerror or exc}") from None
