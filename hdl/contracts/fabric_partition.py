"""How the fabric RTL is cut into parts that simulate on different cores (docs/fabric_rtl.md).

A :class:`FabricPartition` assigns every switch of a :class:`~hdl.contracts.fabric.FabricSpec` to a
part; an NPU (its engine and both NPU links) goes with its L1. An uplink whose two switches are
in different parts is *cut*: its :class:`~hdl.designs.fabric.link.LinkSender` is elaborated in the
sender's part and its :class:`~hdl.designs.fabric.link.LinkReceiver` in the receiver's, and the parts
exchange ``wire_valid`` / ``wire_data`` (forward) and ``credit`` (backward) once a cycle.
Both depend only on their own part's state, so two parts can evaluate a cycle at the same time
and swap these signals between cycles with the same result as one model (the lock-step
simulator, ``cocotb_tests/fabric/lockstep``).

The default assignment balances the parts by :func:`simulation_weight`, an estimate of the
Verilated code each component runs per cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricSpec

__all__ = ["CutLink", "FabricPartition", "UplinkEnds", "fabric_partition", "simulation_weight",
           "switch_weight", "uplinks"]

# Relative per-cycle simulation cost of the fabric's components: Verilated statements of the
# clocked and input-combinational code of Fred-D, per component (docs/fabric_rtl.md, session
# 6: RD leaves 25.6 % over 81, input microswitches 23.5 % over 70, output microswitches 9.7 %
# over 70, engines 9.1 % over 20, configuration memories 8.9 % over 9 switches).
_RD, _INPUT, _OUTPUT, _DEMUX_MUX = 1.0, 1.06, 0.44, 0.5
_ENGINE, _CONFIG_PER_PORT, _SWITCH_FIXED = 1.44, 0.4, 1.0


def switch_weight(ports: int, middle: int = 3) -> float:
    """Relative simulation cost of one Fred_middle(ports) switch with its configuration
    memory and sequencer (the recursion of ``hdl.designs.switch.fred_switch``: ``ports // 2`` input
    and output microswitches around ``middle`` Fred(ceil(ports / 2)), an RD microswitch at 2
    ports, a demux and a mux for an odd port)."""
    def datapath(p: int) -> float:
        if p <= 2:
            return _RD
        r, odd = divmod(p, 2)
        return r * (_INPUT + _OUTPUT) + odd * 2 * _DEMUX_MUX + middle * datapath(r + odd)
    return datapath(ports) + _CONFIG_PER_PORT * ports + _SWITCH_FIXED


@dataclass(frozen=True)
class UplinkEnds:
    """One direction of one L1 <-> L2 cable: the ``Link`` named ``name`` in ``FabricTop``,
    from switch ``source`` (output port ``source_port``) to switch ``sink`` (input port
    ``sink_port``)."""

    name: str
    source: int
    source_port: int
    sink: int
    sink_port: int


def uplinks(spec: FabricSpec) -> list[UplinkEnds]:
    """Every uplink direction of ``spec`` in ``FabricTop``'s elaboration order (the order of
    the parts' cut buses)."""
    k, up = spec.npus_per_l1, spec.uplink_ports
    out = []
    for j in range(spec.l1_count):
        for u in range(up):
            plane, port = spec.l2_plane_of(j * up + u)
            l2 = spec.l1_count + plane
            out.append(UplinkEnds(f"link_l1_{j}_{u}_up", j, k + u, l2, port))
            out.append(UplinkEnds(f"link_l1_{j}_{u}_down", l2, port, j, k + u))
    return out


@dataclass(frozen=True)
class CutLink:
    """An uplink direction whose ends are in different parts."""

    ends: UplinkEnds
    source_part: int
    sink_part: int


@dataclass(frozen=True)
class FabricPartition:
    """``parts[s]``: the part of switch ``s`` (``FabricSpec.switch_ports`` order); ``count``
    parts, each holding at least one switch."""

    spec: FabricSpec
    parts: tuple[int, ...]
    count: int

    def __post_init__(self):
        n = len(self.spec.switch_ports)
        if len(self.parts) != n:
            raise FredError(f"fabric {self.spec.name}: a partition names the part of each of its "
                            f"{n} switches, got {len(self.parts)}")
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise FredError(f"fabric partition: count must be an integer >= 1, got {self.count!r}")
        for s, p in enumerate(self.parts):
            if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < self.count:
                raise FredError(f"fabric {self.spec.name}: switch {s}'s part must be in 0..{self.count - 1}, got {p!r}")
        empty = sorted(set(range(self.count)) - set(self.parts))
        if empty:
            raise FredError(f"fabric {self.spec.name}: part(s) {empty} hold no switch")

    def npu_part(self, rank: int) -> int:
        return self.parts[rank // self.spec.npus_per_l1]

    def cut_links(self) -> list[CutLink]:
        """The cut uplink directions, in elaboration order."""
        return [CutLink(e, self.parts[e.source], self.parts[e.sink])
                for e in uplinks(self.spec) if self.parts[e.source] != self.parts[e.sink]]

    def weights(self) -> list[float]:
        """:func:`simulation_weight` of each part."""
        out = [0.0] * self.count
        for s, w in enumerate(_unit_weights(self.spec)):
            out[self.parts[s]] += w
        return out


def _unit_weights(spec: FabricSpec) -> list[float]:
    return [switch_weight(ports, spec.middle) + (_ENGINE * spec.npus_per_l1 if s < spec.l1_count else 0.0)
            for s, ports in enumerate(spec.switch_ports)]


def simulation_weight(spec: FabricSpec) -> float:
    """Relative simulation cost of the whole fabric (switches, configuration memories,
    sequencers, engines)."""
    return sum(_unit_weights(spec))


def fabric_partition(spec: FabricSpec, count: int = 2) -> FabricPartition:
    """Split ``spec``'s switches into ``count`` parts of about equal :func:`simulation_weight`
    (largest first, each to the lightest part so far; ties to the lower part)."""
    n = len(spec.switch_ports)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= n:
        raise FredError(f"fabric {spec.name}: cannot split {n} switches into {count!r} parts "
                        f"(1 .. {n})")
    weights = _unit_weights(spec)
    load = [0.0] * count
    parts = [0] * n
    for s in sorted(range(n), key=lambda s: (-weights[s], s)):
        p = min(range(count), key=lambda p: (load[p], p))
        parts[s] = p
        load[p] += weights[s]
    return FabricPartition(spec, tuple(parts), count)
