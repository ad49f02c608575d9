"""The characterization pipeline: the checked-in JSON loads in the system model, the report
builder and its figures on synthetic transfers, and (cocotb) one tiny P=4 point end to end
with the VCD cross-check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hdl.contracts.characterization import parse_characterization as parse_base
from hdl.contracts.errors import FredError
from studies.characterization.cost import cost_designs, hierarchy_counts
from studies.characterization.grid import timing_grid
from studies.characterization.report import (build_document, composed_cost, composed_fmax,
                                             fmax_agreement, microswitch_counts, summarize_point)
from studies.characterization.timing import figures
from sysmodel.switch_timing import SCHEMA_ID, load_switch_timing, parse_characterization

ROOT = Path(__file__).resolve().parents[2]
CHECKED_IN = ROOT / "data" / "characterization.json"


def test_checked_in_json_loads_in_the_system_model():
    timing = load_switch_timing(CHECKED_IN)
    doc = json.loads(CHECKED_IN.read_text())
    assert doc["schema"] == SCHEMA_ID
    assert doc["generated_by"]["command"].startswith("fred characterize")
    assert doc["generated_by"]["date"] and doc["generated_by"]["tools"]["verilator"]
    src = doc["switch_source"]["point"]
    ref = next(s for s in doc["summaries"] if (s["ports"], s["middle"], s["dtype"])
               == (src["ports"], src["middle"], src["dtype"]))
    assert timing.first_flit_latency_cycles == ref["first_flit_latency_cycles"]
    assert timing.phase_switch_cycles == ref["phase_switch_cycles"]
    # the RTL's latency is a property: the measurement must agree with it at every point
    for s in doc["summaries"]:
        assert s["first_flit_latency_cycles"] == s["latency_property"], s
        assert s["throughput_flits_per_cycle_per_port"] == 1.0, s


def _segment(**kw):
    base = {"traffic": "unicast", "backpressure": 0.0, "phase": 0, "phases": 1, "length": 3,
            "flows": [[[0], [1]]], "inputs": [0], "outputs": [1], "marks_in": [0, 0],
            "marks_out": [0, 0], "config_index": 0, "config_words": 1, "loaded_rose": 3,
            "select_index": 0, "select_raised": 4, "previous_phase": False, "drain_backpressure": 0.0}
    base.update(kw)
    return base


def test_figures_from_transfers():
    transfers = {"i__0": [10, 11, 12, 30, 31, 32], "i__1": [], "o__0": [], "o__1": [15, 16, 17, 36, 37, 39],
                 "config": [2, 20], "phase": [6, 28]}
    segs = [_segment(),
            _segment(marks_in=[3, 0], marks_out=[0, 3], config_index=1, loaded_rose=22,
                     select_index=1, select_raised=18, previous_phase=True)]
    rows = figures(segs, transfers)
    assert rows[0]["first_flit_latency_min"] == 5 and rows[0]["throughput_min"] == 1.0
    assert rows[0]["config_load"] == 2 and rows[0]["phase_switch"] == 3
    assert rows[1]["first_flit_latency_max"] == 6 and rows[1]["throughput_min"] == pytest.approx(2 / 3)
    assert rows[1]["phase_switch"] == 11        # raised at 18, select at 28, open at 29
    assert rows[1]["drain"] == 0                # the old output was done (17) before 18
    transfers["o__1"] = transfers["o__1"][:-1]  # a lost flit is an error, not a figure
    with pytest.raises(FredError, match="output 1 moved 2 of 3"):
        figures(segs, transfers)


def test_document_validates_and_refuses_nothing_measured():
    with pytest.raises(FredError, match="no timing point"):
        build_document([], [], command="x", grid={}, not_measured=[], tools={}, seconds=None)
    doc = json.loads(CHECKED_IN.read_text())
    point = doc["measurements"][0]
    built = build_document([point], [], command="fred characterize", grid=doc["grid"],
                           not_measured=[], tools={}, seconds=1.0)
    parse_characterization(built)
    assert summarize_point(point)["ports"] == point["ports"]


def test_microswitch_counts_follow_the_compiler_layout():
    from collections import Counter
    from hdl.contracts.encoding import layout
    for ports in (2, 3, 4, 5, 8, 10, 12, 16):
        for middle in (2, 3):
            kinds = Counter(slot.kind for slot in layout(ports, middle))
            counts = microswitch_counts(ports, middle)
            assert {k: v for k, v in counts.items() if v} == dict(kinds), (ports, middle)


def test_composed_cost_of_odd_sizes_needs_the_demux_and_mux():
    unit = {"lut_equivalent": 1, "ff": 1, "generic_cells": 1}
    costs = {"rd_microswitch": unit, "input_microswitch_m3": unit, "output_microswitch_m3": unit}
    assert composed_cost(costs, 12, 3) is None          # Fred_3(12) -> 6 -> 3: demux and mux
    costs.update(demux_m3=unit, mux_m3=unit)
    c = composed_cost(costs, 12, 3)
    # Fred_3(12): 6 in + 6 out + 3 x Fred_3(6); Fred_3(6): 3 in + 3 out + 3 x Fred_3(3);
    # Fred_3(3): 1 in, 1 out, 1 demux, 1 mux, 3 RD  ->  24 in, 24 out, 9 demux, 9 mux, 27 RD
    assert c["microswitches"] == {"rd": 27, "input": 24, "output": 24, "demux": 9, "mux": 9}
    assert c["lut_equivalent"] == 24 + 27 + 24 + 9 + 9


def _part(name, kind, fmax, middle=3, ports=2):
    return {"name": name, "kind": kind, "ports": ports, "middle": middle, "fmax_mhz": fmax,
            "lut_equivalent": 1, "ff": 1, "generic_cells": 1}


def _parts(middle, rd=118.0, inp=108.0, out=170.0, demux=150.0, mux=160.0):
    return [_part("rd_microswitch", "rd", rd, None), _part(f"input_microswitch_m{middle}", "input", inp, middle),
            _part(f"output_microswitch_m{middle}", "output", out, middle),
            _part(f"demux_m{middle}", "demux", demux, middle, 1), _part(f"mux_m{middle}", "mux", mux, middle, 1)]


def test_composed_fmax_is_the_slowest_part_derated_by_a_placed_switch():
    """Upper bound = the slowest part the switch contains; derate = measured / upper bound of
    a placed switch of the same m (never the design itself); None without a reference."""
    costs = _parts(3, demux=90.0)
    assert composed_fmax(costs, 12, 3) is None                      # nothing placed to derate by
    costs.append(_part("fred_switch_P4m3", "switch", 81.0, 3, 4))   # P=4 has no demux: bound 108
    c = composed_fmax(costs, 12, 3)                                  # Fred_3(12) has demuxes
    assert c["upper_bound_mhz"] == 90.0 and c["limited_by"] == "demux"
    assert c["derate"] == pytest.approx(0.75) and c["reference"] == "fred_switch_P4m3"
    assert c["fmax_mhz"] == pytest.approx(67.5)
    assert composed_fmax(costs, 4, 3) is None                        # not from itself
    costs[1] = dict(costs[1], fmax_mhz=None)                         # a part not placed
    assert composed_fmax(costs, 8, 3) is None


def test_fmax_agreement_predicts_each_placed_switch_from_the_others():
    costs = _parts(2) + _parts(3)[1:] + [_part("fred_switch_P4m2", "switch", 81.0, 2, 4),
                                          _part("fred_switch_P4m3", "switch", 90.0, 3, 4)]
    rows = {r["name"]: r for r in fmax_agreement(costs)}
    # P4m2: bound 108 (input m2), derate from P4m3 = 90 / 108  ->  90.0, measured 81
    assert rows["fred_switch_P4m2"]["reference"] == "fred_switch_P4m3"
    assert rows["fred_switch_P4m2"]["composed_mhz"] == pytest.approx(90.0)
    assert rows["fred_switch_P4m2"]["error"] == pytest.approx(90.0 / 81.0 - 1, abs=1e-4)
    assert rows["fred_switch_P4m3"]["composed_mhz"] == pytest.approx(81.0)


def test_every_measured_point_gets_a_switch_block_the_model_can_look_up():
    doc = json.loads(CHECKED_IN.read_text())
    points = [p for p in doc["measurements"] if (p["ports"], p["middle"], p["dtype"]) in ((4, 3, "fp16"), (4, 2, "int32"))]
    assert len(points) == 2
    built = build_document(points, [], command="fred characterize", grid=doc["grid"],
                           not_measured=[], tools={}, seconds=1.0)
    parsed = parse_base(built)
    for p in points:
        block = parsed.switch_at(ports=p["ports"], middle=p["middle"], dtype=p["dtype"])
        summary = summarize_point(p)
        assert block["first_flit_latency_cycles"] == summary["first_flit_latency_cycles"]
        assert block["config_load_cycles"] == summary["config_load_cycles"]
        # the select's copy on an idle switch, now in the block; older files: from the summary
        assert block["select_copy_cycles"] == summary["select_copy_cycles"]
        old = json.loads(json.dumps(built))
        name = f"P{p['ports']}m{p['middle']}{p['dtype']}"
        del old["switches"][name]["switch"]["select_copy_cycles"]
        assert parse_base(old).switch_at(ports=p["ports"], middle=p["middle"], dtype=p["dtype"])[
            "select_copy_cycles"] == summary["select_copy_cycles"]
        del old["summaries"]
        assert "select_copy_cycles" not in parse_base(old).switch_at(
            ports=p["ports"], middle=p["middle"], dtype=p["dtype"])
    with pytest.raises(FredError, match=r"<json>: switches\.P4m3fp16\.switch\.select_copy_cycles: expected a number >= 0, got -2"):
        bad = json.loads(json.dumps(built))
        bad["switches"]["P4m3fp16"]["switch"]["select_copy_cycles"] = -2
        parse_base(bad)
    assert parsed.switch_at(ports=12, middle=3, dtype="fp16") is None
    with pytest.raises(FredError, match="switches.P4m3fp16.switch.phase_switch_cycles"):
        bad = json.loads(json.dumps(built))
        bad["switches"]["P4m3fp16"]["switch"]["phase_switch_cycles"] = -1
        parse_base(bad)
    with pytest.raises(FredError, match="the key must be that name"):
        bad = json.loads(json.dumps(built))
        bad["switches"]["P12m3fp16"] = bad["switches"].pop("P4m3fp16")
        parse_base(bad)


def test_the_chiplets_are_in_the_grid_and_the_cost_designs():
    assert timing_grid((4,), (2,), ("int32",)) == [(4, 2, "int32"), (10, 3, "fp16"), (12, 3, "fp16")]
    assert timing_grid((4,), (2,), ("int32",), ()) == [(4, 2, "int32")]
    names = {d["name"]: d for d in cost_designs((4,), (2,), (12, 10))}
    assert {"demux_m3", "mux_m3", "fred_switch_P10m3_hier", "fred_switch_P12m3_hier"} <= set(names)
    assert names["fred_switch_P4m2"]["synthesis"] == "flat"          # auto: flat up to 8
    both = {d["name"] for d in cost_designs((4,), (3,), (), synthesis="both")}
    assert {"fred_switch_P4m3", "fred_switch_P4m3_hier"} <= both
    with pytest.raises(FredError, match="--synthesis 'fast'"):
        cost_designs((4,), (3,), synthesis="fast")


def test_hierarchy_counts_are_the_design_totals_without_submodule_instances(tmp_path):
    """yosys ``stat -json -top`` of a hierarchy: the ``design`` totals, minus the instances
    of the design's own modules (they are not cells)."""
    stat = {"modules": {"\\dut": {"num_cells_by_type": {"LUT4": 2, "\\sub": 3}},
                        "\\sub": {"num_cells_by_type": {"LUT4": 4, "TRELLIS_FF": 1}}},
            "design": {"num_cells_by_type": {"LUT4": 14, "TRELLIS_FF": 3, "\\sub": 3}}}
    path = tmp_path / "stat.json"
    path.write_text(json.dumps(stat))
    assert hierarchy_counts(path) == {"LUT4": 14, "TRELLIS_FF": 3}
    path.write_text(json.dumps({"modules": stat["modules"]}))
    with pytest.raises(FredError, match="no hierarchy totals"):
        hierarchy_counts(path)


def test_composed_cost_counts_microswitches():
    unit = {"lut_equivalent": 1, "ff": 1, "generic_cells": 1}
    costs = {"rd_microswitch": unit, "input_microswitch_m3": unit, "output_microswitch_m3": unit}
    c = composed_cost(costs, 8, 3)
    # Fred_3(8): 4 in + 3 x Fred_3(4) (2 in + 3 RD + 2 out) + 4 out
    assert c["microswitches"] == {"rd": 9, "input": 10, "output": 10, "demux": 0, "mux": 0}
    assert composed_cost({}, 8, 3) is None


def test_grid_rejects_bad_points():
    with pytest.raises(FredError, match="--ports 1"):
        timing_grid((1,), (2,), ("fp16",))
    assert timing_grid((12, 10), (3,), ("fp16",)) == [(10, 3, "fp16"), (12, 3, "fp16")]
    with pytest.raises(FredError, match="fp8"):
        timing_grid((4,), (2,), ("fp8",))
    assert timing_grid((8, 4), (3, 2), ("int32", "fp16"))[0] == (4, 2, "fp16")


@pytest.mark.cocotb
def test_tiny_point_end_to_end():
    """P=4 m=2 int32, short packets: builds with --trace, runs every traffic class with and
    without backpressure, cross-checks every transfer against the VCD."""
    from studies.characterization.timing import measure_point
    point = measure_point(4, 2, "int32", length=16, log=lambda *a: None)
    rows = point["segments"]
    assert {r["traffic"] for r in rows} == {"unicast", "multicast", "reduce", "all_reduce", "mix3d"}
    assert point["vcd_checked_transfers"] > 0
    for r in rows:
        if r["backpressure"] == 0:
            assert r["throughput_min"] == 1.0 and r["input_throughput_min"] == 1.0, r
            assert r["first_flit_latency_min"] == r["first_flit_latency_max"] == point["latency_property"]
        assert r["config_load"] == r["config_words"] + 1
    switches = [r for r in rows[1:] if r["drain_backpressure"] == 0]
    assert switches
    for r in switches:   # drain (at most the pipeline) + the select copy of N + 2 cycles
        assert r["phase_switch"] == r["drain"] + r["select_copy"], r
        assert r["select_copy"] == point["config_words"] + 2, r
        assert 0 < r["drain"] <= point["latency_property"], r


def test_loader_checks_the_optional_keys():
    doc = json.loads(CHECKED_IN.read_text())
    parse_characterization(doc)
    bad = dict(doc, generated_by={"command": "fred characterize"})
    with pytest.raises(FredError, match="generated_by"):
        parse_characterization(bad)
    with pytest.raises(FredError, match=r"<json>: measurements: expected an array, got an empty object"):
        parse_characterization(dict(doc, measurements={}))
    minimal = {"schema": doc["schema"], "switch": doc["switch"]}
    assert parse_characterization(minimal).first_flit_latency_cycles == doc["switch"]["first_flit_latency_cycles"]


@pytest.mark.parametrize("argv,message", [
    (["--length", "1"], "--length: expected an integer in 2..100000"),
    (["--backpressure", "1.5"], "--backpressure: expected a finite number in [0, 1)"),
    (["--ports", "1", "--report-only"], "--ports: expected an integer in 2..64"),
    (["--dtypes", "fp8", "--report-only"], "fp8"),
])
def test_cli_rejects_bad_input(argv, message, capsys, tmp_path):
    from fred.cli import main
    try:
        code = main(["characterize", *argv, "--cache", str(tmp_path), "--output", str(tmp_path / "c.json"),
                     "--report", str(tmp_path / "c.md")])
    except SystemExit as exc:    # an option out of its range: argparse's one-line usage error
        code = exc.code
    assert code != 0
    assert message in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()


def _square(x):
    if x < 0:
        raise ValueError(f"negative {x}")
    return f"k{x}", {"value": x * x}


@pytest.mark.parametrize("jobs", [1, 2])
def test_run_tasks_yields_every_result_or_its_exception(jobs):
    """`fred characterize --jobs N`: every task's result (or exception) comes back exactly once,
    tagged with its index, whatever the order the workers finish in."""
    from fred.commands.characterize import _run_tasks
    tasks = [(f"t{x}", None, "timing", _square, (x,)) for x in (3, -1, 5, 2)]
    lines = []
    out = dict(_run_tasks(tasks, jobs, lines.append))
    assert sorted(out) == [0, 1, 2, 3]
    assert out[0] == ("k3", {"value": 9}) and out[2] == ("k5", {"value": 25})
    assert isinstance(out[1], ValueError) and "negative -1" in str(out[1])
    assert len(lines) == 4   # progress: one line per finished task
    if jobs > 1:
        assert sum("FAILED" in line for line in lines) == 1


def _slow(path):
    import time
    time.sleep(1.0)
    Path(path).touch()
    return Path(path).name, {}


def test_run_tasks_stops_starting_points_when_the_caller_stops(tmp_path):
    """Without --keep-going the first failure ends the run: points not yet started are
    dropped rather than measured first (a grid takes tens of minutes)."""
    from fred.commands.characterize import _run_tasks
    tasks = [("fail", None, "timing", _square, (-1,))] + \
            [(f"s{k}", None, "timing", _slow, (str(tmp_path / f"ran{k}"),)) for k in range(12)]
    results = _run_tasks(tasks, 2, lambda *a: None)
    index, outcome = next(results)
    assert index == 0 and isinstance(outcome, ValueError)
    results.close()   # what the caller's `raise` does to the generator
    # the 2 running points and the executor's few pre-queued calls may still finish; the rest
    # (at least half) must never start
    ran = len(list(tmp_path.glob("ran*")))
    assert ran <= 6, f"{ran} of 12 points still ran after the failure"


def test_place_and_route_timeout_keeps_the_synthesis_figures(monkeypatch, tmp_path):
    """A nextpnr run over --pnr-timeout is recorded (Fmax None, the reason in fmax_note), not
    fatal, and the yosys figures survive."""
    from studies.characterization import cost
    from eda.synth import ToolTimeout

    def run_tool(command, log, *, timeout=None):
        if command[0] == "nextpnr":
            raise ToolTimeout(f"nextpnr exceeded {timeout:.0f} s (see {log})")

    monkeypatch.setattr(cost, "find_tool", lambda name: "nextpnr" if "nextpnr" in name else "yosys")
    monkeypatch.setattr(cost, "run_tool", run_tool)
    monkeypatch.setattr(cost, "cell_counts", lambda path, top: {"LUT4": 10, "CCU2C": 2, "TRELLIS_FF": 7})
    design = next(d for d in cost.cost_designs((4,), (2,)) if d["name"] == "input_microswitch_m2")
    record = cost.measure_cost(design, folder=tmp_path, pnr=True, pnr_timeout=5, log=lambda *a: None)
    assert record["fmax_mhz"] is None
    assert record["fmax_note"].startswith("place and route did not finish: nextpnr exceeded 5 s")
    assert (record["lut_equivalent"], record["ff"]) == (14, 7)


def test_cli_rejects_zero_jobs(capsys, tmp_path):
    from fred.cli import main
    code = main(["characterize", "--jobs", "0", "--cache", str(tmp_path), "--output", str(tmp_path / "c.json"),
                 "--report", str(tmp_path / "c.md")])
    assert code != 0 and "--jobs must be >= 1" in capsys.readouterr().err


@pytest.mark.parametrize("ports", list(range(3, 17)))
def test_every_traffic_class_is_a_legal_flow_set_the_compiler_routes(ports):
    """The bench's classes on any P >= 3, the chiplets' 10 and 12 included: flows of one class
    use disjoint ports (mix3d once overlapped on port 5 at P = 10) and route at m = 3."""
    from cocotb_tests.bench_characterize import traffic_classes
    from hdl.compiler import route
    for name, flows in traffic_classes(ports).items():
        inputs = [p for f in flows for p in f.inputs]
        outputs = [p for f in flows for p in f.outputs]
        assert len(inputs) == len(set(inputs)) and len(outputs) == len(set(outputs)), (ports, name)
        assert route(ports=ports, middle=3, flows=flows, seed=1).phases, (ports, name)


@pytest.mark.cocotb
@pytest.mark.full
def test_chiplet_point_end_to_end():
    """Fred_3(10) fp16 (the L2 chiplet: odd sub-levels with demux and mux), short packets:
    latency = the property at every class, configuration load = words + 1, select copy =
    words + 2 (about 1.5 min)."""
    from studies.characterization.timing import measure_point
    point = measure_point(10, 3, "fp16", length=16, log=lambda *a: None)
    assert point["latency_property"] == 35 and point["config_words"] == 14
    for r in point["segments"]:
        if r["backpressure"] == 0:
            assert r["first_flit_latency_min"] == r["first_flit_latency_max"] == 35, r
            assert r["throughput_min"] == 1.0, r
        assert r["config_load"] == 15
    assert all(r["select_copy"] == 16 for r in point["segments"][1:] if r["drain_backpressure"] == 0)


def test_place_and_route_seeds_give_the_median_and_its_critical_path(monkeypatch, tmp_path):
    """--pnr-seeds: one nextpnr run per seed; Fmax is the median seed's, and the record keeps
    every seed's figure and the median run's clocked critical path (async paths ignored)."""
    from studies.characterization import cost
    achieved = {"1": 90.0, "2": 80.0, "3": 100.0}

    def run_tool(command, log, *, timeout=None):
        if command[0] == "nextpnr":
            seed = command[command.index("--seed") + 1]
            path = [{"type": "clk-to-q", "delay": 0.5, "from": {"cell": f"start{seed}"}, "to": {"cell": "a"}},
                    {"type": "routing", "delay": 7.0, "net": "fork.taken", "from": {"cell": "a"}, "to": {"cell": "b"}},
                    {"type": "logic", "delay": 1.5, "from": {"cell": "b"}, "to": {"cell": "end"}}]
            report = {"fmax": {"$glbnet$clk": {"achieved": achieved[seed]}},
                      "critical_paths": [{"from": "<async>", "to": "clk", "path": [dict(path[1], delay=99.0)]},
                                         {"from": "clk", "to": "clk", "path": path}]}
            (log.parent / f"report_seed{seed}.json").write_text(json.dumps(report))

    monkeypatch.setattr(cost, "find_tool", lambda name: "nextpnr" if "nextpnr" in name else "yosys")
    monkeypatch.setattr(cost, "run_tool", run_tool)
    monkeypatch.setattr(cost, "cell_counts", lambda path, top: {"LUT4": 10, "CCU2C": 2, "TRELLIS_FF": 7})
    design = next(d for d in cost.cost_designs((4,), (2,)) if d["name"] == "output_microswitch_m2")
    record = cost.measure_cost(design, folder=tmp_path, pnr=True, seeds=(1, 2, 3), log=lambda *a: None)
    assert record["fmax_mhz"] == 90.0 and record["fmax_seeds"] == achieved
    path = record["critical_path"]
    assert path["from"] == "start1" and path["to"] == "end" and path["nets"] == ["fork.taken"]
    assert (path["ns"], path["logic_ns"], path["routing_ns"]) == (9.0, 1.5, 7.0)
