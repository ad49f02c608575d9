"""The ASIC report's design list, its comparison with the cost model's generic-cell gate
equivalents, and its table (no tools needed; eda/asic.py's flow is tested in tests/eda)."""

import pytest

from studies.asic_report import asic_designs, generic_ge_of, markdown
from studies.cost import load_cost_model


def test_design_list_covers_the_issue_and_names_are_unique():
    designs = asic_designs((4, 8), middle=3)
    names = [d["name"] for d in designs]
    assert len(names) == len(set(names))
    assert {"rd_microswitch", "input_microswitch_m3", "output_microswitch_m3", "mesh_router",
            "packet_switch", "fred_switch_P4m3", "fred_switch_P8m3"} <= set(names)
    assert {d["dtype"] for d in designs if d["kind"] == "adder"} == {"int32", "fp16", "bf16", "fp32"}
    assert names.index("fred_switch_P4m3") < names.index("fred_switch_P8m3")   # increasing size


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
