"""The stripe receiver (hdl/designs/fabric/stripe_receiver.py) in Amaranth's simulator, loaded from
the striped I/O program (hdl/compiler/io_stripe_program.py): an NPU hearing its predecessor's 17
stripes and its controller's one, interleaved per packet in a random order, with random idle and
backpressure, checks every flit; a corrupted flit, a lost packet and a duplicated one show."""

import random

import pytest
from amaranth.sim import Simulator

from hdl.compiler.io_stripe_program import io_stripe_program, receiver_entries
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec
from hdl.contracts.io_stripes import stripe_receiver_writes
from hdl.contracts.npu_engine import flit_value
from hdl.designs.fabric.stripe_receiver import StripeReceiver

PACKET = 8


def _packets(program, endpoint):
    """Per stripe the endpoint receives: its packets, lists of (data, last), with their seq."""
    out = {}
    for step in program.steps[endpoint].values():
        if step.source is None:
            continue
        words = [flit_value((step.wr, step.hr), step.org + t, 0) for t in range(step.flits)]
        chunks = [words[i:i + PACKET] for i in range(0, len(words), PACKET)]
        out[step.stripe] = [(seq, chunk) for seq, chunk in enumerate(chunks)]
    return out


def _interleave(per_stripe, rng):
    """One arrival order of every stripe's packets, each stripe's in its own order."""
    queues = {k: list(v) for k, v in per_stripe.items()}
    order = []
    while queues:
        k = rng.choice(sorted(queues))
        order.append((k, *queues[k].pop(0)))
        if not queues[k]:
            del queues[k]
    return order


def _run(program_and_start, stripes, writes, packets, *, seed=1, idle=0.3, backpressure=0.3):
    """Drive ``packets`` [(stripe, seq, words)] into a receiver loaded with ``writes`` (through
    the shared ``program_and_start``); returns its counters and the (stripe, index) of every
    flit it passed on."""
    dut = StripeReceiver(stripes=stripes)
    rng = random.Random(seed)
    flits = [(k, seq, w, i == len(words) - 1) for k, seq, words in packets for i, w in enumerate(words)]
    out = {"passed": []}

    async def bench(ctx):
        await program_and_start(ctx, dut, writes)
        pos = 0
        for _ in range(4 * len(flits) + 50):
            offer = pos < len(flits) and rng.random() >= idle
            if offer:
                k, seq, word, last = flits[pos]
                ctx.set(dut.i.payload, {"data": word, "last": last, "stripe": k, "seq": seq})
            ctx.set(dut.i.valid, int(offer))
            ctx.set(dut.o.ready, int(rng.random() >= backpressure))
            if offer and ctx.get(dut.i.ready):
                out["passed"].append((ctx.get(dut.o.payload.stripe), ctx.get(dut.o.payload.index)))
                pos += 1
            await ctx.tick()
        for name in ("done", "received", "errors", "first_error", "seq_errors"):
            out[name] = ctx.get(getattr(dut, name))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


def test_an_npu_checks_its_18_stripes_from_two_senders_interleaved_per_packet(program_and_start):
    """Fred-A, 18 controllers, weight streaming of 360 flits (20-flit stripes, 3 packets each):
    NPU 4 hears NPU 3 (17 stripes) and controller 16 (stripe 16, its entry)."""
    spec = fabric_spec("fred-a", io_controllers=18)
    program = io_stripe_program(spec, "io-broadcast", 360, seed=2)
    entries = receiver_entries(program, 4)
    assert sorted(program.steps[4][k].source for k in range(18))[-2:] == [3, 36]
    per_stripe = _packets(program, 4)
    order = _interleave(per_stripe, random.Random(7))
    out = _run(program_and_start, 18, stripe_receiver_writes(entries, 18), order)
    assert (out["done"], out["received"], out["errors"], out["seq_errors"]) == (1, 360, 0, 0)
    # every flit passed on with its stripe's data index, in its stripe's order
    for k in range(18):
        assert [i for s, i in out["passed"] if s == k] == list(range(20 * k, 20 * k + 20))


@pytest.fixture(scope="module")
def small():
    """Fred-A with 4 NPUs and 2 controllers, 40 flits: NPU 0 hears controller 0 (stripe 0) and
    NPU 3 (stripe 1), 20 flits each."""
    spec = fabric_spec("fred-a", npus=4, npus_per_l1=2, io_controllers=2)
    program = io_stripe_program(spec, "io-broadcast", 40)
    per_stripe = _packets(program, 0)
    order = _interleave(per_stripe, random.Random(3))
    return stripe_receiver_writes(receiver_entries(program, 0), 2), order


def test_a_corrupted_flit_is_counted_where_it_arrived(small, program_and_start):
    writes, order = small
    k, seq, words = order[2]
    order = order[:2] + [(k, seq, [words[0] ^ 0x100] + words[1:])] + order[3:]
    out = _run(program_and_start, 2, writes, order)
    before = sum(len(w) for _, _, w in order[:2])
    assert (out["errors"], out["first_error"], out["seq_errors"], out["done"]) == (1, before + 1, 0, 1)


def test_a_lost_packet_shows_as_a_sequence_error_and_the_run_never_completes(small, program_and_start):
    writes, order = small
    lost = next(i for i, (_, seq, _) in enumerate(order) if seq == 1)
    out = _run(program_and_start, 2, writes, order[:lost] + order[lost + 1:])
    assert out["seq_errors"] == 1 and out["errors"] > 0 and out["done"] == 0


def test_a_duplicated_packet_shows_as_a_sequence_error_and_extra_flits(small, program_and_start):
    writes, order = small
    out = _run(program_and_start, 2, writes, order[:1] + order[:1] + order[1:])
    assert out["seq_errors"] == 1 and out["errors"] > 0


def test_bad_parameters_and_programs_are_refused():
    with pytest.raises(FredError, match="stripes must be an integer in 1..64"):
        StripeReceiver(stripes=0)
    with pytest.raises(FredError, match="stripe 2 is outside 0..1"):
        stripe_receiver_writes([{"stripe": 2, "org": 0, "flits": 1, "wr": 1, "hr": 0}], 2)
