"""A header names one slot for every switch a packet crosses, so on the packet fabric the
compiler puts each collective in one slot index at every switch (``fabric_program(...,
aligned_slots=True)``, :func:`hdl.compiler.fabric_program._pack`). The hand-built case is the
small form of Fred-B's MP2-DP5-PP2 I/O groups: 6 NPUs on three L1 Fred_3(4) (ports 0, 1 the
NPUs, 2 the half-rate uplink, 3 the controller), controller g on L1 g, groups (0, 2, 4) and
(1, 3, 5). At L1.0 and L1.1 the two groups' ports are disjoint, so each switch's own greedy
packing shares one phase between them; at L1.2 and the L2 both need the same port (the
uplink's input, the L2's outputs), so group 1 is in slot 1 there: the headers could not name
it. Aligned, group 1 is in slot 1 everywhere."""

from __future__ import annotations

from fractions import Fraction

import pytest

from hdl.compiler.fabric_program import fabric_program
from hdl.compiler.packet_fabric_program import packet_headers
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricRequest, fabric_spec, make_request
from hdl.designs.fabric.packet_fabric_top import packet_format

#: a quarter-rate controller: 4 cycles a flit, so a 16-flit stream is 64 cycles (the runs stay short)
SPEC = fabric_spec("fred-b", npus=6, npus_per_l1=2, io_controllers=2, io_rate=Fraction(1, 4))


def _request(op: str, size: int = 16):
    return make_request(SPEC, op=op, size_flits=size, strategy="MP2-DP3-PP1", dim="dp")


def _slots(program) -> list[list[tuple[int, ...]]]:
    return [[phase.collectives for phase in phases] for phases in program.switches]


@pytest.mark.parametrize("op", ["io-broadcast", "io-reduce"])
def test_each_switchs_own_packing_splits_a_group_over_two_slots(op):
    request = _request(op)
    assert [c.ranks for c in request.collectives] == [(0, 2, 4, 6), (1, 3, 5, 7)]
    program = fabric_program(SPEC, request)
    # hand-derived: shared at L1.0 / L1.1, one group per phase at L1.2 and the L2
    assert _slots(program) == [[(0, 1)], [(0, 1)], [(0,), (1,)], [(0,), (1,)]]
    with pytest.raises(FredError, match="collective 1 is in slot 0 at one switch and 1 at L1.2"):
        packet_headers(program, request, packet_format(8))


@pytest.mark.parametrize("op", ["io-broadcast", "io-reduce"])
def test_aligned_slots_put_each_group_in_one_slot_at_every_switch(op):
    request = _request(op)
    program = fabric_program(SPEC, request, aligned_slots=True)
    assert _slots(program) == [[(0,), (1,)]] * 4
    headers = packet_headers(program, request, packet_format(8))
    # every member of group g (the controller included) names slot g
    assert [h["phase"] for h in headers] == [0, 1, 0, 1, 0, 1, 0, 1]


def test_aligned_slots_change_nothing_where_the_switches_already_agree():
    """Fred-B's wafer all-reduce and its MP2-DP5-PP2 DP all-reduce (the Fig. 9 cases the
    packet fabric ran before): the same phases either way."""
    spec = fabric_spec("fred-b")
    for kwargs in (dict(group="wafer"), dict(strategy="MP2-DP5-PP2", dim="dp")):
        request = make_request(spec, op="all-reduce", size_flits=40, **kwargs)
        plain, aligned = (fabric_program(spec, request, aligned_slots=a) for a in (False, True))
        assert [[p.to_dict() for p in s] for s in plain.switches] == \
               [[p.to_dict() for p in s] for s in aligned.switches]


def test_a_slot_a_switch_has_nothing_in_is_stored_empty_and_the_run_completes():
    """8 NPUs on four L1s of two: (0, 2) and (1, 3) both cross L1.0's uplink, so (1, 3) is in
    slot 1; at the L2 (4, 6)'s ports are free in that slot 1 and it joins it, so at L1.2 and
    L1.3, where (4, 6) is the first collective, slot 0 is stored empty (a header never names
    it). On the Amaranth packet fabric all three all-reduces complete, every flit checked."""
    from hdl.contracts.fabric import FabricCollective
    from cocotb_tests.fabric.packet_fabric_sim import run_packet_fabric_amaranth
    spec = fabric_spec("fred-d", npus=8, npus_per_l1=2, uplink_ports=1)
    request = FabricRequest("all-reduce", tuple(FabricCollective("all-reduce", r)
                                                for r in ((0, 2), (1, 3), (4, 6))), 8, "three")
    assert _slots(fabric_program(spec, request))[2:] == [[(2,)], [(2,)], [(0,), (1, 2)]]
    program = fabric_program(spec, request, aligned_slots=True)
    assert _slots(program)[2:] == [[(), (2,)], [(), (2,)], [(0,), (1, 2)]]
    assert [h["phase"] for h in packet_headers(program, request, packet_format(8))] == \
        [0, 1, 0, 1, 1, 0, 1, 0]
    run = run_packet_fabric_amaranth(spec, request, watchdog_cycles=4000)
    assert run.errors == []


def test_the_groups_reduce_outs_run_in_turn_on_the_packet_fabric_every_flit_checked():
    """io-reduce on the Amaranth packet fabric with the aligned slots: every flit checked, each
    switch selects both slots. The reductions share one VC, so each switch serves their slots
    in its phase order, one after the other (docs/switch.md, "Phase order"): at least two
    64-cycle controller streams, where one group alone takes one."""
    from cocotb_tests.fabric.packet_fabric_sim import run_packet_fabric_amaranth
    stream = 16 / SPEC.io_rate
    run = run_packet_fabric_amaranth(SPEC, _request("io-reduce"), watchdog_cycles=6000)
    assert run.errors == []
    assert [s["selects"] for s in run.switches] == [2, 2, 2, 2]
    assert 2 * stream <= run.cycles <= 2 * stream + 120


def test_the_groups_weight_streams_overlap_without_a_phase_order():
    """io-broadcast: the two groups' trees reduce nothing, so no switch follows a phase order
    (``phase_orders``) and the control unit's yield serves each paced stream's packets in the
    other's gaps. Controllers at 1/8 (32 flits: a 256-cycle stream), input buffers of one
    packet (8 flits). Served in turn, the second group could have put at most its L1 input
    buffer and its controller's one-packet assembler (16 flits) into the fabric while the
    first ran, and would still need 16 flits x 8 cycles after the first's 256: >= 384 cycles.
    Overlapped: one stream plus the hop latency and the selects (measured 322, one group alone
    290, 2026-11-27)."""
    from cocotb_tests.fabric.packet_fabric_sim import run_packet_fabric_amaranth
    spec = fabric_spec("fred-b", npus=6, npus_per_l1=2, io_controllers=2, io_rate=Fraction(1, 8))
    request = make_request(spec, op="io-broadcast", size_flits=32, strategy="MP2-DP3-PP1", dim="dp")
    run = run_packet_fabric_amaranth(spec, request, watchdog_cycles=6000, depth=8)
    assert run.errors == []
    stream = 32 / spec.io_rate
    in_turn = stream + (32 - 8 - 8) / spec.io_rate
    assert stream <= run.cycles < in_turn
    # the switches both groups cross (L1.2, the L2) change phase more than once: per packet
    assert min(s["selects"] for s in run.switches) > 2


# fp16 on the I/O ops: a reduce-out is a real reduction, checked bit-exact in the configured order

FP16 = fabric_spec("fred-b", npus=6, npus_per_l1=2, io_controllers=2, io_rate=Fraction(1, 4),
                   dtype="fp16")


def test_the_fp16_reduce_out_golden_sum_is_one_addition_order_of_the_members():
    """The controller of group (0, 2, 4) must receive one of the orders of adding the three
    members' fp16 data (the one its switches are configured with); the orders give different
    hashes, so the check sees a wrong order, not only a wrong value."""
    import itertools

    import numpy as np

    from hdl.compiler.fabric_golden import expected_hashes, own_data, stream_hash
    from hdl.contracts.dtypes import get_dtype
    request = make_request(FP16, op="io-reduce", size_flits=16, strategy="MP2-DP3-PP1", dim="dp")
    program = fabric_program(FP16, request, aligned_slots=True)
    dt = get_dtype("fp16")
    data = {r: own_data((e["ws"], e["hs"]), np.arange(16), FP16.lanes)
            for r, e in enumerate(program.engines)}
    orders = {}
    for a, b, c in itertools.permutations((0, 2, 4)):
        for tree in ((lambda x, y, z: dt.add(dt.add(x, y), z)), (lambda x, y, z: dt.add(x, dt.add(y, z)))):
            total = np.asarray(tree(data[a], data[b], data[c]), dtype=np.uint16)
            orders[stream_hash(total)] = (a, b, c)
    assert len(orders) > 1                       # the order matters in fp16
    hashes = expected_hashes(FP16, request, program)
    assert hashes[6] in orders                   # controller 0 (endpoint 6): group (0, 2, 4)
    assert hashes[:6] == [stream_hash(np.zeros((0, FP16.lanes), dtype=np.uint16))] * 6


@pytest.mark.parametrize("op", ["io-broadcast", "io-reduce"])
def test_fp16_io_ops_run_bit_exact_under_sink_backpressure(op):
    """Both groups at once on the Amaranth packet fabric, fp16, the sinks refusing 30 % of the
    cycles: every endpoint's hash is the golden model's (the controllers' for io-reduce)."""
    from cocotb_tests.fabric.packet_fabric_sim import run_packet_fabric_amaranth
    request = make_request(FP16, op=op, size_flits=16, strategy="MP2-DP3-PP1", dim="dp")
    run = run_packet_fabric_amaranth(FP16, request, watchdog_cycles=6000, sink_backpressure=0.3)
    assert run.errors == []
    receivers = [r for r, e in enumerate(run.program.engines) if e["stages"] and
                 sum(st["recv_count"] for st in e["stages"])]
    assert receivers == ([6, 7] if op == "io-reduce" else [0, 1, 2, 3, 4, 5])
    assert [run.engines[r]["hash"] for r in receivers] == [run.program.expected_hashes[r] for r in receivers]
