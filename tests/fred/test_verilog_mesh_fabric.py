"""``fred verilog --unit mesh_fabric``: the 2D-mesh fabric RTL as a ``fred verilog`` unit
(docs/mesh_rtl.md, "The mesh fabric as a Verilog unit"). The default 5 x 4 mesh takes about
90 s to generate, so its identity and lint checks run under ``-m full``
(tests/hdl/emit/test_verilog.py); a 2 x 2 mesh with small NPU memories is checked here."""

import re

import pytest

from fred.cli import main

SMALL = ["--rows", "2", "--cols", "2", "--eject-depth", "32", "--engine-buffer", "32"]


@pytest.mark.verilator
def test_a_small_mesh_fabric_is_emitted_prefixed_and_lints_clean(tmp_path, capsys):
    path = tmp_path / "m_fred_mesh_fabric.v"   # fred lint takes the top from the file name
    assert main(["verilog", "--unit", "mesh_fabric", *SMALL, "--name", "m_", "-o", str(path)]) == 0
    verilog = path.read_text()
    modules = re.findall(r"^module (\S+)\(", verilog, re.M)
    assert "m_fred_mesh_fabric" in modules
    assert all(name.startswith("m_") for name in modules), modules
    # the harness ports of docs/mesh_rtl.md, and one router per NPU
    header = verilog[verilog.index("module m_fred_mesh_fabric("):]
    header = header[:header.index(");")]
    for port in ("clk", "start", "prog_we", "prog_unit", "prog_reg", "prog_data", "rd_unit", "rd_reg",
                 "rd_data", "all_done", "cycles"):
        assert re.search(rf"\b{port}\b", header), port
    assert len(re.findall(r"\brouter_\d_\d\b", verilog.split("module m_fred_mesh_fabric(")[1])) >= 4
    capsys.readouterr()
    assert main(["lint", str(path)]) == 0
    assert "clean" in capsys.readouterr().out


@pytest.mark.parametrize("option, value", [("--rows", "1"), ("--cols", "15"), ("--eject-depth", "0")])
def test_mesh_fabric_sizes_out_of_range_are_refused_before_any_work(option, value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["verilog", "--unit", "mesh_fabric", option, value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert option in err and "Traceback" not in err and err.count("\n") == 1


def test_mesh_fabric_refuses_an_option_it_does_not_take(capsys):
    assert main(["verilog", "--unit", "mesh_fabric", "--ports", "4"]) == 1
    assert "does not apply to unit 'mesh_fabric'" in capsys.readouterr().err
