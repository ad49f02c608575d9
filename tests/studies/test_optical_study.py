"""The optical study (studies/optical_study.py, docs/optical.md): its tables' mechanisms on
hand-computed cases."""

from __future__ import annotations

from dataclasses import replace

import pytest

from studies.optical_study import cluster_table, headline_table, latency_ratio_table
from sysmodel.optical import OpticalRing, allreduce_time


def test_latency_ratio_is_the_plans_ratio():
    # x = S / (b d): with b = 1 GBps and d = 1 us, S = x kB; the table's closed form must be
    # the ratio of the two plans' times
    ring = OpticalRing(64, 1.0, 1000.0, 0.0, 1.0)
    for row in latency_ratio_table(xs=(1, 107.5, 1e4)):
        size = row["x"] * 1e3
        expected = 1 - allreduce_time(ring, "wrht", 1024, size) / allreduce_time(ring, "ring", 1024, size)
        assert row["reduction"] == pytest.approx(expected, rel=1e-9)
    # by hand: L = 2, x = 107.5: 1 - 4 x 108.5 / (2046 x (107.5/1024 + 1)) = 0.808
    assert latency_ratio_table(xs=(107.5,))[0]["reduction"] == pytest.approx(0.8080, abs=1e-4)


def test_headline_recursive_doubling_rounds_by_hand():
    # 1,024 nodes, 64 wavelengths: RD's 10 steps need 1, 2, .., 512 wavelengths: 7 single
    # rounds + 2 + 4 + 8 = 21 rounds of the whole message; WRHT 4 steps: 1 - 4/21 for any size
    for row in headline_table(sizes=(1e6, 1e9)):
        assert row["vs_optical_rd"] == pytest.approx(1 - 4 / 21, rel=1e-3)


def test_equal_cost_optical_scale_out():
    rows = {r["scale-out"].split(" (")[0]: r for r in cluster_table(workloads=("resnet-152",))}
    electrical = rows["electrical switch"]
    equal = rows["optical WRHT, switch's cost"]
    # $57.4 x 50 GBps per NPU on the switch; WRHT on 50 nodes needs 25 wavelengths at $17.0 per GBps
    assert electrical["network_cost_per_npu"] == pytest.approx(2870.0)
    assert equal["network_cost_per_npu"] == pytest.approx(2870.0)
    # 6.75 GBps per wavelength (2870 / (17.0 x 25)) instead of 50: its all-reduce is slower
    assert equal["allreduce_1gb_s"] > 5 * electrical["allreduce_1gb_s"]


def test_ring_against_recursive_doubling_mechanism():
    """The optical-vs-electrical paper's two findings as mechanisms (not its numbers): ring
    overtakes recursive doubling above one message size; more wavelengths speed RD (fewer
    serialised rounds) and not ring, so they push that size up; at equal bandwidth x latency
    the optical crossover lies below the electrical one (RD's steps wait for wavelengths),
    and they meet once RD never waits (W >= n/2)."""
    from studies.optical_study import HEADLINE_SETUP, crossover_table
    from sysmodel.optical import allreduce_time
    n, ring = 1024, HEADLINE_SETUP["optical"]
    by_w = {w: replace(ring, wavelengths=w) for w in (4, 64, 512)}
    assert len({allreduce_time(r, "ring", n, 1e8) for r in by_w.values()}) == 1
    rd = [allreduce_time(by_w[w], "recursive-doubling", n, 1e8) for w in (4, 64, 512)]
    assert rd[0] > rd[1] > rd[2]
    equal_bd = {**HEADLINE_SETUP, "electrical_gbps": ring.wavelength_gbps, "electrical_latency_ns": ring.oeo_ns}
    rows = {r["medium"]: r for r in crossover_table(n, (4, 64, 512), equal_bd)}
    cross = {w: rows[f"optical, {w} wavelengths"]["crossover_bytes"] for w in (4, 64, 512)}
    assert cross[4] < cross[64] < cross[512]
    for w, s in cross.items():
        r = by_w[w]
        assert allreduce_time(r, "ring", n, 0.5 * s) > allreduce_time(r, "recursive-doubling", n, 0.5 * s)
        assert allreduce_time(r, "ring", n, 2 * s) < allreduce_time(r, "recursive-doubling", n, 2 * s)
        assert s == pytest.approx(rows[f"optical, {w} wavelengths"]["closed_form_bytes"], rel=1e-9)
    assert cross[64] < rows["electrical"]["crossover_bytes"]
    assert cross[512] == pytest.approx(rows["electrical"]["crossover_bytes"], rel=1e-9)
