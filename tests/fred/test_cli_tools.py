"""The tool subcommands (fred lint, coverage, mutation, formal, synth, asic, bench): help, one-line errors, and
the make targets that call them. The long runs themselves (campaigns, synthesis, benchmarks) are
not run here."""

import re
from pathlib import Path

import pytest

from fred.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("lint", "coverage", "mutation", "formal", "synth", "asic", "bench")


@pytest.mark.parametrize("bench, option", [("sysmodel", "--no-eval"), ("router", "--write-doc"),
                                           ("verilog", "--no-flat"), ("fabric", "--simulator")])
def test_each_benchmark_has_its_own_help(bench, option, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", bench, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: fred bench {bench}") and option in out


@pytest.mark.parametrize("argv, message", [
    (["lint", "missing.v"], "no such file: missing.v"),
    (["lint", "a.v", "b.v", "--top", "x"], "--top names the top module of one file"),
    (["bench", "nope"], "unknown benchmark 'nope'; available: sysmodel, router, verilog, fabric"),
    (["bench", "--json", "router"], "--json: the router benchmark prints its figures"),
    (["synth", "--dtypes", "fp16,fp8"], "unknown format fp8 in --dtypes"),
    (["synth", "--lanes", "one"], "--lanes takes comma-separated integers"),
    (["mutation", "--design", "{ports: 4"], "--design is not JSON"),
    (["coverage", "--json"], "--json: the coverage reports are text"),
    (["formal", "--list", "nope.*"], "no proof matches 'nope.*'; proofs: stream_buffer.fifo"),
    (["asic", "--only", "nope"], "unknown design nope in --only; available: rd_microswitch"),
])
def test_bad_input_is_one_line(argv, message, tmp_path, monkeypatch, capsys):
    if argv[0] == "lint" and len(argv) > 2:   # two files that exist, so --top is what is wrong
        for name in ("a.v", "b.v"):
            (tmp_path / name).write_text("module a; endmodule\n")
        monkeypatch.chdir(tmp_path)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"fred {argv[0]}: error: ") and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv, option", [
    (["bench", "verilog", "--ports", "4,x", "--no-build"], "--ports"),
    (["bench", "verilog", "--flat-ports", "x", "--no-build"], "--flat-ports"),
])
def test_a_malformed_size_list_is_a_usage_error_naming_the_option(argv, option, capsys):
    """A benchmark's comma-separated sizes are parsed by the shared option type: argparse's
    usage error (exit 2) names the option and the value, before anything is measured."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: expected an integer in 2..128, got" in err and "Traceback" not in err


@pytest.mark.parametrize("argv, message", [
    (["bench", "router", "--count", "1", "--write-doc", "{folder}"], "cannot write {folder}: it is a folder"),
    (["bench", "verilog", "--no-build", "--json", "{folder}"], "cannot write {folder}: it is a folder"),
    (["synth", "--out", "{file}"], "cannot write into {file}: it is a file, not a folder"),
    (["mutation", "--out", "{file}"], "cannot write into {file}: it is a file, not a folder"),
    (["coverage", "--report-only", "--out", "{file}"], "cannot write into {file}: it is a file, not a folder"),
])
def test_unwritable_output_fails_before_the_work(argv, message, tmp_path, capsys):
    """An output that cannot be written is one line naming it, before any measuring, synthesis,
    Verilog generation or campaign (nothing is printed on stdout)."""
    (tmp_path / "taken").write_text("")
    names = {"folder": tmp_path, "file": tmp_path / "taken"}
    assert main([a.format(**names) for a in argv]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [f"fred {argv[0]}: error: " + message.format(**names)]
    assert captured.out == ""


def test_asic_without_the_debian_tools_names_the_packages(tmp_path, monkeypatch, capsys):
    """``make asic`` on a machine without ``make asic-install``: one line naming what is missing
    and how to install it, before any Verilog is generated."""
    import eda.asic
    monkeypatch.setattr(eda.asic.shutil, "which", lambda name: None)
    assert main(["asic", "--out", str(tmp_path / "asic")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "yosys (package yosys)" in err and "make asic-install" in err
    assert not (tmp_path / "asic").exists()


def test_coverage_outside_the_source_tree_says_where_to_run_it(tmp_path, monkeypatch, capsys):
    """The campaigns run the benches through pytest's tests/: elsewhere, one line says so."""
    monkeypatch.chdir(tmp_path)
    assert main(["coverage", "--lock", ""]) == 1
    err = capsys.readouterr().err
    assert "tests/test_switch_cocotb.py not found: run the coverage campaigns from the project's source tree" in err
    assert not (tmp_path / "build").exists()


def test_mutation_summary_without_saved_outcomes(tmp_path, capsys):
    assert main(["mutation", "--summary", "--out", str(tmp_path / "m")]) == 1
    assert f"{tmp_path / 'm' / 'partial.json'} not found" in capsys.readouterr().err


def test_mutation_list_prints_the_seeded_mutants(tmp_path, capsys):
    """``fred mutation --list`` names the mutants the campaign would run: the same (seed, count)
    choice as the library's, in order."""
    from studies.verification import mutation
    assert main(["mutation", "--list", "--count", "5", "--seed", "3", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    verilog, _ = mutation.design_verilog(mutation.DESIGN)
    chosen = mutation.choose(mutation.sites(verilog), 5, 3)
    listed = re.findall(r"^\s*(\d+) (\S+)\s+(\S+):(\d+)$", out, re.M)
    assert listed == [(str(i), m.operator, m.module, str(m.line)) for i, m in enumerate(chosen)]


def test_lint_passes_clean_verilog_and_fails_a_lint_error(tmp_path, capsys):
    """Verilator --lint-only (seconds, no build): the adder is clean; an undriven output of a
    module named by its file fails with Verilator's message and status 1."""
    adder = tmp_path / "fred_adder.v"
    assert main(["verilog", "--unit", "adder", "-o", str(adder)]) == 0
    assert main(["lint", str(adder)]) == 0
    assert f"lint {adder}: clean (1 module)" in capsys.readouterr().out
    bad = tmp_path / "bad.v"
    bad.write_text("module bad(input wire clk, output wire [3:0] o);\nendmodule\n")
    assert main(["lint", str(bad)]) == 1
    out = capsys.readouterr().out
    assert f"lint {bad}: FAILED" in out and "UNDRIVEN" in out


def _recipes() -> dict[str, list[str]]:
    recipes, target = {}, None
    for line in (ROOT / "Makefile").read_text().splitlines():
        match = re.match(r"^([a-z-]+):", line)
        if match:
            target = match.group(1)
            recipes[target] = []
        elif line.startswith("\t") and target:
            recipes[target].append(line.strip())
    return recipes


@pytest.mark.parametrize("target, command, variable", [
    ("lint", "lint", None), ("coverage", "coverage", "COVERAGE_ARGS"),
    ("mutation", "mutation", "MUTATION_ARGS"), ("synth", "synth", "SYNTH_ARGS"), ("asic", "asic", "ASIC_ARGS"),
    ("bench-sysmodel", "bench sysmodel", "BENCH_SYSMODEL_ARGS"),
    ("bench-router", "bench router", "BENCH_ROUTER_ARGS"),
    ("bench-verilog", "bench verilog", "BENCH_VERILOG_ARGS"),
    ("bench-fabric", "bench fabric", "BENCH_FABRIC_ARGS"),
])
def test_make_targets_call_the_subcommand(target, command, variable):
    """Each tool target ends in ``$(FRED) <subcommand>`` with its options variable."""
    last = _recipes()[target][-1]
    assert last.startswith(f"$(FRED) {command}"), last
    assert command.split()[0] in COMMANDS and command.split()[0] in TOOLS
    if variable:
        assert last.endswith(f"$({variable})"), last
