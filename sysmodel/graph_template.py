"""An iteration's task graph kept for re-timing at another compute speed (issue 16).

The evaluation simulates the same iteration at many NPU compute speeds (the sensitivity curves,
the diagnostic's bisections, the calibration): the platforms differ only in peak FLOPS and HBM
bandwidth (:meth:`sysmodel.platform.Platform.with_compute_scale`). Nothing of the task graph
but its compute durations depends on those -- the plan (stages, microbatches, memory), every
communication task and its link loads, the dependencies added by the builders and by the
serialised mode -- so the graph built once is kept as a :class:`GraphTemplate` and, for another
compute speed, copied with its compute tasks re-timed by the new compute timer (each compute
task records its ``source``: the layer and pass, or the optimizer step). The copy is the graph
the builders would add, task for task, so the iteration is the same, not an approximation.

:func:`structure_key` names what the graph depends on: every platform field except the compute
speed ones (:data:`COMPUTE_SPEED_FIELDS`; a field added later is part of the key by default),
the fabric, the workload (by identity), the strategy, schedule, minibatch, microbatches and the
overlap policy.
"""

from __future__ import annotations

from sysmodel.engine import Engine, Task
from sysmodel.value_key import value_key

__all__ = ["GraphTemplate", "structure_key", "platform_key", "COMPUTE_SPEED_FIELDS", "lookup", "store"]

#: Platform fields that only change compute task durations.
COMPUTE_SPEED_FIELDS = frozenset({"peak_tflops", "memory_bandwidth_gbps", "compute_efficiency", "compute"})

_KEYS: dict = {}
_TEMPLATES: dict = {}
_MAX_TEMPLATES = 256


def platform_key(platform) -> tuple:
    """Every field of ``platform`` except :data:`COMPUTE_SPEED_FIELDS`, hashable (computed once
    per platform object)."""
    entry = _KEYS.get(id(platform))
    if entry is None or entry[0] is not platform:
        entry = _KEYS[id(platform)] = (platform, value_key(platform, COMPUTE_SPEED_FIELDS))
    return entry[1]


def structure_key(platform, fabric: str, workload, strategy, schedule: str, samples_per_dp,
                  microbatches, overlap: bool) -> tuple:
    """What an iteration's task graph depends on, besides compute speed (module docstring)."""
    return (platform_key(platform), fabric, id(workload), str(strategy) if strategy else None,
            schedule, samples_per_dp, microbatches, overlap)


class GraphTemplate:
    """A built graph: its tasks (read, never run again), queues, compute sources and the
    one-time configuration load of its communication."""

    def __init__(self, eng: Engine, config_load_s: float, keep):
        self.tasks = list(eng.tasks)
        self.queues = {r: list(q) for r, q in eng.queues.items()}
        self.sources = list(eng.sources)
        self.priority, self.preempt_s = eng.priority, eng.preempt_s
        self.config_load_s = config_load_s
        self.keep = keep      # the objects the key names by identity, kept alive

    @staticmethod
    def usable(eng: Engine) -> bool:
        """Whether every compute task records its source (else it cannot be re-timed)."""
        return len(eng.sources) == len(eng.tasks) and all(
            src is not None for t, src in zip(eng.tasks, eng.sources) if t.resource.endswith(".compute"))

    def instantiate(self, compute) -> Engine:
        """A fresh engine with this graph, compute tasks timed by ``compute`` (a compute timer)."""
        eng = Engine(priority=self.priority, preempt_s=self.preempt_s)
        tasks = eng.tasks
        for t, src in zip(self.tasks, self.sources):
            duration = t.duration
            if src is not None:
                duration = float(compute.layer_s(src[1], backward=src[2]) if src[0] == "layer"
                                 else compute.optimizer_step_s(src[1]))
            tasks.append(Task(t.name, t.resource, duration, t.deps, t.category, t.npu, t.loads, t.bw))
        eng.queues = {r: list(q) for r, q in self.queues.items()}
        eng.sources = list(self.sources)
        return eng


def lookup(key) -> GraphTemplate | None:
    return _TEMPLATES.get(key)


def store(key, template: GraphTemplate) -> None:
    if len(_TEMPLATES) >= _MAX_TEMPLATES:
        _TEMPLATES.clear()
    _TEMPLATES[key] = template
