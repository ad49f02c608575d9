"""Latency against offered load on the packet switch RTL (studies/load_curve.py): the traffic
patterns, the zero-load latency against the documented timing, and a small curve whose low load
is near zero-load latency and whose high load saturates (Amaranth simulator, a few seconds)."""

from __future__ import annotations

import random

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.timing import switch_latency
from studies.load_curve import (PATTERNS, destination, generate_traffic, measure_point, run_load_curve,
                                packet_format, write_load_curve, zero_load_latency)


def test_transpose_is_a_permutation_and_swaps_rows_and_columns():
    for ports in (2, 3, 4, 6, 8, 12, 16):
        dests = [destination("transpose", s, ports, random.Random(0)) for s in range(ports)]
        assert sorted(dests) == list(range(ports)), ports
    # P = 8 as a 2 x 4 grid: input 1 = (0, 1) -> (1, 0) of the 4 x 2 grid = 2; input 4 = (1, 0) -> 1
    assert [destination("transpose", s, 8, random.Random(0)) for s in range(8)] == [0, 2, 4, 6, 1, 3, 5, 7]


def test_hotspot_sends_its_fraction_to_output_0_and_uniform_covers_every_output():
    rng = random.Random(3)
    hot = [destination("hotspot", 1, 8, rng) for _ in range(4000)]
    assert 0.25 + 0.75 / 8 - 0.03 < hot.count(0) / len(hot) < 0.25 + 0.75 / 8 + 0.03
    assert set(destination("uniform", 1, 8, rng) for _ in range(400)) == set(range(8))
    with pytest.raises(FredError, match="unknown traffic pattern 'tornado'"):
        destination("tornado", 0, 8, rng)


def test_generated_traffic_offers_the_requested_flits_per_cycle():
    fmt = packet_format(4, 8)
    traffic = generate_traffic("uniform", 4, 0.5, 4000, 8, random.Random(1), fmt)
    flits = sum(len(i.packet.flits) for i in traffic)
    assert 0.45 < flits / (4000 * 4) < 0.55
    assert [i.packet.flits[0] for i in traffic] == list(range(len(traffic)))   # the packet's index


def test_zero_load_latency_is_the_documented_timing():
    """One packet alone (the online phase already selected): its first flit leaves
    PacketSwitch.latency (the input FIFO's cycle + the Fred_m(P) pipeline) + 1 (the path's
    set-up) cycles after it is generated, the rest follow one per cycle (docs/switch.md, "Online
    unicast routing"). Fred_3(4) int32: 1 + 5 + 1, then 3 more flits = 10; odd P (demux / mux)
    the same way."""
    measured = {(ports, flits): zero_load_latency(ports, 3, flits) for ports, flits in ((4, 4), (3, 8))}
    for (ports, flits), cycles in measured.items():
        packet_switch_latency = 1 + switch_latency(ports=ports, middle=3, dtype="int32")
        assert cycles == packet_switch_latency + 1 + (flits - 1), (ports, flits)
    assert measured[(4, 4)] == 10


def test_low_load_is_near_zero_load_and_high_load_saturates():
    curve = run_load_curve(ports=4, patterns=("uniform",), rates=(0.05, 0.9), packet_flits=4,
                           warmup=10, measure=60)
    low, high = curve.points
    assert not low.saturated and low.delivered_packets == low.measured_packets > 0
    assert curve.zero_load_latency <= low.mean_latency < 2 * curve.zero_load_latency
    assert high.saturated and high.mean_latency > 3 * curve.zero_load_latency
    assert high.accepted < 0.9 * high.generated          # the switch takes less than is offered
    assert curve.saturation == {"uniform": 0.9}
    assert curve.saturation_throughput["uniform"] == pytest.approx(max(low.accepted, high.accepted))


def test_bad_load_is_refused(tmp_path):
    with pytest.raises(FredError, match=r"offered load must be in \(0, 1\]"):
        measure_point("uniform", 1.5, ports=4)


def test_write_load_curve_files(tmp_path):
    from studies.load_curve import LoadCurve, LoadPoint
    points = [LoadPoint("uniform", r, r, a, lat, lat + 3, 10, 10, sat)
              for r, a, lat, sat in ((0.1, 0.1, 15.0, False), (0.5, 0.3, 90.0, True))]
    curve = LoadCurve(ports=4, middle=3, packet_flits=8, depth=16, switch_latency=5, zero_load_latency=18,
                      warmup=1, measure=1, seed=0, points=points, saturation={"uniform": 0.5},
                      saturation_throughput={"uniform": 0.3})
    write_load_curve(tmp_path, curve)
    lines = (tmp_path / "load_curve.csv").read_text().splitlines()
    assert lines[0].startswith("pattern,offered,generated,accepted,mean_latency")
    assert lines[2].startswith("uniform,0.5,0.5000,0.3000,90.00")
    assert (tmp_path / "load_curve.png").stat().st_size > 0
    assert PATTERNS == ("uniform", "transpose", "hotspot")


@pytest.mark.full
def test_permutation_traffic_saturates_at_one_packet_per_path_occupancy():
    """Transpose is a permutation: no two inputs share an output, so an input's throughput is
    bounded by its path's occupancy. An online path is set up when a packet reaches the head of
    its input and released when its last flit leaves the output, so each packet holds it for its
    zero-load latency (17 cycles at Fred_3(8), 8-flit packets): at most 8 / 17 = 0.47 flits per
    cycle per port, whatever the offered load (measured: 0.474 at 0.9, docs/load_curve.md)."""
    zero = zero_load_latency(8, 3, 8)
    point = measure_point("transpose", 0.9, ports=8, packet_flits=8, warmup=100, measure=400, zero_load=zero)
    assert point.saturated
    assert 0.9 * 8 / zero < point.accepted <= 1.02 * 8 / zero
