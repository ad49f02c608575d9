"""A switch held per switch (``Engine(hold=)``, docs/sysmodel.md, "A switch held per switch"):
a transfer past its bytes keeps the switches whose last packets have not left until its end
minus each one's ``after``, and a transfer that waited from its start behind a higher level
has the way its head travelled meanwhile (the ``head`` of the switch where it waited) taken
off its latency. Hand-computed on small graphs, in both engine loops; and the offsets
:func:`sysmodel.switch_phases.hold_offsets` derives from the Fred-C and Fred-D RTL fabrics'
latencies, against the hops counted by hand."""

from __future__ import annotations

import numpy as np
import pytest

from hdl.contracts.errors import FredError
from sysmodel.collectives import build_network, evaluate
from sysmodel.engine import Engine
from sysmodel.fabric_model import fabric_platform
from sysmodel.switch_phases import collective_links, hold_offsets, switch_links
from sysmodel.training import FRED_PRIORITY

INF = np.inf
BW = np.ones(3)


def _holds(table: dict):
    """A ``hold`` function giving each loads array (by identity) its (head, after) of ``table``."""
    def hold(loads, bw, latency_s):
        head, after = table[id(loads)]
        return np.asarray(head, dtype=float), np.asarray(after, dtype=float)
    return hold


def _run(transfers, table, *, reference, hold=True):
    """``transfers``: (name, category, loads, alone-plus-latency duration, start delay); links
    0 and 1 are switches' pseudo-links, link 2 a network link. Returns each end by name."""
    eng = Engine(priority=FRED_PRIORITY, hold=_holds(table) if hold else None)
    ids = {}
    for name, category, loads, duration, delay in transfers:
        deps = (eng.add(f"{name} wait", f"{name}/wait", delay),) if delay else ()
        ids[name] = eng.add(name, f"{name}/comm", duration, deps, category=category, loads=loads, bw=BW)
    tasks = eng.run(reference=reference).tasks
    return {name: tasks[i].end for name, i in ids.items()}


@pytest.mark.parametrize("reference", [False, True])
def test_a_transfer_past_its_bytes_holds_each_switch_until_its_end_minus_after(reference):
    # MP: 1 s of bytes on switch links 0 and 1 and network link 2, then 2 s of latency; its
    # last packet leaves switch 1 1.5 s before its end (at 1.5 s) and switch 0 0.5 s before
    # (at 2.5 s). DP on switch 1 (2 s alone, no latency) waits until 1.5 s; another DP on
    # switch 0 until 2.5 s; a DP on the network link only until MP's bytes are through (1 s)
    mp = np.array([1.0, 1.0, 1.0])
    dp1, dp0, dp2 = np.array([0.0, 2.0, 0.0]), np.array([2.0, 0.0, 0.0]), np.array([0.0, 0.0, 2.0])
    table = {id(mp): ([0.0, 0.0, 0.0], [0.5, 1.5, INF]), id(dp1): ([0.0] * 3, [INF] * 3),
             id(dp0): ([0.0] * 3, [INF] * 3), id(dp2): ([0.0] * 3, [INF] * 3)}
    ends = _run([("mp", "mp", mp, 3.0, 0.0), ("dp1", "dp", dp1, 2.0, 0.0),
                 ("dp0", "dp", dp0, 2.0, 0.0), ("dp2", "dp", dp2, 2.0, 0.0)], table, reference=reference)
    assert ends["mp"] == pytest.approx(3.0)
    assert ends["dp1"] == pytest.approx(1.5 + 2.0)
    assert ends["dp0"] == pytest.approx(2.5 + 2.0)
    # the network link is shared max-min at one level: both DPs on it? only dp2: after MP's bytes
    assert ends["dp2"] == pytest.approx(1.0 + 2.0)
    # without the hold, every DP resumes when MP's bytes are through
    plain = _run([("mp", "mp", mp, 3.0, 0.0), ("dp1", "dp", dp1, 2.0, 0.0)], table,
                 reference=reference, hold=False)
    assert plain["dp1"] == pytest.approx(1.0 + 2.0)


@pytest.mark.parametrize("reference", [False, True])
def test_a_transfer_waiting_from_its_start_is_credited_the_head_of_the_switch_where_it_waits(reference):
    # MP holds switch 0 until 2.5 s (as above). PP, 1 s of bytes on switch 0 and 1 s of
    # latency, its head 0.4 s from its start at switch 0, waits there from 0 to 2.5 s: its head
    # got there meanwhile, so it ends at 2.5 + 1 + (1 - 0.4) = 4.1 s (switch 1's head, 0.9 s,
    # is not where it waited: MP does not hold switch 1)
    mp, pp = np.array([1.0, 0.0, 0.0]), np.array([1.0, 1.0, 0.0])
    table = {id(mp): ([0.0, 0.0, 0.0], [0.5, INF, INF]), id(pp): ([0.4, 0.9, 0.0], [0.2, 0.2, INF])}
    ends = _run([("mp", "mp", mp, 3.0, 0.0), ("pp", "pp", pp, 2.0, 0.0)], table, reference=reference)
    assert ends["pp"] == pytest.approx(2.5 + 1.0 + (1.0 - 0.4))
    # a head beyond the latency takes all of it, no more: 2.5 + 1 s
    table[id(pp)] = ([3.0, 0.9, 0.0], [0.2, 0.2, INF])
    ends = _run([("mp", "mp", mp, 3.0, 0.0), ("pp", "pp", pp, 2.0, 0.0)], table, reference=reference)
    assert ends["pp"] == pytest.approx(2.5 + 1.0)


@pytest.mark.parametrize("reference", [False, True])
def test_a_transfer_served_before_it_waits_is_not_credited(reference):
    # PP starts alone at 0 and is served; MP starts at 0.5 s and holds switch 0 from then
    # until 0.5 + 1 + 2 - 0.5 = 3 s. PP's first half went before MP; its head is long past
    # switch 0, so nothing is credited: the other half from 3 to 3.5 s, then its 1 s latency
    mp, pp = np.array([1.0, 0.0, 0.0]), np.array([1.0, 1.0, 0.0])
    table = {id(mp): ([0.0, 0.0, 0.0], [0.5, INF, INF]), id(pp): ([0.4, 0.9, 0.0], [0.2, 0.2, INF])}
    ends = _run([("mp", "mp", mp, 3.0, 0.5), ("pp", "pp", pp, 2.0, 0.0)], table, reference=reference)
    assert ends["mp"] == pytest.approx(0.5 + 3.0)
    assert ends["pp"] == pytest.approx(3.0 + 0.5 + 1.0)


def test_a_hold_that_is_not_a_function_or_gives_bad_offsets_is_an_error():
    with pytest.raises(FredError, match="hold must be None or a function"):
        Engine(priority=FRED_PRIORITY, hold=[1.0])
    loads = np.array([1.0, 0.0, 0.0])
    eng = Engine(priority=FRED_PRIORITY, hold=lambda loads, bw, latency: (np.zeros(2), np.zeros(2)))
    eng.add("mp", "mp/comm", 1.0, category="mp", loads=loads, bw=BW)
    with pytest.raises(FredError, match="hold must give"):
        eng.run()


def _offsets(fabric: str, scenario_class: int):
    """(network, switch nodes, link count, head, after, latency) in cycles of class
    ``scenario_class`` (0 MP, 1 DP, 2 PP) of ``mp-dp-pp`` at 40 flits on ``fabric``."""
    from studies.concurrent_case import build_concurrent_case, model_collectives
    case = build_concurrent_case(fabric=fabric, scenario="mp-dp-pp", size=40, load_size=40)
    plat, _ = fabric_platform(case.spec, switch="packet")
    timing = plat.switch_at("l1")
    net = build_network(plat, case.spec.name)
    result = evaluate(plat, case.spec.name, model_collectives(case.classes[scenario_class], timing.flit_bytes,
                                                                case.spec))
    loads, bw = collective_links(plat, case.spec.name, result)
    latency = result.time_s - float((loads / bw).max())
    head, after = hold_offsets(plat, net)(loads, bw, latency)
    nodes, _, _ = switch_links(net)
    names = [net.node_names[node] for node in nodes]
    per_switch = {}
    n, s = len(net.link_bw), len(nodes)
    for k, name in enumerate(names):
        for column in (n + k, n + s + k):
            if loads[column] > 0:
                per_switch[name] = (head[column] / timing.cycle_s, after[column] / timing.cycle_s)
    return per_switch, latency / timing.cycle_s


def test_fred_c_offsets_are_the_hops_counted_by_hand():
    # Fred-C: NPU links 1 cycle, L1 and L2 10 cycles each (its switches' packet latencies),
    # uplinks 0. PP's chain 2 -> 6 -> 10 reaches L1.1 (NPU 6's) at 1 + 10 + 10 = 21 cycles
    # (NPU 2's link, L1.0, the L2); MP (an online ring of 5 and 9) leaves L1.1 one NPU link
    # before its end: held until its end - 1 (its ring's last step crosses it)
    pp, _ = _offsets("fred-c", 2)
    assert pp["l1.1"][0] == pytest.approx(21)
    assert pp["l1.0"][0] == pytest.approx(1)
    mp, latency = _offsets("fred-c", 0)
    assert mp["l1.1"][1] == pytest.approx(1) and mp["l2"][1] == pytest.approx(11)
    assert latency == pytest.approx(53)


def test_fred_d_in_switch_tree_is_held_until_its_heads_last_departure():
    # Fred-D's MP all-reduce of 5 and 9 is an in-switch tree (stored phases): its head leaves
    # L1.1 last on the way down, 1 + 9 + 1 + 9 + 1 + 9 = 30 cycles after the start (NPU link,
    # L1, uplink, L2, down link, L1), so the last packet leaves 30 cycles after the bytes:
    # after = latency - 30; the L2 after 1 + 9 + 1 + 9 = 20
    mp, latency = _offsets("fred-d", 0)
    assert mp["l1.1"][1] == pytest.approx(latency - 30)
    assert mp["l2"][1] == pytest.approx(latency - 20)
