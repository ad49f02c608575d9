"""The packet fabric's block of docs/fabric_validation.md (``fred fabric-validate --switch
packet``): its own markers beside the circuit block, the refused cases listed with their
reason, and the model's hierarchical choice replaced by the ring on both sides."""

from __future__ import annotations

import pytest

from hdl.contracts.errors import FredError
from studies.fabric_validation import BEGIN, END, MARKERS, FabricValidationRow, summarise, markdown_block


def _row(ratio=1.0):
    return FabricValidationRow(fabric="fred-a", case="wafer all-reduce", size_flits=40, algorithm="ring",
                               model_cycles=100.0, model_bandwidth_cycles=80.0, model_latency_cycles=20.0,
                               model_phase_cycles=0.0, model_phases=0, busiest_link="npu0->l1.0",
                               rtl_cycles=round(100 * ratio), ratio=ratio, flits_checked=10, cycles_per_s=1.0)


def test_the_packet_block_has_its_own_markers_and_lists_refused_cases(tmp_path):
    result = summarise([_row(1.0), _row(1.2)], "fred fabric-validate --switch packet")
    text = markdown_block(result, tmp_path / "p.png", tmp_path / "doc.md", "packet",
                          refused=[("fred-b", "MP2-DP5-PP2 DP all-reduce", 40, "slots [0, 1] on VC DP")])
    begin, end = MARKERS["packet"]
    assert text.startswith(begin) and text.endswith(end) and BEGIN not in text and END not in text
    assert "**1/2 cases**" in text
    assert "Not run (refused before any build): fred-b MP2-DP5-PP2 DP all-reduce at 40 flits (slots [0, 1] on VC DP)" in text


def test_packet_cases_substitute_the_ring_and_refuse_what_the_headers_cannot_name():
    from studies.packet_fabric_case import build_packet_case
    case = build_packet_case(fabric="fred-a", op="all-reduce", size=40, group="wafer")
    assert case.estimate.algorithm == "ring" and case.algorithm == "ring"
    # Fred-B's DP groups (four phases per switch on VC DP) run in a phase order now
    case = build_packet_case(fabric="fred-b", op="all-reduce", size=40, strategy="MP2-DP5-PP2", dim="dp")
    assert case.estimate.algorithm == "in-switch" and case.estimate.phases == 4
    with pytest.raises(FredError, match="one-stage"):
        build_packet_case(fabric="fred-c", op="all-reduce", size=40, group="wafer",
                          algorithm="hierarchical")
