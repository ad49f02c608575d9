"""A pipeline schedule's passes appended to the engine as arrays (docs/sysmodel.md, Speed).

:func:`append_passes` adds what :class:`sysmodel.task_graphs.StageEngine`'s
``add_layer_run`` adds once per pass -- a virtual stage's pass over its layers and its send,
as one block -- for every pass of a :class:`~sysmodel.pipeline_schedules.ScheduleOrder`
between the passes that fill gradient buckets during the pass (each virtual stage's last
backward, added by the caller one by one, unless its buckets are deferred: then it is its
block too, the buckets filled after it): the blocks' first tasks' dependencies (the send each pass waits for,
the stage's pending communication) and the task numbers are computed with numpy over all
passes of a stretch at once, and the engine gathers the stretch's columns in one go
(:meth:`sysmodel.engine.Engine._extend_blocks`). The tasks, their order and their
dependencies are those of the pass-by-pass loop (tests/sysmodel/test_sysmodel_speed_identity.py).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from sysmodel.engine import BlockTable
from sysmodel.pipeline_schedules import ScheduleOrder

__all__ = ["append_passes", "block_last_backwards", "longest_stretch", "stretch_splits", "STRETCH_AS_ARRAYS"]

#: Passes from which a stretch is appended as arrays (:func:`_append_stretch`) rather than one
#: by one: about where numpy's fixed cost per stretch (some 40 calls) equals the per-pass
#: Python it saves (docs/sysmodel.md, Speed).
STRETCH_AS_ARRAYS = 64


def append_passes(eng, order: ScheduleOrder, virtual_stages: int, block_of: Callable,
                  general: Callable, filled: Callable | None = None) -> np.ndarray:
    """Append every pass of ``order`` to ``eng`` (a StageEngine, with its per-stage
    ``_pending`` communication and ``_last_compute`` task kept as its own add methods keep
    them). ``block_of(key)``: the LayerBlock of pass kind and virtual stage ``key`` (backward *
    ``virtual_stages`` + virtual stage), built when first asked for, in the order the passes
    first use them, and ending with the pass's send exactly when the pass has one;
    ``general(j, prev)``: adds pass ``j`` (a last backward) itself after its producer's send
    ``prev`` (-1: none) and returns its send task (-1: none). ``filled(j, t0)`` (None: every
    last backward goes to ``general``): where a last backward adds exactly its kind's block (its
    gradient buckets deferred: they add no task during the pass), what the general path does
    besides, given the block's first task ``t0``; such a last backward whose block an earlier
    pass already used (:func:`block_last_backwards`) is then appended with the passes around
    it, so the cool-down's closely spaced last backwards no longer split it into short
    stretches appended one by one. Returns every pass's send task (-1: none)."""
    n = len(order)
    send = np.full(n, -1, dtype=np.int64)
    splits = stretch_splits(order, virtual_stages, blocks=filled is not None)
    lo = 0
    for g in [*np.flatnonzero(splits).tolist(), n]:
        if g - lo >= STRETCH_AS_ARRAYS:
            _append_stretch(eng, order, lo, g, virtual_stages, block_of, send, filled)
        else:
            _append_each(eng, order, lo, g, virtual_stages, block_of, send, filled)
        if g < n:
            p = int(order.producer[g])
            send[g] = general(g, int(send[p]) if p >= 0 else -1)
        lo = g + 1
    return send


def stretch_splits(order: ScheduleOrder, virtual_stages: int, *, blocks: bool) -> np.ndarray:
    """Per pass, whether :func:`append_passes` adds it through ``general`` and so ends a stretch:
    every last backward, or with ``blocks`` (its ``filled`` given) only those that are not
    :func:`block_last_backwards`."""
    if not blocks:
        return order.last_backward
    return order.last_backward & ~block_last_backwards(order, virtual_stages)


def longest_stretch(order: ScheduleOrder, virtual_stages: int, *, blocks: bool) -> int:
    """The most passes in a row between two of :func:`stretch_splits` (the order's ends count as
    splits): whether :func:`append_passes` has a stretch worth appending as arrays."""
    bounds = np.flatnonzero(np.concatenate(([True], stretch_splits(order, virtual_stages, blocks=blocks),
                                            [True])))
    return int(np.diff(bounds).max()) - 1


def block_last_backwards(order: ScheduleOrder, virtual_stages: int) -> np.ndarray:
    """Per pass, whether it is a last backward whose block (pass kind and virtual stage) an
    earlier pass used: the block was built before it, as the general path needs to add the
    block rather than its layers one by one (a single microbatch's backward is its last)."""
    key = order.backward * virtual_stages + order.virtual
    _, first_use, inverse = np.unique(key, return_index=True, return_inverse=True)
    return order.last_backward & (first_use[inverse.reshape(-1)] < np.arange(len(order)))


def _append_each(eng, order: ScheduleOrder, lo: int, hi: int, virtual_stages: int, block_of,
                 send: np.ndarray, filled: Callable | None = None) -> None:
    """Passes ``lo`` to ``hi`` - 1 one by one (``add_layer_run``), as the task graph's loop
    adds them: for short stretches, where numpy's cost per call exceeds the per-pass Python.
    A last backward among them is one ``filled`` takes (:func:`append_passes`)."""
    for j in range(lo, hi):
        run = block_of(int(order.backward[j]) * virtual_stages + int(order.virtual[j]))
        p = int(order.producer[j])
        prev = int(send[p]) if p >= 0 and send[p] >= 0 else None
        last = eng.add_layer_run(int(order.stage[j]), order.prefix[j], run, prev)
        if run.send_blocks is not None:
            send[j] = last + 1
        if order.last_backward[j]:
            filled(j, last - run.last)


def _append_stretch(eng, order: ScheduleOrder, lo: int, hi: int, virtual_stages: int, block_of,
                    send: np.ndarray, filled: Callable | None = None) -> None:
    """Passes ``lo`` to ``hi`` - 1, their sends into ``send``; a last backward among them is one
    ``filled`` takes (:func:`append_passes`), called after the stretch in pass order."""
    key = order.backward[lo:hi] * virtual_stages + order.virtual[lo:hi]
    used, first_use = np.unique(key, return_index=True)
    used = used[np.argsort(first_use, kind="stable")]
    runs = [block_of(k) for k in used.tolist()]
    local = np.empty(2 * virtual_stages, dtype=np.int64)
    local[used] = np.arange(len(used))
    which = local[key]
    table = BlockTable.of([r.block for r in runs])
    last = np.array([r.last for r in runs], dtype=np.int64)[which]
    last_compute = np.array([r.last_compute for r in runs], dtype=np.int64)[which]
    ends_with_mp = np.array([r.ends_with_mp for r in runs], dtype=bool)[which]
    has_send = np.array([r.send_blocks is not None for r in runs], dtype=bool)[which]
    send_blocks = np.array([bool(r.send_blocks) for r in runs], dtype=bool)[which]
    sizes = table.size[which]
    t0 = len(eng) + np.cumsum(sizes) - sizes
    send[lo:hi] = np.where(has_send, t0 + last + 1, -1)
    producer = order.producer[lo:hi]
    prev = np.where(producer >= 0, send[np.maximum(producer, 0)], -1)
    # the stage's pending communication after its previous pass (when in this stretch): that
    # pass's last MP task, then its send when it blocks compute (StageEngine.add_layer_run)
    before = order.previous[lo:hi] - lo
    inside = before >= 0
    b = np.maximum(before, 0)
    pending_mp = np.where(inside & ends_with_mp[b], t0[b] + last[b], -1)
    pending_send = np.where(inside & send_blocks[b], t0[b] + last[b] + 1, -1)
    stage = order.stage[lo:hi]
    firsts = np.flatnonzero(~inside).tolist()    # each stage's first pass here
    carried = {j: eng._pending.pop(int(stage[j]), None) or [] for j in firsts}
    width = 1 + max([2, *map(len, carried.values())])
    first = np.full((hi - lo, width), -1, dtype=np.int64)
    first[:, 0], first[:, 1], first[:, 2] = prev, pending_mp, pending_send
    for j, pending in carried.items():
        first[j, 1:] = -1
        first[j, 1:1 + len(pending)] = pending
    # left-aligned: a block's first dependencies are (prev, *pending) without the missing ones
    first = np.take_along_axis(first, np.argsort(first < 0, axis=1, kind="stable"), axis=1)
    eng._extend_blocks(table, which, order.prefix[lo:hi], first)
    _leave_stage_state(eng, stage, t0, last, last_compute, ends_with_mp, send_blocks)
    for j in np.flatnonzero(order.last_backward[lo:hi]).tolist():
        filled(lo + j, int(t0[j]))


def _leave_stage_state(eng, stage, t0, last, last_compute, ends_with_mp, send_blocks) -> None:
    """Each stage's last compute task and pending communication after its last pass here."""
    reverse_stages, at_end = np.unique(stage[::-1], return_index=True)
    for s, j in zip(reverse_stages.tolist(), (len(stage) - 1 - at_end).tolist()):
        end = int(t0[j] + last[j])
        eng._last_compute[s] = int(t0[j] + last_compute[j])
        pending = ([end] if ends_with_mp[j] else []) + ([end + 1] if send_blocks[j] else [])
        if pending:
            eng._pending[s] = pending
        else:
            eng._pending.pop(s, None)
