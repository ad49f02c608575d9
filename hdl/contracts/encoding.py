"""Configuration of a Fred_m(P) switch: microswitch modes, their bit encoding and order.

This module is the contract between the configuration compiler and the switch RTL; it is
documented for humans in ``docs/configuration.md``. Everything here is pure Python.

Structure (P a power of two >= 2, r = P/2, m >= 2 middle subnetworks; other P below):

* Fred_m(2) is one RD microswitch (:class:`RDMode`).
* Fred_m(P), P >= 4, is r input microswitches ``in[u]`` (:class:`InputMode`; ports 2u and
  2u+1; wire k feeds middle subnetwork k at its sub-port u), m middle subnetworks
  ``mid[k]`` (each a Fred_m(r)) and r output microswitches ``out[v]`` (:class:`OutputMode`;
  wire k comes from ``mid[k]``'s output sub-port v; drives ports 2v and 2v+1).

Wire indices take ``w = max(1, ceil(log2(m)))`` bits (:func:`wire_bits`).

Order: Fred_m(2) = [rd]; Fred_m(P) = [in[0..r-1]] + mid[0] + ... + mid[m-1] + [out[0..r-1]],
recursively. The configuration of one phase is the concatenation of the microswitch fields
in that order, least significant bit first, cut into words of ``word_width`` bits (default
32; word 0 holds bits 0..word_width-1; the last word is zero-padded).

Any P >= 2 (:func:`check_size`; the compiler and the RTL implement the same structure): an
even P = 2r has middles Fred_m(r), r need not be a power of two; an odd Fred_m(P), P = 2r+1,
adds a ``demux`` (:class:`DemuxMode`) after its input microswitches and a ``mux``
(:class:`MuxMode`) after its output microswitches for the last port, and its middle
subnetworks are Fred_m(r+1). Powers of two are unaffected.

Canonical form (an addition to the shared contract, enforced by :meth:`SwitchConfig.decode`
and by the mode constructors): a disabled input or output has wire field 0, so a
configuration has exactly one encoding.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Iterable, Mapping, Union

from hdl.contracts.bitfields import BitLayout
from hdl.contracts.errors import FredError

__all__ = [
    "InputMode", "OutputMode", "RDMode", "DemuxMode", "MuxMode", "Mode", "Slot", "SwitchConfig",
    "check_any_size",
    "RD_NONE", "RD_IN0", "RD_IN1", "RD_SUM", "DEFAULT_WORD_WIDTH",
    "wire_bits", "check_size", "layout", "config_bits", "microswitch_count", "legal_modes",
]

DEFAULT_WORD_WIDTH = 32

#: RD output selections (2-bit field values).
RD_NONE, RD_IN0, RD_IN1, RD_SUM = 0, 1, 2, 3
_RD_NAMES = {RD_NONE: "none", RD_IN0: "in0", RD_IN1: "in1", RD_SUM: "in0+in1"}


def _check_int(value, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FredError(f"{name} must be an integer, got {value!r}")
    if value < low:
        raise FredError(f"{name} must be >= {low}, got {value}")
    return value


def check_size(ports, middle) -> tuple[int, int]:
    """Validate a switch size for the compiler and the RTL: ``ports`` an integer >= 2 (any P;
    odd P has the last port's demux/mux, see "Non-power-of-two P" in docs/configuration.md),
    ``middle`` an integer >= 2."""
    _check_int(ports, "ports", 2)
    _check_int(middle, "middle (number of middle subnetworks m)", 2)
    return ports, middle


def check_any_size(ports, middle) -> tuple[int, int]:
    """Same as :func:`check_size` (kept for the compiler's callers: the RTL once accepted
    powers of two only, and this was the compiler's wider check)."""
    return check_size(ports, middle)


def wire_bits(middle: int) -> int:
    """Bits of a wire index: ``max(1, ceil(log2(middle)))``."""
    _check_int(middle, "middle (number of middle subnetworks m)", 2)
    return max(1, (middle - 1).bit_length())


def _bit(value, name: str) -> bool:
    if value not in (0, 1, False, True):
        raise FredError(f"{name} must be 0/1 or a bool, got {value!r}")
    return bool(value)


def _wire(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FredError(f"{name} must be a wire index >= 0, got {value!r}")
    return value


class _Packed:
    """Packing shared by the mode classes: each names its fields in ``layout(middle)`` (a
    :class:`~hdl.contracts.bitfields.BitLayout` whose field names are the dataclass fields)."""

    __slots__ = ()

    @classmethod
    def width(cls, middle: int) -> int:
        return _layout_of(cls, middle).width

    def pack(self, middle: int) -> int:
        layout = _layout_of(type(self), middle)
        return layout.pack(**{f.name: getattr(self, f.name) for f in layout})

    @classmethod
    def unpack(cls, value: int, middle: int):
        return cls(**_layout_of(cls, middle).unpack(value))


@lru_cache(maxsize=None)
def _layout_of(cls, middle: int) -> BitLayout:
    return cls.layout(middle)


@dataclass(frozen=True)
class InputMode(_Packed):
    """Mode of an input microswitch (ports in0 = 2u, in1 = 2u+1; m wires out).

    Members:
        in0_en, in0_wire: in0 is forwarded on wire ``in0_wire`` when enabled.
        in1_en, in1_wire: in1 likewise.
        reduce: both inputs are enabled on the same wire, which carries ``in0 + in1``.

    Fields (LSB first): ``in0_en(1) in0_wire(w) in1_en(1) in1_wire(w) reduce(1)``.
    Two enabled inputs never share a wire unless ``reduce``; disabled inputs have wire 0.
    """

    in0_en: bool = False
    in0_wire: int = 0
    in1_en: bool = False
    in1_wire: int = 0
    reduce: bool = False

    KIND = "input"

    def __post_init__(self):
        for name in ("in0_en", "in1_en", "reduce"):
            object.__setattr__(self, name, _bit(getattr(self, name), name))
        for name in ("in0_wire", "in1_wire"):
            _wire(getattr(self, name), name)
        if not self.in0_en and self.in0_wire:
            raise FredError(f"input mode: in0 is disabled but in0_wire={self.in0_wire} (must be 0)")
        if not self.in1_en and self.in1_wire:
            raise FredError(f"input mode: in1 is disabled but in1_wire={self.in1_wire} (must be 0)")
        if self.reduce:
            if not (self.in0_en and self.in1_en):
                raise FredError("input mode: reduce=1 needs both in0 and in1 enabled")
            if self.in0_wire != self.in1_wire:
                raise FredError(f"input mode: reduce=1 needs in0_wire == in1_wire, got "
                                f"{self.in0_wire} and {self.in1_wire}")
        elif self.in0_en and self.in1_en and self.in0_wire == self.in1_wire:
            raise FredError(f"input mode: in0 and in1 both drive wire {self.in0_wire} without reduce")

    @staticmethod
    def layout(middle: int) -> BitLayout:
        w = wire_bits(middle)
        return BitLayout("input mode", [("in0_en", 1), ("in0_wire", w), ("in1_en", 1),
                                        ("in1_wire", w), ("reduce", 1)])

    def check(self, middle: int, where: str = "") -> None:
        for name in ("in0_wire", "in1_wire"):
            if getattr(self, name) >= middle:
                raise FredError(f"{where or 'input mode'}: {name}={getattr(self, name)} but the "
                                f"switch has only {middle} middle subnetworks (wires 0..{middle - 1})")


    @property
    def idle(self) -> bool:
        return not (self.in0_en or self.in1_en)

    def describe(self) -> str:
        if self.reduce:
            return f"in0+in1 -> wire {self.in0_wire}"
        parts = [f"in{i} -> wire {getattr(self, f'in{i}_wire')}"
                 for i in (0, 1) if getattr(self, f"in{i}_en")]
        return ", ".join(parts) or "idle"


@dataclass(frozen=True)
class OutputMode(_Packed):
    """Mode of an output microswitch (m wires in; ports out0 = 2v, out1 = 2v+1).

    Members:
        out0_en, out0_wire: out0 takes wire ``out0_wire`` when enabled.
        out1_en, out1_wire: out1 likewise. Both enabled on one wire = broadcast.

    Fields (LSB first): ``out0_en(1) out0_wire(w) out1_en(1) out1_wire(w)``.
    """

    out0_en: bool = False
    out0_wire: int = 0
    out1_en: bool = False
    out1_wire: int = 0

    KIND = "output"

    def __post_init__(self):
        for name in ("out0_en", "out1_en"):
            object.__setattr__(self, name, _bit(getattr(self, name), name))
        for name in ("out0_wire", "out1_wire"):
            _wire(getattr(self, name), name)
        for i in (0, 1):
            if not getattr(self, f"out{i}_en") and getattr(self, f"out{i}_wire"):
                raise FredError(f"output mode: out{i} is disabled but out{i}_wire="
                                f"{getattr(self, f'out{i}_wire')} (must be 0)")

    @staticmethod
    def layout(middle: int) -> BitLayout:
        w = wire_bits(middle)
        return BitLayout("output mode", [("out0_en", 1), ("out0_wire", w), ("out1_en", 1),
                                         ("out1_wire", w)])

    def check(self, middle: int, where: str = "") -> None:
        for name in ("out0_wire", "out1_wire"):
            if getattr(self, name) >= middle:
                raise FredError(f"{where or 'output mode'}: {name}={getattr(self, name)} but the "
                                f"switch has only {middle} middle subnetworks (wires 0..{middle - 1})")


    @property
    def idle(self) -> bool:
        return not (self.out0_en or self.out1_en)

    def describe(self) -> str:
        parts = [f"out{i} <- wire {getattr(self, f'out{i}_wire')}"
                 for i in (0, 1) if getattr(self, f"out{i}_en")]
        return ", ".join(parts) or "idle"


@dataclass(frozen=True)
class RDMode(_Packed):
    """Mode of the RD microswitch that is the whole of Fred_m(2).

    Members:
        out0, out1: each ``RD_NONE`` (0), ``RD_IN0`` (1), ``RD_IN1`` (2) or ``RD_SUM`` (3,
        ``in0 + in1``). If either output is ``RD_SUM`` neither may be ``RD_IN0``/``RD_IN1``
        (an input is consumed by the adder or passed, not both).

    Fields (LSB first): ``out0(2) out1(2)``.
    """

    out0: int = RD_NONE
    out1: int = RD_NONE

    KIND = "rd"

    def __post_init__(self):
        for name in ("out0", "out1"):
            value = getattr(self, name)
            if isinstance(value, bool) or value not in (0, 1, 2, 3):
                raise FredError(f"rd mode: {name} must be 0 (none), 1 (in0), 2 (in1) or 3 "
                                f"(in0+in1), got {value!r}")
        if RD_SUM in (self.out0, self.out1) and ({self.out0, self.out1} & {RD_IN0, RD_IN1}):
            raise FredError(f"rd mode: out0={self.out0}, out1={self.out1}: an output that sums "
                            "cannot be combined with an output that passes an input")

    @staticmethod
    def layout(middle: int) -> BitLayout:
        return BitLayout("rd mode", [("out0", 2), ("out1", 2)])

    def check(self, middle: int, where: str = "") -> None:
        return None

    @property
    def idle(self) -> bool:
        return self.out0 == RD_NONE and self.out1 == RD_NONE

    def describe(self) -> str:
        if self.idle:
            return "idle"
        return f"out0 <- {_RD_NAMES[self.out0]}, out1 <- {_RD_NAMES[self.out1]}"


@dataclass(frozen=True)
class _SingleWireMode(_Packed):
    en: bool = False
    wire: int = 0

    def __post_init__(self):
        object.__setattr__(self, "en", _bit(self.en, "en"))
        _wire(self.wire, "wire")
        if not self.en and self.wire:
            raise FredError(f"{self.KIND} mode: disabled but wire={self.wire} (must be 0)")

    @classmethod
    def layout(cls, middle: int) -> BitLayout:
        return BitLayout(f"{cls.KIND} mode", [("en", 1), ("wire", wire_bits(middle))])

    def check(self, middle: int, where: str = "") -> None:
        if self.wire >= middle:
            raise FredError(f"{where or self.KIND + ' mode'}: wire={self.wire} but the switch has "
                            f"only {middle} middle subnetworks (wires 0..{middle - 1})")

    @property
    def idle(self) -> bool:
        return not self.en


@dataclass(frozen=True)
class DemuxMode(_SingleWireMode):
    """Odd P only (compiler extension): the last port P-1 enters middle subnetwork ``wire``
    at its last sub-port (P-1)/2 when ``en``. Fields (LSB first): ``en(1) wire(w)``."""

    KIND = "demux"

    def describe(self) -> str:
        return f"last port -> wire {self.wire}" if self.en else "idle"


@dataclass(frozen=True)
class MuxMode(_SingleWireMode):
    """Odd P only (compiler extension): the last port P-1 takes the last output sub-port of
    middle subnetwork ``wire`` when ``en``. Fields (LSB first): ``en(1) wire(w)``."""

    KIND = "mux"

    def describe(self) -> str:
        return f"last port <- wire {self.wire}" if self.en else "idle"


Mode = Union[InputMode, OutputMode, RDMode, DemuxMode, MuxMode]
_KINDS = {"input": InputMode, "output": OutputMode, "rd": RDMode, "demux": DemuxMode, "mux": MuxMode}


@lru_cache(maxsize=None)
def legal_modes(cls, middle: int) -> tuple:
    """Every legal, canonical mode of microswitch class ``cls`` (e.g. :class:`InputMode`) for
    ``middle`` wires, in the order of their encoding: each value of the mode's bit field that
    the contract accepts (unpack and check raise on every other one)."""
    modes = []
    for value in range(1 << cls.width(middle)):
        try:
            mode = cls.unpack(value, middle)
            mode.check(middle)
        except FredError:
            continue
        modes.append(mode)
    return tuple(modes)


@dataclass(frozen=True)
class Slot:
    """Where one microswitch's mode sits in the configuration bit vector.

    Members: ``name`` (e.g. ``mid[1].in[0]``), ``kind`` (``input``/``output``/``rd``),
    ``offset`` (first bit, LSB), ``width`` (bits), ``index`` (position in the order).
    """

    name: str
    kind: str
    offset: int
    width: int
    index: int


@lru_cache(maxsize=None)
def _names(ports: int, middle: int) -> tuple[tuple[str, str], ...]:
    if ports == 2:
        return (("rd", "rd"),)
    r, odd = ports // 2, ports % 2
    names = [(f"in[{u}]", "input") for u in range(r)] + [("demux", "demux")] * odd
    for k in range(middle):
        names += [(f"mid[{k}].{name}", kind) for name, kind in _names(r + odd, middle)]
    names += [(f"out[{v}]", "output") for v in range(r)] + [("mux", "mux")] * odd
    return tuple(names)


@lru_cache(maxsize=None)
def layout(ports: int, middle: int) -> tuple[Slot, ...]:
    """The microswitches of Fred_m(P) in configuration order, with bit offsets and widths.

    Any P >= 2 (odd P: the last port's ``demux`` and ``mux``, see the module docstring)."""
    check_any_size(ports, middle)
    slots, offset = [], 0
    for index, (name, kind) in enumerate(_names(ports, middle)):
        width = _KINDS[kind].width(middle)
        slots.append(Slot(name, kind, offset, width, index))
        offset += width
    return tuple(slots)


def config_bits(ports: int, middle: int) -> int:
    """Total configuration bits of one phase of Fred_m(P)."""
    last = layout(ports, middle)[-1]
    return last.offset + last.width


def microswitch_count(ports: int, middle: int) -> int:
    return len(layout(ports, middle))


@lru_cache(maxsize=None)
def _subtree_size(ports: int, middle: int) -> int:
    return len(_names(ports, middle))


def _check_word_width(word_width) -> int:
    return _check_int(word_width, "word_width", 1)


@dataclass(frozen=True)
class SwitchConfig:
    """The configuration of one phase of Fred_m(P): one mode per microswitch.

    Members:
        ports (P), middle (m): the switch size.
        modes: tuple of modes in configuration order (see :func:`layout`); ``modes[i]`` is
            the mode of ``layout(P, m)[i]``, an instance of the class its kind requires.

    Build one with :meth:`from_modes` (a mapping name -> mode; missing = idle), :meth:`idle`
    or :meth:`decode`. Construction validates every mode (kind, wire range, rules).
    """

    ports: int
    middle: int
    modes: tuple

    def __post_init__(self):
        check_any_size(self.ports, self.middle)
        slots = layout(self.ports, self.middle)
        modes = tuple(self.modes)
        if len(modes) != len(slots):
            raise FredError(f"Fred_{self.middle}({self.ports}) has {len(slots)} microswitches, "
                            f"got {len(modes)} modes")
        for slot, mode in zip(slots, modes):
            expected = _KINDS[slot.kind]
            if not isinstance(mode, expected):
                raise FredError(f"{slot.name} is an {slot.kind} microswitch and needs "
                                f"{expected.__name__}, got {type(mode).__name__}")
            mode.check(self.middle, slot.name)
        object.__setattr__(self, "modes", modes)

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def idle(cls, ports: int, middle: int) -> "SwitchConfig":
        """Every microswitch idle (all-zero configuration)."""
        return cls(ports, middle, tuple(_KINDS[s.kind]() for s in layout(ports, middle)))

    @classmethod
    def from_modes(cls, ports: int, middle: int, modes: Mapping[str, Mode]) -> "SwitchConfig":
        """Configuration from ``{name: mode}``; microswitches not named are idle."""
        slots = layout(ports, middle)
        known = {slot.name for slot in slots}
        unknown = sorted(set(modes) - known)
        if unknown:
            raise FredError(f"no microswitch named {unknown[0]!r} in Fred_{middle}({ports})")
        return cls(ports, middle, tuple(modes.get(s.name, _KINDS[s.kind]()) for s in slots))

    @classmethod
    def compose(cls, ports: int, middle: int, inputs: Iterable[InputMode],
                subnetworks: Iterable["SwitchConfig"], outputs: Iterable[OutputMode],
                demux: DemuxMode | None = None, mux: MuxMode | None = None) -> "SwitchConfig":
        """Fred_m(P) from its input modes, its m middle configurations and its output modes
        (and, for odd P, the last port's demux and mux modes; default idle)."""
        inputs, subnetworks, outputs = tuple(inputs), tuple(subnetworks), tuple(outputs)
        r, odd = ports // 2, ports % 2
        sub_ports = r + odd
        if ports == 2:
            raise FredError("Fred_m(2) is a single RD microswitch; build it with RDMode")
        if not odd and (demux is not None or mux is not None):
            raise FredError(f"Fred_{middle}({ports}) has an even number of ports: no demux/mux")
        if len(inputs) != r or len(outputs) != r or len(subnetworks) != middle:
            raise FredError(f"Fred_{middle}({ports}) needs {r} input modes, {middle} "
                            f"subnetworks and {r} output modes")
        modes = list(inputs) + [demux or DemuxMode()] * odd
        for k, sub in enumerate(subnetworks):
            if (sub.ports, sub.middle) != (sub_ports, middle):
                raise FredError(f"mid[{k}] must be Fred_{middle}({sub_ports}), got "
                                f"Fred_{sub.middle}({sub.ports})")
            modes.extend(sub.modes)
        modes.extend(outputs)
        modes += [mux or MuxMode()] * odd
        return cls(ports, middle, tuple(modes))

    # -- views ------------------------------------------------------------------------------
    @property
    def slots(self) -> tuple[Slot, ...]:
        return layout(self.ports, self.middle)

    def __getitem__(self, name: str) -> Mode:
        for slot, mode in zip(self.slots, self.modes):
            if slot.name == name:
                return mode
        raise FredError(f"no microswitch named {name!r} in Fred_{self.middle}({self.ports})")

    def named(self) -> dict[str, Mode]:
        return {slot.name: mode for slot, mode in zip(self.slots, self.modes)}

    @property
    def rd(self) -> RDMode:
        if self.ports != 2:
            raise FredError("only Fred_m(2) is a single RD microswitch")
        return self.modes[0]

    @property
    def input_modes(self) -> tuple[InputMode, ...]:
        self._not_base("input microswitches")
        return self.modes[: self.ports // 2]

    @property
    def output_modes(self) -> tuple[OutputMode, ...]:
        self._not_base("output microswitches")
        end = len(self.modes) - self.ports % 2
        return self.modes[end - self.ports // 2:end]

    @property
    def demux(self) -> DemuxMode | None:
        """The last port's demux (odd P only; None for even P)."""
        self._not_base("demux")
        return self.modes[self.ports // 2] if self.ports % 2 else None

    @property
    def mux(self) -> MuxMode | None:
        """The last port's mux (odd P only; None for even P)."""
        self._not_base("mux")
        return self.modes[-1] if self.ports % 2 else None

    def subnetwork(self, k: int) -> "SwitchConfig":
        """The configuration of middle subnetwork ``mid[k]`` (a Fred_m(ceil(P/2)))."""
        self._not_base("middle subnetworks")
        if not 0 <= k < self.middle:
            raise FredError(f"middle subnetwork {k} out of range 0..{self.middle - 1}")
        r, odd = self.ports // 2, self.ports % 2
        size = _subtree_size(r + odd, self.middle)
        start = r + odd + k * size
        # Modes were validated as part of this configuration; skip re-validation.
        sub = object.__new__(SwitchConfig)
        object.__setattr__(sub, "ports", r + odd)
        object.__setattr__(sub, "middle", self.middle)
        object.__setattr__(sub, "modes", self.modes[start:start + size])
        return sub

    def _not_base(self, what: str) -> None:
        if self.ports == 2:
            raise FredError(f"Fred_m(2) is a single RD microswitch and has no {what}")

    # -- encoding ---------------------------------------------------------------------------
    @property
    def bit_width(self) -> int:
        return config_bits(self.ports, self.middle)

    def to_int(self) -> int:
        """The whole configuration as one integer (bit 0 = first field's LSB)."""
        value = 0
        for slot, mode in zip(self.slots, self.modes):
            value |= mode.pack(self.middle) << slot.offset
        return value

    @classmethod
    def from_int(cls, value: int, *, ports: int, middle: int) -> "SwitchConfig":
        slots = layout(ports, middle)
        total = config_bits(ports, middle)
        if value < 0 or value >> total:
            raise FredError(f"configuration value has bits above the {total} bits of "
                            f"Fred_{middle}({ports})")
        modes = []
        for slot in slots:
            field = (value >> slot.offset) & ((1 << slot.width) - 1)
            try:
                modes.append(_KINDS[slot.kind].unpack(field, middle))
            except FredError as exc:
                raise FredError(f"{slot.name} (bits {slot.offset}..{slot.offset + slot.width - 1}"
                                f" = {field:#x}): {exc}") from None
        return cls(ports, middle, tuple(modes))

    def encode(self, word_width: int = DEFAULT_WORD_WIDTH) -> list[int]:
        """Configuration words: word 0 = bits 0..word_width-1, last word zero-padded."""
        word_width = _check_word_width(word_width)
        value, total = self.to_int(), self.bit_width
        count = -(-total // word_width)
        mask = (1 << word_width) - 1
        return [(value >> (i * word_width)) & mask for i in range(count)]

    @classmethod
    def decode(cls, words: Iterable[int], *, ports: int, middle: int,
               word_width: int = DEFAULT_WORD_WIDTH) -> "SwitchConfig":
        """Inverse of :meth:`encode`; rejects wrong word counts, non-zero padding and
        invalid or non-canonical modes, naming the microswitch."""
        word_width = _check_word_width(word_width)
        check_any_size(ports, middle)
        if isinstance(words, (str, bytes)) or not hasattr(words, "__iter__"):
            raise FredError(f"configuration words must be a sequence of integers, got {words!r}")
        words = list(words)
        total = config_bits(ports, middle)
        count = -(-total // word_width)
        if len(words) != count:
            raise FredError(f"Fred_{middle}({ports}) has {total} configuration bits = {count} "
                            f"words of {word_width} bits, got {len(words)} words")
        value = 0
        for i, word in enumerate(words):
            if isinstance(word, bool) or not isinstance(word, int) or not 0 <= word < (1 << word_width):
                raise FredError(f"word {i} ({word!r}) is not a {word_width}-bit unsigned integer")
            value |= word << (i * word_width)
        if value >> total:
            raise FredError(f"padding bits above bit {total - 1} of the last word are not zero")
        return cls.from_int(value, ports=ports, middle=middle)

    def describe(self, *, include_idle: bool = False) -> list[str]:
        """One line per (non-idle) microswitch: ``name: setting``."""
        return [f"{slot.name}: {mode.describe()}" for slot, mode in zip(self.slots, self.modes)
                if include_idle or not mode.idle]

    def to_dict(self) -> dict:
        return {
            "ports": self.ports, "middle": self.middle, "bits": self.bit_width,
            "words": self.encode(),
            "microswitches": {slot.name: {"kind": slot.kind,
                                           **{f.name: _plain(getattr(mode, f.name))
                                              for f in fields(mode)}}
                              for slot, mode in zip(self.slots, self.modes) if not mode.idle},
        }


def _plain(value):
    return int(value) if isinstance(value, bool) else value
