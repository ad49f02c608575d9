"""A proof: a harness, how to prove it, and the mutants that must break it."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable

from amaranth.back import rtlil
from amaranth.hdl import ClockDomain, Fragment, Module, ResetSignal

from hdl.contracts.errors import FredError

__all__ = ["Proof", "mutated", "harness_module", "to_rtlil", "elaborated", "internal_signal", "replaced", "Mutation", "build", "ENGINES"]

#: ``prove``: k-induction to ``depth`` (a pass is unbounded); ``bmc``: bounded to ``depth`` cycles;
#: ``cover``: every ``Cover`` reached within ``depth`` cycles.
ENGINES = ("prove", "bmc", "cover")


@dataclass(frozen=True)
class Proof:
    """One formal task.

    Parameters:
        name: unique, ``design.property-group`` (``stream_buffer.fifo``).
        build: ``build(mutant)`` -> the harness (an Amaranth elaboratable); ``mutant`` is ``None``
            or a key of ``mutants``.
        mode: one of :data:`ENGINES`.
        depth: induction length (``prove``) or bound in cycles (``bmc``, ``cover``).
        mutants: name -> one-line description of the broken behaviour (or a :class:`Mutation`,
            whose ``text`` is used); the proof must fail on each.
        quick: runs in the default test suite (a few seconds), else only in ``make formal``.
        why_bounded: for ``bmc``, why induction is not used (docs/verification.md quotes it).
    """

    name: str
    build: Callable
    mode: str
    depth: int
    mutants: dict = field(default_factory=dict)
    quick: bool = False
    why_bounded: str = ""

    def __post_init__(self):
        if self.mode not in ENGINES:
            raise FredError(f"proof {self.name}: mode must be one of {ENGINES}, got {self.mode!r}")
        if not isinstance(self.depth, int) or self.depth < 1:
            raise FredError(f"proof {self.name}: depth must be an integer >= 1, got {self.depth!r}")

    def describe(self, mutant: str) -> str:
        entry = self.mutants[mutant]
        return entry if isinstance(entry, str) else entry.text

    def harness(self, mutant: str | None = None):
        if mutant is not None and mutant not in self.mutants:
            raise FredError(f"proof {self.name} has no mutant {mutant!r} "
                            f"(has: {', '.join(self.mutants) or 'none'})")
        return self.build(mutant)


def mutated(design_class, mutation: Callable):
    """A subclass of ``design_class`` whose ``elaborate`` adds ``mutation(self, m)`` after the
    original statements; a later assignment to a signal wins in Amaranth, so the mutation overrides
    what the design drives (its ports, or signals of its submodules it reaches through
    ``m.submodules``)."""
    class Mutant(design_class):
        def elaborate(self, platform):
            m = super().elaborate(platform)
            mutation(self, m)
            return m
    Mutant.__name__ = Mutant.__qualname__ = f"Mutant{design_class.__name__}"
    return Mutant


@dataclass(frozen=True)
class Mutation:
    """One mutant: ``text`` says what is broken. Either ``design`` (``fn(self, m)`` added after the
    design's own ``elaborate``, see :func:`mutated`) or ``submodule`` (``(python_module, class_name,
    fn)``: the class the design instantiates by that name is replaced by ``mutated(class, fn)``)."""

    text: str
    design: Callable | None = None
    submodule: tuple | None = None


def build(design_class, mutation: Mutation | None, **parameters):
    """``(design, fragment)``: ``design_class(**parameters)``, or its mutant, elaborated (add the
    fragment to the harness, talk to the design through its ports)."""
    if mutation is not None and mutation.design is not None:
        design_class = mutated(design_class, mutation.design)
    design = design_class(**parameters)
    if mutation is not None and mutation.submodule is not None:
        module, name, fn = mutation.submodule
        with replaced(module, name, mutated(getattr(module, name), fn)):
            return design, elaborated(design)
    return design, elaborated(design)


@contextlib.contextmanager
def replaced(module, name: str, replacement):
    """While the block runs, ``module.name`` is ``replacement``: a mutant of a submodule class that
    a design builds in its ``elaborate`` (elaborate the design inside the block, with
    :func:`elaborated`)."""
    original = getattr(module, name)
    setattr(module, name, replacement)
    try:
        yield
    finally:
        setattr(module, name, original)


def harness_module() -> Module:
    """A harness's top module: a ``sync`` domain whose reset is held low, so that BMC starts from
    the reset state (the designs' register init values) and never sees a reset afterwards."""
    m = Module()
    domain = m.domains.sync = ClockDomain("sync")
    m.d.comb += ResetSignal("sync").eq(0)
    m.formal_clock = domain.clk   # the one port of the harness (see to_rtlil)
    return m


def to_rtlil(harness) -> str:
    """The harness (a :func:`harness_module`) as RTLIL text, top module ``top``; its only port is
    the clock (an undriven clock would be a constant and nothing would ever change)."""
    return rtlil.convert(harness, name="top", ports=[harness.formal_clock], emit_src=False)


def elaborated(design, platform=None):
    """``design`` elaborated to a Fragment (add it as the harness's submodule instead of the
    design), so that :func:`internal_signal` can find its registers for induction invariants."""
    return Fragment.get(design, platform)


def internal_signal(fragment, name: str, *, path: tuple = ()):
    """The signal called ``name`` that the statements of ``fragment`` (or of its submodule at
    ``path``, a tuple of submodule names) assign. Used only to state induction invariants about
    state the interface does not show; raises :class:`FredError` if absent or ambiguous."""
    for step in path:
        matches = [sub for sub, sub_name, _ in fragment.subfragments if sub_name == step]
        if not matches:
            raise FredError(f"no submodule {step!r} on the way to {name!r}")
        fragment = matches[0]
    found = {id(signal): signal for statements in fragment.statements.values()
             for statement in statements for signal in statement._lhs_signals()
             if signal.name == name}   # Signals are not hashable: key by identity
    if len(found) != 1:
        raise FredError(f"expected one signal {name!r} at {'.'.join(path) or 'the top'}, found {len(found)}")
    return next(iter(found.values()))
