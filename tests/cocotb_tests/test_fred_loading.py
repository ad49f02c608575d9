"""What the circuit FRED fabric's loaders hold for several collectives per NPU
(cocotb_tests/iteration/fred_loading.py), pure Python: the switches keep collective 0's
phases, so a collective needing other phases is refused naming the switch; the loaders get
only the writes that change a register."""

from __future__ import annotations

import pytest

from cocotb_tests.iteration.fred_loading import check_shared_switch_phases, fred_loader_entries
from hdl.compiler.fabric_program import default_phases, fabric_program
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricCollective, FabricRequest, fabric_spec

SPEC = fabric_spec("fred-b", npus=4, npus_per_l1=2)
GROUP = (FabricCollective("all-reduce", (0, 1, 2, 3)),)


def _program(flits, algorithm, spec=SPEC):
    return fabric_program(spec, FabricRequest("all-reduce", GROUP, flits, "wafer"), algorithm=algorithm)


def test_a_collective_needing_other_switch_phases_is_refused_by_switch():
    spec = fabric_spec("fred-a", npus=4, npus_per_l1=2)
    with pytest.raises(FredError, match=r"collective 1 \(hierarchical\) needs other phases on switch L1\.0 "
                                        r"than collective 0 \(ring\)"):
        check_shared_switch_phases(spec, [_program(8, "ring", spec), _program(8, "hierarchical", spec)])


def test_loaders_get_each_collective_s_changed_registers_only():
    programs = [_program(8, "in-switch"), _program(5, "in-switch"), _program(5, "in-switch")]
    ranks, switches = fred_loader_entries(SPEC, programs)
    k = default_phases()
    # L1.0, one phase (its 2 NPUs' flits reduced up, the sums from the L2 down): n, the
    # phase's flits in (3 inputs x 8), per port (8), its ports; then only the flit counts
    # (3 x 5, 5); the repeat of the same size writes nothing
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
