"""Concurrent traffic classes as one packet-fabric program (hdl/compiler/concurrent_program.py):
each class compiled alone, its phases in the slots after the previous classes' at every
switch, its collectives on its VC with its delay; refusals name what is wrong."""

from __future__ import annotations

import pytest

from hdl.compiler.concurrent_program import TrafficClass, concurrent_program
from hdl.compiler.fabric_program import fabric_program
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricCollective, FabricRequest, fabric_spec
from hdl.contracts.packet import VC

THREE_L1 = fabric_spec("fred-d", npus=6, npus_per_l1=2, uplink_ports=1)


def _all_reduce(ranks, size, label):
    return FabricRequest("all-reduce", (FabricCollective("all-reduce", ranks),), size, label)


def test_classes_take_consecutive_slots_with_their_vc_and_delay():
    dp = TrafficClass("dp", "dp", _all_reduce((0, 2, 4), 40, "DP"))
    mp = TrafficClass("mp", "mp", _all_reduce((1, 3), 16, "MP"), delay=30)
    program, request, vcs, delays, owner = concurrent_program(THREE_L1, [dp, mp])
    # DP crosses every switch (slot 0); MP only L1.0, L1.1 and the L2 (slot 1); L1.2 has
    # nothing of MP, so it keeps one phase
    assert program.phases == [2, 2, 1, 2]
    assert [p.collectives for p in program.switches[0]] == [(0,), (1,)]
    assert [c.ranks for c in request.collectives] == [(0, 2, 4), (1, 3)]
    assert vcs == {0: int(VC.DP), 1: int(VC.MP)} and delays == {0: 0, 1: 30} and owner == [0, 1]
    # every NPU keeps the engine of its own class, with that class's size
    assert [e["send_count"] for e in program.engines] == [40, 16, 40, 16, 40, 0]
    alone = fabric_program(THREE_L1, mp.request)
    assert program.engines[1] == alone.engines[1]
    assert program.flits_sent == 3 * 40 + 2 * 16


def test_a_class_missing_from_a_switch_leaves_an_empty_slot_there():
    mp = TrafficClass("mp", "mp", _all_reduce((1, 3), 16, "MP"))
    dp = TrafficClass("dp", "dp", _all_reduce((0, 2, 4), 40, "DP"))
    program, *_ = concurrent_program(THREE_L1, [mp, dp])
    # MP first (slot 0 where it runs); L1.2 gets an empty slot 0 so DP is slot 1 everywhere
    assert program.phases == [2, 2, 2, 2]
    assert program.switches[2][0].flows == () and program.switches[2][1].collectives == (1,)


@pytest.mark.parametrize("classes, words", [
    ([TrafficClass("a", "dp", _all_reduce((0, 2), 8, "A")),
      TrafficClass("b", "mp", _all_reduce((2, 4), 8, "B"))], "endpoint 2 is in classes a and b"),
    ([TrafficClass("a", "dp", _all_reduce((0, 2), 8, "A")),
      TrafficClass("b", "pp", _all_reduce((1, 3), 8, "B")),
      TrafficClass("c", "pp", _all_reduce((4, 5), 8, "C"))], "would share VC PP"),
    ([TrafficClass("a", "dp", _all_reduce((0, 2), 8, "A"))], "two or more traffic classes"),
])
def test_refusals_name_the_problem(classes, words):
    with pytest.raises(FredError, match=words):
        concurrent_program(THREE_L1, classes)


def test_bad_class_fields_are_refused():
    with pytest.raises(FredError, match="kind must be one of"):
        TrafficClass("x", "bulk", _all_reduce((0, 2), 8, "X"))
    with pytest.raises(FredError, match="delay must be"):
        TrafficClass("x", "mp", _all_reduce((0, 2), 8, "X"), delay=-1)


def test_endpoint_algorithms_store_no_phase_and_send_each_class_on_its_vc():
    """Fred-A: rings as online unicasts; every NPU's header carries its class's VC and delay,
    its destination the next NPU of its own ring (docs/switch.md, "Online unicast routing")."""
    from hdl.compiler.packet_fabric_program import online_headers, runs_online
    from hdl.designs.fabric.packet_fabric_top import packet_format
    from hdl.compiler.fabric_program import default_phases
    ring = fabric_spec("fred-a", npus=6, npus_per_l1=2)
    dp = TrafficClass("dp", "dp", _all_reduce((0, 2, 4), 24, "DP"))
    mp = TrafficClass("mp", "mp", _all_reduce((1, 3), 8, "MP"), delay=30)
    program, request, vcs, delays, owner = concurrent_program(ring, [dp, mp])
    assert runs_online(program) and program.algorithm == "ring"
    assert program.phases == [0] * len(ring.switch_ports)
    fmt = packet_format(default_phases(), 8, dest_ports=max(ring.switch_ports))
    headers = online_headers(program, request, fmt, vcs=vcs, delays=delays)
    # NPU 5 is in no class: it sends nothing, its header keeps the default (DP, no delay)
    assert [h["vc"] for h in headers] == [int(VC.DP), int(VC.MP)] * 2 + [int(VC.DP)] * 2
    assert [h["delay"] for h in headers] == [0, 30, 0, 30, 0, 0]
    assert [h["flow"] for h in headers] == [2, 3, 4, 1, 0, 0]      # ring successors; 5 idle
    assert {h["phase"] for h in headers} == {fmt.online_phase}



def test_an_online_write_among_in_switch_classes_keeps_their_slots_and_is_online():
    """dp-under-write on the 6-NPU Fred-D: the DP all-reduce stores slot 0 at every switch, the
    NPU's write into the controller (a one-member io-reduce run as the chain) stores nothing
    and is the program's online collective; the load's headers name slot 0 and the collective
    for DP, the default index and the controller for the writer (docs/switch.md, "Online
    unicast routing")."""
    from cocotb_tests.fabric.packet_fabric_sim import packet_load_sequence
    from hdl.compiler.packet_fabric_program import runs_online
    from hdl.designs.fabric.packet_fabric_top import PACKET_REGS, packet_format
    from hdl.compiler.fabric_program import default_phases
    spec = fabric_spec("fred-d", npus=6, npus_per_l1=2, uplink_ports=1, io_controllers=1)
    dp = TrafficClass("dp", "dp", _all_reduce((1, 2, 4), 16, "DP"), delay=40)
    write = TrafficClass("write", "io", FabricRequest(
        "io-reduce", (FabricCollective("io-reduce", (3,), 6),), 32, "write"), algorithm="chain")
    program, request, vcs, delays, owner = concurrent_program(spec, [dp, write])
    assert program.algorithm == "in-switch + chain" and runs_online(program)
    assert program.online_collectives == frozenset({1})
    assert program.phases == [1, 1, 1, 1]
    assert all(p[0].collectives == (0,) for p in program.switches)
    assert vcs == {0: int(VC.DP), 1: int(VC.DP)}
    fmt = packet_format(default_phases(), 8, dest_ports=max(spec.switch_ports))
    writes = packet_load_sequence(spec, request, program, fmt, vcs, delays)["writes"]
    reg = {v: k for k, v in PACKET_REGS.items()}
    header = {(u, reg[r]): v for u, r, v in writes if u < spec.endpoints and r in reg}
    assert [header[(r, "phase")] for r in (1, 2, 4)] == [0, 0, 0]
    assert [header[(r, "flow")] for r in (1, 2, 4)] == [0, 0, 0]
    assert header[(3, "phase")] == fmt.online_phase and header[(3, "flow")] == 6
    assert header[(6, "last_seq")] == 32 // 8 - 1 and header[(1, "delay")] == 40
