"""`fred verilog --unit adder`: module fred_adder, its ports, lint-clean for every format."""

from __future__ import annotations

import re

import pytest

from fred.cli import main
from eda.lint import lint


@pytest.mark.parametrize("dtype, lanes", [("fp16", 4), ("bf16", 1), ("fp32", 2), ("int32", 3)])
@pytest.mark.verilator
def test_fred_verilog_adder_ports_and_lint(dtype, lanes, tmp_path, capsys):
    path = tmp_path / "fred_adder.v"
    assert main(["verilog", "--unit", "adder", "--dtype", dtype, "--lanes", str(lanes),
                 "-o", str(path)]) == 0
    text = path.read_text()
    header = re.search(r"^module fred_adder\((.*?)\);", text, re.M | re.S)
    assert header, "no module fred_adder"
    ports = {p.strip() for p in header.group(1).split(",")}
    assert ports == {"a__valid", "a__ready", "a__payload", "b__valid", "b__ready", "b__payload",
                     "o__valid", "o__ready", "o__payload", "clk", "rst"}
    width = lanes * (16 if dtype in ("fp16", "bf16") else 32)
    for name in ("a__payload", "b__payload"):
        assert re.search(rf"input \[{width - 1}:0\] {name};", text)
    assert re.search(rf"output \[{width - 1}:0\] o__payload;", text)
    result = lint(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_fred_verilog_adder_rejects_bad_options(capsys):
    assert main(["verilog", "--unit", "adder", "--dtype", "fp64"]) != 0
    assert "--dtype 'fp64' is not one of fp16, bf16, fp32, int32" in capsys.readouterr().err
    with pytest.raises(SystemExit):   # argparse: not a positive integer
        main(["verilog", "--unit", "adder", "--lanes", "0"])
    assert main(["verilog", "--unit", "adder", "--width", "8"]) != 0
    assert "does not apply to unit 'adder'" in capsys.readouterr().err
