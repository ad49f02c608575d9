"""The fabric contract (hdl.contracts.fabric): variants as link ratios, switch sizes, requests."""

from fractions import Fraction

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FABRICS, FabricSpec, fabric_spec, make_request


def test_variants_are_the_papers_bandwidth_ratios():
    # NPU link 3 TBps = 1 flit/cycle; A/B 1.5 TBps per L1 = 1/2; C/D 12 TBps = 4
    a, b, c, d = (fabric_spec(n) for n in FABRICS)
    assert (a.uplink_bandwidth, b.uplink_bandwidth) == (Fraction(1, 2), Fraction(1, 2))
    assert (c.uplink_bandwidth, d.uplink_bandwidth) == (4, 4)
    assert [s.in_switch for s in (a, b, c, d)] == [False, True, False, True]
    assert (a.l1_count, a.l1_ports, a.l2_ports) == (5, 5, 5)
    assert (d.l1_count, d.l1_ports, d.l2_ports) == (5, 8, 20)
    assert [d.l1_of(r) for r in (0, 3, 4, 19)] == [0, 0, 1, 4]


@pytest.mark.parametrize("field, value, words", [
    ("uplink_rate", Fraction(3, 2), "uplink_rate"), ("uplink_rate", 0, "uplink_rate"),
    ("npus_per_l1", 3, "do not split"), ("npus_per_l1", 20, "single L1"),
    ("npu_link_latency", 0, "npu_link_latency"), ("dtype", "fp8", "dtype"), ("lanes", True, "lanes")])
def test_bad_fabrics_are_named(field, value, words):
    with pytest.raises(FredError, match=words):
        fabric_spec("fred-d", **{field: value})


def test_unknown_variant():
    with pytest.raises(FredError, match="unknown fabric 'fred-e'"):
        fabric_spec("fred-e")
    with pytest.raises(FredError, match="rank 20"):
        fabric_spec("fred-a").l1_of(20)


def test_wafer_and_strategy_requests():
    spec = fabric_spec("fred-d")
    wafer = make_request(spec, op="all-reduce", group="wafer", size_flits=8)
    assert [c.members for c in wafer.collectives] == [tuple(range(20))]
    mp = make_request(spec, op="all-reduce", strategy="MP2-DP5-PP2", dim="mp", size_flits=8)
    assert [c.members for c in mp.collectives] == [(2 * i, 2 * i + 1) for i in range(10)]
    dp = make_request(spec, op="reduce", strategy="MP2-DP5-PP2", dim="dp", size_flits=8)
    assert dp.collectives[0].members == (0, 4, 8, 12, 16) and dp.collectives[0].root == 0
    pp = make_request(spec, op="multicast", strategy="MP(2)-DP(5)-PP(2)", dim="pp", size_flits=8)
    # MP rank 0 of stage 0 of replica d (rank 4d) to the MP group of stage 1 (4d+2, 4d+3)
    assert [(c.root, c.members) for c in pp.collectives] == [(4 * d, (4 * d + 2, 4 * d + 3)) for d in range(5)]
    mc = make_request(spec, op="multicast", group="wafer", size_flits=1)
    assert mc.collectives[0].root == 0 and mc.collectives[0].members == tuple(range(1, 20))
    assert mc.collectives[0].ranks == tuple(range(20))


@pytest.mark.parametrize("kwargs, words", [
    (dict(op="all-to-all", group="wafer", size_flits=4), "runs all-reduce"),
    (dict(op="all-reduce", group="wafer", size_flits=0), "positive whole number"),
    (dict(op="all-reduce", group="wafer", size_flits=2.5), "positive whole number"),
    (dict(op="all-reduce", size_flits=4), "exactly one"),
    (dict(op="all-reduce", group="half", size_flits=4), "unknown group"),
    (dict(op="all-reduce", strategy="MP2-DP5-PP1", dim="mp", size_flits=4), "10 NPUs"),
    (dict(op="all-reduce", strategy="MP2-DP5-PP2", size_flits=4), "needs --dim"),
    (dict(op="all-reduce", strategy="MP2-DP5-PP2", dim="pp", size_flits=4), "stage-boundary"),
    (dict(op="multicast", strategy="MP4-DP5-PP1", dim="pp", size_flits=4), "one pipeline stage"),
    (dict(op="all-reduce", strategy="MP20-DP1-PP1", dim="dp", size_flits=4), "groups of 1 NPU"),
])
def test_bad_requests_fail_before_anything_is_built(kwargs, words):
    with pytest.raises(FredError, match=words):
        make_request(fabric_spec("fred-b"), **kwargs)


def test_spec_is_plain_data():
    d = FabricSpec(name="x", in_switch=True, uplink_ports=2, uplink_rate="3/4").to_dict()
    assert d["uplink_rate"] == "3/4" and d["uplink_bandwidth"] == "3/2" and d["l2_ports"] == 10
