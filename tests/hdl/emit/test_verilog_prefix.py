"""``fred verilog --name PREFIX`` (``to_verilog(..., prefix=)``): the top and every submodule carry
the prefix, so two generated switches coexist in one design: the wafer's two chiplets,
Fred_3(12) and Fred_3(10), under Verilator together."""

from __future__ import annotations

import re
import subprocess

import pytest

from eda.toolchain import setup_verilator
from fred.cli import main
from hdl.designs.registry import get_design
from hdl.emit.verilog import to_verilog

MODULE = re.compile(r"^module\s+\\?([A-Za-z_][\w.$]*)", re.M)


def _switch(ports: int, prefix: str) -> str:
    params = {"ports": ports, "middle": 3, "dtype": "fp16", "lanes": 1}
    return to_verilog(get_design("switch").build(**params), name=prefix + "fred_switch", prefix=prefix)


def test_every_module_carries_the_prefix_and_two_prefixes_share_no_module():
    plain12, plain10 = set(MODULE.findall(_switch(12, ""))), set(MODULE.findall(_switch(10, "")))
    assert plain12 & plain10   # the collision --name removes: same microswitch modules, one top name
    a, b = set(MODULE.findall(_switch(12, "chipA_"))), set(MODULE.findall(_switch(10, "chipB_")))
    assert "chipA_fred_switch" in a and "chipB_fred_switch" in b
    assert all(m.startswith("chipA_") for m in a) and all(m.startswith("chipB_") for m in b)
    assert not a & b
    assert {m[len("chipA_"):] for m in a} == plain12   # the same modules, renamed


def test_fred_verilog_name_option(tmp_path, capsys):
    out = tmp_path / "s.v"
    assert main(["verilog", "--ports", "4", "--name", "u7_", "-o", str(out)]) == 0
    assert "top u7_fred_switch" in capsys.readouterr().out
    assert all(m.startswith("u7_") for m in MODULE.findall(out.read_text()))


@pytest.mark.verilator
def test_the_wafer_chiplets_lint_together_in_one_design(tmp_path):
    """Fred_3(12) and Fred_3(10), prefixed, in one file under one wrapper: Verilator elaborates
    both without a duplicate module (MODDUP) or any error."""
    wrapper = ("module two_chiplets(input wire clk, input wire rst);\n"
               "  chipA_fred_switch l1(.clk(clk), .rst(rst));\n"
               "  chipB_fred_switch l2(.clk(clk), .rst(rst));\n"
               "endmodule\n")
    path = tmp_path / "two_chiplets.v"
    path.write_text(_switch(12, "chipA_") + _switch(10, "chipB_") + wrapper)
    tool = setup_verilator()
    result = subprocess.run([str(tool.executable), "--lint-only", "--top-module", "two_chiplets",
                             "-Wno-PINMISSING", "-Wno-fatal", str(path)],
                            capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-2000:]
    assert "MODDUP" not in output and "%Error" not in output, output[-2000:]
