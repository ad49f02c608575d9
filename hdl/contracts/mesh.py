"""The 2D-mesh router's contract: flit layout, port numbering, dimension-order routing, latency.

Pure Python (no Amaranth). The RTL (``hdl/designs/mesh/``), its benches and the mesh fabric
read these definitions, so the route a bench expects and the route the hardware takes are the
same function (docs/mesh_rtl.md).

Coordinates: ``x`` is the column (growing east), ``y`` the row (growing south), as
``sysmodel.mesh.MeshNetwork`` places rank ``y * cols + x``. A flit carries its destination
``(dest_x, dest_y)``; a router at ``(x, y)`` sends it to the neighbour one step closer, or to
its local port when it has arrived.

Virtual channels: VC 0 routes X then Y (:data:`XY`), VC 1 routes Y then X (:data:`YX`). Each
order alone is deadlock-free on a mesh; the two are kept in separate buffers so that a
collective may send its two chunks in opposite dimension orders (the model's hierarchical 2D
all-reduce) without the XY and YX channel dependencies forming a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.contracts.bitfields import BitLayout
from hdl.contracts.errors import FredError
from hdl.contracts.npu_engine import ENGINE_STAGES

__all__ = ["LOCAL", "NORTH", "EAST", "SOUTH", "WEST", "PORT_NAMES", "MESH_PORTS", "XY", "YX",
           "VC_ORDERS", "MESH_VCS", "MeshFlitFormat", "route_port", "route_hops",
           "check_router_parameters", "check_link_rate", "router_latency", "EJECTION_LATENCY",
           "npu_receive_cycles", "PORT_REGS",
           "ENGINE_WORD_BITS", "STAGE_BITS", "MESH_DTYPES", "MeshFabricSpec"]

#: Port numbers of a router: the local NPU and the four neighbours.
LOCAL, NORTH, EAST, SOUTH, WEST = range(5)
PORT_NAMES = ("local", "north", "east", "south", "west")
MESH_PORTS = len(PORT_NAMES)
#: Dimension orders, and the one each virtual channel routes with.
XY, YX = "xy", "yx"
VC_ORDERS = (XY, YX)
MESH_VCS = len(VC_ORDERS)
#: The direction a flit travels after leaving by each port; the port it enters the neighbour by.
OPPOSITE = {NORTH: SOUTH, SOUTH: NORTH, EAST: WEST, WEST: EAST}

#: Cycles from a flit on a router's input link to it on the output link, uncontended and with
#: credits: one to write the input FIFO, one through the allocator into the output register.
ROUTER_LATENCY = 2
#: Cycles from a flit on the router's local output to it at the engine
#: (``hdl.designs.mesh.engine_port.EnginePort``: its per-stage ``fifo.SyncFIFOBuffered``).
EJECTION_LATENCY = 2


def _check_int(name: str, value, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (
            high is not None and value > high):
        bound = f">= {low}" if high is None else f"in {low}..{high}"
        raise FredError(f"{name} must be an integer {bound}, got {value!r}")


@dataclass(frozen=True)
class MeshFlitFormat:
    """A mesh flit: ``data(data_width) last(1) vc(1) dest_x(coord_bits) dest_y(coord_bits)``,
    LSB first. Every flit of a packet carries the packet's header (``vc``, destination), so a
    router needs no per-packet route state beyond the output it holds.

    Parameters (keyword-only, validated): data_width (1..1024), coord_bits (1..8),
    packet_flits: the longest packet (the credits a packet reserves before it starts, virtual
    cut-through; 1..64).
    """

    data_width: int
    coord_bits: int
    packet_flits: int

    def __init__(self, *, data_width: int, coord_bits: int, packet_flits: int):
        _check_int("data_width", data_width, 1, 1024)
        _check_int("coord_bits", coord_bits, 1, 8)
        _check_int("packet_flits", packet_flits, 1, 64)
        object.__setattr__(self, "data_width", data_width)
        object.__setattr__(self, "coord_bits", coord_bits)
        object.__setattr__(self, "packet_flits", packet_flits)

    @property
    def fields(self) -> BitLayout:
        return BitLayout("mesh flit", [("data", self.data_width), ("last", 1), ("vc", 1),
                                       ("dest_x", self.coord_bits), ("dest_y", self.coord_bits)])

    @property
    def width(self) -> int:
        return self.fields.width

    @property
    def coord_limit(self) -> int:
        return 1 << self.coord_bits

    def pack(self, *, data: int, last: int, vc: int, dest_x: int, dest_y: int) -> int:
        if vc not in range(MESH_VCS):
            raise FredError(f"vc must be 0 (XY) or 1 (YX), got {vc!r}")
        for name, value in (("dest_x", dest_x), ("dest_y", dest_y)):
            if not 0 <= value < self.coord_limit:
                raise FredError(f"{name} {value} does not fit {self.coord_bits} coordinate bits")
        return self.fields.pack(data=data, last=int(bool(last)), vc=vc, dest_x=dest_x, dest_y=dest_y)

    def unpack(self, word: int) -> dict[str, int]:
        return self.fields.unpack(word)


def route_port(x: int, y: int, dest_x: int, dest_y: int, order: str = XY) -> int:
    """The output port a router at ``(x, y)`` gives a flit for ``(dest_x, dest_y)`` under
    dimension ``order`` (:data:`XY` or :data:`YX`): the reference of the RTL's route compute."""
    if order not in VC_ORDERS:
        raise FredError(f"order must be {XY!r} or {YX!r}, got {order!r}")
    along_x = EAST if dest_x > x else WEST if dest_x < x else None
    along_y = SOUTH if dest_y > y else NORTH if dest_y < y else None
    first, second = (along_x, along_y) if order == XY else (along_y, along_x)
    for port in (first, second):
        if port is not None:
            return port
    return LOCAL


def route_hops(src: tuple[int, int], dst: tuple[int, int], order: str = XY) -> list[tuple[tuple[int, int], int, int]]:
    """The routers a packet from node ``src`` to node ``dst`` crosses: ``[((x, y), in_port,
    out_port)]``, from the source's router (entered by :data:`LOCAL`) to the destination's
    (left by :data:`LOCAL`)."""
    step = {NORTH: (0, -1), SOUTH: (0, 1), EAST: (1, 0), WEST: (-1, 0)}
    (x, y), hops, entered = src, [], LOCAL
    while True:
        out = route_port(x, y, *dst, order)
        hops.append(((x, y), entered, out))
        if out == LOCAL:
            return hops
        dx, dy = step[out]
        x, y, entered = x + dx, y + dy, OPPOSITE[out]


def check_router_parameters(*, flit: MeshFlitFormat, depth: int) -> None:
    """Raise :class:`FredError` naming a bad router parameter."""
    if not isinstance(flit, MeshFlitFormat):
        raise FredError(f"flit must be a MeshFlitFormat, got {flit!r}")
    _check_int("depth", depth, 1, 4096)
    if depth < flit.packet_flits:
        raise FredError(f"depth ({depth}) must hold a whole packet (packet_flits "
                        f"{flit.packet_flits}): virtual cut-through reserves a packet's credits")


def check_link_rate(rate) -> tuple[int, int]:
    """``(a, b)``: a link carrying ``a`` flits in every ``b`` cycles, 0 < a <= b; returned as
    a tuple, or :class:`FredError` naming the problem."""
    try:
        a, b = rate
    except (TypeError, ValueError):
        raise FredError(f"a link rate is (a, b), a flits every b cycles; got {rate!r}") from None
    if not (isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool)
            and not isinstance(b, bool) and 0 < a <= b):
        raise FredError(f"a link rate (a, b) needs integers 0 < a <= b, got {rate!r}")
    return a, b


def npu_receive_cycles() -> int:
    """Cycles a flit spends arriving at an NPU engine beyond its links: the NPU's own router,
    which a link's latency (wire + the router it enters) does not count at the destination, and
    the engine port's ejection (:data:`EJECTION_LATENCY`). With the wire (1) and the routers
    passed (2 each) a neighbour hop is 1 + 2 + 4 = 7 cycles, 8 with the engine's forward
    (measured: tests/hdl/designs/test_mesh_fabric_sim.py)."""
    return ROUTER_LATENCY + EJECTION_LATENCY


def router_latency() -> int:
    """Cycles from a flit on an input link to it on the chosen output link (no contention,
    credits available): :data:`ROUTER_LATENCY`."""
    return ROUTER_LATENCY


#: An engine port's program registers (``hdl.designs.mesh.engine_port.EnginePort``), written
#: after the engine's: per engine stage the destination (``x | y << 8``), the flits the engine
#: sends and the flits it receives in that stage.
PORT_REGS = tuple(f"{kind}{s}" for kind in ("dest", "send", "recv") for s in range(ENGINE_STAGES))

#: Bits of a mesh-fabric flit's data: the engine's int32 word, its ``last`` flag and the
#: engine stage that sent it (:class:`hdl.designs.mesh.engine_port.EnginePort`).
ENGINE_WORD_BITS = 32
STAGE_BITS = 2
#: Element formats of the mesh fabric's engines (fp16: two lanes per 32-bit word, summed by the
#: project's adder and checked by hash against ``hdl.compiler.fabric_golden``).
MESH_DTYPES = ("int32", "fp16")


@dataclass(frozen=True)
class MeshFabricSpec:
    """The 2D-mesh fabric of the RTL (docs/mesh_rtl.md, "The mesh fabric").

    Parameters (keyword-only, validated): ``rows`` x ``cols`` NPUs (rank ``r * cols + c`` at
    row r, column c, as ``sysmodel.mesh.MeshNetwork``); ``link_rate`` (a, b): a neighbour link
    carries a flits every b cycles, where one cycle moves one flit through an NPU's local port
    (the NPU's 3 TBps; 750 GBps links are (1, 4)); ``link_latency``: cycles a flit spends on a
    wire between two routers (each way; credits return with the same latency); ``depth``:
    flits per VC of a router input buffer; ``packet_flits``: packet length; ``eject_depth``:
    flits an NPU can hold per (chunk, engine stage) of what arrives before its engine reads it;
    ``engine_buffer``: flits an engine holds between receiving and forwarding (a ring chunk).
    Both are memories of every NPU: the defaults keep the Verilog small; bandwidth-bound
    sizes need them raised (the program generator names the one too small). ``dtype``: the
    engines' element format (:data:`MESH_DTYPES`).

    Router coordinates are the NPU's column + 1 and row + 1: coordinate 0 and ``cols + 1`` /
    ``rows + 1`` are the ring of I/O positions around the mesh.
    """

    rows: int = 5
    cols: int = 4
    link_rate: tuple = (1, 4)
    link_latency: int = 1
    depth: int = 16
    packet_flits: int = 1
    eject_depth: int = 2048
    engine_buffer: int = 1024
    dtype: str = "int32"

    def __post_init__(self):
        if self.dtype not in MESH_DTYPES:
            raise FredError(f"the mesh fabric's engines run {' or '.join(MESH_DTYPES)}, got dtype {self.dtype!r}")
        _check_int("rows", self.rows, 2, 14)
        _check_int("cols", self.cols, 2, 14)
        object.__setattr__(self, "link_rate", check_link_rate(self.link_rate))
        _check_int("link_latency", self.link_latency, 1, 64)
        _check_int("eject_depth", self.eject_depth, 1, 1 << 20)
        _check_int("engine_buffer", self.engine_buffer, 1, 1 << 20)
        check_router_parameters(flit=self.flit, depth=self.depth)

    @property
    def npus(self) -> int:
        return self.rows * self.cols

    @property
    def engine_lanes(self) -> int:
        """Elements per flit of the engines: one int32 or two fp16 (the 32-bit engine word)."""
        return ENGINE_WORD_BITS // (32 if self.dtype == "int32" else 16)

    @property
    def flit(self) -> MeshFlitFormat:
        span = max(self.rows, self.cols) + 2
        return MeshFlitFormat(data_width=ENGINE_WORD_BITS + 1 + STAGE_BITS,
                              coord_bits=(span - 1).bit_length(), packet_flits=self.packet_flits)

    def position(self, rank: int) -> tuple[int, int]:
        """The router coordinates ``(x, y)`` of NPU ``rank``."""
        if not 0 <= rank < self.npus:
            raise FredError(f"rank {rank} is not an NPU of the {self.rows} x {self.cols} mesh")
        row, col = divmod(rank, self.cols)
        return col + 1, row + 1
