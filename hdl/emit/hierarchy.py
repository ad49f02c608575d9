"""Hierarchical Verilog: every distinct component is one Verilog module, emitted once.

Amaranth 0.5 writes every instance of a component as its own module (it never merges identical
instances), so a Fred_m(P) with P^1.58 microswitches becomes thousands of modules. Here, a
component class that derives from :class:`SeparateModule` names itself with
:attr:`SeparateModule.module_name` (class and every parameter, deterministic). When
:func:`hdl.emit.verilog.to_verilog` generates hierarchical Verilog, each such component met while
elaborating a module is replaced by an ``amaranth.hdl.Instance`` of that name (a black box with
the same ports), and the component itself is converted once, on its own, into the module of
that name (whose own separate children become instances in turn). Each module is converted to
RTLIL on its own; the RTLIL of all modules (children first) goes through one yosys run
(Amaranth's own RTLIL-to-Verilog script), so the cost of starting yosys is paid once.

How the replacement happens: the conversion passes a :class:`HierarchyPlatform` as Amaranth's
``platform`` argument; ``SeparateModule`` wraps each subclass's ``elaborate`` so that, under
that platform, any separate component other than the one being converted elaborates to its
``Instance``. With any other platform (``None`` in the flat path, the simulator) nothing
changes: the flat Verilog is byte-identical to what it was before this module existed.

Port names of an instance are Amaranth's flattened signature names (``in0__valid``,
``wire__2__payload``, ...) plus ``clk``/``rst`` when the module has synchronous logic; they are
read back from the converted module's RTLIL port declarations (:func:`module_ports`) and checked
against the signature (:func:`instance_ports`), so a mismatch fails loudly instead of leaving a
port unconnected.
"""

from __future__ import annotations

import functools
import re

from amaranth.back import rtlil, verilog
from amaranth.hdl import ClockSignal, Instance, ResetSignal, Value
from amaranth.lib import wiring

from hdl.contracts.errors import FredError

__all__ = ["SeparateModule", "HierarchyPlatform", "Hierarchy", "drop_zero_memory_init", "flit_suffix",
           "instance_ports", "module_ports", "packet_suffix"]


def flit_suffix(flit) -> str:
    """The part of a module name that a flit format sets: ``fp16x4_t8`` (dtype x lanes, tag bits)."""
    return f"{flit.dtype}x{flit.lanes}_t{flit.tag_width}"


def packet_suffix(packet) -> str:
    """The part of a module name that a packet format sets: ``k8_ph2_s16_f8_d4_st5`` (flits a
    packet, then the header's phase, seq, flow, dest and stripe bits)."""
    return (f"k{packet.packet_flits}_ph{packet.phase_bits}_s{packet.seq_bits}_f{packet.flow_bits}"
            f"_d{packet.dest_bits}_st{packet.stripe_bits}")


class SeparateModule:
    """Mixin for a ``wiring.Component`` that hierarchical Verilog emits as a module of its own.

    A subclass provides :attr:`module_name` (a Verilog identifier that carries every parameter
    the generated module depends on) and :attr:`module_key` (the parameters as a hashable value,
    default the name: two components with one name must have equal keys, which the emitter
    checks). Its ``elaborate`` is wrapped (``__init_subclass__``), see the module docstring.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        body = cls.__dict__.get("elaborate")
        if body is None or getattr(body, "_separate_module", False):
            return

        @functools.wraps(body)
        def elaborate(self, platform):
            if isinstance(platform, HierarchyPlatform) and platform.top is not self:
                return platform.hierarchy.instance(self)
            return body(self, platform)

        elaborate._separate_module = True
        cls.elaborate = elaborate

    @property
    def module_name(self) -> str:
        raise NotImplementedError(f"{type(self).__name__} must define module_name")

    @property
    def module_key(self):
        return (type(self).__module__, type(self).__qualname__, self.module_name)


# Amaranth's RTLIL of a memory's initial contents (amaranth.back.rtlil, ``emit_memory``): one
# ``$meminit_v2`` cell, every word in one constant, every bit enabled
_ZERO_MEMINIT = re.compile(r"^  cell \$meminit_v2 \S+\n(?:    parameter [^\n]*\n)*"
                           r"    connect \\ADDR \{  \}\n    connect \\DATA \d+'0+\n"
                           r"    connect \\EN \d+'1+\n  end\n\n?", re.M)


def drop_zero_memory_init(rtlil_text: str) -> str:
    """``rtlil_text`` without the ``$meminit_v2`` cells whose contents are all zero (yosys then
    writes those memories without an ``initial`` block); other cells untouched."""
    return _ZERO_MEMINIT.sub("", rtlil_text)


class HierarchyPlatform:
    """The ``platform`` handed to Amaranth while one module of a hierarchy is converted:
    ``top`` is the component being converted (it elaborates normally), ``hierarchy`` the
    :class:`Hierarchy` that collects the modules."""

    def __init__(self, hierarchy: "Hierarchy", top):
        self.hierarchy = hierarchy
        self.top = top


# a port declaration; names that are Verilog keywords (``config``) come escaped: ``\\config ;``
# a port in Amaranth's RTLIL: ``  wire width 73 input 3  \\i__0__payload``
_RTLIL_PORT = re.compile(r"^  wire width (\d+) (input|output|inout) \d+ +\\(\S+)$", re.M)
_RTLIL_TOP = "attribute \\top 1\n"


def module_ports(rtlil_text: str, name: str) -> dict[str, tuple[str, int]]:
    """``{port: (direction, width)}`` of module ``name`` in Amaranth's RTLIL ``rtlil_text``."""
    start = re.search(rf"^module \\{re.escape(name)}$", rtlil_text, re.M)
    if start is None:
        raise FredError(f"module {name} not found in its generated RTLIL")
    end = re.compile(r"^end$", re.M).search(rtlil_text, start.end()).start()
    return {port: (direction, int(width))
            for width, direction, port in _RTLIL_PORT.findall(rtlil_text, start.end(), end)}


def instance_ports(component, ports: dict[str, tuple[str, int]]) -> list[tuple[str, str, Value]]:
    """``Instance`` arguments ``(kind, port, value)`` binding ``component``'s signature members
    (and the clock domain) to the ports of its module; raises if the two disagree."""
    args = []
    seen = set()
    for path, member, value in component.signature.flatten(component):
        name = "__".join(map(str, path))
        value = Value.cast(value)
        kind = "i" if member.flow == wiring.In else "o"
        direction, width = ports.get(name, (None, None))
        if direction != {"i": "input", "o": "output"}[kind] or width != len(value):
            raise FredError(f"{component.module_name}: signature member {name} ({kind}, "
                            f"{len(value)} bits) does not match the module port "
                            f"{direction} {width}")
        args.append((kind, name, value))
        seen.add(name)
    for name, signal in (("clk", ClockSignal("sync")), ("rst", ResetSignal("sync"))):
        if name in ports:
            args.append(("i", name, signal))
            seen.add(name)
    extra = sorted(set(ports) - seen)
    if extra:
        raise FredError(f"{component.module_name}: module ports {extra} are not in its signature")
    return args


class Hierarchy:
    """Collects the modules of one hierarchical design (name -> RTLIL text), each once."""

    def __init__(self, prefix: str = "", *, zero_memory_init: bool = True):
        self.prefix = prefix                  # starts every submodule's name (fred verilog --name)
        # False: all-zero memory contents left out (hdl.emit.verilog.to_verilog)
        self.zero_memory_init = zero_memory_init
        self.texts: dict[str, str] = {}       # in completion order: children before parents
        self.ports: dict[str, dict] = {}
        self.keys: dict[str, object] = {}
        self._converting: set[str] = set()

    def convert(self, component, name: str) -> str:
        """RTLIL text of ``component`` as module ``name``; its separate descendants are instances
        of modules added to :attr:`texts`."""
        return rtlil.convert(component, name=name, emit_src=False,
                             platform=HierarchyPlatform(self, component))

    def instance(self, component) -> Instance:
        name = self.prefix + component.module_name
        key = component.module_key
        if name in self.keys:
            if self.keys[name] != key:
                raise FredError(f"two different components are both named {name}: "
                                f"{self.keys[name]} and {key}")
        else:
            if name in self._converting:
                raise FredError(f"module {name} instantiates itself")
            self._converting.add(name)
            text = self.convert(component, name)
            self._converting.discard(name)
            self.keys[name] = key
            self.ports[name] = module_ports(text, name)
            # only the design's top keeps the `top` attribute
            self.texts[name] = text.replace(f"{_RTLIL_TOP}module \\{name}\n", f"module \\{name}\n", 1)
        return Instance(name, *instance_ports(component, self.ports[name]))

    def verilog(self, component, name: str) -> str:
        """The whole design: every module once (children first), then the top ``name``."""
        top = self.convert(component, name)
        if name in self.texts:
            raise FredError(f"top module name {name} is also the name of a submodule")
        # Amaranth's own RTLIL -> Verilog step (yosys proc, memory_collect, write_verilog), run
        # once on every module
        text = "".join(self.texts.values()) + top
        if not self.zero_memory_init:
            text = drop_zero_memory_init(text)
        return verilog._convert_rtlil_text(text)
