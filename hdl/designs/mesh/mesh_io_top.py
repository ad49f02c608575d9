"""``MeshIoTop``: the 2D mesh with I/O controllers on its edge streaming weights to every NPU
over broadcast trees (docs/mesh_rtl.md, "I/O controllers on the mesh"; the Verilog top
``fred_mesh_io``)."""

from __future__ import annotations

from amaranth import Module

from hdl.compiler.mesh_io_program import neighbour, tree_children
from hdl.contracts.mesh_io import MeshIoSpec

from .io_checker import IoChecker
from .controller_links import add_controller_sources
from .io_controller import IoController
from .mesh_io_harness import MeshIoHarnessTop, npu_local_port, random_hold
from .tree_forwarder import TreeForwarder

__all__ = ["MeshIoTop", "add_io_controllers", "IO_NPU_READ", "IO_CONTROLLER_READ"]

#: Read registers of an NPU unit (``rd_unit`` = rank), a controller unit
#: (:func:`~.mesh_io_harness.controller_unit`); the fabric's are
#: :data:`~.mesh_io_harness.IO_GLOBAL_READ`, the program registers
#: :data:`~.mesh_io_harness.IO_REGS`.
IO_NPU_READ = ("received", "errors", "first_error", "complete", "idle")
IO_CONTROLLER_READ = ("sent", "done")


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


class MeshIoTop(MeshIoHarnessTop):
    """The routers and wires of ``spec.mesh`` (:func:`add_mesh`); ``spec.controllers``
    :class:`IoController` s, each through a :class:`MeshWire` into the outward port of its
    NPU's router (:func:`hdl.contracts.mesh_io.edge_io_ports`); at every NPU an
    :class:`IoChecker` and a :class:`TreeForwarder` on the router's local port.

    Harness ports as ``fred_mesh_fabric``'s (:class:`~.mesh_io_harness.MeshIoHarnessTop`):
    ``clk`` (power-on reset inside), ``start``, ``prog_we/prog_reg/prog_data``
    (:data:`~.mesh_io_harness.IO_REGS`; the unit is ignored), ``rd_unit/rd_reg`` -> ``rd_data``
    (:data:`IO_NPU_READ`, :data:`IO_CONTROLLER_READ`, ``IO_GLOBAL_READ``), ``all_done`` (every
    NPU received every controller's stripe and holds nothing to forward), ``cycles`` (from the
    cycle after ``start`` to ``all_done``). ``protocol_error`` (read at ``GLOBAL_UNIT``): some
    router's or controller's credit error, router overflow or forwarding-queue overflow (must
    stay 0).
    """

    def elaborate(self, platform) -> Module:
        m = Module()
        spec, mesh = self.spec, self.spec.mesh
        h = self.harness(m)
        stripe, mode, stall = h.program
        controllers = add_io_controllers(m, spec, h.routers, h.errors, h.start, stripe, mode,
                                         lambda k: random_hold(m, f"io{k}", 101 + k, stall))
        children = tree_children(spec)
        checkers, idle = [], []
        for rank in range(mesh.npus):
            router = h.routers[mesh.position(rank)]
            dests = {p: mesh.position(neighbour(spec, rank, p)) for per in children[rank] for p in per}
            fwd = m.submodules[f"forward_{rank}"] = TreeForwarder(spec=spec, children=children[rank], dests=dests)
            chk = m.submodules[f"check_{rank}"] = IoChecker(spec=spec)
            m.d.comb += [
                fwd.start.eq(h.start), chk.start.eq(h.start), chk.expect.eq(stripe * spec.controllers),
                fwd.hold.eq(random_hold(m, f"npu{rank}", rank + 1, stall)),
                *npu_local_port(router, [fwd.eject, chk.eject], fwd),
            ]
            h.errors.append(fwd.overflow)
            checkers.append(chk)
            idle.append(fwd.idle)
        self.counters(m, h, [sum(c.complete for c in checkers) == len(checkers), sum(idle) == len(idle),
                             sum(c.done for c in controllers) == len(controllers)],
                      [[c.received, c.errors, c.first_error, c.complete, i] for c, i in zip(checkers, idle)],
                      [[c.sent, c.done] for c in controllers])
        return m
