"""cocotb bench of the mesh router (``fred_mesh_router``, hdl/designs/mesh/mesh_router.py) under
Verilator.

The design is the registry's default (``fred verilog --unit mesh-router``): 32-bit data, 3-bit
coordinates, packets of up to 4 flits, 8 flits per VC. The router sits at
:data:`~cocotb_tests.mesh_traffic.ROUTER_AT` of a virtual 5 x 5 mesh; traffic comes from
:func:`~cocotb_tests.mesh_traffic.router_traffic` (uniform, transpose, hotspot).

Per cycle (drive after the rising edge, sample at ReadOnly): one sender per input port keeps a
credit counter per VC (starting at the router's depth), starts a packet only with credits for
all its flits (virtual cut-through, as a neighbouring router would) and may idle between flits
(an idle generator); one receiver per output models the downstream buffer: every flit observed
enters it, and it frees one flit per cycle unless the backpressure generator holds it, returning
that flit's VC credit. Every output flit goes to a :class:`TaggedScoreboard` keyed per (output,
source, destination, VC), ordered, tag (sequence, flit index): loss, duplication, corruption,
misrouting (a flit on an output its route does not take) and reordering are all reported. The
router's ``overflow`` / ``credit_error`` flags and the senders' counters (never above the
depth) are checked every cycle; a :class:`Watchdog` fails the run when nothing moves for 500
cycles with flits outstanding.

Testcases: ``latency`` (one flit, measured input-to-output cycles), ``permutation`` (every
input to a different output, full-length packets, no idle or backpressure: the per-port rate
without contention), ``random_patterns`` (every pattern under random idle and backpressure),
``saturation`` (every pattern, every input always offering: accepted flits per cycle per port
and on the busiest output). Sizes come from the bench parameters (pytest sets them).
"""

from __future__ import annotations

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from cocotb_tests.lib import bench_params
from cocotb_tests.lib.generators import never, random_backpressure, random_idle
from cocotb_tests.lib.metrics import record
from cocotb_tests.lib.scoreboard import TaggedScoreboard
from cocotb_tests.lib.seeds import seeded_rng
from cocotb_tests.lib.watchdog import Watchdog
from cocotb_tests.mesh_traffic import (PATTERNS, ROUTER_AT, VIRTUAL_MESH, MeshPacket, data_word,
                                       router_traffic)
from hdl.contracts.mesh import (EAST, LOCAL, MESH_PORTS, MESH_VCS, NORTH, SOUTH, WEST,
                                MeshFlitFormat, route_port, router_latency)

#: The registry's defaults (hdl/designs/registry.py ``mesh_router``); pytest builds the same.
DESIGN = {"data_width": 32, "coord_bits": 3, "packet_flits": 4, "depth": 8}
FLIT = MeshFlitFormat(data_width=DESIGN["data_width"], coord_bits=DESIGN["coord_bits"],
                      packet_flits=DESIGN["packet_flits"])
DEPTH = DESIGN["depth"]
COLS = VIRTUAL_MESH[0]


def _int(handle) -> int:
    return int(handle.value)


class RouterBench:
    """Senders, receivers, scoreboard and watchdog around the router (see the module doc)."""

    def __init__(self, dut, traffic: dict[int, list[MeshPacket]], *, idle, backpressure):
        self.dut = dut
        self.queues = {p: list(traffic.get(p, ())) for p in range(MESH_PORTS)}
        self.current = {p: [] for p in range(MESH_PORTS)}       # words left of the packet in flight
        self.credits = {p: [DEPTH] * MESH_VCS for p in range(MESH_PORTS)}
        self.idle = {p: idle() for p in range(MESH_PORTS)}
        self.backpressure = {p: backpressure() for p in range(MESH_PORTS)}
        self.downstream = {p: [] for p in range(MESH_PORTS)}    # VCs of flits held downstream
        self.board = TaggedScoreboard("mesh router", ordered=True)
        self.delivered = {p: 0 for p in range(MESH_PORTS)}
        self.first_empty = None          # first cycle some input had nothing left to offer
        self.cycle = 0
        for packets in self.queues.values():
            for pk in packets:
                for k, value in enumerate(pk.data):
                    self.board.expect((pk.out_port, pk.src, pk.dst, pk.vc), (pk.seq, k), value)

    async def reset(self):
        """Reset the router (the clock runs: :func:`_start_clock` at the start of each test)."""
        dut = self.dut
        await RisingEdge(dut.clk)       # out of a previous run's ReadOnly phase
        dut.rst.value = 1
        dut.pos_x.value, dut.pos_y.value = ROUTER_AT
        for p in range(MESH_PORTS):
            getattr(dut, f"i__{p}__valid").value = 0
            getattr(dut, f"o_credit__{p}").value = 0
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0

    def _drive_input(self, p):
        dut = self.dut
        word = None
        if not self.current[p] and self.queues[p]:
            pk = self.queues[p][0]
            if self.credits[p][pk.vc] >= len(pk.data):       # a whole packet's credits
                self.queues[p].pop(0)
                self.current[p] = pk.words(FLIT)
                self.credits[p][pk.vc] -= len(pk.data)
        if self.current[p] and not next(self.idle[p]):
            word = self.current[p].pop(0)
        if not self.current[p] and not self.queues[p] and self.first_empty is None:
            self.first_empty = self.cycle
        getattr(dut, f"i__{p}__valid").value = int(word is not None)
        if word is not None:
            getattr(dut, f"i__{p}__payload").value = word

    def _drive_credit(self, p):
        freed = 0
        if self.downstream[p] and not next(self.backpressure[p]):
            freed = 1 << self.downstream[p].pop(0)
        getattr(self.dut, f"o_credit__{p}").value = freed

    def _sample(self, p) -> bool:
        dut = self.dut
        returned = _int(getattr(dut, f"i_credit__{p}"))
        for v in range(MESH_VCS):
            self.credits[p][v] += returned >> v & 1
            assert self.credits[p][v] <= DEPTH, \
                f"input {p} VC {v}: {self.credits[p][v]} credits > depth {DEPTH} (cycle {self.cycle})"
        if not _int(getattr(dut, f"o__{p}__valid")):
            return False
        f = FLIT.unpack(_int(getattr(dut, f"o__{p}__payload")))
        src_index = f["data"] >> (FLIT.data_width - 8)
        src = (src_index % COLS, src_index // COLS)
        dst = (f["dest_x"], f["dest_y"])
        seq, index = f["data"] >> (FLIT.data_width - 8 - 12) & 0xFFF, f["data"] >> (FLIT.data_width - 26) & 0x3F
        error = self.board.observe((p, src, dst, f["vc"]), (seq, index), f["data"])
        assert error is None, f"cycle {self.cycle}: {error}"
        expected = route_port(*ROUTER_AT, *dst, ("xy", "yx")[f["vc"]])
        assert expected == p, f"flit for {dst} VC {f['vc']} left port {p}, its route takes {expected}"
        self.downstream[p].append(f["vc"])
        self.delivered[p] += 1
        return True

    async def run(self, *, max_cycles=200_000):
        dut = self.dut
        watchdog = Watchdog(500, lambda: self.board.outstanding, name="mesh router watchdog")
        while self.board.outstanding:
            await RisingEdge(dut.clk)
            self.cycle += 1
            assert self.cycle <= max_cycles, f"not done after {max_cycles} cycles"
            for p in range(MESH_PORTS):
                self._drive_input(p)
                self._drive_credit(p)
            await ReadOnly()
            moved = [self._sample(p) for p in range(MESH_PORTS)]
            assert not _int(dut.overflow), f"an input buffer overflowed (cycle {self.cycle})"
            assert not _int(dut.credit_error), f"an output got back too many credits (cycle {self.cycle})"
            if any(moved):
                watchdog.kick()
            watchdog.tick(self.cycle)
        self.board.check()
        return self.cycle


def _start_clock(dut):
    Clock(dut.clk, 10, unit="ns").start()


def _packet(src, dst, vc, seq, in_port, length):
    index = src[1] * COLS + src[0]
    data = tuple(data_word(FLIT, index, seq, k, seq + k) for k in range(length))
    return MeshPacket(src, dst, vc, seq, in_port, route_port(*ROUTER_AT, *dst, ("xy", "yx")[vc]), data)


@cocotb.test()
async def latency(dut):
    """One flit west -> east: cycles from its cycle on ``i`` to its cycle on ``o``."""
    _start_clock(dut)
    x, y = ROUTER_AT
    traffic = {WEST: [_packet((x - 1, y), (x + 2, y), 0, 0, WEST, 1)]}
    bench = RouterBench(dut, traffic, idle=never, backpressure=never)
    await bench.reset()
    sent_at = None
    while bench.board.outstanding:
        await RisingEdge(dut.clk)
        bench.cycle += 1
        was_queued = bool(bench.queues[WEST])
        for p in range(MESH_PORTS):
            bench._drive_input(p)
            bench._drive_credit(p)
        if was_queued:
            sent_at = bench.cycle
        await ReadOnly()
        for p in range(MESH_PORTS):
            if bench._sample(p):
                record(latency_cycles=bench.cycle - sent_at)
        assert bench.cycle < 50, "the flit never arrived"
    bench.board.check()


@cocotb.test()
async def permutation(dut):
    """local -> north, north -> south, south -> local, east -> west, west -> east: no two inputs
    share an output, full-length packets back to back, no idle or backpressure."""
    _start_clock(dut)
    x, y = ROUTER_AT
    flows = {LOCAL: ((x, y), (x, y - 2), 0), NORTH: ((x, y - 1), (x, y + 2), 0),
             SOUTH: ((x, y + 1), (x, y), 0), EAST: ((x + 1, y), (x - 1, y), 1),
             WEST: ((x - 1, y), (x + 3, y), 1)}
    packets = bench_params().get("permutation_packets", 50)
    traffic = {p: [_packet(src, dst, vc, n, p, FLIT.packet_flits) for n in range(packets)]
               for p, (src, dst, vc) in flows.items()}
    bench = RouterBench(dut, traffic, idle=never, backpressure=never)
    await bench.reset()
    cycles = await bench.run()
    flits = packets * FLIT.packet_flits
    # the last flit leaves ``latency`` cycles after the last one entered: the rate excludes that
    record(permutation_cycles=cycles, permutation_flits_per_port=flits,
           permutation_rate=round(flits / (cycles - router_latency()), 4))


@cocotb.test()
async def random_patterns(dut):
    """Every pattern under random idle (senders) and backpressure (receivers)."""
    _start_clock(dut)
    params = bench_params()
    for pattern in PATTERNS:
        rng = seeded_rng(f"mesh_router.random.{pattern}")
        traffic = router_traffic(pattern, packets_per_port=params.get("random_packets", 40), rng=rng,
                                 flit=FLIT)
        bench = RouterBench(dut, traffic, idle=lambda: random_idle(rng, params.get("idle", 0.3)),
                            backpressure=lambda: random_backpressure(rng, params.get("backpressure", 0.3)))
        await bench.reset()
        cycles = await bench.run()
        record(**{f"random_{pattern}_flits": bench.board.matched, f"random_{pattern}_cycles": cycles})


@cocotb.test()
async def saturation(dut):
    """Every input always offering, receivers never holding: accepted flits per cycle per port
    while every input still has packets queued (the window ends when the first runs dry)."""
    _start_clock(dut)
    params = bench_params()
    for pattern in PATTERNS:
        rng = seeded_rng(f"mesh_router.saturation.{pattern}")
        traffic = router_traffic(pattern, packets_per_port=params.get("saturation_packets", 100),
                                 rng=rng, flit=FLIT)
        fed = [p for p, packets in traffic.items() if packets]
        bench = RouterBench(dut, traffic, idle=never, backpressure=never)
        await bench.reset()
        snapshots = {}
        original = bench._sample

        def sample(p, original=original):
            moved = original(p)
            if bench.first_empty is None:
                snapshots[p] = (bench.cycle, bench.delivered[p])
            return moved
        bench._sample = sample
        await bench.run()
        window = max(cycle for cycle, _ in snapshots.values())
        accepted = [snapshots[p][1] / window for p in range(MESH_PORTS)]
        record(**{f"saturation_{pattern}_per_port": round(sum(accepted) / len(fed), 4),
                  f"saturation_{pattern}_busiest_output": round(max(accepted), 4),
                  f"saturation_{pattern}_window_cycles": window})
