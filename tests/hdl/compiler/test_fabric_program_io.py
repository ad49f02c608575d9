"""The fabric program of the I/O ops (hdl/compiler/fabric_program.py): the in-switch flows from
and to a controller's L1 port, the engines' counts and expected sums, and what is refused."""

from hdl.compiler.fabric_program import fabric_program
from hdl.contracts.fabric import fabric_spec, make_request
from hdl.contracts.npu_engine import rank_weights

FRED_B = fabric_spec("fred-b", io_controllers=1)     # L1 Fred_3(6): 4 NPUs, uplink 4, I/O 5


def _flows(program):
    return [[[str(f) for f in phase.flows] for phase in switch] for switch in program.switches]


def test_weight_streaming_is_one_multicast_from_the_controller_port():
    request = make_request(FRED_B, op="io-broadcast", size_flits=40, group="wafer")
    program = fabric_program(FRED_B, request)
    # L1.0: controller port 5 -> its NPUs and the uplink; the L2 fans out; the other L1s down
    assert _flows(program) == [[["5>0,1,2,3,4"]]] + [[["4>0,1,2,3"]]] * 4 + [[["0>1,2,3,4"]]]
    io = program.engines[20]
    assert io["send_count"] == 40 and io["recv_count"] == 0
    assert all(program.engines[r]["recv_count"] == 40 and program.engines[r]["send_count"] == 0
               for r in range(20))


def test_gradient_reduce_out_sums_every_member_into_the_controller():
    request = make_request(FRED_B, op="io-reduce", size_flits=40, group="wafer")
    program = fabric_program(FRED_B, request, seed=3)
    assert _flows(program) == [[["0,1,2,3,4>5"]]] + [[["0,1,2,3>4"]]] * 4 + [[["1,2,3,4>0"]]]
    io = program.engines[20]
    # the controller adds nothing: it expects exactly the members' sum
    w = sum(rank_weights(r, 3)[0] for r in range(20)) & 0xFFFFFFFF
    assert io["recv_count"] == 40 and io["send_count"] == 0 and io["wr"] == w
    assert program.contributors[20] == tuple(range(20))


def test_a_group_away_from_its_controllers_l1_reduces_up_and_down():
    """The DP groups of MP2-DP5-PP2 on Fred-D, each into its own controller (L1s 0..3)."""
    spec = fabric_spec("fred-d", io_controllers=4)
    request = make_request(spec, op="io-reduce", size_flits=8, strategy="MP2-DP5-PP2", dim="dp")
    program = fabric_program(spec, request)
    assert all(len(phases) == 1 for phases in program.switches)
    l1_1 = [str(f) for f in program.switches[1][0].flows]
    assert "2,6>8" in l1_1        # controller 1 (port 8 of L1.1) gets its L1's member + the L2's sum


def test_endpoint_fabrics_chain_from_the_controller_and_fp16_is_checked_at_the_controller():
    """Fred-A: the model's I/O chain (algorithms.io_chain_order): controller 0 (endpoint 20,
    L1 0) into NPU 0, then NPUs 1 .. 19; its reduce is the same chain reversed, into the
    controller, which checks the sum of all 20. In fp16 (Fred-B's in-switch reduce-out) the
    golden model gives the controller the hash of its tree's sum, the NPUs (which receive
    nothing) the empty stream's."""
    spec = fabric_spec("fred-a", io_controllers=1)
    program = fabric_program(spec, make_request(spec, op="io-broadcast", size_flits=8, group="wafer"))
    assert program.algorithm == "chain"
    assert [e["stages"][0].get("sender") for e in program.engines] == [20] + list(range(19)) + [None]
    program = fabric_program(spec, make_request(spec, op="io-reduce", size_flits=8, group="wafer"))
    assert program.engines[20]["stages"][0]["sender"] == 0
    assert program.engines[20]["stages"][0]["recv_count"] == 8 and program.contributors[20] == tuple(range(20))
    spec = fabric_spec("fred-b", io_controllers=1, dtype="fp16")
    program = fabric_program(spec, make_request(spec, op="io-reduce", size_flits=8, group="wafer"))
    hashes = program.expected_hashes
    assert len(hashes) == 21 and len(set(hashes[:20])) == 1 and hashes[20] != hashes[0]
