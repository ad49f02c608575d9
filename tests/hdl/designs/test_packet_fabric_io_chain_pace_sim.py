"""Fred-A/C's io-reduce chains are paced at their head (``write_paces`` / ``stream_head``,
hdl/compiler/packet_fabric_program.py): the member that starts the partial sum sends at the
controller's rate, the chain's forwarders and its last member (the write into the controller)
send what they receive. Paced at the last member instead, the chain's head ran ahead; its
packets waited for the paced writer in the one DP FIFO per switch input, where the other DP
groups' chains, crossing the same one-port uplinks, queued behind them (head-of-line
blocking): on a 12-NPU Fred-A (3 L1s of 4 NPUs, 4 groups of 3, controllers at 1/12) 96 flits
took 1,553 cycles, the last group's controller idle for 179 cycles with up to 6 of its
packets stuck between NPU 11 and NPU 7 (docs/fabric_validation.md, "Fred-A's DP-group
io-reduce"); paced at the head, 1,255."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import pytest

from hdl.compiler.fabric_program import fabric_program
from hdl.compiler.packet_fabric_program import online_headers, stream_head, write_paces
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec, make_request
from hdl.designs.fabric.packet_fabric_top import packet_format

#: the small form of Fred-A's MP2-DP5-PP2 DP groups: 3 L1 Fred_3(6) (4 NPUs, the half-rate
#: uplink, a controller port), groups (0, 4, 8), (2, 6, 10), (1, 5, 9), (3, 7, 11), controller
#: g on L1 g mod 3; at 1/12 three chains' streams on one uplink ask 1/4 flit per cycle of its 1/2
SMALL = fabric_spec("fred-a", npus=12, npus_per_l1=4, io_controllers=4, io_rate=Fraction(1, 12))


def _paces(spec, request):
    program = fabric_program(spec, request, aligned_slots=True)
    headers = online_headers(program, request, packet_format(8, dest_ports=max(spec.switch_ports)))
    return program, {r: p for r, p in write_paces(spec, program, headers).items() if p}


def test_the_small_fabrics_chains_are_paced_at_their_heads():
    """Hand-derived from ``io_chain_order``: group g's controller enters at its member on L1
    g mod 3, the chain runs the members in rank order from there, reduced backwards: 8 -> 4 ->
    0 -> c0, 2 -> 10 -> 6 -> c1, 5 -> 1 -> 9 -> c2, 11 -> 7 -> 3 -> c3. The writers into the
    controllers are 0, 6, 9, 3; the paced NPUs are the heads 8, 2, 5, 11, one writer each."""
    request = make_request(SMALL, op="io-reduce", size_flits=16, strategy="MP2-DP3-PP2", dim="dp")
    program, paces = _paces(SMALL, request)
    assert paces == {8: 1, 2: 1, 5: 1, 11: 1}
    assert [stream_head(SMALL, program, w) for w in (0, 6, 9, 3)] == [8, 2, 5, 11]


@pytest.mark.parametrize("kwargs, heads", [
    # the wafer: controller 0 enters at NPU 0, the chain 19 -> 18 -> ... -> 0 -> controller
    (dict(group="wafer"), {19: 1}),
    # the four DP groups: chains 16 -> 12 -> 8 -> 4 -> 0, 2 -> 18 -> 14 -> 10 -> 6,
    # 5 -> 1 -> 17 -> 13 -> 9, 11 -> 7 -> 3 -> 19 -> 15, each into its own controller
    (dict(strategy="MP2-DP5-PP2", dim="dp"), {16: 1, 2: 1, 5: 1, 11: 1}),
])
@pytest.mark.parametrize("fabric", ["fred-a", "fred-c"])
def test_the_wafers_io_reduce_chains_are_paced_at_their_heads(fabric, kwargs, heads):
    spec = fabric_spec(fabric, io_controllers=4)
    request = make_request(spec, op="io-reduce", size_flits=40, **kwargs)
    assert _paces(spec, request)[1] == heads


def test_an_io_broadcast_paces_nobody():
    """Its chains start at the controller (paced by its own memory) and end at NPUs."""
    request = make_request(SMALL, op="io-broadcast", size_flits=16, strategy="MP2-DP3-PP2", dim="dp")
    assert _paces(SMALL, request)[1] == {}


def test_a_forwarding_loop_has_no_head():
    stage = lambda sender: {"send_count": 8, "recv_count": 8, "fwd_count": 8, "sender": sender}
    program = SimpleNamespace(engines=[{"stages": [stage(1)]}, {"stages": [stage(0)]}])
    with pytest.raises(FredError, match=r"NPUs \[0, 1\] forward in a loop"):
        stream_head(SMALL, program, 0)


@pytest.mark.full
def test_the_small_fabrics_groups_reduce_out_at_their_controllers_rate():
    """Amaranth (about 2.5 min on a loaded 2-core machine): every flit checked, and the run
    within 150 cycles of one controller's 96 flits at 1/12 (1,152 cycles: the chains' way to
    their controllers, ~90-100 cycles, and the last packet's). Paced at the last members (the
    rule before), 1,553 cycles: the bound fails by 250."""
    from cocotb_tests.fabric.packet_fabric_sim import run_packet_fabric_amaranth
    size = 96
    request = make_request(SMALL, op="io-reduce", size_flits=size, strategy="MP2-DP3-PP2", dim="dp")
    run = run_packet_fabric_amaranth(SMALL, request, watchdog_cycles=20_000)
    assert run.errors == []
    assert all(run.engines[c]["received"] == size for c in range(12, 16))
    assert size * 12 <= run.cycles <= size * 12 + 150
