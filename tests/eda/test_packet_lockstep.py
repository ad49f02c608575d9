"""The packet fabric on the lock-step simulator (docs/fabric_rtl.md, "Simulation speed"): the
fabric cut at its uplinks (``PacketFabricTop(partition=, part=)``, the circuit fabric's
``hdl/contracts/fabric_partition.py``), each part Verilated, run one per core by
``eda/fabric/lockstep.cpp``, against the one-model cocotb bench: the same cycles and the same
counters of every engine and switch, every flit checked, under sink backpressure; an in-switch
all-reduce on the small Fred-D and rings as online unicasts over Fred-A's half-rate uplink
(flits cross the cut both ways). Two Verilator builds per fabric: ``-m full``."""

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec, make_request

from cocotb_tests.fabric.packet_fabric_sim import run_packet_fabric

SMALL_D = fabric_spec("fred-d", npus=4, npus_per_l1=2, uplink_ports=1)
SMALL_A = fabric_spec("fred-a", npus=4, npus_per_l1=2)


@pytest.mark.full
@pytest.mark.cocotb
@pytest.mark.parametrize("spec, size", [(SMALL_D, 100), (SMALL_A, 60)])
def test_packet_lockstep_counts_the_same_cycles_as_the_one_model_bench(spec, size):
    request = make_request(spec, op="all-reduce", size_flits=size, group="wafer")
    runs = [run_packet_fabric(spec, request, cflags="-O0", sink_backpressure=0.3, seed=3,
                              simulator=simulator)
            for simulator in ("lockstep", "cocotb")]
    assert runs[0].errors == runs[1].errors == []
    assert runs[0].simulator == "lockstep" and "lockstep" in runs[0].build_dir
    assert runs[0].cycles == runs[1].cycles > size
    assert runs[0].engines == runs[1].engines and runs[0].switches == runs[1].switches


def test_an_unknown_packet_simulator_is_refused_before_building():
    request = make_request(SMALL_D, op="all-reduce", size_flits=8, group="wafer")
    with pytest.raises(FredError, match="unknown packet fabric simulator 'verilog'; expected one "
                                        "of cocotb, lockstep"):
        run_packet_fabric(SMALL_D, request, simulator="verilog")


def test_the_timed_window_overshoots_a_run_by_at_most_a_small_poll():
    """The bench's cycles/s is the run's cycles over the window from start to the poll that
    sees all_done: the poll is a small fraction of the size, never the 20,000 cycles that timed
    a 20,048-cycle run to cycle 40,000."""
    from cocotb_tests.fabric.run import poll_cycles
    assert [poll_cycles(n) for n in (8, 1000, 4000, 20000, 60000)] == [64, 64, 250, 1024, 1024]
    assert all(poll_cycles(n) <= max(64, n / 16) for n in range(1, 70000, 997))
