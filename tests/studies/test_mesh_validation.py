"""The mesh rows of fabric-validate (studies/mesh_validation.py) from stored rows, no Verilator:
the row of a run mesh case, the speedups paired by case and size, and the block between the
mesh markers (the FRED block and the text around are kept)."""

from types import SimpleNamespace

import pytest

from studies.fabric_validation import BEGIN, END, FabricValidationRow, summarise
from studies.mesh_validation import (MESH_BEGIN, MESH_END, mesh_validation_row, speedup_rows,
                                     write_mesh_validation)


def row(fabric, case, size, model, rtl):
    return FabricValidationRow(fabric, case, size, "ring", model, model - 3, 3.0, 0.0, 0, "x", rtl,
                               rtl / model, 100, 1e5)


def test_mesh_row_reads_the_case():
    program = SimpleNamespace(recv_total=1234)   # MeshProgram.recv_total is a property
    case = SimpleNamespace(estimate=SimpleNamespace(cycles=16032.0, bandwidth_cycles=15999.0,
                                                    algorithm="hierarchical-2d", busiest_link_flits=3999.8),
                           rtl=SimpleNamespace(cycles=16020, cycles_per_s=2e4, program=program),
                           size_flits=4000, ratio=16020 / 16032.0)
    r = mesh_validation_row("wafer all-reduce", case)
    assert (r.fabric, r.model_latency_cycles, r.rtl_cycles, r.flits_checked) == ("mesh", 33.0, 16020, 1234)
    assert r.within and r.busiest_link == "3999.8 flits"


def test_speedups_pair_mesh_and_fred_rows_of_the_same_case_and_size():
    rows = [row("mesh", "wafer all-reduce", 4000, 16000.0, 16020),
            row("fred-d", "wafer all-reduce", 4000, 4000.0, 4005),
            row("fred-d", "wafer all-reduce", 40, 100.0, 100),          # no mesh row at 40
            row("mesh", "MP2-DP5-PP2 DP all-reduce", 4000, 25600.0, 25613)]
    (wafer,) = speedup_rows(rows)   # the DP row has no Fred-X partner
    rtl, model, paper = wafer["speedups"]["fred-d"]
    assert rtl == pytest.approx(16020 / 4005) and model == pytest.approx(4.0) and paper == 4.0


def test_block_goes_between_its_markers_only(tmp_path):
    rows = [row("mesh", "wafer all-reduce", 4000, 16000.0, 18870),
            row("mesh", "MP2-DP5-PP2 MP all-reduce", 40, 163.0, 164),
            row("fred-a", "wafer all-reduce", 4000, 15233.0, 15232)]
    doc = tmp_path / "v.md"
    doc.write_text(f"# kept\n\n{BEGIN}\nfred table\n{END}\n\n{MESH_BEGIN}\nold\n{MESH_END}\n\nkept too\n")
    write_mesh_validation(summarise(rows, "fred fabric-validate --fabrics fred-a,mesh"), doc)
    text = doc.read_text()
    assert "fred table" in text and "old" not in text and text.endswith(MESH_END + "\n\nkept too\n")
    assert "**1/2 cases** agree within 5%; the worst is wafer all-reduce at 4000 flits" in text
    assert "| 18870 | 1.179 **!** |" in text
    assert "| wafer all-reduce | 4000 | 18870 | 1.24 / 1.05 / 1.25 |" in text
