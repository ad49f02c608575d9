"""Router: exhaustive partitions of 8 ports, random flow sets up to P = 64, an independent
reference router, a brute force over the whole configuration space of Fred_2(4), errors."""

import itertools
import random
from collections import Counter
from functools import lru_cache

import pytest

from hdl.contracts.errors import FredError
from hdl.compiler import (Flow, InputMode, OutputMode, RDMode, Router, SwitchConfig, check_config,
                          check_numeric, layout, parse_flows, route, symbolic)
from hdl.compiler.functional import leaves
from hdl.compiler.routability import (bell_number, partition_flows, random_flow_set,
                                      random_partition, set_partitions)


# -- an independent reference: plain enumeration of colourings, no symmetry breaking, no
#    backjumping, no nogoods (only the model: one middle subnetwork per flow per level) ---------
@lru_cache(maxsize=None)
def reference_routable(ports: int, middle: int, flows: tuple) -> bool:
    if ports == 2 or len(flows) <= 1:
        return True
    n = len(flows)
    proj = [(frozenset(p // 2 for p in i), frozenset(p // 2 for p in o)) for i, o in flows]
    conflict = [[j != k and bool(proj[j][0] & proj[k][0] or proj[j][1] & proj[k][1])
                 for k in range(n)] for j in range(n)]
    colour = [0] * n

    def go(j):
        if j == n:
            return all(reference_routable((ports + 1) // 2, middle, tuple(sorted(
                (tuple(sorted(proj[x][0])), tuple(sorted(proj[x][1])))
                for x in range(n) if colour[x] == c))) for c in range(middle))
        for c in range(middle):
            if not any(conflict[j][k] and colour[k] == c for k in range(j)):
                colour[j] = c
                if go(j + 1):
                    return True
        return False

    return go(0)


def _key(flows):
    return tuple(sorted((f.inputs, f.outputs) for f in flows))


def _check_result(result, flows, numeric=False, rng=None):
    assert sorted(map(str, (f for p in result.phases for f in p.flows))) == sorted(map(str, flows))
    for phase in result.phases:
        assert check_config(phase.config, phase.flows) == []
        if numeric:
            assert check_numeric(phase.config, phase.flows, dtype="int32", rng=rng) == []
            assert check_numeric(phase.config, phase.flows, dtype="fp16", rng=rng) == []
    if result.routable_in_one_phase:
        assert len(result.phases) == 1
    else:
        assert len(result.phases) >= 2


@pytest.mark.parametrize("middle", [2, 3])
def test_all_partitions_of_8_ports(middle):
    """All 4,140 partitions of 8 ports: verdicts equal the reference, every phase checked."""
    partitions = list(set_partitions(range(8)))
    assert len(partitions) == 4140 == bell_number(8)
    router = Router(ports=8, middle=middle)
    phases = Counter()
    for partition in partitions:
        flows = partition_flows(partition)
        result = router.route(flows)
        assert result.one_phase in ("routed", "impossible")  # never left undecided
        assert result.routable_in_one_phase == reference_routable(8, middle, _key(flows)), partition
        if not result.routable_in_one_phase:
            assert result.lower_bound == 2
        _check_result(result, flows)
        phases[len(result.phases)] += 1
    assert sum(phases.values()) == 4140
    if middle == 2:
        assert phases[2] > 0  # e.g. an odd cycle of groups: measured, not assumed (see docs)


@pytest.mark.parametrize("ports,middle,count", [(16, 2, 40), (16, 3, 40), (32, 3, 25),
                                                (32, 4, 15), (64, 2, 10), (64, 3, 10), (64, 4, 6)])
def test_random_partitions(ports, middle, count):
    rng = random.Random(ports * 10 + middle)
    router = Router(ports=ports, middle=middle)
    nprng = __import__("numpy").random.default_rng(ports + middle)
    for _ in range(count):
        flows = partition_flows(random_partition(ports, rng))
        result = router.route(flows)
        _check_result(result, flows, numeric=True, rng=nprng)


@pytest.mark.parametrize("ports,middle,count", [(16, 2, 40), (16, 3, 40), (32, 3, 25),
                                                (64, 2, 10), (64, 3, 10), (64, 4, 6)])
def test_random_general_flow_sets(ports, middle, count):
    rng = random.Random(ports * 100 + middle)
    router = Router(ports=ports, middle=middle)
    nprng = __import__("numpy").random.default_rng(ports * middle)
    unequal = 0
    for _ in range(count):
        flows = random_flow_set(ports, rng)
        unequal += any(len(f.inputs) != len(f.outputs) for f in flows)
        result = router.route(flows)
        _check_result(result, flows, numeric=True, rng=nprng)
    assert unequal > count // 2


@pytest.mark.parametrize("ports,middle", [(16, 2), (16, 3), (32, 2)])
def test_random_verdicts_match_reference(ports, middle):
    rng = random.Random(7 + ports + middle)
    router = Router(ports=ports, middle=middle)
    for i in range(30):
        flows = (partition_flows(random_partition(ports, rng)) if i % 2
                 else random_flow_set(ports, rng))
        config, status = router.try_one_phase(flows)
        assert status != "search-bound"
        assert (config is not None) == reference_routable(ports, middle, _key(flows)), flows


def test_backtracking_routes_what_the_first_colouring_cannot():
    # Found by comparing Router(backtrack=False) with the default over random partitions.
    flows = parse_flows("0>0; 1,4,6,8,9>1,4,6,8,9; 2,12>2,12; 3>3; 5,7>5,7; "
                        "10,11,14>10,11,14; 13>13; 15>15")
    greedy = Router(ports=16, middle=2, backtrack=False).try_one_phase(flows)
    assert greedy[0] is None
    config, status = Router(ports=16, middle=2).try_one_phase(flows)
    assert status == "routed" and check_config(config, flows) == []


def test_unicast_permutations_rearrangeable_at_m2():
    """Fred_2(P) has Benes connectivity: every permutation routes in one phase."""
    rng = random.Random(3)
    for ports in (8, 16, 64):
        router = Router(ports=ports, middle=2)
        for _ in range(10):
            dst = list(range(ports))
            rng.shuffle(dst)
            flows = [Flow((s,), (d,)) for s, d in enumerate(dst)]
            config, status = router.try_one_phase(flows)
            assert status == "routed" and check_config(config, flows) == []


def test_odd_cycle_needs_two_phases_at_m2():
    flows = parse_flows("0,3>0,3; 1,4>1,4; 2,5>2,5")  # groups pairwise share a microswitch
    result = route(ports=8, middle=2, flows=flows)
    assert result.one_phase == "impossible" and len(result.phases) == 2 and result.optimal
    assert route(ports=8, middle=3, flows=flows).routable_in_one_phase
    with pytest.raises(FredError, match="cannot be routed in one phase"):
        route(ports=8, middle=2, flows=flows, split=False)


def test_search_bound_reported():
    rng = random.Random(5)
    flows = partition_flows(random_partition(64, rng))
    assert len(flows) > 5
    router = Router(ports=64, middle=3, budget=3, split_budget=3)
    config, status = router.try_one_phase(flows)
    assert config is None and status == "search-bound"
    result = router.route(flows)  # falls back to phases; lower bound stays 1 (nothing proven)
    assert result.lower_bound == 1 and len(result.phases) >= 2
    _check_result(result, flows)


def _all_modes(kind, middle):
    cls = {"input": InputMode, "output": OutputMode, "rd": RDMode}[kind]
    width = cls.width(middle)
    modes = []
    for value in range(1 << width):
        try:
            modes.append(cls.unpack(value, middle))
        except FredError:
            pass
    return modes


def _rd_outputs(wires, rds):
    """Brute-force model of the two RD microswitches of a Fred_2(4)-like core: ``wires[k]`` =
    the (in0, in1) values (tuples of source ports, or None) reaching RD k. Returns each RD's
    (out0, out1) values, or None if a configuration sums a missing operand or drops a value."""
    sub_out = []
    for (x0, x1), rd in zip(wires, rds):
        sel = {0: None, 1: x0, 2: x1,
               3: None if x0 is None or x1 is None else tuple(sorted(x0 + x1))}
        if 3 in (rd.out0, rd.out1) and sel[3] is None:
            return None  # a sum missing an operand
        if (x0 is not None and not {1, 3} & {rd.out0, rd.out1}) or \
                (x1 is not None and not {2, 3} & {rd.out0, rd.out1}):
            return None  # a value lost in the RD microswitch
        sub_out.append((sel[rd.out0], sel[rd.out1]))
    return sub_out


def _flow_set_of(outputs):
    """The flow set output port values realise (value = tuple of source ports), as the sorted
    ((inputs), (outputs)) key of ``_flow_sets``; None if nothing arrives or an input feeds two
    different flows."""
    groups = {}
    for port, value in enumerate(outputs):
        if value is not None:
            groups.setdefault(value, []).append(port)
    inputs = [p for key in groups for p in key]
    if groups and len(inputs) == len(set(inputs)):
        return tuple(sorted((k, tuple(v)) for k, v in groups.items()))
    return None


def _flow_sets(ports):
    """Every set of flows on ``ports`` ports with disjoint inputs and disjoint outputs."""
    owners = list(itertools.product(range(ports + 1), repeat=ports))  # 0 = idle, else flow id
    seen = set()
    for ins in owners:
        for outs in owners:
            flows = []
            for f in range(1, ports + 1):
                i = tuple(p for p in range(ports) if ins[p] == f)
                o = tuple(p for p in range(ports) if outs[p] == f)
                if bool(i) != bool(o):
                    break
                if i:
                    flows.append((i, o))
            else:
                key = tuple(sorted(flows))
                if key and key not in seen:
                    seen.add(key)
                    yield key


def test_model_complete_fred2_4_bruteforce():
    """Every configuration of Fred_2(4) (9*9*12*12 input/RD modes x 3^4 output choices),
    evaluated by a small independent evaluator: the flow sets that some configuration
    realises (no value lost, every output gets each of its inputs once) are exactly the
    flow sets the router routes in one phase, so the one-subnetwork-per-flow model of the
    router loses nothing."""
    middle, ports = 2, 4
    ins, rds = _all_modes("input", middle), _all_modes("rd", middle)
    assert (len(ins), len(rds), len(_all_modes("output", middle))) == (9, 12, 9)
    realisable = set()
    for i0, i1, r0, r1 in itertools.product(ins, ins, rds, rds):
        wires = [[None, None], [None, None]]  # wires[k][u]
        for u, mode in enumerate((i0, i1)):
            a, b = (2 * u,), (2 * u + 1,)
            if mode.reduce:
                wires[mode.in0_wire][u] = a + b
            else:
                if mode.in0_en:
                    wires[mode.in0_wire][u] = a
                if mode.in1_en:
                    wires[mode.in1_wire][u] = b
        sub_out = _rd_outputs(wires, (r0, r1))
        if sub_out is None:
            continue
        for choice in itertools.product((None, 0, 1), repeat=4):  # wire taken by each port
            outputs = [None if choice[p] is None else sub_out[choice[p]][p // 2] for p in range(4)]
            lost = any(sub_out[k][v] is not None and k not in (choice[2 * v], choice[2 * v + 1])
                       for k in range(2) for v in range(2))
            if lost:
                continue
            flow_set = _flow_set_of(outputs)
            if flow_set is not None:
                realisable.add(flow_set)
    router = Router(ports=ports, middle=middle)
    routed = set()
    for key in _flow_sets(ports):
        config, _ = router.try_one_phase([Flow(i, o) for i, o in key])
        if config is not None:
            assert check_config(config, [Flow(i, o) for i, o in key]) == []
            routed.add(key)
    assert len(routed) > 100
    assert routed == realisable


@pytest.mark.parametrize("ports", [8, 16, 32, 64])
def test_every_3d_placement_routes_in_one_phase_at_m3(ports):
    """Acceptance (docs/routability.md): with m = 3 every traffic phase of every 3D-parallel placement of
    N <= P NPUs (every factorisation N = MP x DP x PP) routes in one phase."""
    from hdl.compiler.routability import placement_report
    router_failures = []
    for npus in range(2, ports + 1):
        for entry in placement_report(ports=ports, middle=3, npus=npus):
            if not entry["all_one_phase"]:
                router_failures.append((npus, entry["placement"]))
    assert router_failures == []


def test_placement_explanation_at_m2():
    from hdl.compiler.routability import explain, placement_traffic
    from hdl.contracts.placement import Strategy
    flows = placement_traffic(Strategy(mp=1, dp=4, pp=5))["dp-allreduce"]  # 20 NPUs on Fred_2(32)
    why = explain(flows, ports=32, middle=2)
    assert not why["routable"] and len(why["core"]) == 5 and "odd cycle" in why["reason"]
    deeper = explain(placement_traffic(Strategy(mp=1, dp=2, pp=7))["dp-allreduce"], ports=32, middle=2)
    assert "forced" in deeper["reason"] and "in mid[0] (a Fred_2(16))" in deeper["reason"]
    assert "odd cycle" in deeper["reason"]
    spread = explain(placement_traffic(Strategy(mp=1, dp=2, pp=10))["dp-allreduce"], ports=32, middle=2)
    assert "valid 2-colourings" in spread["reason"]
    assert explain(flows, ports=32, middle=3) == {"routable": True}


@pytest.mark.full
@pytest.mark.parametrize("ports,middle", [(16, 2), (16, 3), (32, 2), (32, 3), (32, 4),
                                          (64, 2), (64, 3), (64, 4)])
def test_random_flow_sets_long(ports, middle):
    rng = random.Random(1000 + ports + middle)
    nprng = __import__("numpy").random.default_rng(ports * middle + 1)
    router = Router(ports=ports, middle=middle)
    for i in range(300):
        flows = partition_flows(random_partition(ports, rng)) if i % 2 else random_flow_set(ports, rng)
        result = router.route(flows)
        assert result.one_phase != "search-bound"
        assert result.routable_in_one_phase == reference_routable(ports, middle, _key(flows))
        _check_result(result, flows, numeric=(i % 10 == 0), rng=nprng)


@pytest.mark.full
def test_all_partitions_of_8_ports_m4():
    router = Router(ports=8, middle=4)
    for partition in set_partitions(range(8)):
        flows = partition_flows(partition)
        result = router.route(flows)
        assert result.routable_in_one_phase == reference_routable(8, 4, _key(flows))
        _check_result(result, flows)


def test_exact_split_proves_three_phases():
    # Conflict graph K5 (every pair of flows shares an input or output microswitch): at
    # m = 2 any three flows form a triangle, so no two phases suffice.
    flows = parse_flows("0,2,4>0; 6,8,10>1; 1,7,12>2; 3,9,14>3; 5,11,13,15>4")
    result = route(ports=16, middle=2, flows=flows)
    assert len(result.phases) == 3 and result.lower_bound == 3 and result.optimal
    assert "proved optimal" in result.method
    _check_result(result, flows)
    result = route(ports=16, middle=2, flows=flows, exact_checks=0)
    assert result.lower_bound == 2 and len(result.phases) == 3 and not result.optimal


def test_fred2_4_partitions_route_but_some_general_sets_do_not():
    """Measured (and proven by the brute force above): at P = 4, m = 2 all 15 all-reduce
    partitions route in one phase; the first 2-phase partitions appear at P = 8. General
    flow sets can need 2 phases already at P = 4."""
    router = Router(ports=4, middle=2)
    assert all(router.try_one_phase(partition_flows(p))[0] is not None for p in set_partitions(range(4)))
    flows = parse_flows("1>0,2; 2>1; 3>3")
    result = router.route(flows)
    assert result.one_phase == "impossible" and len(result.phases) == 2


@pytest.mark.parametrize("middle", [5, 8, 9])
def test_larger_m(middle):
    """Any m >= 2: wider wire fields (w = 3, 3, 4 bits) route, check and round-trip."""
    rng = random.Random(middle)
    router = Router(ports=16, middle=middle)
    for i in range(10):
        flows = random_flow_set(16, rng) if i % 2 else partition_flows(random_partition(16, rng))
        result = router.route(flows)
        _check_result(result, flows)
        for phase in result.phases:
            assert SwitchConfig.decode(phase.config.encode(), ports=16, middle=middle) == phase.config


# -- non-power-of-two P (compiler extension; the RTL implements powers of two only) -----------
def test_model_complete_fred2_3_bruteforce():
    """Every configuration of Fred_2(3) (in[0] x demux x 2 RDs x out[0] x mux) with an
    independent evaluator: realisable flow sets == flow sets the router routes."""
    ins, rds = _all_modes("input", 2), _all_modes("rd", 2)
    realisable = set()
    for i0, dm_en, dm_wire, r0, r1 in itertools.product(ins, (0, 1), (0, 1), rds, rds):
        if not dm_en and dm_wire:
            continue
        wires = [[None, None], [None, None]]  # wires[k][sub-port]: 0 from in[0], 1 from demux
        if i0.reduce:
            wires[i0.in0_wire][0] = (0, 1)
        else:
            if i0.in0_en:
                wires[i0.in0_wire][0] = (0,)
            if i0.in1_en:
                wires[i0.in1_wire][0] = (1,)
        if dm_en:
            wires[dm_wire][1] = (2,)
        sub_out = _rd_outputs(wires, (r0, r1))
        if sub_out is None:
            continue
        for choice in itertools.product((None, 0, 1), repeat=3):  # ports 0, 1 via out[0]; 2 via mux
            outputs = [None if choice[p] is None else sub_out[choice[p]][0 if p < 2 else 1]
                       for p in range(3)]
            if any(sub_out[k][0] is not None and k not in choice[:2] for k in range(2)) or \
                    any(sub_out[k][1] is not None and k != choice[2] for k in range(2)):
                continue
            flow_set = _flow_set_of(outputs)
            if flow_set is not None:
                realisable.add(flow_set)
    router = Router(ports=3, middle=2)
    routed = set()
    for key in _flow_sets(3):
        flows = [Flow(i, o) for i, o in key]
        config, _ = router.try_one_phase(flows)
        if config is not None:
            assert check_config(config, flows) == []
            routed.add(key)
    assert len(routed) > 20 and routed == realisable


@pytest.mark.parametrize("ports", [3, 5, 6, 7])
@pytest.mark.parametrize("middle", [2, 3])
def test_all_partitions_non_power_of_two(ports, middle):
    router = Router(ports=ports, middle=middle)
    for partition in set_partitions(range(ports)):
        flows = partition_flows(partition)
        result = router.route(flows)
        assert result.routable_in_one_phase == reference_routable(ports, middle, _key(flows))
        _check_result(result, flows)


@pytest.mark.parametrize("ports,middle", [(10, 2), (12, 3), (20, 3), (24, 2), (48, 3)])
def test_random_non_power_of_two(ports, middle):
    rng = random.Random(ports + 100 * middle)
    nprng = __import__("numpy").random.default_rng(ports)
    router = Router(ports=ports, middle=middle)
    for i in range(16):
        flows = random_flow_set(ports, rng) if i % 2 else partition_flows(random_partition(ports, rng))
        result = router.route(flows)
        assert result.routable_in_one_phase == reference_routable(ports, middle, _key(flows))
        _check_result(result, flows, numeric=(i % 4 == 0), rng=nprng)


@pytest.mark.parametrize("ports", [10, 12, 20])
def test_paper_sizes_route_every_placement_at_m3(ports):
    """The paper's chiplets Fred_3(12), Fred_3(10) and a 20-port switch for its 20 NPUs."""
    from hdl.compiler.routability import placement_report
    assert all(entry["all_one_phase"] for entry in placement_report(ports=ports, middle=3))


def test_phase_count_equals_the_routed_phases():
    """``phase_count`` (what the system model asks: no SwitchConfig made) is ``len(route(...).phases)``
    on random general flow sets and partitions that need one to several phases, on the odd
    cycle (2 at m = 2) and K5 (3) cases, and under a search bound small enough to split."""
    from hdl.compiler import phase_count
    counts = Counter()
    for ports, middle in ((8, 2), (16, 2), (16, 3), (32, 2)):
        rng = random.Random(11 * ports + middle)
        for i in range(12):
            flows = partition_flows(random_partition(ports, rng)) if i % 3 == 0 else random_flow_set(ports, rng)
            expected = len(route(ports=ports, middle=middle, flows=flows).phases)
            assert phase_count(ports=ports, middle=middle, flows=flows) == expected, flows
            counts[expected] += 1
    assert counts[1] and sum(n for k, n in counts.items() if k > 1)   # both kinds were seen
    assert phase_count(ports=8, middle=2, flows=parse_flows("0,3>0,3; 1,4>1,4; 2,5>2,5")) == 2
    assert phase_count(ports=16, middle=2,
                       flows=parse_flows("0,2,4>0; 6,8,10>1; 1,7,12>2; 3,9,14>3; 5,11,13,15>4")) == 3
    flows = partition_flows(random_partition(64, random.Random(5)))
    bounded = [Router(ports=64, middle=3, budget=3, split_budget=3) for _ in range(2)]
    assert bounded[0].phase_count(flows) == len(bounded[1].route(flows).phases) > 1
    with pytest.raises(FredError):
        phase_count(ports=8, middle=2, flows=parse_flows("0>0; 0>1"))   # bad input: port 0 twice
