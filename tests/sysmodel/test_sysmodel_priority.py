"""FRED's MP > PP > DP priority (docs/switch.md, Packet switch) in the system model's link sharing (sysmodel/engine.py
and its reference loop), hand-computed cases; and the measured preemption cost it reads."""

from __future__ import annotations

import numpy as np
import pytest

from sysmodel.collectives import build_network
from sysmodel.engine import Engine
from sysmodel.platform import default_platform
from sysmodel.switch_phases import switch_links
from sysmodel.training import FRED_PRIORITY, link_priority

ONE_LINK = np.array([1.0, 0.0])
OTHER_LINK = np.array([0.0, 1.0])
BW = np.array([1.0, 1.0])


def run(priority, preempt_s=0.0, *, mp_loads=ONE_LINK, reference=False):
    """DP moves 1 s worth of bytes from t = 0; MP moves 1 s worth from t = 0.5 (after a 0.5 s
    compute task)."""
    eng = Engine(priority=priority, preempt_s=preempt_s)
    eng.add("dp", "n0.dp", 1.0, category="dp", loads=ONE_LINK, bw=BW)
    gate = eng.add("gate", "n0.compute", 0.5)
    eng.add("mp", "n0.mp", 1.0, [gate], category="mp", loads=mp_loads, bw=BW)
    tasks = {t.name: t for t in eng.run(reference=reference).tasks}
    return tasks["dp"].end, tasks["mp"].end


@pytest.mark.parametrize("reference", [False, True])
def test_fair_sharing_without_priority(reference):
    # from 0.5 both share the link at half rate: DP's last 0.5 takes 1 s, MP then runs alone
    dp, mp = run(None, reference=reference)
    assert dp == pytest.approx(1.5) and mp == pytest.approx(2.0)


@pytest.mark.parametrize("reference", [False, True])
def test_mp_preempts_dp_and_pays_the_preemption(reference):
    # MP takes the whole link at 0.5 (its bytes done at 1.5, then the 0.1 s preemption as
    # latency); DP is stopped from 0.5 to 1.5 and finishes its last 0.5 s at 2.0
    dp, mp = run(FRED_PRIORITY, 0.1, reference=reference)
    assert mp == pytest.approx(1.6) and dp == pytest.approx(2.0)


@pytest.mark.parametrize("reference", [False, True])
def test_no_preemption_cost_on_disjoint_links(reference):
    dp, mp = run(FRED_PRIORITY, 0.1, mp_loads=OTHER_LINK, reference=reference)
    assert dp == pytest.approx(1.0) and mp == pytest.approx(1.5)


def test_pp_outranks_dp_and_mp_outranks_pp():
    eng = Engine(priority=FRED_PRIORITY)
    for name in ("dp", "pp", "mp"):
        eng.add(name, f"n0.{name}", 1.0, category=name, loads=ONE_LINK, bw=BW)
    ends = {t.name: t.end for t in eng.run().tasks}
    assert ends == pytest.approx({"mp": 1.0, "pp": 2.0, "dp": 3.0})


def test_negative_preemption_is_refused():
    from hdl.contracts.errors import FredError
    with pytest.raises(FredError, match="preempt_s"):
        Engine(priority=FRED_PRIORITY, preempt_s=-1.0)


def test_fred_fabrics_use_priority_with_the_measured_preemption_cost():
    platform = default_platform()
    assert link_priority(platform, "mesh") == {}
    args = link_priority(platform, "fred-d")
    assert args["priority"] == {"mp": 2, "pp": 1, "dp": 0}
    # the shipped characterization carries the packet switch's measured figures: a first cost
    # per link and per switch (sysmodel/preemption.py), each switch's pseudo-link its own
    # drain, and a further-on row (the L2's default phase: the drains along the path to it)
    assert platform.switch.preemption_cycles > 0
    net = build_network(platform, "fred-d")
    nodes, _, _ = switch_links(net)
    first, further = args["preempt_s"]
    assert len(first) == len(further) == len(net.link_bw) + 2 * len(nodes)   # stored and default phase per switch
    drain = [net.switch_timing(n).preemption_cycles / (net.switch_timing(n).clock_mhz * 1e6) for n in nodes]
    assert list(first[len(net.link_bw):]) == pytest.approx(drain * 2)
    l2 = nodes.index(net.l2_node)
    assert np.flatnonzero(further).tolist() == [len(net.link_bw) + len(nodes) + l2]
    # each switch's default phase shares the time of its stored phases
    assert len(args["shared_phase"]) == len(first)
