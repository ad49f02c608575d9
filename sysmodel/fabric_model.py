"""The system model on the RTL fabric's own platform (docs/fabric_rtl.md): model cycles for a fabric request.

The fabric RTL (``hdl/designs/fabric/``) and this module read the same :class:`hdl.contracts.fabric.FabricSpec`.
:func:`fabric_platform_toml` writes the platform file of that fabric -- the same wafer the
paper's model describes, scaled to the RTL: NPU links of one flit per cycle each way, the L1-L2
bandwidth of the variant as a multiple of it, the RTL's link latencies in cycles, no mesh, and
the RTL's I/O controllers (``FabricSpec.io_controllers``: the same count, on the same L1s,
controller k on L1 k mod L1s, at ``io_rate`` of an NPU link, with the NPU link's latency) -- and :func:`fabric_platform` loads it through the model's own platform reader,
so the model that is checked is the one `fred eval` runs. Each level's switch timing is the
characterization's *measured* point of the switch the RTL builds at that level (e.g. Fred_3(8)
int32 at L1 of Fred-D; at L2 the switch of one plane, Fred_3(5) on Fred-D, see
``FabricSpec.l2_planes``), as for the paper's platform (``[fred.chiplets]``); a point that was
never measured is an error naming the ``fred characterize`` command that measures it.

Units: the platform's clock is the characterization's (1 cycle = 1/clock_mhz us) and a flit is
its ``flit_bytes``; an NPU link is therefore ``flit_bytes * clock`` bytes per second, and
:func:`model_cycles` converts the model's seconds back to cycles. Only ratios matter: the RTL's
flit is narrower than the paper's 512 B, and every flit is one transfer on either side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricRequest, FabricSpec, default_depth, engine_forward_cycles
from sysmodel.collectives import Collective, evaluate
from sysmodel.platform import Platform, parse_platform
from sysmodel.switch_timing import load_chiplet_timings
from sysmodel.toml_file import parse_toml

__all__ = ["FabricEstimate", "IO_COLLECTIVE", "fabric_platform_toml", "fabric_platform", "model_cycles",
           "request_collectives",
           "PHASE_SELECT_OF_SWITCH", "UNICAST_ROUTING_OF_SWITCH"]


def _chiplets(spec: FabricSpec) -> dict:
    # the L2 level is timed by the switch the RTL builds there: one plane (FabricSpec.l2_planes;
    # an L2 flow crosses one plane, so one plane's latency and phase select are what it sees)
    return {"l1": {"ports": spec.l1_ports, "middle": spec.middle, "dtype": spec.dtype},
            "l2": {"ports": spec.l2_plane_ports, "middle": spec.middle, "dtype": spec.dtype}}


#: The RTL fabric's switches (``fred fabric-sim --switch``) and the model's phase select for each.
PHASE_SELECT_OF_SWITCH = {"circuit": "start", "packet": "header"}
#: ... and how each routes an endpoint algorithm's unicasts: ``fred_switch`` has no online
#: routing (configured flows, their phase selected when the collective starts); the packet
#: fabric routes them online (the default phase index, docs/fabric_rtl.md, "Packet fabric").
UNICAST_ROUTING_OF_SWITCH = {"circuit": "configured", "packet": "online"}


def fabric_platform_toml(spec: FabricSpec, *, clock_mhz: float, flit_bytes: int,
                         switch: str = "circuit") -> str:
    """The platform file (TOML text) of ``spec`` for a switch clock of ``clock_mhz`` and flits of
    ``flit_bytes`` (the characterization's, see :func:`fabric_platform`), built of ``switch``
    switches: ``circuit`` (``fred_switch``, phases selected at the start by the sequencers) or
    ``packet`` (``fred_packet_switch``, phases selected by the packet headers)."""
    if switch not in PHASE_SELECT_OF_SWITCH:
        raise FredError(f"switch must be one of {', '.join(PHASE_SELECT_OF_SWITCH)}, got {switch!r}")
    npu_gbps = flit_bytes * clock_mhz * 1e6 / 1e9     # one flit per cycle
    cycle_ns = 1e3 / clock_mhz
    chiplets = _chiplets(spec)
    lines = [
        f"# The {spec.name} RTL fabric as a system-model platform (written by sysmodel.fabric_model;",
        f"# docs/fabric_rtl.md). 1 flit per cycle per NPU link = {npu_gbps:g} GBps at {clock_mhz:g} MHz and",
        f"# {flit_bytes} B flits. Compute and memory do not enter collective times; set to 1.",
        f'name = "rtl-{spec.name}"',
        f'description = "{spec.name} fabric of the RTL: {spec.npus} NPUs, {spec.l1_count} L1 '
        f'Fred_{spec.middle}({spec.l1_ports}), L2 {spec.l2_description}, '
        f'{spec.uplink_ports} uplink port(s) x {spec.uplink_rate} flit/cycle per L1"',
        "",
        "[npu]",
        f"count = {spec.npus}",
        f"network_send_gbps = {npu_gbps!r}",
        f"network_recv_gbps = {npu_gbps!r}",
        "peak_tflops = 1.0",
        "memory_bandwidth_gbps = 1.0",
        "memory_capacity_gb = 1.0",
        "compute_efficiency = 1.0",
        f"forward_latency_ns = {engine_forward_cycles(spec.dtype) * cycle_ns!r}   # the engine's "
        f"receive-to-send: {engine_forward_cycles(spec.dtype)} cycle(s)",
        "",
        "[link]",
        f"latency_ns = {spec.npu_link_latency * cycle_ns!r}         # {spec.npu_link_latency} cycle(s)",
        f"l1_l2_latency_ns = {spec.uplink_latency * cycle_ns!r}   # {spec.uplink_latency} cycle(s)",
        "",
        "[fred]",
        f"npus_per_l1 = {spec.npus_per_l1}",
        ("# the RTL's switches route an endpoint algorithm's unicasts as configured flows (no"
         if switch == "circuit" else
         "# the packet switches route an endpoint algorithm's unicasts online (default index)"),
        ("# online routing in fred_switch): their phase is selected when the collective starts"
         if switch == "circuit" else "# from the destination in each header: nothing to set up"),
        f'unicast_routing = "{UNICAST_ROUTING_OF_SWITCH[switch]}"',
        f'phase_select = "{PHASE_SELECT_OF_SWITCH[switch]}"   # {switch} switches',
        *([f"vc_buffer_flits = {default_depth(spec)}   # the packet switches' input buffers and the controllers' receive buffers per data VC "
           "(default_depth)"] if switch == "packet" else []),
        "",
        "[fred.chiplets]",
        *(f'{level} = {{ ports = {p["ports"]}, middle = {p["middle"]}, dtype = "{p["dtype"]}" }}'
          for level, p in chiplets.items()),
        "",
        f"[fred.variants.{spec.name}]",
        f"l1_l2_gbps = {float(spec.uplink_bandwidth) * npu_gbps!r}   # {spec.uplink_bandwidth} flit/cycle",
        f"in_switch = {'true' if spec.in_switch else 'false'}",
        "",
    ]
    if spec.io_controllers:
        lines += ["[io]   # the RTL's controllers: controller k on L1 k mod L1s, an NPU link's latency",
                  f"controllers = {spec.io_controllers}",
                  f"controller_gbps = {float(spec.io_rate) * npu_gbps!r}   # {spec.io_rate} flit/cycle",
                  ""]
    return "\n".join(lines)


def fabric_platform(spec: FabricSpec, *, characterization: str | Path | None = None,
                    write_to: str | Path | None = None, switch: str = "circuit") -> tuple[Platform, str]:
    """(the model's :class:`Platform` of ``spec``, its TOML text): the text parsed by the
    model's own platform reader (:func:`sysmodel.platform.parse_platform`, as
    :func:`~sysmodel.platform.load_platform` does for a file) with each level timed by its
    switch's measured point in ``characterization`` (default: the shipped one); ``write_to``
    also writes the text there; ``switch``: as :func:`fabric_platform_toml`."""
    # both levels' measured points (an unmeasured one is named as this fabric's); the clock and
    # flit size of the platform are those of their timings
    timings = load_chiplet_timings(_chiplets(spec), characterization,
                                   platform=f"the {spec.name} RTL fabric")
    text = fabric_platform_toml(spec, clock_mhz=timings["l1"].clock_mhz,
                                flit_bytes=timings["l1"].flit_bytes, switch=switch)
    source = f"rtl-{spec.name}.toml"
    if write_to is not None:
        Path(write_to).write_text(text)
        source = str(write_to)
    platform = parse_platform(parse_toml(text, source), switch=timings["l1"],
                              l2_switch=timings["l2"], source=source)
    return platform, text


@dataclass
class FabricEstimate:
    """The model's time for a request, in cycles, with its parts: ``bandwidth_cycles`` (busiest
    link), ``latency_cycles`` (one pass of the longest dependent hop chain), ``phase_cycles``
    (what the phases add: what is left of the first phase's selects when the flits arrive,
    then a select and a further pass per later phase),
    ``algorithm`` (what the model runs: in-switch, ring, hierarchical, chain), ``busiest_link``,
    ``phases``, ``ring_turn_cycles`` (the part of ``latency_cycles`` the configured rings add by
    taking turns on an uplink's ports, :attr:`sysmodel.collectives.CollectiveResult.ring_turns_s`);
    ``platform`` is the TOML the model read."""

    cycles: float
    bandwidth_cycles: float
    latency_cycles: float
    phase_cycles: float
    algorithm: str
    busiest_link: str
    busiest_link_flits: float
    phases: int
    platform: str = field(repr=False, default="")
    ring_turn_cycles: float = 0.0

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "platform"}


#: The model's collective for each I/O op of the fabric (``hdl.contracts.fabric.IO_OPS``).
#: When the request has one group per controller of the fabric, each is served by the
#: controller the RTL request roots it at (endpoint ``npus + g``: controller g serves group g,
#: ``hdl.contracts.fabric.make_request``), as ``Collective.controllers``: a group's reduce-out
#: then waits for its turn where the groups share an uplink port
#: (``sysmodel.network.Traffic.paced_turn_s``; docs/fabric_validation.md, "Fred-B's DP-group
#: I/O (session 15)"). With fewer groups than controllers (the wafer's striped I/O over 18
#: controllers, ``studies.mesh_validation``) the RTL stripes every group over every controller,
#: and so does the model (no controller named), as ``make eval``'s I/O does.
IO_COLLECTIVE = {"io-broadcast": "io-load", "io-reduce": "io-store"}


def _collective(c, op: str, size_bytes: float, npus: int, named: bool) -> Collective:
    if op in IO_COLLECTIVE:
        return Collective(IO_COLLECTIVE[op], group=c.members, size=size_bytes,
                          controllers=(c.root - npus,) if named else ())
    if op == "multicast":
        return Collective("multicast", group=c.members, size=size_bytes, root=c.root)
    if op == "reduce":
        return Collective("reduce", group=c.members, size=size_bytes, root=c.root)
    return Collective("all-reduce", group=c.members, size=size_bytes)


def request_collectives(request: FabricRequest, flit_bytes: int, npus: int, *,
                        io_controllers: int) -> list[Collective]:
    """The model's collectives of ``request`` (its ``size_flits`` flits of ``flit_bytes``) on a
    fabric of ``npus`` NPUs and ``io_controllers`` I/O controllers (an I/O collective's root is
    controller endpoint ``npus + k``; it names its controller only when the request has one
    group per controller: :data:`IO_COLLECTIVE`)."""
    named = len(request.collectives) == io_controllers
    return [_collective(c, request.op, request.size_flits * flit_bytes, npus, named)
            for c in request.collectives]


def model_cycles(spec: FabricSpec, request: FabricRequest, *,
                 characterization: str | Path | None = None,
                 platform: tuple[Platform, str] | None = None,
                 algorithm: str | None = None) -> FabricEstimate:
    """The system model's cycles for ``request`` on ``spec`` (``platform``: a
    :func:`fabric_platform` result to reuse), with the model's own (fastest) algorithm or the
    named ``algorithm`` (e.g. ``ring``, to compare with an RTL that runs that one)."""
    platform, text = platform or fabric_platform(spec, characterization=characterization)
    timing = platform.switch_at("l1")
    cycle_s = timing.cycle_s
    collectives = request_collectives(request, timing.flit_bytes, spec.npus,
                                      io_controllers=spec.io_controllers)
    result = evaluate(platform, spec.name, collectives, algorithm=algorithm)
    if len(result.algorithms) != 1:
        raise FredError(f"the model runs {request.label} with several algorithms "
                        f"({', '.join(result.algorithms)}); the RTL engines run one per request")
    overhead = result.phase_overhead_s
    return FabricEstimate(
        cycles=result.time_s / cycle_s, bandwidth_cycles=result.bandwidth_time_s / cycle_s,
        latency_cycles=(result.latency_s - overhead) / cycle_s, phase_cycles=overhead / cycle_s,
        algorithm=result.algorithms[0], busiest_link=result.busiest_link,
        busiest_link_flits=result.busiest_link_bytes / timing.flit_bytes, phases=result.phases,
        platform=text, ring_turn_cycles=result.ring_turns_s / cycle_s)

