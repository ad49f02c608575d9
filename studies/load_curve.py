"""Latency against offered load on the packet switch's RTL (docs/load_curve.md): ``fred load-curve``.

The figure network-on-chip users expect (BookSim, Constellation): each input of a packet switch
(:class:`hdl.designs.switch.packet_switch.PacketSwitch` with online unicast routing, simulated
cycle by cycle in Amaranth's simulator by :func:`cocotb_tests.packet_sim.run_packet_switch`)
generates packets by a Bernoulli process at a rate that gives ``offered`` flits per cycle per
input, to destinations of a traffic pattern (:data:`PATTERNS`). Each packet's latency runs from
the cycle it is generated (it waits in an unbounded source queue, as in BookSim) to the cycle its
last flit leaves the switch; the outputs always accept (no downstream backpressure), so the curve
is the switch's own.

Per load point: ``warmup`` cycles of traffic not measured, then ``measure`` cycles whose packets
are measured; the run continues (traffic keeps being generated for as long again) until every
measured packet is delivered or ``drain_limit`` cycles have passed. The accepted throughput is
the flits delivered per output and cycle during the measurement window (``generated``: the flits
generated per input and cycle in it, the offered load as drawn). A point is saturated when a
measured packet is not delivered within the limit or the mean latency is above
:data:`LATENCY_FACTOR` times the zero-load latency (:func:`zero_load_latency`, one packet alone,
measured); the saturation point of a pattern is the lowest saturated offered load, and its
saturation throughput the highest accepted throughput of the curve.
"""

from __future__ import annotations

import math
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hdl.contracts.errors import FredError

__all__ = ["PATTERNS", "destination", "generate_traffic", "LoadPoint", "LoadCurve", "measure_point",
           "run_load_curve", "write_load_curve", "zero_load_latency", "packet_deliveries", "sweep_loads"]

#: The traffic patterns: uniform random destinations; transpose (the input index as a row-major
#: r x c grid position, r the largest divisor of P <= sqrt(P); the destination the transposed
#: position: a permutation); hotspot (a fraction of the packets to output 0, the rest uniform).
PATTERNS = ("uniform", "transpose", "hotspot")
HOTSPOT_FRACTION = 0.25
#: Saturation: mean latency above this many times the zero-load latency (module docstring).
LATENCY_FACTOR = 3.0


def _grid_rows(ports: int) -> int:
    return max(r for r in range(1, math.isqrt(ports) + 1) if ports % r == 0)


def destination(pattern: str, src: int, ports: int, rng: random.Random) -> int:
    """The output a packet generated at input ``src`` goes to under ``pattern``."""
    if pattern == "uniform":
        return rng.randrange(ports)
    if pattern == "transpose":
        rows = _grid_rows(ports)
        cols = ports // rows
        row, col = divmod(src, cols)
        return col * rows + row
    if pattern == "hotspot":
        return 0 if rng.random() < HOTSPOT_FRACTION else rng.randrange(ports)
    raise FredError(f"unknown traffic pattern {pattern!r}; expected one of {', '.join(PATTERNS)}")


def generate_traffic(pattern: str, ports: int, offered: float, cycles: int, packet_flits: int,
                     rng: random.Random, fmt) -> list:
    """The packets every input generates over ``cycles`` cycles: one with probability
    ``offered / packet_flits`` per input and cycle (``offered`` flits per cycle per input), as
    :class:`cocotb_tests.packet_sim.Injection` in generation order; a packet's first flit carries
    its index in the list (how its delivery is found)."""
    from cocotb_tests.packet_sim import Injection
    from hdl.contracts.packet import VC, Packet
    p_packet = offered / packet_flits
    out = []
    for cycle in range(cycles):
        for src in range(ports):
            if rng.random() < p_packet:
                dst = destination(pattern, src, ports, rng)
                flits = (len(out),) + tuple(rng.getrandbits(16) for _ in range(packet_flits - 1))
                out.append(Injection(src, cycle, Packet(phase=fmt.online_phase, vc=int(VC.DP), seq=0,
                                                        flow=src % (1 << fmt.flow_bits), flits=flits,
                                                        dest=dst)))
    return out


@dataclass(frozen=True)
class LoadPoint:
    """One offered load of one pattern (flits per cycle per port; latencies in cycles)."""

    pattern: str
    offered: float
    generated: float
    accepted: float
    mean_latency: float | None
    p99_latency: float | None
    measured_packets: int
    delivered_packets: int
    saturated: bool


@dataclass(frozen=True)
class LoadCurve:
    """A switch's curves: per pattern its points (rising load), saturation point (None: none of
    the points saturated) and saturation throughput (the highest accepted throughput)."""

    ports: int
    middle: int
    packet_flits: int
    depth: int
    switch_latency: int
    zero_load_latency: int
    warmup: int
    measure: int
    seed: int
    points: list
    saturation: dict = field(default_factory=dict)
    saturation_throughput: dict = field(default_factory=dict)
    #: what the throughput is per (the plot's axis)
    endpoint = "port"

    @property
    def title(self) -> str:
        return (f"Fred_{self.middle}({self.ports}) packet switch RTL (Amaranth simulator)\n"
                f"online unicast, {self.packet_flits}-flit packets")


def packet_format(ports: int, packet_flits: int):
    """The header layout of the load curve's switch: one stored phase, online unicasts to any of
    ``ports`` outputs, ``packet_flits`` flits per packet."""
    from hdl.contracts.packet import PacketFormat
    return PacketFormat(phase_bits=1, seq_bits=2, flow_bits=max(1, (ports - 1).bit_length()),
                        packet_flits=packet_flits, dest_bits=max(1, (ports - 1).bit_length()))


def _switch(ports: int, middle: int, packet_flits: int, depth: int):
    from hdl.designs.switch.packet_switch import PacketSwitch
    return PacketSwitch(ports=ports, middle=middle, dtype="int32", lanes=1, phases=1,
                        packet=packet_format(ports, packet_flits), depth=depth, online=True)


#: Cycles without a flit moving, once every packet was sent, after which a run stops (longer
#: than any packet's trip through an idle switch, so no delivery is cut off).
QUIET_CYCLES = 64


def zero_load_latency(ports: int, middle: int, packet_flits: int, depth: int = 16) -> int:
    """Cycles from generation to the last flit out for a packet alone in the idle switch,
    measured (input 0 to output ``ports - 1``): the second of two packets far apart, so that it
    does not pay the one-time selection of the online phase after reset (docs/switch.md, "Online
    unicast routing") that the first does."""
    from cocotb_tests.packet_sim import Injection, run_packet_switch
    from hdl.contracts.packet import VC, Packet
    dut = _switch(ports, middle, packet_flits, depth)
    later = QUIET_CYCLES // 2
    alone = [Injection(0, at, Packet(phase=dut.packet.online_phase, vc=int(VC.DP), seq=0, flow=0,
                                     flits=(n,) + (0,) * (packet_flits - 1), dest=ports - 1))
             for n, at in enumerate((0, later))]
    run = run_packet_switch(dut, configs=[], injections=alone, rng=random.Random(0),
                            max_cycles=4 * QUIET_CYCLES, quiet=QUIET_CYCLES, check_order=False)
    return packet_deliveries(run, alone)[1] - later


def measure_point(pattern: str, offered: float, *, ports: int, middle: int = 3, packet_flits: int = 8,
                  depth: int = 16, warmup: int = 100, measure: int = 400, drain_limit: int | None = None,
                  seed: int = 0, zero_load: float | None = None) -> LoadPoint:
    """One load point (module docstring); ``zero_load``: the latency saturation is judged against
    (default: :func:`zero_load_latency`)."""
    from cocotb_tests.packet_sim import run_packet_switch
    if not 0 < offered <= 1:
        raise FredError(f"offered load must be in (0, 1] flits per cycle per port, got {offered}")
    dut = _switch(ports, middle, packet_flits, depth)
    rng = random.Random(f"{seed}/{pattern}/{offered}")
    horizon = warmup + 2 * measure
    traffic = generate_traffic(pattern, ports, offered, horizon, packet_flits, rng, dut.packet)
    drain_limit = drain_limit or horizon + 4 * measure
    run = run_packet_switch(dut, configs=[], injections=traffic, rng=rng, max_cycles=drain_limit,
                            quiet=QUIET_CYCLES, check_order=False)
    if run.flags["overflow"] or run.credit_errors or any(run.flags["dropped"]):
        raise FredError(f"load point {pattern} {offered}: the switch reported {run.flags} "
                        f"(credit errors {run.credit_errors[:3]})")
    done = packet_deliveries(run, traffic)
    window = range(warmup, warmup + measure)
    measured = [i for i, inj in enumerate(traffic) if inj.at in window]
    latencies = sorted(done[i] - traffic[i].at for i in measured if i in done)
    flits = sum(1 for records in run.received.values() for cycle, *_ in records if cycle in window)
    accepted = flits / (measure * ports)
    mean = sum(latencies) / len(latencies) if latencies else None
    zero = zero_load if zero_load is not None else zero_load_latency(ports, middle, packet_flits, depth)
    saturated = len(latencies) < len(measured) or (mean is not None and mean > LATENCY_FACTOR * zero)
    generated = sum(len(traffic[i].packet.flits) for i in measured) / (measure * ports)
    return LoadPoint(pattern=pattern, offered=offered, generated=generated, accepted=accepted, mean_latency=mean,
                     p99_latency=latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else None,
                     measured_packets=len(measured), delivered_packets=len(latencies), saturated=saturated)


def packet_deliveries(run, traffic) -> dict:
    """``{packet index: cycle its last flit left}``: each output's flits grouped into packets
    (an output carries one packet at a time: a path is released only after its last flit), the
    packet named by its first flit."""
    done = {}
    for records in run.received.values():
        first = None
        for cycle, data, last, _ in records:
            if first is None:
                first = data
            if last:
                if not 0 <= first < len(traffic) or first in done:
                    raise FredError(f"a delivered packet names packet {first}, which was not sent "
                                    "or was already delivered")
                done[first] = cycle
                first = None
    return done


def sweep_loads(measure_one, patterns, rates, *, progress: bool = False):
    """``measure_one(pattern, rate)`` -> :class:`LoadPoint` for every pattern at every rate
    (rising). Returns ``(points, {pattern: saturation point or None}, {pattern: highest
    accepted throughput})``; ``progress``: a line per point on stderr."""
    points, saturation, best = [], {}, {}
    for pattern in patterns:
        for rate in sorted(rates):
            point = measure_one(pattern, rate)
            points.append(point)
            if progress:
                shown = "-" if point.mean_latency is None else f"{point.mean_latency:.1f}"
                print(f"  {pattern:9s} offered {rate:.2f}: accepted {point.accepted:.3f}, mean latency "
                      f"{shown} cycles{' (saturated)' if point.saturated else ''}", file=sys.stderr, flush=True)
            if point.saturated and pattern not in saturation:
                saturation[pattern] = rate
            best[pattern] = max(best.get(pattern, 0.0), point.accepted)
    return points, {p: saturation.get(p) for p in patterns}, best


def run_load_curve(*, ports: int, middle: int = 3, patterns=PATTERNS, rates=(0.1, 0.3, 0.5, 0.7, 0.9),
                   packet_flits: int = 8, depth: int = 16, warmup: int = 100, measure: int = 400,
                   seed: int = 0, progress: bool = False) -> LoadCurve:
    """Every pattern at every offered load (rising); see the module's docstring."""
    from hdl.contracts.timing import switch_latency
    zero = zero_load_latency(ports, middle, packet_flits, depth)
    points, saturation, best = sweep_loads(
        lambda pattern, rate: measure_point(pattern, rate, ports=ports, middle=middle, packet_flits=packet_flits,
                                            depth=depth, warmup=warmup, measure=measure, seed=seed,
                                            zero_load=zero),
        patterns, rates, progress=progress)
    return LoadCurve(ports=ports, middle=middle, packet_flits=packet_flits, depth=depth,
                     switch_latency=switch_latency(ports=ports, middle=middle, dtype="int32"),
                     zero_load_latency=zero,
                     warmup=warmup, measure=measure, seed=seed, points=points,
                     saturation=saturation, saturation_throughput=best)


def write_load_curve(out: str | Path, curve: LoadCurve) -> list[Path]:
    """``load_curve.csv``, ``load_curve.json`` and ``load_curve.png`` (mean latency against
    accepted throughput per pattern, the saturation point marked) into folder ``out``; ``curve``:
    a :class:`LoadCurve` or any curve with the same ``points``, ``saturation``,
    ``zero_load_latency`` and ``title`` (studies.mesh_load_curve.MeshLoadCurve)."""
    from studies.report import figure, save_png, write_csv, write_json
    out = Path(out)
    paths = [write_csv(out / "load_curve.csv", curve.points,
                       formats={"generated": lambda x: f"{x:.4f}", "accepted": lambda x: f"{x:.4f}",
                                "mean_latency": lambda x: f"{x:.2f}"}),
             write_json(out / "load_curve.json", curve)]
    fig, ax = figure(figsize=(9, 4.5))
    for pattern in dict.fromkeys(p.pattern for p in curve.points):
        pts = [p for p in curve.points if p.pattern == pattern and p.mean_latency is not None]
        line, = ax.plot([p.accepted for p in pts], [p.mean_latency for p in pts], marker="o", label=pattern)
        sat = curve.saturation.get(pattern)
        for p in pts:
            if p.offered == sat:
                ax.plot([p.accepted], [p.mean_latency], marker="X", ms=12, color=line.get_color(), ls="none",
                        label=f"{pattern}: saturated at offered {sat:g}")
    ax.axhline(curve.zero_load_latency, color="gray", ls=":", lw=0.8,
               label=f"zero-load latency ({curve.zero_load_latency:g} cycles)")
    ax.set_xlabel(f"accepted throughput (flits per cycle per {curve.endpoint})")
    ax.set_ylabel("mean packet latency (cycles)")
    ax.set_yscale("log")
    ax.set_title(curve.title, fontsize=10)
    # one legend beside the axes (inside, it covered the saturated points)
    fig.legend(*ax.get_legend_handles_labels(), loc="center right", fontsize=7)
    fig.tight_layout(rect=(0, 0, 0.74, 1))
    paths.append(save_png(fig, out / "load_curve.png", tight=False))
    return paths
