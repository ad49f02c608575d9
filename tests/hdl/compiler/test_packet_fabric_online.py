"""Endpoint algorithms on the packet fabric as online-routed unicasts
(hdl/compiler/packet_fabric_program.py, docs/fabric_rtl.md "Packet fabric"): the output each
switch sends a destination endpoint to, and the engines' header registers (hand cases)."""

from __future__ import annotations

import pytest

from hdl.compiler.fabric_program import fabric_program
from hdl.compiler.packet_fabric_program import (online_headers, online_output, online_table,
                                                received_packets, runs_online)
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec, make_request
from hdl.contracts.packet import VC, PacketFormat
from hdl.designs.fabric.packet_fabric_top import packet_format


def test_online_output_on_fred_a_one_uplink_one_l2():
    """Fred-A: 5 L1s of 4 NPUs (ports 0-3) + uplink port 4; one L2 Fred_3(5), port j = L1 j."""
    spec = fabric_spec("fred-a")
    assert online_output(spec, 0, 2) == 2            # own L1: the NPU's port
    assert online_output(spec, 0, 6) == 4            # another L1's NPU: up
    assert online_output(spec, 5, 6) == 1            # L2: down to L1 1
    assert online_output(spec, 1, 6) == 2            # L1 1: NPU 6 is its port 2


def test_online_output_on_fred_c_uses_the_uplink_of_the_destinations_local_index():
    """Fred-C: 4 uplink ports (4-7), one L2 plane per port (5 ports each, port j = L1 j): NPU
    9 (L1 2, local 1) is reached over uplink 1, i.e. plane 1 (switch 5 + 1)."""
    spec = fabric_spec("fred-c")
    assert online_output(spec, 0, 9) == 4 + 1
    assert online_output(spec, 5 + 1, 9) == 2
    assert online_output(spec, 2, 9) == 1
    with pytest.raises(FredError, match="plane 1, not switch 5"):
        online_output(spec, 5, 9)
    # each plane's table: the endpoints of its uplink (local index u), 5 per plane
    assert online_table(spec, 5 + 1) == {r: r // 4 for r in range(20) if r % 4 == 1}
    assert online_table(spec, 0) == {r: r if r < 4 else 4 + r % 4 for r in range(20)}


def test_ring_headers_name_each_members_successor():
    """A ring all-reduce over the wafer: every NPU's packets carry its successor as flow, the
    default phase index, the DP VC; each receives 2(n - 1) = 38 chunks of S/n = 2 flits, and
    its sender's packetizer ends a packet at every chunk's end: 38 packets of 2 flits (not 76
    flits in 10 packets of 8) -> last_seq 37."""
    spec = fabric_spec("fred-a")
    request = make_request(spec, op="all-reduce", size_flits=40, group="wafer")
    program = fabric_program(spec, request, algorithm="ring")
    assert runs_online(program)
    fmt = packet_format(8, dest_ports=max(spec.switch_ports))
    assert fmt.online_phase == 15 and fmt.dest_bits == 3
    headers = online_headers(program, request, fmt)
    assert [h["flow"] for h in headers] == [(r + 1) % 20 for r in range(20)]
    assert all(h["phase"] == 15 and h["vc"] == VC.DP and h["last_seq"] == 37 for h in headers)


def test_ring_headers_count_two_packets_per_straddling_chunk():
    """Fred-A's MP4-DP5 DP rings at 59 flits (issue 28): chunks of ceil(59 / 5) = 12 flits, 2(5
    - 1) = 8 received per NPU; a chunk is cut into packets of 8 and 4 flits, so 16 packets
    (not ceil(96 / 8) = 12) -> last_seq 15; at 40 flits a chunk is one packet of 8: 8 packets."""
    spec = fabric_spec("fred-a")
    fmt = packet_format(8, dest_ports=max(spec.switch_ports))
    for size, last_seq in ((59, 15), (40, 7)):
        request = make_request(spec, op="all-reduce", size_flits=size, strategy="MP4-DP5-PP1", dim="dp")
        program = fabric_program(spec, request, algorithm="ring")
        assert {st["chunk"] for e in program.engines for st in e["stages"]} == {-(-size // 5)}
        headers = online_headers(program, request, fmt)
        assert {h["last_seq"] for h in headers} == {last_seq}
        assert {received_packets(e, fmt) for e in program.engines} == {last_seq + 1}


def test_chain_headers_and_what_is_refused():
    """A chain multicast from the root (NPU 0) of a PP group: each member names the next, the
    last names nobody (flow 0, it sends nothing); the hierarchical all-reduce (three stages,
    three destinations) is refused by name, as is a flow field too small."""
    spec = fabric_spec("fred-c")
    request = make_request(spec, op="multicast", size_flits=16, strategy="MP2-DP5-PP2", dim="pp")
    program = fabric_program(spec, request, algorithm="chain")
    fmt = packet_format(8, dest_ports=max(spec.switch_ports))
    headers = online_headers(program, request, fmt)
    for coll in request.collectives:
        order = [coll.root] + sorted(r for r in coll.members if r != coll.root)
        assert [headers[r]["flow"] for r in order[:-1]] == order[1:]
        assert headers[order[-1]]["flow"] == 0 and headers[coll.root]["last_seq"] == 0
    request = make_request(spec, op="all-reduce", size_flits=400, group="wafer")
    with pytest.raises(FredError, match="one-stage endpoint programs.*hierarchical"):
        online_headers(fabric_program(spec, request, algorithm="hierarchical"), request, fmt)
    narrow = PacketFormat(phase_bits=4, seq_bits=16, flow_bits=4, packet_flits=8, dest_bits=5)
    request = make_request(spec, op="all-reduce", size_flits=40, group="wafer")
    with pytest.raises(FredError, match="20 endpoints need flow_bits >= 5"):
        online_headers(fabric_program(spec, request, algorithm="ring"), request, narrow)


def test_staged_headers_name_each_stages_destination_on_the_2x2_hierarchical_all_reduce():
    """The iteration's staged NPUs (a destination per engine stage): the hierarchical
    all-reduce of 2 L1s x 2 NPUs, by hand -- stage 0 the reduce-scatter ring of each L1 (0 -> 1,
    1 -> 0, 2 -> 3, 3 -> 2), stage 1 the ring across the L1s of each local index (0 <-> 2,
    1 <-> 3), stage 2 the all-gather in the L1 (as stage 0); ``flow`` stays stage 0's. A ring's
    one destination fills every stage. The packed register word: stage s at bit 6 s."""
    from hdl.contracts.trace_program import stage_flows_word
    spec = fabric_spec("fred-a", npus=4, npus_per_l1=2, uplink_ports=2)
    fmt = packet_format(8, dest_ports=max(spec.switch_ports))
    request = make_request(spec, op="all-reduce", size_flits=32, group="wafer")
    headers = online_headers(fabric_program(spec, request, algorithm="hierarchical"), request, fmt, staged=True)
    assert [h["flows"] for h in headers] == [(1, 2, 1), (0, 3, 0), (3, 0, 3), (2, 1, 2)]
    assert [h["flow"] for h in headers] == [1, 0, 3, 2]
    assert stage_flows_word(headers[0]["flows"], fmt.flow_bits) == 1 + (2 << 6) + (1 << 12)
    ring = online_headers(fabric_program(spec, request, algorithm="ring"), request, fmt, staged=True)
    assert [h["flows"] for h in ring] == [(1, 1, 1), (2, 2, 2), (3, 3, 3), (0, 0, 0)]


def test_stage_flows_word_refuses_what_does_not_fit():
    from hdl.contracts.trace_program import stage_flows_word
    with pytest.raises(FredError, match="stage 1's flow id 64 does not fit 6 bits"):
        stage_flows_word((1, 64, 1), 6)
    with pytest.raises(FredError, match="do not fit the 32-bit flow register"):
        stage_flows_word((1, 2, 3), 11)


def test_staged_headers_refuse_a_stage_whose_packet_numbers_would_not_follow_on():
    """Made-up 3-NPU program, two stages, packets of 8 flits: stage 0 0 -> 1 (16 flits, 2
    packets), 1 -> 2 and 2 -> 0 (8, 1 packet); stage 1 1 -> 0, 2 -> 1, 0 -> 2 (8 each). NPU 1
    received 2 packets before stage 1, its stage-1 sender NPU 2 sent 1: its packets would
    arrive numbered 1, the depacketizer expecting 2."""
    from types import SimpleNamespace
    from hdl.contracts.fabric import FabricCollective, FabricRequest
    fmt = PacketFormat(phase_bits=3, seq_bits=16, flow_bits=6, packet_flits=8, dest_bits=2)

    def stage(send, recv, sender):
        return {"send_count": send, "recv_count": recv, "chunk": 8, "sender": sender}

    engines = [{"stages": [stage(16, 8, 2), stage(8, 8, 1)]}, {"stages": [stage(8, 16, 0), stage(8, 8, 2)]},
               {"stages": [stage(8, 8, 1), stage(8, 8, 0)]}]
    program = SimpleNamespace(engines=engines, algorithm="made-up")
    request = FabricRequest("all-reduce", (FabricCollective("all-reduce", (0, 1, 2)),), 16, "x")
    with pytest.raises(FredError, match="endpoint 1's stage 1 packets from endpoint 2 are numbered from 1, "
                                        "but it received 2 before that stage"):
        online_headers(program, request, fmt, staged=True)
