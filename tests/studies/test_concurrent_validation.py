"""The concurrent block of ``make fabric-validate`` (studies/concurrent_validation.py): which
cases run where, and how a class outside the 10 % is counted and marked."""

from __future__ import annotations

from studies.concurrent_validation import (CONCURRENT_MARKERS, MP_DELAY, ConcurrentRow,
                                           concurrent_block, concurrent_cases)


def test_cases_run_on_every_fabric_at_both_sizes():
    cases, refused = concurrent_cases(["fred-a", "fred-d"], (40, 4000))
    assert refused == []
    got = [(c.spec.name, c.scenario, [(k.name, k.request.size_flits, k.delay) for k in c.classes])
           for c in cases]
    per_fabric = [
        ("mp-under-dp", [("dp", 4000, 0), ("mp", 40, MP_DELAY)]),
        ("mp-under-dp", [("dp", 4000, 0), ("mp", 4000, MP_DELAY)]),
        ("mp-dp-pp", [("mp", 40, 0), ("dp", 4000, 0), ("pp", 40, 0)]),
        ("mp-dp-pp", [("mp", 4000, 0), ("dp", 4000, 0), ("pp", 4000, 0)]),
        ("dp-under-io", [("dp", 40, MP_DELAY), ("io", 4000, 0)]),
        ("dp-under-io", [("dp", 4000, MP_DELAY), ("io", 4000, 0)]),
        ("dp-under-write", [("dp", 40, MP_DELAY), ("write", 4000, 0)]),
        ("dp-under-write", [("dp", 4000, MP_DELAY), ("write", 4000, 0)]),
        ("dp-under-far-write", [("dp", 40, MP_DELAY), ("write", 4000, 0)]),
        ("dp-under-far-write", [("dp", 4000, MP_DELAY), ("write", 4000, 0)]),
    ]
    assert got == [(f, *row) for f in ("fred-a", "fred-d") for row in per_fabric]
    # the I/O scenarios' fabric has one controller (endpoint 20, on L1 0); the others none
    assert [c.spec.io_controllers for c in cases[:10]] == [0] * 4 + [1] * 6
    assert [c.model[0]["algorithm"] for c in cases] == ["ring"] * 10 + ["in-switch"] * 10
    # the write is the model's io-write (an online unicast) on every fabric: NPU 0 (on the
    # controller's L1) or, far, NPU 1 of L1 1
    writes = [c for c in cases if c.scenario.endswith("write")]
    assert {c.model[1]["algorithm"] for c in writes} == {"unicast"}
    assert {c.scenario: c.classes[1].request.collectives[0].members for c in writes} == {
        "dp-under-write": (0,), "dp-under-far-write": (5,)}


def test_a_class_counts_only_with_completion_and_latency_within_ten_percent():
    good = ConcurrentRow("fred-d", "mp-under-dp", "mp", 40, 200, 327.0, 325, 127.0, 125, 89.0, 88, 80)
    # completion within 10 % (200 cycles of delay hide it), latency 1.3 x: not within
    late = ConcurrentRow("fred-d", "mp-under-dp", "mp", 40, 200, 327.0, 365, 127.0, 165, 89.0, 88, 80)
    assert good.within and not late.within
    block = concurrent_block([good, late], "cmd", "today", "here")
    assert block.startswith(CONCURRENT_MARKERS[0]) and block.endswith(CONCURRENT_MARKERS[1])
    assert "**1/2 classes**" in block and "0.994" in block and "1.116 **!**" in block


def test_a_case_that_did_not_complete_is_listed_and_its_classes_count_as_not_within():
    good = ConcurrentRow("fred-d", "mp-under-dp", "mp", 40, 200, 327.0, 325, 127.0, 125, 89.0, 88, 80)
    block = concurrent_block([good], "cmd", "today", "here",
                             failed=[("fred-a mp-under-dp (dp 4000, mp 40 flits)", 2, "not done")])
    assert "**1/3 classes**" in block
    assert "Did not complete on the RTL" in block and "fred-a mp-under-dp (dp 4000, mp 40 flits): not done" in block
