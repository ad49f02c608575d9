"""The speedups' intervals (studies/uncertainty.py) and the report that shows them
(studies/eval_report.py): the sampling's strata, the inputs applied as the model's own knobs,
intervals that hold their point and every run, and both tables in the report and the CSV."""

from __future__ import annotations

import math

import pytest

from studies.eval_report import SPEEDUP_CSV_FIELDS, report_markdown, speedup_rows
from studies.uncertainty import (SpeedupInterval, Swing, UncertaintyBlock, block_runs, sample_points,
                                 uncertain_inputs, uncertainty_block)
from sysmodel.platform import default_platform
from sysmodel.training import simulate_iteration
from sysmodel.workload_file import get_workload
from sysmodel.workloads import WORKLOADS


def test_latin_hypercube_puts_one_point_in_each_stratum_of_every_input():
    n = 7
    points = sample_points(n)
    assert len(points) == n and points == sample_points(n)      # seeded: the same every run
    for i, spec in enumerate(uncertain_inputs()):
        values = [p[i] for p in points]
        assert all(spec.low <= v <= spec.high for v in values)
        to_unit = ((lambda v: (math.log(v) - math.log(spec.low)) / (math.log(spec.high) - math.log(spec.low)))
                   if spec.log else (lambda v: (v - spec.low) / (spec.high - spec.low)))
        assert sorted(int(to_unit(v) * n) for v in values) == list(range(n))
    with pytest.raises(ValueError, match="samples must be in 1..200"):
        sample_points(0)


def test_every_range_holds_its_point_value_and_names_a_source():
    for spec in uncertain_inputs():
        assert spec.low <= spec.point <= spec.high and spec.low < spec.high and spec.source
    assert block_runs(6) == 1 + 12 + 2 * 4


def test_intervals_hold_the_point_and_the_swings_and_apply_the_model_s_own_knobs():
    platform = default_platform()
    block = uncertainty_block(platform, "documented", "test", {"transformer-17b": 1.0}, samples=1,
                              workloads=("transformer-17b",))
    wl = get_workload("transformer-17b")
    compute = next(s for s in uncertain_inputs() if s.name == "compute speed factor")
    slow = platform.with_compute_scale(compute.low)
    by_hand = (simulate_iteration(slow, "mesh", wl).time_s / simulate_iteration(slow, "fred-d", wl).time_s)
    swings = {(s.input, s.fabric): s for s in block.swings}
    assert swings[("compute speed factor", "fred-d")].at_low == pytest.approx(by_hand, rel=1e-12)
    for (name, fabric), s in swings.items():
        i = block.intervals[fabric]["transformer-17b"]
        assert i.low <= i.point <= i.high and i.low <= min(s.at_low, s.at_high) <= max(s.at_low, s.at_high) <= i.high
    # in-switch efficiency moves only the fabrics with in-switch collectives, and lower is slower
    assert swings[("in-switch efficiency", "fred-c")].at_low == swings[("in-switch efficiency", "fred-c")].at_high
    assert swings[("in-switch efficiency", "fred-d")].at_low < swings[("in-switch efficiency", "fred-d")].at_high
    # faster compute leaves more of the iteration to communication: the speedup grows
    assert swings[("compute speed factor", "fred-d")].at_low < swings[("compute speed factor", "fred-d")].at_high
    assert block.intervals["fred-d"]["transformer-17b"].high > block.intervals["fred-d"]["transformer-17b"].low


def _result(blocks):
    from types import SimpleNamespace
    from studies.evaluation import ImpliedComputeScale, PAPER_SPEEDUP
    speedup = {f: {w: 1.0 for w in WORKLOADS} for f in ("fred-a", "fred-b", "fred-c", "fred-d")}
    return SimpleNamespace(uncertainty=blocks, speedup=speedup, paper_speedup=PAPER_SPEEDUP,
                           calibration_paper=None, overlap="overlap",
                           implied_compute_scale=ImpliedComputeScale())


def _block(name, scale, point):
    intervals = {f: {w: SpeedupInterval(point=point, low=point - 0.01234, high=point + 0.1)
                     for w in WORKLOADS} for f in ("fred-a", "fred-b", "fred-c", "fred-d")}
    swings = [Swing("link efficiency", "fred-d", w, point + 0.05, point) for w in WORKLOADS]
    return UncertaintyBlock(name=name, assumes=f"{name} assumptions", compute_scales={w: scale for w in WORKLOADS},
                            intervals=intervals, swings=swings, runs=21, samples_per_policy=6)


def test_speedup_csv_holds_both_blocks_rounded_without_wall_clock():
    rows = speedup_rows(_result([_block("documented", 1.0, 1.0123456), _block("calibrated", 86.09, 1.75)]))
    assert len(rows) == 2 * 4 * len(WORKLOADS)
    assert {r[0] for r in rows} == {"documented", "calibrated"}
    first = dict(zip(SPEEDUP_CSV_FIELDS, rows[0]))
    assert first["speedup"] == "1.012" and first["speedup_low"] == "1.000" and first["speedup_high"] == "1.112"
    assert not any("eval" in f or "wall" in f or "elapsed" in f for f in SPEEDUP_CSV_FIELDS)
    calibrated_d = [dict(zip(SPEEDUP_CSV_FIELDS, r)) for r in rows if r[0] == "calibrated" and r[1] == "fred-d"]
    assert calibrated_d[0]["compute_scale"] == "86.09" and calibrated_d[0]["speedup_paper"] == "1.76"
    # no intervals: the point tables alone, empty bounds
    plain = speedup_rows(_result([]))
    assert len(plain) == 4 * len(WORKLOADS) and plain[0][5] == "" and plain[0][6] == ""


def test_report_shows_both_tables_labelled_with_their_assumptions_and_the_method():
    text = report_markdown(_result([_block("documented", 1.0, 1.0), _block("calibrated", 86.09, 1.75)])).text()
    assert "## Documented table" in text and "## Calibrated table" in text
    assert "Assumes: documented assumptions." in text and "Assumes: calibrated assumptions." in text
    assert "1.750 (1.738-1.850) [1.76]" in text          # point (low-high) [paper]
    assert "Latin-hypercube" in text and "not a confidence interval" in text
    assert "| link efficiency | 1 | 0.77 .. 1 |" in text
    assert "### Each input alone: Fred-D, calibrated table" in text
