"""A long 1F1B iteration carried from two short runs whose steady periods repeat
(sysmodel/pipeline_collapse.py; docs/sysmodel.md, Speed, twenty-second increment)."""

import numpy as np
import pytest

from sysmodel import pipeline_collapse
from sysmodel.pipeline_collapse import collapsed_iteration, inserted_period, short_runs
from sysmodel.training import simulate_iteration
from sysmodel.workloads import transformer
from studies.validation import cluster_platform

P = cluster_platform()
REL = 1e-9


def pipeline(pp: int, microbatches: int, interleave: int = 1, mode: str = "full"):
    """A Megatron-style GPT on the validation's cluster: MP8, ``pp`` stages, one sample per
    microbatch (small enough for the reference loop)."""
    return transformer(name=f"pp{pp}", layers=4 * pp * interleave, hidden=1024, heads=16, seq=512,
                       vocab=5000, mode="weight-stationary", strategy=f"MP8-DP1-PP{pp}",
                       microbatches=microbatches, samples_per_dp=microbatches, interleave=interleave,
                       pipeline_split="layers", recompute=mode,
                       sequence_parallel=mode == "selective")


def assert_same_iteration(carried, whole):
    """Every figure within 1e-9 of the iteration (breakdown parts may be 0: compared against
    the iteration's scale, as tests/sysmodel/test_sysmodel_speed_identity.py does)."""
    assert carried.time_s == pytest.approx(whole.time_s, rel=REL, abs=0)
    assert carried.steady_time_s == pytest.approx(whole.steady_time_s, rel=REL, abs=0)
    assert carried.config_load_s == whole.config_load_s
    assert carried.tasks == whole.tasks and carried.microbatches == whole.microbatches
    assert carried.memory == whole.memory and carried.notes == whole.notes
    assert carried.strategy == whole.strategy and carried.samples_per_dp == whole.samples_per_dp
    assert set(carried.breakdown) == set(whole.breakdown) and set(carried.comm_busy) == set(whole.comm_busy)
    for part in whole.breakdown:
        assert abs(carried.breakdown[part] - whole.breakdown[part]) <= REL * whole.time_s, part
    for part in whole.comm_busy:
        assert abs(carried.comm_busy[part] - whole.comm_busy[part]) <= REL * whole.time_s, part


# -- the check, on hand-made timelines -------------------------------------------------------------
def _times(starts, length=0.5):
    s = np.array(starts, dtype=float)
    return s, s + length


def test_a_period_inserted_in_the_steady_part_is_recognised():
    # tasks every 1 s: b has one more, so everything from the insertion on is 1 s later
    a = _times([0, 1, 2, 3, 4])
    b = _times([0, 1, 2, 3, 4, 5])
    assert inserted_period(a, b, 1.0, 1e-12)
    # a warm-up and a cool-down that differ from the period: inserted between them
    a = _times([0, 0.3, 1.3, 2.3, 2.4])
    b = _times([0, 0.3, 1.3, 2.3, 3.3, 3.4])
    assert inserted_period(a, b, 1.0, 1e-12)
    # nothing inserted on this resource: its tasks after some place are only shifted
    a = _times([0, 5, 6])
    b = _times([0, 6, 7])
    assert inserted_period(a, b, 1.0, 1e-12)


def test_timelines_that_are_not_one_inserted_period_are_refused():
    a = _times([0, 1, 2, 3, 4])
    # one task of the shifted part 1 ns late
    assert not inserted_period(a, _times([0, 1, 2, 3, 4, 5 + 1e-9]), 1.0, 1e-12)
    # the shift differs from the makespan's
    assert not inserted_period(a, _times([0, 1, 2, 3, 4, 5]), 1.1, 1e-12)
    # an end that moved while the start did not (a transfer slowed in the copy)
    sa, ea = _times([0, 1, 2, 3, 4])
    sb, eb = _times([0, 1, 2, 3, 4, 5])
    eb[2] += 0.25
    assert not inserted_period((sa, ea), (sb, eb), 1.0, 1e-12)
    # two insertions (all forwards, then all backwards: a schedule with no steady part)
    a = _times([0, 1, 10, 11])
    b = _times([0, 1, 2, 11, 12, 13])
    assert not inserted_period(a, b, 1.0, 1e-12)
    # fewer tasks in the longer run
    assert not inserted_period(a, _times([0, 1, 2]), 1.0, 1e-12)
    # the inserted copy must be the k tasks before it, shifted: not the first task itself
    a = _times([5, 6])
    b = _times([0, 6, 7])
    assert not inserted_period(a, b, 1.0, 1e-12)


def test_short_runs_are_the_first_steady_counts_and_only_where_they_save():
    assert short_runs(P, None, 512, 64, 1) == (65, 66)
    assert short_runs(P, None, 130, 64, 1) is None          # 65 + 66 > 130 / 2
    assert short_runs(P, None, 64, 4, 2) == (12, 16)         # interleaved: a period is PP microbatches
    assert short_runs(P, None, 280, 35, 3) is None           # 105 + 140 > 140
    assert short_runs(P, None, 1050, 35, 3) == (105, 140)
    assert short_runs(P, None, 1024, 35, 3) is None          # not a whole number of periods more
    assert short_runs(P, None, 512, 1, 1) is None            # no pipeline


# -- whole iterations against the carried ones -----------------------------------------------------
@pytest.mark.parametrize("pp,m,interleave,mode", [(4, 32, 1, "full"), (4, 40, 1, "selective"),
                                                  (4, 64, 2, "full")])
def test_carried_figures_equal_the_whole_run_and_the_reference(pp, m, interleave, mode):
    p = P.scaled(npus=8 * pp)
    wl = pipeline(pp, m, interleave, mode)
    found = collapsed_iteration(p, "cluster", wl, microbatches=m)
    assert found is not None
    carried, runs = found
    assert runs == short_runs(p, wl, m, pp, interleave)
    whole = simulate_iteration(p, "cluster", wl, microbatches=m)
    assert_same_iteration(carried, whole)
    reference = simulate_iteration(p, "cluster", wl, microbatches=m, reference=True)
    assert_same_iteration(carried, reference)


def test_runs_without_a_steady_part_fall_back(monkeypatch):
    # with fewer microbatches than stages the first stages run every forward before any
    # backward: one more microbatch inserts a task in two places, which the check refuses
    p = P.scaled(npus=32)
    wl = pipeline(4, 32)
    monkeypatch.setattr(pipeline_collapse, "short_runs", lambda *args: (2, 3))
    assert collapsed_iteration(p, "cluster", wl, microbatches=32) is None
    # interleaved, 8 microbatches on PP 4 with 2 chunks: stage 0's steady part is shorter
    # than a period (6 pairs of 8), so the inserted period is not a copy of one before it
    wl = pipeline(4, 64, 2)
    monkeypatch.setattr(pipeline_collapse, "short_runs", lambda *args: (8, 12))
    assert collapsed_iteration(p, "cluster", wl, microbatches=64) is None


def test_what_is_not_a_long_pipeline_is_left_to_the_whole_run():
    p = P.scaled(npus=32)
    assert collapsed_iteration(p, "cluster", pipeline(4, 8), microbatches=8) is None   # too short
    one = transformer(name="one", layers=4, hidden=1024, heads=16, seq=512, vocab=5000,
                      mode="weight-stationary", strategy="MP8-DP4-PP1", microbatches=64,
                      samples_per_dp=64, pipeline_split="layers")
    assert collapsed_iteration(p, "cluster", one, microbatches=64) is None


def test_a_stage_that_would_become_the_busiest_stops_the_carry(monkeypatch):
    # the breakdown is of the busiest stage; if another stage's compute grows faster per period
    # it would be the busiest at m, and the carried breakdown (of the short runs' stage) wrong
    import dataclasses
    p = P.scaled(npus=32)
    wl = pipeline(4, 32)
    real = pipeline_collapse._short_run
    assert collapsed_iteration(p, "cluster", wl, microbatches=32) is not None

    def overtaken(platform, fabric, workload, plan, k):
        run = real(platform, fabric, workload, plan, k)
        compute = list(run.stage_compute)
        other = 1 if run.stage != 1 else 0
        # half the busiest stage's at m_a = 5, two thirds at m_b = 6: carried to 32 it passes it
        compute[other] = compute[run.stage] * (1.5 * k - 2 * 5 * 0.5 - 0.01) / k
        return dataclasses.replace(run, stage_compute=compute)

    monkeypatch.setattr(pipeline_collapse, "_short_run", overtaken)
    assert collapsed_iteration(p, "cluster", wl, microbatches=32) is None


def test_the_busiest_stage_is_the_first_of_the_largest():
    assert pipeline_collapse._busiest([1.0, 3.0, 3.0, 2.0]) == 1
    assert pipeline_collapse._busiest([4.0, 3.0]) == 0


@pytest.mark.parametrize("name", ["megatron-1t/full", "megatron-1t/seqsel"])
def test_the_validation_cases_it_collapses_equal_their_whole_runs(name):
    # fred validate's Megatron-1T cases (PP 64, 512 microbatches, 330,816 tasks) carried from
    # runs of 65 and 66 microbatches: every figure within 1e-9 of the iteration of the whole run
    from studies.validation import case_workload, load_cases
    case = next(c for c in load_cases()[0] if c.name == name)
    p, wl = P.scaled(npus=case.gpus), case_workload(case)
    found = collapsed_iteration(p, "cluster", wl, microbatches=wl.microbatches)
    assert found is not None and found[1] == (65, 66)
    assert_same_iteration(found[0], simulate_iteration(p, "cluster", wl, microbatches=wl.microbatches))
