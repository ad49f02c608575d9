"""The one description of each collective algorithm (hdl/compiler/algorithms.py) drives both the
system model's traffic (sysmodel/collectives.py) and the RTL fabric's engine programs
(hdl/compiler/fabric_program.py): both are derived here from the same plan and checked to agree
on who sends how much to whom in which stage; changing the description changes both."""

import numpy as np
import pytest

from hdl.compiler import algorithms
from hdl.compiler.fabric_program import fabric_program
from hdl.contracts.fabric import fabric_spec, make_request
from sysmodel import collectives as model
from sysmodel.collectives import Collective, build_network, collective_traffic
from sysmodel.fabric_model import fabric_platform
from sysmodel.platform import default_platform

SIZE_FLITS = 40          # divisible by every ring's chunk count below: no padding flits


@pytest.fixture(scope="module")
def fabric():
    """(RTL spec, the model's network of the same fabric, flit bytes) per variant."""
    out = {}
    for name in ("fred-a", "fred-b", "fred-c"):
        spec = fabric_spec(name)
        platform, _ = fabric_platform(spec)
        out[name] = (spec, build_network(platform, name), platform.switch_at("l1").flit_bytes)
    return out


def _rtl_sends(program, stages: int) -> list[dict[int, float]]:
    """Per engine stage, the flits each sending NPU sends."""
    return [{r: float(e["stages"][s]["send_count"]) for r, e in enumerate(program.engines)
             if len(e["stages"]) > s and e["stages"][s]["send_count"]} for s in range(stages)]


def _model_sends(traffic, flit_bytes) -> dict[int, float]:
    return {r: float(v) / flit_bytes for r, v in enumerate(traffic.sent) if v}


def test_both_sides_see_the_same_tree(fabric):
    spec, net, _ = fabric["fred-a"]
    assert [spec.l1_of(r) for r in range(spec.npus)] == [net.l1_of(r) for r in range(net.npus)]


@pytest.mark.parametrize("variant, algorithm, group", [
    ("fred-a", "ring", dict(group="wafer")),
    ("fred-c", "ring", dict(strategy="MP2-DP5-PP2", dim="dp")),
    ("fred-a", "hierarchical", dict(group="wafer")),
    ("fred-c", "hierarchical", dict(strategy="MP1-DP10-PP2", dim="dp")),
])
def test_ring_plans_agree_per_stage(fabric, variant, algorithm, group):
    """Ring and hierarchical all-reduce: the RTL engines run one stage per plan stage, each rank
    sending what the plan says to its ring successor; the model's stages carry the same bytes,
    and its collective runs them one after another (at least the sum of their times)."""
    spec, net, flit = fabric[variant]
    request = make_request(spec, op="all-reduce", size_flits=SIZE_FLITS, **group)
    program = fabric_program(spec, request, algorithm=algorithm)
    size = SIZE_FLITS * flit
    for coll in request.collectives:
        members = coll.members
        plan = (algorithms.ring("all-reduce", members) if algorithm == "ring"
                else algorithms.hierarchical("all-reduce", members, spec.l1_of))
        assert plan.dependencies == [()] + [(s,) for s in range(len(plan.stages) - 1)]
        expected = plan.sends(SIZE_FLITS)
        rtl = _rtl_sends(program, len(plan.stages))
        stage_traffic = [model._ring_stage(net, stage, size) for stage in plan.stages]
        for s, stage in enumerate(plan.stages):
            assert {r: rtl[s][r] for r in members} == pytest.approx(expected[s])
            assert _model_sends(stage_traffic[s], flit) == pytest.approx(expected[s])
            for ring in stage.rings:     # who sends to whom, and in how many steps
                for src, dst in ring.hops():
                    regs = program.engines[dst]["stages"][s]
                    assert regs["sender"] == src
                    assert regs["send_count"] == ring.steps * regs["chunk"]
        assert len(program.engines[members[0]]["stages"]) == len(plan.stages)
        name, whole = collective_traffic(net, Collective("all-reduce", members, size), algorithm)
        assert name == algorithm
        totals = {r: sum(e.get(r, 0.0) for e in expected) for r in members}
        assert _model_sends(whole, flit) == pytest.approx(totals)
        if len(plan.stages) > 1:    # each stage waits for the one before
            assert whole.time() >= sum(t.time() for t in stage_traffic) * (1 - 1e-12)


@pytest.mark.parametrize("op", ["reduce", "multicast"])
def test_chain_plans_agree(fabric, op):
    spec, net, flit = fabric["fred-a"]
    request = make_request(spec, op=op, size_flits=SIZE_FLITS, strategy="MP4-DP5-PP1", dim="mp")
    program = fabric_program(spec, request, algorithm="chain")
    for coll in request.collectives:
        plan = algorithms.chain(op, coll.root, [r for r in coll.members if r != coll.root])
        chain = plan.stages[0]
        for src, dst in chain.hops():
            assert program.engines[dst]["stages"][0]["sender"] == src
        assert chain.flow()[-1 if op == "reduce" else 0] == coll.root
        expected = plan.sends(SIZE_FLITS)[0]
        assert {r: program.engines[r]["stages"][0]["send_count"] for r in expected} == expected
        group = coll.ranks
        _, t = collective_traffic(net, Collective(op, group, SIZE_FLITS * flit, root=coll.root), "chain")
        assert _model_sends(t, flit) == pytest.approx(expected)


@pytest.mark.parametrize("op, group", [("all-reduce", dict(group="wafer")),
                                       ("all-reduce", dict(strategy="MP4-DP5-PP1", dim="mp")),
                                       ("reduce", dict(group="wafer")),
                                       ("multicast", dict(strategy="MP2-DP5-PP2", dim="dp"))])
def test_in_switch_plans_agree(fabric, op, group):
    """Senders, receivers and the turning switch of an in-switch flow, on both sides. The one
    difference kept: the model's reduce root adds its own data without sending it."""
    spec, net, flit = fabric["fred-b"]
    request = make_request(spec, op=op, size_flits=SIZE_FLITS, **group)
    program = fabric_program(spec, request)
    for index, coll in enumerate(request.collectives):
        flow = algorithms.in_switch(op, coll.ranks, coll.root, spec.l1_of).stages[0]
        sending = {r for r in coll.ranks if program.engines[r]["stages"][0]["send_count"]}
        receiving = {r for r in coll.ranks if program.engines[r]["stages"][0]["recv_count"]}
        assert (sending, receiving) == (set(flow.senders), set(flow.receivers))
        _, t = collective_traffic(net, Collective(op, coll.ranks, SIZE_FLITS * flit, root=coll.root))
        assert set(_model_sends(t, flit)) == set(flow.senders) - ({flow.root} if op == "reduce" else set())
        switches = {s for s, phases in enumerate(program.switches) if any(index in p.collectives for p in phases)}
        model_switches = {node for node, _, _ in t.configurations}
        if flow.top is not None:     # the all-reduce turns round in its one L1
            assert switches == {flow.top} and model_switches == {net.l1_nodes[flow.top]}
        elif op == "all-reduce":
            assert spec.l1_count in switches and net.l2_node in model_switches


def test_mesh_2d_traffic_is_its_plans():
    """The mesh's hierarchical 2D on a square: both dimension orders send the same per member,
    what the plan says."""
    platform = default_platform()
    net = build_network(platform, "mesh")
    group = (0, 1, 4, 5)                 # rows 0-1, columns 0-1 of the 5x4 mesh
    rows = [[net.rank(r, c) for c in (0, 1)] for r in (0, 1)]
    plans = algorithms.mesh_2d("all-reduce", rows)
    assert [st.groups for st in plans[0].stages] == [rows, [[0, 4], [1, 5]], rows]
    name, t = collective_traffic(net, Collective("all-reduce", group, 1e6), "hierarchical-2d")
    for plan in plans:
        totals = {r: sum(s.get(r, 0.0) for s in plan.sends(1e6)) for r in group}
        assert dict(enumerate(t.sent)) == pytest.approx({r: totals.get(r, 0.0) for r in range(net.npus)})


def test_changing_the_ring_steps_changes_both(fabric, monkeypatch):
    """An all-reduce ring of n - 1 steps (a reduce-scatter's): the model sends half as much and
    the RTL engines count n - 1 chunks."""
    spec, net, flit = fabric["fred-a"]
    request = make_request(spec, op="all-reduce", size_flits=SIZE_FLITS, group="wafer")
    size = SIZE_FLITS * flit
    group = tuple(range(spec.npus))

    def observe():
        engine = fabric_program(spec, request, algorithm="ring").engines[0]["stages"][0]
        _, t = collective_traffic(net, Collective("all-reduce", group, size), "ring")
        return engine["send_count"] // engine["chunk"], float(t.sent[0])

    steps, sent = observe()
    original = algorithms.ring_steps
    monkeypatch.setattr(algorithms, "ring_steps",
                        lambda op, n: n - 1 if op == "all-reduce" else original(op, n))
    fewer, less = observe()
    n = spec.npus
    assert (steps, fewer) == (2 * (n - 1), n - 1)
    assert less == pytest.approx(sent / 2)


def test_changing_the_hierarchical_stages_changes_both(fabric, monkeypatch):
    """Drop the all-reduce across the L1s from the description: the RTL engines run two stages
    and no flow reaches the L2; the model's uplinks carry nothing."""
    spec, net, flit = fabric["fred-a"]
    request = make_request(spec, op="all-reduce", size_flits=SIZE_FLITS, group="wafer")
    group = tuple(range(spec.npus))
    uplinks = [l for l in range(net.n_links) if net.link_kind[l] == "l1-l2"]

    def observe():
        program = fabric_program(spec, request, algorithm="hierarchical")
        _, t = collective_traffic(net, Collective("all-reduce", group, SIZE_FLITS * flit), "hierarchical")
        return (len(program.engines[0]["stages"]), len(program.switches[spec.l1_count]),
                float(np.sum(t.loads[uplinks])))

    stages, l2_phases, uplink_bytes = observe()
    assert stages == 3 and l2_phases > 0 and uplink_bytes > 0
    monkeypatch.setitem(algorithms.TWO_LEVEL, "all-reduce",
                        (("reduce-scatter", "outer"), ("all-gather", "outer")))
    assert observe() == (2, 0, 0.0)
