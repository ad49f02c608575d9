"""The fred command line: help everywhere, JSON output, one-line errors."""

import json
import subprocess
import sys
from pathlib import Path

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
    from hdl.designs.registry import DESIGNS
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
                                     + ", ".join(__import__("hdl.designs.registry").designs.registry.DESIGNS))


# -- the system-model commands: tables, and where the switch timing came from -------------------
def test_format_table_aligns_columns():
    from fred.table import format_table
    text = format_table(["name", "value"], [["a", "1.5"], ["longer", "12.25"]], title="t")
    assert text.splitlines() == ["t",
                                 "name    value",
                                 "------  -----",
                                 "a         1.5",
                                 "longer  12.25"]
    with pytest.raises(ValueError, match="2 cells, the header 3"):
        format_table(["a", "b", "c"], [["1", "2"]])


def _custom_characterization(tmp_path, latency_cycles):
    document = json.loads((Path(__file__).resolve().parents[2] / "data" / "characterization.json").read_text())
    for block in document["switches"].values():   # the platform reads its chiplets' points
        block["switch"]["first_flit_latency_cycles"] = latency_cycles
    path = tmp_path / "other.json"
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize("argv", [
    ["collective", "--fabric", "fred-d", "--op", "all-reduce", "--size", "1e3", "--group", "wafer"],
    ["sweep", "--workload", "resnet-152", "--fabric", "fred-d", "--strategy", "MP1-DP20-PP1"],
])
def test_model_commands_state_and_take_the_switch_characterization(argv, tmp_path, capsys):
    """Console and JSON output say where the switch timing came from; --characterization
    replaces it (a slower switch makes the same run slower)."""
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("switch timing: ") and "(shipped with the package" in out
    assert main([*argv, "--json"]) == 0
    shipped = json.loads(capsys.readouterr().out)
    assert shipped["switch_timing"]["l1"]["shipped"] is True
    assert shipped["switch_timing"]["l1"]["design"] == "Fred_3(12) fp16"
    assert shipped["switch_timing"]["l2"]["design"] == "Fred_3(10) fp16"
    path = _custom_characterization(tmp_path, 1000.0)
    assert main([*argv, "--json", "--characterization", str(path)]) == 0
    other = json.loads(capsys.readouterr().out)
    for level in ("l1", "l2"):
        assert other["switch_timing"][level]["source"] == str(path) and other["switch_timing"][level]["shipped"] is False
        assert other["switch_timing"][level]["first_flit_latency_cycles"] == 1000.0
    assert other["time_s"] > shipped["time_s"]
    assert main([*argv, "--characterization", str(tmp_path / "none.json")]) == 1
    assert "none.json does not exist" in capsys.readouterr().err


def test_sweep_prints_an_aligned_ranking(capsys):
    assert main(["sweep", "--workload", "resnet-152", "--fabric", "mesh", "--samples-per-dp", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("rank"))
    assert set(lines[header + 1]) == {"-", " "}
    rows = lines[header + 2:]
    assert len(rows) == 18
    column = lines[header].index("ms/sample") + len("ms/sample")   # right-aligned figures end here
    assert all(row[column - 1] != " " for row in rows if "does not fit" not in row)


def test_help_imports_no_command_module():
    # fred --help lists the subcommands from each module's HELP line, without importing the
    # modules (and their numpy / pydantic / model imports); a subcommand imports only its own
    code = ("import sys; from fred.cli import main\n"
            "try: main(sys.argv[1:])\n"
            "except SystemExit: pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('fred.commands.')"
            " and not m.split('.')[-1].startswith('_')))")
    root = Path(__file__).resolve().parents[2]
    top = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True, text=True,
                         cwd=root, check=True)
    assert top.stdout.strip().endswith("[]")
    one = subprocess.run([sys.executable, "-c", code, "sweep", "--help"], capture_output=True,
                         text=True, cwd=root, check=True)
    assert one.stdout.strip().endswith("['fred.commands.sweep']")


def test_help_lines_read_without_import_match_the_modules():
    from fred.cli import _help_text, _load
    for name in COMMANDS:
        assert _help_text(name) == _load(name).HELP


def test_main_collects_young_garbage_less_often(capsys):
    """The command line raises the young generation's collection threshold (fred.cli,
    YOUNG_COLLECTION_THRESHOLD) and keeps the older generations' settings."""
    import gc
    from fred.cli import YOUNG_COLLECTION_THRESHOLD
    before = gc.get_threshold()
    try:
        assert main(["verilog", "--list", "--json"]) == 0
        assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, *before[1:])
    finally:
        gc.set_threshold(*before)
