"""The packet fabric cut in two at its uplinks (``PacketFabricTop(spec, partition=..., part=p)``,
the circuit fabric's ``FabricPartition``) in Amaranth's simulator: the two parts wired back to
back (:class:`~hdl.designs.fabric.joined_parts.JoinedParts`) run a collective cycle for cycle as
the whole fabric does, every flit checked, and in every cycle of the run each part's ``cut_out``
stays the same when its ``cut_in`` changes (the rule the lock-step simulator rests on: a cut
signal depends only on its own part's registers; it failed before the input buffer's drop
credit was registered). tests/eda/test_packet_lockstep.py compares the lock-step simulator
itself with the one-model bench under Verilator (``-m full``)."""

from __future__ import annotations

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec, make_request
from hdl.contracts.fabric_partition import fabric_partition
from hdl.designs.fabric.joined_parts import JoinedParts
from hdl.designs.fabric.packet_fabric_top import PacketFabricTop

from cocotb_tests.fabric.packet_fabric_sim import run_packet_fabric_amaranth

#: two L1s of 2 NPUs and one L2 (Fred-D: in-switch collectives, full-rate uplink; Fred-A:
#: rings as online unicasts over the half-rate uplink, whose queue is in the sender's part)
SMALL_D = fabric_spec("fred-d", npus=4, npus_per_l1=2, uplink_ports=1)
SMALL_A = fabric_spec("fred-a", npus=4, npus_per_l1=2)


def joined_top(spec):
    partition = fabric_partition(spec)

    def top(spec, **options):
        return JoinedParts([PacketFabricTop(spec, partition=partition, part=p, **options)
                            for p in range(2)])
    return top


@pytest.mark.parametrize("spec, op, backpressure", [
    (SMALL_D, "all-reduce", 0.3),
    # 9 s more of the default suite's budget: the online rewrite and the half-rate queue
    pytest.param(SMALL_A, "all-reduce", 0.3, marks=pytest.mark.full)])
def test_the_parts_wired_together_run_cycle_for_cycle_as_the_whole_packet_fabric(spec, op, backpressure,
                                                                                 cut_checker):
    size = 9           # a full 8-flit packet and a short one
    request = make_request(spec, op=op, size_flits=size, group="wafer")
    assert fabric_partition(spec).cut_links()          # flits cross the cut
    whole = run_packet_fabric_amaranth(spec, request, sink_backpressure=backpressure,
                                       watchdog_cycles=4000, seed=3)
    each_cycle, seen = cut_checker(seed=1)
    joined = run_packet_fabric_amaranth(spec, request, sink_backpressure=backpressure,
                                        watchdog_cycles=4000, seed=3, top=joined_top(spec),
                                        each_cycle=each_cycle)
    assert whole.errors == [] and joined.errors == []
    assert (joined.cycles, joined.engines, joined.switches) == (whole.cycles, whole.engines, whole.switches)
    assert seen["cycles"] >= whole.cycles and seen["moved"] > 0


def test_a_bad_part_is_refused_naming_it():
    partition = fabric_partition(SMALL_D)
    with pytest.raises(FredError, match="both partition and part"):
        PacketFabricTop(SMALL_D, partition=partition)
    with pytest.raises(FredError, match="part must be in 0..1"):
        PacketFabricTop(SMALL_D, partition=partition, part=2)
    with pytest.raises(FredError, match="FabricPartition of fabric fred-a"):
        PacketFabricTop(SMALL_A, partition=partition, part=0)
