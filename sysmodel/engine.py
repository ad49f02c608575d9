"""Discrete-event execution of a task graph on per-NPU resources, with link sharing.

Each :class:`Task` runs on one named resource (an NPU's single compute unit, or one of its
communication channels: MP, DP, PP, I/O in, I/O out -- FRED's virtual channels) and may start
only when all its dependencies have finished. A resource runs one task at a time, in the order
its tasks were added (the schedule's order: GPipe or 1F1B for compute, issue order for a
channel), so the compute unit and different channels overlap freely. Overlap and exposed
communication therefore come out of the schedule, not out of a formula.

Compute tasks (and communication without link data) take a fixed duration. A communication
task may carry its **link loads** (bytes on every directed link of the fabric, from
:func:`sysmodel.collectives.evaluate`): communication tasks that run at the same time then
share those links. Alone, such a task takes its busiest link's time plus its latency; when
several are active, their rates follow max-min fairness over the links (progressive filling:
all active transfers slow down by a common factor until a link saturates; transfers on it are
fixed at that factor, the others continue). Rates are recomputed at every start and end, so a
DP all-reduce overlapping an MP one on the same links slows both.

A task may only depend on tasks added before it; since each resource runs its tasks in the
order they were added, this rules out cycles and deadlocks by construction (the run still
checks that every task ran and names the blocked ones if not).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from hdl.base.errors import FredError

__all__ = ["Task", "Engine", "Schedule"]

_EPS = 1e-12


@dataclass
class Task:
    """``name``, ``resource``, ``duration`` (s, when alone), ``deps`` (task ids), ``category``
    (breakdown label: compute, mp, dp, pp, io), ``npu`` (the NPU whose timeline it belongs to,
    or None for wafer-wide tasks such as I/O streams), ``loads``/``bw`` (optional link data
    for link sharing; ``duration`` - busiest-link time is its fixed latency)."""

    name: str
    resource: str
    duration: float
    deps: tuple[int, ...] = ()
    category: str = "compute"
    npu: int | None = None
    loads: np.ndarray | None = field(default=None, repr=False)
    bw: np.ndarray | None = field(default=None, repr=False)
    start: float = -1.0
    end: float = -1.0


@dataclass
class Schedule:
    tasks: list[Task]
    makespan: float


class Engine:
    """Collects tasks (:meth:`add`) and runs them (:meth:`run`)."""

    def __init__(self):
        self.tasks: list[Task] = []
        self.queues: dict[str, list[int]] = {}

    def add(self, name: str, resource: str, duration: float, deps=(), *, category: str = "compute",
            npu: int | None = None, loads=None, bw=None) -> int:
        """Add a task; ``duration`` may be an object with ``time_s``, ``loads``, ``bw``
        (a communication time with its link loads)."""
        if hasattr(duration, "time_s"):
            loads, bw, duration = duration.loads, duration.bw, duration.time_s
        if duration < 0:
            raise FredError(f"task {name}: negative duration {duration}")
        deps = tuple(d for d in deps if d is not None)
        for d in deps:
            if not 0 <= d < len(self.tasks):
                raise FredError(f"task {name}: unknown dependency {d}")
        if loads is not None and (bw is None or not np.any(loads > 0)):
            loads = None
        self.tasks.append(Task(name, resource, float(duration), deps, category, npu,
                               loads, bw if loads is not None else None))
        self.queues.setdefault(resource, []).append(len(self.tasks) - 1)
        return len(self.tasks) - 1

    def run(self) -> Schedule:
        tasks = self.tasks
        dependents: dict[int, list[int]] = {}
        remaining = [len(t.deps) for t in tasks]
        for i, t in enumerate(tasks):
            for d in t.deps:
                dependents.setdefault(d, []).append(i)
        head = {r: 0 for r in self.queues}
        busy = {r: False for r in self.queues}
        fixed: list[tuple[float, int]] = []      # (end time, task) of fixed-duration parts
        flows: dict[int, float] = {}             # task -> remaining fraction of its bytes
        alone: dict[int, float] = {}             # task -> busiest-link time when alone
        latency: dict[int, float] = {}
        now = 0.0
        done = 0

        def try_start(resource: str) -> None:
            i = head[resource]
            queue = self.queues[resource]
            if busy[resource] or i >= len(queue) or remaining[queue[i]]:
                return
            tid = queue[i]
            task = tasks[tid]
            task.start = now
            busy[resource] = True
            if task.loads is None:
                heapq.heappush(fixed, (now + task.duration, tid))
            else:
                t_alone = float((task.loads / task.bw).max())
                alone[tid] = t_alone
                latency[tid] = max(0.0, task.duration - t_alone)
                flows[tid] = 1.0

        def finish(tid: int) -> None:
            nonlocal done
            task = tasks[tid]
            task.end = now
            done += 1
            busy[task.resource] = False
            head[task.resource] += 1
            touched = {task.resource}
            for t2 in dependents.get(tid, ()):
                remaining[t2] -= 1
                if not remaining[t2]:
                    touched.add(tasks[t2].resource)
            for resource in sorted(touched):
                try_start(resource)

        for resource in self.queues:
            try_start(resource)
        while fixed or flows:
            rates = self._rates(flows, alone) if flows else {}
            t_flow, first = float("inf"), None
            for tid, frac in flows.items():
                t = now + frac / rates[tid]
                if t < t_flow:
                    t_flow, first = t, tid
            t_fixed = fixed[0][0] if fixed else float("inf")
            if t_fixed <= t_flow:
                step_to, _ = t_fixed, None
            else:
                step_to = t_flow
            dt = step_to - now
            for tid in list(flows):
                flows[tid] -= rates[tid] * dt
            now = step_to
            # bandwidth parts that completed continue with their fixed latency tail
            for tid in [t for t, f in flows.items() if f <= _EPS or t == first and t_flow <= t_fixed]:
                del flows[tid]
                heapq.heappush(fixed, (now + latency[tid], tid))
            while fixed and fixed[0][0] <= now + _EPS:
                _, tid = heapq.heappop(fixed)
                finish(tid)
        if done != len(tasks):
            blocked = [tasks[self.queues[r][head[r]]].name for r in self.queues
                       if head[r] < len(self.queues[r])]
            raise FredError(f"task graph deadlocks: {len(tasks) - done} tasks never ran; "
                            f"blocked at {', '.join(blocked[:6])}")
        makespan = max((t.end for t in tasks), default=0.0)
        return Schedule(tasks=tasks, makespan=makespan)

    def _rates(self, flows: dict, alone: dict) -> dict:
        """Max-min fair slow-down factors by progressive filling; returns fraction/second."""
        ids = list(flows)
        if len(ids) == 1:
            return {ids[0]: 1.0 / alone[ids[0]]}
        bw = self.tasks[ids[0]].bw
        demand = {i: self.tasks[i].loads / self.tasks[i].bw / alone[i] for i in ids}  # share of each link at full speed
        capacity = np.ones_like(bw)
        factor: dict[int, float] = {}
        active = set(ids)
        while active:
            use = sum(demand[i] for i in active)
            with np.errstate(divide="ignore", invalid="ignore"):
                limits = np.where(use > _EPS, capacity / use, np.inf)
            lam = min(1.0, float(limits.min()))
            if lam >= 1.0 - 1e-12:
                for i in active:
                    factor[i] = 1.0
                break
            saturated = limits <= lam * (1 + 1e-9)
            frozen = [i for i in active if np.any(demand[i][saturated] > _EPS)]
            for i in frozen:
                factor[i] = lam
                capacity = capacity - lam * demand[i]
                active.discard(i)
            capacity = np.maximum(capacity, 0.0)
        return {i: max(factor[i], 1e-9) / alone[i] for i in ids}
