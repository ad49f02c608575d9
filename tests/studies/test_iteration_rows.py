"""The store of finished iteration-table rows (studies/iteration_rows.py) and the table made
from it in pieces (studies/iteration_table_run.py): rows appended as they finish, reused only on
an equal fingerprint, re-run when any part of it differs, a cut or corrupt line reported by file
and line. The RTL run is faked at ``run_table``'s ``run`` (no Verilator); one test drives the
command with the real model of a small case."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from hdl.contracts.errors import FredError
from studies.iteration_rows import RowStore, fingerprint_of, fingerprint_parts, new_record
from studies.iteration_select import table_units
from studies.iteration_table import ITERATION_BEGIN, ITERATION_END, write_iteration_table
from studies.iteration_table_run import list_cases, run_table

CASES = (("resnet-152", "MP1-DP20-PP1", ("mesh", "fred-b"), None, None, ("fred-a", "fred-b")),)
TOOLS = {"python": "3.11", "amaranth": "0.5", "cocotb": "2.0", "verilator": "5.48.0", "numpy": "2"}


class Fakes:
    """Cases whose model, traces and programs are plain data, and an RTL run giving
    ``rtl[fabric, switch]`` cycles; ``runs`` lists what ran."""

    def __init__(self):
        self.traces = {("mesh", "circuit"): {0: [10, 1 << 31, 5]}, ("fred-b", "circuit"): {0: [10, 1 << 31, 5]},
                       ("fred-b", "packet"): {0: [10, 1 << 31, 6]}}
        self.rtl = {("mesh", "circuit"): 1100, ("fred-b", "circuit"): 900, ("fred-b", "packet"): 950}
        self.runs = []
        self.fail = set()

    def build(self, unit):
        if unit.fabric == "fred-a":
            raise FredError("the packet Fred-A refuses this")
        model = {"iteration_cycles": 1000.0, "comm_exposed_cycles": {"dp": 400.0}}
        return SimpleNamespace(fabric=unit.fabric, switch=unit.switch, rtl_missing=None, scale=unit.scale,
                               description=f"{unit.workload} {unit.strategy} 1f1b", model=model,
                               traces=self.traces[unit.fabric, unit.switch], request=[("all-reduce", 8)],
                               program=[{"phases": [1, 2]}])

    def run(self, case):
        key = (case.fabric, case.switch)
        self.runs.append(key)
        if key in self.fail:
            raise FredError(f"fabric {case.fabric}: the iteration stalled")
        case.rtl = SimpleNamespace(load_stall=None, cycles_per_s=1e5, sim_s=0.01, flits_received=40, build_dir="")
        case.rtl_figures = {"iteration_cycles": self.rtl[key], "comm_exposed_cycles": {"dp": 420}}


def _table(fakes, store, chosen=None, code="c1", tools=TOOLS, platform_files=(), pgo=False):
    units = table_units(CASES, 1000.0)
    return run_table(units, units if chosen is None else [u for u in units if chosen(u)], fakes.build, fakes.run,
                     store, code=code, tools=tools, platform_files=platform_files, pgo=pgo)


def test_rows_are_stored_as_they_finish_and_reused_on_an_equal_fingerprint(tmp_path):
    path = tmp_path / "rows.jsonl"
    fakes = Fakes()
    first = _table(fakes, RowStore(path))
    assert fakes.runs == [("mesh", "circuit"), ("fred-b", "circuit"), ("fred-b", "packet")]
    assert (first.ran, first.reused) == (3, 0) and first.missing == []
    assert [r["rtl_iteration"] for r in first.rows] == [1100, 900, 950]
    assert first.refused == [{"workload": "resnet-152 MP1-DP20-PP1, K = 1000", "fabric": "fred-a", "switch": "packet",
                              "error": "the packet Fred-A refuses this"}]
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["kind"] for r in records] == ["row", "row", "refused", "row"]
    assert records[0]["case"] == "resnet-152 MP1-DP20-PP1 K=1000 mesh circuit" and records[0]["tools"] == TOOLS
    assert set(records[0]["parts"]) == {"case", "platform", "code", "tools", "traces", "programs", "model"}
    fakes.runs.clear()
    again = _table(fakes, RowStore(path))          # a new process: the store read back
    assert fakes.runs == [] and (again.ran, again.reused) == (0, 3)
    assert [r["rtl_iteration"] for r in again.rows] == [1100, 900, 950]
    assert all(r["stored"] and r["measured"] == rec["measured"] for r, rec in zip(again.rows, records[:2] + records[3:]))
    assert len(path.read_text().splitlines()) == 4      # the refusal is stored once


@pytest.mark.parametrize("change", ["code", "tools", "traces", "platform"])
def test_no_row_is_reused_when_any_part_of_its_fingerprint_differs(tmp_path, change):
    path, platform = tmp_path / "rows.jsonl", tmp_path / "platform.toml"
    platform.write_text("npus = 20\n")
    fakes = Fakes()
    _table(fakes, RowStore(path), platform_files=(platform, None))
    fakes.runs.clear()
    code, tools = "c1", TOOLS
    if change == "code":
        code = "c2"
    elif change == "tools":
        tools = {**TOOLS, "verilator": "5.50.0"}
    elif change == "traces":
        fakes.traces["fred-b", "circuit"] = {0: [11, 1 << 31, 5]}
    else:
        platform.write_text("npus = 20\n# edited\n")
    again = _table(fakes, RowStore(path), code=code, tools=tools, platform_files=(platform, None))
    expected = [("fred-b", "circuit")] if change == "traces" else [("mesh", "circuit"), ("fred-b", "circuit"),
                                                                   ("fred-b", "packet")]
    assert fakes.runs == expected and again.ran == len(expected)


def test_a_profile_guided_row_is_never_taken_for_a_plain_one_nor_the_reverse(tmp_path):
    """``--pgo`` rows (the same cycles, other cycles/s) carry a ``build`` part: a profile-guided
    table runs every case again beside the plain rows, and each table then takes its own; a
    plain row's parts are unchanged by the part's existence."""
    path = tmp_path / "rows.jsonl"
    fakes = Fakes()
    _table(fakes, RowStore(path))
    fakes.runs.clear()
    guided = _table(fakes, RowStore(path), pgo=True)
    assert len(fakes.runs) == 3 and guided.ran == 3
    records = [r for r in map(json.loads, path.read_text().splitlines()) if r["kind"] == "row"]
    assert ["build" in r["parts"] for r in records] == [False] * 3 + [True] * 3
    assert records[3]["parts"]["build"] == "lock-step, profile-guided"
    fakes.runs.clear()
    assert _table(fakes, RowStore(path)).reused == 3 and _table(fakes, RowStore(path), pgo=True).reused == 3
    assert fakes.runs == []


def test_the_parts_cover_the_programs_and_the_model():
    fakes = Fakes()
    unit = table_units(CASES, 1000.0)[1]
    case = fakes.build(unit)
    base = fingerprint_of(fingerprint_parts(unit, case, code="c", tools=TOOLS))
    case.program = [{"phases": [1, 3]}]
    assert fingerprint_of(fingerprint_parts(unit, case, code="c", tools=TOOLS)) != base
    case = fakes.build(unit)
    case.model["iteration_cycles"] = 1001.0
    assert fingerprint_of(fingerprint_parts(unit, case, code="c", tools=TOOLS)) != base
    assert fingerprint_of(fingerprint_parts(unit, fakes.build(unit), code="c", tools=TOOLS)) == base
    with pytest.raises(FredError, match="cannot fingerprint a builtins.object"):
        case.program = object()
        fingerprint_parts(unit, case, code="c", tools=TOOLS)


def test_a_failed_run_is_stored_and_run_again_an_interrupted_run_keeps_its_rows(tmp_path):
    path = tmp_path / "rows.jsonl"
    fakes = Fakes()
    fakes.fail = {("fred-b", "circuit")}
    first = _table(fakes, RowStore(path))
    assert [f["fabric"] for f in first.failed] == ["fred-b"] and first.ran == 2
    assert [json.loads(line)["kind"] for line in path.read_text().splitlines()] == ["row", "failed", "refused", "row"]
    fakes.fail, fakes.runs = set(), []
    second = _table(fakes, RowStore(path))
    assert fakes.runs == [("fred-b", "circuit")] and second.failed == [] and second.reused == 2
    # killed in the middle (here: an interrupt in the second case's run): the first row is kept
    path2 = tmp_path / "interrupted.jsonl"
    fakes = Fakes()
    fakes.run_ = fakes.run

    def run(case):
        if case.fabric == "fred-b":
            raise KeyboardInterrupt
        fakes.run_(case)
    units = table_units(CASES, 1000.0)
    with pytest.raises(KeyboardInterrupt):
        run_table(units, units, fakes.build, run, RowStore(path2), code="c1", tools=TOOLS)
    assert [r["case"] for r in RowStore(path2).records if r["kind"] == "row"] == [
        "resnet-152 MP1-DP20-PP1 K=1000 mesh circuit"]


def test_only_selected_cases_run_the_others_come_from_the_store_or_are_named_missing(tmp_path):
    path = tmp_path / "rows.jsonl"
    fakes = Fakes()
    first = _table(fakes, RowStore(path), chosen=lambda u: u.fabric == "mesh")
    assert fakes.runs == [("mesh", "circuit")]
    assert first.missing == ["resnet-152 MP1-DP20-PP1 K=1000 fred-b circuit (not measured)",
                             "resnet-152 MP1-DP20-PP1 K=1000 fred-a packet (not measured)",
                             "resnet-152 MP1-DP20-PP1 K=1000 fred-b packet (not measured)"]
    fakes.runs.clear()
    second = _table(fakes, RowStore(path), chosen=lambda u: u.fabric == "fred-b", code="c1")
    assert fakes.runs == [("fred-b", "circuit"), ("fred-b", "packet")]
    assert [(r["fabric"], r["stored"]) for r in second.rows] == [("mesh", True), ("fred-b", False), ("fred-b", False)]
    # a stored row of an unselected case made by other code is not taken: named, with what changed
    fakes.runs.clear()
    third = _table(fakes, RowStore(path), chosen=lambda u: u.switch == "packet", code="c2")
    assert fakes.runs == [("fred-b", "packet")]
    assert third.missing == ["resnet-152 MP1-DP20-PP1 K=1000 mesh circuit (stored row out of date: code changed)",
                             "resnet-152 MP1-DP20-PP1 K=1000 fred-b circuit (stored row out of date: code changed)"]
    listed = list_cases(table_units(CASES, 1000.0), fakes.build, RowStore(path), code="c2", tools=TOOLS)
    assert [(c["fabric"], c["switch"], c["model_cycles"], bool(c["stored"]), c["refused"]) for c in listed] == [
        ("mesh", "circuit", 1000.0, False, None), ("fred-b", "circuit", 1000.0, False, None),
        ("fred-a", "packet", None, False, "the packet Fred-A refuses this"), ("fred-b", "packet", 1000.0, True, None)]


def test_a_cut_or_corrupt_line_is_an_error_naming_file_and_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    fakes = Fakes()
    _table(fakes, RowStore(path))
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:3]) + lines[3][:40])          # killed while writing the last line
    with pytest.raises(FredError, match=rf"{path}:4: not a whole JSON record .*delete the line"):
        RowStore(path)
    path.write_text(lines[0] + '{"kind": "row"}\n' + "".join(lines[1:]))
    with pytest.raises(FredError, match=rf"{path}:2: not a row record \(it needs kind, case, fingerprint"):
        RowStore(path)
    record = json.loads(lines[1])
    path.write_text(json.dumps({**record, "row": None}) + "\n")
    with pytest.raises(FredError, match=rf"{path}:1: a record of kind 'row' without its row"):
        RowStore(path)
    path.write_text(json.dumps({**record, "kind": "guess"}) + "\n")
    with pytest.raises(FredError, match=rf"{path}:1: a record of kind 'guess' is not one of row, failed, refused"):
        RowStore(path)


def test_the_block_says_which_rows_came_from_the_store_and_when(tmp_path):
    path = tmp_path / "rows.jsonl"
    fakes = Fakes()
    _table(fakes, RowStore(path), chosen=lambda u: u.fabric == "mesh")
    result = _table(fakes, RowStore(path), chosen=lambda u: u.switch == "circuit")
    doc = tmp_path / "v.md"
    doc.write_text(f"head\n{ITERATION_BEGIN}\nold\n{ITERATION_END}\n")
    write_iteration_table(result.rows, doc, "fred fabric-iteration --table --no-overlap --only circuit",
                          failed=result.failed, refused=result.refused, missing=result.missing)
    text = doc.read_text()
    mesh, fred = result.rows
    assert mesh["stored"] and not fred["stored"]
    assert f"| 100,000 | {mesh['measured'][:16]}, stored |" in text
    assert f"| 100,000 | {fred['measured'][:16]} |" in text
    assert (f"1 row(s) measured in this run, 1 taken from the row store with the fingerprint of this run's code, "
            f"tools, traces and programs (measured {mesh['measured'][:16]} UTC") in text
    assert ("**2 case(s) without a row** (not selected by `--only` and not in the store with this fingerprint): "
            "resnet-152 MP1-DP20-PP1 K=1000 fred-a packet (not measured); "
            "resnet-152 MP1-DP20-PP1 K=1000 fred-b packet (not measured).") in text
    assert "| resnet-152 MP1-DP20-PP1, K = 1000 | fred-b | circuit | 1.2222 | 1.0000 | 1.2222 |" in text   # speedup


def test_records_carry_the_case_date_tools_load_and_verilog(tmp_path):
    unit = table_units(CASES, 1000.0)[0]
    build = tmp_path / "iteration_fabric_top-fast-0123"
    build.mkdir()
    (build / "iteration_fabric_top.v").write_text("module top; endmodule\n")
    parts = fingerprint_parts(unit, Fakes().build(unit), code="c", tools=TOOLS)
    record = new_record("row", unit, parts, row={"rtl_iteration": 1}, build_dir=build, tools=TOOLS)
    import hashlib
    assert record["verilog_sha256"] == hashlib.sha256(b"module top; endmodule\n").hexdigest()
    assert record["measured"].endswith(" UTC") and record["load"] >= 0 and record["tools"] == TOOLS
    assert record["fingerprint"] == fingerprint_of(parts) and record["unit"]["fabric"] == "mesh"


def test_the_command_stores_and_reuses_rows_of_a_real_case_with_the_rtl_faked(tmp_path, monkeypatch, capsys):
    """``fred fabric-iteration --table --only ...``: the real model's side of a small case, the
    RTL run faked at ``run_iteration_case``; the second run takes the row from the store."""
    from fred.cli import main
    from studies import iteration_case, iteration_table
    monkeypatch.setattr(iteration_table, "ITERATION_CASES",
                        (("resnet-152", "MP1-DP20-PP1", ("mesh", "fred-b"), None, None, ("fred-b",)),))
    ran = []

    def fake_run(case, pgo=False):
        ran.append(case.fabric + (" pgo" if pgo else ""))
        case.rtl = SimpleNamespace(load_stall=None, cycles_per_s=2e5, sim_s=0.05, flits_received=1, build_dir="")
        case.rtl_figures = {"iteration_cycles": round(case.model["iteration_cycles"]),
                            "comm_exposed_cycles": case.model["comm_exposed_cycles"]}
        return case
    monkeypatch.setattr(iteration_case, "run_iteration_case", fake_run)
    rows, doc = tmp_path / "rows.jsonl", tmp_path / "v.md"
    args = ["fabric-iteration", "--table", "--no-overlap", "--rows", str(rows), "--output", str(doc),
            "--only", "fabric=fred-b", "--only", "circuit"]
    assert main(args) == 0
    assert ran == ["fred-b"]
    assert "1 row(s) run, 0 from" in capsys.readouterr().out
    assert main(args[:-4]) == 0          # every case: fred-b circuit from the store
    assert ran == ["fred-b", "mesh", "fred-b"]
    out = capsys.readouterr().out
    assert "resnet-152 MP1-DP20-PP1 K=1000 fred-b circuit: from" in out and "2 row(s) run, 1 from" in out
    assert ", stored |" in doc.read_text()
    assert main(["fabric-iteration", "--list-cases", "--no-overlap", "--rows", str(rows), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [c["stored"] is not None for c in listed] == [True, True, True]
    # --pgo: the rows of profile-guided builds, each run again (its own fingerprint), the command in the block
    assert main([*args, "--pgo"]) == 0
    assert ran[-1] == "fred-b pgo" and " --pgo` on " in doc.read_text()
    assert main(["fabric-iteration", "--table", "--no-overlap", "--rows", str(rows), "--only", "fred-x"]) == 1
    assert "'fred-x' names no case" in capsys.readouterr().err


def test_the_code_part_digests_the_rtl_side_and_not_the_model(monkeypatch):
    """A row's code part is the RTL's generators, build and harness, the studies and the command;
    the model (sysmodel) reaches a row only through parts hashed by content (traces, requests,
    programs, the model's figures), so an edit of the model that moves no figure keeps the rows
    and one that moves a figure changes those parts. Pinned here by the folders digested."""
    import importlib
    import studies.points
    from studies import iteration_rows
    digested = []
    monkeypatch.setattr(studies.points, "_digest_folder",
                        lambda digest, folder, suffixes=None: digested.append(Path(folder)))
    iteration_rows.code_fingerprint.cache_clear()
    try:
        iteration_rows.code_fingerprint()
    finally:
        iteration_rows.code_fingerprint.cache_clear()
    folder = {name: Path(importlib.import_module(name).__file__).resolve().parent
              for name in ("hdl", "eda", "cocotb_tests", "studies", "fred", "sysmodel")}
    for name in ("hdl", "eda", "cocotb_tests", "studies", "fred"):
        assert folder[name] in digested, name
    assert folder["sysmodel"] not in digested
