"""The measured switch data as a contract: the schema of ``data/characterization.json``.

``fred characterize`` (``studies.characterization``) writes the file, the system model
(``sysmodel.switch_timing``) reads it; both validate it here, so producer and consumer cannot
drift apart. The schema is documented in ``docs/characterization-schema.md``.

Pure Python (stdlib only).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from hdl.contracts.errors import FredError

__all__ = ["SCHEMA_ID", "SWITCH_FIELDS", "OPTIONAL_SWITCH_FIELDS", "PACKET_SWITCH_FIELDS", "Characterization", "parse_characterization",
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
_POSITIVE = ("clock_mhz", "flit_bytes", "throughput_flits_per_cycle_per_port")
_NON_NEGATIVE = ("first_flit_latency_cycles", "phase_switch_cycles", "config_load_cycles")
#: The optional ``packet_switch`` block (``fred characterize --packet-switch``): the packet
#: switch's preemption figures, in cycles, each >= 0 (``docs/characterization-schema.md``).
PACKET_SWITCH_FIELDS = ("latency_cycles", "select_cycles", "preemption_latency_cycles",
                        "reconfiguration_cycles_busy", "reconfiguration_cycles_idle",
                        "preempted_delay_cycles", "resume_cycles")
#: Optional top-level lists written by ``fred characterize``.
_OPTIONAL_LISTS = ("measurements", "summaries", "cost", "not_measured")


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


def point_name(ports: int, middle: int, dtype: str) -> str:
    """Key of one measured design in ``switches`` (and the characterization cache): ``P12m3fp16``."""
    return f"P{ports}m{middle}{dtype}"


def parse_characterization(data, *, source: str = "<json>") -> Characterization:
    """Validate a decoded characterization document; errors name the bad field."""
    if not isinstance(data, dict):
        raise FredError(f"{source}: top level must be a JSON object")
    schema = data.get("schema")
    if schema != SCHEMA_ID:
        raise FredError(f"{source}: 'schema' must be {SCHEMA_ID!r}, got {schema!r}")
    switch = data.get("switch")
    if not isinstance(switch, dict):
        raise FredError(f"{source}: missing object 'switch' with the model's timing fields")
    values = _switch_fields(switch, source, "switch")
    source_point = (data.get("switch_source") or {}).get("point")
    if "select_copy_cycles" not in values and isinstance(source_point, dict) \
            and all(k in source_point for k in ("ports", "middle", "dtype")):
        values.update(_summary_select_copy(data, source_point, source))
    switches = data.get("switches", {})
    if not isinstance(switches, dict):
        raise FredError(f"{source}: 'switches' must be an object (point name -> point and switch block)")
    points = {}
    for name, block in switches.items():
        where = f"switches.{name}"
        if not isinstance(block, dict) or not isinstance(block.get("switch"), dict):
            raise FredError(f"{source}: '{where}' must be an object with a 'switch' block")
        point = block.get("point")
        if not (isinstance(point, dict) and all(isinstance(point.get(k), int) and not isinstance(point.get(k), bool)
                                                for k in ("ports", "middle"))
                and isinstance(point.get("dtype"), str)):
            raise FredError(f"{source}: '{where}.point' must give integer 'ports', 'middle' and a string 'dtype'")
        if name != point_name(point["ports"], point["middle"], point["dtype"]):
            # the key is how readers find a point: it must say what the block measured
            raise FredError(f"{source}: '{where}' holds point {point_name(point['ports'], point['middle'], point['dtype'])}; "
                            f"the key must be that name")
        fields = _switch_fields(block["switch"], source, f"{where}.switch")
        if "select_copy_cycles" not in fields:
            fields.update(_summary_select_copy(data, point, source))
        points[name] = {"point": dict(point), "switch": fields}
    generated = data.get("generated_by")
    if generated is not None:
        if not isinstance(generated, dict) or not all(
                isinstance(generated.get(key), str) and generated.get(key) for key in ("command", "date")):
            raise FredError(f"{source}: 'generated_by' must be an object with non-empty string "
                            f"'command' and 'date'")
    for key in _OPTIONAL_LISTS:
        if key in data and not isinstance(data[key], list):
            raise FredError(f"{source}: '{key}' must be a list, got {type(data[key]).__name__}")
    packet = None
    if "packet_switch" in data:
        block = data["packet_switch"]
        if not isinstance(block, dict):
            raise FredError(f"{source}: 'packet_switch' must be an object")
        packet = {}
        for name in PACKET_SWITCH_FIELDS:
            value = block.get(name)
            if not _finite(value) or value < 0:
                raise FredError(f"{source}: 'packet_switch.{name}' must be a finite number >= 0, got {value!r}")
            packet[name] = float(value)
    return Characterization(switch=values, source=source, document=data, switches=points,
                            packet_switch=packet)


def _switch_fields(switch: dict, source: str, where: str) -> dict:
    """The :data:`SWITCH_FIELDS` of one ``switch`` block, typed and range-checked."""
    values = {}
    for name, kind in SWITCH_FIELDS.items():
        if name not in switch:
            raise FredError(f"{source}: '{where}.{name}' is missing")
        value = switch[name]
        if not _finite(value):
            raise FredError(f"{source}: '{where}.{name}' must be a finite number, got {value!r}")
        if kind is int and value != int(value):
            raise FredError(f"{source}: '{where}.{name}' must be an integer, got {value!r}")
        values[name] = kind(value)
    for name, kind in OPTIONAL_SWITCH_FIELDS.items():
        if name in switch:
            value = switch[name]
            if not _finite(value) or value < 0:
                raise FredError(f"{source}: '{where}.{name}' must be a finite number >= 0, got {value!r}")
            values[name] = kind(value)
    for name in _POSITIVE:
        if values[name] <= 0:
            raise FredError(f"{source}: '{where}.{name}' must be > 0, got {values[name]}")
    for name in _NON_NEGATIVE:
        if values[name] < 0:
            raise FredError(f"{source}: '{where}.{name}' must be >= 0, got {values[name]}")
    return values


def _finite(value) -> bool:
    """A finite int or float (not a bool)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _summary_select_copy(data: dict, point: dict, source: str) -> dict:
    """``{"select_copy_cycles": x}`` from the ``summaries`` entry of ``point`` (files written
    before the switch blocks carried it), or ``{}`` when it has none (a run without a select);
    a value that is there but not a finite number >= 0 is an error, never skipped."""
    for summary in data.get("summaries") or []:
        if isinstance(summary, dict) and all(summary.get(k) == point[k] for k in ("ports", "middle", "dtype")):
            value = summary.get("select_copy_cycles")
            if value is None:
                return {}
            if not _finite(value) or value < 0:
                raise FredError(f"{source}: the summary of {point_name(point['ports'], point['middle'], point['dtype'])} "
                                f"has select_copy_cycles {value!r}; expected a finite number >= 0")
            return {"select_copy_cycles": float(value)}
    return {}


def read_characterization(path: str | Path) -> Characterization:
    """Read and validate the file at ``path`` (a missing or malformed file is an error)."""
    path = Path(path)
    if not path.is_file():
        raise FredError(f"characterization file {path} does not exist")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise FredError(f"{path}: not valid JSON ({exc})") from None
    return parse_characterization(data, source=str(path))
