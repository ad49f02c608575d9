"""The write pacer (hdl/designs/fabric/write_pacer.py; docs/fabric_rtl.md, "Host rules") in
Amaranth's simulator, driven by ``run_streams`` (tests/conftest.py: valid held until the
transfer, as the stream rules require): a writer of ``divisor`` sharing a sink of a / b flits
per cycle sends whole packets at a / (b ``divisor``) after an unpaced first packet;
``divisor`` 0 passes the stream untouched; no flit is lost, duplicated, reordered or corrupted
under random producer gaps and consumer stalls. And the compiler's side (:func:`write_paces`):
which NPUs are paced, by how many writers.

The packet starts these tests expect, from the pacer's rule (its docstring) with ``k`` =
``packet_flits``, ``c`` = b ``divisor`` / a the cycles a paced flit costs, and cycle 0 the
streams' first cycle after the one-cycle ``restart`` pulse:

* packet 0 bypasses the limiter: a producer that never pauses has its k flits accepted by the
  assembler in cycles 0 .. k - 1 (its buffer holds one packet, empty after the restart), and
  the assembler offers a packet the cycle after its last flit entered: it starts in cycle k;
* from cycle k (the first packet is in: ``first_flits`` = k) the flits go through the paced
  limiter, whose tokens are still at their restart value 0 (a paced gate saves no token while
  no flit waits, and none waited in cycles 0 .. k - 1): limiter flit j (j = 0, 1, ...) leaves
  it in cycle k + ceil((j + 1) c) - 1 (``rate_gate``'s paced rule, started in cycle k). The
  assembler's one-packet buffer never holds it back when c >= 2 (every case here has c >=
  4): flit i of packet p (i = 0 .. k - 1) leaves the limiter at least floor((i + 1) c) - 1 >=
  i + 1 cycles after packet p - 1 started, by when a consumer that is always ready has taken
  i + 1 flits of packet p - 1 and so freed i + 1 slots;
* packet p >= 1 is limiter flits (p - 1) k .. p k - 1; its last enters in cycle
  k + ceil(p k c) - 1, so it starts in cycle k + ceil(p k c). With p = 0 this is packet 0's
  k too: **start(p) = k + ceil(p k c)** for every p.
"""

import random

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.flit import FlitFormat
from hdl.designs.fabric.rate_limiter import RateLimiter
from hdl.designs.fabric.write_pacer import WritePacer
from hdl.designs.layouts import flit_layout

FLIT = FlitFormat(dtype="int32", lanes=1, tag_width=1)


def _pace(run_streams, flits, *, rate, divisor, size, seed=0, idle=0.0, backpressure=0.0,
          probes=None):
    """``flits`` words 0, 1, ... (``last`` on the last) through a WritePacer of ``rate``,
    ``divisor`` and ``size``-flit packets (``restart`` pulsed first); returns ([(word, last,
    cycle)] as taken at ``o``, the cycle of each flit's acceptance at ``i``, the probes)."""
    dut = WritePacer(flit_layout(FLIT), rate=rate, packet_flits=size)
    words = [FLIT.pack([n], last=int(n == flits - 1)) for n in range(flits)]
    limit = 4 * flits * rate[1] * max(divisor, 1) // rate[0] + 200
    result = run_streams(dut, inputs={"i": (dut.i, words)}, outputs={"o": dut.o},
                         settings=[(dut.divisor, divisor)], pulses=[(dut.restart, 1)],
                         idle=idle, backpressure=backpressure, rng=random.Random(seed),
                         until=lambda received: len(received["o"]) == flits, max_cycles=limit,
                         probes={name: probe(dut) for name, probe in (probes or {}).items()})
    taken = []
    for cycle, word in result["received"]["o"]:
        lanes, last, _ = FLIT.unpack(word)
        taken.append((lanes[0], last, cycle))
    return taken, result["sent"]["i"], result["probes"]


def _starts(taken, size):
    return [cycle for index, (_, _, cycle) in enumerate(taken) if index % size == 0]


@pytest.mark.parametrize("divisor", [1, 2, 3])
def test_whole_packets_leave_at_the_sinks_rate_over_its_writers(divisor, run_streams):
    """rate 1/4, k = 4-flit packets: a flit costs c = 4 x divisor cycles, so start(p) = 4 +
    ceil(p x 4 x 4 divisor) = 4 + 16 divisor p (the module docstring): packet 0 in cycle 4
    (its flits entered in cycles 0-3), then one every 16 x divisor cycles exactly (the
    limiter is exact: no drift); each packet leaves in 4 consecutive cycles."""
    size, flits = 4, 24
    taken, _, _ = _pace(run_streams, flits, rate=(1, 4), divisor=divisor, size=size)
    assert [word for word, _, _ in taken] == list(range(flits))
    assert [last for _, last, _ in taken] == [0] * (flits - 1) + [1]
    starts = _starts(taken, size)
    assert starts == [4 + 16 * divisor * p for p in range(flits // size)]
    for p, start in enumerate(starts):
        assert [c for _, _, c in taken[p * size:(p + 1) * size]] == list(range(start, start + size))


def test_the_paper_controller_rate_is_exact_over_a_long_write(run_streams):
    """16/375 (128 GBps of a 3 TBps link), one writer, k = 8-flit packets: c = 375/16, so
    start(p) = 8 + ceil(p x 8 x 375/16) = 8 + ceil(187.5 p): 8, 196, 383, 571, ...; after
    the first packet, 96 flits (12 packets) take exactly start(13) - start(1) = 2,438 - 188
    = 2,250 = 96 x 375/16 cycles: the rate's rounding never accumulates."""
    taken, _, _ = _pace(run_streams, 8 + 96 + 8, rate=(16, 375), divisor=1, size=8)
    starts = _starts(taken, 8)
    assert starts == [8 + -(-p * 8 * 375 // 16) for p in range(14)]
    assert starts[:4] == [8, 196, 383, 571]
    assert starts[13] - starts[1] == 96 * 375 // 16 == 2250


def test_divisor_zero_passes_the_stream_untouched(run_streams):
    """Divisor 0 (unpaced): ``o`` is ``i`` in the same cycle (no limiter, no packet
    assembly): each of 20 flits from a producer that never pauses is accepted and taken in
    the same cycle, cycles 0-19, and ``o.valid`` equals ``i.valid`` in every cycle."""
    taken, accepted, probes = _pace(run_streams, 20, rate=(16, 375), divisor=0, size=8,
                                    probes={"i": lambda dut: dut.i.valid,
                                            "o": lambda dut: dut.o.valid})
    assert [word for word, _, _ in taken] == list(range(20))
    assert [c for _, _, c in taken] == accepted == list(range(20))
    assert probes["o"] == probes["i"] and sum(probes["i"]) == 20


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_flit_is_lost_duplicated_or_reordered_under_gaps_and_stalls(seed, run_streams):
    """Random producer gaps (40 %) and consumer stalls (50 %, the packetizer's credits): every
    word once, in order, ``last`` on the last only. Bound on the packet starts, rate 1/4 over
    2 writers (c = 8 cycles a flit), k = 8: a packet's flits enter the assembler's one-packet
    buffer only once the packet before has begun to leave (its first slot frees the cycle
    after that packet's start); the limiter saves at most one flit's tokens, so the first of
    them may go at once and each of the n - 1 others at least c = 8 cycles after the one
    before (n: the packet's flits, 8, or 5 for the stream's last of 45 = 5 x 8 + 5); the
    packet then starts the cycle after its last flit entered: start(p + 1) - start(p) >= 1 +
    (n - 1) x 8 + 1 (58 for a whole packet), whatever the gaps and stalls (64 when nothing
    waits)."""
    taken, _, _ = _pace(run_streams, 45, rate=(1, 4), divisor=2, size=8, seed=seed, idle=0.4,
                        backpressure=0.5)
    assert [word for word, _, _ in taken] == list(range(45))
    assert [last for _, last, _ in taken] == [0] * 44 + [1]
    starts = _starts(taken, 8)
    lengths = [8, 8, 8, 8, 8, 5]
    assert len(starts) == len(lengths)
    assert all(b - a >= 1 + (n - 1) * 8 + 1 for a, b, n in zip(starts, starts[1:], lengths[1:]))


def test_a_run_time_divisor_needs_a_paced_limiter():
    with pytest.raises(FredError, match="must be paced"):
        RateLimiter(flit_layout(FLIT), rate=(1, 4), divisor_bits=8)


def test_write_paces_counts_the_writers_into_each_controller():
    """The compiler's side: an NPU is paced by the number of NPUs whose online unicasts go to
    the same controller; an NPU that sends to an NPU, or does not send, is not paced."""
    from types import SimpleNamespace
    from hdl.compiler.packet_fabric_program import write_paces
    from hdl.contracts.fabric import fabric_spec
    spec = fabric_spec("fred-d", npus=6, npus_per_l1=2, uplink_ports=1, io_controllers=2)
    sends = [8, 8, 8, 0, 8, 8, 0, 0]
    program = SimpleNamespace(engines=[{"stages": [{"send_count": n}]} for n in sends])
    # NPUs 0, 1, 5 -> controller 6; NPU 2 -> controller 7; NPU 4 -> NPU 3; NPU 3 sends nothing
    flows = [6, 6, 7, 6, 3, 6, 0, 0]
    headers = [{"flow": f} for f in flows]
    assert write_paces(spec, program, headers) == {0: 3, 1: 3, 2: 1, 3: 0, 4: 0, 5: 3}
    # only the online endpoints' headers name a destination
    assert write_paces(spec, program, headers, ranks={0, 2}) == {0: 1, 1: 0, 2: 1, 3: 0, 4: 0, 5: 0}


def test_write_paces_of_the_far_write_scenario():
    """dp-under-far-write on the 6-NPU Fred-D: NPU 3 (NPU 1 of L1 1) writes into controller 6,
    alone; the DP all-reduce's NPUs (in-switch, not online) are not paced."""
    from cocotb_tests.fabric.packet_fabric_sim import _packet, packet_load_sequence
    from hdl.compiler.concurrent_program import concurrent_program
    from hdl.contracts.fabric import fabric_spec
    from hdl.designs.fabric.packet_fabric_top import PACE_REG
    from studies.concurrent_case import scenario_classes
    spec = fabric_spec("fred-d", npus=6, npus_per_l1=2, uplink_ports=1, io_controllers=1)
    classes = scenario_classes(spec, "dp-under-far-write", size=16, load_size=64, delay=40)
    program, request, vcs, delays, _ = concurrent_program(spec, classes)
    load = packet_load_sequence(spec, request, program, _packet(spec, 8, True), vcs, delays)
    assert {unit: value for unit, reg, value in load["writes"] if reg == PACE_REG} == {
        0: 0, 1: 0, 2: 0, 3: 1, 4: 0, 5: 0}
