"""The wafer fabric of FRED switches as plain data: topology, link rates, and the collective
requests it runs (pure Python; docs/fabric_rtl.md).

This module is the contract between the fabric RTL (``hdl/designs/fabric/``, run under Verilator by
``cocotb_tests/fabric/``) and the system model (``sysmodel/fabric_model.py``): both read the
same :class:`FabricSpec` and :class:`FabricRequest`, so the RTL's cycles and the model's cycles
are of the same fabric running the same collectives.

Topology (the paper's two-level "almost fat-tree", shared spec FRED.md section 3): ``npus``
NPU ports, ``npus_per_l1`` of them under each L1 switch, every L1 under one L2. NPU rank ``r``
is on L1 ``r // npus_per_l1``, port ``r % npus_per_l1``; L1 ``j``'s uplinks are its ports
``npus_per_l1 .. npus_per_l1 + uplink_ports - 1`` and L2 ports ``j * uplink_ports ..``.
I/O controllers (``io_controllers``, default none) are endpoints after the NPUs: endpoint
``npus + k`` is controller ``k``, on L1 ``k % l1_count`` (the system model's attachment,
``sysmodel/fred_tree.py``: the paper's 18 controllers over 5 L1s = 4, 4, 4, 3, 3), port
``npus_per_l1 + uplink_ports + k // l1_count`` (after the uplinks, so the NPU and uplink
port numbers do not move); every L1 gets ``io_ports_per_l1`` such ports, so all L1s stay one
switch size (the paper's L1 chiplet Fred_3(12) = 4 NPUs + 4 uplinks + 4 controllers on
Fred-D). A controller's link carries ``io_rate`` flits per cycle each way (128 GBps / 3 TBps
= 16/375 of an NPU link, the paper's figure; "I/O flows are limited by their controller's
128 GBps", shared spec FRED.md section 3).

Rates are ratios of the NPU link, which carries 1 flit per cycle each way (the paper's 3 TBps
send + 3 TBps receive per NPU). An L1's uplink bandwidth, ``uplink_ports * uplink_rate`` flits
per cycle, expresses the variants:

* Fred-A / Fred-B: 1.5 TBps per L1 (the mesh's bisection) = 1.5 / 3 = 1/2 flit per cycle: one
  uplink port limited to 1 flit every 2 cycles. Switches: L1 Fred_3(5), L2 Fred_3(5).
* Fred-C / Fred-D: 12 TBps per L1 (= 4 NPUs x 3 TBps) = 4 flits per cycle: four parallel uplink
  ports at the full rate. Switches: L1 Fred_3(8); the logical L2 is four Fred_3(5) planes
  (``l2_planes = 4``), plane ``u`` joining uplink port ``u`` of every L1.
* B and D reduce and replicate in the switches (in-switch collectives); A and C run the endpoint
  algorithms (ring, hierarchical), reducing in the NPUs.

The paper's chiplets are Fred_3(12) (L1, with 4 NPU ports, uplinks and I/O controllers) and
Fred_3(10) (L2: "each logical switch is built from several Fred_3 chiplets"); the RTL fabric
builds each L1 as one Fred_3 with exactly the ports it uses, and the logical L2 as
``l2_planes`` Fred_3 switches ("planes") side by side: the L1 uplink ports are split into
``l2_planes`` equal runs, plane ``p`` takes uplink ports ``p * U/l2_planes .. (p + 1) *
U/l2_planes - 1`` (U = ``uplink_ports``) of every L1, so each plane is a Fred_3(l1_count *
U / l2_planes) and the planes are not connected to each other. A flow through the L2 must
stay inside one plane; every collective the fabric runs does (a group spanning L1s uses the
same uplink port index ``u`` on each of its L1s), and :mod:`hdl.compiler.fabric_program` refuses
a flow that would not. Defaults: Fred-A/B one plane (their one uplink port per L1: the L2 is a
Fred_3(5)); Fred-C/D one plane per uplink port, four Fred_3(5), instead of one Fred_3(20):
the same connectivity for these collectives, a 6-cycle instead of 48-cycle phase select and
8- instead of 14-cycle latency (the characterization's points), and a model about 2.7x faster
to simulate (docs/fabric_rtl.md). ``l2_planes = 1`` gives the single Fred_3(20). The system
model times the L2 level with the switch the RTL builds there (``sysmodel/fabric_model.py``).

Requests: :func:`make_request` turns ``--group wafer`` or ``--strategy MP2-DP5-PP2 --dim dp``
into concurrent :class:`FabricCollective` s (every group of that dimension at once; for ``pp``
the stage-boundary multicasts of :meth:`Strategy.stage_transfers`). Sizes are in flits with the
model's meaning (``sysmodel.collectives``): all-reduce, the buffer per NPU; reduce, flits from
every member to the root; multicast, flits from the root to every destination.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from hdl.contracts.dtypes import DTYPES
from hdl.contracts.errors import FredError
from hdl.contracts.placement import DIMS, parse_strategy
from hdl.contracts.timing import switch_latency

__all__ = ["FABRICS", "FABRIC_OPS", "IO_OPS", "IO_RATE", "PACE_BITS", "UNPACED", "request_groups", "io_controllers_needed", "default_depth", "SWITCH_PHASES", "engine_forward_cycles", "FabricSpec", "FabricCollective", "FabricRequest",
           "fabric_spec", "make_request"]

#: The paper's four FRED variants, as RTL fabrics.
FABRICS = ("fred-a", "fred-b", "fred-c", "fred-d")
#: Configuration slots (phases) per switch in the RTL fabric.
SWITCH_PHASES = 8
#: Collectives the fabric engines run.
FABRIC_OPS = ("all-reduce", "reduce", "multicast")
#: I/O operations (packet fabric, in-switch fabrics): ``io-broadcast``, weight streaming: an
#: I/O controller multicasts ``size`` flits to every NPU of its group; ``io-reduce``, gradient
#: reduce-out: every NPU of the group sends ``size`` flits, reduced in the switches into the
#: group's controller. One controller per group (controller g serves group g).
IO_OPS = ("io-broadcast", "io-reduce")
#: The paper's controller rate as a ratio of the NPU link: 128 GBps / 3 TBps.
IO_RATE = Fraction(128, 3000)
#: Bits of an NPU's write-pacing divisor (the writers sharing one I/O controller, at most 255;
#: ``hdl.designs.fabric.write_pacer.WritePacer``, docs/fabric_rtl.md "Writers paced to their
#: controller").
PACE_BITS = 8
#: The pacing divisor of an NPU that does not pace its writes (``PACE_REG``): its
#: ``WritePacer`` is then a wire (no limiter, no packet assembly, latency 0). The one place
#: of the "0 means unpaced" rule: the compiler writes it
#: (``hdl.compiler.packet_fabric_program.write_paces``) and the pacer tests for it; the
#: links' ``rate_gate`` in the pacer's limiter never gates a flit under it (the pacer
#: bypasses the limiter then).
UNPACED = 0


def engine_forward_cycles(dtype: str) -> int:
    """Cycles an NPU engine of the RTL fabric takes from receiving a flit to sending it on (a
    ring step, a chain's forwarding hop): its receive FIFO's cycle, plus, for fp16, the
    project's reduction unit every output flit passes (``hdl/designs/fabric/npu_engine.py``; pinned by
    tests/sysmodel/test_fabric_model.py). The model's fabric platform sets ``npu.forward_latency_ns`` to
    it."""
    from hdl.contracts.timing import reduction_latency
    return 1 + (0 if dtype == "int32" else reduction_latency(dtype))

# variant -> (in-switch collectives, uplink ports per L1, flits per cycle per uplink port,
# L2 planes: None = one per uplink port, see the module docstring)
_VARIANTS = {
    "fred-a": (False, 1, Fraction(1, 2), 1),
    "fred-b": (True, 1, Fraction(1, 2), 1),
    "fred-c": (False, 4, Fraction(1), None),
    "fred-d": (True, 4, Fraction(1), None),
}


@dataclass(frozen=True, kw_only=True)
class FabricSpec:
    """One fabric (see the module docstring).

    Parameters (all validated): ``name``; ``in_switch`` (switches reduce/replicate);
    ``uplink_ports`` per L1 (>= 1); ``uplink_rate`` flits per cycle per uplink port, a
    fraction in (0, 1] (a link of rate a/b carries a flits in every b cycles); ``npus``;
    ``npus_per_l1`` (divides ``npus``, at least 2 L1s); ``npu_link_latency`` and
    ``uplink_latency`` in cycles per direction (>= 1: a link is at least its register);
    ``middle`` (m of every Fred_m switch); ``dtype`` and ``lanes`` of a flit; ``l2_planes``:
    the switches the logical L2 is built of (>= 1, divides ``uplink_ports``; module
    docstring); ``io_controllers`` (>= 0) and ``io_rate`` (flits per cycle of a controller's
    link, in (0, 1]; module docstring)."""

    name: str
    in_switch: bool
    uplink_ports: int
    uplink_rate: Fraction
    npus: int = 20
    npus_per_l1: int = 4
    npu_link_latency: int = 1
    uplink_latency: int = 1
    middle: int = 3
    dtype: str = "int32"
    lanes: int = 1
    l2_planes: int = 1
    io_controllers: int = 0
    io_rate: Fraction = IO_RATE

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise FredError(f"fabric name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.in_switch, bool):
            raise FredError(f"fabric {self.name}: in_switch must be true or false, got {self.in_switch!r}")
        for field, low in (("uplink_ports", 1), ("npus", 2), ("npus_per_l1", 1),
                           ("npu_link_latency", 1), ("uplink_latency", 1), ("middle", 1), ("lanes", 1),
                           ("l2_planes", 1), ("io_controllers", 0)):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise FredError(f"fabric {self.name}: {field} must be an integer >= {low}, got {value!r}")
        try:
            rate = Fraction(self.uplink_rate)
        except (TypeError, ValueError):
            raise FredError(f"fabric {self.name}: uplink_rate must be a fraction in (0, 1], "
                            f"got {self.uplink_rate!r}") from None
        if not 0 < rate <= 1:
            raise FredError(f"fabric {self.name}: uplink_rate must be in (0, 1] flits per cycle "
                            f"(faster links are more uplink_ports), got {rate}")
        object.__setattr__(self, "uplink_rate", rate)
        try:
            io_rate = Fraction(self.io_rate)
        except (TypeError, ValueError):
            raise FredError(f"fabric {self.name}: io_rate must be a fraction in (0, 1], "
                            f"got {self.io_rate!r}") from None
        if not 0 < io_rate <= 1:
            raise FredError(f"fabric {self.name}: io_rate must be in (0, 1] flits per cycle, got {io_rate}")
        object.__setattr__(self, "io_rate", io_rate)
        if self.uplink_ports % self.l2_planes:
            raise FredError(f"fabric {self.name}: l2_planes ({self.l2_planes}) must divide "
                            f"uplink_ports ({self.uplink_ports}): each L2 plane takes the same "
                            f"number of uplink ports of every L1")
        if self.npus % self.npus_per_l1:
            raise FredError(f"fabric {self.name}: {self.npus} NPUs do not split into L1s of "
                            f"{self.npus_per_l1}")
        if self.npus // self.npus_per_l1 < 2:
            raise FredError(f"fabric {self.name}: {self.npus} NPUs under L1s of {self.npus_per_l1} "
                            f"make a single L1; the fabric needs at least 2 L1s under the L2")
        if self.dtype not in DTYPES:
            raise FredError(f"fabric {self.name}: unknown dtype {self.dtype!r}; expected one of "
                            f"{', '.join(DTYPES)}")

    @property
    def l1_count(self) -> int:
        return self.npus // self.npus_per_l1

    @property
    def io_ports_per_l1(self) -> int:
        """I/O controller ports of every L1 (controllers spread round-robin over the L1s)."""
        return -(-self.io_controllers // self.l1_count)

    @property
    def endpoints(self) -> int:
        """NPUs and I/O controllers: endpoint ``npus + k`` is controller ``k``."""
        return self.npus + self.io_controllers

    @property
    def l1_ports(self) -> int:
        """Ports of each L1 switch: its NPUs, its uplinks and its I/O controllers' ports."""
        return self.npus_per_l1 + self.uplink_ports + self.io_ports_per_l1

    def port_of(self, endpoint: int) -> tuple[int, int]:
        """(L1, port on it) of an NPU rank or an I/O controller endpoint (module docstring)."""
        self.check_rank(endpoint)
        if endpoint < self.npus:
            return endpoint // self.npus_per_l1, endpoint % self.npus_per_l1
        k = endpoint - self.npus
        return k % self.l1_count, self.npus_per_l1 + self.uplink_ports + k // self.l1_count

    @property
    def l2_ports(self) -> int:
        """Ports of the logical L2: every L1's uplinks (over all its planes)."""
        return self.l1_count * self.uplink_ports

    @property
    def l2_plane_ports(self) -> int:
        """Ports of each L2 switch (plane): its share of every L1's uplinks."""
        return self.l2_ports // self.l2_planes

    @property
    def switch_ports(self) -> tuple[int, ...]:
        """Ports of every switch the fabric builds, in switch order: the L1s, then the L2's
        planes (the RTL's switch numbering, ``fabric_program`` and ``FabricTop``)."""
        return (self.l1_ports,) * self.l1_count + (self.l2_plane_ports,) * self.l2_planes

    @property
    def l2_description(self) -> str:
        """The L2's switches in words, e.g. ``Fred_3(5)`` or ``4 planes x Fred_3(5)``."""
        switch = f"Fred_{self.middle}({self.l2_plane_ports})"
        return switch if self.l2_planes == 1 else f"{self.l2_planes} planes x {switch}"

    def l2_plane_of(self, l2_port: int) -> tuple[int, int]:
        """(plane, port on that plane's switch) of logical L2 port ``l2_port`` = ``j *
        uplink_ports + u`` (L1 ``j``'s uplink port ``u``)."""
        if isinstance(l2_port, bool) or not isinstance(l2_port, int) or not 0 <= l2_port < self.l2_ports:
            raise FredError(f"L2 port {l2_port!r} is not on fabric {self.name} (ports 0..{self.l2_ports - 1})")
        j, u = divmod(l2_port, self.uplink_ports)
        per_plane = self.uplink_ports // self.l2_planes
        plane, local = divmod(u, per_plane)
        return plane, j * per_plane + local

    @property
    def uplink_bandwidth(self) -> Fraction:
        """Flits per cycle between one L1 and the L2, each way (NPU link = 1)."""
        return self.uplink_ports * self.uplink_rate

    def l1_of(self, rank: int) -> int:
        """The L1 switch NPU ``rank`` (or I/O controller endpoint ``rank``) hangs from."""
        return self.port_of(rank)[0]

    def check_rank(self, rank: int) -> None:
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < self.endpoints:
            io = (f", I/O controllers {self.npus}..{self.endpoints - 1}" if self.io_controllers else "")
            raise FredError(f"NPU rank {rank!r} is not on fabric {self.name} (ranks 0..{self.npus - 1}{io})")

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["uplink_rate"] = str(self.uplink_rate)
        out["io_rate"] = str(self.io_rate)
        out.update(l1_count=self.l1_count, l1_ports=self.l1_ports, l2_ports=self.l2_ports,
                   l2_plane_ports=self.l2_plane_ports, uplink_bandwidth=str(self.uplink_bandwidth))
        return out


def fabric_spec(name: str, **overrides) -> FabricSpec:
    """The RTL fabric of variant ``name`` (``fred-a`` .. ``fred-d``), with ``overrides`` of any
    :class:`FabricSpec` field (latencies, dtype, lanes, ...)."""
    key = str(name).lower()
    if key not in _VARIANTS:
        raise FredError(f"unknown fabric {name!r}; expected one of {', '.join(FABRICS)}")
    in_switch, ports, rate, planes = _VARIANTS[key]
    fields = dict(name=key, in_switch=in_switch, uplink_ports=ports, uplink_rate=rate)
    unknown = sorted(set(overrides) - set(FabricSpec.__dataclass_fields__))
    if unknown:
        raise FredError(f"unknown fabric field(s) {', '.join(unknown)}; expected some of "
                        f"{', '.join(FabricSpec.__dataclass_fields__)}")
    fields = {**fields, **overrides}
    if "l2_planes" not in overrides:
        # Fred-C/D: one plane per uplink port (also when uplink_ports is overridden)
        fields["l2_planes"] = fields["uplink_ports"] if planes is None else planes
    return FabricSpec(**fields)


@dataclass(frozen=True)
class FabricCollective:
    """One collective instance: ``op``; ``root`` (the reduce's sink, the multicast's source;
    None for all-reduce); ``members`` (sorted ranks: the all-reduce's or reduce's group
    including the root, the multicast's destinations excluding the root)."""

    op: str
    members: tuple[int, ...]
    root: int | None = None

    @property
    def ranks(self) -> tuple[int, ...]:
        """Every NPU taking part (members and root), sorted."""
        return tuple(sorted(set(self.members) | ({self.root} if self.root is not None else set())))


@dataclass(frozen=True)
class FabricRequest:
    """Concurrent collectives of one op on one fabric: ``collectives`` (disjoint ranks),
    ``size_flits`` (see the module docstring), ``label`` (what was asked, for reports)."""

    op: str
    collectives: tuple[FabricCollective, ...]
    size_flits: int
    label: str

    def to_dict(self) -> dict:
        return {"op": self.op, "size_flits": self.size_flits, "label": self.label,
                "collectives": [{"members": list(c.members), "root": c.root} for c in self.collectives]}


def request_groups(spec: FabricSpec, *, op: str, group: str | None = None,
                   strategy: str | None = None, dim: str | None = None):
    """``(groups, label, strategy)`` of a request (validated): ``groups`` = ``[(0 .. npus -
    1)]`` for ``group = "wafer"``, else the sorted groups of the strategy's ``dim``, None for
    ``dim = "pp"`` (its transfers are :meth:`Strategy.stage_transfers`); ``strategy`` the
    parsed strategy (None for a group)."""
    if (group is None) == (strategy is None):
        raise FredError("name exactly one of a group (--group wafer) or a strategy and dimension "
                        "(--strategy MP2-DP5-PP2 --dim mp)")
    if group is not None:
        if dim is not None:
            raise FredError("--dim goes with --strategy, not with --group")
        if str(group).lower() != "wafer":
            raise FredError(f"unknown group {group!r}; the fabric knows 'wafer' (all {spec.npus} NPUs)")
        return [tuple(range(spec.npus))], f"wafer {op}", None
    parsed = parse_strategy(strategy)
    if parsed.npus != spec.npus:
        raise FredError(f"strategy {parsed} uses {parsed.npus} NPUs but fabric {spec.name} has "
                        f"{spec.npus}")
    if dim is None or str(dim).lower() not in DIMS:
        raise FredError(f"--strategy needs --dim, one of {', '.join(DIMS)}; got {dim!r}")
    dim = str(dim).lower()
    label = f"{parsed} {dim.upper()} {op}"
    if dim == "pp":
        return None, label, parsed
    groups = parsed.groups(dim)
    if len(groups[0]) < 2:
        raise FredError(f"strategy {parsed} has {dim.upper()} groups of 1 NPU: nothing to communicate")
    return [tuple(sorted(g)) for g in groups], label, parsed


def io_controllers_needed(spec: FabricSpec, *, op: str, group: str | None = None,
                          strategy: str | None = None, dim: str | None = None) -> int:
    """Controllers an I/O request uses: one per group (controller g serves group g)."""
    groups, _, _ = request_groups(spec, op=op, group=group, strategy=strategy, dim=dim)
    if groups is None:
        raise FredError(f"{op} goes with a group or a strategy's MP or DP dimension, not PP")
    return len(groups)


def make_request(spec: FabricSpec, *, op: str, size_flits: int, group: str | None = None,
                 strategy: str | None = None, dim: str | None = None) -> FabricRequest:
    """Validate and build a request: exactly one of ``group`` (``"wafer"``: all NPUs) or
    ``strategy`` + ``dim``. Reduce and multicast are rooted at each group's lowest rank; ``dim
    = "pp"`` takes only ``multicast`` (the stage-boundary transfers: MP rank 0 of a stage to
    the MP group of the next); an I/O op (:data:`IO_OPS`) is rooted at controller g
    (endpoint ``npus + g``) for group g, and needs that many ``spec.io_controllers``. Every
    error names what is wrong, before anything is built."""
    if op not in FABRIC_OPS + IO_OPS:
        raise FredError(f"the fabric runs {', '.join(FABRIC_OPS + IO_OPS)}; got op {op!r}")
    if isinstance(size_flits, bool) or not isinstance(size_flits, int) or size_flits < 1:
        raise FredError(f"size must be a positive whole number of flits, got {size_flits!r}")
    groups, label, parsed = request_groups(spec, op=op, group=group, strategy=strategy, dim=dim)
    if groups is None:
        if op != "multicast":
            raise FredError(f"the PP dimension's communication is the stage-boundary multicast; "
                            f"{op} along PP is not a pipeline transfer (use --op multicast)")
        if parsed.pp < 2:
            raise FredError(f"strategy {parsed} has one pipeline stage: no PP transfers")
        collectives = tuple(FabricCollective("multicast", tuple(sorted(dsts)), root)
                            for stage in range(parsed.pp - 1)
                            for root, dsts in parsed.stage_transfers(stage))
        return FabricRequest(op, collectives, size_flits, label)
    if op in IO_OPS and len(groups) > spec.io_controllers:
        raise FredError(f"{label} needs {len(groups)} I/O controller(s), one per group; fabric "
                        f"{spec.name} has {spec.io_controllers} (io_controllers)")
    collectives = []
    for g, members in enumerate(groups):
        if op == "all-reduce":
            collectives.append(FabricCollective(op, members))
        elif op == "reduce":
            collectives.append(FabricCollective(op, members, members[0]))
        elif op in IO_OPS:
            collectives.append(FabricCollective(op, members, spec.npus + g))
        else:
            collectives.append(FabricCollective(op, members[1:], members[0]))
    return FabricRequest(op, tuple(collectives), size_flits, label)


def default_depth(spec: FabricSpec, packet_flits: int = 8) -> int:
    """Flits per data VC of the packet fabric's input buffers (``hdl.designs.fabric.packet_fabric_top``
    builds them; the system model's platform of the fabric reads the same figure,
    ``sysmodel.fabric_model``): a packet starts only with room
    for it downstream (docs/switch.md, "Starting a packet"), so an output's credits are held
    from its packet's start at the input until the downstream frees them: the switch's
    latency (input buffer + datapath), a link each way, plus the packet itself. The smallest
    multiple of ``packet_flits`` covering that for the slowest switch and link of ``spec``
    keeps every link at full rate (a multiple, so a packet an upstream switch started always
    fits behind whole packets). Fred-D int32: 24 flits; fp16 switches: 40 (the paper: 48)."""
    latency = 1 + max(switch_latency(ports=p, middle=spec.middle, dtype=spec.dtype)
                      for p in set(spec.switch_ports))
    loop = latency + 2 * max(spec.npu_link_latency, spec.uplink_latency) + packet_flits
    return packet_flits * -(-loop // packet_flits)
