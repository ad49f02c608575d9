"""The order in which the weight-stationary task graph adds its pipeline passes
(sysmodel.pipeline_schedules.schedule_order), by hand on a small pipeline."""

from __future__ import annotations

import numpy as np
import pytest

from hdl.contracts.errors import FredError
from sysmodel.model_cache import ModelCache, using
from sysmodel.pipeline_schedules import schedule_order
from sysmodel.schedule_append import longest_stretch, stretch_splits


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
        # passes 0-4 come before the first last backward; as blocks (deferred buckets) both last
        # backwards (5: stage 1's B1, whose block B0 at 3 built; 7: stage 0's B1, after B0 at 6)
        # stay in the one stretch of all 8 passes
        assert stretch_splits(o, 2, blocks=False) is o.last_backward
        assert longest_stretch(o, 2, blocks=False) == 5
        assert stretch_splits(o, 2, blocks=True).tolist() == [False] * 8
        assert longest_stretch(o, 2, blocks=True) == 8
        assert tuple(o.prefix[:3]) == ("F0 s0 ", "F1 s0 ", "F0 s1 ")
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


def _rounds(o) -> list:
    """Each pass's round in the round-robin, by its definition: a stage places a pass in the
    round its previous pass was placed, unless the pass it waits for is placed later -- in a
    later round, or in the same round by a later stage (then the round after that)."""
    rounds = []
    for j in range(len(o)):
        r = rounds[int(o.previous[j])] if o.previous[j] >= 0 else 0
        p = int(o.producer[j])
        if p >= 0:
            r = max(r, rounds[p] + (1 if o.stage[p] > o.stage[j] else 0))
        rounds.append(r)
    return rounds


@pytest.mark.parametrize("schedule, pp, m, chunks", [
    ("1f1b", 4, 8, 1), ("1f1b", 4, 2, 1), ("gpipe", 3, 5, 1), ("1f1b", 4, 8, 2), ("1f1b", 3, 9, 3),
    ("1f1b", 1, 3, 2), ("1f1b", 8, 24, 3), ("1f1b", 16, 17, 1)])
def test_the_compiled_round_robin_places_passes_round_after_round(schedule, pp, m, chunks):
    """The order is the round-robin's (sysmodel.schedule_order_compiled): sorted by (round,
    stage), each stage's passes in its own order, every pass in the first round it can be
    placed in (:func:`_rounds`, from each pass's previous pass and producer). Fails for a
    stage sweep in another order, one pass per stage and round, or a pass placed before its
    producer (the test above)."""
    with using(ModelCache()):
        o = schedule_order(schedule, pp, m, chunks)
    rounds = _rounds(o)
    keys = list(zip(rounds, o.stage.tolist()))
    assert keys == sorted(keys)
    assert max(rounds) > 0 or pp == 1


def test_the_round_robin_reports_passes_it_cannot_place():
    """Two passes each waiting for the other: nothing placed (schedule_order raises then)."""
    from sysmodel.schedule_order_compiled import round_robin
    order, number, placed = round_robin(np.array([[0], [1]]), np.array([[1], [0]]), 2)
    assert placed == 0 and len(order) == 0 and number.tolist() == [-1, -1]
    order, number, placed = round_robin(np.array([[0, 1], [2, 3]]), np.array([[-1, 3], [0, -1]]), 4)
    # stage 0 places 0, stops at 1 (waits for 3); stage 1 places 2 and 3; then stage 0 places 1
    assert placed == 4 and order.tolist() == [0, 2, 3, 1] and number.tolist() == [0, 3, 1, 2]


def test_pass_prefixes_made_when_read_are_the_names_of_each_pass():
    """PassPrefixes: a prefix read one at a time, through a slice, by iteration and as a numpy
    array (how the engine makes the names of an appended stretch) is the same string."""
    with using(ModelCache()):
        o = schedule_order("1f1b", 2, 2, 2)
        plain = schedule_order("1f1b", 2, 2, 1)
    each = [o.prefix[j] for j in range(len(o))]
    assert each[:2] == ["F0 s0 c0 ", "F1 s0 c0 "] and len(o.prefix) == len(o)
    assert list(o.prefix) == each
    assert list(o.prefix[3:9]) == each[3:9] and o.prefix[3:9][1] == each[4]
    assert np.array(o.prefix[5:], dtype=object).tolist() == each[5:]
    kinds = ["B" if b else "F" for b in o.backward.tolist()]
    assert each == [f"{k}{i} s{s} c{c} " for k, i, s, c in
                    zip(kinds, o.microbatch.tolist(), o.stage.tolist(), o.chunk.tolist())]
    assert list(plain.prefix)[-1] == "B1 s0 " and plain.prefix[0] == "F0 s0 "


def test_making_an_order_first_skips_numba_s_blas_probe():
    """A process whose first compiled code is the order's round-robin (a pipelined `fred eval`
    builds the graph before its engine runs) loads numba's NumPy support as the engine's
    module does, without the BLAS probe that imports scipy.linalg (sysmodel.engine_compiled)."""
    import subprocess
    import sys
    code = ("import sys; from sysmodel.pipeline_schedules import schedule_order; "
            "schedule_order('1f1b', 2, 2, 1); print('numba.np.arraymath' in sys.modules, 'scipy.linalg' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]
