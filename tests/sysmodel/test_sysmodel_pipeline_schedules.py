"""The order in which the weight-stationary task graph adds its pipeline passes
(sysmodel.pipeline_schedules.schedule_order), by hand on a small pipeline."""

from __future__ import annotations

import pytest

from hdl.contracts.errors import FredError
from sysmodel.model_cache import ModelCache, using
from sysmodel.pipeline_schedules import schedule_order


def test_a_two_stage_1f1b_order_by_hand():
    """PP 2, 2 microbatches, 1F1B: stage 0 runs F0 F1 B0 B1 (one warm-up forward), stage 1 F0
    B0 F1 B1. Round-robin, each pass once the send it waits for exists: stage 0 adds F0, F1
    and stops at B0 (stage 1's B0 is not there yet); stage 1 adds all four; then stage 0 its
    backwards."""
    with using(ModelCache()):
        o = schedule_order("1f1b", 2, 2, 1)
        passes = [(s, "B" if b else "F", i) for s, b, i in
                  zip(o.stage.tolist(), o.backward.tolist(), o.microbatch.tolist())]
        assert passes == [(0, "F", 0), (0, "F", 1), (1, "F", 0), (1, "B", 0), (1, "F", 1), (1, "B", 1),
                          (0, "B", 0), (0, "B", 1)]
        # stage 1's forward waits for stage 0's, stage 0's backward for stage 1's
        assert o.producer.tolist() == [-1, -1, 0, -1, 1, -1, 3, 5]
        assert o.previous.tolist() == [-1, 0, -1, 2, 3, 4, 1, 6]
        assert o.last_backward.tolist() == [False] * 5 + [True, False, True]
        assert o.longest_stretch == 5           # passes 0-4 before the first last backward
        assert o.prefix[:3] == ("F0 s0 ", "F1 s0 ", "F0 s1 ")
        assert schedule_order("1f1b", 2, 2, 1) is o   # kept in the model's cache


def test_interleaved_order_names_the_chunk_and_needs_1f1b():
    with using(ModelCache()):
        o = schedule_order("1f1b", 2, 2, 2)
        assert len(o) == 2 * 2 * 2 * 2          # stages x microbatches x chunks x (F, B)
        assert o.prefix[0] == "F0 s0 c0 "
        assert o.virtual.tolist() == (o.chunk * 2 + o.stage).tolist()
        assert o.last_backward.sum() == 4        # one per virtual stage
        with pytest.raises(FredError, match="interleaved pipeline schedule is a 1F1B"):
            schedule_order("gpipe", 2, 2, 2)


@pytest.mark.parametrize("schedule, pp, m, chunks", [("1f1b", 4, 8, 1), ("gpipe", 3, 5, 1), ("1f1b", 4, 8, 2),
                                                     ("1f1b", 2, 1, 1)])
def test_the_order_keeps_each_stage_s_passes_and_puts_producers_first(schedule, pp, m, chunks):
    """Each stage's passes in its own schedule's order; every pass after the one whose send
    it waits for; each virtual stage's last backward marked once; ``previous`` the stage's
    pass before."""
    from sysmodel.pipeline_schedules import interleaved_ops, pipeline_ops
    with using(ModelCache()):
        o = schedule_order(schedule, pp, m, chunks)
    kinds = ["B" if b else "F" for b in o.backward.tolist()]
    for s in range(pp):
        mine = [j for j in range(len(o)) if o.stage[j] == s]
        got = [(kinds[j], int(o.microbatch[j]), int(o.chunk[j])) for j in mine]
        want = (interleaved_ops(s, pp, m, chunks) if chunks > 1
                else [(k, i, 0) for k, i in pipeline_ops(schedule, s, pp, m)])
        assert got == want
        assert o.previous[mine].tolist() == [-1, *mine[:-1]]
    for j in range(len(o)):
        p, v = int(o.producer[j]), int(o.virtual[j])
        assert (p >= 0) == (v < pp * chunks - 1 if o.backward[j] else v > 0)
        if p >= 0:
            assert p < j and o.microbatch[p] == o.microbatch[j] and o.backward[p] == o.backward[j]
            assert o.virtual[p] == o.virtual[j] + (1 if o.backward[j] else -1)
    assert sorted(o.virtual[o.last_backward].tolist()) == list(range(pp * chunks))
