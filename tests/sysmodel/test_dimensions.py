"""The cluster platform file: validated by the input schema, errors naming the file and the
dimension (docs/cluster.md, "Platform file")."""

from __future__ import annotations

import pytest

from hdl.contracts.errors import FredError
from sysmodel.dimensions import load_cluster
from sysmodel.platform import load_platform

BASE = """
name = "t"
npus = 80
[[dimensions]]
name = "wafer"
kind = "fred"
size = 20
fabric = "fred-d"
[[dimensions]]
name = "out"
kind = "ring"
size = 4
bandwidth_gbps = 100.0
latency_ns = 500.0
"""


def _load(tmp_path, text):
    path = tmp_path / "c.toml"
    path.write_text(text)
    return load_cluster(path)


def test_a_valid_cluster(tmp_path):
    c = _load(tmp_path, BASE)
    wafer, out = c.dimensions
    assert (wafer.kind, wafer.size, wafer.bandwidth_gbps, wafer.in_network) == ("fred", 20, 3000.0, True)
    assert (out.kind, out.size, out.bandwidth_gbps, out.latency_ns, out.in_network) == ("ring", 4, 100.0, 500.0, False)


@pytest.mark.parametrize("change, message", [
    (("npus = 80", "npus = 100"), r"the dimensions' sizes 20 x 4 = 80 NPUs, but npus is 100"),
    (("bandwidth_gbps = 100.0", "bandwidth_gbps = 0.0"), r"\[dimensions\[1\] \(out\)\] bandwidth_gbps: expected a number > 0, got 0\.0"),
    (("latency_ns = 500.0", "latency_ns = 500.0\nspeed = 3"), r"unknown key \(expected one of: .*bandwidth_gbps"),
    (('kind = "ring"', 'kind = "torus"'), r"kind: expected one of 'ring', 'fully-connected', 'switch', 'fred', 'mesh', 'optical-ring', got 'torus'"),
    (('fabric = "fred-d"', 'fabric = "fred-d"\nbandwidth_gbps = 5.0'), r"takes bandwidth_gbps from its wafer platform"),
    (('fabric = "fred-d"', 'fabric = "fred-x"'), r"dimension 'wafer': fabric 'fred-x' is not defined"),
    (("size = 20", "size = 10"), r"sizes 10 x 4 = 40 NPUs"),
    (('latency_ns = 500.0', 'latency_ns = 500.0\nin_network = true'), r"in_network applies to switch dimensions"),
    (('bandwidth_gbps = 100.0\n', ''), r"a ring dimension needs bandwidth_gbps"),
    (('name = "out"', 'name = "wafer"'), r"dimension names must be distinct"),
])
def test_errors_name_what_is_wrong(tmp_path, change, message):
    with pytest.raises(FredError, match=message):
        _load(tmp_path, BASE.replace(*change))


def test_wafer_size_must_match_its_platform(tmp_path):
    text = BASE.replace("npus = 80", "npus = 40").replace("size = 20", "size = 10")
    with pytest.raises(FredError, match="size 10 but its wafer 'fred-paper' has 20 NPUs"):
        _load(tmp_path, text)


def test_a_wafer_platform_is_not_a_cluster_and_back(tmp_path):
    (tmp_path / "w.toml").write_text('name = "w"\n[npu]\ncount = 1\n')
    with pytest.raises(FredError, match=r"not a cluster platform \(it lists no \[\[dimensions\]\]\)"):
        load_cluster(tmp_path / "w.toml")
    (tmp_path / "c.toml").write_text(BASE)
    with pytest.raises(FredError, match=r"is a cluster platform"):
        load_platform(tmp_path / "c.toml")
