"""Every class of malformed input gives one error line naming what is wrong, before any work:
numbers out of their documented range or not finite, malformed lists, binary / non-UTF-8 / folder
input files (named in the error), output paths that cannot be written, workload and strategy
values the model cannot run, and argument errors (one line, not the usage block)."""

import math
import time

import pytest

from fred.cli import main
from fred.commands._option_types import RANGES, float_in, int_in, ints_in

BINARY = b"\x7fELF\x02\x01\x01\x00" + bytes(range(256))
NOT_UTF8 = b"\xff\xfe not utf-8 text"
HEADS = """[workload]
name = "odd-heads"
mode = "weight-streaming"
strategy = "MP2-DP5-PP2"
microbatches = 2
samples_per_dp = 16
[transformer]
layers = 2
hidden = 100
heads = 7
seq = 128
vocab = 1000
"""


def _files(tmp_path):
    (tmp_path / "binary.dat").write_bytes(BINARY)
    (tmp_path / "latin1.toml").write_bytes(NOT_UTF8)
    (tmp_path / "heads.toml").write_text(HEADS)
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "folder").mkdir()


# (argv, a substring the one error line must hold); {t} is the test's tmp folder
CASES = [
    # numbers beyond what the tool can do on this machine (each once took minutes or the memory)
    (["routability", "--ports", "100000", "--samples", "10"], "--ports: expected an integer in 2..256"),
    (["route", "--ports", "1000000", "--collective", "all-reduce"], "--ports: expected an integer in 2..1024"),
    (["verilog", "--ports", "100000"], "--ports: expected an integer in 2..128"),
    (["routability", "--ports", "8", "--samples", "1000000000"], "--samples: expected an integer in 1..100000"),
    (["collective", "--fabric", "fred-a", "--op", "all-reduce", "--size", "1e300", "--group", "wafer"],
     "--size: expected a finite number"),
    # not positive, not finite, not a number
    (["routability", "--ports", "8", "--samples", "0"], "--samples"),
    (["routability", "--ports", "-4", "--exhaustive"], "--ports"),
    (["route", "--ports", "8", "--middle", "1", "--collective", "all-reduce"], "--middle: expected an integer in 2..16"),
    (["collective", "--fabric", "fred-a", "--op", "all-reduce", "--size", "nan", "--group", "wafer"], "--size"),
    (["collective", "--fabric", "fred-a", "--op", "all-reduce", "--size", "-1", "--group", "wafer"], "--size"),
    (["collective", "--fabric", "fred-a", "--op", "all-reduce", "--size", "inf", "--group", "wafer"], "--size"),
    (["eval", "--no-files", "--compute-scale", "0"], "--compute-scale"),
    (["eval", "--no-files", "--compute-scale", "inf"], "--compute-scale"),
    (["sweep", "--workload", "gpt-3", "--fabric", "fred-a", "--samples-per-dp", "0"], "--samples-per-dp"),
    (["sweep", "--workload", "gpt-3", "--fabric", "fred-a", "--jobs", "-1"], "--jobs"),
    (["replay", "x.txt", "--cycle-ns", "-1"], "--cycle-ns"),
    (["fabric-sim", "--fabric", "fred-a", "--op", "all-reduce", "--group", "wafer", "--size", "0"], "--size"),
    (["fabric-sim", "--fabric", "fred-a", "--op", "all-reduce", "--group", "wafer", "--size", "4",
      "--backpressure", "1"], "--backpressure"),
    (["characterize", "--ports", "4,x"], "--ports"),
    (["characterize", "--ports", "4,100000"], "--ports"),
    (["dse", "--no-files", "--top", "0"], "--top"),
    (["synth", "--freq", "0"], "--freq"),
    (["mutation", "--count", "0", "--list"], "--count"),
    (["bench", "router", "--samples", "1e9"], "--samples"),
    (["verilog", "--name", "1bad"], "--name: expected a Verilog identifier"),
    # input files: binary, not UTF-8, a folder -- each named in the error
    (["eval", "--no-files", "--platform", "{t}/binary.dat"], "platform file {t}/binary.dat is a binary file"),
    (["eval", "--no-files", "--characterization", "{t}/binary.dat"], "characterization file {t}/binary.dat"),
    (["sweep", "--workload", "{t}/binary.dat", "--fabric", "fred-a"], "workload file {t}/binary.dat"),
    (["sweep", "--workload", "{t}/latin1.toml", "--fabric", "fred-a"], "{t}/latin1.toml is not UTF-8"),
    (["validate", "--cases", "{t}/binary.dat"], "validation file {t}/binary.dat"),
    (["dse", "--no-files", "--cost", "{t}/binary.dat"], "{t}/binary.dat is a binary file"),
    (["lint", "{t}/binary.dat"], "Verilog file {t}/binary.dat"),
    (["collective", "--fabric", "fred-a", "--op", "all-reduce", "--size", "1e6", "--group", "wafer",
      "--platform", "{t}/folder"], "{t}/folder"),
    # output paths that cannot be written, found before the work
    (["verilog", "--ports", "4", "-o", "{t}/a_file/switch.v"], "{t}/a_file"),
    (["verilog", "--all", "-o", "{t}/a_file"], "{t}/a_file"),
    (["eval", "-o", "{t}/a_file"], "{t}/a_file"),
    (["dse", "-o", "{t}/a_file"], "{t}/a_file"),
    (["mutation", "--out", "{t}/a_file", "--list"], "{t}/a_file"),
    # values the model cannot run
    (["sweep", "--workload", "{t}/heads.toml", "--fabric", "fred-a"], "not a multiple of heads = 7"),
    (["dse", "--no-files", "--workload", "resnet-152", "--strategies", "MP21-DP1-PP1"],
     "needs 21 NPUs; the wafer has 20"),
    (["load-curve", "--rates", "0,0.5"], "--rates: expected a finite number in (0, 1]"),
    (["load-curve", "--ports", "64"], "--ports: expected an integer in 2..16"),
    (["load-curve", "--patterns", "uniform,tornado"], "--patterns: unknown pattern(s) tornado"),
    (["load-curve", "--ports", "4", "-o", "{t}/a_file"], "{t}/a_file"),
    (["eval", "--no-files", "--uncertainty-samples", "1000"], "--uncertainty-samples"),
    # argument errors: one line, not the usage block
    (["route"], "required: --ports"),
    (["nosuchcommand"], "invalid choice"),
    (["route", "--ports", "8", "--collective", "all-sum"], "invalid choice"),
    (["routability", "--ports", "8", "--samples", "3", "--exhaustive"], "not allowed with"),
]


@pytest.mark.parametrize("argv, expected", CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_malformed_input_is_one_error_line(argv, expected, tmp_path, capsys):
    _files(tmp_path)
    argv = [a.replace("{t}", str(tmp_path)) for a in argv]
    start = time.perf_counter()
    try:
        status = main(argv)
    except SystemExit as exit_info:        # argparse: a usage error
        status = exit_info.code
    elapsed = time.perf_counter() - start
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert status in (1, 2), captured
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err and "usage:" not in captured.err.replace("(usage:", "")
    assert "error:" in lines[0]
    assert expected.replace("{t}", str(tmp_path)) in lines[0]
    assert elapsed < 30   # an error, not the work (bounds the hang, not a speed target)


def test_range_types_accept_their_bounds_and_reject_beyond():
    r = int_in(2, 1024)
    assert r("2") == 2 and r(" 1024 ") == 1024
    for bad in ("1", "1025", "2.5", "x", ""):
        with pytest.raises(Exception):
            r(bad)
    positive = float_in(0, 10, open_lo=True)
    assert positive("1e-9") == 1e-9 and positive("10") == 10
    for bad in ("0", "10.0001", "nan", "inf", "-inf", "x"):
        with pytest.raises(Exception):
            positive(bad)
    ports = ints_in(2, 8, max_items=3)
    assert ports("2,8") == (2, 8)
    for bad in ("2,9", "", "2,3,4,5", "2,,x"):
        with pytest.raises(Exception):
            ports(bad)
    assert ints_in(2, 8, allow_empty=True)("") == ()


def test_every_range_is_finite_and_ordered():
    for name, kind in RANGES.items():
        item = getattr(kind, "item", kind)
        assert math.isfinite(item.lo) and math.isfinite(item.hi) and item.lo <= item.hi, name


def test_help_shows_the_range(capsys):
    with pytest.raises(SystemExit):
        main(["route", "--help"])
    assert "[2..1024]" in capsys.readouterr().out


def _ranged_options():
    from fred.cli import COMMANDS, build_parser
    from fred.commands import bench
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(getattr(a, "choices", None), dict)).choices
    parsers = [(f"fred {n}", commands[n]) for n in COMMANDS]
    parsers += [(f"fred bench {b}", bench._parser(b)) for b in ("sysmodel", "router", "verilog")]
    for name, sub in parsers:
        for action in sub._actions:
            span = getattr(action.type, "span", None)
            if span:
                yield name, "/".join(action.option_strings), span


def test_docs_cli_lists_every_range():
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    rows = list(_ranged_options())
    assert len(rows) > 40
    for command, option, span in rows:
        assert f"| `{command}` | `{option}` | {span} |" in doc, (command, option, span)
