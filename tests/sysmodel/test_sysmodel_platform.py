"""Platform TOML and switch-timing loading/validation: measured timing, never assumed."""

import json
from pathlib import Path

import pytest

from hdl.contracts.errors import FredError
from sysmodel.platform import load_platform, default_platform
from sysmodel.switch_timing import SCHEMA_ID, load_switch_timing


def test_default_platform_is_the_papers():
    p = default_platform()
    assert (p.npus, p.mesh_rows, p.mesh_cols, p.mesh_link_gbps) == (20, 5, 4, 750.0)
    assert (p.io_controllers, p.io_gbps, p.npu_send_gbps) == (18, 128.0, 3000.0)
    assert p.l1_count == 5
    assert p.variant("fred-a").l1_l2_gbps == 1500 and not p.variant("fred-a").in_switch
    assert p.variant("fred-d").l1_l2_gbps == 12000 and p.variant("fred-d").in_switch
    # bisection of the mesh: 5 links of 750 across the long cut = 3.75 TBps
    assert p.mesh_rows * p.mesh_link_gbps == 3750


def _write(tmp_path, text):
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


def test_platform_errors_name_the_key(tmp_path):
    from importlib import resources
    base = resources.files("sysmodel").joinpath("configs", "paper.toml").read_text()
    with pytest.raises(FredError, match=r"p\.toml: \[mesh\] colums: unknown key \(expected one of: cols, flit_bytes, link_gbps, rows\)"):
        load_platform(_write(tmp_path, base.replace("cols = 4", "colums = 4")))
    with pytest.raises(FredError, match="mesh 5x3 has 15 NPUs but npu.count is 20"):
        load_platform(_write(tmp_path, base.replace("cols = 4", "cols = 3")))
    with pytest.raises(FredError, match="compute_efficiency"):
        load_platform(_write(tmp_path, base.replace("compute_efficiency = 0.5", "compute_efficiency = 1.5")))
    with pytest.raises(FredError, match="does not exist"):
        load_platform(tmp_path / "missing.toml")
    with pytest.raises(FredError, match=r"p\.toml: \[training\] dp_overlap: expected true or false, got 'no'"):
        load_platform(_write(tmp_path, base.replace("dp_overlap = false", 'dp_overlap = "no"')))
    with pytest.raises(FredError, match=r"p\.toml: \[training\] dp_bucket_elements: expected a number > 0, got -1"):
        load_platform(_write(tmp_path, base.replace("dp_bucket_elements = 5e8", "dp_bucket_elements = -1")))


def test_forwarding_latency_and_unicast_routing_are_validated(tmp_path):
    from importlib import resources
    base = resources.files("sysmodel").joinpath("configs", "paper.toml").read_text()
    p = default_platform()
    assert p.forward_latency_ns == 0.0 and p.unicast_routing == "online"   # the paper's defaults
    ok = load_platform(_write(tmp_path, base.replace("[npu]\n", "[npu]\nforward_latency_ns = 3.0\n")
                              .replace("[fred]\n", '[fred]\nunicast_routing = "configured"\n')))
    assert ok.forward_latency_ns == 3.0 and ok.unicast_routing == "configured"
    with pytest.raises(FredError, match=r"p\.toml: \[npu\] forward_latency_ns: expected a number >= 0, got -1"):
        load_platform(_write(tmp_path, base.replace("[npu]\n", "[npu]\nforward_latency_ns = -1\n")))
    with pytest.raises(FredError, match=r"p\.toml: \[fred\] unicast_routing: expected one of 'online', 'configured', got 'circuit'"):
        load_platform(_write(tmp_path, base.replace("[fred]\n", '[fred]\nunicast_routing = "circuit"\n')))


def test_zero2_defaults_are_deepspeeds():
    p = default_platform()
    assert p.dp_bucket_elements == 5e8 and p.dp_overlap is False


ROOT = Path(__file__).resolve().parents[2]
CHECKED_IN = ROOT / "data" / "characterization.json"


def test_the_shipped_characterization_is_the_checked_in_file():
    """With no file named, the model reads the characterization shipped with the package,
    which in a source tree is the checked-in data/characterization.json, and says so."""
    timing = load_switch_timing()
    assert timing.shipped and Path(timing.source) == CHECKED_IN.resolve()
    measured = json.loads(CHECKED_IN.read_text())
    for name, value in measured["switch"].items():
        assert getattr(timing, name) == value, name
    made = measured["generated_by"]
    assert timing.generated_by == f"{made['command']} ({made['date']})"
    # the paper platform names its chiplets: each level's timing is its chiplet's point
    from sysmodel.switch_timing import load_chiplet_timings
    levels = load_chiplet_timings(default_platform().chiplets)
    assert default_platform().switch == levels["l1"] and default_platform().switch_at("l2") == levels["l2"]
    assert load_platform().switch == levels["l1"]
    for level, timing in levels.items():
        point = default_platform().chiplets[level]
        entry = measured["switches"][f"P{point['ports']}m{point['middle']}{point['dtype']}"]["switch"]
        assert {name: getattr(timing, name) for name in entry} == entry


def test_a_missing_shipped_characterization_is_an_error(tmp_path, monkeypatch):
    """An installation without its characterization fails loudly instead of assuming
    timings."""
    import sysmodel.switch_timing as switch_timing
    monkeypatch.setattr(switch_timing, "shipped_characterization_path", lambda: tmp_path / "gone.json")
    with pytest.raises(FredError, match=r"shipped with the package is missing .*gone.json.*--characterization"):
        load_switch_timing()
    with pytest.raises(FredError, match="shipped with the package is missing"):
        load_platform()


def test_an_explicit_characterization_is_read_and_validated(tmp_path):
    with pytest.raises(FredError, match="does not exist"):
        load_switch_timing(tmp_path / "none.json")
    doc = {"schema": SCHEMA_ID, "switch": {"clock_mhz": 500, "flit_bytes": 64,
           "first_flit_latency_cycles": 9, "throughput_flits_per_cycle_per_port": 1.0,
           "phase_switch_cycles": 3, "config_load_cycles": 20}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    timing = load_switch_timing(path)
    assert timing.latency_s == pytest.approx(18e-9) and timing.config_load_s == pytest.approx(40e-9)
    assert timing.source == str(path) and not timing.shipped and timing.generated_by == ""
    with pytest.raises(FredError, match=r"no measured Fred_3\(12\) fp16 \(the L1 chiplet"):
        load_platform(characterization=path)   # the paper platform needs its chiplets' points
    path.write_text(json.dumps(_with_chiplets(doc)))
    p = load_platform(characterization=path)
    assert p.switch.first_flit_latency_cycles == 9 and p.switch.flit_bytes == 64
    assert p.switch_at("l2").first_flit_latency_cycles == 9
    doc["switch"]["clock_mhz"] = -1
    path.write_text(json.dumps(doc))
    with pytest.raises(FredError, match="clock_mhz"):
        load_switch_timing(path)
    del doc["switch"]["flit_bytes"]
    path.write_text(json.dumps(doc))
    with pytest.raises(FredError, match=r"c\.json: switch\.flit_bytes: missing"):
        load_switch_timing(path)


def _with_chiplets(doc):
    """``doc`` with its ``switch`` block also measured as the paper's two chiplets."""
    points = {f"P{p}m3fp16": {"point": {"ports": p, "middle": 3, "dtype": "fp16"}, "switch": doc["switch"]}
              for p in (12, 10)}
    return dict(doc, switches=points)


def test_switch_timing_has_no_defaults():
    """Nothing can build a switch timing (or a platform) without saying what it is."""
    from sysmodel.platform import Platform
    from sysmodel.switch_timing import SwitchTiming
    with pytest.raises(TypeError):
        SwitchTiming(source="test")
    fields = {k: getattr(default_platform(), k) for k in Platform.__dataclass_fields__}
    del fields["switch"]
    with pytest.raises(TypeError, match="switch"):
        Platform(**fields)


def test_removed_platform_key_is_refused_with_the_reason(tmp_path):
    from importlib import resources
    base = resources.files("sysmodel").joinpath("configs", "paper.toml").read_text()
    text = base.replace("[training]\n", "[training]\nbytes_per_element = 2\n")
    with pytest.raises(FredError, match="training.bytes_per_element is not a platform parameter: .*FP16"):
        load_platform(_write(tmp_path, text))


def test_measured_switch_throughput_limits_fred(tmp_path):
    """A switch sustaining half a flit per cycle per port halves Fred-D's effective bandwidth."""
    from sysmodel.collectives import Collective, evaluate
    doc = {"schema": SCHEMA_ID, "switch": {"clock_mhz": 1000, "flit_bytes": 512,
           "first_flit_latency_cycles": 12, "throughput_flits_per_cycle_per_port": 0.5,
           "phase_switch_cycles": 8, "config_load_cycles": 16}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(_with_chiplets(doc)))
    slow = load_platform(characterization=path)
    c = [Collective("all-reduce", tuple(range(20)), 1e9)]
    assert evaluate(slow, "fred-d", c).effective_bandwidth_per_npu_gbps == pytest.approx(1500, rel=0.01)
