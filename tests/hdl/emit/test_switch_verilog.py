"""``fred verilog`` for the switch: ports, errors, any P, lint (Fred_3(64) module by module in the
default suite, as one whole file in the full suite)."""

from __future__ import annotations

import re

import pytest

from fred.cli import main
from eda.lint import lint


@pytest.mark.verilator
def test_fred_verilog_switch_ports_and_lint(tmp_path, capsys):
    out = tmp_path / "fred_switch.v"
    assert main(["verilog", "--unit", "switch", "--ports", "2", "--middle", "2", "--dtype", "int32",
                 "--lanes", "2", "--phases", "3", "-o", str(out)]) == 0
    text = out.read_text()
    header = re.search(r"module fred_switch\((.*?)\);", text, re.S).group(1)
    ports = {name.strip() for name in header.split(",")}
    for n in range(2):
        for suffix in ("valid", "ready", "payload"):
            assert f"i__{n}__{suffix}" in ports and f"o__{n}__{suffix}" in ports
    for name in ("config__valid", "config__ready", "config__payload", "phase__valid",
                 "phase__ready", "phase__payload", "busy", "error", "active_phase",
                 "active_valid", "loaded", "clk", "rst"):
        assert name in ports, name
    # flit = 2 lanes x 32 + last + 8-bit tag; config word = 32 + last + 2-bit phase
    assert re.search(r"input \[72:0\] i__0__payload;", text)
    assert re.search(r"input \[34:0\] config__payload;", text)
    result = lint(out)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("ports", [3, 5, 6, 10, 12])
@pytest.mark.verilator
def test_fred_verilog_any_port_count(ports, tmp_path):
    """Odd and non-power-of-two P (the paper's chiplets are Fred_3(12) and Fred_3(10)): the
    ports are there and the Verilog lints clean."""
    out = tmp_path / "fred_switch.v"
    assert main(["verilog", "--unit", "switch", "--ports", str(ports), "--middle", "3",
                 "--dtype", "fp16", "--lanes", "2", "-o", str(out)]) == 0
    text = out.read_text()
    header = re.search(r"module fred_switch\((.*?)\);", text, re.S).group(1)
    names = {name.strip() for name in header.split(",")}
    assert {f"i__{ports - 1}__valid", f"o__{ports - 1}__payload"} <= names
    assert f"i__{ports}__valid" not in names
    result = lint(out)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("argv,message", [
    (["--ports", "1"], "--ports: expected an integer in 2..128"),
    (["--ports", "0"], "--ports: expected an integer in 2..128"),
    (["--ports", "x"], "ports"),
    (["--ports", "4", "--middle", "1"], "middle"),
    (["--ports", "4", "--dtype", "fp8"], "fp8"),
    (["--ports", "4", "--phases", "0"], "--phases"),
])
def test_fred_verilog_switch_bad_parameters(argv, message, capsys):
    status = None
    try:
        status = main(["verilog", "--unit", "switch", "-o", "-"] + argv)
    except SystemExit as exc:   # argparse usage errors exit with 2
        status = exc.code
    assert status in (1, 2)
    assert message in capsys.readouterr().err


def _p64(tmp_path):
    out = tmp_path / "fred_switch.v"
    assert main(["verilog", "--unit", "switch", "--ports", "64", "--middle", "3", "--dtype", "fp16",
                 "--lanes", "4", "-o", str(out)]) == 0
    return out


@pytest.mark.full        # 22 s in a fresh clone; the chiplets (P = 12, 10) lint in the default suite
@pytest.mark.verilator
def test_p64_lints_clean(tmp_path):
    """Fred_3(64), fp16 x 4: hierarchical Verilog (about 5 s, 1.4 MB), linted module by module
    (a few seconds; ``make bench-verilog`` prints both)."""
    result = lint(_p64(tmp_path))
    assert result.returncode == 0, (result.stdout + result.stderr)[:5000]


@pytest.mark.full
@pytest.mark.verilator
def test_p64_lints_clean_as_one_file(tmp_path):
    """The same file in one Verilator run (it elaborates all 1,087 microswitch instances: about
    3.5 min)."""
    result = lint(_p64(tmp_path), whole=True)
    assert result.returncode == 0, (result.stdout + result.stderr)[:5000]
