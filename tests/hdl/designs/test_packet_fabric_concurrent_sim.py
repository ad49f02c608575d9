"""Concurrent traffic classes on the packet fabric (docs/fabric_rtl.md, "Concurrent traffic
classes") in Amaranth's simulator, on the 6-NPU fabric of three L1s: a DP all-reduce of NPUs 1,
2, 4 and, from cycle 40, an MP all-reduce of NPUs 3, 5 sharing L1.1's and L1.2's uplink and
the L2 (studies/concurrent_case.py's mp-under-dp), each on its VC, every flit checked; each
class's completion from the engines' ``done_cycle``."""

from __future__ import annotations

import pytest

from cocotb_tests.fabric.packet_fabric_sim import run_packet_fabric_amaranth
from hdl.contracts.fabric import fabric_spec
from hdl.contracts.packet import VC
from hdl.compiler.concurrent_program import concurrent_program
from studies.concurrent_case import ConcurrentCase, run_concurrent_case, scenario_classes

THREE_L1 = fabric_spec("fred-d", npus=6, npus_per_l1=2, uplink_ports=1)
PACKET_FLITS = 8


def test_each_class_completes_at_its_last_engines_done_cycle():
    """One run of both classes (default suite): every flit checked, the DP load ends the run,
    the MP class ends long before it although it started later, and each engine's
    ``done_cycle`` is at most the run's cycles."""
    dp_size, mp_size, delay = 96, 16, 40
    classes = scenario_classes(THREE_L1, "mp-under-dp", size=mp_size, load_size=dp_size, delay=delay)
    program, request, vcs, delays, owner = concurrent_program(THREE_L1, classes)
    run = run_packet_fabric_amaranth(THREE_L1, request, program=program, vcs=vcs, delays=delays,
                                     watchdog_cycles=3000)
    assert run.errors == []
    assert run.flits_checked == 3 * dp_size + 2 * mp_size
    done = [e["done_cycle"] for e in run.engines]
    assert max(done[r] for r in (1, 2, 4)) == run.cycles
    mp_end = max(done[r] for r in (3, 5))
    assert delay + mp_size < mp_end < run.cycles - dp_size // 2
    assert [s["preemptions"] for s in run.switches] == [0, 1, 1, 1]


@pytest.mark.full
def test_mp_under_dp_load_preempts_at_packet_boundaries_and_dp_resumes():
    dp_size, mp_size, delay = 160, 24, 40
    classes = scenario_classes(THREE_L1, "mp-under-dp", size=mp_size, load_size=dp_size, delay=delay)
    case = run_concurrent_case(ConcurrentCase(THREE_L1, "mp-under-dp", classes, []),
                               runner=run_packet_fabric_amaranth, watchdog_cycles=3000)
    dp, mp = case.rtl
    together = case.rtl_runs["together"]
    assert together["errors"] == []
    assert dp["flits_checked"] == 3 * dp_size and mp["flits_checked"] == 2 * mp_size
    # the run ends with its last class: the DP load
    assert dp["cycles"] == together["cycles"] > mp["cycles"]
    # MP waits only for the DP packets in flight to drain and its phase to be selected: a
    # little above its time alone, far below the DP load still running
    assert mp["alone"] < mp["latency"] <= mp["alone"] + 3 * PACKET_FLITS
    # DP pauses while MP's flits cross the shared uplink (both directions at once)
    assert dp["cycles"] >= dp["alone"] + mp_size
    # every switch MP crosses preempted DP once (L1.0 carries DP only)
    assert together["preemptions"] == [0, 1, 1, 1]


#: Fred-A's 6-NPU fabric (three L1s of 2 NPUs, one half-rate uplink each): rings and chains
#: as online unicasts (docs/switch.md, "Online unicast routing")
RING_THREE_L1 = fabric_spec("fred-a", npus=6, npus_per_l1=2)


#: the DP ring's size: 72 flits (chunks of 24) is the smallest of 48, 72, 96 that hung the
#: fabric before online packets started only with room downstream (docs/switch.md, "Room for
#: every online packet"); 48 completed either way
RING_DP_FLITS = 72


def _online_mp_under_dp(vcs_of=None):
    """mp-under-dp on :data:`RING_THREE_L1`: DP ring of NPUs 1, 2, 4 (:data:`RING_DP_FLITS`),
    MP ring of NPUs 3, 5 (8 flits) from cycle 24, sharing L1.1's and L1.2's uplink and the
    L2."""
    classes = scenario_classes(RING_THREE_L1, "mp-under-dp", size=8, load_size=RING_DP_FLITS,
                               delay=24)
    program, request, vcs, delays, _ = concurrent_program(RING_THREE_L1, classes)
    run = run_packet_fabric_amaranth(RING_THREE_L1, request, program=program,
                                     vcs=vcs if vcs_of is None else vcs_of(vcs), delays=delays,
                                     watchdog_cycles=3000)
    assert run.errors == []
    done = [e["done_cycle"] for e in run.engines]
    return run, max(done[r] for r in (1, 2, 4)), max(done[r] for r in (3, 5))


def test_online_mp_ring_preempts_the_dp_ring_at_the_switches_it_crosses():
    """Each NPU's online packets carry its class's VC: the switches MP crosses select the
    default index on MP's VC once and preempt DP's for it (L1.0 carries DP only); every flit
    checked; MP, started later, ends long before the DP load (109 cycles against 290
    measured). Before online packets started only with room downstream, this run hung (the
    two-VC circular wait of docs/switch.md, "Room for every online packet"). The 2-member MP
    ring of 8 flits has 4-flit chunks, so (packets end at chunk ends, issue 28) each MP NPU
    sends 2 packets of 4: L1.1, L1.2 and the L2 each carry 4 MP packets, and DP may resume
    in the gap between two of them, so each preempts DP at least once and at most once per
    MP packet (one, when the MP ring was one 8-flit packet per NPU)."""
    run, dp_end, mp_end = _online_mp_under_dp()
    chunk = RING_DP_FLITS // 3
    assert run.flits_checked == 3 * 2 * 2 * chunk + 2 * 8    # DP ring: 2(n-1) chunks
    assert dp_end == run.cycles and mp_end < dp_end - RING_DP_FLITS
    preemptions = [s["preemptions"] for s in run.switches]
    assert preemptions[0] == 0 and all(1 <= p <= 4 for p in preemptions[1:]), preemptions


@pytest.mark.full
def test_online_mp_on_the_dp_vc_waits_behind_the_dp_ring():
    """The same run with MP's packets on DP's VC (the one default phase, no priority): MP ends
    later than on its own VC, no switch preempts."""
    _, _, mp_own_vc = _online_mp_under_dp()
    run, _, mp_dp_vc = _online_mp_under_dp(lambda vcs: {c: int(VC.DP) for c in vcs})
    assert mp_dp_vc > mp_own_vc
    assert [s["preemptions"] for s in run.switches] == [0, 0, 0, 0]


@pytest.mark.full
def test_online_mp_under_a_long_dp_ring_completes_at_the_default_buffer_depth():
    """mp-under-dp on the 6-NPU Fred-A fabric with a 400-flit DP ring and a 40-flit MP ring
    from cycle 200 (the case of the Fred-A hang at paper size, docs/fabric_validation.md).
    It hung when online packets started without room downstream: L1.1 and L1.2 served MP,
    whose packets up waited for the L2's MP credits; the L2 DRAINed for MP, waiting for its
    DP paths to empty, whose packets waited for room in L1.1's / L1.2's DP input buffers,
    full since those L1s stopped serving DP (with ``depth=1024`` it completed, 1,199 cycles).
    Now a DP packet enters the L2 only with room reserved in the L1's buffer, so the L2's
    drain ends: it completes at the default depth (1,221 cycles measured), MP long before DP,
    each switch MP crosses preempting DP once."""
    classes = scenario_classes(RING_THREE_L1, "mp-under-dp", size=40, load_size=400, delay=200)
    program, request, vcs, delays, _ = concurrent_program(RING_THREE_L1, classes)
    run = run_packet_fabric_amaranth(RING_THREE_L1, request, program=program, vcs=vcs,
                                     delays=delays, watchdog_cycles=6000)
    assert run.errors == []
    assert run.flits_checked == 3 * 2 * 2 * -(-400 // 3) + 2 * 40   # DP: 2(n-1) chunks of 134
    done = [e["done_cycle"] for e in run.engines]
    dp_end, mp_end = max(done[r] for r in (1, 2, 4)), max(done[r] for r in (3, 5))
    assert dp_end == run.cycles and 200 + 40 < mp_end < dp_end - 400
    assert [s["preemptions"] for s in run.switches] == [0, 1, 1, 1]


#: dp-under-write on the 6-NPU Fred-D with an I/O controller (endpoint 6, on L1 0): NPU 0
#: writes into the controller (an online unicast sunk at the controller's rate, 128 / 3000 of a
#: link) and the in-switch DP all-reduce of NPUs 1, 2, 4 starts at cycle 40 on the same VC;
#: they share L1 0 only (the switch, no link)
WRITE_THREE_L1 = fabric_spec("fred-d", npus=6, npus_per_l1=2, uplink_ports=1, io_controllers=1)


def _unpaced(load):
    """The load sequence without its write-pacing writes: every NPU injects at link rate (the
    fabric before the host rule of docs/fabric_rtl.md, "Host rules")."""
    from hdl.designs.fabric.packet_fabric_top import PACE_REG
    load["writes"] = [w for w in load["writes"] if w[1] != PACE_REG]
    return load


def _write_run(load, yield_after=None, scenario="dp-under-write", paced=False):
    """dp-under-write (or ``scenario``) with a ``load``-flit write; ``paced`` False: the writer
    injects at link rate (the switches' yield rule is what these tests pin)."""
    import functools
    from hdl.designs.fabric.packet_fabric_top import PacketFabricTop
    classes = scenario_classes(WRITE_THREE_L1, scenario, size=16, load_size=load, delay=40)
    program, request, vcs, delays, _ = concurrent_program(WRITE_THREE_L1, classes)
    run = run_packet_fabric_amaranth(WRITE_THREE_L1, request, program=program, vcs=vcs,
                                     delays=delays, watchdog_cycles=40 * load + 3000,
                                     edit_load=None if paced else _unpaced,
                                     top=functools.partial(PacketFabricTop, yield_after=yield_after))
    assert run.errors == []
    assert run.flits_checked == 3 * 16 + load        # the DP group's results and the write
    done = [e["done_cycle"] for e in run.engines]
    return run, max(done[r] for r in (1, 2, 4)) - 40, done[6]


def test_a_write_into_a_controller_does_not_hold_the_switch_from_an_in_switch_all_reduce():
    """The switch yields (docs/switch.md, "Control unit"): the DP all-reduce ends long before
    the write, which runs at the controller's rate (64 flits: about 64 x 3000 / 128 = 1,500
    cycles); alone it takes 48 cycles here, under the write at most a select's cost and a
    drain more per turn at L1 0 (measured 2026-11-27: 65)."""
    run, dp_latency, write_end = _write_run(64)
    assert write_end > 64 * 3000 // 128
    assert dp_latency < 120 < write_end // 10
    assert run.switches[0]["selects"] >= 3        # online, DP, online again at L1 0


@pytest.mark.full
def test_holding_the_blocked_phase_makes_the_all_reduce_wait_for_the_write():
    """The same run with the hold rule (``yield_after`` 0: a phase keeps the switch while its
    packets wait, credit-blocked or not): the DP all-reduce waits at L1 0 until the write's last
    packets have started there."""
    _, held, write_end = _write_run(64, yield_after=0)
    _, yielded, _ = _write_run(64)
    assert held > write_end - 8 * 3000 // 128 * 3 > 10 * yielded


def test_a_paced_far_write_leaves_the_all_reduce_on_its_links_as_if_alone():
    """dp-under-far-write: NPU 3 (L1 1) writes 64 flits into the controller on L1 0 across L1
    1's uplink, the L2 and the L2's link down to L1 0, the DP all-reduce's links too, on DP's
    VC. Injected at link rate the write's packets fill those links' DP FIFOs waiting for the
    controller and the all-reduce queues behind them (measured 2026-11-27: 2,661 cycles at a
    128-flit write). Paced (the host rule, :class:`WritePacer`: the controller's 16/375 over
    its one writer, whole packets) nothing of the write waits in the fabric: the all-reduce
    (48 cycles alone) meets at most one write packet (8 flits) and one select (4 cycles) at
    each of the 3 switches it shares, <= 48 + 3 x 12 = 84 cycles; and the write still ends as
    the controller drains it: 64 x 375 / 16 = 1,500 cycles from the first packet's arrival,
    at most a packet's pacing time (188 cycles) later than that."""
    run, dp_latency, write_end = _write_run(64, scenario="dp-under-far-write", paced=True)
    assert dp_latency <= 48 + 3 * (8 + 4)
    assert 64 * 375 // 16 <= write_end <= 64 * 375 // 16 + 188


@pytest.mark.full
def test_an_unpaced_far_write_blocks_the_all_reduce_behind_its_packets():
    """The same run with the write at link rate (no pacing writes): the all-reduce waits for
    write packets that leave the shared FIFOs at the controller's rate, several packets'
    pacing time (> 3 x 188 cycles)."""
    _, dp_latency, _ = _write_run(64, scenario="dp-under-far-write", paced=False)
    assert dp_latency > 3 * 188
