"""The fabric RTL of issue 15: programs (pure Python), the link (Amaranth simulator), and runs of
the whole fabric under Verilator (cocotb).

The Verilator runs of the default suite use a small fabric (4 NPUs under 2 L1s: L1 Fred_3(3)
or Fred_3(6), L2 Fred_3(2) or Fred_3(8)) built at -O0, so build and run stay short; the 20-NPU
fabrics of the paper run in the ``full`` tests and in ``make bench-fabric``.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from hdl.base.compiler import Flow
from hdl.base.errors import FredError
from hdl.base.fabric import fabric_spec, make_request
from hdl.base.fabric_program import fabric_program, flit_value, mix, rank_weights


# -- programs (pure Python) ---------------------------------------------------------------------

def _flows(program, switch):
    return [[(f.inputs, f.outputs) for f in phase.flows] for phase in program.switches[switch]]


def test_wafer_all_reduce_on_fred_d_goes_up_one_uplink_and_down_again():
    spec = fabric_spec("fred-d")
    program = fabric_program(spec, make_request(spec, op="all-reduce", size_flits=10, group="wafer"))
    for j in range(5):   # L1 j: NPUs 0..3 reduced onto uplink port 4, uplink 4 broadcast back
        assert _flows(program, j) == [[((0, 1, 2, 3), (4,)), ((4,), (0, 1, 2, 3))]]
        assert program.switches[j][0].input_flits == 10 * 5
    # the L2's plane 0 (uplink port 0 of every L1: its ports 0..4), reduced and broadcast;
    # planes 1..3 idle
    assert program.switch_ports == (8,) * 5 + (5,) * 4
    assert _flows(program, 5) == [[((0, 1, 2, 3, 4), (0, 1, 2, 3, 4))]]
    assert [_flows(program, 5 + p) for p in (1, 2, 3)] == [[], [], []]
    assert program.switches[5][0].input_flits == 50
    assert program.switch_name(5) == "L2.0" and program.switch_name(8) == "L2.3"
    # one Fred_3(20) L2 (l2_planes = 1): the logical ports j*4 + 0
    single = fabric_spec("fred-d", l2_planes=1)
    program = fabric_program(single, make_request(single, op="all-reduce", size_flits=10, group="wafer"))
    assert program.switch_ports == (8,) * 5 + (20,)
    assert _flows(program, 5) == [[((0, 4, 8, 12, 16), (0, 4, 8, 12, 16))]]
    assert program.switch_name(5) == "L2"
    assert program.flits_sent == program.flits_received == 200
    # every NPU receives the sum of all 20 NPUs' weights
    w = sum(rank_weights(r)[0] for r in range(20)) & 0xFFFFFFFF
    assert all(e["wr"] == w for e in program.engines)


def test_dp_groups_use_their_own_uplink_port_on_fred_d_and_take_turns_on_fred_b():
    for name, l2_phases in (("fred-d", 1), ("fred-b", 4)):
        spec = fabric_spec(name)
        program = fabric_program(spec, make_request(spec, op="all-reduce", size_flits=3,
                                                    strategy="MP2-DP5-PP2", dim="dp"))
        assert program.phases[-1] == l2_phases
        if name == "fred-d":   # group of local index i on uplink port i: L2 plane i, ports 0..4
            for i in range(4):
                assert _flows(program, 5 + i) == [[(tuple(range(5)), tuple(range(5)))]]
        else:                  # one uplink port: one group per phase, at every switch
            assert program.phases == [4] * 6


def test_l2_planes_map_the_logical_ports_and_refuse_a_flow_across_planes():
    from hdl.base.fabric_program import plane_flows
    # 4 uplink ports per L1 in 2 planes: plane 0 takes uplinks 0, 1, plane 1 uplinks 2, 3;
    # logical L2 port j*4 + u -> plane u // 2, port j*2 + u % 2
    spec = fabric_spec("fred-d", l2_planes=2)
    assert (spec.l2_ports, spec.l2_plane_ports) == (20, 10)
    assert [spec.l2_plane_of(p) for p in (0, 1, 2, 3, 4, 7, 19)] == [
        (0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (1, 3), (1, 9)]
    mapped = plane_flows(spec, [(Flow([0, 5], [9]), 7), (Flow([2], [6, 19]), 3)])
    assert mapped == {0: [(Flow([0, 3], [5]), 7)], 1: [(Flow([0], [2, 9]), 3)]}
    with pytest.raises(FredError, match=r"L2 flow 1>2 .* joins ports of L2 planes 0, 1"):
        plane_flows(spec, [(Flow([1], [2]), 1)])
    with pytest.raises(FredError, match="L2 port 20 is not on fabric"):
        spec.l2_plane_of(20)
    # the DP groups' uplink ports 0..3 land on 2 planes, two groups per plane
    program = fabric_program(spec, make_request(spec, op="all-reduce", size_flits=3,
                                                strategy="MP2-DP5-PP2", dim="dp"))
    assert program.switch_ports == (8,) * 5 + (10, 10)
    assert sorted(_flows(program, 5)[0]) == [((0, 2, 4, 6, 8),) * 2, ((1, 3, 5, 7, 9),) * 2]


def test_l2_planes_defaults_and_bad_values():
    assert [fabric_spec(n).l2_planes for n in ("fred-a", "fred-b", "fred-c", "fred-d")] == [1, 1, 4, 4]
    assert fabric_spec("fred-d", uplink_ports=2).l2_planes == 2     # one per uplink port
    with pytest.raises(FredError, match=r"l2_planes \(3\) must divide uplink_ports \(4\)"):
        fabric_spec("fred-d", l2_planes=3)
    with pytest.raises(FredError, match="l2_planes must be an integer >= 1"):
        fabric_spec("fred-b", l2_planes=0)


def test_reduce_and_multicast_flows():
    spec = fabric_spec("fred-b")
    reduce = fabric_program(spec, make_request(spec, op="reduce", size_flits=2, group="wafer"))
    assert _flows(reduce, 0) == [[((0, 1, 2, 3, 4), (0,))]]          # root's L1: its uplink joins
    assert _flows(reduce, 1) == [[((0, 1, 2, 3), (4,))]]
    assert _flows(reduce, 5) == [[((1, 2, 3, 4), (0,))]]
    assert [e["recv_count"] for e in reduce.engines] == [2] + [0] * 19
    multicast = fabric_program(spec, make_request(spec, op="multicast", size_flits=2, group="wafer"))
    assert _flows(multicast, 0) == [[((0,), (1, 2, 3, 4))]]
    assert _flows(multicast, 3) == [[((4,), (0, 1, 2, 3))]]
    assert [e["send_count"] for e in multicast.engines] == [2] + [0] * 19
    assert multicast.engines[7]["wr"] == rank_weights(0)[0]


def test_the_data_of_a_sum_is_the_sum_of_the_data():
    # what the engines rely on: sum over senders of w*mix+h = (sum w)*mix + sum h (mod 2^32)
    senders = [rank_weights(r, 5) for r in (0, 3, 17)]
    total = (sum(w for w, _ in senders) & 0xFFFFFFFF, sum(h for _, h in senders) & 0xFFFFFFFF)
    for index in (0, 1, 2, 1000):
        assert sum(flit_value(s, index, 0) for s in senders) & 0xFFFFFFFF == flit_value(total, index, 0)
    assert len({mix(k, 0) for k in range(1000)}) == 1000     # no two flits alike


@pytest.mark.parametrize("kwargs, message", [
    (dict(fabric="fred-d", algorithm="ring"), "does not apply"),
    (dict(fabric="fred-a", algorithm="in-switch"), "does not apply"),
    (dict(fabric="fred-c", algorithm="hierarchical"), "does not implement the endpoint algorithm"),
    (dict(fabric="fred-a", algorithm="chain"), "does not apply"),
    (dict(fabric="fred-d", sink_backpressure=1.0), "sink_backpressure"),
    (dict(fabric="fred-d", dtype="fp16"), "int32"),
])
def test_invalid_runs_fail_before_anything_is_built(kwargs, message):
    kwargs = dict(kwargs)
    spec = fabric_spec(kwargs.pop("fabric"), **({"dtype": kwargs.pop("dtype")} if "dtype" in kwargs else {}))
    request = make_request(spec, op="all-reduce", size_flits=4, group="wafer")
    with pytest.raises(FredError, match=message):
        fabric_program(spec, request, **kwargs)
    from cocotb_tests.fabric.run import run_fabric   # run_fabric checks first, too (no build)
    with pytest.raises(FredError, match=message):
        run_fabric(spec, request, **kwargs)


def test_ring_program_walks_the_chunks_in_ring_order():
    spec = fabric_spec("fred-a")
    program = fabric_program(spec, make_request(spec, op="all-reduce", size_flits=41, group="wafer"))
    assert program.algorithm == "ring"
    chunk = 3                                   # ceil(41 / 20): the last chunks carry padding
    e = program.engines[5]
    assert (e["send_count"], e["recv_count"]) == (38 * chunk, 38 * chunk)
    assert (e["own_only"], e["add_until"], e["fwd_count"], e["check_from"]) == (
        chunk, 20 * chunk, 37 * chunk, 19 * chunk)
    assert (e["out_base"], e["in_base"], e["last_base"]) == (5 * chunk, 4 * chunk, 19 * chunk)
    assert program.engines[0]["in_base"] == 19 * chunk       # NPU 0 receives from NPU 19
    # rank order around the wafer: L1 j passes 0>1>2>3>uplink, uplink>0; the L2 passes j to j+1
    assert [sorted(p) for p in _flows(program, 2)] == [
        [((0,), (1,)), ((1,), (2,)), ((2,), (3,)), ((3,), (4,)), ((4,), (0,))]]
    assert sorted(_flows(program, 5)[0]) == [((j,), ((j + 1) % 5,)) for j in range(5)]
    assert program.switches[5][0].input_flits == 5 * 38 * chunk
    # every rank checks the n - 1 fully reduced chunks it receives
    assert program.flits_to_check == 20 * 19 * chunk


def test_chains_run_in_rank_order_from_the_root():
    spec = fabric_spec("fred-c")
    multicast = fabric_program(spec, make_request(spec, op="multicast", size_flits=5,
                                                  strategy="MP2-DP5-PP2", dim="pp"))
    assert multicast.algorithm == "chain"
    # root 0 -> 2 -> 3: NPU 2 checks and forwards, NPU 3 only checks
    assert [multicast.engines[r]["send_count"] for r in (0, 2, 3)] == [5, 5, 0]
    assert [multicast.engines[r]["fwd_count"] for r in (0, 2, 3)] == [0, 5, 0]
    assert [sorted(p) for p in _flows(multicast, 0)] == [[((0,), (2,)), ((2,), (3,))]]
    reduce = fabric_program(spec, make_request(spec, op="reduce", size_flits=5,
                                               strategy="MP2-DP5-PP2", dim="dp"))
    # DP group 0, 4, 8, 12, 16: 16 -> 12 -> 8 -> 4 -> 0, each adding its own data
    e = reduce.engines
    assert [e[r]["add_until"] for r in (16, 12, 8, 4, 0)] == [0, 5, 5, 5, 0]
    assert e[0]["wr"] == sum(rank_weights(r)[0] for r in (4, 8, 12, 16)) & 0xFFFFFFFF


# -- the link (Amaranth simulator) -------------------------------------------------------------

@pytest.mark.parametrize("latency, rate", [(1, (1, 1)), (3, (1, 2)), (2, (2, 3))])
def test_link_latency_and_rate(latency, rate):
    from amaranth.hdl import unsigned
    from amaranth.sim import Simulator

    from hdl.fabric.link import Link
    dut = Link(unsigned(16), latency=latency, rate=rate)
    sent, received = [], []
    items = 30

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        nxt, cycle = 0, 0
        while len(received) < items and cycle < 500:
            ctx.set(dut.i.valid, nxt < items)
            ctx.set(dut.i.payload, nxt)
            # random-free stall pattern at the sink: every 7th cycle not ready
            ctx.set(dut.o.ready, cycle < 10 or cycle % 7 != 3)
            _, _, iv, ir, ov, orr, od = await ctx.tick().sample(
                dut.i.valid, dut.i.ready, dut.o.valid, dut.o.ready, dut.o.payload)
            if iv and ir:
                sent.append(cycle)
                nxt += 1
            if ov and orr:
                received.append((cycle, od))
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert [d for _, d in received] == list(range(items))          # none lost, duplicated, reordered
    a, b = rate
    for i in range(len(sent)):                                        # never above a flits in b cycles
        window = [c for c in sent if sent[i] <= c < sent[i] + b]
        assert len(window) <= a
    assert received[0][0] - sent[0] == latency                        # first flit: the latency
    assert Fraction(len(sent) - 1, sent[-1] - sent[0]) >= Fraction(a, b) * Fraction(6, 7) - Fraction(1, 10)


# -- the fabric under Verilator ---------------------------------------------------------------

SMALL = dict(npus=4, npus_per_l1=2)


@pytest.mark.cocotb
@pytest.mark.parametrize("fabric, op, backpressure", [
    ("fred-d", "all-reduce", 0.0),
    ("fred-d", "reduce", 0.3),
    ("fred-b", "multicast", 0.3),
    ("fred-b", "all-reduce", 0.5),
    ("fred-c", "all-reduce", 0.3),   # ring (same build as fred-d: same hardware)
    ("fred-a", "reduce", 0.3),       # chain (same build as fred-b)
    ("fred-a", "multicast", 0.0),
])
def test_small_fabric_runs_bit_exact(fabric, op, backpressure):
    from cocotb_tests.fabric.run import run_fabric
    spec = fabric_spec(fabric, **SMALL)
    request = make_request(spec, op=op, size_flits=24, group="wafer")
    run = run_fabric(spec, request, sink_backpressure=backpressure, seed=3, cflags="-O0")
    print(run.to_dict())
    assert run.errors == []
    assert run.flits_checked == run.expected_flits_checked > 0
    assert run.flits_received == run.expected_flits_received
    if spec.in_switch:
        expected_received = {"all-reduce": 4 * 24, "reduce": 24, "multicast": 3 * 24}[op]
        assert run.flits_received == run.flits_checked == expected_received
        assert run.flits_sent == {"all-reduce": 96, "reduce": 96, "multicast": 24}[op]
    elif op == "all-reduce":     # ring of 4: 6 chunks of 6 flits each way, 3 checked chunks
        assert run.flits_sent == run.flits_received == 4 * 36
        assert run.flits_checked == 4 * 18
    else:                        # chains of 4: 3 hops of 24 flits
        assert run.flits_sent == run.flits_received == 72
    assert run.cycles >= 24


@pytest.mark.cocotb
def test_a_stalled_fabric_ends_with_the_watchdogs_error():
    """NPU 3 is programmed to send one flit too few: the reduction at its L1 never gets its
    last operand, nobody finishes, and the watchdog names the engines and switch phases."""
    from cocotb_tests.fabric.run import run_program
    spec = fabric_spec("fred-d", **SMALL)
    request = make_request(spec, op="all-reduce", size_flits=16, group="wafer")
    program = fabric_program(spec, request)
    program.engines[3]["send_count"] -= 1
    with pytest.raises(FredError, match=r"stalled: watchdog after \d+ cycles; not finished: "
                                        r"NPU 0 \(sent 16/16, received 15/16\).*NPU 3 \(sent 15/15"):
        run_program(spec, request, program, watchdog_cycles=3000, cflags="-O0")


# -- the paper's Fig. 9 cases on the 20-NPU fabrics -----------------------------------------

FIG9 = [dict(group="wafer", op="all-reduce"),
        dict(strategy="MP2-DP5-PP2", dim="mp", op="all-reduce"),
        dict(strategy="MP2-DP5-PP2", dim="dp", op="all-reduce"),
        dict(strategy="MP2-DP5-PP2", dim="pp", op="multicast")]


@pytest.mark.full
@pytest.mark.cocotb
@pytest.mark.parametrize("fabric", ["fred-a", "fred-b", "fred-c", "fred-d"])
@pytest.mark.parametrize("case", FIG9, ids=lambda c: c.get("dim", "wafer"))
def test_fig9_cases_bit_exact_under_backpressure(fabric, case):
    from cocotb_tests.fabric.run import run_fabric
    spec = fabric_spec(fabric)
    request = make_request(spec, size_flits=64, **case)
    run = run_fabric(spec, request, sink_backpressure=0.25, seed=11)
    print(run.to_dict())
    assert run.errors == []
    assert run.flits_received == run.expected_flits_received > 0
    assert run.flits_checked == run.expected_flits_checked > 0


def test_a_ring_chunk_larger_than_the_npu_buffer_is_refused_before_building():
    from hdl.base.fabric_program import NPU_BUFFER
    spec = fabric_spec("fred-a")
    request = make_request(spec, op="all-reduce", size_flits=2 * NPU_BUFFER + 1,
                           strategy="MP2-DP5-PP2", dim="mp")
    with pytest.raises(FredError, match="chunks of 4097 flits; the RTL NPUs buffer 4096"):
        fabric_program(spec, request)
    ok = make_request(spec, op="all-reduce", size_flits=2 * NPU_BUFFER, strategy="MP2-DP5-PP2", dim="mp")
    assert fabric_program(spec, ok).engines[0]["chunk"] == NPU_BUFFER


def test_default_cflags_follow_the_fabrics_switch_ports():
    # -Os above OS_ABOVE_SWITCH_PORTS switch ports in all (docs/fabric_rtl.md, measured)
    from cocotb_tests.fabric.run import OS_ABOVE_SWITCH_PORTS, default_cflags
    assert OS_ABOVE_SWITCH_PORTS == 40
    assert default_cflags(fabric_spec("fred-b")) == "-O1"                  # 6 x 5 ports
    assert default_cflags(fabric_spec("fred-d")) == "-Os"                  # 5 x 8 + 4 x 5
    assert default_cflags(fabric_spec("fred-d", l2_planes=1)) == "-Os"     # 5 x 8 + 20
    assert default_cflags(fabric_spec("fred-d", npus=4, npus_per_l1=2)) == "-O1"   # 2 x 6 + 4 x 2
