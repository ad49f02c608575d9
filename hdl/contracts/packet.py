"""Packets of the FRED packet switch: the header as a bit-layout table, the virtual channels, the
paper's sizes and the RTL's scaled-down ones, and the golden packetizer / depacketizer.

The paper (shared spec ``FRED.md``, "Datapath and control"): 4 virtual channels per port (MP, DP,
PP data and one control VC), 512 B flits, 4 KB data packets and 512 B control packets, a 6 B
header whose field indexes the stored configuration of the packet's communication phase,
credit-based virtual cut-through, 24 KB buffer per data VC and 2 KB for control.

What the RTL keeps and what it scales down (``docs/switch.md``, "Packet switch"):

* **Header fields** (:meth:`PacketFormat.header`, LSB first): ``phase`` (index of the stored
  configuration, ``phase_bits``; all ones is the default index, unicast routed online),
  ``vc`` (2 bits, :class:`VC`), ``seq`` (sequence number of the
  packet within its flow, ``seq_bits``, wraps), ``flow`` (flow id, ``flow_bits``; the control
  VC's NACK fan-out needs it), and, when ``dest_bits`` > 0, ``dest`` (the output port of an
  online-routed packet). The paper's 48-bit header holds more (length, addresses, the
  Go-Back-N state); the RTL header is only what the switch reads.
* **Where the header travels**: the paper sends it ahead of the payload (6 B per 4 KB packet,
  0.15 % of the link). The RTL carries it as the flit's ``tag`` sideband (:class:`FlitFormat`
  with ``tag_width = header width``), identical on every flit of a packet; the switch reads it
  from the packet's first flit. So the RTL's link is 0.15 % faster than the paper's;
  :func:`header_overhead` gives the factor the system model can apply.
* **Sizes**: a flit is ``lanes`` elements (e.g. 4 x fp16 = 8 B, not 512 B); a data packet is
  ``packet_flits`` flits (the paper: 4096 / 512 = 8), a control packet one flit (512 / 512 = 1);
  buffers are counted in flits (the paper: 24 KB / 512 B = 48 flits per data VC, 2 KB / 512 B =
  4 for control). :data:`PAPER` holds the paper's figures and :func:`paper_flits` their flit
  counts; the RTL's depths are parameters.

Pure Python (stdlib only).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hdl.contracts.bitfields import BitLayout
from hdl.contracts.config_port import phase_index_width
from hdl.contracts.errors import FredError

__all__ = ["VC", "DATA_VCS", "PRIORITY", "VC_BITS", "MAX_PHASE_BITS", "PAPER", "paper_flits", "header_overhead",
           "phase_field_bits", "PacketFormat", "Packet", "stream_packets", "packetize", "link_words", "depacketize"]


class VC(enum.IntEnum):
    """The virtual channels, by their ``vc`` header code."""

    MP = 0   #: model (tensor) parallelism
    DP = 1   #: data parallelism
    PP = 2   #: pipeline parallelism
    CTRL = 3  #: control packets (ACK / NACK)


#: The data VCs, each with its own buffer per input port.
DATA_VCS = (VC.MP, VC.DP, VC.PP)
#: Data VCs from the highest priority to the lowest (the paper: MP > PP > DP).
PRIORITY = (VC.MP, VC.PP, VC.DP)
VC_BITS = 2
#: The widest ``phase`` field of the header (:class:`PacketFormat`): 256 indices, as many as a
#: switch stores (``hdl.contracts.config_port.MAX_PHASES``) and the program port's 8-bit slot
#: fields (flow-port and shared-table entries) name.
MAX_PHASE_BITS = 8

#: The paper's sizes (bytes).
PAPER = {
    "header_bytes": 6,
    "flit_bytes": 512,
    "data_packet_bytes": 4096,
    "control_packet_bytes": 512,
    "data_vc_buffer_bytes": 24 * 1024,
    "control_vc_buffer_bytes": 2 * 1024,
    "ack_every_packets": 16,
}


def paper_flits() -> dict:
    """The paper's sizes in flits: ``{"data_packet": 8, "control_packet": 1,
    "data_vc_buffer": 48, "control_vc_buffer": 4}``."""
    flit = PAPER["flit_bytes"]
    return {"data_packet": PAPER["data_packet_bytes"] // flit,
            "control_packet": PAPER["control_packet_bytes"] // flit,
            "data_vc_buffer": PAPER["data_vc_buffer_bytes"] // flit,
            "control_vc_buffer": PAPER["control_vc_buffer_bytes"] // flit}


def header_overhead(packet_bytes: int = PAPER["data_packet_bytes"],
                    header_bytes: int = PAPER["header_bytes"]) -> float:
    """Link bytes per payload byte when every packet is preceded by its header:
    ``(packet + header) / packet`` (1.00146 for the paper's 4 KB packets and 6 B header)."""
    if packet_bytes <= 0 or header_bytes < 0:
        raise FredError(f"packet_bytes must be > 0 and header_bytes >= 0, got {packet_bytes}, {header_bytes}")
    return (packet_bytes + header_bytes) / packet_bytes


def _int_in(value, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise FredError(f"{name} must be an integer in {low}..{high}, got {value!r}")
    return value


def phase_field_bits(slots: int, *, online: bool = False, where: str = "a switch") -> int:
    """Bits of the header's ``phase`` field for switches that store ``slots`` configurations: the
    slot indices ``0 .. slots - 1`` (``ceil(log2 slots)``, at least 1), and with ``online``
    routing also the default index above them (all ones, :attr:`PacketFormat.online_phase`:
    ``slots.bit_length()``). So 8 slots take 3 bits (4 online), 9 slots 4 (Fred-D's striped
    I/O, ``hdl.compiler.io_stripe_shared.fabric_shared_phases``). The one rule from a slot count
    to the field (``hdl.designs.fabric.packet_fabric_top.packet_format``). FredError naming
    ``where`` and the count when more slots than :data:`MAX_PHASE_BITS` bits name."""
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
        raise FredError(f"{where}: the configuration slots must be a positive integer, got {slots!r}")
    # the slot indices' width is the configuration port's (one rule); online adds the all-ones index
    bits = slots.bit_length() if online else phase_index_width(slots)
    if bits > MAX_PHASE_BITS:
        most = (1 << MAX_PHASE_BITS) - (1 if online else 0)
        raise FredError(f"{where} needs {slots} configuration slots; the packet header's phase field "
                        f"({MAX_PHASE_BITS} bits{', the all-ones index routed online' if online else ''}) "
                        f"names at most {most}")
    return bits


@dataclass(frozen=True)
class PacketFormat:
    """Header widths and the packet length of the RTL.

    Parameters (keyword-only, validated):
        phase_bits: bits of the configuration index (1..:data:`MAX_PHASE_BITS`; from the slot
            count: :func:`phase_field_bits`).
        seq_bits: bits of the sequence number (2..32; it wraps, compared in serial-number
            arithmetic, so at most ``2**(seq_bits-1)`` packets of one flow may be in the switch).
        flow_bits: bits of the flow id (1..16).
        packet_flits: flits of a data packet (>= 1; the paper: 8).
        dest_bits: bits of the destination port (0..8; default 0 = no ``dest`` field). Only
            packets of the default phase index :attr:`online_phase` read it: they are unicast,
            routed online to output ``dest`` (``docs/switch.md``, "Online unicast routing").
        stripe_bits: bits of the I/O stripe a packet belongs to (0..8; default 0 = no
            ``stripe`` field): the striped I/O request, where an endpoint hears several
            stripes interleaved per packet and numbers each stripe's packets on its own
            (``docs/fabric_rtl.md``, "Striped I/O: every controller at once"); the switch
            carries it unread.
    """

    phase_bits: int
    seq_bits: int
    flow_bits: int
    packet_flits: int
    dest_bits: int
    stripe_bits: int

    def __init__(self, *, phase_bits: int, seq_bits: int, flow_bits: int, packet_flits: int,
                 dest_bits: int = 0, stripe_bits: int = 0):
        object.__setattr__(self, "phase_bits", _int_in(phase_bits, "phase_bits", 1, MAX_PHASE_BITS))
        object.__setattr__(self, "seq_bits", _int_in(seq_bits, "seq_bits", 2, 32))
        object.__setattr__(self, "flow_bits", _int_in(flow_bits, "flow_bits", 1, 16))
        object.__setattr__(self, "packet_flits", _int_in(packet_flits, "packet_flits", 1, 1 << 16))
        object.__setattr__(self, "dest_bits", _int_in(dest_bits, "dest_bits", 0, 8))
        object.__setattr__(self, "stripe_bits", _int_in(stripe_bits, "stripe_bits", 0, 8))

    @property
    def online_phase(self) -> int:
        """The default phase index, all ones (``2**phase_bits - 1``): "unicast, route online"
        (a switch that routes online stores at most ``2**phase_bits - 1`` configurations)."""
        return (1 << self.phase_bits) - 1

    @property
    def header(self) -> BitLayout:
        """``phase vc seq flow [dest] [stripe]``, LSB first (the flit's ``tag`` in the RTL;
        ``dest`` only when ``dest_bits`` > 0, ``stripe`` only when ``stripe_bits`` > 0)."""
        fields = [("phase", self.phase_bits), ("vc", VC_BITS), ("seq", self.seq_bits),
                  ("flow", self.flow_bits)]
        if self.dest_bits:
            fields.append(("dest", self.dest_bits))
        if self.stripe_bits:
            fields.append(("stripe", self.stripe_bits))
        return BitLayout("packet header", fields)

    @property
    def header_width(self) -> int:
        return self.header.width

    def pack_header(self, *, phase: int, vc: int, seq: int, flow: int, dest: int = 0, stripe: int = 0) -> int:
        fields = dict(phase=phase, vc=int(vc), seq=seq % (1 << self.seq_bits), flow=flow)
        for name, value, bits in (("dest", dest, self.dest_bits), ("stripe", stripe, self.stripe_bits)):
            if bits:
                fields[name] = value
            elif value:
                raise FredError(f"{name}={value!r} needs a PacketFormat with {name}_bits > 0")
        return self.header.pack(**fields)

    def unpack_header(self, word: int) -> dict:
        return self.header.unpack(word)

    def seq_le(self, a: int, b: int) -> bool:
        """``a <= b`` in serial-number arithmetic modulo ``2**seq_bits`` (what the RTL compares)."""
        half = 1 << (self.seq_bits - 1)
        return (b - a) % (1 << self.seq_bits) < half


@dataclass(frozen=True)
class Packet:
    """One packet: its header fields and its flits' payloads (``data`` ints, in order);
    ``dest``: the destination port of an online-routed packet (0 otherwise)."""

    phase: int
    vc: int
    seq: int
    flow: int
    flits: tuple
    dest: int = 0


def stream_packets(flits: int, packet_flits: int, chunk: int | None = None) -> int:
    """The packets an NPU's stream of ``flits`` flits is cut into: packets of ``packet_flits``
    flits that also end at the end of every ``chunk`` flits (an endpoint algorithm's chunk: a
    ring sends chunk after chunk, and a packet never holds flits of two chunks,
    docs/fabric_rtl.md, "Four DP rings across the one-port uplinks"); ``chunk`` None (or at
    least ``flits``): one chunk. So ``ceil(chunk / packet_flits)`` packets per whole chunk
    (chunk 12, packets of 8: two, of 8 and 4 flits) and ``ceil(rest / packet_flits)`` for a
    last partial chunk. The one count of the engines' packets: the receivers' ``last_seq``
    (:func:`hdl.compiler.packet_fabric_program.online_headers`, ``packet_headers``), the
    iteration's per-collective header registers; :func:`packetize` cuts the same way."""
    flits = _int_in(flits, "flits", 0, 1 << 48)
    size = _int_in(packet_flits, "packet_flits", 1, 1 << 16)
    if chunk is None or chunk >= flits:
        return -(-flits // size)
    chunk = _int_in(chunk, "chunk", 1, 1 << 48)
    whole, rest = divmod(flits, chunk)
    return whole * -(-chunk // size) + -(-rest // size)


def packetize(fmt: PacketFormat, data, *, phase: int, vc: int, flow: int, first_seq: int = 0,
              packet_flits: int | None = None, dest: int = 0, chunk: int | None = None) -> list[Packet]:
    """Cut a flow's flit payloads ``data`` into packets of ``packet_flits`` (default
    ``fmt.packet_flits``; the last packet may be shorter), numbered from ``first_seq`` (wrapping
    at ``2**seq_bits``); ``dest``: every packet's destination port (online routing);
    ``chunk`` (default None: one chunk): a packet also ends at the end of every ``chunk``
    flits, as the NPU's packetizer cuts an endpoint algorithm's chunks
    (:func:`stream_packets` counts them)."""
    size = fmt.packet_flits if packet_flits is None else _int_in(packet_flits, "packet_flits", 1, 1 << 16)
    if int(vc) not in {int(v) for v in VC}:
        raise FredError(f"vc must be one of {[int(v) for v in VC]}, got {vc!r}")
    fmt.pack_header(phase=phase, vc=vc, seq=first_seq, flow=flow, dest=dest)  # range checks
    data = list(data)
    if not data:
        raise FredError("a flow needs at least one flit to packetize")
    modulo = 1 << fmt.seq_bits
    step = len(data) if chunk is None else _int_in(chunk, "chunk", 1, 1 << 48)
    spans = [(start, min(start + size, c + step, len(data)))
             for c in range(0, len(data), step) for start in range(c, min(c + step, len(data)), size)]
    return [Packet(phase=phase, vc=int(vc), seq=(first_seq + n) % modulo, flow=flow,
                   flits=tuple(data[start:end]), dest=dest)
            for n, (start, end) in enumerate(spans)]


def link_words(fmt: PacketFormat, packet: Packet) -> list[tuple[int, int, int]]:
    """A packet on an RTL link: ``[(data, last, tag)]``, the header in every flit's tag and
    ``last`` on the final flit."""
    tag = fmt.pack_header(phase=packet.phase, vc=packet.vc, seq=packet.seq, flow=packet.flow,
                          dest=packet.dest)
    return [(d, int(n == len(packet.flits) - 1), tag) for n, d in enumerate(packet.flits)]


def depacketize(fmt: PacketFormat, words, *, first_seq: int = 0) -> dict[int, list]:
    """Inverse of :func:`link_words` over a stream of ``(data, last, tag)`` (packets of several
    flows may interleave only at packet boundaries): ``{flow: [data, ...]}`` in order. Raises
    :class:`FredError` if the header changes inside a packet, a packet is left unfinished, or a
    flow's sequence numbers are not consecutive from ``first_seq`` (a lost, duplicated or
    reordered packet)."""
    flows: dict[int, list] = {}
    next_seq: dict[int, int] = {}
    header = None
    modulo = 1 << fmt.seq_bits
    for data, last, tag in words:
        if header is None:
            header = fmt.unpack_header(tag)
            flow, seq = header["flow"], header["seq"]
            expected = next_seq.get(flow, first_seq % modulo)
            if seq != expected:
                raise FredError(f"flow {flow}: packet seq {seq} where {expected} was expected")
            next_seq[flow] = (seq + 1) % modulo
        elif tag != fmt.pack_header(**header):
            raise FredError(f"flow {header['flow']}: header changed inside packet seq {header['seq']}")
        flows.setdefault(header["flow"], []).append(data)
        if last:
            header = None
    if header is not None:
        raise FredError(f"flow {header['flow']}: packet seq {header['seq']} has no last flit")
    return flows
