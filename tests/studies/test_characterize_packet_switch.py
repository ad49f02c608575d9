"""The packet switch's preemption figures (docs/switch.md, Packet switch; studies/characterization/preemption.py) and
their optional ``packet_switch`` block in the characterization schema."""

from __future__ import annotations

import copy
import json

import pytest

from studies.characterization.preemption import measure_preemption
from hdl.contracts.characterization import (OPTIONAL_PACKET_SWITCH_FIELDS, PACKET_SWITCH_FIELDS,
                                            parse_characterization)
from hdl.contracts.errors import FredError
from sysmodel.switch_timing import shipped_characterization_path


def test_figures_of_a_small_switch_follow_the_control_unit_mechanism():
    f = measure_preemption(ports=4, middle=3, dtype="int32", dp_packets=12, mp_packets=2, mp_at=40)
    # idle switch: 1 cycle to see the header (RUN -> DRAIN), 1 to find nothing in flight
    # (DRAIN -> SELECT), the select's copy, 1 settle cycle; minus the one decision cycle the
    # flit's own transfer overlaps: select_cycles + 2 (docs/switch.md, "Control unit")
    assert f["reconfiguration_cycles_idle"] == f["select_cycles"] + 2
    # busy switch: the same plus draining what was in flight (at least the datapath latency,
    # at most a packet per input plus the latency)
    drain = f["reconfiguration_cycles_busy"] - f["reconfiguration_cycles_idle"]
    assert f["latency_cycles"] - 1 <= drain <= f["latency_cycles"] + f["point"]["packet_flits"] + 2
    assert f["preemption_latency_cycles"] == f["reconfiguration_cycles_busy"] + f["latency_cycles"]
    # DP loses at least the MP flits on a shared output, plus the two switches
    assert f["preempted_delay_cycles"] >= f["mp_output_cycles"]
    assert f["preemptions"] == 1 and f["selects"] == 3
    assert f["throughput_per_vc"]["MP"] == 1.0


def _document():
    return json.loads(shipped_characterization_path().read_text())


def test_the_shipped_file_carries_the_block_and_the_reader_types_it():
    c = parse_characterization(_document())
    assert set(c.packet_switch) == set(PACKET_SWITCH_FIELDS) | set(OPTIONAL_PACKET_SWITCH_FIELDS)
    assert all(isinstance(v, float) and v >= 0 for v in c.packet_switch.values())
    doc = _document()
    for name in OPTIONAL_PACKET_SWITCH_FIELDS:     # files written before they were measured
        del doc["packet_switch"][name]
    assert set(parse_characterization(doc).packet_switch) == set(PACKET_SWITCH_FIELDS)
    del doc["packet_switch"]
    assert parse_characterization(doc).packet_switch is None


def test_online_select_figures_follow_the_control_unit():
    """The default index's select at an idle switch (4 cycles beyond the latency) and one path
    set up per cycle, on a small int32 switch as on the characterized Fred_3(8) fp16 (the
    shipped file's figures: the same mechanism, latency aside)."""
    from studies.characterization.online_select import measure_online_select
    f = measure_online_select(ports=4, middle=3, dtype="int32")
    shipped = parse_characterization(_document()).packet_switch
    assert f["online_select_cycles"] == shipped["online_select_cycles"] == 4.0
    assert f["online_path_setup_cycles"] == shipped["online_path_setup_cycles"] == 1.0
    assert f["online_first_cycles"] == f["online_selected_latency_cycles"] + 4


@pytest.mark.parametrize("value", [-1, "3", None, float("nan")])
def test_a_bad_packet_switch_field_is_named(value):
    doc = copy.deepcopy(_document())
    doc["packet_switch"]["preemption_latency_cycles"] = value
    with pytest.raises(FredError, match="packet_switch.preemption_latency_cycles"):
        parse_characterization(doc)
    if value is not None:    # an optional figure may be absent, not wrong
        doc = copy.deepcopy(_document())
        doc["packet_switch"]["online_select_cycles"] = value
        with pytest.raises(FredError, match="packet_switch.online_select_cycles"):
            parse_characterization(doc)
