"""What the circuit FRED fabric's loaders hold for several collectives per NPU
(cocotb_tests/iteration/fred_loading.py), pure Python: each algorithm's phases side by side in
the switches' slots, refused naming the switch when they do not fit; the loaders get only the
writes that change a register."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cocotb_tests.iteration.fred_loading import fred_configuration, fred_loader_entries, switch_slots
from hdl.compiler.fabric_program import default_phases, fabric_program
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricCollective, FabricRequest, fabric_spec

SPEC = fabric_spec("fred-b", npus=4, npus_per_l1=2)
GROUP = (FabricCollective("all-reduce", (0, 1, 2, 3)),)


def _program(flits, algorithm, spec=SPEC):
    return fabric_program(spec, FabricRequest("all-reduce", GROUP, flits, "wafer"), algorithm=algorithm)


def test_algorithms_share_the_switches_slots_or_are_refused_by_switch():
    # Fred-A: the ring's one phase and the hierarchical all-reduce's, side by side in the slots
    spec = fabric_spec("fred-a", npus=4, npus_per_l1=2)
    ring, hier = _program(8, "ring", spec), _program(8, "hierarchical", spec)
    (slots, bases), *_ = switch_slots(spec, [ring, hier, _program(3, "ring", spec), hier])
    assert list(slots.values()) == [0, len(ring.switches[0])] and bases == [0, 1, 0, 1]
    config = fred_configuration(spec, [ring, hier])
    assert sorted({(s, k) for s, k, _, _ in config if s == 0}) == [
        (0, k) for k in range(len(ring.switches[0]) + len(hier.switches[0]))]
    # more distinct phases than a switch has slots: refused, naming the switch
    many = [_program(8, "ring", spec), _program(8, "hierarchical", spec)]
    fake = [many[0]] + [replace(many[1], switches=[[p] * 8 for p in (sw[0] for sw in many[1].switches)])]
    with pytest.raises(FredError, match=r"switch L1\.0 would hold 9 configured phases for the iteration's "
                                        r"2 distinct algorithm\(s\)"):
        switch_slots(spec, fake)


def test_loaders_get_each_collective_s_changed_registers_only():
    programs = [_program(8, "in-switch"), _program(5, "in-switch"), _program(5, "in-switch")]
    ranks, switches = fred_loader_entries(SPEC, programs)
    k = default_phases()
    # L1.0, one phase (its 2 NPUs' flits reduced up, the sums from the L2 down): n, the
    # phase's flits in (3 inputs x 8), per port (8), its ports (the slot base 0 is the power-on
    # value: not written); then only the flit counts (3 x 5, 5); the repeat writes nothing
    (phase,) = programs[0].switches[0]
    first, second, third = _split(switches[0])
    assert [w for _, (w,) in first] == [(0, 1), (1, 24), (1 + k, 8), (1 + 2 * k, phase.port_mask)]
    assert [w for _, (w,) in second] == [(1, 15), (1 + k, 5)]
    assert third == [(1, (None,))]
    # an engine's program: the repeat loads nothing, the stages register (deferred) last
    e0, e1, e2 = _split(ranks[0])
    assert e2 == [(1, (None,))] and len(e1) < len(e0)
    assert all(flags & 2 == 0 for flags, _ in e0[:-1])


def _split(entries):
    """The entries of each collective (each ends with a flagged one)."""
    out, current = [], []
    for flags, writes in entries:
        current.append((flags, writes))
        if flags & 1:
            out.append(current)
            current = []
    return out


def test_a_repeated_collective_reruns_the_switches_not_the_npus_programs():
    programs = [_program(8, "in-switch"), _program(5, "in-switch")]
    ranks, switches = fred_loader_entries(SPEC, programs, repeats=[3, 1])
    once_ranks, once_switches = fred_loader_entries(SPEC, programs)
    assert ranks == once_ranks                           # an NPU reruns its engine itself
    runs = _split(switches[0])
    assert len(runs) == 4 and runs[1] == runs[2] == [(1, (None,))]   # two reruns, nothing to write
    assert runs[3] == _split(once_switches[0])[1]
    with pytest.raises(FredError, match="one positive integer per collective"):
        fred_loader_entries(SPEC, programs, repeats=[1])
