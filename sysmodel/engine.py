"""Discrete-event execution of a task graph on per-NPU resources.

Each :class:`Task` runs on one named resource (an NPU's single compute unit, or one of its
communication channels: MP, DP, PP, I/O in, I/O out -- FRED's virtual channels), takes a
fixed duration (from the roofline or the fabric model) and may start only when all its
dependencies have finished. A resource runs one task at a time, in the order its tasks were
added (the schedule's order: GPipe or 1F1B for compute, issue order for a channel), so
different channels and the compute unit overlap freely. Overlap and exposed communication
therefore come out of the schedule, not out of a formula.

The simulation advances by completion events: whenever a task ends, the resources whose next
task depended on it are re-examined; a task starts at max(resource free, last dependency end).
A task may only depend on tasks added before it; since each resource runs its tasks in the
order they were added, this rules out cycles and deadlocks by construction (the run still
checks that every task ran and names the blocked ones if not).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from fred.errors import FredError

__all__ = ["Task", "Engine", "Schedule"]


@dataclass
class Task:
    """``name``, ``resource``, ``duration`` (s), ``deps`` (task ids), ``category`` (breakdown
    label: compute, mp, dp, pp, io), ``npu`` (the NPU whose timeline it belongs to, or None
    for wafer-wide tasks such as I/O streams)."""

    name: str
    resource: str
    duration: float
    deps: tuple[int, ...] = ()
    category: str = "compute"
    npu: int | None = None
    start: float = -1.0
    end: float = -1.0


@dataclass
class Schedule:
    tasks: list[Task]
    makespan: float
    order: dict = field(default_factory=dict)


class Engine:
    """Collects tasks (:meth:`add`) and runs them (:meth:`run`)."""

    def __init__(self):
        self.tasks: list[Task] = []
        self.queues: dict[str, list[int]] = {}

    def add(self, name: str, resource: str, duration: float, deps=(), *, category: str = "compute",
            npu: int | None = None) -> int:
        if duration < 0:
            raise FredError(f"task {name}: negative duration {duration}")
        deps = tuple(d for d in deps if d is not None)
        for d in deps:
            if not 0 <= d < len(self.tasks):
                raise FredError(f"task {name}: unknown dependency {d}")
        self.tasks.append(Task(name, resource, float(duration), deps, category, npu))
        self.queues.setdefault(resource, []).append(len(self.tasks) - 1)
        return len(self.tasks) - 1

    def run(self) -> Schedule:
        tasks = self.tasks
        waiting_on: dict[int, list[str]] = {}
        remaining = [len(t.deps) for t in tasks]
        for i, t in enumerate(tasks):
            for d in t.deps:
                waiting_on.setdefault(d, []).append(t.resource)
        head = {r: 0 for r in self.queues}
        free = {r: 0.0 for r in self.queues}
        events: list[tuple[float, int]] = []
        done = 0

        def try_start(resource: str) -> None:
            queue = self.queues[resource]
            i = head[resource]
            if i >= len(queue) or free[resource] == float("inf"):
                return
            tid = queue[i]
            if remaining[tid]:
                return
            task = tasks[tid]
            ready = max((tasks[d].end for d in task.deps), default=0.0)
            task.start = max(free[resource], ready)
            task.end = task.start + task.duration
            free[resource] = float("inf")  # busy until its end event
            heapq.heappush(events, (task.end, tid))

        for resource in self.queues:
            try_start(resource)
        while events:
            time, tid = heapq.heappop(events)
            task = tasks[tid]
            done += 1
            free[task.resource] = time
            head[task.resource] += 1
            touched = {task.resource}
            for resource in waiting_on.get(tid, ()):
                touched.add(resource)
            for t2 in self._dependents(tid):
                remaining[t2] -= 1
            for resource in sorted(touched):
                try_start(resource)
        if done != len(tasks):
            blocked = [tasks[self.queues[r][head[r]]].name for r in self.queues
                       if head[r] < len(self.queues[r])]
            raise FredError(f"task graph deadlocks: {len(tasks) - done} tasks never ran; "
                            f"blocked at {', '.join(blocked[:6])}")
        makespan = max((t.end for t in tasks), default=0.0)
        return Schedule(tasks=tasks, makespan=makespan)

    def _dependents(self, tid: int) -> list[int]:
        if not hasattr(self, "_dep_index"):
            self._dep_index: dict[int, list[int]] = {}
            for i, t in enumerate(self.tasks):
                for d in t.deps:
                    self._dep_index.setdefault(d, []).append(i)
        return self._dep_index.get(tid, [])
