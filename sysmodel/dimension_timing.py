"""Time of one collective stage on one dimension of a cluster (docs/cluster.md, "Timing").

A stage is one collective on every group of one dimension at once; the groups are disjoint
and each NPU is in one group per dimension, so a stage's time is one group's. ``size`` is the
buffer per NPU: the input of a reduce-scatter, the output of an all-gather, the buffer of an
all-reduce or all-to-all. With ``n`` members, bandwidth ``B`` per NPU per direction and
``L`` per dependent step (ASTRA-sim 2.0's analytical forms, Won et al., Sec. 4):

=================  ===================================  ===========================
kind               reduce-scatter / all-gather            steps (latency terms)
=================  ===================================  ===========================
ring               (n-1)/n * size / B                   n - 1
fully-connected    (n-1)/n * size / B                   1
switch             (n-1)/n * size / B                   1
=================  ===================================  ===========================

An endpoint all-reduce is a reduce-scatter then an all-gather: ``2 (n-1)/n size / B`` and
twice the steps. An in-network dimension (``in_network``, a reducing switch) runs an
all-reduce as one pass: each NPU sends ``size`` up and receives the reduced ``size`` back,
``size / B + 2 L``. Its reduce-scatter and all-gather use the endpoint forms (an in-network
reduce-scatter would send the whole ``size`` instead of ``(n-1)/n`` of it). All-to-all sends
``size / n`` to each other member: on a fully-connected dimension or a switch
``(n-1)/n size / B``; on a bidirectional ring the bytes travel ``min(k, n-k)`` hops to the
member ``k`` away, ``size / n * sum_k min(k, n-k) / B`` over the ring's links (both
directions, ``B`` the NPU's share of them), in ``floor(n/2)`` steps.

An ``optical-ring`` dimension (:mod:`sysmodel.optical`) runs its all-reduce with its
``algorithm`` (WRHT, ring or recursive doubling; a path over the loss budget is an error), and
its reduce-scatter, all-gather and all-to-all as a ring's on one wavelength
(``B`` = ``wavelength_gbps``, ``L`` = the O/E/O latency per step).

``fred`` and ``mesh`` dimensions are timed by this project's wafer model
(:func:`sysmodel.collectives.evaluate`) with the stage's op on every NPU of the wafer: the
same numbers ``fred collective --fabric F`` gives for the wafer alone.
"""

from __future__ import annotations

from hdl.contracts.errors import FredError
from sysmodel.collectives import Collective, evaluate
from sysmodel.dimensions import WAFER_KINDS, Dimension
from sysmodel.optical import plan_allreduce

__all__ = ["STAGE_OPS", "stage_time", "stage_bytes_sent"]

STAGE_OPS = ("reduce-scatter", "all-gather", "all-reduce", "all-to-all")


#: kinds whose reduce-scatter, all-gather and all-to-all are a bidirectional ring's
_RINGS = ("ring", "optical-ring")


def _ring_all_to_all_hops(n: int) -> int:
    """Sum over the other members of a bidirectional ring of the hops to each: sum_k min(k, n-k)."""
    return sum(min(k, n - k) for k in range(1, n))


def stage_bytes_sent(dim: Dimension, op: str, size: float) -> float:
    """Bytes one NPU sends into ``dim`` for a stage ``op`` of ``size`` bytes (its payload,
    counted once per link it crosses on a ring's all-to-all)."""
    n = dim.size
    if n == 1:
        return 0.0
    share = (n - 1) / n * size
    if op in ("reduce-scatter", "all-gather"):
        return share
    if op == "all-reduce" and dim.optical:
        plan = plan_allreduce(dim.optical, dim.algorithm, n, size)
        # ring / WRHT: every node but one sends S once each way (2 (n-1)/n S on average);
        # recursive doubling: S in every round
        return sum(plan.step_bytes) if plan.algorithm == "recursive-doubling" else 2 * share
    if op == "all-reduce":
        return size if dim.in_network else 2 * share
    if op == "all-to-all":
        return size / n * _ring_all_to_all_hops(n) if dim.kind in _RINGS else share
    raise FredError(f"stage op {op!r} is not one of {', '.join(STAGE_OPS)}")


def _steps(dim: Dimension, op: str) -> int:
    n = dim.size
    if op == "all-to-all":
        return n // 2 if dim.kind in _RINGS else 1
    one = n - 1 if dim.kind in _RINGS else 1
    if op == "all-reduce":
        return 2 if dim.in_network else 2 * one
    return one


def stage_time(dim: Dimension, op: str, size: float) -> float:
    """Seconds one stage ``op`` of ``size`` bytes per NPU takes on ``dim`` (module docstring)."""
    if op not in STAGE_OPS:
        raise FredError(f"stage op {op!r} is not one of {', '.join(STAGE_OPS)}")
    if dim.size == 1 or size <= 0:
        return 0.0
    if dim.kind in WAFER_KINDS:
        return _wafer_stage_time(dim, op, size)
    if op == "all-reduce" and dim.optical:
        return plan_allreduce(dim.optical, dim.algorithm, dim.size, size).time_s(dim.optical)
    return stage_bytes_sent(dim, op, size) / dim.bandwidth_bps + _steps(dim, op) * dim.latency_s


def _wafer_stage_time(dim: Dimension, op: str, size: float) -> float:
    # the wafer model caches results per (network, collectives): repeated chunk sizes are free
    collective = Collective(op, tuple(range(dim.size)), size)
    return evaluate(dim.wafer, dim.fabric, [collective]).time_s
