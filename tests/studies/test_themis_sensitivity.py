"""How the Themis gain moves with the unknown inputs (studies/themis_sensitivity.py)."""

import pytest

from fred.cli import main
from studies.cluster_study import themis_table
from studies.themis_sensitivity import balance_estimate, dimension_count_table, sensitivity_table


def test_balance_estimate_by_hand():
    # two 2-member dimensions: the fixed order puts 1/2 then 1/4 of the buffer on them;
    # spread evenly over both: 2 x (1/2) / (3/4)
    assert balance_estimate((2, 2)) == pytest.approx(4 / 3)
    assert balance_estimate((32, 32)) == pytest.approx(2 * (31 / 32) / (31 / 32 + 31 / 32 / 32))


def test_equal_switches_reach_the_balance_estimate():
    for row, estimate in dimension_count_table():
        assert 0.95 * estimate <= row.gain <= estimate * 1.001


def test_variants_move_the_gain_the_way_the_mechanism_says():
    rows = {(r.topology, r.varied): r for r in sensitivity_table(("themis-3d.toml",))}
    # the file's profile is the study's Themis table
    study = {r.topology: r for r in themis_table()}["themis-3d"]
    assert rows["themis-3d", "bandwidth file"].gain == pytest.approx(study.gain)
    # the fixed order loads the innermost dimension most: Themis gains most when it is the
    # slowest (rising bandwidth) and least when it is the fastest (falling)
    rising, equal, falling = (rows["themis-3d", f"bandwidth {p}"].gain for p in ("rising 2x", "equal", "falling 2x"))
    assert rising > equal > falling


def test_cli(capsys):
    assert main(["cluster", "--themis-sensitivity", "--platform", "themis-3d.toml"]) != 0
    assert "--themis-sensitivity computes its own" in capsys.readouterr().err


def test_end_to_end_gain_follows_the_reduction_share():
    from studies.themis_sensitivity import end_to_end_table
    slow, fast = end_to_end_table(("resnet-152",), (1.0, 100.0))
    assert 1.0 <= slow.gain < fast.gain
    assert slow.reduction_share < fast.reduction_share
    # Themis only reorders the cross-wafer reduction: the gain cannot exceed 1 / (1 - its share)
    assert fast.gain <= 1 / (1 - fast.reduction_share)
