"""``PacketIoIterationTop``: the packet FRED fabric with its I/O controllers, every NPU and every
controller run by the iteration's trace (docs/fabric_iteration.md, "The packet FRED fabric's I/O
iteration"). Fred-A/C: io-load and io-store (the striped chains) so far."""

from __future__ import annotations

from functools import partial

from amaranth import Module

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricSpec
from hdl.designs.fabric.packet_fabric_top import PacketFabricTop

from .stripe_trace_npu import StripeTraceNpu
from .traced_io_controller import TracedIoController
from .wafer_collective import WaferCollective, all_of, collective_cut, collective_cut_fields

__all__ = ["PacketIoIterationTop"]


class PacketIoIterationTop(PacketFabricTop):
    """:class:`PacketFabricTop` of ``spec`` (online routing, a stripe field for its
    ``io_controllers`` stripes) with a :class:`StripeTraceNpu` (``nodes`` trace nodes,
    ``programs`` loader entries) at every NPU port and a :class:`TracedIoController`
    (``controller_programs`` loader entries) at every controller port, and one
    :class:`WaferCollective` for the I/O collectives: a collective starts (every NPU's
    StripeNpu and every controller at once) when every NPU's sequencer has reached it and
    every controller has its program loaded (the controllers' deferred entries are released
    when the NPUs are all there), and ends for every NPU when every NPU has received every
    stripe and every controller's run is over (its memory side empty); the controllers then
    load their next program. Between two collectives no flit of either is in flight, so
    every unit restarts (packets numbered from 0) with each.

    What it runs: iterations whose collective nodes are all io-load or io-store on the wafer
    on Fred-A/C (the striped chains, :func:`hdl.compiler.io_stripe_program.io_stripe_program`,
    io-broadcast and io-reduce); refused by name: in-switch fabrics (Fred-B/D: the switch serves one stored flow per VC at a time),
    a fabric without controllers.

    A cut fabric (``partition`` and ``part``, the lock-step simulator): each part holds its
    L1s' NPUs and controllers and builds the collective over them, split
    (``WaferCollective(cut=...)``): this part's "every NPU arrived", "every controller ready"
    and "every unit done" cross the cut as one field each way apiece (:meth:`cut_fields`).

    Harness ports as :class:`PacketFabricTop`'s: unit r < npus is NPU r (its sequencer's and
    loader's registers; read registers :attr:`StripeTraceNpu.read_names`), unit npus + k
    controller k (its loader's; :data:`~.traced_io_controller.CONTROLLER_READ`); ``all_done``
    when every NPU's trace is done and every controller ran all its programs.
    """

    def __init__(self, spec: FabricSpec, *, nodes: int, programs: int, controller_programs: int,
                 packet_flits: int = 8, depth: int | None = None, overlap: bool = False,
                 partition=None, part: int | None = None, **kwargs):
        problem = ("" if spec.io_controllers else f"fabric {spec.name} has no I/O controllers")
        if not problem and spec.in_switch:
            problem = (f"{spec.name} streams I/O through in-switch stripe trees, whose stored flows the packet "
                       f"switch cannot interleave per packet yet; the I/O iteration runs Fred-A/C")
        if not problem and kwargs:
            problem = f"PacketIoIterationTop takes no {', '.join(sorted(kwargs))} (online routing, its own units)"
        if problem:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(problem)
        stripes = spec.io_controllers
        super().__init__(spec, online=True, packet_flits=packet_flits, depth=depth, stripes=stripes,
                         npu=partial(StripeTraceNpu, stripes=stripes, nodes=nodes, programs=programs, overlap=overlap),
                         controller=partial(TracedIoController, rate=spec.io_rate, programs=controller_programs),
                         partition=partition, part=part)

    def cut_fields(self) -> list[tuple[str, str, int]]:
        """:meth:`PacketFabricTop.cut_fields` and, last on both buses, the split collective's:
        part p drives ``io_arrived_<p>``, ``io_ready_<p>`` and ``io_done_<p>`` and reads the
        other part's, so part 0's ``cut_out`` is still part 1's ``cut_in``."""
        return [*super().cut_fields(), *collective_cut_fields(self.part)]

    def coordinate(self, m: Module, components: dict) -> None:
        spec = self.spec
        npus = [components[r] for r in sorted(components) if r < spec.npus]
        controllers = [components[e] for e in sorted(components) if e >= spec.npus]
        cut = None if self.partition is None else collective_cut(self, self.cut_fields(), self.part)
        c = WaferCollective(m, npus, ready=all_of(x.ready for x in controllers), cut=cut)
        m.d.comb += c.units_done.eq(all_of(x.run_done for x in npus + controllers))
        for x in npus + controllers:
            m.d.comb += x.run.eq(c.unit_start)
        for x in controllers:
            m.d.comb += [x.release.eq(c.reached), x.next.eq(c.over)]
