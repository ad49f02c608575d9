"""One phase active at a time per FRED switch (sysmodel/switch_phases.py; shared spec FRED.md
section 2): hand-computed cases on a star of one switch (or two) and four NPUs, run on both
engine loops, and the pseudo-links on the real fabrics."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sysmodel.collectives import Collective, build_network, evaluate
from sysmodel.engine import Engine
from sysmodel.network import Network
from sysmodel.platform import default_platform
from sysmodel.switch_phases import collective_links, switch_links, transfer_links
from sysmodel.training import FRED_PRIORITY

ON = SimpleNamespace(one_phase_per_switch=True)
OFF = SimpleNamespace(one_phase_per_switch=False)
PREEMPT = 0.1
SWITCHES = frozenset({4, 5})      # the star's switch nodes: every transfer stores a phase there


class _Star(Network):
    """NPUs 0..3; switch s0 serves NPUs 0-3 (``split``: s0 serves 0, 1 and s1 serves 2, 3);
    every link 1 byte/s each way."""

    kind = "fred"

    def __init__(self, split: bool = False):
        super().__init__("star", 4)
        s0 = self.add_node("s0", "switch")
        s1 = self.add_node("s1", "switch") if split else s0
        for npu in range(4):
            self.add_duplex(npu, s0 if npu < 2 else s1, 1.0, 1.0, 0.0, "npu")
        self.finalize()


def _loads(net, *pairs) -> np.ndarray:
    """1 byte from each (src, dst) NPU pair along its route through the switch."""
    loads = np.zeros(net.n_links)
    for src, dst in pairs:
        s = next(b for a, b in net.link_id if a == src)     # the NPU's switch
        loads[net.link_id[(src, s)]] += 1.0
        loads[net.link_id[(s, dst)]] += 1.0
    return loads


def _run(net, platform, transfers, *, reference):
    """``transfers``: (name, category, loads, start delay) each 1 s of bytes alone; returns
    each one's end."""
    eng = Engine(priority=FRED_PRIORITY, preempt_s=PREEMPT)
    for name, category, loads, delay in transfers:
        deps = [eng.add(f"{name} wait", f"{name}.compute", delay)] if delay else []
        held, bw = transfer_links(platform, net, loads, net.link_bw, SWITCHES)
        eng.add(name, f"{name}.comm", 1.0, deps, category=category, loads=held, bw=bw)
    return {t.name: t.end for t in eng.run(reference=reference).tasks if "wait" not in t.name}


@pytest.mark.parametrize("reference", [False, True])
def test_a_transfer_alone_is_unchanged(reference):
    net = _Star()
    held, bw = transfer_links(ON, net, _loads(net, (0, 1)), net.link_bw, SWITCHES)
    assert len(held) == net.n_links + 1 and held[-1] == pytest.approx(1.0) and bw[-1] == 1.0
    assert _run(net, ON, [("mp", "mp", _loads(net, (0, 1)), 0.0)], reference=reference) == \
        pytest.approx({"mp": 1.0})


@pytest.mark.parametrize("reference", [False, True])
def test_two_classes_on_disjoint_links_of_one_switch_take_turns(reference):
    # DP 0 -> 1 from 0, MP 2 -> 3 from 0.5: no link in common. The switch serves MP from 0.5
    # (its bytes through at 1.5, plus one preemption as latency: 1.6); DP stops from 0.5 to
    # 1.5 and moves its last half by 2.0
    net = _Star()
    transfers = [("dp", "dp", _loads(net, (0, 1)), 0.0), ("mp", "mp", _loads(net, (2, 3)), 0.5)]
    assert _run(net, ON, transfers, reference=reference) == pytest.approx({"dp": 2.0, "mp": 1.6})
    # links shared only (the what-if): nothing in common, both at full speed, no preemption
    assert _run(net, OFF, transfers, reference=reference) == pytest.approx({"dp": 1.0, "mp": 1.5})


@pytest.mark.parametrize("reference", [False, True])
def test_two_transfers_of_one_class_share_the_switch_time(reference):
    net = _Star()
    transfers = [("a", "dp", _loads(net, (0, 1)), 0.0), ("b", "dp", _loads(net, (2, 3)), 0.0)]
    assert _run(net, ON, transfers, reference=reference) == pytest.approx({"a": 2.0, "b": 2.0})


@pytest.mark.parametrize("reference", [False, True])
def test_classes_that_share_no_switch_are_unchanged(reference):
    net = _Star(split=True)
    transfers = [("dp", "dp", _loads(net, (0, 1)), 0.0), ("mp", "mp", _loads(net, (2, 3)), 0.5)]
    assert _run(net, ON, transfers, reference=reference) == pytest.approx({"dp": 1.0, "mp": 1.5})


@pytest.mark.parametrize("reference", [False, True])
def test_no_preemption_of_a_lower_class_that_starts_at_the_same_instant(reference):
    # DP is added first, both start at 0: no DP packet is in flight, MP is selected first
    net = _Star()
    transfers = [("dp", "dp", _loads(net, (0, 1)), 0.0), ("mp", "mp", _loads(net, (2, 3)), 0.0)]
    assert _run(net, ON, transfers, reference=reference) == pytest.approx({"dp": 2.0, "mp": 1.0})


@pytest.mark.parametrize("reference", [False, True])
def test_no_preemption_of_a_lower_class_waiting_behind_a_higher_one(reference):
    # MP holds the switch from 0 (DP waits); PP arrives at 0.5: it waits for MP too and pays
    # no preemption (DP has nothing in flight), runs 1.0 -> 2.0; DP runs last, 2.0 -> 3.0
    net = _Star()
    transfers = [("mp", "mp", _loads(net, (0, 1)), 0.0), ("dp", "dp", _loads(net, (2, 3)), 0.0),
                 ("pp", "pp", _loads(net, (1, 2)), 0.5)]
    assert _run(net, ON, transfers, reference=reference) == \
        pytest.approx({"mp": 1.0, "pp": 2.0, "dp": 3.0})


def test_a_transfer_holds_the_switches_where_it_stores_a_phase_and_fred_only():
    platform = default_platform()
    net = build_network(platform, "fred-d")
    nodes, incident, bw = switch_links(net)
    assert nodes == [*net.l1_nodes, net.l2_node] and len(bw) == net.n_links + len(nodes)
    # an in-switch all-reduce inside L1 0 stores a phase on L1 0 only; one over NPUs of L1 0
    # and L1 1 on L1 0, L1 1 and the L2
    for members, held_switches in (((0, 1), [0]), ((0, 4), [0, 1, len(net.l1_nodes)])):
        r = evaluate(platform, "fred-d", [Collective("all-reduce", members, 1e6)])
        assert r.algorithms == ["in-switch"]
        loads, _ = collective_links(platform, "fred-d", r)
        held = loads[net.n_links:]
        assert list(np.flatnonzero(held)) == held_switches
        assert held[held > 0] == pytest.approx((r.link_loads / r.link_bw).max())
    # an endpoint algorithm's online unicasts (Fred-C: no in-switch collectives) hold none
    fred_c = build_network(platform, "fred-c")
    r = evaluate(platform, "fred-c", [Collective("all-reduce", (0, 4), 1e6)])
    assert not r.configurations
    assert not np.any(collective_links(platform, "fred-c", r)[0][fred_c.n_links:])
    # the mesh has no phases; the what-if switches the mechanism off
    r = evaluate(platform, "mesh", [Collective("all-reduce", (0, 1), 1e6)])
    assert collective_links(platform, "mesh", r)[0] is r.link_loads
    r = evaluate(platform, "fred-d", [Collective("all-reduce", (0, 4), 1e6)])
    assert collective_links(platform.scaled(one_phase_per_switch=False), "fred-d", r)[0] is r.link_loads
