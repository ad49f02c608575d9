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


# -- the fabric side: every switch's tables with one shared phase, every endpoint's part -------

from hdl.compiler.io_stripe_program import receiver_entries  # noqa: E402
from hdl.compiler.io_stripe_shared import fabric_shared_tables, shared_io_program  # noqa: E402
from hdl.contracts.npu_engine import rank_weights  # noqa: E402

FRED_B = fabric_spec("fred-b", io_controllers=18)


def test_every_switch_takes_the_shared_phase_in_the_last_slot():
    """At 8 slots (the fabric's) the shared phase is slot 7 at the 5 L1s and the L2, after
    each switch's trees: a tree per local controller and the downlink's (4 + 1 at L1s 0-2,
    3 + 1 at L1s 3-4), at the L2 one per source L1; a switch's own tables are the one-switch
    ones with that phase."""
    tables = fabric_shared_tables(FRED_B, "io-broadcast", 8)
    assert len(tables) == 6
    assert [t.shared_phase for t in tables] == [7] * 6 and [t.phases for t in tables] == [8] * 6
    assert [len(t.configs) for t in tables] == [5, 5, 5, 4, 4, 5]
    alone = shared_stripe_tables(FRED_B, "io-broadcast", 0)
    assert (tables[0].configs, tables[0].flow_ports, tables[0].stripe_slots) == (
        alone.configs, alone.flow_ports, alone.stripe_slots)
    # the L2: stripe k enters from L1 k mod 5 (port k mod 5) and leaves to the four others
    l2 = tables[5]
    for k in range(18):
        slot = l2.stripe_slots[k]
        (entry,) = [e for e in l2.flow_ports if e[0] == slot]
        assert entry[1] == k % 5 and entry[3] == 0b11111 & ~(1 << k % 5)


def test_a_shared_phase_among_the_flows_slots_or_beyond_the_slots_is_refused_by_name():
    with pytest.raises(FredError, match="L1.0: the shared phase must be a slot after its 5 flows"):
        shared_stripe_tables(FRED_B, "io-broadcast", 0, phases=8, shared_phase=4)
    with pytest.raises(FredError, match="below 8"):
        shared_stripe_tables(FRED_B, "io-broadcast", 0, phases=8, shared_phase=8)


def test_weight_streaming_on_the_trees_every_npu_hears_every_controller():
    """io-broadcast, 54 flits = 18 stripes of 3: every NPU receives stripe k from controller k
    (indices 3k .. 3k + 2, the controller's memory weights), forwards nothing; controller k
    sends its stripe from its memory."""
    program = shared_io_program(FRED_B, "io-broadcast", 54)
    assert program.controllers == 18 and program.stripe_flits == 3
    for r in range(20):
        entries = receiver_entries(program, r)
        assert [e["stripe"] for e in entries] == list(range(18))
        for e in entries:
            k = e["stripe"]
            assert (e["org"], e["flits"]) == (3 * k, 3)
            assert (e["wr"], e["hr"]) == rank_weights(20 + k, 0)
        assert all(s.dest is None and not s.adds for s in program.steps[r].values())
    for k in range(18):
        step = program.steps[20 + k][k]
        assert step.source is None and (step.ws, step.hs) == rank_weights(20 + k, 0)
        assert (step.org, step.flits) == (3 * k, 3)


def test_reduce_out_on_the_trees_every_controller_checks_the_sum_of_all_npus():
    program = shared_io_program(FRED_B, "io-reduce", 1800)
    w = h = 0
    for r in range(20):
        rw, rh = rank_weights(r, 0)
        w, h = (w + rw) & 0xFFFFFFFF, (h + rh) & 0xFFFFFFFF
    for k in range(18):
        step = program.steps[20 + k][k]
        assert step.source is not None and (step.wr, step.hr) == (w, h) and step.flits == 100
        assert all(program.steps[r][k].dest == 20 + k and program.steps[r][k].source is None
                   for r in range(20))


@pytest.mark.parametrize("spec, op, size, match", [
    (fabric_spec("fred-a", io_controllers=18), "io-broadcast", 54, "neither multicasts nor reduces"),
    (FRED_B, "io-broadcast", 50, "do not split into 18 whole stripes"),
    (FRED_B, "all-reduce", 54, "runs io-broadcast or io-reduce"),
    (fabric_spec("fred-b"), "io-broadcast", 54, "needs controllers"),
])
def test_bad_requests_are_refused_by_name(spec, op, size, match):
    with pytest.raises(FredError, match=match):
        shared_io_program(spec, op, size)


def test_the_tree_npu_writes_load_every_register_once():
    from hdl.contracts.io_stripes import TREE_NPU_REGS, tree_npu_writes
    writes = tree_npu_writes(ws=5, hs=-1, stripes=18, stripe_flits=100, phase=7, vc=1)
    assert dict(writes) == {TREE_NPU_REGS["ws"]: 5, TREE_NPU_REGS["hs"]: 0xFFFFFFFF, TREE_NPU_REGS["stripes"]: 18,
                            TREE_NPU_REGS["stripe_flits"]: 100, TREE_NPU_REGS["phase"]: 7, TREE_NPU_REGS["vc"]: 1,
                            TREE_NPU_REGS["home"]: 0, TREE_NPU_REGS["home_hi"]: 0, TREE_NPU_REGS["delay"]: 0}
    assert len(writes) == len(TREE_NPU_REGS)
    late = dict(tree_npu_writes(ws=5, hs=1, stripes=40, stripe_flits=8, phase=7, vc=1, home=(0, 5, 35), delay=12))
    assert (late[TREE_NPU_REGS["home"]], late[TREE_NPU_REGS["home_hi"]], late[TREE_NPU_REGS["delay"]]) == (0x21, 8, 12)
    with pytest.raises(FredError, match=r"home stripes \[18\] outside 0..17"):
        tree_npu_writes(ws=1, hs=1, stripes=18, stripe_flits=8, phase=7, vc=1, home=(18,))
    with pytest.raises(FredError, match="stripe_flits must be a positive integer"):
        tree_npu_writes(ws=1, hs=1, stripes=18, stripe_flits=0, phase=7, vc=1)


def test_the_fabric_stores_the_slots_its_trees_need_and_never_fewer_than_the_default():
    """Fred-B's wafer needs 6 slots at most (5 trees + the shared phase): the default 8, so its
    header keeps the 3-bit phase; Fred-D's needs 9 (L1s 0-2: 8 trees each), a 4-bit phase. A
    header narrower than that is refused naming the switch and the count."""
    from hdl.compiler.io_stripe_shared import fabric_shared_phases
    from hdl.designs.fabric.packet_fabric_top import packet_format
    for op in ("io-broadcast", "io-reduce"):
        assert fabric_shared_phases(fabric_spec("fred-b", io_controllers=18), op) == 8
        assert fabric_shared_phases(fabric_spec("fred-d", io_controllers=18), op) == 9
    assert (packet_format(8).phase_bits, packet_format(9).phase_bits) == (3, 4)
    with pytest.raises(FredError, match=r"switch L1\.0 \(8 trees of fred-d's striped io-reduce and the shared "
                                        r"phase\) needs 9 slots; a 3-bit phase field names 8"):
        fabric_shared_phases(fabric_spec("fred-d", io_controllers=18), "io-reduce", phase_bits=3)
    with pytest.raises(FredError, match="phase_bits must be an integer in 1..8"):
        fabric_shared_phases(fabric_spec("fred-d", io_controllers=18), "io-reduce", phase_bits=9)
