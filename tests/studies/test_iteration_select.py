"""The iteration table's cases one by one and ``--only`` (studies/iteration_select.py): which
cases a filter selects, and the errors naming what exists. Pure Python."""

from __future__ import annotations

import pytest

from hdl.contracts.errors import FredError
from studies.iteration_select import select_units, table_units

CASES = (("resnet-152", "MP1-DP20-PP1", ("mesh", "fred-b"), None, None, ("fred-b",)),
         ("gpt-3", "MP1-DP20-PP1", ("mesh",), 10_000.0, 8, ("fred-a", "fred-b")))


def _names(units):
    return [u.name for u in units]


def test_units_circuit_first_with_the_commands_scale_where_a_case_has_none():
    units = table_units(CASES, 1000.0)
    assert _names(units) == ["resnet-152 MP1-DP20-PP1 K=1000 mesh circuit", "resnet-152 MP1-DP20-PP1 K=1000 fred-b circuit",
                             "gpt-3 MP1-DP20-PP1 K=10000 mesh circuit", "resnet-152 MP1-DP20-PP1 K=1000 fred-b packet",
                             "gpt-3 MP1-DP20-PP1 K=10000 fred-a packet", "gpt-3 MP1-DP20-PP1 K=10000 fred-b packet"]
    assert units[2].samples == 8 and units[0].samples is None
    assert table_units(CASES, 500.0)[0].scale == 500.0


def test_one_keys_values_are_alternatives_different_keys_all_hold():
    units = table_units(CASES, 1000.0)
    assert select_units(units, None) == units
    assert _names(select_units(units, ["fred-b"])) == [
        "resnet-152 MP1-DP20-PP1 K=1000 fred-b circuit", "resnet-152 MP1-DP20-PP1 K=1000 fred-b packet",
        "gpt-3 MP1-DP20-PP1 K=10000 fred-b packet"]
    # bare values and KEY=VALUE, comma-separated or repeated; the strategy without -PP1, K as a number
    assert _names(select_units(units, ["fabric=fred-b,mesh", "switch=circuit", "mp1-dp20", "1e3"])) == [
        "resnet-152 MP1-DP20-PP1 K=1000 mesh circuit", "resnet-152 MP1-DP20-PP1 K=1000 fred-b circuit"]
    assert _names(select_units(units, ["gpt-3,resnet-152", "packet", "fabric=fred-a"])) == [
        "gpt-3 MP1-DP20-PP1 K=10000 fred-a packet"]
    assert _names(select_units(units, ["scale=10000"])) == _names(u for u in units if u.workload == "gpt-3")


def test_unknown_names_are_refused_listing_what_exists():
    units = table_units(CASES, 1000.0)
    with pytest.raises(FredError, match=r"'fred-x' names no case; the table's cases have workload: resnet-152, "
                                        r"gpt-3; strategy: MP1-DP20-PP1; scale: 1000, 10000; fabric: mesh, fred-b, "
                                        r"fred-a; switch: circuit, packet"):
        select_units(units, ["fred-x"])
    with pytest.raises(FredError, match=r"no case has fabric 'fred-d'; the table's fabrics are mesh, fred-b, fred-a"):
        select_units(units, ["fabric=fred-d"])
    with pytest.raises(FredError, match=r"unknown key 'colour' in 'colour=red'; the keys are workload, strategy"):
        select_units(units, ["colour=red"])
    with pytest.raises(FredError, match=r"scale 'big' is not a number"):
        select_units(units, ["scale=big"])
    with pytest.raises(FredError, match=r"--only gpt-3 --only circuit,fred-b: no case of the table has all of"):
        select_units(units, ["gpt-3", "circuit,fred-b"])


def test_a_bare_value_two_keys_have_must_name_its_key():
    units = table_units((("mesh", "MP1-DP20-PP1", ("mesh",), None, None, ()),), 1000.0)
    with pytest.raises(FredError, match=r"'mesh' is ambiguous \(workload or fabric; write KEY=VALUE\)"):
        select_units(units, ["mesh"])
    assert len(select_units(units, ["workload=mesh"])) == 1
