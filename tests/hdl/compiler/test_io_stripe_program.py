"""The striped I/O request (hdl/compiler/io_stripe_program.py): every controller's stripe on its
own chain at once, hand-computed on the wafer's 18 controllers and on a 2-controller fabric, the
same sends as the system model's I/O chain, and what is refused."""

import pytest

from hdl.compiler.io_stripe_program import endpoint_pair_flits, endpoint_totals, io_stripe_program, npu_own
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec
from hdl.contracts.npu_engine import rank_weights

FRED_A18 = fabric_spec("fred-a", io_controllers=18)
_MASK = 0xFFFFFFFF


def test_the_18_stripes_enter_at_18_different_npus():
    """Controller k sits on L1 k mod 5 and enters at that L1's (k mod 4)-th NPU: 4 (k mod 5) +
    k mod 4. NPUs 14 and 19 are nobody's entry."""
    program = io_stripe_program(FRED_A18, "io-broadcast", 54)
    entries = [chain[0] for chain in program.chains]
    assert entries == [0, 5, 10, 15, 16, 1, 6, 11, 12, 17, 2, 7, 8, 13, 18, 3, 4, 9]
    assert program.stripe_flits == 3
    # each chain is the members in rank order from its entry, wrapping round
    assert program.chains[16] == (4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 0, 1, 2, 3)


def test_weight_streaming_forwards_every_stripe_but_the_one_that_ends_here():
    """io-broadcast at 54 flits (3 per stripe): NPU 3 is the last member of controller 16's
    chain (entry 4), so it forwards 17 stripes to NPU 4; NPU 13 is nobody's last member (14
    is no entry) and forwards all 18; NPU 4 hears NPU 3 and controller 16 (endpoint 36)."""
    program = io_stripe_program(FRED_A18, "io-broadcast", 54)
    pairs = endpoint_pair_flits(program)
    assert pairs[(3, 4)] == 17 * 3 and pairs[(13, 14)] == 18 * 3 and pairs[(36, 4)] == 3
    totals = endpoint_totals(program)
    assert totals[4] == {"send": 51, "recv": 54, "sources": [3, 36], "dests": [5], "starts": []}
    assert totals[14] == {"send": 51, "recv": 54, "sources": [13], "dests": [15], "starts": []}
    assert totals[36] == {"send": 3, "recv": 0, "sources": [], "dests": [4], "starts": [16]}
    # every NPU receives the whole size, each stripe checked against its controller's memory
    assert all(t["recv"] == 54 for t in totals[:20])
    step = program.steps[9][16]
    assert (step.source, step.dest, step.org, step.flits) == (8, 10, 48, 3)
    assert (step.wr, step.hr) == rank_weights(36, 0)


def test_reduce_out_adds_each_member_and_sends_the_sum_to_the_controller():
    """io-reduce: controller 16's chain reversed, 3 -> 2 -> ... -> 5 -> 4 -> controller 16; NPU 3
    starts it with its own data, NPU 4 sends the sum of all 20 to endpoint 36."""
    program = io_stripe_program(FRED_A18, "io-reduce", 54, seed=5)
    w = [rank_weights(e, 5) for e in range(FRED_A18.endpoints)]
    first, last, io = program.steps[3][16], program.steps[4][16], program.steps[36][16]
    assert (first.source, first.dest, first.adds) == (None, 2, False)
    assert (last.source, last.dest, last.adds) == (5, 36, True)
    # NPU 4 receives the sum of every member but itself, the controller the sum of all 20
    assert last.wr == (sum(x for x, _ in w[:20]) - w[4][0]) & _MASK
    assert io.wr == sum(x for x, _ in w[:20]) & _MASK and io.hr == sum(y for _, y in w[:20]) & _MASK
    totals = endpoint_totals(program)
    # NPU 4 sends 17 stripes to NPU 3 (one of them, controller 1's, starting with its own
    # data: NPU 5 is controller 1's entry) and controller 16's sum to the controller
    assert totals[4] == {"send": 54, "recv": 51, "sources": [5], "dests": [3, 36], "starts": [1]}
    assert endpoint_pair_flits(program)[(4, 3)] == 51


def test_two_controllers_on_a_small_fabric_by_hand():
    """Fred-A with 2 L1s of 2 NPUs and 2 controllers: controller 0 (endpoint 4) on L1 0 enters
    at NPU 0, controller 1 (endpoint 5) on L1 1 at NPU 3 (its L1's second NPU, 1 mod 2)."""
    spec = fabric_spec("fred-a", npus=4, npus_per_l1=2, io_controllers=2)
    program = io_stripe_program(spec, "io-broadcast", 8)
    assert program.chains == ((0, 1, 2, 3), (3, 0, 1, 2))
    assert endpoint_pair_flits(program) == {(4, 0): 4, (0, 1): 8, (1, 2): 8, (2, 3): 4,
                                            (5, 3): 4, (3, 0): 4}
    assert [program.steps[0][k].org for k in (0, 1)] == [0, 4]


@pytest.mark.parametrize("op", ["io-broadcast", "io-reduce"])
def test_every_npu_sends_what_the_models_io_chain_has_it_send(op):
    """The model's I/O chain (sysmodel.collectives._fred_io_chain, on the packet platform of the
    same fabric with 18 controllers) and the program: the same flits per sending NPU."""
    from sysmodel.collectives import Collective, build_network, collective_traffic
    from sysmodel.fabric_model import fabric_platform
    platform, _ = fabric_platform(FRED_A18)
    net = build_network(platform, "fred-a")
    flit = platform.switch_at("l1").flit_bytes
    model_op = "io-load" if op == "io-broadcast" else "io-store"
    _, traffic = collective_traffic(net, Collective(model_op, tuple(range(20)), 4014 * flit))
    model = {r: float(v) / flit for r, v in enumerate(traffic.sent) if v}
    totals = endpoint_totals(io_stripe_program(FRED_A18, op, 4014))
    assert model == pytest.approx({r: float(t["send"]) for r, t in enumerate(totals[:20]) if t["send"]})


@pytest.mark.parametrize("spec, op, size, message", [
    (fabric_spec("fred-b", io_controllers=18), "io-broadcast", 54, "multicasts (reduces) in its switches"),
    (fabric_spec("fred-a"), "io-broadcast", 54, "has none"),
    (FRED_A18, "io-broadcast", 40, "do not split into 18 whole stripes"),
    (FRED_A18, "all-reduce", 54, "got op 'all-reduce'"),
    (FRED_A18, "io-reduce", 0, "positive whole number"),
])
def test_bad_requests_are_refused_by_name(spec, op, size, message):
    with pytest.raises(FredError, match=message.replace("(", r"\(").replace(")", r"\)")):
        io_stripe_program(spec, op, size)


def test_an_npus_own_part_in_the_reduce_out_by_hand():
    """6-NPU Fred-A, 3 controllers, io-reduce of 60 flits (3 stripes of 20): chain k in the
    load's order is (0..5), (3, 4, 5, 0, 1, 2), (4, 5, 0, 1, 2, 3); reversed, its last member
    starts it from its own data: NPU 5 stripe 0 (indices 0..19), NPU 2 stripe 1 (20..39), NPU 3
    stripe 2 (40..59); every NPU adds its own data (its rank's weights) to what it forwards. In
    the weight stream nothing is its own."""
    spec = fabric_spec("fred-a", npus=6, npus_per_l1=2, io_controllers=3)
    program = io_stripe_program(spec, "io-reduce", 60)
    own = {r: npu_own(program, r) for r in range(spec.npus)}
    for r, o in own.items():
        assert (o["ws"], o["hs"], o["add"]) == (*rank_weights(r, 0), 1)
    assert {r: (o["start"] - 1, o["start_org"], o["start_flits"]) for r, o in own.items() if "start" in o} == {
        5: (0, 0, 20), 2: (1, 20, 20), 3: (2, 40, 20)}
    assert all(npu_own(io_stripe_program(spec, "io-broadcast", 60), r) == {} for r in range(spec.npus))
