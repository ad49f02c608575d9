"""The ASIC report's design list, its comparison with the cost model's generic-cell gate
equivalents, and its table (no tools needed; eda/asic.py's flow is tested in tests/eda)."""

import pytest

from hdl.contracts.errors import FredError
from studies.asic_report import area_by_component, asic_designs, generic_ge_of, markdown, register_output
from studies.cost import load_cost_model


def test_design_list_covers_the_issue_and_names_are_unique():
    designs = asic_designs(range(4, 13), middle=3)
    names = [d["name"] for d in designs]
    assert len(names) == len(set(names))
    assert {"rd_microswitch", "input_microswitch_m3", "output_microswitch_m3", "demux_m3", "mux_m3",
            "mesh_router", "packet_switch"} <= set(names)
    switches = [d for d in designs if d["kind"] == "switch"]
    assert [d["name"] for d in switches] == [f"fred_switch_P{p}m3_hier" for p in range(4, 13)]
    assert {d["ports"] for d in switches if d["chiplet"]} == {10, 12}    # the wafer's chiplets
    assert {d["dtype"] for d in designs if d["kind"] == "adder"} == {"int32", "fp16", "bf16", "fp32"}


def test_both_synthesis_modes_give_the_characterizations_names():
    names = [d["name"] for d in asic_designs((8,), synthesis="both") if d["kind"] == "switch"]
    assert names == ["fred_switch_P8m3", "fred_switch_P8m3_hier"]
    assert not [d for d in asic_designs((8,), synthesis="flat") if d.get("synthesis") == "hierarchical"]
    with pytest.raises(FredError, match="synthesis 'deep' is not one of hierarchical, flat, both"):
        asic_designs((8,), synthesis="deep")


def test_area_by_component_groups_submodules_and_multiplies_instances():
    modules = {"top": {"instances": 1, "area_um2": 10.0},
               "ms": {"instances": 3, "area_um2": 1.0}, "ms.fork": {"instances": 3, "area_um2": 4.0},
               "ms.path.pass0": {"instances": 3, "area_um2": 2.0},
               "red": {"instances": 5, "area_um2": 0.0}, "red.lane0": {"instances": 5, "area_um2": 6.0}}
    assert area_by_component(modules) == {"red": 30.0, "ms": 21.0, "top": 10.0}
    assert list(area_by_component(modules)) == ["red", "ms", "top"]      # largest first


def test_generic_ge_is_the_cost_models_pricing_of_the_same_design():
    cost = load_cost_model()
    cells = {"$_NAND_": 10, "$_XOR_": 3, "$_SDFF_PP0_": 2}
    characterization = {"cost": [{"name": "fred_switch_P4m3", "generic_cells_by_type": cells},
                                 {"name": "other", "generic_cells_by_type": {"$_NOT_": 1}}]}
    ge = generic_ge_of({"name": "fred_switch_P4m3"}, characterization, cost)
    assert ge == pytest.approx(10 * 1.0 + 3 * 2.33 + 2 * 6.0)     # configs/cost.toml's ratios
    assert generic_ge_of({"name": "adder_fp16_l1"}, characterization, cost) is None
    assert generic_ge_of({"name": "x"}, None, cost) is None


def test_table_has_one_row_per_result_with_its_figures():
    row = {"name": "adder_fp16_l1", "cells": 1465, "flip_flops": 240, "area_um2": 227460.0, "kge": 2.37,
           "fanout_buffers": 27, "critical_path_ns": 3.321, "critical_path_fo4": 21.3, "logic_levels": 14,
           "seconds": {"total": 1.2}}
    lines = markdown([row, {**row, "name": "b", "generic_ge": 2000.0, "asic_per_generic_ge": 1.185}]).splitlines()
    assert len(lines) == 4 and lines[0].startswith("| design | cells |")
    assert "| adder_fp16_l1 | 1465 | 240 | 227,460 | 2.37 | 27 | 3.321 | 21.3 | 14 | - | - | 1.2 |" == lines[2]
    assert "| 2000.0 | 1.185 |" in lines[3]


def test_cost_files_ratio_is_the_measured_one_in_data_asic_json():
    """configs/cost.toml's asic_per_generic_ge is the Fred_3(8) figure of the checked-in
    measurement, which is itself standard-cell GE over the cost model's generic GE."""
    import json
    from pathlib import Path
    data = json.loads((Path(__file__).resolve().parents[2] / "data" / "asic.json").read_text())
    (p8,) = [r for r in data["results"] if r["name"] == "fred_switch_P8m3"]
    assert p8["ge"] == pytest.approx(p8["area_um2"] / data["nand2_um2"], abs=0.1)
    assert p8["asic_per_generic_ge"] == pytest.approx(p8["ge"] / p8["generic_ge"], abs=1e-3)
    assert load_cost_model().asic_per_generic_ge == pytest.approx(p8["asic_per_generic_ge"], abs=1e-3)


def test_register_output_names_the_rtl_register_of_an_anonymous_flop():
    netlist = ("  NAND2X1 _5_ (\n    .A(a),\n    .B(b),\n    .Y(_6_)\n  );\n"
               "  DFFPOSX1 _7_ (\n    .CLK(clk),\n    .D(_6_),\n    .Q(\\config_memory.active[3] )\n  );\n")
    assert register_output(netlist, "_7_") == "config_memory.active[3]"
    assert register_output(netlist, "_5_") is None          # not a flip-flop
    assert register_output(netlist, "_8_") is None
