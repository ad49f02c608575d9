"""What every mesh I/O top shares (``fred_mesh_io``, ``fred_mesh_io_store``, ``fred_mesh_io_spill``
and the I/O iteration top ``fred_mesh_io_iteration``; docs/mesh_rtl.md, "I/O controllers on the
mesh"): :class:`MeshIoHarnessTop`, their base (the spec check, the harness ports, the mesh, the
fabric-wide counters and the read port); the program registers :data:`IO_REGS`; the read units
(:func:`controller_unit`); an NPU's local port (:func:`npu_local_port`); a link's two signals
(:func:`link`) and the random idle of a sender (:func:`random_hold`)."""

from __future__ import annotations

from typing import NamedTuple

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring

from hdl.contracts.errors import FredError
from hdl.contracts.mesh import LOCAL
from hdl.contracts.mesh_io import SEQ_BITS, MeshIoSpec
from hdl.contracts.mesh_partition import MeshPartition, part_problem
from hdl.designs.fabric.cut import cut_ports, cut_slices
from hdl.designs.fabric.fabric_top import (GLOBAL_UNIT, count_cycles, harness_inputs,
                                           harness_ports, read_register)

from .mesh_network import add_mesh, mesh_cut_fields

__all__ = ["MeshIoHarnessTop", "MeshIoHarness", "MeshIoStatus", "IO_GLOBAL_READ", "IO_REGS", "controller_unit",
           "check_io_top_spec", "io_program_registers", "npu_local_port", "link", "random_hold"]

#: Read registers of the fabric (``GLOBAL_UNIT``) in every single-run I/O top; the I/O
#: iteration top reads these and more.
IO_GLOBAL_READ = ("cycles", "all_done", "running", "protocol_error")
#: Program registers of the single-run I/O tops (any unit): flits per controller, the tree
#: mode (``IO_MODES`` index; the spill top's op), and the random idle of every sender: each
#: holds its injection in a cycle when its 16-bit LFSR is below ``stall`` (``stall / 65536``
#: of the cycles; 0: never).
IO_REGS = ("stripe", "mode", "stall")


def link(sink, source) -> list:
    """Statements driving link ``sink`` (members ``valid``, ``payload``) from link ``source``:
    the flit as it is, no register, no ``ready`` (the mesh's links are credit-based)."""
    return [sink.valid.eq(source.valid), sink.payload.eq(source.payload)]


def random_hold(m: Module, name: str, seed: int, stall) -> Signal:
    """High in a cycle when a 16-bit Galois LFSR (x^16 + x^14 + x^13 + x^11 + 1, the NPU
    engine's) seeded ``seed`` is below ``stall``: random idle, a different sequence per seed.
    Adds the LFSR ``{name}_lfsr`` (a sync register) and returns ``{name}_hold`` (comb)."""
    lfsr = Signal(16, init=seed & 0xFFFF or 1, name=f"{name}_lfsr")
    hold = Signal(name=f"{name}_hold")
    m.d.sync += lfsr.eq(Mux(lfsr[0], (lfsr >> 1) ^ 0xB400, lfsr >> 1))
    m.d.comb += hold.eq(lfsr < stall)
    return hold


def npu_local_port(router, receivers, sender) -> list:
    """Statements wiring an NPU's units to ``router``'s local port: every link of ``receivers``
    gets the router's ejected flits, whose credit returns on arrival (the NPU takes every flit
    at once: its memory), and the router's local input takes ``sender``'s (members ``o``,
    ``credit``), its credits going back to it."""
    eject = router.o[LOCAL]
    return [*(s for receiver in receivers for s in link(receiver, eject)),
            router.o_credit[LOCAL].eq(eject.valid << eject.payload.vc),
            *link(router.i[LOCAL], sender.o), sender.credit.eq(router.i_credit[LOCAL])]


def controller_unit(spec: MeshIoSpec, k: int) -> int:
    """Read unit of controller ``k``: after the NPUs."""
    return spec.mesh.npus + k


def check_io_top_spec(top: str, spec) -> None:
    """What the I/O tops (``top`` names the one asking) refuse: anything but a
    :class:`MeshIoSpec`, and more NPU and controller read units than the read port has below
    ``GLOBAL_UNIT``."""
    if not isinstance(spec, MeshIoSpec):
        raise FredError(f"{top} needs a MeshIoSpec, got {spec!r}")
    if controller_unit(spec, spec.controllers) > GLOBAL_UNIT:
        raise FredError(f"{spec.mesh.npus} NPUs and {spec.controllers} controllers exceed the "
                        f"{GLOBAL_UNIT} read units")


def io_program_registers(m: Module, prog_we, prog_reg, prog_data) -> tuple[Signal, Signal, Signal]:
    """The single-run I/O tops' program registers :data:`IO_REGS` (written from any unit):
    ``(stripe, mode, stall)``."""
    stripe = Signal(SEQ_BITS, name="stripe")
    mode = Signal(2, name="mode")
    stall = Signal(16, name="stall")
    for name, reg in zip(IO_REGS, (stripe, mode, stall)):
        with m.If(prog_we & (prog_reg == IO_REGS.index(name))):
            m.d.sync += reg.eq(prog_data)
    return stripe, mode, stall


class MeshIoHarness(NamedTuple):
    """What :meth:`MeshIoHarnessTop.harness` gives a top: the harness inputs
    (``hdl.designs.fabric.fabric_top.harness_inputs``), what the top's
    :meth:`~MeshIoHarnessTop.program_registers` returned, the routers ``{(x, y): router}`` and
    the error signals (``hdl.designs.mesh.mesh_network.add_mesh``; the top appends its own) and,
    in one part of a cut mesh, ``{field: signal}`` of every cut field (:meth:`~MeshIoHarnessTop.cut_fields`;
    else None)."""
    start: Signal
    prog_we: Signal
    prog_unit: Signal
    prog_reg: Signal
    prog_data: Signal
    rd_unit: Signal
    rd_reg: Signal
    program: tuple | None
    routers: dict
    errors: list
    cut: dict | None


class MeshIoStatus(NamedTuple):
    """The fabric-wide status bits of :meth:`MeshIoHarnessTop.finish`."""
    all_done: Signal
    running: Signal
    protocol_error: Signal


class MeshIoHarnessTop(wiring.Component):
    """Base of the mesh I/O tops: ``fred_mesh_fabric``'s harness ports
    (``hdl.designs.fabric.fabric_top.harness_ports``: ``clk``, ``start``,
    ``prog_we/prog_unit/prog_reg/prog_data``, ``rd_unit/rd_reg`` -> ``rd_data``, ``all_done``,
    ``cycles``) on the routers and wires of ``spec.mesh``.

    A top sets its own parameters, then calls ``super().__init__(spec)``, which refuses what
    :func:`check_io_top_spec` refuses and then what the top's :meth:`check` refuses (before
    the component exists). In ``elaborate`` it takes :meth:`harness` (its program registers and
    the mesh), adds its units and ends with :meth:`counters` (:meth:`finish`: ``all_done``,
    ``cycles``, ``protocol_error``; then :meth:`read_port`).

    One part of a cut mesh (``partition``, a :class:`~hdl.contracts.mesh_partition.MeshPartition`
    of ``spec.mesh``, and ``part``: the lock-step simulator, ``eda/fabric/lockstep.py``), for a
    top that supports it (:attr:`CUT`): the part's routers (:func:`add_mesh`), the ports
    ``cut_out`` / ``cut_in`` of :meth:`cut_fields`, and the units the top builds at them
    (:meth:`mine`, :meth:`my_controllers`: a controller goes with its NPU's router).
    """

    #: Whether the top builds one part of a cut mesh (``partition`` and ``part``).
    CUT = False

    def __init__(self, spec: MeshIoSpec, *, partition: MeshPartition | None = None, part: int | None = None):
        check_io_top_spec(type(self).__name__, spec)
        self.check(spec)
        problem = part_problem(type(self).__name__, spec.mesh, partition, part)
        if not problem and partition is not None and not self.CUT:
            problem = f"{type(self).__name__} has no lock-step cut (partition and part)"
        if problem:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(problem)
        self.spec = spec
        self.partition, self.part = partition, part
        cut = cut_ports(self.cut_fields()) if partition is not None else {}
        super().__init__({**cut, **harness_ports()})

    def check(self, spec: MeshIoSpec) -> None:
        """What the top refuses beyond :func:`check_io_top_spec` (raise :class:`FredError`)."""

    def cut_fields(self) -> list[tuple[str, str, int]]:
        """This part's cut signals, LSB first (``(bus, name, width)``): the cut mesh wires'
        (:func:`~.mesh_network.mesh_cut_fields`); a top appends what else crosses, in an order
        both parts agree on."""
        return mesh_cut_fields(self.partition, self.part)

    def mine(self, rank: int) -> bool:
        """Whether NPU ``rank`` (its router and the units at its local port) is in this part."""
        return self.partition is None or self.partition.npu_part(rank) == self.part

    def my_controllers(self) -> list[int]:
        """The controllers of this part, in order: those whose NPU's router is here."""
        return [k for k in range(self.spec.controllers) if self.mine(self.spec.attach_rank(k))]

    def harness(self, m: Module) -> MeshIoHarness:
        """The harness inputs, the top's :meth:`program_registers` and the mesh
        (:func:`add_mesh`; one part's routers when cut), local ports left to the top."""
        start, prog_we, prog_unit, prog_reg, prog_data, rd_unit, rd_reg = harness_inputs(m, self)
        program = self.program_registers(m, prog_we, prog_reg, prog_data)
        cut = None
        if self.partition is None:
            routers, errors = add_mesh(m, self.spec.mesh)
        else:
            cut = cut_slices(self, self.cut_fields())
            routers, errors = add_mesh(m, self.spec.mesh, partition=self.partition, part=self.part, cut=cut)
        return MeshIoHarness(start, prog_we, prog_unit, prog_reg, prog_data, rd_unit, rd_reg, program,
                             routers, errors, cut)

    def program_registers(self, m: Module, prog_we, prog_reg, prog_data) -> tuple | None:
        """The top's program registers written from any unit, made before the mesh: by default
        :func:`io_program_registers` ``(stripe, mode, stall)``; a top whose registers are per
        NPU returns None and makes its own."""
        return io_program_registers(m, prog_we, prog_reg, prog_data)

    def counters(self, m: Module, h: MeshIoHarness, done: list, npu_read: list, controller_read: list) -> None:
        """:meth:`finish` then :meth:`read_port`, with no more global registers."""
        self.read_port(m, h, self.finish(m, h, done), npu_read, controller_read)

    def finish(self, m: Module, h: MeshIoHarness, done: list) -> MeshIoStatus:
        """``all_done`` while running and every condition of ``done`` holds; ``cycles`` from the
        cycle after ``start`` to ``all_done``; ``protocol_error`` sticky on any of ``h.errors``."""
        all_done, running, protocol_error = Signal(), Signal(), Signal()
        finished = running
        for condition in done:
            finished = finished & condition
        m.d.comb += [all_done.eq(finished), self.all_done.eq(all_done)]
        with m.If(sum(h.errors) != 0):
            m.d.sync += protocol_error.eq(1)
        count_cycles(m, h.start, running, all_done, self.cycles)
        return MeshIoStatus(all_done, running, protocol_error)

    def read_port(self, m: Module, h: MeshIoHarness, status: MeshIoStatus, npu_read: list, controller_read: list,
                  global_read: tuple = ()) -> None:
        """Unit r < npus reads ``npu_read[r]`` (a list of signals, register i at ``rd_reg`` i),
        :func:`controller_unit` k ``controller_read[k]``, ``GLOBAL_UNIT``
        :data:`IO_GLOBAL_READ` (``status``) then ``global_read``. ``npu_read`` and
        ``controller_read`` may be dicts (rank or k -> signals): one part of a cut mesh reads
        its own units (another unit reads 0)."""
        all_done, running, protocol_error = status
        with m.Switch(h.rd_unit):
            for rank, registers in _numbered(npu_read):
                with m.Case(rank):
                    read_register(m, h.rd_reg, self.rd_data, registers)
            for k, registers in _numbered(controller_read):
                with m.Case(controller_unit(self.spec, k)):
                    read_register(m, h.rd_reg, self.rd_data, registers)
            with m.Case(GLOBAL_UNIT):
                read_register(m, h.rd_reg, self.rd_data, [self.cycles, all_done, running, protocol_error,
                                                          *global_read])


def _numbered(units):
    """``(number, registers)`` of ``units``: a dict's items, or a list's by position."""
    return units.items() if isinstance(units, dict) else enumerate(units)
