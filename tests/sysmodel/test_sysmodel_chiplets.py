"""Each wafer level timed by the chiplet that builds it (``[fred.chiplets]``, docs/sysmodel.md
"Chiplets"): a synthetic characterization with distinct L1 and L2 chiplets gives exactly the
hand-computed collective time; a characterization without a needed chiplet is a clear error."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from hdl.contracts.errors import FredError
from sysmodel.collectives import Collective, build_network, evaluate
from sysmodel.platform import default_platform, load_platform
from sysmodel.switch_timing import SCHEMA_ID, load_chiplet_timings

PAPER = resources.files("sysmodel").joinpath("configs", "paper.toml").read_text()
#: distinct on purpose: every field of L1 differs from L2's, so a mix-up cannot cancel out
L1 = {"clock_mhz": 1000.0, "flit_bytes": 512, "first_flit_latency_cycles": 100.0,
      "throughput_flits_per_cycle_per_port": 1.0, "phase_switch_cycles": 7.0, "config_load_cycles": 11.0}
L2 = {"clock_mhz": 500.0, "flit_bytes": 512, "first_flit_latency_cycles": 1000.0,
      "throughput_flits_per_cycle_per_port": 0.5, "phase_switch_cycles": 300.0, "config_load_cycles": 50.0}
#: the file's `switch` block: what a platform naming no chiplets would use (never, here)
OTHER = dict(L1, first_flit_latency_cycles=1.0, phase_switch_cycles=1.0, config_load_cycles=1.0)


def _characterization(tmp_path, points):
    doc = {"schema": SCHEMA_ID, "switch": OTHER, "switches": {
        f"P{p}m3fp16": {"point": {"ports": p, "middle": 3, "dtype": "fp16"}, "switch": s}
        for p, s in points.items()}}
    path = tmp_path / "characterization.json"
    path.write_text(json.dumps(doc))
    return path


def _platform(tmp_path, points, toml=PAPER):
    (tmp_path / "platform.toml").write_text(toml)
    return load_platform(tmp_path / "platform.toml", characterization=_characterization(tmp_path, points))


def test_the_paper_platform_times_l1_and_l2_by_their_chiplets():
    """paper.toml: L1 = Fred_3(12), L2 = Fred_3(10), fp16; the shipped file's points."""
    p = default_platform()
    assert p.chiplets == {"l1": {"ports": 12, "middle": 3, "dtype": "fp16"},
                          "l2": {"ports": 10, "middle": 3, "dtype": "fp16"}}
    assert p.switch_at("l1").design == "Fred_3(12) fp16" and p.switch is p.switch_at("l1")
    assert p.switch_at("l2").design == "Fred_3(10) fp16"
    shipped = load_chiplet_timings(p.chiplets)
    assert p.switch_at("l1") == shipped["l1"] and p.switch_at("l2") == shipped["l2"]
    with pytest.raises(FredError, match="level 'l3'"):
        p.switch_at("l3")


def test_in_switch_all_reduce_over_two_levels_exactly(tmp_path):
    """Wafer-wide in-switch all-reduce on Fred-B: up NPU -> L1 -> L2, down L2 -> L1 -> NPU.
    Latency = 4 links + 2 L1 traversals + 1 L2 traversal (each at its own chiplet's latency
    and clock); the selects start with the collective (no copy figure: the whole phase
    switch), so the L2's (300 cycles at 500 MHz) delays the flits by what is left of it when
    they reach it (link + L1 + link); the
    L1-L2 links run at the lower of the two ports' throughput (0.5) of 1.5 TBps and are the
    bottleneck; configuration load = the slowest switch's one stored phase (L2: 50 cycles at
    500 MHz)."""
    p = _platform(tmp_path, {12: L1, 10: L2})
    size = 1e6
    wire = 1954 * 512                                  # 1e6 B -> 1953.1 flits -> 1954 whole flits
    link = 20e-9                                       # paper.toml link latency
    l1_latency, l2_latency = 100 / 1000e6, 1000 / 500e6
    expected = (wire / (1500e9 * 0.5)                  # the L1-L2 link at half rate
                + 4 * link + 2 * l1_latency + l2_latency
                + 300 / 500e6 - (2 * link + l1_latency))  # what is left of L2's select (L1's: 7 ns < 20)
    r = evaluate(p, "fred-b", [Collective("all-reduce", tuple(range(20)), size)])
    assert r.phases == 1
    assert r.time_s == pytest.approx(expected, rel=1e-12)
    assert r.config_load_s == pytest.approx(50 / 500e6, rel=1e-12)
    # within one L1 only the L1 chiplet is used: its latency and load; its 7 ns select is over
    # before the first flit crosses the 20 ns link
    one = evaluate(p, "fred-d", [Collective("all-reduce", (0, 1, 2, 3), size)])
    assert one.time_s == pytest.approx(wire / 3000e9 + 2 * link + l1_latency, rel=1e-12)
    assert one.config_load_s == pytest.approx(11 / 1000e6, rel=1e-12)


def test_swapping_the_chiplets_swaps_the_levels_timing(tmp_path):
    toml = PAPER.replace('l1 = { ports = 12, middle = 3, dtype = "fp16" }', 'l1 = { ports = 10, middle = 3, dtype = "fp16" }') \
                .replace('l2 = { ports = 10, middle = 3, dtype = "fp16" }', 'l2 = { ports = 12, middle = 3, dtype = "fp16" }')
    assert toml != PAPER
    p = _platform(tmp_path, {12: L1, 10: L2}, toml)
    assert p.switch_at("l1").first_flit_latency_cycles == 1000.0
    assert p.switch_at("l2").first_flit_latency_cycles == 100.0
    net = build_network(p, "fred-d")
    assert net.node_latency[net.l1_nodes[0]] == pytest.approx(2e-6)
    assert net.node_latency[net.l2_node] == pytest.approx(1e-7)


def test_a_characterization_without_a_needed_chiplet_is_an_error(tmp_path):
    with pytest.raises(FredError, match=r"no measured Fred_3\(10\) fp16 \(the L2 chiplet of .*platform.toml; "
                                        r"measured points: P12m3fp16\)\. Measure it with `fred characterize --ports 10"):
        _platform(tmp_path, {12: L1})


def test_chiplets_are_validated(tmp_path):
    bad = PAPER.replace('l2 = { ports = 10, middle = 3, dtype = "fp16" }', 'l2 = { ports = 1, middle = 3, dtype = "fp16" }')
    with pytest.raises(FredError, match=r"platform\.toml: \[fred\.chiplets\.l2\] ports: expected an integer >= 2, got 1"):
        _platform(tmp_path, {12: L1, 10: L2}, bad)
    bad = PAPER.replace('l2 = { ports = 10, middle = 3, dtype = "fp16" }\n', '')
    with pytest.raises(FredError, match=r"platform\.toml: \[fred\.chiplets\] l2: missing"):
        _platform(tmp_path, {12: L1, 10: L2}, bad)
    flits = dict(L2, flit_bytes=256)
    with pytest.raises(FredError, match="disagree on flit_bytes"):
        _platform(tmp_path, {12: L1, 10: flits})


def test_flows_are_routed_on_the_chiplet_and_must_fit_it(tmp_path):
    """An L1 has 4 NPUs + the L2 + 4 I/O controllers = 9 neighbours: routed on Fred_3(12);
    on a 4-port chiplet it does not fit, and an in-switch collective says so."""
    p = _platform(tmp_path, {12: L1, 10: L2})
    net = build_network(p, "fred-d")
    assert net.routing_switch(net.l1_nodes[0], 9) == (12, 3)
    assert net.routing_switch(net.l2_node, 5) == (10, 3)
    small = PAPER.replace('l1 = { ports = 12, middle = 3, dtype = "fp16" }', 'l1 = { ports = 4, middle = 3, dtype = "fp16" }')
    tiny = _platform(tmp_path, {4: L1, 10: L2}, small)
    with pytest.raises(FredError, match=r"L1 switch of fred-paper has 9 neighbours but its chiplet Fred_3\(4\) has 4 ports"):
        evaluate(tiny, "fred-d", [Collective("all-reduce", (0, 1, 2, 3), 1e6)])
