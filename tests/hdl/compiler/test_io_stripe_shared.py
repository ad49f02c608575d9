"""One switch's shared-flow tables for the striped I/O trees (hdl/compiler/io_stripe_shared.py),
hand-checked on Fred-B's and Fred-D's L1 0 (docs/fabric_rtl.md, "Striped I/O on Fred-B/D")."""

from __future__ import annotations

import pytest

from hdl.compiler.io_stripe_shared import shared_stripe_tables
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec
from hdl.contracts.encoding import SwitchConfig


def test_fred_b_l1_0_io_broadcast():
    """L1 0 (ports 0..3 NPUs, 4 the uplink, 5..8 controllers 0..3 = stripes 0, 5, 10, 15):
    a slot per controller's tree (to the NPUs and the uplink) and one for the downlink's tree
    (to the NPUs), which the 14 other stripes share; the shared phase is slot 5."""
    t = shared_stripe_tables(fabric_spec("fred-b", io_controllers=18), "io-broadcast", 0)
    assert t.shared_phase == 5 and t.phases == 6 and len(t.configs) == 5
    assert all(isinstance(c, SwitchConfig) for c in t.configs)
    assert t.flow_ports == ((0, 5, 0, 0b11111), (1, 4, 0, 0b01111), (2, 6, 0, 0b11111),
                            (3, 7, 0, 0b11111), (4, 8, 0, 0b11111))
    others = [k for k in range(18) if k % 5]
    assert t.stripe_slots == {0: 0, 5: 2, 10: 3, 15: 4, **{k: 1 for k in others}}
    assert t.inputs == {4: others, 5: [0], 6: [5], 7: [10], 8: [15]}


def test_fred_b_l1_0_io_reduce_partners():
    """io-reduce: every NPU input (and the uplink for the local stripes) is a partner of the
    others in each tree; the local controllers' trees reduce five inputs, the uplink's four."""
    t = shared_stripe_tables(fabric_spec("fred-b", io_controllers=18), "io-reduce", 0)
    by_slot = {}
    for slot, n, partners, outputs in t.flow_ports:
        by_slot.setdefault(slot, {})[n] = (partners, outputs)
    assert by_slot[t.stripe_slots[0]] == {n: (0b11111 & ~(1 << n), 1 << 5) for n in range(5)}
    assert by_slot[t.stripe_slots[1]] == {n: (0b1111 & ~(1 << n), 1 << 4) for n in range(4)}
    assert t.inputs[0] == list(range(18)) and t.inputs[4] == [0, 5, 10, 15]


def test_fred_d_l1_needs_nine_slots_and_too_few_are_refused_by_name():
    spec = fabric_spec("fred-d", io_controllers=18)
    assert shared_stripe_tables(spec, "io-broadcast", 0).phases == 9
    with pytest.raises(FredError, match="8 distinct flows on switch L1.0"):
        shared_stripe_tables(spec, "io-broadcast", 0, phases=8)
    with pytest.raises(FredError, match="switch must be in 0..8"):
        shared_stripe_tables(spec, "io-broadcast", 9)
