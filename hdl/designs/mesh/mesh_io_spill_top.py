"""``MeshIoSpillTop``: the 2D mesh writing every NPU's activation checkpoint out to the I/O
controllers on its edge and reading it back (the model's ``io-write`` / ``io-read``: one stripe
per NPU and controller, unicasts through the X-Y / Y-X routers; docs/mesh_rtl.md, "Checkpoint
spills"; the Verilog top ``fred_mesh_io_spill``)."""

from __future__ import annotations

from amaranth import Module, Mux, Signal

from hdl.compiler.mesh_io_program import spill_dests, spill_order
from hdl.contracts.mesh_io import SPILL_OPS, MeshIoSpec

from .controller_links import add_controller_sinks, add_controller_sources
from .mesh_io_harness import MeshIoHarnessTop, npu_local_port, random_hold
from .spill_checker import SpillChecker
from .spill_sender import SpillSender

__all__ = ["MeshIoSpillTop", "SPILL_READ", "add_spill_units", "npu_spill_sender", "controller_spill_sender"]

#: Read registers of an NPU unit (``rd_unit`` = rank) and of a controller unit
#: (``controller_unit``): the unit's checker (what it received, io-read at an NPU, io-write at
#: a controller) and its sender's flits. The fabric's are ``IO_GLOBAL_READ``; the program
#: registers ``IO_REGS``, the ``mode`` register holding the op (``SPILL_OPS`` index).
SPILL_READ = ("received", "errors", "first_error", "complete", "sent")


def npu_spill_sender(spec: MeshIoSpec, rank: int) -> SpillSender:
    """NPU ``rank``'s io-write sender: its stripe to every controller, nearest first
    (``spill_order``), addressed to the I/O position beside the controller's router on the VC
    that reaches it (``spill_dests``)."""
    dests = spill_dests(spec)
    return SpillSender(spec=spec, dests=[(*dests[k], rank, k) for k in spill_order(spec, "io-write", rank)])


def controller_spill_sender(spec: MeshIoSpec, k: int) -> SpillSender:
    """Controller ``k``'s io-read sender: every NPU's stripe, farthest first (``spill_order``),
    on VC 0 (X-Y, the model's route), at the controller link's rate, paced as every controller
    (docs/mesh_rtl.md)."""
    return SpillSender(spec=spec, rate=spec.io_rate, paced=True,
                       dests=[(*spec.mesh.position(r), 0, r, k) for r in spill_order(spec, "io-read", k)])


def add_spill_units(m: Module, spec: MeshIoSpec, routers, errors: list, write_start, read_start, stripe, *,
                    read_stripe=None, controller_hold=lambda k: 0, sink_hold=None):
    """The controllers' side of both spills: at each controller an io-read sender
    (:func:`controller_spill_sender`, started by ``read_start``, ``read_stripe`` flits per NPU
    (default ``stripe``), held by ``controller_hold(k)``) into its router port, and an
    io-write sink (a receive queue drained at the controller's rate, held by ``sink_hold(k)``,
    into a :class:`SpillChecker` started by ``write_start``, expecting ``stripe`` flits per
    NPU: :func:`add_controller_sinks`). Returns ``(senders, sinks)``."""
    npus = spec.mesh.npus
    read_stripe = stripe if read_stripe is None else read_stripe

    def make_sender(k, dest):
        sender = controller_spill_sender(spec, k)
        m.d.comb += [sender.start.eq(read_start), sender.stripe.eq(read_stripe), sender.hold.eq(controller_hold(k))]
        return sender

    senders = add_controller_sources(m, spec, routers, errors, make_sender, prefix="spill_io")
    sinks = add_controller_sinks(m, spec, routers, errors, write_start,
                                 lambda k: SpillChecker(spec=spec, at="controller", index=k, vc=spill_dests(spec)[k][2]),
                                 lambda k: stripe * npus, prefix="spill_sink", hold_of=sink_hold)
    return senders, sinks


class MeshIoSpillTop(MeshIoHarnessTop):
    """The routers and wires of ``spec.mesh`` (:func:`add_mesh`); at each controller an io-read
    sender into, and an io-write sink out of, its NPU's router port (:func:`add_spill_units`);
    at every NPU an io-write sender (:func:`npu_spill_sender`) into its router's local port and
    an io-read :class:`SpillChecker` out of it (the NPU takes every flit at once: the credit
    returns on arrival).

    ``mode`` register: the op (``SPILL_OPS`` index: 0 io-write, 1 io-read), read at ``start``;
    ``stripe``: flits per NPU and controller; ``stall``: every sender and controller sink idles
    in a cycle with probability ``stall / 65536`` (its own LFSR).

    Harness ports as ``fred_mesh_io``'s; ``all_done``: io-write, every NPU sent its stripes and
    every controller checked one from each NPU; io-read, every controller sent and every NPU
    checked one from each controller. ``protocol_error``: a router's credit error or overflow,
    a sender's credit error, or a sink queue overflow.
    """

    def program_registers(self, m: Module, prog_we, prog_reg, prog_data) -> tuple:
        """``(stripe, stall, reading)``: ``reading`` the ``mode`` register naming io-read."""
        stripe, mode, stall = super().program_registers(m, prog_we, prog_reg, prog_data)
        reading = Signal()
        m.d.comb += reading.eq(mode == SPILL_OPS.index("io-read"))
        return stripe, stall, reading

    def elaborate(self, platform) -> Module:
        m = Module()
        spec, mesh = self.spec, self.spec.mesh
        h = self.harness(m)
        stripe, stall, reading = h.program
        write_start, read_start = h.start & ~reading, h.start & reading
        senders, sinks = add_spill_units(
            m, spec, h.routers, h.errors, write_start, read_start, stripe,
            controller_hold=lambda k: random_hold(m, f"io{k}", 101 + k, stall),
            sink_hold=lambda k: random_hold(m, f"sink{k}", 201 + k, stall))
        npu_senders, checkers = [], []
        for rank in range(mesh.npus):
            router = h.routers[mesh.position(rank)]
            send = m.submodules[f"spill_send_{rank}"] = npu_spill_sender(spec, rank)
            chk = m.submodules[f"spill_check_{rank}"] = SpillChecker(spec=spec, at="npu", index=rank, vc=0)
            m.d.comb += [
                send.start.eq(write_start), send.stripe.eq(stripe),
                send.hold.eq(random_hold(m, f"npu{rank}", rank + 1, stall)),
                chk.start.eq(read_start), chk.expect.eq(stripe * spec.controllers),
                *npu_local_port(router, [chk.i], send),
            ]
            h.errors.append(send.error)
            npu_senders.append(send)
            checkers.append(chk)
        write_done = _all([s.done for s in npu_senders] + [c.complete for c in sinks])
        read_done = _all([s.done for s in senders] + [c.complete for c in checkers])
        self.counters(m, h, [Mux(reading, read_done, write_done)],
                      [[c.received, c.errors, c.first_error, c.complete, s.sent] for c, s in zip(checkers, npu_senders)],
                      [[c.received, c.errors, c.first_error, c.complete, s.sent] for c, s in zip(sinks, senders)])
        return m


def _all(signals):
    return sum(signals) == len(signals)
