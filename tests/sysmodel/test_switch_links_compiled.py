"""The compiled switch hold (sysmodel.switch_phases.switch_held_times, through
sysmodel.switch_links_compiled.held_times) gives the NumPy specification's figures
(sysmodel.switch_phases.held_times_reference) to the last bit: on random link loads over every
FRED fabric -- paced and not, stored phases or online, ties at the busiest link -- and on the
collectives the model times."""

from __future__ import annotations

import numpy as np
import pytest

from sysmodel.collectives import Collective, build_network, evaluate
from sysmodel.platform import default_platform
from sysmodel.switch_phases import _ENDS, held_times_reference, stored_switches, switch_held_times, switch_links

P = default_platform()
FRED = ("fred-a", "fred-b", "fred-c", "fred-d")


@pytest.mark.parametrize("fabric", FRED)
def test_random_loads_give_the_reference_to_the_bit(fabric):
    net = build_network(P, fabric)
    nodes, incident, _ = switch_links(net)
    ends = _ENDS[net]
    rng = np.random.default_rng(31)
    kinds = {"paced": 0, "not paced": 0}
    for case in range(400):
        loads = np.zeros(net.n_links)
        used = rng.random(net.n_links) < rng.uniform(0.05, 0.9)
        loads[used] = rng.choice([512.0, 1024.0, 4096.0, 3e6], size=int(used.sum())) * rng.integers(1, 4, int(used.sum()))
        if case % 3 == 0:     # the endpoint links into switches the busiest: a paced stream
            into = np.flatnonzero(ends.into & used)
            if len(into):
                loads[into] = loads.max() * 50
        if not loads.any():
            loads[0] = 512.0
        time = loads / np.asarray(net.link_bw, dtype=float)
        stored = rng.random(len(nodes)) < (0.0 if case % 2 else 0.5)
        want = held_times_reference(net, loads, time, stored)
        got = switch_held_times(net, loads, time, stored)
        assert got.dtype == want.dtype and got.shape == want.shape == (2 * len(nodes),)
        assert np.array_equal(got, want), (fabric, case)
        busiest = time >= time.max() * (1 - 1e-12)
        paced = (ends.into[busiest].all() or ends.out_of[busiest].all()) and (time > 0).sum() > busiest.sum()
        kinds["paced" if paced else "not paced"] += 1
    assert min(kinds.values()) > 20, kinds     # both branches exercised


@pytest.mark.parametrize("fabric", FRED)
def test_the_models_collectives_give_the_reference_to_the_bit(fabric):
    """Link data of collective sets the model times (in-switch, rings, I/O streams and stores,
    multicasts, writes into the controllers): the compiled hold equals the reference's."""
    net = build_network(P, fabric)
    sets = [[Collective("all-reduce", tuple(range(20)), 3e6)],
            [Collective("all-reduce", tuple(range(k, 20, 4)), 1e6) for k in range(4)],
            [Collective("io-load", (0, 5, 10, 15), 2e6)],
            [Collective("io-store", tuple(range(20)), 7e6)],
            [Collective("multicast", (4, 5, 6, 7), 1e5, root=0)],
            [Collective("io-write", tuple(range(20)), 1e6)]]
    for colls in sets:
        r = evaluate(P, fabric, colls)
        loads = np.asarray(r.link_loads, dtype=float)
        time = loads / np.asarray(r.link_bw, dtype=float)
        switch_links(net)
        stored = _ENDS[net].stored(stored_switches(r))
        assert np.array_equal(switch_held_times(net, loads, time, stored),
                              held_times_reference(net, loads, time, stored)), (fabric, colls[0].op)
