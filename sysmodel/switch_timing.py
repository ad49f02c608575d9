"""FRED switch timing used by the system model: measured values, read from a characterization.

``fred characterize`` (RTL under Verilator) writes ``data/characterization.json`` in the schema
of ``docs/characterization-schema.md`` (validated by :mod:`hdl.contracts.characterization`). That
file ships with the package as ``sysmodel/data/characterization.json`` (``sysmodel/data`` is a
link to ``data/``, so the checked-in file is the shipped one). :func:`load_switch_timing` reads
it, or another file the caller names; there is no fallback: a characterization that is
expected but missing is an error, and so is a malformed one. The model uses

* ``first_flit_latency_cycles``: cycles from a head flit entering a switch port to it leaving
  (one traversal of one logical switch, L1 or L2), added once per switch on a path;
* ``throughput_flits_per_cycle_per_port``: sustained flits/cycle/port under full load (1.0 =
  link rate). FRED needs no internal speed-up, so a port's bandwidth through the switch is the
  attached link's bandwidth times this value (capped at 1);
* ``phase_switch_cycles``: cycles to switch from one stored configuration (phase) to the next,
  paid by every phase of an in-switch collective each time it runs;
* ``config_load_cycles``: cycles to load one phase's configuration into a switch's control
  unit; configurations are precomputed and stored, so each is loaded once, in the first
  training iteration (``training.iterations`` in the platform);
* ``flit_bytes``: transfers through FRED switches move whole flits (each chunk is rounded up);
* ``clock_mhz`` converts cycles to seconds;
* the optional ``packet_switch`` block's ``reconfiguration_cycles_busy -
  reconfiguration_cycles_idle`` at this switch's design (its ``preemption_points``; the block's
  reference point when the design was not measured): what a preemption costs the preempting
  transfer beyond the select it pays at an idle switch too, i.e. the drain of the lower
  phase's packets in flight (``preemption_cycles``; the engine's MP > PP > DP priority on FRED,
  :mod:`sysmodel.preemption`); its ``reconfiguration_cycles_idle - select_cycles`` and ``latency_cycles`` (beyond the
  circuit switch's at the same point): the header-driven select's control cycles and the input
  VC buffer's latency, used when phases are selected by headers (``[fred] phase_select``).

A platform that names the chiplet each wafer level is built from (``[fred.chiplets]`` in
``configs/paper.toml``) gets one :class:`SwitchTiming` per level from that design's measured
point (:func:`load_chiplet_timings`); otherwise the file's ``switch`` block times every switch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from hdl.contracts.characterization import SCHEMA_ID, read_characterization
from hdl.contracts.characterization import parse_characterization as hdl_parse_characterization
from hdl.contracts.errors import FredError

__all__ = ["SwitchTiming", "SCHEMA_ID", "load_switch_timing", "load_chiplet_timings", "chiplet_name",
           "parse_characterization", "shipped_characterization_path"]

#: Where the shipped characterization sits inside the ``sysmodel`` package.
SHIPPED_RELATIVE_PATH = ("data", "characterization.json")


@dataclass(frozen=True, kw_only=True)
class SwitchTiming:
    """Timing of one logical FRED switch (see the module docstring for each field).

    ``source`` says where the numbers came from (a characterization file's path, or what the
    caller that built them says); ``shipped`` is true for the characterization shipped with
    the package; ``generated_by`` is the file's record of the command and date that measured
    it ("" when it has none)."""

    clock_mhz: float
    flit_bytes: int
    first_flit_latency_cycles: float
    throughput_flits_per_cycle_per_port: float
    #: None: not given, because nothing that runs on this switch stores a phase (a design
    #: without in-switch collectives, :func:`studies.cost.design_switch_timing`); reading a
    #: figure made from one is then an error (:meth:`_phase_figure`)
    phase_switch_cycles: float | None
    config_load_cycles: float | None
    source: str
    shipped: bool = False
    generated_by: str = ""
    #: the measured design these figures are of, e.g. ``Fred_3(12) fp16`` ("" for the file's
    #: ``switch`` block, whose design ``switch_source`` names)
    design: str = ""
    #: cycles of a phase select on an idle switch (the configuration copy); None when the
    #: characterization does not say (then a select costs ``phase_switch_cycles``)
    select_copy_cycles: float | None = None
    #: cycles a preemption at this switch costs the preempting (higher-priority) transfer beyond
    #: what it pays at an idle switch (whose select its time alone already counts): the drain
    #: of the lower phase's packets in flight, measured as the packet switch's
    #: ``reconfiguration_cycles_busy - reconfiguration_cycles_idle`` on this design (0 when the
    #: file has no ``packet_switch`` block)
    preemption_cycles: float = 0.0
    #: the design ``preemption_cycles`` was measured on (``Fred_3(8) int32``; "" without a
    #: ``packet_switch`` block); another design than ``design`` when this one's preemption was
    #: not measured (the block's reference point stands in for it)
    preemption_design: str = ""
    #: flits per data packet of that measurement (a packet in flight on a slower link drains
    #: at that link's rate, :func:`sysmodel.preemption.preemption_costs`)
    preemption_packet_flits: int = 0
    #: packet switch (header-selected phases): cycles its control unit adds to a select on an
    #: idle switch beyond the configuration copy (the DRAIN check and SETTLE cycle), and the
    #: cycles its input VC buffer adds to the first-flit latency; both measured by ``fred
    #: characterize --packet-switch`` (``reconfiguration_cycles_idle - select_cycles``, and its
    #: ``latency_cycles`` minus the circuit switch's at the same point). None: not measured.
    header_select_extra_cycles: float | None = None
    input_buffer_cycles: float | None = None
    #: packet switch with online routing: cycles the first packet of the default index waits
    #: at an idle switch for its select, and each further path set up at once (one per cycle);
    #: measured by ``fred characterize --packet-switch`` (``online_select_cycles``,
    #: ``online_path_setup_cycles``). None: not measured (online routing then costs nothing).
    online_select_cycles: float | None = None
    online_path_setup_cycles: float | None = None

    @property
    def cycle_s(self) -> float:
        return 1e-6 / self.clock_mhz

    @property
    def latency_s(self) -> float:
        """Per-switch first-flit latency in seconds."""
        return self.first_flit_latency_cycles * self.cycle_s

    @property
    def phase_switch_s(self) -> float:
        return self._phase_figure("phase_switch_cycles") * self.cycle_s

    @property
    def phase_select_s(self) -> float:
        """Seconds one phase of an in-switch collective pays for its select: the copy on an idle
        switch (the previous phase's drain is that phase's own latency, counted with it), or
        the whole measured phase switch when the characterization has no copy figure."""
        return self._select_copy_cycles() * self.cycle_s

    @property
    def header_select_s(self) -> float:
        """Seconds a packet switch's header-driven select costs the first packet of a phase at
        an idle switch: the configuration copy plus the control unit's measured cycles."""
        return (self._select_copy_cycles() + self._packet_figure("header_select_extra_cycles")) * self.cycle_s

    def _select_copy_cycles(self) -> float:
        """A select's configuration copy: ``select_copy_cycles``, else the whole phase switch."""
        return self._phase_figure("phase_switch_cycles") if self.select_copy_cycles is None else self.select_copy_cycles

    def _phase_figure(self, name: str) -> float:
        value = getattr(self, name)
        if value is None:
            raise FredError(f"{self.source}: no {name}: this switch timing leaves its phase figures "
                            "unset (its switches store no phase), but a phase was timed on it")
        return value

    @property
    def packet_latency_s(self) -> float:
        """First-flit latency of the packet switch: the datapath's plus its input VC buffer's."""
        return (self.first_flit_latency_cycles + self._packet_figure("input_buffer_cycles")) * self.cycle_s

    def _packet_figure(self, name: str) -> float:
        value = getattr(self, name)
        if value is None:
            raise FredError(f"{self.source} has no packet switch figures ({name}): header-selected "
                            f"phases ([fred] phase_select = \"header\") need them; measure them "
                            f"with `fred characterize --packet-switch`")
        return value

    @property
    def config_load_s(self) -> float:
        """Seconds to load one phase's configuration into a switch."""
        return self._phase_figure("config_load_cycles") * self.cycle_s

    @property
    def throughput_fraction(self) -> float:
        """Fraction of the attached link's rate a switch port sustains (<= 1)."""
        return min(1.0, self.throughput_flits_per_cycle_per_port)

    def to_dict(self) -> dict:
        return asdict(self)


def shipped_characterization_path() -> Path:
    """The characterization shipped with the package (``sysmodel/data/characterization.json``;
    in a source tree, the checked-in ``data/characterization.json`` through the link)."""
    return Path(str(resources.files("sysmodel").joinpath(*SHIPPED_RELATIVE_PATH))).resolve()


def load_switch_timing(path: str | Path | None = None) -> SwitchTiming:
    """Switch timing from the characterization at ``path`` (default: the shipped one).

    Raises :class:`FredError` when the file is missing -- the shipped one included: an
    installation without it is broken, never silently replaced by assumed timings -- or
    malformed (naming the bad field)."""
    characterization, shipped = _read(path)
    return _timing(characterization, shipped=shipped)


def _read(path):
    """(validated characterization, whether it is the shipped one) of ``path`` or the shipped file."""
    if path is not None:
        return read_characterization(path), False
    shipped = shipped_characterization_path()
    if not shipped.is_file():
        raise FredError(f"the switch characterization shipped with the package is missing (expected "
                        f"at {shipped}): this installation of fred-wafer is incomplete; reinstall "
                        f"it, or name a characterization explicitly (fred: --characterization PATH)")
    return read_characterization(shipped), True


def load_chiplet_timings(chiplets: dict, path: str | Path | None = None, *,
                         platform: str = "the platform") -> dict[str, SwitchTiming]:
    """``{level: SwitchTiming}`` for ``chiplets`` (``{level: {"ports", "middle", "dtype"}}``,
    the design each wafer level is built from), each from the characterization's measured
    point of that design (``switches`` in ``docs/characterization-schema.md``); ``path`` as in
    :func:`load_switch_timing`. A characterization without one of the points is an error
    naming the level, the design and the command that measures it."""
    characterization, shipped = _read(path)
    out = {}
    for level, point in chiplets.items():
        design = chiplet_name(point)
        values = characterization.switch_at(**point)
        if values is None:
            have = ", ".join(sorted(characterization.switches)) or "none"
            raise FredError(
                f"{characterization.source} has no measured {design} (the {level.upper()} chiplet of "
                f"{platform}; measured points: {have}). Measure it with `fred characterize --ports "
                f"{point['ports']} --middle {point['middle']} --dtypes {point['dtype']} --chiplets '' "
                f"--cost none --merge`, or name a characterization that has it (--characterization)")
        out[level] = _timing(characterization, shipped=shipped, values=values, design=design, point=point)
    return out


def chiplet_name(point: dict) -> str:
    """``Fred_3(12) fp16`` for ``{"ports": 12, "middle": 3, "dtype": "fp16"}``."""
    return f"Fred_{point['middle']}({point['ports']}) {point['dtype']}"


def parse_characterization(data, *, source: str = "<json>") -> SwitchTiming:
    """Validate a decoded characterization document and return its :class:`SwitchTiming`."""
    return _timing(hdl_parse_characterization(data, source=source), shipped=False)


def _timing(characterization, *, shipped: bool, values: dict | None = None, design: str = "",
            point: dict | None = None) -> SwitchTiming:
    made = characterization.generated_by or {}
    generated_by = f"{made['command']} ({made['date']})" if made else ""
    packet = characterization.packet_switch or {}
    return SwitchTiming(**(characterization.switch if values is None else values),
                        source=characterization.source, shipped=shipped,
                        generated_by=generated_by, design=design,
                        **_preemption(characterization, point if values is not None else characterization.point),
                        **_packet_switch_figures(characterization, packet))


def _preemption(characterization, point: dict | None) -> dict:
    """``preemption_cycles`` (the drain: busy minus idle reconfiguration), ``preemption_design``
    and ``preemption_packet_flits`` of the design at ``point`` ({ports, middle, dtype}) from
    the ``packet_switch`` block: its own measurement when the block has one, else the block's
    reference point's; nothing without a block."""
    if characterization.packet_switch is None:
        return {}
    figures, measured = None, point
    if point is not None:
        figures = characterization.preemption_at(**{k: point[k] for k in ("ports", "middle", "dtype")})
    if figures is None:
        figures, measured = characterization.packet_switch, characterization.packet_switch_point
    packet_point = (characterization.document.get("packet_switch") or {}).get("point") or {}
    return {"preemption_cycles": figures["reconfiguration_cycles_busy"] - figures["reconfiguration_cycles_idle"],
            "preemption_design": chiplet_name(measured) if measured else "the packet_switch block's point",
            "preemption_packet_flits": int(packet_point.get("packet_flits", 0))}


def _packet_switch_figures(characterization, packet: dict) -> dict:
    """``header_select_extra_cycles`` and ``input_buffer_cycles`` (:class:`SwitchTiming`) from
    the ``packet_switch`` block: the idle select beyond the copy, and the packet switch's
    latency beyond the circuit switch's measured at the same point (None when the file has no
    block, or not that point)."""
    if not packet or "reconfiguration_cycles_idle" not in packet:
        return {}
    out = {"header_select_extra_cycles": packet["reconfiguration_cycles_idle"] - packet["select_cycles"]}
    point = characterization.packet_switch_point
    circuit = characterization.switch_at(**point) if point else None
    if circuit is not None:
        out["input_buffer_cycles"] = packet["latency_cycles"] - circuit["first_flit_latency_cycles"]
    for name in ("online_select_cycles", "online_path_setup_cycles"):
        if name in packet:
            out[name] = float(packet[name])
    return out
