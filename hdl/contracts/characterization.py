"""The measured switch data as a contract: the schema of ``data/characterization.json``.

``fred characterize`` (``studies.characterization``) writes the file, the system model
(``sysmodel.switch_timing``) reads it; both validate it here, so producer and consumer cannot
drift apart. The schema is documented in ``docs/characterization-schema.md``.

Pure Python; the schema is pydantic models (:mod:`hdl.contracts.input_schema`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from hdl.contracts.errors import FredError
from hdl.contracts.input_schema import (InputModel, NonNegativeNumber, PositiveInt, PositiveNumber,
                                   validate_input)
from hdl.contracts.text_file import read_text_file

__all__ = ["SCHEMA_ID", "SWITCH_FIELDS", "OPTIONAL_SWITCH_FIELDS", "PACKET_SWITCH_FIELDS", "PREEMPTION_POINT_FIELDS",
           "Characterization", "parse_characterization",
           "read_characterization", "point_name"]

SCHEMA_ID = "fred-characterization/1"

#: The ``switch`` block: the timing of one logical switch the system model composes, with the
#: type each field must have.
SWITCH_FIELDS = {
    "clock_mhz": float,
    "flit_bytes": int,
    "first_flit_latency_cycles": float,
    "throughput_flits_per_cycle_per_port": float,
    "phase_switch_cycles": float,
    "config_load_cycles": float,
}
#: Optional ``switch`` block fields: ``select_copy_cycles``, the cycles a phase select takes on
#: an idle switch (the configuration copy; ``phase_switch_cycles`` adds the drain of a running
#: phase). Files written before it existed carry it only in ``summaries``; the reader takes it
#: from there (:func:`parse_characterization`).
OPTIONAL_SWITCH_FIELDS = {"select_copy_cycles": float}
#: The optional ``packet_switch`` block (``fred characterize --packet-switch``): the packet
#: switch's preemption figures, in cycles, each >= 0 (``docs/characterization-schema.md``).
PACKET_SWITCH_FIELDS = ("latency_cycles", "select_cycles", "preemption_latency_cycles",
                        "reconfiguration_cycles_busy", "reconfiguration_cycles_idle",
                        "preempted_delay_cycles", "resume_cycles")
#: ... and its online-routing figures (``studies/characterization/online_select.py``), absent
#: from files written before they were measured.
OPTIONAL_PACKET_SWITCH_FIELDS = ("online_select_cycles", "online_path_setup_cycles")
#: ... and the preemption figures measured on further designs (``preemption_points``, keyed by
#: :func:`point_name`; the switch sizes and dtypes the fabrics and the paper's platform build):
#: the fields of each point's figures the model reads (``docs/characterization-schema.md``).
PREEMPTION_POINT_FIELDS = ("latency_cycles", "select_cycles", "reconfiguration_cycles_busy",
                           "reconfiguration_cycles_idle")


@dataclass(frozen=True)
class Characterization:
    """A validated characterization document.

    Members: ``switch`` (the :data:`SWITCH_FIELDS`, typed), ``source`` (where it was read from),
    ``document`` (the whole decoded JSON, for the optional detail: ``switch_source``,
    ``summaries``, ``measurements``, ``cost``...).
    """

    switch: dict
    source: str
    document: dict = field(repr=False)
    #: ``{point name: {"point": {ports, middle, dtype}, "switch": typed SWITCH_FIELDS}}``: the
    #: timing of every measured design (optional ``switches`` object; empty when the file has
    #: none). The system model takes each wafer level's timing from the chiplet that builds it.
    switches: dict = field(default_factory=dict, repr=False)
    #: The :data:`PACKET_SWITCH_FIELDS` as floats, or None when the file has no
    #: ``packet_switch`` block.
    packet_switch: dict | None = field(default=None, repr=False)
    #: ``{ports, middle, dtype}`` of the design the ``packet_switch`` block measured (its
    #: ``point``), or None: figures relative to the circuit switch's at that point need it.
    packet_switch_point: dict | None = field(default=None, repr=False)
    #: ``{point name: {"point": {ports, middle, dtype}, **PREEMPTION_POINT_FIELDS}}``: the
    #: ``packet_switch`` block's ``preemption_points`` (empty when it has none).
    preemption_points: dict = field(default_factory=dict, repr=False)

    @property
    def point(self) -> dict | None:
        """The measured design the ``switch`` block was taken from ({ports, middle, dtype}), if
        the file says."""
        return (self.document.get("switch_source") or {}).get("point")

    @property
    def generated_by(self) -> dict | None:
        return self.document.get("generated_by")

    def switch_at(self, *, ports: int, middle: int, dtype: str) -> dict | None:
        """The typed :data:`SWITCH_FIELDS` measured on Fred_``middle``(``ports``) ``dtype``, or
        None if the file has no such point."""
        entry = self.switches.get(point_name(ports, middle, dtype))
        return None if entry is None else entry["switch"]

    def preemption_at(self, *, ports: int, middle: int, dtype: str) -> dict | None:
        """The :data:`PREEMPTION_POINT_FIELDS` measured on Fred_``middle``(``ports``) ``dtype``
        (the ``packet_switch`` block's reference point or one of its ``preemption_points``), or
        None if neither is that design."""
        name = point_name(ports, middle, dtype)
        entry = self.preemption_points.get(name)
        if entry is not None:
            return {k: entry[k] for k in PREEMPTION_POINT_FIELDS}
        point = self.packet_switch_point
        if self.packet_switch is not None and point is not None and \
                point_name(point["ports"], point["middle"], point["dtype"]) == name:
            return {k: self.packet_switch[k] for k in PREEMPTION_POINT_FIELDS}
        return None


def point_name(ports: int, middle: int, dtype: str) -> str:
    """Key of one measured design in ``switches`` (and the characterization cache): ``P12m3fp16``."""
    return f"P{ports}m{middle}{dtype}"


# -- the schema (pydantic; docs/characterization-schema.md) -------------------------------------
class _Switch(InputModel):
    """A ``switch`` block: :data:`SWITCH_FIELDS` and :data:`OPTIONAL_SWITCH_FIELDS`."""

    clock_mhz: PositiveNumber
    flit_bytes: PositiveInt
    first_flit_latency_cycles: NonNegativeNumber
    throughput_flits_per_cycle_per_port: PositiveNumber
    phase_switch_cycles: NonNegativeNumber
    config_load_cycles: NonNegativeNumber
    select_copy_cycles: NonNegativeNumber | None = None

    def values(self) -> dict:
        """The typed fields, in :data:`SWITCH_FIELDS` order (the optional ones when given)."""
        out = {name: getattr(self, name) for name in SWITCH_FIELDS}
        out.update({name: getattr(self, name) for name in OPTIONAL_SWITCH_FIELDS
                    if getattr(self, name) is not None})
        return out


class _Point(InputModel):
    ports: int
    middle: int
    dtype: str


class _PointBlock(InputModel):
    point: _Point
    switch: _Switch


class _GeneratedBy(InputModel):
    model_config = ConfigDict(extra="allow")     # tools, seconds, jobs, seed, runs: free-form
    command: Annotated[str, Field(min_length=1)]
    date: Annotated[str, Field(min_length=1)]


class _MeasuredPoint(_Point):
    model_config = ConfigDict(extra="allow")     # the traffic it was measured with: not checked


class _PreemptionPoint(InputModel):
    model_config = ConfigDict(extra="allow")     # the other figures of measure_preemption
    point: _MeasuredPoint
    latency_cycles: NonNegativeNumber
    select_cycles: NonNegativeNumber
    reconfiguration_cycles_busy: NonNegativeNumber
    reconfiguration_cycles_idle: NonNegativeNumber


class _PacketSwitch(InputModel):
    model_config = ConfigDict(extra="allow")     # point, mp_output_cycles, ...: not checked
    latency_cycles: NonNegativeNumber
    select_cycles: NonNegativeNumber
    preemption_latency_cycles: NonNegativeNumber
    reconfiguration_cycles_busy: NonNegativeNumber
    reconfiguration_cycles_idle: NonNegativeNumber
    preempted_delay_cycles: NonNegativeNumber
    resume_cycles: NonNegativeNumber
    online_select_cycles: NonNegativeNumber | None = None
    online_path_setup_cycles: NonNegativeNumber | None = None
    preemption_points: dict[str, _PreemptionPoint] = {}


class _Document(InputModel):
    #: keys besides these are allowed and ignored (measurement detail, provenance)
    model_config = ConfigDict(extra="allow")
    schema_: Literal[SCHEMA_ID] = Field(alias="schema")
    switch: _Switch
    switches: dict[str, _PointBlock] = {}
    generated_by: _GeneratedBy | None = None
    measurements: list | None = None
    summaries: list | None = None
    cost: list | None = None
    not_measured: list | None = None
    packet_switch: _PacketSwitch | None = None


_NON_NEGATIVE_NUMBER = TypeAdapter(NonNegativeNumber)


def parse_characterization(data, *, source: str = "<json>") -> Characterization:
    """Validate a decoded characterization document; errors name the bad field."""
    doc = validate_input(_Document, data, source, style="json")
    values = doc.switch.values()
    source_point = (data.get("switch_source") or {}).get("point")
    if "select_copy_cycles" not in values and isinstance(source_point, dict) \
            and all(k in source_point for k in ("ports", "middle", "dtype")):
        values.update(_summary_select_copy(data, source_point, source))
    points = {}
    for name, block in doc.switches.items():
        point = block.point
        if name != point_name(point.ports, point.middle, point.dtype):
            # the key is how readers find a point: it must say what the block measured
            raise FredError(f"{source}: 'switches.{name}' holds point "
                            f"{point_name(point.ports, point.middle, point.dtype)}; the key must be that name")
        fields = block.switch.values()
        if "select_copy_cycles" not in fields:
            fields.update(_summary_select_copy(data, point.model_dump(), source))
        points[name] = {"point": dict(data["switches"][name]["point"]), "switch": fields}
    packet, packet_point = None, None
    if doc.packet_switch is not None:
        packet = {name: getattr(doc.packet_switch, name) for name in PACKET_SWITCH_FIELDS}
        packet.update({name: getattr(doc.packet_switch, name) for name in OPTIONAL_PACKET_SWITCH_FIELDS
                       if getattr(doc.packet_switch, name) is not None})
        point = data["packet_switch"].get("point")
        if isinstance(point, dict) and all(k in point for k in ("ports", "middle", "dtype")):
            packet_point = {k: point[k] for k in ("ports", "middle", "dtype")}
    return Characterization(switch=values, source=source, document=data, switches=points,
                            packet_switch=packet, packet_switch_point=packet_point,
                            preemption_points=_preemption_points(doc.packet_switch, source))


def _preemption_points(block, source: str) -> dict:
    """The ``packet_switch`` block's ``preemption_points`` as plain dicts: each key must name
    its point, and a busy switch's reconfiguration cannot be shorter than an idle one's."""
    out = {}
    for name, entry in ({} if block is None else block.preemption_points).items():
        point = entry.point
        if name != point_name(point.ports, point.middle, point.dtype):
            raise FredError(f"{source}: 'packet_switch.preemption_points.{name}' holds point "
                            f"{point_name(point.ports, point.middle, point.dtype)}; the key must be that name")
        if entry.reconfiguration_cycles_busy < entry.reconfiguration_cycles_idle:
            raise FredError(f"{source}: 'packet_switch.preemption_points.{name}': "
                            f"reconfiguration_cycles_busy ({entry.reconfiguration_cycles_busy}) is "
                            f"below reconfiguration_cycles_idle ({entry.reconfiguration_cycles_idle})")
        out[name] = {"point": {"ports": point.ports, "middle": point.middle, "dtype": point.dtype},
                     **{k: float(getattr(entry, k)) for k in PREEMPTION_POINT_FIELDS}}
    return out


def _summary_select_copy(data: dict, point: dict, source: str) -> dict:
    """``{"select_copy_cycles": x}`` from the ``summaries`` entry of ``point`` (files written
    before the switch blocks carried it), or ``{}`` when it has none (a run without a select);
    a value that is there but not a finite number >= 0 is an error, never skipped."""
    for summary in data.get("summaries") or []:
        if isinstance(summary, dict) and all(summary.get(k) == point[k] for k in ("ports", "middle", "dtype")):
            value = summary.get("select_copy_cycles")
            if value is None:
                return {}
            try:
                return {"select_copy_cycles": _NON_NEGATIVE_NUMBER.validate_python(value)}
            except ValidationError:
                raise FredError(f"{source}: the summary of {point_name(point['ports'], point['middle'], point['dtype'])} "
                                f"has select_copy_cycles {value!r}; expected a finite number >= 0") from None
    return {}


def read_characterization(path: str | Path) -> Characterization:
    """Read and validate the file at ``path`` (a missing or malformed file is an error)."""
    path = Path(path)
    if not path.is_file():
        raise FredError(f"characterization file {path} does not exist")
    try:
        data = json.loads(read_text_file(path, "characterization file"))
    except json.JSONDecodeError as exc:
        raise FredError(f"{path}: not valid JSON ({exc})") from None
    return parse_characterization(data, source=str(path))
