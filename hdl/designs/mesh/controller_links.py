"""The I/O controllers' links into and out of the mesh (docs/mesh_rtl.md, "I/O controllers on
the mesh"), shared by every mesh I/O top: :func:`add_controller_sources` (a sender per
controller through a :class:`MeshWire` into the outward port of its NPU's router) and
:func:`add_controller_sinks` (a receiver per controller behind a wire and a receive queue drained
at the controller link's rate)."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import fifo

from hdl.contracts.mesh_io import MeshIoSpec

from .mesh_io_harness import link
from .mesh_wire import MeshWire
from .rate_token import RateToken
from .shared_input import share_input

__all__ = ["add_controller_sources", "add_controller_sinks"]


def add_controller_sources(m: Module, spec: MeshIoSpec, routers, errors: list, make_sender, *,
                           prefix: str = "io", select=None, only=None) -> list:
    """At each controller k the sender ``make_sender(k, dest)`` (``dest``: its NPU's router
    coordinates; members ``o``, ``credit``, ``error``) as submodule ``{prefix}_{k}``, through a
    :class:`MeshWire` (``{prefix}_wire_{k}``) into the outward port of its NPU's router
    (``spec.ports()``), the router input's credits back to it; its credit error appended to
    ``errors``. With ``select`` (the running op), ``make_sender`` returns ``{op: sender}``
    (submodules ``{prefix}_{k}_{op}``), the controller's units of the ops whose controller sends,
    one link shared by op (``hdl.designs.mesh.shared_input.share_input``); the list holds those
    dicts. ``only`` (default None: every controller): the controllers to build, in order (one
    part of a cut mesh: those at its routers); the list holds theirs."""
    mesh = spec.mesh
    out = []
    for k, (row, col, side) in _controllers(spec, only):
        router = routers[(col + 1, row + 1)]
        if select is None:
            ctl = m.submodules[f"{prefix}_{k}"] = make_sender(k, (col + 1, row + 1))
            wire = m.submodules[f"{prefix}_wire_{k}"] = MeshWire(flit=mesh.flit, latency=mesh.link_latency)
            m.d.comb += [*link(wire.i, ctl.o), *link(router.i[side], wire.o),
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
            m.d.comb += [wire.i.valid.eq(valid), wire.i.payload.eq(payload), *link(router.i[side], wire.o),
                         wire.credit_in.eq(router.i_credit[side]),
                         *(u.credit.eq(owners[op]) for op, u in ctl.items())]
        out.append(ctl)
    return out


def add_controller_sinks(m: Module, spec: MeshIoSpec, routers, errors: list, start, make_checker, expect_of, *,
                         prefix: str = "store", hold_of=None, select=None, only=None) -> list:
    """At each controller k the checker ``make_checker(k)`` (members ``start``, ``expect``,
    ``i``; started by ``start``, expecting ``expect_of(k)`` flits), fed through a
    :class:`MeshWire` from the outward port of its NPU's router and a receive queue of
    ``2 x depth`` flits drained at the controller link's rate (``spec.io_rate``, paced:
    :class:`RateToken`'s paced counter, accumulating while the queue holds a flit, so every
    flit takes its whole ``b / a`` cycles, the first included), a credit returned per flit
    drained; ``hold_of(k)`` (default none) holds controller k's drain in a
    cycle (the bench's random backpressure). A queue overflow is appended to ``errors``.
    Submodules ``{prefix}_{k}``, ``{prefix}_wire_{k}``, ``{prefix}_queue_{k}``, ``{prefix}_rate_{k}``.
    With ``select`` (the running op), ``make_checker(k)`` returns ``{op: checker}`` (submodules
    ``{prefix}_{k}_{op}``), the controller's receivers of the ops whose controller receives:
    each drained flit goes to the running op's, and ``start`` / ``expect_of`` are unused (the
    caller starts each checker with its op); the list holds those dicts. ``only``: as
    :func:`add_controller_sources`'s."""
    mesh = spec.mesh
    sinks, overflow = [], Signal()
    errors.append(overflow)
    for k, (row, col, side) in _controllers(spec, only):
        router = routers[(col + 1, row + 1)]
        if select is None:
            sink = m.submodules[f"{prefix}_{k}"] = make_checker(k)
            units = {None: sink}
        else:
            sink = units = make_checker(k)
            for op, unit in units.items():
                m.submodules[f"{prefix}_{k}_{op}"] = unit
        wire = m.submodules[f"{prefix}_wire_{k}"] = MeshWire(flit=mesh.flit, latency=mesh.link_latency)
        width = len(wire.o.payload.as_value())
        queue = m.submodules[f"{prefix}_queue_{k}"] = fifo.SyncFIFOBuffered(width=width, depth=mesh.depth * 2)
        # paced, as every controller: the memory writes a flit in b / a cycles from when it is
        # there (nothing saved while the queue is empty), so the last flit is stored b / a
        # cycles after it arrived at an idle controller, not at once
        rate = m.submodules[f"{prefix}_rate_{k}"] = RateToken(spec.io_rate, paced=True)
        drain = queue.r_rdy & rate.token if hold_of is None else queue.r_rdy & rate.token & ~hold_of(k)
        m.d.comb += [rate.waiting.eq(queue.r_rdy), rate.restart.eq(start if select is None else 0)]
        if select is None:
            m.d.comb += [sink.start.eq(start), sink.expect.eq(expect_of(k))]
        first = next(iter(units.values()))
        m.d.comb += [*link(wire.i, router.o[side]),
                     queue.w_en.eq(wire.o.valid), queue.w_data.eq(wire.o.payload.as_value()),
                     queue.r_en.eq(drain), rate.spend.eq(drain),
                     *(u.i.valid.eq(drain if op is None else drain & (select == op)) for op, u in units.items()),
                     *(u.i.payload.eq(queue.r_data) for u in units.values()),
                     wire.credit_in.eq(drain << first.i.payload.vc),
                     router.o_credit[side].eq(wire.credit_out)]
        with m.If(queue.w_en & ~queue.w_rdy):
            m.d.sync += overflow.eq(1)
        sinks.append(sink)
    return sinks


def _controllers(spec: MeshIoSpec, only) -> list:
    """``(k, (row, col, side))`` of the controllers ``only`` names (None: every one), in order."""
    ports = spec.ports()
    return list(enumerate(ports)) if only is None else [(k, ports[k]) for k in only]
