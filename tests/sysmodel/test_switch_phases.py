"""One phase active at a time per FRED switch (sysmodel/switch_phases.py; shared spec FRED.md
section 2): hand-computed cases on a star of one switch (or two) and four NPUs, run on both
engine loops, and the pseudo-links on the real fabrics."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sysmodel.collectives import Collective, build_network, evaluate
from hdl.contracts.errors import FredError
from sysmodel.engine import Engine, entry_tiers
from sysmodel.network import Network
from sysmodel.platform import default_platform
from sysmodel.switch_phases import collective_links, shared_phase_links, switch_links, transfer_links
from sysmodel.training import FRED_PRIORITY

ON = SimpleNamespace(one_phase_per_switch=True)
OFF = SimpleNamespace(one_phase_per_switch=False)
PREEMPT = 0.1
SWITCHES = frozenset({4, 5})      # the star's switch nodes: every transfer stores a phase there
ONLINE = frozenset()              # a transfer that stores none: routed online, the default phase


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
    """``transfers``: (name, category, loads, start delay[, switches where it stores a phase:
    all by default]) each 1 s of bytes alone; returns each one's end."""
    eng = Engine(priority=FRED_PRIORITY, preempt_s=PREEMPT, shared_phase=shared_phase_links(platform, net))
    for name, category, loads, delay, *stored in transfers:
        deps = [eng.add(f"{name} wait", f"{name}.compute", delay)] if delay else []
        held, bw = transfer_links(platform, net, loads, net.link_bw, stored[0] if stored else SWITCHES)
        eng.add(name, f"{name}.comm", 1.0, deps, category=category, loads=held, bw=bw)
    return {t.name: t.end for t in eng.run(reference=reference).tasks if "wait" not in t.name}


@pytest.mark.parametrize("reference", [False, True])
def test_a_transfer_alone_is_unchanged(reference):
    net = _Star()
    held, bw = transfer_links(ON, net, _loads(net, (0, 1)), net.link_bw, SWITCHES)
    # the star's one switch: its stored-phase pseudo-link, then its default-phase one
    assert len(held) == net.n_links + 2 and held[-2] == pytest.approx(1.0) and held[-1] == 0.0
    assert bw[-1] == bw[-2] == 1.0
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
def test_two_stored_phases_of_one_class_take_turns_in_program_order(reference):
    # two DP phases stored at the switch, from 0: served one after the other (not half each),
    # the one added first first: 1.0 and 2.0 (a split would end both at 2.0)
    net = _Star()
    transfers = [("a", "dp", _loads(net, (0, 1)), 0.0), ("b", "dp", _loads(net, (2, 3)), 0.0)]
    assert _run(net, ON, transfers, reference=reference) == pytest.approx({"a": 1.0, "b": 2.0})


@pytest.mark.parametrize("reference", [False, True])
def test_the_program_order_not_the_start_decides_and_costs_no_preemption(reference):
    # DP (added first) from 0.5, an I/O stream on DP's level (added second) from 0: the stream
    # has the switch until 0.5, then DP's phase, first in the order, runs 0.5 -> 1.5 as if
    # alone (no drain: one VC) and the stream finishes its last half 1.5 -> 2.0 (the packet
    # fabric's phase order, docs/switch.md, "Phase order")
    net = _Star()
    transfers = [("dp", "dp", _loads(net, (0, 1)), 0.5), ("io", "io", _loads(net, (2, 3)), 0.0)]
    assert _run(net, ON, transfers, reference=reference) == pytest.approx({"dp": 1.5, "io": 2.0})


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


@pytest.mark.parametrize("reference", [False, True])
def test_online_transfers_of_one_class_share_the_default_phase(reference):
    # two online DP transfers on disjoint links of one switch hold its default phase together:
    # both at full speed (two stored phases take turns: 2.0 each, above)
    net = _Star()
    transfers = [("a", "dp", _loads(net, (0, 1)), 0.0, ONLINE), ("b", "dp", _loads(net, (2, 3)), 0.0, ONLINE)]
    assert _run(net, ON, transfers, reference=reference) == pytest.approx({"a": 1.0, "b": 1.0})


@pytest.mark.parametrize("reference", [False, True])
def test_online_transfers_of_two_classes_take_turns_with_a_preemption(reference):
    # DP 0 -> 1 online from 0, MP 2 -> 3 online from 0.5: the default phases of two VCs; as two
    # stored phases, MP 0.5 -> 1.5 + the switch's preemption 0.1, DP stops and ends at 2.0
    net = _Star()
    transfers = [("dp", "dp", _loads(net, (0, 1)), 0.0, ONLINE), ("mp", "mp", _loads(net, (2, 3)), 0.5, ONLINE)]
    assert _run(net, ON, transfers, reference=reference) == pytest.approx({"dp": 2.0, "mp": 1.6})


@pytest.mark.parametrize("reference", [False, True])
def test_a_class_of_online_transfers_runs_together_after_a_higher_one(reference):
    # MP online (0 -> 1) and two online DP transfers (2 -> 3, 3 -> 2) from 0: MP has the
    # switch, then both DP transfers share DP's default phase: 2.0 each (not 2.0 and 3.0)
    net = _Star()
    transfers = [("mp", "mp", _loads(net, (0, 1)), 0.0, ONLINE), ("a", "dp", _loads(net, (2, 3)), 0.0, ONLINE),
                 ("b", "dp", _loads(net, (3, 2)), 0.0, ONLINE)]
    assert _run(net, ON, transfers, reference=reference) == pytest.approx({"mp": 1.0, "a": 2.0, "b": 2.0})


@pytest.mark.parametrize("reference", [False, True])
def test_the_default_phase_counts_its_busiest_member_next_to_a_stored_phase(reference):
    # online DP a (0 -> 1) and b (0 -> 2) share NPU 0's uplink: 0.5 each there; a stored DP
    # phase c (2 -> 3) at the same switch: switch use = c + max(a, b). Filling: the uplink and
    # the switch saturate together at 0.5 (2 x 0.5 = 1; 0.5 + max(0.5, 0.5) = 1): all three at
    # half speed, 2.0 each; summed, the switch would have given 1/3 each (3.0)
    net = _Star()
    transfers = [("a", "dp", _loads(net, (0, 1)), 0.0, ONLINE), ("b", "dp", _loads(net, (0, 2)), 0.0, ONLINE),
                 ("c", "dp", _loads(net, (2, 3)), 0.0)]
    assert _run(net, ON, transfers, reference=reference) == pytest.approx({"a": 2.0, "b": 2.0, "c": 2.0})


def test_a_transfer_holds_the_switches_where_it_stores_a_phase_and_fred_only():
    platform = default_platform()
    net = build_network(platform, "fred-d")
    nodes, incident, bw = switch_links(net)
    assert nodes == [*net.l1_nodes, net.l2_node] and len(bw) == net.n_links + 2 * len(nodes)
    # an in-switch all-reduce inside L1 0 stores a phase on L1 0 only; one over NPUs of L1 0
    # and L1 1 on L1 0, L1 1 and the L2
    for members, held_switches in (((0, 1), [0]), ((0, 4), [0, 1, len(net.l1_nodes)])):
        r = evaluate(platform, "fred-d", [Collective("all-reduce", members, 1e6)])
        assert r.algorithms == ["in-switch"]
        loads, _ = collective_links(platform, "fred-d", r)
        held = loads[net.n_links:]
        assert list(np.flatnonzero(held)) == held_switches      # stored phases only
        assert held[held > 0] == pytest.approx((r.link_loads / r.link_bw).max())
    # an endpoint algorithm's online unicasts (Fred-C: no in-switch collectives) hold the
    # default phase of every switch they cross: L1 0, L1 1 and the L2, no stored phase
    fred_c = build_network(platform, "fred-c")
    r = evaluate(platform, "fred-c", [Collective("all-reduce", (0, 4), 1e6)])
    assert not r.configurations
    c_nodes, _, _ = switch_links(fred_c)
    held = collective_links(platform, "fred-c", r)[0][fred_c.n_links:]
    assert not np.any(held[:len(c_nodes)])
    assert list(np.flatnonzero(held[len(c_nodes):])) == [0, 1, len(fred_c.l1_nodes)]
    shared = shared_phase_links(platform, fred_c)
    assert list(shared[fred_c.n_links + len(c_nodes):]) == list(range(fred_c.n_links, fred_c.n_links + len(c_nodes)))
    assert np.all(shared[:fred_c.n_links + len(c_nodes)] == -1)
    # the mesh has no phases; the what-if switches the mechanism off
    r = evaluate(platform, "mesh", [Collective("all-reduce", (0, 1), 1e6)])
    assert collective_links(platform, "mesh", r)[0] is r.link_loads
    r = evaluate(platform, "fred-d", [Collective("all-reduce", (0, 4), 1e6)])
    assert collective_links(platform.scaled(one_phase_per_switch=False), "fred-d", r)[0] is r.link_loads


@pytest.mark.parametrize("reference", [False, True])
def test_a_stored_phase_waits_for_the_default_phase_of_its_class(reference):
    # online DP and a stored DP phase at one switch, from 0: two phases of one VC take turns;
    # the default phase (tier 0) first, then the stored one: 1.0 and 2.0
    net = _Star()
    transfers = [("stored", "dp", _loads(net, (0, 1)), 0.0), ("online", "dp", _loads(net, (2, 3)), 0.0, ONLINE)]
    assert _run(net, ON, transfers, reference=reference) == pytest.approx({"online": 1.0, "stored": 2.0})


def test_entry_tiers_number_only_the_transfers_holding_a_stored_phase():
    net = _Star()
    shared = shared_phase_links(ON, net)
    online = transfer_links(ON, net, _loads(net, (0, 1)), net.link_bw, ONLINE)[0]
    stored = transfer_links(ON, net, _loads(net, (2, 3)), net.link_bw, SWITCHES)[0]
    bw = np.ones(len(online))
    # tasks 0..3 use entries 2, 0, 1, 2: entry 1 first at task 2; entry 2 (the same bytes as
    # entry 1, other arrays) first at task 0: one collective, one turn, the earlier
    entries = [(online, bw), (stored, bw), (stored.copy(), bw)]
    assert list(entry_tiers(entries, shared, [2, 0, 1, 2])) == [0, 1, 1]
    assert list(entry_tiers(entries, shared, [-1, 1, 0, 2])) == [0, 2, 2]
    assert list(entry_tiers(entries, None, [0, 1, 2])) == [0, 0, 0]


@pytest.mark.parametrize("shared, message", [
    ([-1, 0], None), ([-1, 2], "shared_phase must give"), ([1, -1], None), ([0, -1], "shared_phase must give"),
    ([-1, 0, 1], "shared_phase must give"), ([-2, -1], "shared_phase must give")])
def test_a_shared_phase_names_another_link_that_shares_none(shared, message):
    if message is None:
        assert list(Engine(shared_phase=shared).shared_phase) == shared
    else:
        with pytest.raises(FredError, match=message):
            Engine(shared_phase=shared)


def test_a_shared_phase_table_shorter_than_the_links_loaded_is_refused():
    eng = Engine(priority=FRED_PRIORITY, shared_phase=[-1, 0])
    eng.add("a", "a.comm", 1.0, category="dp", loads=np.ones(3), bw=np.ones(3))
    with pytest.raises(FredError, match="shared_phase names 2 links; the transfers load 3"):
        eng.run()


class _SlowSourceStar(_Star):
    """:class:`_Star` whose NPU 0 sends into the switch at 0.25 byte/s (an I/O controller's
    slow link): a transfer from it is paced at its source."""

    def __init__(self):
        Network.__init__(self, "slow-source star", 4)
        s0 = self.add_node("s0", "switch")
        for npu in range(4):
            self.add_duplex(npu, s0, 0.25 if npu == 0 else 1.0, 1.0, 0.0, "npu")
        self.finalize()


def test_a_transfer_paced_at_its_source_holds_a_switch_for_its_time_through_it():
    # 1 byte 0 -> 1: 4 s on NPU 0's slow link, 1 s on the switch's link to NPU 1: it holds the
    # switch 1 s of its 4 (its packets arrive with gaps); a transfer with its busiest link
    # between switch and NPU holds it for its whole time
    net = _SlowSourceStar()
    held, _ = transfer_links(ON, net, _loads(net, (0, 1)), net.link_bw, SWITCHES)
    assert held[net.n_links:] == pytest.approx([1.0, 0.0])
    held, _ = transfer_links(ON, net, _loads(net, (1, 0)), net.link_bw, SWITCHES)
    assert held[net.n_links:] == pytest.approx([1.0, 0.0])


class _SlowSinkStar(_Star):
    """:class:`_Star` whose switch sends to NPU 0 at 0.25 byte/s (an I/O controller taking a
    write at its rate): a transfer into it is paced at its sink."""

    def __init__(self):
        Network.__init__(self, "slow-sink star", 4)
        s0 = self.add_node("s0", "switch")
        for npu in range(4):
            self.add_duplex(npu, s0, 1.0, 0.25 if npu == 0 else 1.0, 0.0, "npu")
        self.finalize()


def test_a_transfer_paced_at_its_sink_holds_a_switch_for_its_time_through_it():
    # 1 byte 1 -> 0: 1 s on NPU 1's link into the switch, 4 s on the switch's slow link to
    # NPU 0: its packets wait for room, and the control unit yields the switch to a phase that
    # can move (docs/switch.md, "Control unit"), so it holds the switch 1 s of its 4, as a
    # source-paced stream does
    net = _SlowSinkStar()
    held, _ = transfer_links(ON, net, _loads(net, (1, 0)), net.link_bw, SWITCHES)
    assert held[net.n_links:] == pytest.approx([1.0, 0.0])
    # a stream 0 -> 1 and a phase 2 -> 3 (1 s) at the switch, the write first in the program:
    # the phase runs on the three quarters the write leaves (4/3), as under a source-paced one
    dp = ("dp", "dp", _loads(net, (2, 3)), 0.0)
    io = ("io", "io", _loads(net, (1, 0)), 0.0)
    assert _run(net, ON, [io, dp], reference=False) == pytest.approx({"dp": 4 / 3, "io": 4.0})


@pytest.mark.parametrize("reference", [False, True])
@pytest.mark.parametrize("dp_first, ends", [(True, {"dp": 1.0, "io": 5.0}), (False, {"dp": 4 / 3, "io": 4.0})])
def test_a_paced_stream_and_a_phase_of_its_class_take_the_switch_in_program_order(reference, dp_first, ends):
    # a stream from NPU 0 (4 s alone, holding the switch a quarter of its time) and a DP phase
    # 2 -> 3 (1 s), both from 0, stored at the switch. DP first in the program: it runs as
    # alone, the stream waits 1 s (5.0); the stream first: it keeps its quarter, DP runs on
    # the other three quarters (4/3) -- the packet fabric's dp-under-io (DP's slot first)
    net = _SlowSourceStar()
    dp = ("dp", "dp", _loads(net, (2, 3)), 0.0)
    io = ("io", "io", _loads(net, (0, 1)), 0.0)
    assert _run(net, ON, [dp, io] if dp_first else [io, dp], reference=reference) == pytest.approx(ends)


def test_the_per_switch_reductions_equal_a_loop_over_each_switchs_links():
    # _Incidence reduces every switch's links at once; a naive loop over incident gives the
    # same crossed switches and busy times, switches without a link included (they give 0)
    from sysmodel.switch_phases import _Incidence
    rng = np.random.default_rng(3)
    incident = [np.array([0, 3]), np.zeros(0, dtype=np.int64), np.array([1, 2, 4]), np.array([5]),
                np.zeros(0, dtype=np.int64)]
    incidence = _Incidence(incident)
    for _ in range(50):
        values = rng.choice([0.0, 0.0, 0.5, 2.0], size=6)
        assert list(incidence.any_positive(values)) == [bool(np.any(values[links] > 0)) for links in incident]
        assert list(incidence.largest(values)) == [max(values[links], default=0.0) for links in incident]
    assert list(_Incidence([]).largest(np.zeros(0))) == []


def _paced_links_by_reading_each_link(net, time):
    # the per-link reads _paced_links made before its link facts were arrays (the specification)
    n = len(net.link_bw)
    busiest = np.flatnonzero(time[:n] >= time.max() * (1 - 1e-12))
    kind = net.node_kind
    into = {kind[int(net.link_src[link])] != "switch" and kind[int(net.link_dst[link])] == "switch"
            for link in busiest}
    out_of = {kind[int(net.link_src[link])] == "switch" and kind[int(net.link_dst[link])] != "switch"
              for link in busiest}
    if into != {True} and out_of != {True}:
        return np.zeros(0, dtype=np.int64)
    return busiest if np.count_nonzero(time[:n] > 0) > len(busiest) else np.zeros(0, dtype=np.int64)


@pytest.mark.parametrize("fabric", ["fred-a", "fred-b", "fred-c", "fred-d"])
def test_the_link_ends_as_arrays_equal_reading_each_link_and_switch(fabric):
    # _LinkEnds: the paced links and the stored switches from per-network arrays equal the
    # per-link and per-switch Python reads, on random link times that make transfers paced at
    # their sources, at their sinks and neither (ties of the busiest links included), and on
    # random sets of stored switches (nodes that are no switch, or not in the network, ignored;
    # the empty set)
    from sysmodel.switch_phases import _ENDS, _paced_links
    net = build_network(default_platform(), fabric)
    nodes, _, _ = switch_links(net)
    ends = _ENDS[net]
    kinds = net.node_kind
    assert list(ends.into) == [kinds[int(s)] != "switch" and kinds[int(d)] == "switch"
                               for s, d in zip(net.link_src, net.link_dst)]
    assert list(ends.out_of) == [kinds[int(s)] == "switch" and kinds[int(d)] != "switch"
                                 for s, d in zip(net.link_src, net.link_dst)]
    rng = np.random.default_rng(7)
    into, out_of = np.flatnonzero(ends.into), np.flatnonzero(ends.out_of)
    kinds_seen = set()
    for draw in range(300):
        time = np.where(rng.random(net.n_links) < 0.3, rng.random(net.n_links), 0.0)
        pick = [into, out_of, np.arange(net.n_links)][draw % 3]
        top = rng.choice(pick, size=min(len(pick), 1 + draw % 4), replace=False)
        time[top] = 2.0                         # the busiest links: all into, all out of, or mixed
        if draw % 7 == 0:
            time[:] = np.where(time > 0, 2.0, 0.0)    # nothing slower than the busiest
        got, want = _paced_links(net, time), _paced_links_by_reading_each_link(net, time)
        assert got.tolist() == want.tolist()
        kinds_seen.add(len(want) > 0)
        switches = frozenset(rng.choice(len(net.node_kind) + 3, size=draw % 5, replace=False).tolist())
        assert ends.stored(switches).tolist() == [node in switches for node in nodes]
    assert kinds_seen == {True, False}
