"""The fred command line: help everywhere, JSON output, one-line errors."""

import json
import subprocess
import sys

import pytest

from fred.cli import COMMANDS, main


def test_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out


@pytest.mark.parametrize("name", COMMANDS)
def test_every_subcommand_has_help_and_json(name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([name, "--help"])
    assert exit_info.value.code == 0
    assert "--json" in capsys.readouterr().out


def test_verilog_to_file_and_json(tmp_path, capsys):
    out = tmp_path / "sb.v"
    assert main(["verilog", "--unit", "stream_buffer", "--width", "8", "-o", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["top"] == "fred_stream_buffer" and report["params"] == {"width": 8}
    assert "module fred_stream_buffer" in out.read_text()
    assert "[7:0] i__payload" in out.read_text()


def test_verilog_list_json(capsys):
    assert main(["verilog", "--list", "--json"]) == 0
    assert "stream_buffer" in json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("argv, message", [
    (["verilog", "--unit", "nope"], "unknown unit 'nope'"),
    (["verilog", "--all"], "--all needs -o FOLDER"),
])
def test_errors_are_one_line_without_traceback(argv, message, capsys):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"fred {argv[0]}: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_option_not_taken_by_the_unit_is_refused(capsys):
    # a design option that the stream buffer does not take (only checked if another unit has it)
    from hdl.designs import DESIGNS
    other = {name for d in DESIGNS.values() for name in d.params} - {"width"}
    if not other:
        pytest.skip("no other design registers options yet")
    option = sorted(other)[0]
    value = "fp16" if option == "dtype" else "4"
    assert main(["verilog", "--unit", "stream_buffer", f"--{option.replace('_', '-')}", value]) == 1
    assert "does not apply to unit 'stream_buffer'" in capsys.readouterr().err


def test_console_script_runs_as_a_process():
    result = subprocess.run([sys.executable, "-m", "fred", "verilog", "--unit", "nope"],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.strip() == ("fred verilog: error: unknown unit 'nope'; available: "
                                     + ", ".join(__import__("hdl.designs").designs.DESIGNS))
