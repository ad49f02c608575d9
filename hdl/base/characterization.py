"""The measured switch data as a contract: the schema of ``data/characterization.json``.

``fred characterize`` (``cocotb_tests.characterize``) writes the file, the system model
(``sysmodel.switch_timing``) reads it; both validate it here, so producer and consumer cannot
drift apart. The schema is documented in ``docs/characterization-schema.md``.

Pure Python (stdlib only).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from hdl.base.errors import FredError

__all__ = ["SCHEMA_ID", "SWITCH_FIELDS", "Characterization", "parse_characterization",
           "read_characterization"]

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
_POSITIVE = ("clock_mhz", "flit_bytes", "throughput_flits_per_cycle_per_port")
_NON_NEGATIVE = ("first_flit_latency_cycles", "phase_switch_cycles", "config_load_cycles")
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

    @property
    def point(self) -> dict | None:
        """The measured design the ``switch`` block was taken from ({ports, middle, dtype}), if
        the file says."""
        return (self.document.get("switch_source") or {}).get("point")

    @property
    def generated_by(self) -> dict | None:
        return self.document.get("generated_by")


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
    values = {}
    for name, kind in SWITCH_FIELDS.items():
        if name not in switch:
            raise FredError(f"{source}: 'switch.{name}' is missing")
        value = switch[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise FredError(f"{source}: 'switch.{name}' must be a finite number, got {value!r}")
        if kind is int and value != int(value):
            raise FredError(f"{source}: 'switch.{name}' must be an integer, got {value!r}")
        values[name] = kind(value)
    for name in _POSITIVE:
        if values[name] <= 0:
            raise FredError(f"{source}: 'switch.{name}' must be > 0, got {values[name]}")
    for name in _NON_NEGATIVE:
        if values[name] < 0:
            raise FredError(f"{source}: 'switch.{name}' must be >= 0, got {values[name]}")
    generated = data.get("generated_by")
    if generated is not None:
        if not isinstance(generated, dict) or not all(
                isinstance(generated.get(key), str) and generated.get(key) for key in ("command", "date")):
            raise FredError(f"{source}: 'generated_by' must be an object with non-empty string "
                            f"'command' and 'date'")
    for key in _OPTIONAL_LISTS:
        if key in data and not isinstance(data[key], list):
            raise FredError(f"{source}: '{key}' must be a list, got {type(data[key]).__name__}")
    return Characterization(switch=values, source=source, document=data)


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
