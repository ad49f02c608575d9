"""The optical study (studies/optical_study.py, docs/optical.md): its tables' mechanisms on
hand-computed cases."""

from __future__ import annotations

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
    # $57.4 x 50 GBps per NPU on the switch; WRHT on 50 nodes needs 25 wavelengths at $39.4 per GBps
    assert electrical["network_cost_per_npu"] == pytest.approx(2870.0)
    assert equal["network_cost_per_npu"] == pytest.approx(2870.0)
    # 2.91 GBps per wavelength (2870 / (39.4 x 25)) instead of 50: its all-reduce is slower
    assert equal["allreduce_1gb_s"] > 10 * electrical["allreduce_1gb_s"]
