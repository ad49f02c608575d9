"""The fabric cost model and the design-space exploration (docs/dse.md), step by step, with cases
computed by hand from configs/cost.toml and the characterization."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from hdl.contracts.errors import FredError
from studies.cost import (FabricDesign, chiplet_layout, design_switch_timing, fabric_cost,
                           load_cost_model, switch_ports)
from studies.dse import DSE_FABRIC, DseGrid, design_platform, dse_point, dse_specs, pareto_front, summarise
from sysmodel.platform import default_platform
from studies.points import platform_ref
from sysmodel.training import simulate_iteration
from sysmodel.workload_file import get_workload

P = default_platform()
COST = load_cost_model()
FRED_D = COST.reference


def test_switch_ports_of_the_papers_fred_d_by_hand():
    """4 NPUs + 4 or 3 I/O controllers (18 round-robin over 5 L1s) + 12 TBps / 3 TBps = 4
    uplink ports per L1; the L2 has 5 x 4 ports."""
    sw = switch_ports(FRED_D, P)
    assert [s["ports"] for s in sw] == [12, 12, 12, 11, 11, 20]
    assert sw[0]["gbps"] == 4 * 3000 + 4 * 128 + 12000
    assert sw[3]["gbps"] == 4 * 3000 + 3 * 128 + 12000
    assert sw[-1]["gbps"] == 5 * 12000
    one = switch_ports(FabricDesign(20, 1.0, True, 3, 16, 18), P)
    assert one == [{"switch": "l1.0", "ports": 38, "gbps": 20 * 3000 + 18 * 128}]   # no L2


def test_chiplet_layout_by_hand():
    assert chiplet_layout(12, 16) == (1, 1, 1)          # fits one chiplet
    assert chiplet_layout(20, 16) == (3 + 2, 3, 3)      # 20/8 leaves up, 20/16 spines up
    assert chiplet_layout(12, 8) == (3 + 2, 3, 3)       # 12/4 leaves, 12/8 spines, both up


def test_reference_design_costs_the_papers_totals_and_others_scale():
    ref = fabric_cost(FRED_D, P, COST)
    assert ref["area_mm2"] == pytest.approx(COST.paper_total_mm2, rel=1e-12)
    assert ref["power_w"] == pytest.approx(COST.paper_total_w, rel=1e-12)
    assert ref["logic_mm2"] < 0.05 * ref["area_mm2"]    # the paper: logic < 5 % of the area
    # shoreline by hand: L1s 3 x 24512 + 2 x 24384 GBps once each, the L2 (a Clos: x3)
    port_gbps = 3 * 24512 + 2 * 24384 + 3 * 60000
    assert ref["shoreline_mm"] == pytest.approx(2 * port_gbps / 107.4, rel=1e-12)
    thin = fabric_cost(replace(FRED_D, l1_l2_fraction=0.125), P, COST)
    assert thin["area_mm2"] < ref["area_mm2"] and thin["io_depth_mm"] == pytest.approx(ref["io_depth_mm"])
    # power proportional to chiplet-port bandwidth: L2 of 5 x 1500 GBps fits one chiplet
    thin_gbps = 5 * 1500 + 3 * (4 * 3000 + 4 * 128 + 1500) + 2 * (4 * 3000 + 3 * 128 + 1500)
    assert thin["power_w"] == pytest.approx(COST.paper_total_w * thin_gbps / port_gbps, rel=1e-12)
    assert fabric_cost(replace(FRED_D, middle=2), P, COST)["logic_mm2"] < ref["logic_mm2"]


def test_design_switch_timing_is_the_measured_summary_times_the_chiplets_crossed():
    char = json.loads(open(P.switch.source).read())
    s = next(x for x in char["summaries"] if (x["ports"], x["middle"], x["dtype"]) == (8, 2, "fp16"))
    t = design_switch_timing(replace(FRED_D, chiplet_ports=8, middle=2), P)
    assert t.first_flit_latency_cycles == 3 * s["first_flit_latency_cycles"]     # L2 of 20 ports: a Clos
    assert (t.phase_switch_cycles, t.config_load_cycles) == (s["phase_switch_cycles"], s["config_load_cycles"])
    small = design_switch_timing(FabricDesign(4, 0.125, True, 2, 16, 18), P)       # every switch fits
    s16 = next(x for x in char["summaries"] if (x["ports"], x["middle"], x["dtype"]) == (16, 2, "fp16"))
    assert small.first_flit_latency_cycles == s16["first_flit_latency_cycles"]
    with pytest.raises(FredError, match="no measured summary of Fred_3\\(32\\)"):
        design_switch_timing(replace(FRED_D, chiplet_ports=32), P)


def test_a_design_without_in_switch_collectives_leaves_its_phase_figures_unset():
    """Without in-switch collectives (and with the paper's online unicast routing) a design's
    switches store no phase: its timing has no phase switch, configuration load or select copy
    (None) and its source names the chiplet without m, so Fred_2(P) and Fred_3(P) -- whose
    first-flit latency and throughput the shipped characterization gives equal -- are one
    platform value. With in-switch collectives, or switches that configure unicasts, the
    figures stay and the platforms differ."""
    off = [replace(FRED_D, in_switch=False, middle=m) for m in (2, 3)]
    t2, t3 = (design_switch_timing(d, P) for d in off)
    assert (t2.phase_switch_cycles, t2.config_load_cycles, t2.select_copy_cycles) == (None, None, None)
    assert "Fred_m(16)" in t2.source and "Fred_2" not in t2.source
    assert t2 == t3 and design_platform(P, off[0]) == design_platform(P, off[1])
    on = [replace(FRED_D, middle=m) for m in (2, 3)]
    assert design_switch_timing(on[0], P).phase_switch_cycles is not None
    assert design_platform(P, on[0]) != design_platform(P, on[1])
    configured = replace(P, unicast_routing="configured")
    assert design_switch_timing(off[0], configured).phase_switch_cycles is not None
    # reading a phase figure of the unset timing is an error that names it
    for figure in ("phase_switch_s", "phase_select_s", "config_load_s"):
        with pytest.raises(FredError, match="no (phase_switch|config_load)_cycles"):
            getattr(t2, figure)
    assert replace(t2, select_copy_cycles=4.0).phase_select_s == 4.0 * t2.cycle_s


@pytest.mark.parametrize("workload", ["transformer-17b", "gpt-3"])
def test_leaving_the_phase_figures_unset_changes_no_iteration(workload):
    """The iterations of a design without in-switch collectives on its platform (phase figures
    unset) equal, bit for bit, those on the same platform with its chiplet's measured phase
    figures, for each m and strategy kind (MP, DP, PP, I/O streaming): nothing read them."""
    from hdl.contracts.placement import parse_strategy
    from sysmodel.model_cache import ModelCache, using
    char = json.loads(open(P.switch.source).read())
    w = get_workload(workload)
    for m in (2, 3):
        design = FabricDesign(4, 0.25, False, m, 16, 18)
        unset = design_platform(P, design)
        s = next(x for x in char["summaries"] if (x["ports"], x["middle"], x["dtype"]) == (16, m, "fp16"))
        measured = replace(unset, switch=replace(unset.switch, phase_switch_cycles=float(s["phase_switch_cycles"]),
                                                 config_load_cycles=float(s["config_load_cycles"])))
        for strategy in ("MP4-DP5-PP1", "MP1-DP5-PP4", "MP2-DP2-PP5"):
            with using(ModelCache()):
                a = simulate_iteration(unset, DSE_FABRIC, w, parse_strategy(strategy), samples_per_dp=8)
            with using(ModelCache()):
                b = simulate_iteration(measured, DSE_FABRIC, w, parse_strategy(strategy), samples_per_dp=8)
            assert (a.time_s, a.breakdown, a.comm_busy) == (b.time_s, b.breakdown, b.comm_busy), (m, strategy)


def test_design_platform_builds_the_papers_fred_d_network():
    """With the platform's own switch timings (its L1 and L2 chiplets), the design platform of
    Fred-D's parameters runs the same iteration as the paper platform's fred-d (the mesh it
    drops plays no part)."""
    dp = replace(design_platform(P, FRED_D), switch=P.switch, l2_switch=P.l2_switch)
    w = get_workload("transformer-17b")
    assert simulate_iteration(dp, DSE_FABRIC, w).time_s == simulate_iteration(P, "fred-d", w).time_s


def test_pareto_front_by_hand():
    items = [{"n": "a", "time_per_sample_s": 1.0, "area_mm2": 10}, {"n": "b", "time_per_sample_s": 2.0, "area_mm2": 5},
             {"n": "c", "time_per_sample_s": 3.0, "area_mm2": 6}, {"n": "d", "time_per_sample_s": 0.5, "area_mm2": 20},
             {"n": "e", "time_per_sample_s": 2.0, "area_mm2": 5.5}]
    assert [i["n"] for i in pareto_front(items)] == ["b", "a", "d"]


def test_summary_finds_the_cheapest_design_within_five_percent():
    designs = [FRED_D, replace(FRED_D, l1_l2_fraction=0.125), replace(FRED_D, l1_l2_fraction=0.25)]
    times = {designs[0].name: 1.00, designs[1].name: 1.06, designs[2].name: 1.04}
    rows = [{"design": d.name, "strategy": "MP1-DP20-PP1", "feasible": True, "time_per_sample_s": times[d.name],
             "time_s": times[d.name] * 800, "exposed_comm_s": 0.0} for d in designs]
    s = summarise(rows, designs, P, COST).reference
    assert s.cheapest_within == designs[2].name      # 1.06 is outside 5 %, 1.04 inside
    assert s.area_saving == pytest.approx(1 - fabric_cost(designs[2], P, COST)["area_mm2"] / COST.paper_total_mm2)


def test_grid_designs_drop_the_meaningless_uplink_of_one_l1_and_add_the_reference():
    g = DseGrid(npus_per_l1=(4, 20), l1_l2_fraction=(0.5, 1.0), in_switch=(True,), middle=(2,),
                chiplet_ports=(16,), io_controllers=(18,))
    names = [d.name for d in g.designs(P, FRED_D)]
    assert len(names) == 2 + 1 + 1 and names[-1] == FRED_D.name
    assert sum(n.startswith("L1x20") for n in names) == 1


def test_dse_point_is_the_sweep_row_on_the_design_platform():
    from studies.evaluation import strategy_row
    from hdl.contracts.placement import parse_strategy
    spec = dse_specs("resnet-152", platform_ref(), [FRED_D], samples_per_dp=16, overlap=True,
                     strategies=["MP1-DP20-PP1"])[0]
    row = dse_point(spec)
    direct = strategy_row(design_platform(P, FRED_D), DSE_FABRIC, get_workload("resnet-152"),
                          parse_strategy("MP1-DP20-PP1"), 16)
    assert row["time_s"] == direct["time_s"] and row["design"] == FRED_D.name and math.isfinite(row["time_s"])


def test_bad_cost_files_and_designs_are_named(tmp_path):
    from importlib import resources
    text = resources.files("sysmodel").joinpath("configs", "cost.toml").read_text()
    bad = tmp_path / "cost.toml"
    bad.write_text(text.replace("nand2_um2 = 0.1966", "nand2_um = 0.1966"))
    with pytest.raises(FredError, match=r"cost\.toml: \[logic\] nand2_um: unknown key"):
        load_cost_model(bad)
    bad.write_text(text.replace("shoreline_gbps_per_mm = 107.4", "shoreline_gbps_per_mm = -1"))
    with pytest.raises(FredError, match=r"cost\.toml: \[io\] shoreline_gbps_per_mm: expected a number > 0, got -1"):
        load_cost_model(bad)
    with pytest.raises(FredError, match="chiplet_ports must be a power of two"):
        FabricDesign(4, 1.0, True, 3, 12, 18)
    with pytest.raises(FredError, match="l1_l2_fraction"):
        FabricDesign(4, 0.0, True, 3, 16, 18)


def test_cli_dse_small_grid_json_and_errors(tmp_path):
    import subprocess
    import sys
    base = [sys.executable, "-m", "fred", "dse", "--workload", "resnet-152", "--npus-per-l1", "4",
            "--l1-l2-fraction", "0.125,1", "--in-switch", "on", "--middle", "3", "--chiplet-ports", "16",
            "--strategies", "MP1-DP20-PP1"]
    proc = subprocess.run([*base, "-o", str(tmp_path), "--cache", str(tmp_path / "c.jsonl"), "--json"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["resnet-152"]
    assert out["points"] == 2 and out["failed"] == [] and out["finding"]["reference"] == FRED_D.name
    assert [e["design"] for e in out["pareto"]][-1] == FRED_D.name or len(out["pareto"]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "c.jsonl", "dse_resnet-152.json", "dse_resnet-152_designs.csv", "dse_resnet-152_pareto.png",
        "dse_resnet-152_points.csv"]
    again = json.loads(subprocess.run([*base, "--no-files", "--cache", str(tmp_path / "c.jsonl"), "--json"],
                                      capture_output=True, text=True).stdout)["resnet-152"]
    assert again["cached"] == 2 and again["finding"] == out["finding"]
    bad = subprocess.run([*base[:-2], "--in-switch", "maybe"], capture_output=True, text=True)
    assert bad.returncode == 2 and "expected on/off" in bad.stderr
    bad = subprocess.run([sys.executable, "-m", "fred", "dse", "--workload", "bert", "--no-files"],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "unknown workload 'bert'" in bad.stderr


def test_a_designs_chiplet_times_both_levels():
    """A design is built from one chiplet size: its timing serves L1 and L2 alike, whatever
    chiplets the base platform's levels were timed by."""
    assert P.switch_at("l1") != P.switch_at("l2")    # the shipped platform: Fred_3(12) and Fred_3(10)
    dp = design_platform(P, FRED_D)
    assert dp.switch_at("l1") == dp.switch_at("l2") == dp.switch


def test_logic_is_one_port_share_of_the_switch_per_copy_of_the_ports_datapath():
    """Fred-D by hand: a copy of a port's datapath moves 4 fp16 lanes = 8 GBps at 1 GHz, so the
    302,304 GBps of chiplet ports need 302,304 / 8 copies, each Fred_3(16)'s GE / 16 (all four
    lanes of one port), in standard-cell GE, at the 15 nm NAND2 area over the utilisation."""
    from studies.cost import _characterization, _switch_cells
    char = _characterization(P)
    ge, lanes, _ = _switch_cells(char.document, 16, 3, COST, char.source)
    assert lanes == 4
    port_gbps = 3 * 24512 + 2 * 24384 + 3 * 60000
    copies = port_gbps / (lanes * 2 * P.switch.clock_mhz / 1000)
    expected = copies * ge * COST.asic_per_generic_ge / 16 * COST.nand2_um2 * 1e-6 / COST.utilization
    assert fabric_cost(FRED_D, P, COST)["logic_mm2"] == pytest.approx(expected, rel=1e-12)


def test_an_in_switch_design_with_more_neighbours_than_the_papers_chiplet_is_feasible():
    """A design's own chiplet builds its switches (a logical switch larger than the chiplet is
    a Clos of chiplets, composed in its timing): the base platform's [fred.chiplets], the
    paper's 12-port L1 chiplet, must not refuse a 20-NPU L1 (38 neighbours with the I/O)."""
    one_l1 = replace(FRED_D, npus_per_l1=20, l1_l2_fraction=1.0, in_switch=True, chiplet_ports=16)
    assert P.chiplets and not design_platform(P, one_l1).chiplets
    spec = dse_specs("resnet-152", platform_ref(), [one_l1], samples_per_dp=16, overlap=True,
                     strategies=["MP1-DP20-PP1"])[0]
    row = dse_point(spec)
    assert row["feasible"] and math.isfinite(row["time_s"]), row.get("notes")


def test_designs_of_the_same_area_but_for_rounding_tie_and_the_faster_is_the_cheapest():
    thin = replace(FRED_D, l1_l2_fraction=0.125, middle=2)
    two, five = replace(thin, npus_per_l1=2), replace(thin, npus_per_l1=5)
    areas = [fabric_cost(d, P, COST)["area_mm2"] for d in (two, five)]
    assert areas[0] == pytest.approx(areas[1], rel=1e-9)   # the same silicon, grouped otherwise
    designs = [FRED_D, two, five]
    times = {FRED_D.name: 1.00, two.name: 1.04, five.name: 1.01}
    rows = [{"design": d.name, "strategy": "MP1-DP20-PP1", "feasible": True, "time_per_sample_s": times[d.name],
             "time_s": times[d.name] * 800, "exposed_comm_s": 0.0} for d in designs]
    assert summarise(rows, designs, P, COST).reference.cheapest_within == five.name


def test_the_characterization_is_read_once_while_unchanged_on_disk(tmp_path):
    """A sweep asks for the characterization once per design: it is read once, and read again
    when the file changes (its cost figures with it)."""
    from studies.cost import _characterization
    from sysmodel.model_cache import ModelCache, using
    path = tmp_path / "characterization.json"
    path.write_text(open(P.switch.source).read())
    platform = replace(P, switch=replace(P.switch, source=str(path)))
    with using(ModelCache()):
        first = _characterization(platform)
        assert _characterization(platform) is first
        doc = json.loads(path.read_text())
        doc["summaries"] = doc["summaries"][:1]
        path.write_text(json.dumps(doc))
        again = _characterization(platform)
        assert again is not first and len(again.document["summaries"]) == 1
