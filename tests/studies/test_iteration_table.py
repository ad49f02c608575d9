"""The iteration table (studies/iteration_table.py): speedups from hand-made rows, the block
between its markers replaced in place. Pure Python (the RTL runs are ``make fabric-iteration``)."""

from __future__ import annotations

from studies.iteration_table import ITERATION_BEGIN, ITERATION_END, speedups, write_iteration_table


def _row(workload, fabric, model, rtl, switch="circuit"):
    return {"workload": workload, "fabric": fabric, "switch": switch, "collectives": 1, "model_iteration": model,
            "rtl_iteration": rtl, "iteration_ratio": rtl / model, "model_exposed": 100.0,
            "rtl_exposed": 110, "exposed_ratio": 1.1, "load_stall": 0, "cycles_per_s": 5e4,
            "sim_s": 0.2, "flits": 10}


def test_speedups_pair_each_fred_row_with_the_mesh_row_of_its_iteration(tmp_path):
    rows = [_row("resnet-152 MP1-DP20-PP1, K = 1000", "mesh", 1000.0, 1100),
            _row("resnet-152 MP1-DP20-PP1, K = 1000", "fred-d", 800.0, 1000),
            _row("resnet-152 MP20-DP1-PP1, K = 1000", "mesh", 500.0, 600)]      # no FRED row: none
    (only,) = speedups(rows)
    assert only["fabric"] == "fred-d" and only["rtl"] == 1.1 and only["model"] == 1.25
    assert abs(only["ratio"] - 0.88) < 1e-12 and only["paper"] == 1.76
    doc = tmp_path / "v.md"
    doc.write_text(f"head\n{ITERATION_BEGIN}\nold\n{ITERATION_END}\ntail\n")
    write_iteration_table(rows, doc, "fred fabric-iteration --table --no-overlap")
    text = doc.read_text()
    assert text.startswith("head\n") and text.endswith("tail\n") and "old" not in text
    assert "| resnet-152 MP1-DP20-PP1, K = 1000 | fred-d | circuit | 1.1000 | 1.2500 | 0.8800 | 1.76 |" in text
    assert "worst RTL/model 1.2500 (resnet-152 MP1-DP20-PP1, K = 1000, fred-d)" in text


def test_a_case_that_did_not_finish_is_named_in_the_block(tmp_path):
    doc = tmp_path / "v.md"
    rows = [_row("resnet-152 MP4-DP5-PP1, K = 1000", "mesh", 1000.0, 1010)]
    failed = [{"workload": "resnet-152 MP4-DP5-PP1, K = 1000", "fabric": "fred-a",
               "error": "fabric fred-a: the iteration stalled"}]
    write_iteration_table(rows, doc, "fred fabric-iteration --table --no-overlap", failed=failed)
    text = doc.read_text()
    assert "| resnet-152 MP4-DP5-PP1, K = 1000 | mesh |" in text
    assert ("**1 case(s) did not finish** (no row above): resnet-152 MP4-DP5-PP1, K = 1000 on "
            "fred-a: fabric fred-a: the iteration stalled.") in text
    write_iteration_table([], doc, "fred fabric-iteration --table --no-overlap", failed=failed)
    assert "no case finished" in doc.read_text()


def test_packet_rows_have_their_section_and_the_speedup_takes_them_where_they_exist(tmp_path):
    """A Fred-X with a packet row: its speedup over the mesh is the packet row's (the paper's
    switch); one without keeps its circuit row. The packet rows and the cases the packet
    fabric refuses are in their own section, after the circuit table."""
    w = "resnet-152 MP20-DP1-PP1, K = 1000"
    rows = [_row(w, "mesh", 1000.0, 1200), _row(w, "fred-b", 800.0, 1000), _row(w, "fred-a", 900.0, 1000),
            _row(w, "fred-b", 500.0, 600, switch="packet")]
    by_fabric = {r["fabric"]: r for r in speedups(rows)}
    assert by_fabric["fred-b"]["switch"] == "packet" and by_fabric["fred-b"]["rtl"] == 2.0
    assert by_fabric["fred-b"]["model"] == 2.0
    assert by_fabric["fred-a"]["switch"] == "circuit" and by_fabric["fred-a"]["rtl"] == 1.2
    doc = tmp_path / "v.md"
    doc.write_text(f"{ITERATION_BEGIN}\n{ITERATION_END}\n")
    refused = [{"workload": w, "fabric": "fred-a", "error": "the packet fabric runs one-stage endpoint programs so far"}]
    write_iteration_table(rows, doc, "fred fabric-iteration --table --no-overlap", refused=refused)
    text = doc.read_text()
    circuit_at, packet_at = text.index("The mesh and the circuit FRED fabric"), text.index("The packet FRED fabric")
    assert circuit_at < text.index(f"| {w} | fred-b | 1 | 800.0 |") < packet_at < text.index(f"| {w} | fred-b | 1 | 500.0 |")
    assert "worst RTL/model 1.2500 (resnet-152 MP20-DP1-PP1, K = 1000, fred-b)" in text       # the circuit's
    assert "packet platform: iteration worst RTL/model 1.2000" in text
    assert ("**1 case(s) refused by the packet fabric's iteration before any build** (no row above): "
            f"{w} on fred-a: the packet fabric runs one-stage endpoint programs so far.") in text


def test_the_table_builds_circuit_cases_first_and_names_each_packet_refusal(tmp_path):
    """``run_table``: every circuit case built (mesh and circuit FRED fabrics), then each packet
    case; a packet case whose build raises, or whose RTL is missing (the model runs: Fred-B/D's
    I/O iteration), is a refusal naming why, K the default where the case has none."""
    from types import SimpleNamespace

    from hdl.contracts.errors import FredError
    from studies.iteration_rows import RowStore
    from studies.iteration_select import table_units
    from studies.iteration_table import ITERATION_CASES
    from studies.iteration_table_run import run_table

    calls = []

    def build(unit):
        calls.append((unit.workload, unit.fabric, unit.switch, unit.scale, unit.samples))
        if unit.switch == "packet" and unit.fabric == "fred-a":
            raise FredError("the packet fabric runs one-stage endpoint programs so far")
        return SimpleNamespace(fabric=unit.fabric, switch=unit.switch, traces={}, request=None, program=None, model={},
                               rtl_missing="io-load: not behind the trace" if unit.fabric == "fred-b" else None)

    cases = (("resnet-152", "MP20-DP1-PP1", ("mesh", "fred-b"), None, None, ("fred-a", "fred-c")),
             ("gpt-3", "MP1-DP20-PP1", ("mesh",), 10_000.0, 8, ("fred-a", "fred-b", "fred-c")))
    units = table_units(cases, 1000.0)
    ran = []

    def run(case):       # every build comes before the first run
        assert len(calls) == 8
        ran.append((case.fabric, case.switch))
        raise FredError("stalled")
    result = run_table(units, units, build, run, RowStore(tmp_path / "rows.jsonl"), code="c", tools={"python": "3"})
    assert [c[1:3] for c in calls] == [("mesh", "circuit"), ("fred-b", "circuit"), ("mesh", "circuit"),
                                       ("fred-a", "packet"), ("fred-c", "packet"), ("fred-a", "packet"),
                                       ("fred-b", "packet"), ("fred-c", "packet")]
    assert calls[2] == ("gpt-3", "mesh", "circuit", 10_000.0, 8)
    assert ran == [("mesh", "circuit"), ("fred-b", "circuit"), ("mesh", "circuit"), ("fred-c", "packet"),
                   ("fred-c", "packet")]
    assert result.refused == [
        {"workload": "resnet-152 MP20-DP1-PP1, K = 1000", "fabric": "fred-a", "switch": "packet",
         "error": "the packet fabric runs one-stage endpoint programs so far"},
        {"workload": "gpt-3 MP1-DP20-PP1, K = 10000", "fabric": "fred-a", "switch": "packet",
         "error": "the packet fabric runs one-stage endpoint programs so far"},
        {"workload": "gpt-3 MP1-DP20-PP1, K = 10000", "fabric": "fred-b", "switch": "packet",
         "error": "io-load: not behind the trace"}]
    assert [f["error"] for f in result.failed] == ["stalled"] * 5
    # the table's weight-streaming cases run on the mesh and on every packet FRED fabric (the
    # circuit FRED fabric has no I/O controllers)
    io = {w: (fabrics, packet) for w, _, fabrics, _, _, packet in ITERATION_CASES if w in ("gpt-3", "transformer-1t")}
    assert io == {w: (("mesh",), ("fred-a", "fred-b", "fred-c", "fred-d")) for w in ("gpt-3", "transformer-1t")}


def test_the_weight_streaming_speedup_quotes_the_papers_figure():
    w = "gpt-3 MP1-DP20-PP1, K = 10000"
    rows = [_row(w, "mesh", 4_202_184.1, 4_218_348), _row(w, "fred-c", 4_197_213.4, 4_238_800, switch="packet")]
    (only,) = speedups(rows)
    assert only["switch"] == "packet" and only["paper"] == 1.34
    assert abs(only["rtl"] - 4_218_348 / 4_238_800) < 1e-12
