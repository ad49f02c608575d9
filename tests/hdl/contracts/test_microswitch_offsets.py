"""``hdl.contracts.timing.microswitch_offsets``: the cycles from a flit's entry into Fred_m(P)
to each microswitch, which the shared flows' hand-over behind delays each microswitch's modes
by (docs/switch.md, "Shared stored flows")."""

from __future__ import annotations

import pytest

from hdl.contracts.encoding import layout
from hdl.contracts.errors import FredError
from hdl.contracts.timing import microswitch_latency, microswitch_offsets, switch_latency


def _by_name(ports, middle, dtype):
    return {s.name: o for s, o in zip(layout(ports, middle),
                                      microswitch_offsets(ports=ports, middle=middle, dtype=dtype))}


def test_fred_3_5_by_hand():
    """Fred_3(5) int32: input and RD microswitches take 2 cycles (adder 0 + its register +
    the wire buffer), output ones 1. Top inputs and demux at 0; the middles' Fred_3(3) inputs
    and demux at 2, their RD microswitches at 4, their output microswitch and mux at 4 + 2 = 6;
    the top outputs and mux at 6 + 1 = 7, whose buffer makes the switch's latency 8."""
    got = _by_name(5, 3, "int32")
    assert {n: got[n] for n in ("in[0]", "in[1]", "demux", "mid[2].in[0]", "mid[2].demux",
                                "mid[1].mid[0].rd", "mid[1].mid[2].rd", "mid[0].out[0]",
                                "mid[0].mux", "out[0]", "out[1]", "mux")} == {
        "in[0]": 0, "in[1]": 0, "demux": 0, "mid[2].in[0]": 2, "mid[2].demux": 2,
        "mid[1].mid[0].rd": 4, "mid[1].mid[2].rd": 4, "mid[0].out[0]": 6, "mid[0].mux": 6,
        "out[0]": 7, "out[1]": 7, "mux": 7}
    assert switch_latency(ports=5, middle=3, dtype="int32") == 7 + microswitch_latency("output", "int32")


@pytest.mark.parametrize("ports, dtype", [(2, "int32"), (4, "fp16"), (9, "int32"), (12, "fp32")])
def test_every_path_adds_up_to_the_latency(ports, dtype):
    """Each microswitch is reached at its predecessor's offset plus that one's latency, and a
    top-level output microswitch (the RD microswitch for P = 2) hands the flit out at the
    switch's latency."""
    got = _by_name(ports, 3, dtype)
    kinds = {s.name: s.kind for s in layout(ports, 3)}
    last = [n for n in got if "." not in n and kinds[n] in ("output", "mux", "rd")]
    assert {got[n] + microswitch_latency(kinds[n], dtype) for n in last} == {
        switch_latency(ports=ports, middle=3, dtype=dtype)}
    for name, offset in got.items():
        if name.startswith("mid[") and kinds[name] in ("input", "demux", "rd") and name.count(".") == 1:
            assert offset == microswitch_latency("input", dtype)


def test_bad_sizes_are_refused():
    with pytest.raises(FredError, match="ports"):
        microswitch_offsets(ports=1, middle=3, dtype="int32")
