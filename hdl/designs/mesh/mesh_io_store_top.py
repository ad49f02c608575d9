"""``MeshIoStoreTop``: the 2D mesh reducing every NPU's gradients out to the I/O controllers on
its edge over reversed broadcast trees (the model's ``io-store``; docs/mesh_rtl.md, "I/O
controllers on the mesh"; the Verilog top ``fred_mesh_io_store``)."""

from __future__ import annotations

from amaranth import Module, Mux, Signal

from hdl.compiler.mesh_io_program import tree_children, tree_parents
from hdl.contracts.errors import FredError
from hdl.contracts.mesh_io import IO_MODES, STORE_SEQ_BITS, MeshIoSpec

from .controller_links import add_controller_sinks
from .mesh_io_harness import MeshIoHarnessTop, npu_local_port, random_hold
from .reduce_forwarder import LEAF_ORDERS, ReduceForwarder
from .store_checker import StoreChecker

__all__ = ["MeshIoStoreTop", "add_store_sinks", "tree_share", "STORE_NPU_READ", "STORE_CONTROLLER_READ", "STORE_FP16_CONTROLLER_READ",
           "store_controller_read"]

#: Read registers of an NPU unit (``rd_unit`` = rank) and a controller unit
#: (``controller_unit``); the fabric's are ``IO_GLOBAL_READ``, the program registers ``IO_REGS``
#: (``hdl.designs.mesh.mesh_io_harness``).
STORE_NPU_READ = ("idle",)
STORE_CONTROLLER_READ = ("received", "errors", "first_error", "complete")
#: fp16: a controller's read registers also hold its two trees' hashes (``StoreChecker.hash``).
STORE_FP16_CONTROLLER_READ = (*STORE_CONTROLLER_READ, "hash0", "hash1")


def store_controller_read(spec: MeshIoSpec) -> tuple[str, ...]:
    """A controller unit's read registers for ``spec.mesh.dtype``."""
    return STORE_FP16_CONTROLLER_READ if spec.mesh.dtype == "fp16" else STORE_CONTROLLER_READ


def tree_share(m: Module, stripe, mode, k: int, vc: int) -> Signal:
    """Flits of tree ``2 k + vc`` in logic: ``hdl.compiler.mesh_io_program.tree_flits``."""
    out = Signal(STORE_SEQ_BITS, name=f"tree_flits_{2 * k + vc}")
    half_up, half_down = (stripe + 1) >> 1, stripe >> 1
    first = (vc + k) % 2          # on the split trees an odd controller starts on the Y-X tree
    m.d.comb += out.eq(Mux(mode == IO_MODES.index("tree-split"), half_down if first else half_up,
                           Mux(mode == vc, stripe, 0)))
    return out


def add_store_sinks(m: Module, spec: MeshIoSpec, routers, errors: list, start, shares) -> list[StoreChecker]:
    """At each controller k a :class:`StoreChecker` (started by ``start``, expecting
    ``shares[2k] + shares[2k + 1]`` flits: :func:`tree_share`) behind
    :func:`add_controller_sinks`'s wire and receive queue."""
    return add_controller_sinks(m, spec, routers, errors, start,
                                lambda k: StoreChecker(spec=spec, index=k),
                                lambda k: shares[2 * k] + shares[2 * k + 1])


class MeshIoStoreTop(MeshIoHarnessTop):
    """The routers and wires of ``spec.mesh`` (:func:`add_mesh`); at every NPU a
    :class:`ReduceForwarder` on the router's local port (partial-sum memory of ``max_stripe``
    flits per tree); at each controller a :class:`StoreChecker` fed through a
    :class:`MeshWire` from the outward port of its NPU's router (the root sends there by
    addressing the I/O position next to it) and a ``spec.mesh.depth``-flit receive queue the
    controller drains at its link's rate ``spec.io_rate`` (a credit returns per flit drained:
    the controller's link, not the router's edge port, sets the rate).

    ``leaf_order`` (:data:`~.reduce_forwarder.LEAF_ORDERS`): the order in which every NPU
    interleaves its leaf trees (the default ``tree``; the others measure what the order costs
    at latency-bound sizes, docs/mesh_rtl.md, "Gradient reduce-out").

    Harness ports as ``fred_mesh_io``'s; ``all_done``: every controller received its trees'
    flits and no NPU has anything left to send; ``protocol_error``: a router's credit error or
    overflow, or a forwarder's send-queue overflow.
    """

    def __init__(self, spec: MeshIoSpec, *, max_stripe: int = 256, leaf_order: str = "tree"):
        self.max_stripe, self.leaf_order = max_stripe, leaf_order
        super().__init__(spec)

    def check(self, spec: MeshIoSpec) -> None:
        if self.leaf_order not in LEAF_ORDERS:
            self._MustUse__silence = True   # never built: no "created but never used" warning
            raise FredError(f"leaf_order must be one of {', '.join(LEAF_ORDERS)}, got {self.leaf_order!r}")

    def elaborate(self, platform) -> Module:
        m = Module()
        spec, mesh = self.spec, self.spec.mesh
        h = self.harness(m)
        stripe, mode, stall = h.program
        shares = [tree_share(m, stripe, mode, k, vc) for k in range(spec.controllers) for vc in (0, 1)]
        children, parents = tree_children(spec), tree_parents(spec)
        idle = []
        for rank in range(mesh.npus):
            router = h.routers[mesh.position(rank)]
            fwd = m.submodules[f"reduce_{rank}"] = ReduceForwarder(
                spec=spec, rank=rank, children=children[rank], parents=parents[rank], max_stripe=self.max_stripe,
                leaf_order=self.leaf_order)
            m.d.comb += [
                fwd.start.eq(h.start), *(fwd.per_tree[t].eq(s) for t, s in enumerate(shares)),
                fwd.hold.eq(random_hold(m, f"npu{rank}", rank + 1, stall)),
                # every arrival is added at once: the credit returns on arrival
                *npu_local_port(router, [fwd.eject], fwd),
            ]
            h.errors.append(fwd.overflow)
            idle.append(fwd.idle)
        sinks = add_store_sinks(m, spec, h.routers, h.errors, h.start, shares)
        self.counters(m, h, [sum(s.complete for s in sinks) == len(sinks), sum(idle) == len(idle)],
                      [[i] for i in idle],
                      [[s.received, s.errors, s.first_error, s.complete, *getattr(s, "hash", ())] for s in sinks])
        return m
