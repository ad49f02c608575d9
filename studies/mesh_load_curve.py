"""Latency against offered load on the 2D-mesh RTL (docs/load_curve.md, "On a fabric: the mesh"):
``fred load-curve --mesh ROWSxCOLS``.

The same method as the packet switch's curve (studies/load_curve.py: Bernoulli packet
generation, unbounded source queues, warm-up / measurement / drain windows, the patterns of
:func:`studies.load_curve.destination` over the NPU ranks, saturation at
:data:`~studies.load_curve.LATENCY_FACTOR` x the zero-load latency or an undelivered measured
packet), on :class:`hdl.designs.mesh.mesh_network.MeshNetwork` (the mesh routers and wires of
``fred_mesh_fabric``, each NPU's local port driven by
:func:`cocotb_tests.mesh_network_sim.run_mesh_network`) in Amaranth's simulator.

Ranks are row-major (rank ``r * cols + c``), so on a square mesh the ``transpose`` pattern is
the mesh transpose (x, y) -> (y, x); ``hotspot`` sends :data:`~studies.load_curve.HOTSPOT_FRACTION`
of the packets to NPU 0 (a corner). Each packet takes VC 0 (X-Y) or VC 1 (Y-X) at random, as
the mesh fabric's two chunks do. Links run at one flit per cycle (``link_rate`` (1, 1)): the
curve is the router network's, in flits per cycle per NPU.

The zero-load latency is measured: one packet alone for every (source, destination) pair, the
mean over the pairs (the uniform pattern's zero-load latency, the BookSim convention).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from hdl.contracts.errors import FredError
from studies.load_curve import LATENCY_FACTOR, PATTERNS, LoadPoint, destination, packet_deliveries, sweep_loads

__all__ = ["MeshLoadCurve", "mesh_spec", "mesh_zero_load", "measure_mesh_point", "run_mesh_load_curve"]

#: Cycles between the lone packets of the zero-load measurement (more than any trip).
ZERO_LOAD_GAP = 48


@dataclass(frozen=True)
class MeshLoadCurve:
    """A mesh's curves (fields as :class:`studies.load_curve.LoadCurve`'s; latencies in cycles,
    throughput in flits per cycle per NPU)."""

    rows: int
    cols: int
    packet_flits: int
    depth: int
    zero_load_latency: float      #: mean over every (source, destination) pair
    zero_load_max: int            #: the farthest pair's
    warmup: int
    measure: int
    seed: int
    points: list
    saturation: dict = field(default_factory=dict)
    saturation_throughput: dict = field(default_factory=dict)

    #: what the throughput is per (the plot's axis)
    endpoint = "NPU"

    @property
    def title(self) -> str:
        return (f"{self.rows} x {self.cols} mesh RTL (Amaranth simulator), dimension-order routing, "
                f"2 VCs\n{self.packet_flits}-flit packets, links 1 flit/cycle")


def mesh_spec(rows: int, cols: int, *, packet_flits: int, depth: int):
    """The mesh of the curve: the fabric's spec with links at one flit per cycle."""
    from hdl.contracts.mesh import MeshFabricSpec
    return MeshFabricSpec(rows=rows, cols=cols, link_rate=(1, 1), link_latency=1, depth=depth,
                          packet_flits=packet_flits)


def _network(spec):
    from hdl.designs.mesh.mesh_network import MeshNetwork
    return MeshNetwork(spec)


def _run(spec, traffic, max_cycles):
    from cocotb_tests.mesh_network_sim import run_mesh_network
    run = run_mesh_network(_network(spec), traffic, max_cycles=max_cycles)
    if run.protocol_error:
        raise FredError("the mesh reported a protocol error (a router's overflow or credit error)")
    return run


def mesh_zero_load(spec) -> dict:
    """``{(src, dst): cycles}`` from generation to the last flit out for one packet alone in
    the idle mesh, every pair (module docstring), measured on VC 0 (X-Y)."""
    from cocotb_tests.mesh_network_sim import MeshInjection
    pairs = [(s, d) for s in range(spec.npus) for d in range(spec.npus)]
    alone = [MeshInjection(src=s, at=n * ZERO_LOAD_GAP, dst=d, vc=0,
                           flits=(n,) + (0,) * (spec.packet_flits - 1)) for n, (s, d) in enumerate(pairs)]
    run = _run(spec, alone, (len(pairs) + 1) * ZERO_LOAD_GAP)
    done = packet_deliveries(run, alone)
    if len(done) != len(alone):
        raise FredError(f"zero-load run: {len(alone) - len(done)} lone packet(s) not delivered")
    return {pair: done[n] - alone[n].at for n, pair in enumerate(pairs)}


def _traffic(pattern, spec, offered, cycles, rng):
    from cocotb_tests.mesh_network_sim import MeshInjection
    p_packet = offered / spec.packet_flits
    out = []
    for cycle in range(cycles):
        for src in range(spec.npus):
            if rng.random() < p_packet:
                dst = destination(pattern, src, spec.npus, rng)
                flits = (len(out),) + tuple(rng.getrandbits(16) for _ in range(spec.packet_flits - 1))
                out.append(MeshInjection(src=src, at=cycle, dst=dst, vc=rng.randrange(2), flits=flits))
    return out


def measure_mesh_point(pattern: str, offered: float, *, spec, zero_load: float, warmup: int = 100,
                       measure: int = 400, seed: int = 0) -> LoadPoint:
    """One load point of the mesh ``spec`` (the method of studies.load_curve.measure_point)."""
    if not 0 < offered <= 1:
        raise FredError(f"offered load must be in (0, 1] flits per cycle per NPU, got {offered}")
    rng = random.Random(f"{seed}/{pattern}/{offered}")
    horizon = warmup + 2 * measure
    traffic = _traffic(pattern, spec, offered, horizon, rng)
    run = _run(spec, traffic, horizon + 4 * measure)
    done = packet_deliveries(run, traffic)
    window = range(warmup, warmup + measure)
    measured = [i for i, packet in enumerate(traffic) if packet.at in window]
    latencies = sorted(done[i] - traffic[i].at for i in measured if i in done)
    flits = sum(1 for records in run.received.values() for cycle, *_ in records if cycle in window)
    mean = sum(latencies) / len(latencies) if latencies else None
    saturated = len(latencies) < len(measured) or (mean is not None and mean > LATENCY_FACTOR * zero_load)
    return LoadPoint(pattern=pattern, offered=offered,
                     generated=sum(len(traffic[i].flits) for i in measured) / (measure * spec.npus),
                     accepted=flits / (measure * spec.npus), mean_latency=mean,
                     p99_latency=latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else None,
                     measured_packets=len(measured), delivered_packets=len(latencies), saturated=saturated)


def run_mesh_load_curve(*, rows: int, cols: int, patterns=PATTERNS, rates=(0.1, 0.3, 0.5, 0.7, 0.9),
                        packet_flits: int = 4, depth: int = 8, warmup: int = 100, measure: int = 400,
                        seed: int = 0, progress: bool = False) -> MeshLoadCurve:
    """Every pattern at every offered load on a ``rows`` x ``cols`` mesh (module docstring)."""
    spec = mesh_spec(rows, cols, packet_flits=packet_flits, depth=depth)
    pairs = mesh_zero_load(spec)
    zero = sum(pairs.values()) / len(pairs)
    points, saturation, best = sweep_loads(
        lambda pattern, rate: measure_mesh_point(pattern, rate, spec=spec, zero_load=zero, warmup=warmup,
                                                 measure=measure, seed=seed),
        patterns, rates, progress=progress)
    return MeshLoadCurve(rows=rows, cols=cols, packet_flits=packet_flits, depth=depth,
                         zero_load_latency=round(zero, 2), zero_load_max=max(pairs.values()), warmup=warmup,
                         measure=measure, seed=seed, points=points, saturation=saturation,
                         saturation_throughput=best)
