"""Open-loop traffic through :class:`hdl.designs.mesh.mesh_network.MeshNetwork` in Amaranth's
simulator (the latency-load curve of studies/mesh_load_curve.py).

Each NPU's source holds its packets in an unbounded queue from their generation cycle (as in
BookSim) and sends one flit per cycle on its local link while it has a credit of the packet's
VC (credits start at the router's ``depth`` per VC and come back on ``i_credit``). Each NPU's
sink takes every flit the router ejects in the cycle it appears and returns its credit in the
next cycle (no downstream backpressure, so the curve is the mesh's own). Checked every run:
the network's ``protocol_error`` stays 0, no credit comes back beyond the depth, and every
flit arrives at the NPU its packet was sent to (a misrouted flit is an error).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from amaranth.sim import Simulator

from hdl.contracts.errors import FredError

__all__ = ["MeshInjection", "MeshRun", "run_mesh_network"]


@dataclass(frozen=True)
class MeshInjection:
    """A packet NPU ``src`` generates in cycle ``at`` for NPU ``dst`` on VC ``vc`` (0: X-Y,
    1: Y-X); ``flits``: the data of its flits."""

    src: int
    at: int
    dst: int
    vc: int
    flits: tuple


@dataclass
class MeshRun:
    cycles: int = 0
    received: dict = field(default_factory=dict)   # rank -> [(cycle, data, last, vc)]
    protocol_error: int = 0


def _words(spec, packet: MeshInjection) -> list:
    x, y = spec.position(packet.dst)
    return [(packet.vc, spec.flit.pack(data=d, last=n == len(packet.flits) - 1, vc=packet.vc, dest_x=x,
                                       dest_y=y)) for n, d in enumerate(packet.flits)]


def run_mesh_network(dut, injections, *, max_cycles: int) -> MeshRun:
    """Run ``injections`` (:class:`MeshInjection`) through ``dut`` until every packet is
    delivered or ``max_cycles`` have passed (the caller judges what was not delivered).
    Cycle numbers are the simulation's from 0."""
    spec, npus = dut.spec, dut.spec.npus
    run = MeshRun(received={r: [] for r in range(npus)})
    queues = {r: sorted((p for p in injections if p.src == r), key=lambda p: p.at) for r in range(npus)}
    total_flits = sum(len(p.flits) for p in injections)

    async def bench(ctx):
        credits = {r: [spec.depth] * 2 for r in range(npus)}
        words = {r: [] for r in range(npus)}           # the flits left of the packet being sent
        returning = {r: None for r in range(npus)}     # VC of the credit to return this cycle
        watched = []
        for r in range(npus):
            watched += [dut.o[r].valid, dut.o[r].payload.as_value(), dut.i_credit[r]]
        delivered = 0
        for cycle in range(max_cycles):
            for r in range(npus):
                if not words[r] and queues[r] and queues[r][0].at <= cycle:
                    words[r] = _words(spec, queues[r].pop(0))
                send = bool(words[r]) and credits[r][words[r][0][0]] > 0
                if send:
                    vc, word = words[r].pop(0)
                    credits[r][vc] -= 1
                ctx.set(dut.i[r].valid, send)
                ctx.set(dut.i[r].payload.as_value(), word if send else 0)
                ctx.set(dut.o_credit[r], 0 if returning[r] is None else 1 << returning[r])
                returning[r] = None
            values = list((await ctx.tick().sample(*watched))[2:])
            for r in range(npus):
                valid, payload, freed = values[3 * r], int(values[3 * r + 1]), int(values[3 * r + 2])
                for vc in range(2):
                    if freed >> vc & 1:
                        credits[r][vc] += 1
                        if credits[r][vc] > spec.depth:
                            raise FredError(f"NPU {r}: the router returned a VC {vc} credit beyond its "
                                            f"depth {spec.depth} in cycle {cycle}")
                if valid:
                    flit = spec.flit.unpack(payload)
                    if spec.position(r) != (flit["dest_x"], flit["dest_y"]):
                        raise FredError(f"a flit for router ({flit['dest_x']}, {flit['dest_y']}) left the "
                                        f"mesh at NPU {r} in cycle {cycle} (misrouted)")
                    run.received[r].append((cycle, flit["data"], flit["last"], flit["vc"]))
                    returning[r] = flit["vc"]
                    delivered += 1
            run.cycles = cycle + 1
            if delivered == total_flits:
                break
        run.protocol_error = ctx.get(dut.protocol_error)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return run
