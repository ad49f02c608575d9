"""FRED switch timing used by the system model: documented defaults, or measured values.

The characterization work (RTL under Verilator) writes ``data/characterization.json`` in the
schema of ``docs/characterization-schema.md``; :func:`load_switch_timing` reads and validates
it when present and otherwise returns :data:`DEFAULT_SWITCH_TIMING`. The model uses

* ``first_flit_latency_cycles``: cycles from a head flit entering a switch port to it leaving
  (one traversal of one logical switch, L1 or L2), added once per switch on a path;
* ``throughput_flits_per_cycle_per_port``: sustained flits/cycle/port under full load (1.0 =
  link rate). FRED needs no internal speed-up, so a port's bandwidth through the switch is the
  attached link's bandwidth times this value (capped at 1);
* ``phase_switch_cycles``: cycles to switch from one stored configuration (phase) to the next;
* ``config_load_cycles``: cycles to load one phase's configuration into the switch (paid once
  per collective set, before its first phase);
* ``clock_mhz`` and ``flit_bytes`` convert cycles to seconds and flits to bytes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from hdl.base.characterization import SCHEMA_ID, read_characterization
from hdl.base.characterization import parse_characterization as hdl_parse_characterization

__all__ = ["SwitchTiming", "DEFAULT_SWITCH_TIMING", "SCHEMA_ID", "load_switch_timing",
           "default_characterization_path"]


@dataclass(frozen=True)
class SwitchTiming:
    """Timing of one logical FRED switch (see the module docstring for each field).

    ``source`` says where the numbers came from (``"defaults"`` or the JSON path).
    """

    clock_mhz: float = 1000.0
    flit_bytes: int = 512
    first_flit_latency_cycles: float = 12.0
    throughput_flits_per_cycle_per_port: float = 1.0
    phase_switch_cycles: float = 8.0
    config_load_cycles: float = 16.0
    source: str = "defaults"

    @property
    def cycle_s(self) -> float:
        return 1e-6 / self.clock_mhz

    @property
    def latency_s(self) -> float:
        """Per-switch first-flit latency in seconds."""
        return self.first_flit_latency_cycles * self.cycle_s

    @property
    def phase_switch_s(self) -> float:
        return self.phase_switch_cycles * self.cycle_s

    @property
    def config_load_s(self) -> float:
        return self.config_load_cycles * self.cycle_s

    @property
    def throughput_fraction(self) -> float:
        """Fraction of the attached link's rate a switch port sustains (<= 1)."""
        return min(1.0, self.throughput_flits_per_cycle_per_port)

    def to_dict(self) -> dict:
        return asdict(self)


#: Defaults until the RTL is characterized. Reasoning: 1 GHz is a conservative 15 nm switch
#: clock; 512 B flits are the paper's; a Fred_3(16)-sized switch has 2*log2(16)-1 = 7
#: microswitch stages plus an input skid buffer, adder pipeline and output register, so about
#: 12 cycles first-flit latency; the switch runs at link rate (paper: no internal speed-up);
#: swapping the active stored configuration and loading one take a few pipeline drains.
DEFAULT_SWITCH_TIMING = SwitchTiming()

def default_characterization_path() -> Path:
    """``data/characterization.json`` at the repository root (next to ``sysmodel/``)."""
    return Path(__file__).resolve().parent.parent / "data" / "characterization.json"


def load_switch_timing(path: str | Path | None = None) -> SwitchTiming:
    """Read switch timing from ``path`` (default ``data/characterization.json``).

    With ``path=None`` and no file present, returns :data:`DEFAULT_SWITCH_TIMING`. A file that
    exists but is malformed raises :class:`FredError` naming the bad field -- a broken
    characterization must never be silently replaced by defaults.
    """
    explicit = path is not None
    path = Path(path) if explicit else default_characterization_path()
    if not path.exists() and not explicit:
        return DEFAULT_SWITCH_TIMING
    return _timing(read_characterization(path))


def parse_characterization(data, *, source: str = "<json>") -> SwitchTiming:
    """Validate a decoded characterization document and return its :class:`SwitchTiming`."""
    return _timing(hdl_parse_characterization(data, source=source))


def _timing(characterization) -> SwitchTiming:
    return SwitchTiming(**characterization.switch, source=characterization.source)
