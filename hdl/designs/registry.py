"""Registry of the top-level designs that ``fred verilog`` and ``make verilog`` emit.

Each :class:`Design` names its Verilog top module, its parameters (each a
command-line option ``--<name>`` of ``fred verilog``) and a factory that imports its
module lazily, so that listing designs stays cheap. To add a design, add one entry to
:data:`DESIGNS`; ``make verilog`` writes every design with its default parameters.

This registry is the one place that holds design defaults: the components themselves take
every parameter explicitly (keyword-only), and element formats are the names of
``hdl.contracts.dtypes.DTYPES``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from hdl.contracts.encoding import DEFAULT_WORD_WIDTH
from hdl.contracts.dtypes import DTYPES
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FABRICS, SWITCH_PHASES
from hdl.contracts.mesh import MeshFabricSpec
from hdl.contracts.npu_engine import DTYPES_RUN

__all__ = ["Param", "Design", "DESIGNS", "get_design"]


@dataclass(frozen=True)
class Param:
    """A design parameter: its type, its default (used by ``make verilog``), help text."""

    type: Callable[[str], Any]
    default: Any
    help: str
    choices: tuple | None = None


@dataclass(frozen=True)
class Design:
    unit: str           #: name given to ``fred verilog --unit``
    top: str            #: Verilog top module name
    description: str
    factory: Callable[..., Any]  #: ``factory(**params)`` returns the Component (imports lazily)
    params: dict[str, Param] = field(default_factory=dict)

    def resolve(self, given: dict[str, Any]) -> dict[str, Any]:
        """Parameters with defaults filled in; rejects names the design does not take."""
        unknown = sorted(set(given) - set(self.params))
        if unknown:
            options = ", ".join("--" + name.replace("_", "-") for name in unknown)
            takes = ", ".join("--" + name.replace("_", "-") for name in self.params) or "no options"
            raise FredError(f"{options} does not apply to unit {self.unit!r} (it takes {takes})")
        resolved = {name: param.default for name, param in self.params.items()}
        resolved.update(given)
        for name, value in resolved.items():
            choices = self.params[name].choices
            if choices is not None and value not in choices:
                raise FredError(f"--{name.replace('_', '-')} {value!r} is not one of "
                                f"{', '.join(map(str, choices))} for unit {self.unit!r}")
        return resolved

    def build(self, **params):
        """Instantiate the component (parameters validated by the component itself too)."""
        return self.factory(**self.resolve(params))


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError(f"expected a positive integer, got {text}")
    return value


def _stream_buffer(*, width):
    from hdl.designs.stream_buffer import StreamBuffer
    return StreamBuffer(width)


def _adder(*, dtype, lanes):
    from hdl.designs.reduction import ReductionUnit
    return ReductionUnit(dtype=dtype, lanes=lanes)


def _switch(*, ports, middle, dtype, lanes, phases, tag_width, word_width):
    from hdl.designs.switch import FredSwitchTop
    return FredSwitchTop(ports=ports, middle=middle, dtype=dtype, lanes=lanes, phases=phases,
                         tag_width=tag_width, word_width=word_width)


def _axis_switch(*, ports, middle, dtype, lanes, phases, tag_width, word_width):
    from hdl.designs.switch.axis_switch import AxisSwitchTop
    return AxisSwitchTop(ports=ports, middle=middle, dtype=dtype, lanes=lanes, phases=phases,
                         tag_width=tag_width, word_width=word_width)


def _packet_switch(*, ports, middle, dtype, lanes, phases, depth, ctrl_depth, packet_flits, seq_bits,
                   flow_bits, online):
    from hdl.contracts.packet import PacketFormat
    from hdl.designs.switch.packet_switch import PacketSwitch
    # the narrowest header that names every phase (and, online, the default index above them
    # and every output port)
    phase_bits = max(1, phases.bit_length() if online else (phases - 1).bit_length())
    dest_bits = max(1, (ports - 1).bit_length()) if online else 0
    packet = PacketFormat(phase_bits=phase_bits, seq_bits=seq_bits, flow_bits=flow_bits,
                          packet_flits=packet_flits, dest_bits=dest_bits)
    return PacketSwitch(ports=ports, middle=middle, dtype=dtype, lanes=lanes, phases=phases, packet=packet,
                        depth=depth, ctrl_depth=ctrl_depth, online=bool(online))


def _mesh_router(*, data_width, coord_bits, packet_flits, depth):
    from hdl.contracts.mesh import MeshFlitFormat
    from hdl.designs.mesh import MeshRouter
    return MeshRouter(flit=MeshFlitFormat(data_width=data_width, coord_bits=coord_bits,
                                          packet_flits=packet_flits), depth=depth)


def _mesh_fabric(*, rows, cols, eject_depth, engine_buffer):
    from hdl.designs.mesh.mesh_fabric_top import MeshFabricTop
    return MeshFabricTop(MeshFabricSpec(rows=rows, cols=cols, eject_depth=eject_depth,
                                        engine_buffer=engine_buffer))


def _fabric(*, variant, dtype, phases):
    from hdl.contracts.fabric import fabric_spec
    from hdl.designs.fabric import FabricTop
    return FabricTop(fabric_spec(variant, dtype=dtype), phases=phases)


#: Element formats every reducing design accepts.
DTYPE_CHOICES = tuple(DTYPES)
#: The mesh fabric's defaults are the spec's (the paper's 5 x 4 wafer).
MESH_FABRIC_DEFAULT = MeshFabricSpec()


def _switch_params(*, tag: str) -> dict:
    """The parameters of the FRED switch, shared by its native and AXI4-Stream tops."""
    return {
        "ports": Param(int, 4, "switch ports P (any P >= 2; odd P has a demux/mux on the last port)"),
        "middle": Param(int, 3, "middle subnetworks m (>= 2)"),
        "dtype": Param(str, "fp16", "element format", choices=DTYPE_CHOICES),
        "lanes": Param(_positive_int, 1, "elements per flit"),
        "phases": Param(_positive_int, 4, "stored configurations (phases) K"),
        "tag_width": Param(_positive_int, 8, tag),
        "word_width": Param(_positive_int, DEFAULT_WORD_WIDTH, "bits of a configuration word"),
    }


DESIGNS: dict[str, Design] = {
    "stream_buffer": Design(
        unit="stream_buffer",
        top="fred_stream_buffer",
        description="registered full-throughput stream buffer (skid buffer)",
        factory=_stream_buffer,
        params={"width": Param(_positive_int, 32, "payload width in bits")},
    ),
    "adder": Design(
        unit="adder",
        top="fred_adder",
        description="reduction unit: lane-wise a + b of two streams (pipelined, bit-exact)",
        factory=_adder,
        params={
            "dtype": Param(str, "fp16", "element format of the adder", choices=DTYPE_CHOICES),
            "lanes": Param(_positive_int, 4, "elements per flit"),
        },
    ),
    "switch": Design(
        unit="switch",
        top="fred_switch",
        description="FRED switch Fred_m(P): microswitch datapath, reduction units, K-phase config memory",
        factory=_switch,
        params=_switch_params(tag="bits of the flit tag"),
    ),
    "axis_switch": Design(
        unit="axis_switch",
        top="fred_axis_switch",
        description="the FRED switch with AXI4-Stream names: s<n>_axis_*/m<n>_axis_* "
                    "(tdata/tvalid/tready/tlast/tuser), s_cfg_axis_*, s_sel_axis_* (docs/switch.md)",
        factory=_axis_switch,
        params=_switch_params(tag="bits of the flit tag (tuser)"),
    ),
    "packet_switch": Design(
        unit="packet_switch",
        top="fred_packet_switch",
        description="FRED packet switch: VC input buffers with credits, header-selected phases with "
                    "MP > PP > DP preemption, control VC, online unicast routing (docs/switch.md)",
        factory=_packet_switch,
        params={
            "ports": Param(int, 4, "switch ports P"),
            "middle": Param(int, 3, "middle subnetworks m (>= 2)"),
            "dtype": Param(str, "fp16", "element format", choices=DTYPE_CHOICES),
            "lanes": Param(_positive_int, 1, "elements per flit"),
            "phases": Param(_positive_int, 3, "stored configurations (phases) K"),
            "depth": Param(_positive_int, 48, "flits per data VC buffer (the paper: 24 KB = 48 flits)"),
            "ctrl_depth": Param(int, 4, "flits per control VC buffer (0 = no control VC; the paper: 4)"),
            "packet_flits": Param(_positive_int, 8, "flits per data packet (the paper: 4 KB = 8 flits)"),
            "seq_bits": Param(_positive_int, 8, "bits of a packet's sequence number"),
            "flow_bits": Param(_positive_int, 4, "bits of a packet's flow id"),
            "online": Param(int, 1, "1 = online unicast routing at the default phase index", choices=(0, 1)),
        },
    ),
    "mesh_router": Design(
        unit="mesh_router",
        top="fred_mesh_router",
        description="2D-mesh baseline router: 5 ports, X-Y / Y-X dimension order on 2 VCs, credit-based "
                    "virtual cut-through, 1 flit/cycle/port (docs/mesh_rtl.md)",
        factory=_mesh_router,
        params={
            "data_width": Param(_positive_int, 32, "payload bits per flit"),
            "coord_bits": Param(_positive_int, 3, "bits of a mesh coordinate"),
            "packet_flits": Param(_positive_int, 4, "longest packet in flits (credits a packet reserves)"),
            "depth": Param(_positive_int, 8, "flits per VC of each input buffer"),
        },
    ),
    "mesh_fabric": Design(
        unit="mesh_fabric",
        top="fred_mesh_fabric",
        description="the 2D-mesh baseline fabric RTL: rows x cols mesh routers, wires, two NPU engines "
                    "per NPU (docs/mesh_rtl.md; 5 x 4: about 90 s to generate)",
        factory=_mesh_fabric,
        params={
            "rows": Param(_positive_int, MESH_FABRIC_DEFAULT.rows, "mesh rows (2..14; the paper's wafer: 5)"),
            "cols": Param(_positive_int, MESH_FABRIC_DEFAULT.cols, "mesh columns (2..14; the paper's wafer: 4)"),
            "eject_depth": Param(_positive_int, MESH_FABRIC_DEFAULT.eject_depth, "flits an NPU holds per (chunk, engine stage) "
                                                      "before its engine reads them"),
            "engine_buffer": Param(_positive_int, MESH_FABRIC_DEFAULT.engine_buffer, "flits an engine holds between receiving "
                                                        "and forwarding"),
        },
    ),
    "fabric": Design(
        unit="fabric",
        top="fred_fabric",
        description="the wafer fabric RTL: L1/L2 FRED switches, links with latency and rate, NPU engines, "
                    "phase sequencers (docs/fabric_rtl.md; about 4 MB of Verilog, 40 s to generate)",
        factory=_fabric,
        params={
            "variant": Param(str, "fred-a", "fabric variant (docs/fabric_rtl.md)", choices=FABRICS),
            "dtype": Param(str, "int32", "element format the NPU engines run", choices=DTYPES_RUN),
            "phases": Param(_positive_int, SWITCH_PHASES, "configuration slots per switch"),
        },
    ),
}


def get_design(unit: str) -> Design:
    """The design named ``unit`` (``-`` and ``_`` alike: ``mesh-router`` is ``mesh_router``)."""
    try:
        return DESIGNS[unit.replace("-", "_")]
    except KeyError:
        raise FredError(f"unknown unit {unit!r}; available: {', '.join(DESIGNS)}") from None
