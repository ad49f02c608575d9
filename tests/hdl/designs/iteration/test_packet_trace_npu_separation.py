"""Issue 32: no flit of one collective may enter another at a packet NPU
(hdl/designs/iteration/packet_trace_npu.py; docs/fabric_iteration.md, "Collectives kept apart at
a packet NPU"). One :class:`PacketTraceNpu` in the Amaranth simulator runs two collectives
(collective 0: receive 2 packets while sending 40 flits of its own; compute; collective 1:
receive 1 packet, send 8 flits) and the bench plays the L1 output, sending packets numbered as
the fabric numbers them (on over the trace: collective 0's are 0 and 1, collective 1's is 2),
each flit's data the one its collective's receiver checks.

* a collective-1 packet that arrives after collective 0's receive count is met, while the
  engine still sends collective 0's flits, waits in the receive buffer until collective 1
  starts, then is checked as collective 1's (main's NPU took it as collective 0's extras and
  dropped it: run errors, and collective 1 never received it);
* a collective-1 packet that arrives between collective 0's two packets is never given to the
  engine during collective 0 (main's NPU added it as collective 0's data: wrong flits). It
  stays at the head of the one receive FIFO, so collective 0's second packet behind it waits
  too: one FIFO cannot resolve that arrangement, the fabric must not produce it -- the packet
  iteration top's barrier per collective (:class:`~hdl.designs.iteration.CollectiveBarrier`,
  tested in test_packet_iteration_separation_sim.py) makes every NPU start a collective's
  sends only once every NPU has finished the collective before.
"""

from __future__ import annotations

from hdl.contracts.npu_engine import STAGE_REGS, engine_writes, mix
from hdl.contracts.trace_program import (COLLECTIVE_BIT, PACKET_HEADER_REGS, TRACE_NODES, TRACE_TABLE_ADDR,
                                         TRACE_TABLE_DATA, loader_entries, loader_writes)

PROGRAMS = 64
PACKET = 8                          # flits per packet
COMPUTE = 5                         # cycles between the collectives
#: per collective: (flits sent, packets received, the received data's weights (w, h))
COLLECTIVES = ((40, 2, (3, 11)), (8, 1, (5, 17)))
MASK = 0xFFFFFFFF


def _engine(send: int, packets: int, weights) -> dict:
    """One stage: ``send`` flits of its own data, ``packets`` x 8 flits received and checked
    against ``weights`` (flit k: w mix(k, 0) + h), one chunk."""
    stage = {name: 0 for name in STAGE_REGS}
    stage.update(send_count=send, own_only=send, recv_count=packets * PACKET, chunk=MASK, ws=1, hs=0,
                 wr=weights[0], hr=weights[1])
    return {"backpressure": 0, "seed": 1, "stages": [stage]}


def _run(arrivals, program_and_start, *, cycles=600):
    """``arrivals``: (cycle after the start, packet number) in order. Returns the NPU's
    counters, the nodes finished, its credits returned, and the cycle each collective node
    ended."""
    from amaranth.sim import Simulator

    from hdl.contracts.flit import FlitFormat
    from hdl.contracts.packet import VC
    from hdl.designs.fabric.fabric_top import TAG_WIDTH
    from hdl.designs.fabric.packet_fabric_top import packet_format
    from hdl.designs.iteration import PacketTraceNpu
    packet = packet_format(8, PACKET)
    dut = PacketTraceNpu(flit=FlitFormat(dtype="int32", lanes=1, tag_width=TAG_WIDTH), packet=packet,
                         depth=24, nodes=8, programs=PROGRAMS)
    vc = int(VC.DP)
    programs = [{0: [*engine_writes(_engine(send, packets, w)), (PACKET_HEADER_REGS["vc"], vc),
                     (PACKET_HEADER_REGS["packets"], packets)]} for send, packets, w in COLLECTIVES]
    entries = loader_entries(programs, 1, deferred=frozenset())
    words = [COLLECTIVE_BIT, COMPUTE, COLLECTIVE_BIT]
    writes = ([(TRACE_TABLE_ADDR, 0), *[(TRACE_TABLE_DATA, w) for w in words], (TRACE_NODES, len(words))]
              + loader_writes(entries, 1, PROGRAMS))
    # each packet number's flits: its collective's weights, data indices from the collective's start
    flits = {}
    seq = 0
    for _, packets, (w, h) in COLLECTIVES:
        for p in range(packets):
            flits[seq + p] = [(w * mix(PACKET * p + f, 0) + h) & MASK for f in range(PACKET)]
        seq += packets
    out = {"credits": 0, "ends": []}

    async def bench(ctx):
        await program_and_start(ctx, dut, writes)
        queue = []
        nodes, credit = 0, 0
        for cycle in range(cycles):
            # an L1 input that always has room: each flit's credit comes back the next cycle
            ctx.set(dut.credit_in[vc], credit)
            credit = ctx.get(dut.o.valid)
            while arrivals and arrivals[0][0] <= cycle:
                _, number = arrivals.pop(0)
                queue += [(number, f) for f in range(PACKET)]
            if queue:
                number, f = queue.pop(0)
                ctx.set(dut.i.valid, 1)
                ctx.set(dut.i.payload.data, flits[number][f])
                ctx.set(dut.i.payload.last, f == PACKET - 1)
                ctx.set(dut.i.payload.tag, packet.pack_header(phase=0, vc=vc, seq=number, flow=0))
            else:
                ctx.set(dut.i.valid, 0)
            out["credits"] += ctx.get(dut.credit_out[vc])
            if ctx.get(dut.nodes_done) != nodes:
                nodes = ctx.get(dut.nodes_done)
                out["ends"].append(cycle)
            if ctx.get(dut.done):
                break
            await ctx.tick()
        ctx.set(dut.i.valid, 0)
        out.update({n: ctx.get(getattr(dut, n)) for n in ("done", "nodes_done", "received", "errors", "extra",
                                                            "run_errors", "seq_errors", "link_errors")})

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out


def test_a_next_collectives_packet_after_the_receive_count_waits_for_its_collective(program_and_start):
    """Collective 0's two packets at once (received by about cycle 20), collective 1's packet at
    cycle 25, while collective 0 still sends its 40 flits: the packet waits in the receive
    buffer (its credits come back only when collective 1 takes it) and both collectives end
    with every flit checked, no extra, no packet out of sequence."""
    out = _run([(0, 0), (0, 1), (25, 2)], program_and_start)
    assert out["done"] and out["nodes_done"] == 3, out
    assert (out["run_errors"], out["errors"], out["extra"], out["seq_errors"], out["link_errors"]) == (0,) * 5, out
    assert out["received"] == PACKET            # the last collective's flits, all of them
    assert out["credits"] == 3 * PACKET
    # collective 0 ends only after its 40 sends: the packet at 25 (+ 8 flits) came during it
    assert out["ends"][0] >= COLLECTIVES[0][0] > 25 + PACKET, out


def test_a_next_collectives_packet_between_the_current_ones_is_never_taken_by_it(program_and_start):
    """Collective 1's packet between collective 0's two: the engine takes collective 0's first
    packet, checks it good, and takes nothing more in collective 0 -- the later packet waits at
    the head of the receive buffer (no credit returned for it or behind it), never added to
    collective 0's data; collective 0 cannot finish (the arrangement the fabric's barrier
    rules out)."""
    out = _run([(0, 0), (0, 2), (0, 1)], program_and_start, cycles=300)
    assert not out["done"] and out["nodes_done"] == 0, out
    assert (out["received"], out["errors"], out["extra"]) == (PACKET, 0, 0), out
    assert out["credits"] == PACKET, out


def test_packets_in_their_collectives_order_run_both_collectives(program_and_start):
    """Control: collective 1's packet sent during the compute between the collectives (it
    waits until collective 1 starts, as on main) -- both collectives end, every flit good."""
    out = _run([(0, 0), (0, 1), (60, 2)], program_and_start)
    assert out["done"] and (out["run_errors"], out["seq_errors"], out["link_errors"]) == (0, 0, 0), out
    assert out["credits"] == 3 * PACKET
