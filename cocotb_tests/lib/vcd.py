"""Transfer timestamps read back from a VCD dump (``WAVES=1``), parsed with ``vcdvcd``.

Benches measure with their own monitors; :class:`VcdStreams` recomputes the same transfer times
independently from the waveform so the two can be cross-checked (a mismatch means the monitor or
the dump is wrong). pyvcd's reader fails on Verilator output, hence vcdvcd.

A transfer on stream ``prefix`` happens at a rising edge of ``clk`` when ``prefix__valid`` and
``prefix__ready`` were both 1 just before the edge.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["VcdStreams"]

_UNIT_NS = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0, "ps": 1e-3, "fs": 1e-6}


class VcdStreams:
    """Parameters:
        path: the VCD file.
        clock: clock signal name (``clk``).
    """

    def __init__(self, path: Path | str, *, clock: str = "clk"):
        from vcdvcd import VCDVCD
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no VCD at {self.path} (was the bench built with WAVES=1?)")
        self.vcd = VCDVCD(str(self.path), store_tvs=True)
        scale = self.vcd.timescale
        self.ns_per_unit = float(scale["magnitude"]) * _UNIT_NS[scale["unit"]]
        self._clock = self.signal(clock)
        self.rising_edges = [time for (time, value), (_, previous)
                             in zip(self._clock.tv[1:], self._clock.tv[:-1])
                             if value == "1" and previous == "0"]

    def signal(self, name: str):
        """The signal whose hierarchical name ends in ``.name`` (the shallowest one)."""
        def base(ref):   # vectors are referenced as "TOP.x[31:0]"
            return ref.split("[", 1)[0].rstrip()
        matches = [ref for ref in self.vcd.references_to_ids
                   if base(ref) == name or base(ref).endswith("." + name)]
        if not matches:
            raise KeyError(f"{self.path}: no signal named {name!r}")
        return self.vcd[min(matches, key=lambda ref: ref.count("."))]

    def _value(self, signal, time: int) -> int:
        value = signal[time]
        if value is None or any(c in value for c in "xXzZ"):
            return 0
        return int(value, 2)

    def transfers(self, prefix: str) -> list[float]:
        """Times (ns) of the rising edges at which stream ``prefix`` transferred."""
        valid, ready = self.signal(f"{prefix}__valid"), self.signal(f"{prefix}__ready")
        return [edge * self.ns_per_unit for edge in self.rising_edges
                if self._value(valid, edge - 1) and self._value(ready, edge - 1)]

    def payloads(self, prefix: str) -> list[int]:
        """Payloads of the transfers of stream ``prefix``, in order."""
        valid, ready = self.signal(f"{prefix}__valid"), self.signal(f"{prefix}__ready")
        payload = self.signal(f"{prefix}__payload")
        return [self._value(payload, edge - 1) for edge in self.rising_edges
                if self._value(valid, edge - 1) and self._value(ready, edge - 1)]
