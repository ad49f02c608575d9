"""The OSU 0.35 um flow's readers and its error path (eda/asic.py). The tools are Debian packages
that CI does not have: the readers are tested on hand-written reports in the tools' formats, the
missing-tool error by hiding the tools; one end-to-end run on a small adder is skipped without
them."""

import math
import shutil
from pathlib import Path

import pytest

from eda import asic
from eda.asic import (find_asic_tools, fo4_netlist, liberty_cell_area, parse_hierarchy_stat,
                      parse_sta_report, parse_stat, yosys_script)
from hdl.contracts.errors import FredError

LIBERTY_TEXT = """
library(tiny) {
  cell (INVX1) {
    area : 64;
    pin(A) { direction : input; capacitance : 0.01; }
    pin(Y) { direction : output; function : "(!A)"; }
  }
  cell (NAND2X1) {
    area : 96;
    pin(A) { direction : input; }
    pin(B) { direction : input; }
    pin(Y) { direction : output; }
  }
}
"""

STAT_TEXT = """
4. Printing statistics.

=== top ===

   Number of wires:                 12
   Number of cells:                  5
     DFFPOSX1                        2
     INVX1                           1
     NAND2X1                         2

   Chip area for module '\\top': 1024.000000

"""

#: yosys 0.23 ``stat -liberty -top top`` of a hierarchy: top holds two ``pair``, each of which
#: holds only submodules (no area line), one ``leaf`` and three ``buf``; ``buf`` is also used
#: once by top directly
HIER_STAT_TEXT = """
=== buf ===

   Number of cells:                  1
     BUFX2                           1

   Chip area for module '\\buf': 48.000000

=== leaf ===

   Number of cells:                  2
     NAND2X1                         2

   Chip area for module '\\leaf': 192.000000

=== pair ===

   Number of cells:                  4
     buf                             3
     leaf                            1

   Area for cell type \\leaf is unknown!

=== top ===

   Number of cells:                  4
     INVX1                           1
     buf                             1
     pair                            2

   Chip area for module '\\top': 64.000000

=== design hierarchy ===

   top                               1
     buf                             1
     pair                            2
       buf                           3
       leaf                          1

   Number of wires:                 20
   Number of cells:                 11
     BUFX2                           7
     INVX1                           1
     NAND2X1                         4

   Chip area for top module '\\top': 784.000000

"""

STA_TEXT = """Startpoint: _7_ (rising edge-triggered flip-flop clocked by clk)
Endpoint: _9_ (rising edge-triggered flip-flop clocked by clk)
Path Group: clk
Path Type: max

   Delay     Time   Description
-----------------------------------------------------------
   0.000    0.000   clock clk (rise edge)
   0.000    0.000   clock network delay (ideal)
   0.000    0.000 ^ _7_/CLK (DFFPOSX1)
   0.450    0.450 ^ _7_/Q (DFFPOSX1)
   0.380    0.830 ^ _fanoutbuf3_/Y (BUFX4)
   0.218    1.048 v _1_/Y (INVX1)
   0.116    1.164 ^ _2_/Y (NAND2X1)
   0.000    1.164 ^ _9_/D (DFFPOSX1)
            1.164   data arrival time

  10.000   10.000   clock clk (rise edge)
   0.000   10.000   clock network delay (ideal)
           10.000 ^ _9_/CLK (DFFPOSX1)
  -0.277    9.723   library setup time
            9.723   data required time
-----------------------------------------------------------
            9.723   data required time
           -1.164   data arrival time
-----------------------------------------------------------
            8.559   slack (MET)
"""


def test_missing_tools_are_named_with_their_debian_package(monkeypatch, tmp_path):
    monkeypatch.setattr(asic.shutil, "which", lambda name: None)
    with pytest.raises(FredError) as info:
        find_asic_tools(liberty=tmp_path / "none.lib")
    message = str(info.value)
    for needed in ("yosys (package yosys)", "sta (package opensta)", "(package qflow-tech-osu035)",
                   "make asic-install"):
        assert needed in message, message


def test_only_the_missing_tool_is_named(monkeypatch, tmp_path):
    lib = tmp_path / "cells.lib"
    lib.write_text(LIBERTY_TEXT)
    monkeypatch.setattr(asic.shutil, "which", lambda name: None if name == "sta" else f"/bin/{name}")
    with pytest.raises(FredError, match=r"needs Debian packages that are not installed: sta \(package opensta\)\."):
        find_asic_tools(liberty=lib)


def test_liberty_area_by_cell():
    assert liberty_cell_area(LIBERTY_TEXT, "NAND2X1") == 96
    assert liberty_cell_area(LIBERTY_TEXT, "INVX1") == 64
    with pytest.raises(FredError, match="no area for cell XOR2X1"):
        liberty_cell_area(LIBERTY_TEXT, "XOR2X1")


def test_stat_gives_cells_and_area():
    stat = parse_stat(STAT_TEXT, "top")
    assert stat == {"cells": {"DFFPOSX1": 2, "INVX1": 1, "NAND2X1": 2}, "area_um2": 1024.0}
    with pytest.raises(FredError, match="no module other"):
        parse_stat(STAT_TEXT, "other")
    with pytest.raises(FredError, match="no chip area"):
        parse_stat(STAT_TEXT.replace("Chip area", "Area"), "top")


def test_sta_report_path_cells_and_levels():
    """The launching flop's clock pin and the capturing flop's D pin are not cells of the path;
    the clock-to-Q delay is; levels count the combinational cells (the buffer included)."""
    path = parse_sta_report(STA_TEXT)
    assert (path["startpoint"], path["endpoint"]) == ("_7_", "_9_")
    assert (path["arrival_ns"], path["required_ns"], path["slack_ns"]) == (1.164, 9.723, 8.559)
    assert [c["cell"] for c in path["path"]] == ["DFFPOSX1", "BUFX4", "INVX1", "NAND2X1"]
    assert math.isclose(sum(c["delay_ns"] for c in path["path"]), path["arrival_ns"])
    assert path["logic_levels"] == 3


def test_sta_report_without_a_path_is_an_error():
    with pytest.raises(FredError, match="no timing path"):
        parse_sta_report("No paths found.\n")


def test_fo4_chain_loads_each_stage_with_four_inverters():
    text = fo4_netlist(5)
    for i in range(1, 6):
        assert text.count(f"(.A(n{i}),") + text.count(f"(.A(n{i}))") == 4, i
    assert text.count("INVX1 s") == 5 and "BUFX2 out (.A(n5), .Y(y));" in text


def test_yosys_script_maps_flops_and_logic_to_the_liberty():
    script = yosys_script(top="top", liberty=Path("/x/cells.lib"), delay_target_ps=4000)
    assert "dfflibmap -liberty /x/cells.lib" in script
    assert "abc -D 4000 -liberty /x/cells.lib" in script and "buffer" in script
    assert script.index("synth -flatten -top top") < script.index("dfflibmap") < script.index("abc ")
    assert script.endswith("write_verilog -noattr -noexpr -nodec netlist.v")


def test_hierarchy_stat_multiplies_instance_counts_down_the_tree():
    """buf: 1 under top + 2 pairs x 3 = 7 instances; a module of submodules only has area 0; the
    instances times the modules' own areas add up to yosys' total (7 x 48 + 2 x 192 + 64 = 784)."""
    hier = parse_hierarchy_stat(HIER_STAT_TEXT, "top")
    assert hier["modules"] == {"top": {"instances": 1, "area_um2": 64.0},
                               "buf": {"instances": 7, "area_um2": 48.0},
                               "pair": {"instances": 2, "area_um2": 0.0},
                               "leaf": {"instances": 2, "area_um2": 192.0}}
    assert hier["area_um2"] == 784.0 == sum(m["instances"] * m["area_um2"] for m in hier["modules"].values())
    with pytest.raises(FredError, match="no design hierarchy"):
        parse_hierarchy_stat(STAT_TEXT, "top")
    with pytest.raises(FredError, match="no area for module.*leaf"):
        parse_hierarchy_stat(HIER_STAT_TEXT.replace("=== leaf ===", "=== other ==="), "top")


def test_hierarchical_script_maps_modules_before_flattening():
    script = yosys_script(top="top", liberty=Path("/x/cells.lib"), delay_target_ps=4000, hierarchical=True)
    assert "-flatten" not in script and "synth -top top" in script
    assert (script.index("abc ") < script.index("stat -liberty /x/cells.lib -top top")
            < script.index("; flatten;") < script.index("tee -q -o stat.txt"))


@pytest.mark.skipif(not (shutil.which("yosys") and shutil.which("sta") and asic.LIBERTY.is_file()),
                    reason="the Debian ASIC tools (make asic-install) are not installed")
def test_int32_adder_end_to_end(tmp_path):
    """The real flow on one int32 lane (about a second): area is the sum of the cells' liberty
    areas, the buffer trees add exactly their own area, the path is positive and ends in a flop."""
    from studies.asic_report import asic_point
    tools = find_asic_tools()
    fo4 = asic.fo4_delay(tools, tmp_path / "fo4")
    assert 0.05 < fo4 < 0.5            # 0.35 um: an FO4 delay of the order of 100-200 ps
    result = asic_point({"name": "adder", "kind": "adder", "dtype": "int32", "lanes": 1}, tools,
                        out=tmp_path, fo4_ns=fo4)
    text = tools.liberty.read_text()
    assert result["area_um2"] == sum(liberty_cell_area(text, c) * n for c, n in result["cells_by_type"].items())
    assert result["area_um2"] == result["area_unbuffered_um2"] + result["fanout_buffers"] * liberty_cell_area(text, "BUFX4")
    assert result["flip_flops"] >= 2 * 32      # both operands' lanes are registered at least once
    assert result["critical_path_ns"] > 0 and result["logic_levels"] >= 1


@pytest.mark.skipif(not (shutil.which("yosys") and shutil.which("sta") and asic.LIBERTY.is_file()),
                    reason="the Debian ASIC tools (make asic-install) are not installed")
def test_hierarchical_run_counts_every_instance_once(tmp_path):
    """A 2-lane int32 reduction unit hierarchically (its lanes and output buffer are submodules):
    the flattened netlist's area is exactly yosys' sum over the hierarchy (flattening mapped
    cells adds and removes nothing), and the components add up to it."""
    from studies.asic_report import asic_point
    tools = find_asic_tools()
    result = asic_point({"name": "adder_h", "kind": "adder", "dtype": "int32", "lanes": 2,
                         "synthesis": "hierarchical"}, tools, out=tmp_path, fo4_ns=0.156)
    assert result["modules_mapped"] >= 3
    assert result["area_hierarchy_um2"] == result["area_unbuffered_um2"]
    assert sum(result["area_by_component"].values()) == pytest.approx(result["area_unbuffered_um2"])
