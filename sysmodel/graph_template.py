"""An iteration's task graph kept for re-timing at another compute speed (docs/sysmodel.md, Speed).

The evaluation simulates the same iteration at many NPU compute speeds (the sensitivity curves,
the diagnostic's bisections, the calibration): the platforms differ only in peak FLOPS and HBM
bandwidth (:meth:`sysmodel.platform.Platform.with_compute_scale`). Nothing of the task graph
but its compute durations depends on those -- the plan (stages, microbatches, memory), every
communication task and its link loads, the dependencies added by the builders and by the
serialised mode -- so the graph built once is kept as a :class:`GraphTemplate` and, for another
compute speed, copied with its compute tasks re-timed by the new compute timer (each compute
task records its ``source``: the layer and pass, or the optimizer step). The copy is the graph
the builders would add, task for task, so the iteration is the same, not an approximation.

:func:`structure_key` names what the graph depends on: the platform but its compute speed (its
``network_spec`` and ``training_spec`` sections, :mod:`sysmodel.platform`), the fabric, the
workload (by identity), the strategy, schedule, minibatch, microbatches and the overlap policy.
Templates are kept in the model's cache (:mod:`sysmodel.model_cache`, ``graph_templates``).
"""

from __future__ import annotations

import numpy as np

from sysmodel.engine import Engine
from sysmodel.model_cache import Ref, current

__all__ = ["GraphTemplate", "structure_key", "lookup", "store"]


def structure_key(platform, fabric: str, workload, strategy, schedule: str, samples_per_dp,
                  microbatches, overlap: bool) -> tuple:
    """What an iteration's task graph depends on, besides compute speed (module docstring)."""
    return (platform.network_spec, platform.training_spec, fabric, Ref(workload),
            str(strategy) if strategy else None, schedule, samples_per_dp, microbatches, overlap)


class GraphTemplate:
    """A built graph (its engine, read and copied, never run again), each task's compute source
    numbered, and the one-time configuration load of its communication."""

    def __init__(self, eng: Engine, config_load_s: float):
        self.engine = eng
        self.config_load_s = config_load_s
        self._code = None   # per task, its source's number (-1: none); made when first re-timed

    def _sources(self) -> tuple[np.ndarray, list]:
        """(per task its source's number or -1, the distinct sources): a graph is re-timed for
        each distinct source once, however many tasks it times."""
        if self._code is None:
            number: dict = {}
            distinct: list = []   # kept: their ids key ``number``
            code = []
            for src in self.engine.sources:
                if src is None:
                    code.append(-1)
                    continue
                key = (src[0], id(src[1]), src[2] if len(src) > 2 else None)
                c = number.get(key)
                if c is None:
                    c = number[key] = len(distinct)
                    distinct.append(src)
                code.append(c)
            self._code = (np.array(code, dtype=np.int64), distinct)
        return self._code

    @staticmethod
    def usable(eng: Engine) -> bool:
        """Whether every compute task records its source (else it cannot be re-timed)."""
        sources = eng.sources
        return len(sources) == len(eng) and all(
            sources[i] is not None for r, q in eng.queues.items() if r.endswith(".compute") for i in q)

    def instantiate(self, compute) -> Engine:
        """A fresh engine with this graph, compute tasks timed by ``compute`` (a compute timer)."""
        base = self.engine.arrays().duration
        code, distinct = self._sources()
        if not distinct:
            return self.engine.retimed(base.copy())
        values = np.array([float(compute.layer_s(src[1], backward=src[2]) if src[0] == "layer"
                                 else compute.optimizer_step_s(src[1])) for src in distinct])
        return self.engine.retimed(np.where(code >= 0, values[np.maximum(code, 0)], base))


def lookup(key) -> GraphTemplate | None:
    """The template stored under ``key`` (a :func:`structure_key`), else None."""
    return current().graph_templates.get(key)


def store(key, template: GraphTemplate) -> None:
    current().graph_templates.put(key, template)
