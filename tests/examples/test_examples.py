"""The RTL user's examples (examples/README.md) build and pass: the C++ Verilator testbench and
the cocotb one, each loading two configurations into a generated Fred_3(4) int32 switch
(prefixed ex_), reducing four flits onto one output and multicasting one flit to three."""

import json

import pytest

from examples import build
from hdl.contracts.timing import switch_latency


def test_generated_words_are_the_compilers_and_the_top_is_prefixed(tmp_path):
    words = build.generate(tmp_path)
    data = json.loads((tmp_path / "config_words.json").read_text())
    assert data["top"] == "ex_fred_switch" and set(words) == {0, 1}
    assert len(words[0]) == len(words[1]) > 0 and words[0] != words[1]
    verilog = (tmp_path / "ex_fred_switch.v").read_text()
    assert "module ex_fred_switch(" in verilog and "module fred_" not in verilog
    header = (tmp_path / "config_words.h").read_text()
    assert all(f"0x{w:08x}u" in header for w in words[0] + words[1])


@pytest.mark.verilator
def test_the_cpp_testbench_passes(tmp_path, capsys):
    build.generate(tmp_path)
    out = build.run_cpp(tmp_path)
    # the build announces itself when it starts and ends (eda.toolchain.build_step)
    progress = capsys.readouterr().err
    assert "build: ex_fred_switch: Verilator C++ build" in progress and " done in " in progress
    # the documented latency (docs/switch.md "Latency and stages"): first input to last output
    latency = switch_latency(ports=4, middle=3, dtype="int32")
    assert latency == 5
    assert f"reduction 0,1,2,3>0: output 0 = 43210, {latency} cycles" in out
    assert f"multicast 1>0,2,3: outputs 0,2,3 = 77, {latency} cycles" in out
    assert "PASSED (0 failure(s))" in out


@pytest.mark.cocotb
def test_the_cocotb_testbench_passes(tmp_path):
    build.generate(tmp_path)
    assert "1 test(s) passed" in build.run_cocotb(tmp_path)
