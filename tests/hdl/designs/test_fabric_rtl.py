"""The fabric RTL (docs/fabric_rtl.md): programs (pure Python), the link (Amaranth simulator), and runs of
the whole fabric under Verilator (the default simulator, lock-step; ``test_fabric_lockstep``
compares it with the one-model cocotb bench).

The Verilator runs of the default suite use a small fabric (4 NPUs under 2 L1s: L1 Fred_3(3)
or Fred_3(6), L2 Fred_3(2) or Fred_3(8)) built at -O0, so build and run stay short; the 20-NPU
fabrics of the paper run in the ``full`` tests and in ``make bench-fabric``.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from hdl.compiler import Flow
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec, make_request
from hdl.compiler.fabric_program import fabric_program
from hdl.contracts.npu_engine import flit_value, mix, rank_weights


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
    from hdl.compiler.fabric_program import plane_flows
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
    (dict(fabric="fred-d", algorithm="hierarchical"), "does not apply"),
    (dict(fabric="fred-a", algorithm="chain"), "does not apply"),
    (dict(fabric="fred-d", sink_backpressure=1.0), "sink_backpressure"),
    (dict(fabric="fred-d", dtype="bf16"), "int32 and fp16"),
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
    assert program.engines[5]["send_count"] == program.engines[5]["recv_count"] == 38 * chunk
    e, = program.engines[5]["stages"]
    assert (e["own_only"], e["add_until"], e["fwd_count"], e["check_from"]) == (
        chunk, 20 * chunk, 37 * chunk, 19 * chunk)
    assert (e["out_base"], e["in_base"], e["last_base"]) == (5 * chunk, 4 * chunk, 19 * chunk)
    assert program.engines[0]["stages"][0]["in_base"] == 19 * chunk   # NPU 0 receives from NPU 19
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
    assert [multicast.engines[r]["stages"][0]["fwd_count"] for r in (0, 2, 3)] == [0, 5, 0]
    assert [sorted(p) for p in _flows(multicast, 0)] == [[((0,), (2,)), ((2,), (3,))]]
    reduce = fabric_program(spec, make_request(spec, op="reduce", size_flits=5,
                                               strategy="MP2-DP5-PP2", dim="dp"))
    # DP group 0, 4, 8, 12, 16: 16 -> 12 -> 8 -> 4 -> 0, each adding its own data
    e = reduce.engines
    assert [e[r]["stages"][0]["add_until"] for r in (16, 12, 8, 4, 0)] == [0, 5, 5, 5, 0]
    assert e[0]["wr"] == sum(rank_weights(r)[0] for r in (4, 8, 12, 16)) & 0xFFFFFFFF


# -- the link (Amaranth simulator) -------------------------------------------------------------

@pytest.mark.parametrize("latency, rate", [(1, (1, 1)), (3, (1, 2)), (2, (2, 3))])
def test_link_latency_and_rate(latency, rate):
    from amaranth.hdl import unsigned
    from amaranth.sim import Simulator

    from hdl.designs.fabric.link import Link
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
    ("fred-c", "hierarchical", 0.3),   # 2 x 2 NPUs: 3 stages, 3 phases at each L1
    ("fred-a", "hierarchical", 0.3),
])
def test_small_fabric_runs_bit_exact(fabric, op, backpressure):
    from cocotb_tests.fabric.run import run_fabric
    spec = fabric_spec(fabric, **SMALL)
    algorithm = None
    if op == "hierarchical":
        op, algorithm = "all-reduce", "hierarchical"
    request = make_request(spec, op=op, size_flits=24, group="wafer")
    run = run_fabric(spec, request, algorithm=algorithm, sink_backpressure=backpressure, seed=3,
                     cflags="-O0")
    print(run.to_dict())
    assert run.errors == []
    assert run.flits_checked == run.expected_flits_checked > 0
    assert run.flits_received == run.expected_flits_received
    if spec.in_switch:
        expected_received = {"all-reduce": 4 * 24, "reduce": 24, "multicast": 3 * 24}[op]
        assert run.flits_received == run.flits_checked == expected_received
        assert run.flits_sent == {"all-reduce": 96, "reduce": 96, "multicast": 24}[op]
    elif algorithm:   # chunks of 12 in the L1s, 6 across: 12 + 2 x 6 + 12 flits each way
        assert run.flits_sent == run.flits_received == 4 * 36
        assert run.flits_checked == 4 * (12 + 6 + 12)  # the partner's half, the results
        # fred-c: the two rings across on uplink ports 0 and 1 at once, each on its own L2
        # plane (planes 2 and 3 idle); fred-a: one port, the rings in turn on its one L2
        if fabric == "fred-c":
            assert run.phases == {"L1.0": 3, "L1.1": 3, "L2.0": 1, "L2.1": 1, "L2.2": 0, "L2.3": 0}
        else:
            assert run.phases == {"L1.0": 4, "L1.1": 4, "L2": 2}
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
    program.engines[3]["stages"][0]["send_count"] -= 1
    with pytest.raises(FredError, match=r"stalled: watchdog after \d+ cycles; not finished: "
                                        r"NPU 0 \(sent 16/16, received 15/16\).*NPU 3 \(sent 15/15"):
        run_program(spec, request, program, watchdog_cycles=3000, cflags="-O0")


# -- the paper's Fig. 9 cases on the 20-NPU fabrics -----------------------------------------

FIG9 = [dict(group="wafer", op="all-reduce"),
        dict(group="wafer", op="all-reduce", algorithm="hierarchical"),   # the model's choice on A/C
        dict(strategy="MP2-DP5-PP2", dim="mp", op="all-reduce"),
        dict(strategy="MP2-DP5-PP2", dim="dp", op="all-reduce"),
        dict(strategy="MP2-DP5-PP2", dim="pp", op="multicast")]


@pytest.mark.full
@pytest.mark.cocotb
@pytest.mark.parametrize("fabric", ["fred-a", "fred-b", "fred-c", "fred-d"])
@pytest.mark.parametrize("case", FIG9, ids=lambda c: c.get("dim", c.get("algorithm", "wafer")))
def test_fig9_cases_bit_exact_under_backpressure(fabric, case):
    from cocotb_tests.fabric.run import run_fabric
    case = dict(case)
    algorithm = case.pop("algorithm", None)
    if algorithm and fabric in ("fred-b", "fred-d"):
        pytest.skip("the hierarchical all-reduce is an endpoint algorithm (Fred-A/C)")
    spec = fabric_spec(fabric)
    request = make_request(spec, size_flits=64, **case)
    run = run_fabric(spec, request, algorithm=algorithm, sink_backpressure=0.25, seed=11)
    print(run.to_dict())
    assert run.errors == []
    assert run.flits_received == run.expected_flits_received > 0
    assert run.flits_checked == run.expected_flits_checked > 0


def test_a_ring_chunk_larger_than_the_npu_buffer_is_refused_before_building():
    from hdl.contracts.npu_engine import NPU_BUFFER
    spec = fabric_spec("fred-a")
    request = make_request(spec, op="all-reduce", size_flits=2 * NPU_BUFFER + 1,
                           strategy="MP2-DP5-PP2", dim="mp")
    with pytest.raises(FredError, match="chunks of 4097 flits; the RTL NPUs buffer 4096"):
        fabric_program(spec, request)
    ok = make_request(spec, op="all-reduce", size_flits=2 * NPU_BUFFER, strategy="MP2-DP5-PP2", dim="mp")
    assert fabric_program(spec, ok).engines[0]["stages"][0]["chunk"] == NPU_BUFFER


# -- hierarchical all-reduce (the system model's choice on Fred-A/C) --------------------------

def test_hierarchical_all_reduce_has_the_models_three_stages_and_link_loads():
    """sysmodel.collectives._fred_hierarchical: reduce-scatter ring in each L1 (chunks of
    S/4), all-reduce ring across the L1s of the members of local index i (S/4 cut in 5), then
    all-gather ring in each L1. Size 40: c2 = 2 flits, c1 = 10."""
    for name, l1_phases, l2_phases in (("fred-c", 3, [1] * 4), ("fred-a", 6, [4])):
        spec = fabric_spec(name)
        program = fabric_program(spec, make_request(spec, op="all-reduce", size_flits=40, group="wafer"),
                                 algorithm="hierarchical")
        assert program.phases == [l1_phases] * 5 + l2_phases    # fred-c: one phase on each L2 plane
        ring = [((0,), (1,)), ((1,), (2,)), ((2,), (3,)), ((3,), (0,))]
        flows = _flows(program, 2)
        assert sorted(flows[0]) == sorted(flows[-1]) == ring   # the L1's ring, first and last
        if name == "fred-c":   # local index i crosses on uplink port 4 + i: one phase
            assert sorted(flows[1]) == sorted([((i,), (4 + i,)) for i in range(4)]
                                              + [((4 + i,), (i,)) for i in range(4)])
            for i in range(4):   # the ring of local index i on L2 plane i (port j = L1 j)
                assert sorted(_flows(program, 5 + i)[0]) == sorted(((j,), ((j + 1) % 5,)) for j in range(5))
        else:                  # one uplink port: the four rings across take turns
            assert [sorted(p) for p in flows[1:5]] == [[((i,), (4,)), ((4,), (i,))] for i in range(4)]
        # each input port's flits per phase: 3 chunks of 10 in the L1 rings, 8 steps of 2 across
        assert [p.port_flits for p in program.switches[2]] == [30] + [16] * (l1_phases - 2) + [30]
        e = program.engines[6]            # L1 1, local index 2: owns chunk 3 after stage 0
        rs, ar, ag = e["stages"]
        assert (rs["send_count"], rs["own_only"], rs["add_until"], rs["fwd_count"], rs["check_from"]) == (
            30, 10, 30, 20, 20)
        assert (ar["org"], ar["out_base"], ar["in_base"], ar["chunk"], ar["last_base"]) == (30, 2, 0, 2, 8)
        assert (ag["out_base"], ag["in_base"], ag["own_only"], ag["add_until"], ag["check_from"]) == (
            30, 20, 10, 0, 0)
        w = [rank_weights(r)[0] for r in range(20)]
        l1_sum = sum(w[4:8]) & 0xFFFFFFFF
        assert rs["wr"] == (l1_sum - w[6]) & 0xFFFFFFFF     # the other three's sum of chunk 3
        assert ar["ws"] == l1_sum and ar["wr"] == ag["ws"] == ag["wr"] == sum(w) & 0xFFFFFFFF
        # link loads as the model's: 1.9 x S per NPU link (30 + 16 + 30 = 76 of 40), the
        # uplinks 4 x 16 flits each way (the model's 1.6 x S)
        assert e["send_count"] == 76 and program.flits_sent == 20 * 76
        assert sum(p.port_flits for p in program.switches[5]) * (1 if name == "fred-a" else 4) == 64


def test_hierarchical_needs_the_same_members_on_every_l1():
    spec = fabric_spec("fred-c")
    for kwargs in (dict(strategy="MP2-DP5-PP2", dim="dp"), dict(strategy="MP2-DP5-PP2", dim="mp")):
        with pytest.raises(FredError, match="hierarchical all-reduce needs the same number"):
            fabric_program(spec, make_request(spec, op="all-reduce", size_flits=8, **kwargs),
                           algorithm="hierarchical")
    ok = make_request(spec, op="all-reduce", size_flits=8, strategy="MP1-DP10-PP2", dim="dp")
    assert fabric_program(spec, ok, algorithm="hierarchical").phases[:5] == [3] * 5


def test_a_phase_sequencer_port_takes_only_its_share(program_and_start):
    """Amaranth simulation: phase 0 = ports 0 and 1, 3 flits each; a port offering flits all
    the time is let through exactly 3 times, then waits for phase 1 (port 1 only, 2 flits)."""
    from amaranth.sim import Simulator

    from hdl.designs.fabric.phase_sequencer import PhaseSequencer, sequencer_registers
    dut = PhaseSequencer(ports=3, phases=2)
    taken = {0: [], 1: []}

    async def bench(ctx):
        await program_and_start(ctx, dut, sequencer_registers(2, [(6, 3, 0b011), (2, 2, 0b010)]))
        for cycle in range(40):
            ctx.set(dut.select_ready, 1)
            # port 0 offers in every cycle, port 1 in every other, port 2 always (never used)
            offer = [1, cycle % 2, 1]
            allow = ctx.get(dut.allow)
            accepted = sum((offer[p] & (allow >> p) & 1) << p for p in range(3))
            ctx.set(dut.accepted, accepted)
            for p in (0, 1):
                if accepted >> p & 1:
                    taken[p].append(ctx.get(dut.index))
            await ctx.tick()
        assert ctx.get(dut.finished)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert taken == {0: [0, 0, 0], 1: [0, 0, 0, 1, 1]}


# -- fp16 data ---------------------------------------------------------------------------------

def test_fp16_engine_sends_the_golden_data_through_the_adder_and_hashes_what_it_receives(program_and_start):
    """Amaranth simulation of one fp16 engine looped back on itself (tx -> rx): it sends 12
    flits of its own data plus -0 through the project's reduction unit (x + -0 = x), and its
    hash of what it received is the golden model's hash of fp16_value data."""
    import numpy as np
    from amaranth.sim import Simulator

    from hdl.compiler.fabric_golden import own_data, stream_hash
    from hdl.contracts.npu_engine import engine_writes, fp16_value
    from hdl.contracts.flit import FlitFormat
    from hdl.designs.fabric.npu_engine import NpuEngine
    n, weights = 12, rank_weights(7, 2)
    engine = dict(backpressure=0, seed=1, stages=[dict(
        send_count=n, recv_count=n, ws=weights[0], hs=weights[1], wr=0, hr=0, own_only=n,
        add_until=0, fwd_count=0, check_from=0, chunk=0xFFFFFFFF, last_base=0, out_base=0,
        in_base=0, org=0)])
    dut = NpuEngine(FlitFormat(dtype="fp16", lanes=1, tag_width=1), buffer=16)
    seen = []

    async def bench(ctx):
        await program_and_start(ctx, dut, engine_writes(engine))
        for _ in range(60):
            valid, data, last = ctx.get(dut.tx.valid), ctx.get(dut.tx.payload.data), ctx.get(dut.tx.payload.last)
            ready = ctx.get(dut.rx.ready)
            ctx.set(dut.rx.valid, valid)
            ctx.set(dut.rx.payload.data, data)
            ctx.set(dut.rx.payload.last, last)
            ctx.set(dut.tx.ready, ready)
            if valid and ready:
                seen.append(data)
            await ctx.tick()
        assert ctx.get(dut.done) and ctx.get(dut.errors) == 0
        assert ctx.get(dut.hash) == stream_hash(own_data(weights, np.arange(n), 1))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen == [fp16_value(weights, k, 0) for k in range(n)]


def test_fp16_in_switch_golden_follows_the_configured_tree_and_the_order_matters():
    """fred-b wafer all-reduce: the golden stream of NPU 0 is L2's tree over the five L1s'
    trees (the routed configurations); the same numbers summed in rank order give other
    bits for some flits, so the hash would catch a switch adding in another order."""
    import numpy as np

    from hdl.contracts.dtypes import get_dtype
    from hdl.compiler.fabric_golden import own_data, received_streams
    spec = fabric_spec("fred-b", dtype="fp16")
    request = make_request(spec, op="all-reduce", size_flits=256, group="wafer")
    program = fabric_program(spec, request)
    streams = received_streams(spec, request, program)
    assert all((s == streams[0]).all() for s in streams)          # every member gets the sum
    dt = get_dtype("fp16")
    data = [own_data(rank_weights(r), np.arange(256), 1) for r in range(20)]
    in_order = data[0]
    for d in data[1:]:
        in_order = dt.add(in_order, d)
    exact = sum(d.view(np.float16).astype(np.float64) for d in data)
    golden = streams[0].view(np.float16).astype(np.float64)
    assert np.abs(golden - exact).max() < 20 * 8 * 2 ** -10          # a few ulps of the sum
    assert (in_order != streams[0]).any()                            # order shows in the bits
    assert program.expected_hashes[0] != program.expected_hashes[0] ^ 1
    assert program.flits_to_check == 20 * 256


def test_fp16_runs_fail_before_building_where_unsupported():
    spec = fabric_spec("fred-c", dtype="fp16")
    with pytest.raises(FredError, match="hierarchical all-reduce on int32 data only"):
        fabric_program(spec, make_request(spec, op="all-reduce", size_flits=8, group="wafer"),
                       algorithm="hierarchical")
    with pytest.raises(FredError, match="up to 2 lanes"):
        wide = fabric_spec("fred-d", dtype="fp16", lanes=4)
        fabric_program(wide, make_request(wide, op="all-reduce", size_flits=8, group="wafer"))
    with pytest.raises(FredError, match="run int32 and fp16 data; dtype bf16"):
        bf = fabric_spec("fred-d", dtype="bf16")
        fabric_program(bf, make_request(bf, op="all-reduce", size_flits=8, group="wafer"))


@pytest.mark.cocotb
@pytest.mark.parametrize("fabric, op, backpressure", [
    ("fred-d", "all-reduce", 0.3),     # the switches' fp16 adders, in their configured trees
    ("fred-c", "all-reduce", 0.3),     # ring: the engines' fp16 reduction units (same build)
    pytest.param("fred-b", "reduce", 0.3, marks=pytest.mark.full),
    pytest.param("fred-a", "reduce", 0.3, marks=pytest.mark.full),   # chain
])
def test_small_fp16_fabric_matches_the_golden_model(fabric, op, backpressure):
    from cocotb_tests.fabric.run import run_fabric, run_program
    spec = fabric_spec(fabric, dtype="fp16", **SMALL)
    request = make_request(spec, op=op, size_flits=24, group="wafer")
    run = run_fabric(spec, request, sink_backpressure=backpressure, seed=5, cflags="-O0")
    print(run.to_dict())
    assert run.errors == []
    assert run.flits_checked == run.flits_received == run.expected_flits_received > 0
    if fabric == "fred-d":   # a golden hash of other data (seed 6) must be reported as wrong
        program = fabric_program(spec, request, seed=5, sink_backpressure=backpressure)
        program.expected_hashes = fabric_program(spec, request, seed=6).expected_hashes
        bad = run_program(spec, request, program, seed=5, sink_backpressure=backpressure, cflags="-O0")
        assert len(bad.errors) == 4 and "the golden model's (in the configured addition order)" in bad.errors[0]
        assert bad.flits_checked == 0


def test_default_cflags_follow_the_fabrics_switch_ports():
    # -Os above OS_ABOVE_SWITCH_PORTS switch ports in all (docs/fabric_rtl.md, measured)
    from cocotb_tests.fabric.run import OS_ABOVE_SWITCH_PORTS, default_cflags
    assert OS_ABOVE_SWITCH_PORTS == 40
    assert default_cflags(fabric_spec("fred-b"), pgo=False) == "-O1"                  # 6 x 5 ports
    assert default_cflags(fabric_spec("fred-d"), pgo=False) == "-Os"                  # 5 x 8 + 4 x 5
    assert default_cflags(fabric_spec("fred-d", l2_planes=1), pgo=False) == "-Os"     # 5 x 8 + 20
    assert default_cflags(fabric_spec("fred-d", npus=4, npus_per_l1=2), pgo=False) == "-O1"   # 2 x 6 + 4 x 2
    # with profile-guided optimization (build_fabric's default) -O2 everywhere
    assert default_cflags(fabric_spec("fred-b")) == default_cflags(fabric_spec("fred-d")) == "-O2"


@pytest.mark.parametrize("simulator", ["lockstep", "cocotb"])
def test_build_fabric_compiles_with_pgo_unless_at_o0(monkeypatch, tmp_path, simulator):
    # the rule only (no build): PGO by default (at -O2), not for the tests' -O0 builds, and a
    # PGO build is a different cached build (its training named in the key)
    import eda.fabric.build as build
    import eda.fabric.lockstep as lockstep
    from cocotb_tests.fabric.run import TRAINING_FLITS, build_fabric
    calls = []

    def fake(verilog, *args, **kwargs):
        calls.append(kwargs)
        return tmp_path
    monkeypatch.setattr(build, "build_top_public_only", fake)
    monkeypatch.setattr(lockstep, "build_lockstep", fake)
    spec = fabric_spec("fred-b", **SMALL)
    build_fabric(spec, simulator=simulator)
    build_fabric(spec, "-O0", simulator=simulator)
    build_fabric(spec, "-O1", simulator=simulator)
    build_fabric(spec, pgo=False, simulator=simulator)
    assert [(c["cflags"], c["train"] is not None) for c in calls] == [
        ("-O2", True), ("-O0", False), ("-O1", True), ("-O1", False)]   # -O1: fred-b's size
    assert str(TRAINING_FLITS) in calls[0]["training"] and calls[1]["training"] == ""


@pytest.mark.full
@pytest.mark.cocotb
def test_a_pgo_build_trains_and_runs_the_same_cycles():
    # profile-guided optimization changes the machine code, never the model: the same run on a
    # PGO build and a plain one counts the same cycles and checks every flit
    from cocotb_tests.fabric.run import build_fabric, run_fabric
    spec = fabric_spec("fred-d", **SMALL)
    request = make_request(spec, op="all-reduce", size_flits=48, group="wafer")
    built, _ = build_fabric(spec, "-O1", pgo=True)
    assert list(built.rglob("*.gcda")), "the training run left no profile"
    assert "-fprofile-use" in (built / "build.log").read_text()
    runs = [run_fabric(spec, request, cflags="-O1", pgo=pgo, sink_backpressure=0.3, seed=2)
            for pgo in (True, False)]
    assert runs[0].build_dir != runs[1].build_dir
    assert runs[0].errors == runs[1].errors == []
    assert runs[0].cycles == runs[1].cycles
    assert runs[0].flits_checked == runs[1].flits_checked == runs[0].expected_flits_checked
