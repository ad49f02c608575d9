"""The evaluation's iterations, each simulated once (docs/sysmodel.md, Speed).

``fred eval`` asks for the same iteration more than once: the sensitivity curve at compute x1
is the headline table, the fits of Fred-C and Fred-D scan the same compute speeds on the mesh,
the calibration's grid repeats the diagnostic's. :func:`simulate_once` returns the result
already computed for the same platform *value* (platforms scaled to the same compute speed are
distinct objects), fabric, workload and arguments, else simulates. The result is shared:
callers read it, never change it.
"""

from __future__ import annotations

from sysmodel.model_cache import Ref, current
from sysmodel.training import simulate_iteration

__all__ = ["simulate_once"]


def simulate_once(platform, fabric: str, workload, strategy=None, **kwargs):
    """:func:`sysmodel.training.simulate_iteration`, computed once per distinct request (kept in
    the model's cache, :mod:`sysmodel.model_cache`, ``iterations``; the key is the platform's
    value, so equal platforms built separately share the entry)."""
    memo = current().iterations
    key = (platform, fabric, Ref(workload), None if strategy is None else str(strategy),
           tuple(sorted(kwargs.items())))
    hit = memo.get(key)
    if hit is not None:
        return hit
    return memo.put(key, simulate_iteration(platform, fabric, workload, strategy, **kwargs))
