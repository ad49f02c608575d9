"""The in-switch efficiency sensitivity of ``fred eval`` (docs/sysmodel.md, "In-switch
efficiency"): the measured efficiency it uses, the platform it changes and a hand-computed
break-even."""

import pytest

from fred.commands import eval as command
from studies.in_switch_sensitivity import (break_even_efficiency, in_switch_sensitivity,
                                           nvls_in_switch_efficiency, with_in_switch_efficiency)
from sysmodel.platform import default_platform
from sysmodel.workload_file import get_workload

P = default_platform()


def test_the_efficiency_is_nvls_measured_one_and_only_in_switch_variants_change():
    assert nvls_in_switch_efficiency() == 0.836
    slow = with_in_switch_efficiency(P, 0.5)
    assert {n: v.in_switch_efficiency for n, v in slow.variants.items()} == \
        {"fred-a": 1.0, "fred-b": 0.5, "fred-c": 1.0, "fred-d": 0.5}
    assert all(v.in_switch_efficiency == 1.0 for v in P.variants.values())   # the default stays


def test_resnet_break_even_is_the_all_reduce_byte_ratio():
    """ResNet-152's communication is its 20-NPU data-parallel gradient all-reduce: in the switches
    each NPU moves D per direction, with the endpoint algorithm 2(N-1)/N x D on the same links.
    Fred-D and Fred-C tie where D / eta = 2 x 19/20 x D: eta = 20/38."""
    eta = break_even_efficiency(P, get_workload("resnet-152"))
    assert eta == pytest.approx(20 / 38, abs=2 ** -13)


def test_sensitivity_rows_and_console_table():
    study = in_switch_sensitivity(P, workloads=("resnet-152",))
    (row,) = study.rows
    assert row.setting == "documented" and row.compute_scale == 1.0
    # slower in-switch flows never make Fred-B/D faster; at 0.836 > 20/38 Fred-D still beats Fred-C
    assert row.fred_d_nvls <= row.fred_d_line_rate and row.fred_b_nvls <= row.fred_b_line_rate
    assert row.fred_d_nvls > row.fred_c
    assert "issues/212" in study.source

    class Summary:
        in_switch_sensitivity = study
    text = command._in_switch(Summary())
    assert "0.836" in text and "resnet-152" in text and "0.526" in text
