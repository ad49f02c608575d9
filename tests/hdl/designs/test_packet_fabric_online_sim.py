"""Endpoint algorithms (rings, chains) on the packet fabric as online-routed unicasts, in
Amaranth's simulator on small Fred-A / Fred-C fabrics (4 NPUs, two L1s of 2 NPUs, one uplink
port): every flit checked by the engines, every packet's sequence number in order, no credit,
overflow or header error; each switch selects the default index once (docs/fabric_rtl.md,
"Packet fabric")."""

from __future__ import annotations

from fractions import Fraction

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec, make_request

from cocotb_tests.fabric.packet_fabric_sim import run_packet_fabric_amaranth

#: Fred-A's half-rate uplink / Fred-C's full-rate ones (two uplink ports per L1, so two L2
#: planes, each switch's route table holding only the endpoints of its plane), 2 NPUs per L1
SMALL_A = fabric_spec("fred-a", npus=4, npus_per_l1=2)
SMALL_C = fabric_spec("fred-c", npus=4, npus_per_l1=2, uplink_ports=2)
#: the paper's Fred-A: 20 NPUs, 5 L1s of 4, one half-rate uplink port per L1
FRED_A = fabric_spec("fred-a")


def test_ring_all_reduce_over_half_rate_uplinks_with_sink_backpressure():
    """Ring 0 -> 1 -> 2 -> 3 -> 0 of 24 flits: each NPU sends 2(n - 1) = 6 chunks of 6 flits;
    hops 1 -> 2 and 3 -> 0 cross the uplinks at 1/2 flit per cycle, so >= 72 cycles; sinks
    refuse 30 % of cycles. Upper bound: 72 + the ring's latency and the backpressure's slack."""
    request = make_request(SMALL_A, op="all-reduce", size_flits=24, group="wafer")
    run = run_packet_fabric_amaranth(SMALL_A, request, algorithm="ring", sink_backpressure=0.3,
                                     watchdog_cycles=4000)
    assert run.errors == []
    assert [e["received"] for e in run.engines] == [36] * 4
    assert [s["selects"] for s in run.switches] == [1, 1, 1]     # the default index, once
    assert 72 <= run.cycles <= 72 + 80


def test_ring_packets_end_at_chunk_ends_fp16_and_behind_write_pacers():
    """The chunk-aligned cut (issue 28) on both engines' output paths: ring 0 -> 1 -> 2 -> 3 of
    24 flits, 6-flit chunks, 8-flit packets, so every packet is a chunk of 6 (6 packets per NPU,
    last_seq 5; cut from the stream's start they would be 36 flits = 5 packets, and a receiver
    expecting the other count flags a sequence or a ``last`` error). fp16: the engine's output
    leaves through the adder, so ``chunk_end`` rides its sideband with ``last``; bit-exact
    against the golden hash. With an I/O controller every NPU sends through a (here
    unpaced) ``WritePacer``, which carries the cut as ``cut``."""
    fp16 = fabric_spec("fred-a", npus=4, npus_per_l1=2, dtype="fp16")
    paced = fabric_spec("fred-a", npus=4, npus_per_l1=2, io_controllers=1, io_rate=Fraction(1, 4))
    for spec in (fp16, paced):
        request = make_request(spec, op="all-reduce", size_flits=24, group="wafer")
        run = run_packet_fabric_amaranth(spec, request, algorithm="ring", sink_backpressure=0.2,
                                         watchdog_cycles=4000)
        assert run.errors == [], spec
        assert [e["received"] for e in run.engines[:4]] == [36] * 4
        if spec.dtype == "fp16":
            assert [e["hash"] for e in run.engines] == run.program.expected_hashes


def test_chain_reduce_streams_one_flit_per_cycle():
    """Chain reduce to NPU 0 of 40 flits on full-rate links: 3 -> 2 -> 1 -> 0, each member
    adding its own (2 -> 1 crosses L2 plane 1: NPU 1's local index); the stream is 40 flits (5 packets back to back on every online path,
    which the kept path lets run at one flit per cycle), plus three hops' latency."""
    request = make_request(SMALL_C, op="reduce", size_flits=40, group="wafer")
    run = run_packet_fabric_amaranth(SMALL_C, request, algorithm="chain", watchdog_cycles=4000)
    assert run.errors == []
    assert [e["received"] for e in run.engines] == [40, 40, 40, 0]
    assert 40 <= run.cycles <= 40 + 60      # 89 measured; a path set up per packet: 113


def test_io_reduce_chains_into_the_controller():
    """Fred-A I/O (the model's I/O chain): NPUs 3 -> 2 -> 1 -> 0 -> controller (endpoint 4, on
    L1 0) at 1/4 flit per cycle; the controller checks the sum of all four NPUs' 20 flits. At
    least 80 cycles (its rate), at most that plus the chain's latency and the first flit's
    interval."""
    spec = fabric_spec("fred-a", npus=4, npus_per_l1=2, io_controllers=1, io_rate=Fraction(1, 4))
    request = make_request(spec, op="io-reduce", size_flits=20, group="wafer")
    run = run_packet_fabric_amaranth(spec, request, algorithm="chain", watchdog_cycles=4000)
    assert run.errors == []
    assert [e["received"] for e in run.engines] == [20, 20, 20, 0, 20]
    assert run.program.contributors[4] == (0, 1, 2, 3)
    assert 80 <= run.cycles <= 80 + 80


def _four_dp_rings(size_flits):
    """MP4-DP5's DP all-reduce on Fred-A: DP groups {k, k+4, k+8, k+12, k+16}, one NPU per L1,
    so the four rings' every hop crosses its L1's one half-rate uplink port and the L2; each
    NPU sends 2(5 - 1) = 8 chunks of ceil(size / 5) flits."""
    request = make_request(FRED_A, op="all-reduce", size_flits=size_flits, strategy="MP4-DP5-PP1",
                           dim="dp")
    return run_packet_fabric_amaranth(FRED_A, request, algorithm="ring", watchdog_cycles=3000)


@pytest.mark.full
def test_four_dp_rings_across_the_one_port_uplinks_complete_when_a_chunk_is_a_packet():
    """40 flits: 8-flit chunks, so every packet an NPU sends is one chunk, and a forwarded
    packet depends on exactly one packet its ring predecessor has already started (its first
    flit arrived), which no other packet can stop. Each step moves 4 rings x 8 flits over each
    uplink at 1/2 flit per cycle: >= 8 x 64 = 512 cycles; 553 measured (Amaranth, 2026-11-27)."""
    run = _four_dp_rings(40)
    assert run.errors == []
    assert [e["received"] for e in run.engines] == [64] * 20
    assert 512 <= run.cycles <= 512 + 80


@pytest.mark.full
def test_four_dp_rings_across_the_one_port_uplinks_complete_when_packets_straddle_chunks():
    """59 flits (``fred fabric-sim --fabric fred-a --switch packet --op all-reduce --strategy
    MP4-DP5-PP1 --dim dp --size 59 --algorithm ring``, issue 28): 12-flit chunks. Cut into
    8-flit packets from the stream's start, an NPU's second packet held flits 8-11 of its own
    chunk and 0-3 of the next one, forwarded from its predecessor: it started, took its L1's
    uplink output and waited inside, mid-packet, for data its predecessor sends through
    another L1's uplink, where another ring's packet did the same -- a cycle of five L1
    uplinks, the watchdog fired. The packetizer now ends a packet at every chunk's end (8 + 4
    flits per chunk), so a forwarded packet waits only for one packet its predecessor has
    started: it completes. Each step moves 4 rings x 12 flits over each uplink at 1/2 flit
    per cycle: >= 8 x 4 x 12 x 2 = 768 cycles."""
    run = _four_dp_rings(59)
    assert run.errors == []
    assert [e["received"] for e in run.engines] == [96] * 20
    assert 768 <= run.cycles <= 768 + 150
