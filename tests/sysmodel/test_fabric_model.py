"""The system model on the RTL fabric's platform (sysmodel.fabric_model; docs/fabric_rtl.md): hand-computed
cycle counts from the fabric's link rates and the measured switch timings it loads."""

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import engine_forward_cycles, fabric_spec, make_request

ENGINE_FORWARD_CYCLES = engine_forward_cycles("int32")
from sysmodel.fabric_model import fabric_platform, fabric_platform_toml, model_cycles
from sysmodel.platform import load_platform


@pytest.fixture(scope="module")
def platforms():
    return {name: fabric_platform(fabric_spec(name, npu_link_latency=2, uplink_latency=5))
            for name in ("fred-b", "fred-c", "fred-d")}


def _cycles(platform, level, field):
    timing = platform[0].switch_at(level)
    return getattr(timing, field)


def test_platform_file_has_the_fabrics_rates_and_latencies(platforms, tmp_path):
    platform, text = platforms["fred-b"]
    assert platform.npus == 20 and platform.npus_per_l1 == 4 and not platform.has_mesh
    assert platform.io_controllers == 0
    timing = platform.switch_at("l1")
    flit_per_s = timing.flit_bytes * timing.clock_mhz * 1e6
    assert platform.npu_send_gbps * 1e9 == pytest.approx(flit_per_s)
    assert platform.variant("fred-b").l1_l2_gbps * 1e9 == pytest.approx(flit_per_s / 2)
    assert platform.link_latency_s == pytest.approx(2 * timing.cycle_s)
    assert platform.l1_l2_latency_s == pytest.approx(5 * timing.cycle_s)
    assert timing.design == "Fred_3(5) int32" and platform.switch_at("l2").design == "Fred_3(5) int32"
    # Fred-D's L2 is four Fred_3(5) planes (FabricSpec.l2_planes): the model times the L2 level
    # with one plane's switch; a single-switch L2 with the Fred_3(20)
    assert platforms["fred-d"][0].switch_at("l2").design == "Fred_3(5) int32"
    assert "L2 4 planes x Fred_3(5)" in platforms["fred-d"][1]
    single, single_text = fabric_platform(fabric_spec("fred-d", l2_planes=1))
    assert single.switch_at("l2").design == "Fred_3(20) int32" and "L2 Fred_3(20)" in single_text
    # the text is a platform file the model's own reader accepts
    path = tmp_path / "p.toml"
    path.write_text(text)
    assert load_platform(path).variant("fred-b") == platform.variant("fred-b")


def test_in_switch_wafer_all_reduce(platforms):
    # every NPU link carries S flits once; an uplink of 4 flits/cycle carries S: S cycles. The
    # chain: NPU -> L1 -> L2 -> L1 -> NPU (2 NPU links of 2, 2 uplinks of 5, 2 L1s, the L2)
    platform = platforms["fred-d"]
    spec = fabric_spec("fred-d", npu_link_latency=2, uplink_latency=5)
    est = model_cycles(spec, make_request(spec, op="all-reduce", group="wafer", size_flits=400),
                       platform=platform)
    l1 = _cycles(platform, "l1", "first_flit_latency_cycles")
    l2 = _cycles(platform, "l2", "first_flit_latency_cycles")
    assert est.algorithm == "in-switch"
    assert est.bandwidth_cycles == pytest.approx(400)
    assert est.latency_cycles == pytest.approx(2 * 2 + 2 * 5 + 2 * l1 + l2)
    # one phase on every switch, selected on idle switches at the start, in parallel, while the
    # first flits travel: the L1s' copy overlaps the first NPU link (2), the L2's the way up to
    # it (2 + L1 + 5); what is left of the slower one delays the flits
    assert est.phases == 1
    copy1, copy2 = (_cycles(platform, lv, "select_copy_cycles") for lv in ("l1", "l2"))
    assert est.phase_cycles == pytest.approx(max(copy1 - 2, copy2 - (2 + l1 + 5), 0))
    assert est.cycles == pytest.approx(est.bandwidth_cycles + est.latency_cycles + est.phase_cycles)


def test_thin_uplinks_carry_every_crossing_group(platforms):
    # MP2-DP5-PP2 DP groups {i, i+4, ...}: one member on every L1, four groups per L1, all
    # crossing its one 1/2-flit/cycle uplink in-switch: 4 x S / (1/2) = 8 S cycles
    spec = fabric_spec("fred-b", npu_link_latency=2, uplink_latency=5)
    est = model_cycles(spec, make_request(spec, op="all-reduce", strategy="MP2-DP5-PP2", dim="dp",
                                          size_flits=100), platform=platforms["fred-b"])
    assert est.bandwidth_cycles == pytest.approx(800)
    assert est.busiest_link.count("l1") == 1 and "l2" in est.busiest_link
    # the four groups share the one uplink port, one flow per phase: four phases in turn, each
    # a select, each after the first a further pass of the chain (2 NPU links of 2, 2 uplinks
    # of 5, two L1s and the L2, all Fred_3(5))
    platform = platforms["fred-b"]
    one_pass = 2 * 2 + 2 * 5 + 3 * _cycles(platform, "l1", "first_flit_latency_cycles")
    select = _cycles(platform, "l1", "select_copy_cycles")
    first = max(select - 2, 0)      # the L1s' first select overlaps the first NPU link
    assert est.phases == 4
    assert est.latency_cycles == pytest.approx(one_pass)
    assert est.phase_cycles == pytest.approx(first + 3 * (select + one_pass))


def test_full_uplinks_give_each_crossing_group_its_own_port(platforms):
    # Fred-D: the four DP groups use the four uplink ports: one phase
    spec = fabric_spec("fred-d", npu_link_latency=2, uplink_latency=5)
    est = model_cycles(spec, make_request(spec, op="all-reduce", strategy="MP2-DP5-PP2", dim="dp",
                                          size_flits=100), platform=platforms["fred-d"])
    assert est.phases == 1 and est.bandwidth_cycles == pytest.approx(100)


def test_pp_multicast_stays_inside_an_l1(platforms):
    # rank 4d multicasts to 4d+2, 4d+3 on the same L1: one NPU link in, two out, S each
    spec = fabric_spec("fred-c", npu_link_latency=2, uplink_latency=5)
    platform = platforms["fred-c"]
    est = model_cycles(spec, make_request(spec, op="multicast", strategy="MP2-DP5-PP2", dim="pp",
                                          size_flits=64), platform=platform)
    assert est.algorithm == "chain"     # Fred-C: no in-switch multicast, a pipelined chain
    assert est.bandwidth_cycles == pytest.approx(64)
    # chain root -> 4d+2 -> 4d+3: two dependent hops through the L1, and 4d+2 sends on what it
    # receives (the engine's forwarding cycle)
    hop = 2 * 2 + _cycles(platform, "l1", "first_flit_latency_cycles")
    assert est.latency_cycles == pytest.approx(2 * hop + ENGINE_FORWARD_CYCLES)
    # the RTL's switches route unicasts as configured flows: their phase is selected at the
    # start, and the L1's copy delays the first flit by what is left after the first NPU link
    assert est.phases == 1
    assert est.phase_cycles == pytest.approx(max(_cycles(platform, "l1", "select_copy_cycles") - 2, 0))
    assert est.cycles == pytest.approx(64 + 2 * hop + ENGINE_FORWARD_CYCLES + est.phase_cycles)


def test_latency_bound_ring_walks_its_hops_with_a_forwarding_cycle_per_step(platforms):
    # Fred-C MP2-DP5-PP2 DP all-reduce, one member on every L1 (ranks d, d+4, .., d+16): a ring
    # of 5, every hop crossing the L2 (2 NPU links of 2, 2 uplinks of 5, L1, L2, L1). 8 flits
    # per member: 8 dependent steps of one 1-flit chunk each way (8 / 5 / 2 rounded up to a
    # flit), each step the hop plus the engine's forwarding cycle (the chunk takes 1 cycle:
    # latency-bound), then the last chunk's cycle
    spec = fabric_spec("fred-c", npu_link_latency=2, uplink_latency=5)
    platform = platforms["fred-c"]
    est = model_cycles(spec, make_request(spec, op="all-reduce", strategy="MP2-DP5-PP2", dim="dp",
                                          size_flits=8), platform=platform, algorithm="ring")
    l1, l2 = (_cycles(platform, lv, "first_flit_latency_cycles") for lv in ("l1", "l2"))
    hop = 2 * 2 + 2 * 5 + 2 * l1 + l2
    # the selects: the L1s' copy overlaps the first NPU link, the L2's the way up to it
    first = max(_cycles(platform, "l1", "select_copy_cycles") - 2,
                _cycles(platform, "l2", "select_copy_cycles") - (2 + l1 + 5), 0)
    assert est.cycles == pytest.approx(8 * (hop + ENGINE_FORWARD_CYCLES) + 1 + first)


@pytest.mark.parametrize("dtype", ["int32", "fp16"])
def test_engine_forwards_a_flit_after_its_forwarding_latency(dtype, program_and_start):
    # pins engine_forward_cycles to the RTL: an engine that only forwards (no data of its own)
    # sends a received flit engine_forward_cycles(dtype) cycles after it took it in
    from amaranth.sim import Simulator

    from hdl.contracts.npu_engine import engine_writes
    from hdl.contracts.flit import FlitFormat
    from hdl.designs.fabric.npu_engine import NpuEngine
    dut = NpuEngine(FlitFormat(dtype=dtype, lanes=1, tag_width=1), buffer=4)
    engine = dict(backpressure=0, seed=1, stages=[dict(
        send_count=1, recv_count=1, ws=0, hs=0, wr=0, hr=0, own_only=0, add_until=0, fwd_count=1,
        check_from=1, chunk=1, last_base=0, out_base=0, in_base=0, org=0)])
    seen = {}

    async def bench(ctx):
        await program_and_start(ctx, dut, engine_writes(engine))
        ctx.set(dut.tx.ready, 1)
        ctx.set(dut.rx.valid, 1)
        ctx.set(dut.rx.payload.last, 1)
        for cycle in range(20):
            _, _, rv, rr, tv = await ctx.tick().sample(dut.rx.valid, dut.rx.ready, dut.tx.valid)
            if rv and rr and "in" not in seen:
                seen["in"] = cycle
                ctx.set(dut.rx.valid, 0)
            if tv and "out" not in seen:
                seen["out"] = cycle

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen["out"] - seen["in"] == engine_forward_cycles(dtype), seen


def test_endpoint_ring_on_full_uplinks(platforms):
    # Fred-C wafer all-reduce: ring or hierarchical, whichever the model finds faster; either
    # way every NPU sends 2 (n-1)/n x S in total (n = 20 ring, or 4 then 5 then 4)
    spec = fabric_spec("fred-c", npu_link_latency=2, uplink_latency=5)
    est = model_cycles(spec, make_request(spec, op="all-reduce", group="wafer", size_flits=4000),
                       platform=platforms["fred-c"])
    assert est.algorithm in ("ring", "hierarchical")
    assert est.bandwidth_cycles >= 2 * 19 / 20 * 4000 - 1e-6


def test_toml_for_any_clock():
    text = fabric_platform_toml(fabric_spec("fred-a", npu_link_latency=3), clock_mhz=500.0, flit_bytes=8)
    assert "network_send_gbps = 4.0" in text and "latency_ns = 6.0" in text
    assert "l1_l2_gbps = 2.0" in text and "in_switch = false" in text


def test_unmeasured_switch_is_named():
    with pytest.raises(FredError, match=r"Fred_3\(5\) bf16.*fred characterize --ports 5"):
        fabric_platform(fabric_spec("fred-a", dtype="bf16"))


def test_negative_uplink_latency_is_rejected(tmp_path):
    text = fabric_platform_toml(fabric_spec("fred-a"), clock_mhz=1000.0, flit_bytes=512)
    path = tmp_path / "bad.toml"
    path.write_text(text.replace("l1_l2_latency_ns = 1.0", "l1_l2_latency_ns = -1.0"))
    with pytest.raises(FredError, match=r"bad\.toml: \[link\] l1_l2_latency_ns: expected a number >= 0, got -1\.0"):
        load_platform(path)


def test_a_named_algorithm_instead_of_the_fastest():
    # Fred-A wafer all-reduce: the model picks the faster of ring and hierarchical; naming the
    # ring gives the ring: 2 (n-1)/n x S over every NPU link, 2 (n-1) dependent steps
    spec = fabric_spec("fred-a")
    request = make_request(spec, op="all-reduce", group="wafer", size_flits=400)
    platform = fabric_platform(spec)
    own = model_cycles(spec, request, platform=platform)
    ring = model_cycles(spec, request, platform=platform, algorithm="ring")
    assert ring.algorithm == "ring" and own.cycles <= ring.cycles
    assert ring.bandwidth_cycles >= 2 * 19 / 20 * 400 - 1e-6
    with pytest.raises(FredError, match="'ring' does not apply"):
        d = fabric_spec("fred-d")
        model_cycles(d, make_request(d, op="all-reduce", group="wafer", size_flits=4), algorithm="ring")
    with pytest.raises(FredError, match="no 'tree' algorithm"):
        model_cycles(spec, request, platform=platform, algorithm="tree")


@pytest.mark.parametrize("name", ["fred-a", "fred-c"])
@pytest.mark.parametrize("size", [40, 4000])
def test_hierarchical_all_reduce_costs_its_three_stages_one_after_the_other(name, size):
    """docs/fabric_validation.md, step 7: each stage of the hierarchical all-reduce needs the
    previous one's result, so the model charges the sum of the stages, each evaluated alone
    (reduce-scatter rings in the L1s, all-reduce rings across the L1s on a quarter of the data,
    all-gather rings in the L1s), not their loads added per link and charged once."""
    from sysmodel.collectives import Collective, evaluate
    spec = fabric_spec(name)
    platform = fabric_platform(spec)
    timing = platform[0].switch_at("l1")
    k, l1s = spec.npus_per_l1, spec.l1_count
    locals_ = [list(range(k * j, k * j + k)) for j in range(l1s)]
    crosses = [[k * j + i for j in range(l1s)] for i in range(k)]
    nbytes = size * timing.flit_bytes
    stages = [[Collective("reduce-scatter", group=g, size=nbytes) for g in locals_],
              [Collective("all-reduce", group=g, size=nbytes / k) for g in crosses],
              [Collective("all-gather", group=g, size=nbytes) for g in locals_]]
    alone = [evaluate(platform[0], name, stage, algorithm="ring").time_s / timing.cycle_s
             for stage in stages]
    request = make_request(spec, op="all-reduce", size_flits=size, group="wafer")
    whole = model_cycles(spec, request, platform=platform, algorithm="hierarchical")
    assert whole.algorithm == "hierarchical"
    assert whole.cycles == pytest.approx(sum(alone), rel=1e-12)
    # the stages overlapped would cost less: every stage takes time, the sum more than any
    # (on Fred-A at 40 flits the rings across the L1s, taking turns on the one-port uplinks,
    # are 92 % of it: test_configured_rings_take_turns_on_an_uplinks_ports)
    assert min(alone) > 0 and max(alone) < sum(alone)


@pytest.mark.parametrize("size", [40, 4000])
def test_configured_rings_take_turns_on_an_uplinks_ports(size):
    """Circuit switches route a ring as configured flows: the compiler gives each ring crossing
    an L1's uplink port a phase there that holds the port for the ring's whole run
    (docs/fabric_validation.md, "Rings that take turns on the circuit fabric"). Four rings, each
    with one NPU per L1 (MP2-DP5-PP2's DP groups, the hierarchical all-reduce's middle stage):
    on Fred-A (one uplink port per L1) they run one after another, four times one ring alone
    plus the slowest select (L1 or L2) per later turn, at any size; on Fred-C (four ports per
    uplink) and on Fred-A's packet switches (online unicasts share a port packet by packet)
    at once, as before."""
    from sysmodel.collectives import Collective, build_network, evaluate
    results = {}
    for name, switch in (("fred-a", "circuit"), ("fred-c", "circuit"), ("fred-a", "packet")):
        spec = fabric_spec(name)
        platform = fabric_platform(spec, switch=switch)[0]
        k, l1s = spec.npus_per_l1, spec.l1_count
        nbytes = size * platform.switch_at("l1").flit_bytes
        rings = [Collective("all-reduce", group=tuple(k * j + i for j in range(l1s)), size=nbytes)
                 for i in range(k)]
        alone = max(evaluate(platform, name, [c], algorithm="ring").time_s for c in rings)
        result = evaluate(platform, name, rings, algorithm="ring")
        net = build_network(platform, name)
        select = max(net.switch_timing(node).phase_select_s for node in (net.l2_node, *net.l1_nodes))
        results[name, switch] = (alone, result, select)
    alone, result, select = results["fred-a", "circuit"]
    assert result.time_s == pytest.approx(4 * alone + 3 * select, rel=1e-12)
    # the turns' part of the latency: beyond the time the rings would take sharing the links
    assert 0 < result.ring_turns_s < result.latency_s
    assert result.time_s == result.bandwidth_time_s + result.latency_s
    for key in (("fred-c", "circuit"), ("fred-a", "packet")):
        alone, result, _ = results[key]
        assert result.time_s < 4 * alone     # sharing: the four rings' chains overlap
        assert result.ring_turns_s == 0.0


def test_header_selected_phases_add_each_switchs_select_along_the_path():
    """The packet fabric (``switch="packet"``: ``[fred] phase_select = "header"``): a switch
    selects the phase when the first header reaches it, so the selects add up along the path
    instead of overlapping the flits' travel, and every switch traversal adds the packet
    switch's input VC buffer. Fred-D wafer all-reduce (NPU -> L1 -> L2 -> L1 -> NPU): three
    traversals, two serial selects (the L1 going up, the L2; the L1 coming down selected itself
    for its own NPUs' packets long before); a group inside one L1: one of each."""
    spec = fabric_spec("fred-d")
    circuit, packet = fabric_platform(spec), fabric_platform(spec, switch="packet")
    assert 'phase_select = "header"' in packet[1] and 'phase_select = "start"' in circuit[1]
    l1, l2 = packet[0].switch_at("l1"), packet[0].switch_at("l2")
    # the shipped packet switch figures: idle select 10 = copy 8 + 2 control cycles; latency 27
    # = the circuit switch's 26 at the same point + 1 cycle of input buffer
    assert (l1.header_select_extra_cycles, l1.input_buffer_cycles) == (2.0, 1.0)
    select = {level: t.select_copy_cycles + t.header_select_extra_cycles for level, t in
              (("l1", l1), ("l2", l2))}
    wafer = make_request(spec, op="all-reduce", size_flits=40, group="wafer")
    before = model_cycles(spec, wafer, platform=circuit)
    after = model_cycles(spec, wafer, platform=packet)
    assert after.latency_cycles == pytest.approx(before.latency_cycles + 3 * l1.input_buffer_cycles)
    assert after.phase_cycles == pytest.approx(select["l1"] + select["l2"])
    assert after.bandwidth_cycles == before.bandwidth_cycles
    local = make_request(spec, op="all-reduce", size_flits=40, strategy="MP2-DP5-PP2", dim="mp")
    before, after = (model_cycles(spec, local, platform=p) for p in (circuit, packet))
    assert after.latency_cycles == pytest.approx(before.latency_cycles + l1.input_buffer_cycles)
    assert after.phase_cycles == pytest.approx(select["l1"])


def test_online_unicasts_on_packet_switches_pay_the_default_index_select_and_path_set_ups():
    """Rings and chains on the packet fabric (``unicast_routing = "online"`` with header
    selects): the first packet at each switch selects the default index (measured 4 cycles),
    in series along a path, and a switch sets up one path per cycle. Fred-A MP all-reduce of
    NPUs 0, 1 (one L1, two paths at once): 4 + 1 cycles; the PP chain 0 -> 2 -> 3 (one L1, two
    paths): the same; the circuit fabric (configured flows) is unchanged by it."""
    spec = fabric_spec("fred-a")
    packet = fabric_platform(spec, switch="packet")
    l1 = packet[0].switch_at("l1")
    assert (l1.online_select_cycles, l1.online_path_setup_cycles) == (4.0, 1.0)
    for dim, op in (("mp", "all-reduce"), ("pp", "multicast")):
        request = make_request(spec, op=op, size_flits=40, strategy="MP2-DP5-PP2", dim=dim)
        est = model_cycles(spec, request, platform=packet)
        assert est.phase_cycles == pytest.approx(4 + 1) and est.phases == 1
    # without the measured figures (an older characterization): nothing charged
    from dataclasses import replace
    plat = packet[0]
    bare = replace(plat, switch=replace(l1, online_select_cycles=None, online_path_setup_cycles=None),
                   l2_switch=replace(plat.switch_at("l2"), online_select_cycles=None,
                                     online_path_setup_cycles=None))
    request = make_request(spec, op="all-reduce", size_flits=40, strategy="MP2-DP5-PP2", dim="mp")
    assert model_cycles(spec, request, platform=(bare, packet[1])).phase_cycles == 0


def test_header_selected_phases_need_the_packet_switch_figures():
    from dataclasses import replace
    spec = fabric_spec("fred-d")
    timing = replace(fabric_platform(spec)[0].switch_at("l1"), header_select_extra_cycles=None)
    with pytest.raises(FredError, match=r"fred characterize --packet-switch"):
        timing.header_select_s
    with pytest.raises(FredError, match=r"switch must be one of circuit, packet"):
        fabric_platform_toml(spec, clock_mhz=1000, flit_bytes=4, switch="wormhole")


def test_the_platform_has_the_rtl_fabrics_io_controllers_and_none_without():
    """The fabric platform writes the RTL's controllers (count, rate) and nothing for a fabric
    without them, so every other fabric case is timed as before."""
    from fractions import Fraction
    plain = fabric_platform_toml(fabric_spec("fred-b"), clock_mhz=1000, flit_bytes=512)
    assert "[io]" not in plain
    text = fabric_platform_toml(fabric_spec("fred-b", io_controllers=3, io_rate=Fraction(1, 4)),
                                clock_mhz=1000, flit_bytes=512)
    assert "controllers = 3" in text and "controller_gbps = 128.0" in text   # 512 GBps / 4
