"""``MeshIoTop``: the 2D mesh with I/O controllers on its edge streaming weights to every NPU
over broadcast trees (docs/mesh_rtl.md, "I/O controllers on the mesh"; the Verilog top
``fred_mesh_io``)."""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring

from hdl.compiler.mesh_io_program import neighbour, tree_children
from hdl.contracts.errors import FredError
from hdl.contracts.mesh import LOCAL
from hdl.contracts.mesh_io import SEQ_BITS, MeshIoSpec
from hdl.designs.fabric.fabric_top import (GLOBAL_UNIT, count_cycles, harness_inputs,
                                           harness_ports, read_register)

from .io_checker import IoChecker
from .io_controller import IoController
from .mesh_network import add_mesh
from .mesh_wire import MeshWire
from .tree_forwarder import TreeForwarder

__all__ = ["MeshIoTop", "add_io_controllers", "add_controller_sources", "IO_NPU_READ", "IO_CONTROLLER_READ", "IO_GLOBAL_READ", "IO_REGS", "controller_unit",
           "check_io_top_spec", "io_program_registers"]

#: Read registers of an NPU unit (``rd_unit`` = rank), a controller unit
#: (:func:`controller_unit`) and the fabric (``GLOBAL_UNIT``).
IO_NPU_READ = ("received", "errors", "first_error", "complete", "idle")
IO_CONTROLLER_READ = ("sent", "done")
IO_GLOBAL_READ = ("cycles", "all_done", "running", "protocol_error")
#: Program registers (any unit): flits per controller, the tree mode (``IO_MODES`` index), and
#: the random idle of every controller and forwarder: each holds its injection in a cycle
#: when its 16-bit LFSR is below ``stall`` (``stall / 65536`` of the cycles; 0: never).
IO_REGS = ("stripe", "mode", "stall")


def _link(sink, source) -> list:
    """Drive link ``sink`` (valid, payload) from link ``source``."""
    return [sink.valid.eq(source.valid), sink.payload.eq(source.payload)]


def _random_hold(m: Module, name: str, seed: int, stall) -> Signal:
    """High in a cycle when a 16-bit Galois LFSR (x^16 + x^14 + x^13 + x^11 + 1, the NPU
    engine's) seeded ``seed`` is below ``stall``: random idle, a different sequence per seed."""
    lfsr = Signal(16, init=seed & 0xFFFF or 1, name=f"{name}_lfsr")
    hold = Signal(name=f"{name}_hold")
    m.d.sync += lfsr.eq(Mux(lfsr[0], (lfsr >> 1) ^ 0xB400, lfsr >> 1))
    m.d.comb += hold.eq(lfsr < stall)
    return hold


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
    """The I/O tops' program registers :data:`IO_REGS` (written from any unit): ``(stripe,
    mode, stall)``."""
    stripe = Signal(SEQ_BITS, name="stripe")
    mode = Signal(2, name="mode")
    stall = Signal(16, name="stall")
    for name, reg in zip(IO_REGS, (stripe, mode, stall)):
        with m.If(prog_we & (prog_reg == IO_REGS.index(name))):
            m.d.sync += reg.eq(prog_data)
    return stripe, mode, stall


def add_io_controllers(m: Module, spec: MeshIoSpec, routers, errors: list, start, stripe, mode,
                       hold_of) -> list[IoController]:
    """``spec.controllers`` :class:`IoController` s, controller k through a :class:`MeshWire`
    into the outward port of its NPU's router (``spec.ports()``, :func:`add_controller_sources`),
    started by ``start`` with ``stripe`` and ``mode``, held in a cycle by ``hold_of(k)`` (called
    once per controller, in order); their credit errors appended to ``errors``."""
    def make(k, dest):
        ctl = IoController(spec=spec, index=k, dest=dest)
        m.d.comb += [ctl.start.eq(start), ctl.stripe.eq(stripe), ctl.mode.eq(mode), ctl.hold.eq(hold_of(k))]
        return ctl
    return add_controller_sources(m, spec, routers, errors, make)


def add_controller_sources(m: Module, spec: MeshIoSpec, routers, errors: list, make_sender, *,
                           prefix: str = "io", select=None) -> list:
    """At each controller k the sender ``make_sender(k, dest)`` (``dest``: its NPU's router
    coordinates; members ``o``, ``credit``, ``error``) as submodule ``{prefix}_{k}``, through a
    :class:`MeshWire` (``{prefix}_wire_{k}``) into the outward port of its NPU's router
    (``spec.ports()``), the router input's credits back to it; its credit error appended to
    ``errors``. With ``select`` (the running op), ``make_sender`` returns ``{op: sender}``
    (submodules ``{prefix}_{k}_{op}``), the controller's units of the ops whose controller sends,
    one link shared by op (``hdl.designs.mesh.shared_input.share_input``); the list holds those
    dicts."""
    from .shared_input import share_input
    mesh = spec.mesh
    out = []
    for k, (row, col, side) in enumerate(spec.ports()):
        router = routers[(col + 1, row + 1)]
        if select is None:
            ctl = m.submodules[f"{prefix}_{k}"] = make_sender(k, (col + 1, row + 1))
            wire = m.submodules[f"{prefix}_wire_{k}"] = MeshWire(flit=mesh.flit, latency=mesh.link_latency)
            m.d.comb += [*_link(wire.i, ctl.o), *_link(router.i[side], wire.o),
                         wire.credit_in.eq(router.i_credit[side]), ctl.credit.eq(wire.credit_out)]
            errors.append(ctl.error)
        else:
            ctl = make_sender(k, (col + 1, row + 1))
            for op, unit in ctl.items():
                m.submodules[f"{prefix}_{k}_{op}"] = unit
                errors.append(unit.error)
            wire = m.submodules[f"{prefix}_wire_{k}"] = MeshWire(flit=mesh.flit, latency=mesh.link_latency)
            valid, payload, owners = share_input(m, f"{prefix}_{k}", select, {op: u.o for op, u in ctl.items()},
                                                 wire.credit_out)
            m.d.comb += [wire.i.valid.eq(valid), wire.i.payload.eq(payload), *_link(router.i[side], wire.o),
                         wire.credit_in.eq(router.i_credit[side]),
                         *(u.credit.eq(owners[op]) for op, u in ctl.items())]
        out.append(ctl)
    return out


class MeshIoTop(wiring.Component):
    """The routers and wires of ``spec.mesh`` (:func:`add_mesh`); ``spec.controllers``
    :class:`IoController` s, each through a :class:`MeshWire` into the outward port of its
    NPU's router (:func:`hdl.contracts.mesh_io.edge_io_ports`); at every NPU an
    :class:`IoChecker` and a :class:`TreeForwarder` on the router's local port.

    Harness ports as ``fred_mesh_fabric``'s: ``clk`` (power-on reset inside), ``start``,
    ``prog_we/prog_reg/prog_data`` (:data:`IO_REGS`; the unit is ignored), ``rd_unit/rd_reg``
    -> ``rd_data``, ``all_done`` (every NPU received every controller's stripe and holds
    nothing to forward), ``cycles`` (from the cycle after ``start`` to ``all_done``).
    ``protocol_error`` (read at ``GLOBAL_UNIT``): some router's or controller's credit error,
    router overflow or forwarding-queue overflow (must stay 0).
    """

    def __init__(self, spec: MeshIoSpec):
        check_io_top_spec("MeshIoTop", spec)
        self.spec = spec
        super().__init__(harness_ports())

    def elaborate(self, platform) -> Module:
        m = Module()
        start, prog_we, _, prog_reg, prog_data, rd_unit, rd_reg = harness_inputs(m, self)
        spec, mesh = self.spec, self.spec.mesh
        stripe, mode, stall = io_program_registers(m, prog_we, prog_reg, prog_data)
        routers, errors = add_mesh(m, mesh)
        controllers = self._controllers(m, routers, errors, start, stripe, mode, stall)
        children = tree_children(spec)
        checkers, idle = [], []
        for rank in range(mesh.npus):
            router = routers[mesh.position(rank)]
            dests = {p: mesh.position(neighbour(spec, rank, p)) for per in children[rank] for p in per}
            fwd = m.submodules[f"forward_{rank}"] = TreeForwarder(spec=spec, children=children[rank], dests=dests)
            chk = m.submodules[f"check_{rank}"] = IoChecker(spec=spec)
            m.d.comb += [
                fwd.start.eq(start), chk.start.eq(start), chk.expect.eq(stripe * spec.controllers),
                fwd.hold.eq(_random_hold(m, f"npu{rank}", rank + 1, stall)),
                *_link(fwd.eject, router.o[LOCAL]), *_link(chk.eject, router.o[LOCAL]),
                # the NPU takes every flit at once (its memory): the credit returns on arrival
                router.o_credit[LOCAL].eq(router.o[LOCAL].valid << router.o[LOCAL].payload.vc),
                *_link(router.i[LOCAL], fwd.o), fwd.credit.eq(router.i_credit[LOCAL]),
            ]
            errors.append(fwd.overflow)
            checkers.append(chk)
            idle.append(fwd.idle)
        self._counters(m, checkers, idle, controllers, errors, start, rd_unit, rd_reg)
        return m

    def _controllers(self, m, routers, errors, start, stripe, mode, stall) -> list[IoController]:
        return add_io_controllers(m, self.spec, routers, errors, start, stripe, mode,
                                  lambda k: _random_hold(m, f"io{k}", 101 + k, stall))

    def _counters(self, m, checkers, idle, controllers, errors, start, rd_unit, rd_reg):
        all_done, running, protocol_error = Signal(), Signal(), Signal()
        complete = sum(c.complete for c in checkers) == len(checkers)
        m.d.comb += [all_done.eq(running & complete & (sum(idle) == len(idle))
                                 & (sum(c.done for c in controllers) == len(controllers))),
                     self.all_done.eq(all_done)]
        with m.If(sum(errors) != 0):
            m.d.sync += protocol_error.eq(1)
        count_cycles(m, start, running, all_done, self.cycles)
        with m.Switch(rd_unit):
            for rank, (chk, i) in enumerate(zip(checkers, idle)):
                with m.Case(rank):
                    read_register(m, rd_reg, self.rd_data, [chk.received, chk.errors, chk.first_error,
                                                            chk.complete, i])
            for k, ctl in enumerate(controllers):
                with m.Case(controller_unit(self.spec, k)):
                    read_register(m, rd_reg, self.rd_data, [ctl.sent, ctl.done])
            with m.Case(GLOBAL_UNIT):
                read_register(m, rd_reg, self.rd_data, [self.cycles, all_done, running, protocol_error])
