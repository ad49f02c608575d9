"""Issue 32's phase orders on the packet fabric's iteration, in the Amaranth simulator: the packet
Fred-B of 4 NPUs (2 per L1, one half-rate uplink each) runs MP, DP, MP, DP in-switch
all-reduces -- MP the pairs in each L1 ((0, 1), (2, 3): one phase at each L1), DP the pairs
across the L1s ((0, 2), (1, 3): two reducing phases of one VC at every switch, the Fred-B
MP4-DP5 case in miniature). NPUs 1 and 2 compute less before each DP all-reduce, so L1 0 first
sees group (1, 3)'s packets and L1 1 group (0, 2)'s. The switches follow the iteration's phase
order, loaded once with the absolute numbers of every DP run's last packets, the DP runs on VC
DP and the MP runs on VC MP (:func:`cocotb_tests.iteration.packet_loading.packet_iteration_orders`;
docs/fabric_iteration.md, "Phase orders over an iteration")."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricCollective, FabricRequest, fabric_spec
from hdl.contracts.packet import VC
from hdl.contracts.trace_program import COLLECTIVE_BIT

from tests.studies.test_iteration_case import SMALL, _trace

SPEC = fabric_spec("fred-b", **SMALL)
MP = (FabricCollective("all-reduce", (0, 1)), FabricCollective("all-reduce", (2, 3)))
DP = (FabricCollective("all-reduce", (0, 2)), FabricCollective("all-reduce", (1, 3)))
#: flits per NPU of the MP and of the DP all-reduces (DP: 6 packets of 8 per flow, more than
#: the L2's input buffer holds)
MP_FLITS, DP_FLITS = 16, 48
NODES = 16
#: compute before each DP all-reduce: NPUs 1 and 2 early, 0 and 3 late
EARLY, LATE = 10, 80
BEFORE_DP = {0: LATE, 1: EARLY, 2: EARLY, 3: LATE}


def _case(pairs=2, repeat=1):
    """(programs, requests, traces): ``pairs`` times MP, DP, each after compute (``EARLY``/``LATE``
    before a DP all-reduce), 5 cycles at the end (the equal programs share their slots); the
    last DP node runs ``repeat`` times (the trace word's repeat bits: its runs back to back,
    no compute between them)."""
    from hdl.compiler.fabric_program import fabric_program
    requests = [FabricRequest("all-reduce", MP, MP_FLITS, "mp"), FabricRequest("all-reduce", DP, DP_FLITS, "dp")] * pairs
    programs = [fabric_program(SPEC, r, algorithm="in-switch") for r in requests]
    last_dp = COLLECTIVE_BIT | (repeat if repeat > 1 else 0)      # a single run: no repeat field
    traces = {r: replace(_trace(r, [20, COLLECTIVE_BIT, BEFORE_DP[r], COLLECTIVE_BIT] * (pairs - 1)
                                + [20, COLLECTIVE_BIT, BEFORE_DP[r], last_dp, 5]),
                         collectives=tuple(range(1, 4 * pairs, 2)))
              for r in range(SPEC.npus)}
    return programs, requests, traces


def _dp_after_dp_case(between):
    """(programs, requests, traces): MP, DP, then per rank ``between[rank]`` cycles of compute,
    DP again (a second node of the same program: the same slots), 5 cycles at the end."""
    from hdl.compiler.fabric_program import fabric_program
    requests = [FabricRequest("all-reduce", MP, MP_FLITS, "mp")] + [FabricRequest("all-reduce", DP, DP_FLITS, "dp")] * 2
    programs = [fabric_program(SPEC, r, algorithm="in-switch") for r in requests]
    traces = {r: replace(_trace(r, [20, COLLECTIVE_BIT, BEFORE_DP[r], COLLECTIVE_BIT, between[r], COLLECTIVE_BIT, 5]),
                         collectives=(1, 3, 5))
              for r in range(SPEC.npus)}
    return programs, requests, traces


def _run(run_fabric_top, read_iteration, edit=None, max_cycles=3000, pairs=2, order_entries="load", repeat=1,
         case=None):
    """Run the case's load (``edit(load)`` first, if given) on the packet Fred-B's iteration top,
    its switches' order depth the load's (``order_entries="load"``) or the one given; the case
    ``_case(pairs, repeat)`` unless ``case`` (programs, requests, traces) is given."""
    from cocotb_tests.iteration.packet_loading import packet_iteration_format
    from cocotb_tests.iteration.packet_run import packet_iteration_load
    from hdl.designs.iteration import PacketTraceNpu, iteration_packet_top
    programs, requests, traces = case or _case(pairs, repeat)
    nodes = max(NODES, 1 << (4 * pairs).bit_length())
    packet = packet_iteration_format(SPEC, False)
    load = packet_iteration_load(SPEC, programs, requests, traces, nodes, packet)
    if edit is not None:
        load = edit(load)
    depth = load["order_entries"] if order_entries == "load" else order_entries
    dut = iteration_packet_top(SPEC, depth=nodes, programs=load["room"], order_entries=depth)
    counts = [len(traces[rank].words) for rank in range(SPEC.npus)]
    return run_fabric_top(dut, load["writes"], lambda read, write: read_iteration(read, write, counts,
                                                                                   PacketTraceNpu.read_names),
                          max_cycles=max_cycles, with_write=True, config=load["config"]), programs


def _assert_every_flit_checked(out, programs, nodes):
    """The iteration finished: every NPU through its ``nodes`` nodes, no bad or extra flit in any
    run, no packet out of sequence, no link error; each NPU's last run (the last collective, a
    DP all-reduce) sent and received its ``DP_FLITS``."""
    assert out["all_done"], out
    for rank, x in enumerate(out["npus"]):
        assert (x["nodes_done"], x["run_errors"], x["seq_errors"], x["link_errors"]) == (nodes, 0, 0, 0), (rank, x)
        assert x["received"] == x["sent"] == programs[-1].engines[rank]["recv_count"] == DP_FLITS, (rank, x)


def test_the_iteration_orders_hold_every_dp_runs_last_packet_numbers_and_the_mp_runs_go_on_vc_mp():
    """Pure: the MP program takes slot 0, the DP program slots 1 and 2 at every switch; each
    switch's order holds both DP runs' two slots with the absolute number of their last
    packets: the MP runs send 2 packets per NPU, the DP runs 6, so the first DP run's packets
    are numbered 2..7 and the second's 10..15 at every NPU. More entries than the slots: the
    orders built deeper (``packet_order_entries``); refused by name: more than an order's
    8-bit index reaches. An iteration without an order keeps its collectives on VC DP."""
    from cocotb_tests.iteration.packet_loading import (packet_iteration_format, packet_iteration_orders,
                                                       packet_order_entries)
    from hdl.compiler.fabric_program import fabric_program
    programs, requests, _ = _case()
    vcs, orders = packet_iteration_orders(SPEC, programs, requests, packet_iteration_format(SPEC, False), [1] * 4)
    assert vcs == [VC.MP, VC.DP, VC.MP, VC.DP]
    assert orders == [(VC.DP, [(1, 7), (2, 7), (1, 15), (2, 15)])] * 3        # L1.0, L1.1, L2
    # a repeat of the MP all-reduce moves the DP runs' numbers by its 2 packets
    _, repeated = packet_iteration_orders(SPEC, programs, requests, packet_iteration_format(SPEC, False), [2, 1, 1, 1])
    assert repeated[0][1] == [(1, 9), (2, 9), (1, 17), (2, 17)]
    # the second DP all-reduce repeated: an entry pair per run, the repeat's packets 16..21
    _, twice = packet_iteration_orders(SPEC, programs, requests, packet_iteration_format(SPEC, False), [1, 1, 1, 2])
    assert twice == [(VC.DP, [(1, 7), (2, 7), (1, 15), (2, 15), (1, 21), (2, 21)])] * 3
    assert packet_order_entries(orders) is None                     # 4 entries: one per slot, as built before
    # the DP all-reduce run four times, then once more: 10 entries, more than the 8 slots: the
    # switches' orders are built 16 deep (the next power of two); the DP runs' packets 2..7,
    # 8..13, 14..19, 20..25, the MP run's 26 and 27, the last DP run's 28..33
    _, deeper = packet_iteration_orders(SPEC, programs, requests, packet_iteration_format(SPEC, False), [1, 4, 1, 1])
    assert deeper == [(VC.DP, [(1, 7), (2, 7), (1, 13), (2, 13), (1, 19), (2, 19), (1, 25), (2, 25),
                               (1, 33), (2, 33)])] * 3
    assert packet_order_entries(deeper) == 16
    # 128 + 1 DP runs: 258 entries, more than an order's 8-bit index reaches
    with pytest.raises(FredError, match=r"129 ordered collective run\(s\) need phase-order entries L1\.0 258, "
                                        r"L1\.1 258, L2 258; a switch's order, loaded once, holds at most 255"):
        packet_iteration_orders(SPEC, programs, requests, packet_iteration_format(SPEC, False), [1, 128, 1, 1])
    # nothing ordered: every collective on VC DP, as the iterations before, no order
    wafer = [FabricRequest("all-reduce", (FabricCollective("all-reduce", (0, 1, 2, 3)),), 8, "w")]
    assert packet_iteration_orders(SPEC, [fabric_program(SPEC, wafer[0], algorithm="in-switch")], wafer,
                                   packet_iteration_format(SPEC, False), [1]) == ([VC.DP], [(0, [])] * 3)


def test_crossed_dp_groups_complete_in_the_iterations_phase_order(run_fabric_top, read_iteration):
    """Every NPU runs all four all-reduces: every flit of every run checked good (the pair's
    sums), no packet out of sequence, no link error, each NPU's last counts the second DP
    all-reduce's. The order serves group (0, 2) (slot 1) before group (1, 3), whose NPU 1 was
    there first (measured 2026-11-28 13:14 UTC: the first DP run ends at 245 at NPUs 0 and 2,
    at 365 at NPUs 1 and 3, though NPU 1 started at 62; the iteration 728 cycles)."""
    out, programs = _run(run_fabric_top, read_iteration)
    _assert_every_flit_checked(out, programs, nodes=9)
    # the early NPUs wait in each DP all-reduce for their late partners' operands
    for k in (3, 7):
        ends = {x["times"][k][1] for x in out["npus"]}
        assert min(ends) >= max(x["times"][k][0] for x in out["npus"]) + DP_FLITS


def test_an_order_on_the_vc_of_the_mp_runs_holds_them_for_ever(run_fabric_top, read_iteration):
    """Why the collectives without an order go on another VC than the ordered ones: the same
    load with the switches' order put on VC MP, the MP runs' VC. The first MP run's packets,
    on the order's VC, make every L1 want the order's first entry (slot 1, a DP phase), which
    no packet names before the MP run ends: the iteration does not finish, every NPU in the
    first MP all-reduce (node 1)."""
    from hdl.designs.fabric.packet_fabric_top import ORDER_REGS

    def order_on_vc_mp(load):
        return {**load, "writes": [[u, r, VC.MP << 8 | v & 0xFF if u >= SPEC.npus and r == ORDER_REGS["set"] else v]
                                   for u, r, v in load["writes"]]}
    out, _ = _run(run_fabric_top, read_iteration, edit=order_on_vc_mp, max_cycles=1500)
    assert not out["all_done"], out
    assert all(x["nodes_done"] == 1 for x in out["npus"]), out


def test_without_the_phase_order_the_crossed_dp_groups_hang(run_fabric_top, read_iteration):
    """The mechanism the order removes: the same load with no order written (phases picked by
    arrival, as before the iteration loaded orders). L1 0 selects group (1, 3)'s slot for NPU
    1's early packets and L1 1 group (0, 2)'s for NPU 2's; their reduced streams meet at the
    L2 in opposite orders behind each other in its one DP buffer per input: nothing moves."""
    from hdl.designs.fabric.packet_fabric_top import ORDER_REGS

    def without_orders(load):
        return {**load, "writes": [w for w in load["writes"] if w[0] < SPEC.npus or w[1] not in ORDER_REGS.values()]}
    out, _ = _run(run_fabric_top, read_iteration, edit=without_orders, max_cycles=1500)
    assert not out["all_done"], out
    assert all(x["nodes_done"] == 3 for x in out["npus"]), out


def test_a_repeated_dp_all_reduce_completes_in_the_iterations_phase_order(run_fabric_top, read_iteration):
    """Issue 32's repeated ordered collective (the session-22 hang): MP, DP, MP, DP x 2 -- the
    last DP node's repeat bits 2, its two runs back to back. The harness's order holds an
    entry pair per run (lasts 7, 15, 21: the repeat's packets are 16..21, numbered on as the
    engine numbers them; pure test above), 6 entries in the 8 slots. The repeat starts with
    the switches still running slot 2 (group (1, 3)'s, the order's entry before, complete):
    the control unit starts no packet of a phase of the order's VC that is not its current
    entry, drains and selects slot 1 (group (0, 2)), as every switch does. Main's control unit
    went on serving slot 2's next run at the L1s, then selected slot 1, the L2's last reduced
    slot-2 packet ahead of slot 1's in their downlink buffers: the iteration hung in the
    repeat, NPUs 0 and 2 at 40 of 48 flits sent and none received, NPUs 1 and 3 at 48 sent and
    40 received (checked on main 9e5deb3's control unit, 2026-11-28 20:06 UTC). Every flit of
    every run checked good, no packet out of sequence, and the repeat follows the order:
    group (0, 2) finishes its run before group (1, 3) receives its last packet."""
    out, programs = _run(run_fabric_top, read_iteration, repeat=2, max_cycles=2000)
    _assert_every_flit_checked(out, programs, nodes=9)
    repeat_ends = [x["times"][7][1] for x in out["npus"]]
    assert max(repeat_ends[0], repeat_ends[2]) < min(repeat_ends[1], repeat_ends[3]), repeat_ends
    # both runs ran: group (1, 3) ends a run only after both groups' flits (2 x DP_FLITS) went
    # up each L1's half-rate uplink (2 cycles a flit), from the late NPU 0's start on (the
    # order holds group (1, 3) behind it; the barrier starts the second run after the first)
    late_start = out["npus"][0]["times"][7][0]
    assert min(repeat_ends[1], repeat_ends[3]) >= late_start + 2 * (2 * DP_FLITS * 2), (late_start, repeat_ends)


def test_an_ordered_run_whose_stale_slot_comes_back_first_completes_in_the_order(run_fabric_top, read_iteration):
    """The same mechanism without a repeat: MP, DP, DP (two nodes of one program), NPUs 0 and 2
    computing 200 cycles between the DP nodes, NPUs 1 and 3 ``EARLY``: the second run's group
    (1, 3) (slot 2, the last entry the switches ran) reaches the L1s first. The control unit
    starts none of its packets before the order's entry, slot 1, is done: every flit checked,
    group (0, 2) finishes the run first. Main's control unit served them at the L1s still
    running slot 2 and hung as with the repeat (NPUs 0 and 2 at 40 of 48 flits sent, none
    received; checked on main 9e5deb3's control unit, 2026-11-28 20:11 UTC)."""
    out, programs = _run(run_fabric_top, read_iteration, max_cycles=2000,
                         case=_dp_after_dp_case({0: 200, 1: EARLY, 2: 200, 3: EARLY}))
    _assert_every_flit_checked(out, programs, nodes=7)
    ends = [x["times"][5][1] for x in out["npus"]]
    starts = [x["times"][5][0] for x in out["npus"]]
    assert max(starts[1], starts[3]) < min(starts[0], starts[2])     # group (1, 3) there first
    assert max(ends[0], ends[2]) < min(ends[1], ends[3]), ends        # served second, as ordered


def test_ten_order_entries_complete_in_an_order_built_sixteen_deep(run_fabric_top, read_iteration):
    """Issue 32's Transformer-17B MP4-DP5 case in miniature: MP, DP five times, five DP runs,
    10 order entries at every switch, more than its 8 slots (refused before session 22). The
    load builds the switches' orders 16 deep (``PacketFabricTop(order_entries=16)``): every NPU
    finishes all 21 nodes, every flit of every run checked good, no packet out of sequence, no
    link error."""
    out, programs = _run(run_fabric_top, read_iteration, pairs=5, max_cycles=6000)
    _assert_every_flit_checked(out, programs, nodes=21)


@pytest.mark.full   # the control of the test above (about 25-45 s of simulation): kept out of CI's time
def test_ten_order_entries_in_an_order_of_eight_hang(run_fabric_top, read_iteration):
    """The control: the same load on the top built as before (one order entry per slot, 8).
    Entries 8 and 9 (the last DP run's) are written to index 0 and 1 (the 3-bit index keeps
    the low bits), so the first entry asks for slot 1 until its inputs start the last DP run's
    last packet: group (1, 3)'s slot 2 is never served in the first DP run and the iteration
    stops there: NPUs 1 and 3 in it (node 3) with nothing received, NPUs 0 and 2 through it
    (slot 1 served) and its compute after, waiting at the next MP run's barrier (node 5)."""
    out, _ = _run(run_fabric_top, read_iteration, pairs=5, max_cycles=2500, order_entries=None)
    assert not out["all_done"], out
    assert [x["nodes_done"] for x in out["npus"]] == [5, 3, 5, 3], out
    assert [out["npus"][r]["received"] for r in (1, 3)] == [0, 0], out
