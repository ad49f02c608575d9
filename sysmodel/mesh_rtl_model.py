"""The system model on the RTL mesh fabric's own platform (docs/mesh_rtl.md, "The mesh fabric").

:func:`mesh_platform` is the model's :class:`Platform` of a :class:`MeshFabricSpec`: the RTL FRED
fabric's platform (``sysmodel.fabric_model.fabric_platform``: its clock and flit size, NPU
links of one flit per cycle each way) with the mesh of the spec: ``rows`` x ``cols``, links of
``link_rate`` flits per cycle (750 GBps beside the NPU's 3 TBps is 1/4), and a hop latency of
what a flit spends per hop in the RTL: the wire's ``link_latency`` plus the router's
(``hdl.contracts.mesh.router_latency``), a forwarding member's latency of its own router, its
engine port's ejection and its engine (``npu_receive_cycles`` + ``engine_forward_cycles``: a
link's latency counts the router a flit enters, not the destination's ejection through its
router and engine port), whole flits per piece of an all-reduce's chunks (``mesh_flit_bytes``:
the engines cut a chunk into whole-flit pieces, padding it), no I/O controllers. :func:`mesh_model_cycles` gives
the model's cycles for the all-reduce the RTL runs, with the model's own algorithm choice.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hdl.contracts.fabric import engine_forward_cycles, fabric_spec
from hdl.contracts.mesh import MeshFabricSpec, npu_receive_cycles, router_latency
from hdl.contracts.mesh_io import MeshIoSpec, reduce_member_cycles
from hdl.contracts.errors import FredError
from sysmodel.collectives import Collective, build_network, evaluate, mesh_2d_split, rectangle
from sysmodel.fabric_model import fabric_platform
from sysmodel.platform import Platform

__all__ = ["MeshEstimate", "mesh_platform", "mesh_model_cycles", "mesh_split", "mesh_io_platform",
           "mesh_io_model_cycles"]


def mesh_platform(spec: MeshFabricSpec, *, characterization=None) -> Platform:
    """The model's platform of the RTL mesh (module docstring); the clock and flit of the
    characterization's Fred-A L1 point, as the FRED fabric's platform."""
    base, _ = fabric_platform(fabric_spec("fred-a"), characterization=characterization)
    timing = base.switch_at("l1")
    cycle_ns = timing.cycle_s * 1e9
    npu_gbps = base.npu_send_gbps
    a, b = spec.link_rate
    return replace(base, name="rtl-mesh", mesh_rows=spec.rows, mesh_cols=spec.cols,
                   mesh_link_gbps=npu_gbps * a / b,
                   # the engines send whole flits per piece of a chunk (hdl.compiler.algorithms.two_chunk_flits)
                   mesh_flit_bytes=timing.flit_bytes,
                   link_latency_ns=(spec.link_latency + router_latency()) * cycle_ns,
                   # a member's receive and send on: its own router and engine port, then the engine
                   forward_latency_ns=(npu_receive_cycles() + engine_forward_cycles(spec.dtype)) * cycle_ns,
                   io_controllers=0)


@dataclass
class MeshEstimate:
    cycles: float
    bandwidth_cycles: float
    algorithm: str
    busiest_link_flits: float


def mesh_model_cycles(spec: MeshFabricSpec, groups, size_flits: int, *, platform: Platform | None = None,
                      algorithm: str | None = None, op: str = "all-reduce") -> MeshEstimate:
    """The model's cycles for ``op`` of ``size_flits`` per NPU on each of ``groups`` at once, on
    :func:`mesh_platform` (``platform`` to reuse one): an all-reduce of every group, or a
    multicast from each group's first rank to the rest."""
    platform = platform or mesh_platform(spec)
    timing = platform.switch_at("l1")
    size = size_flits * timing.flit_bytes
    if op == "multicast":
        collectives = [Collective("multicast", group=tuple(g[1:]), size=size, root=g[0]) for g in groups]
    else:
        collectives = [Collective(op, group=tuple(g), size=size) for g in groups]
    result = evaluate(platform, "mesh", collectives, algorithm=algorithm)
    return MeshEstimate(cycles=result.time_s / timing.cycle_s,
                        bandwidth_cycles=result.bandwidth_time_s / timing.cycle_s,
                        algorithm=",".join(result.algorithms),
                        busiest_link_flits=result.busiest_link_bytes / timing.flit_bytes)


def mesh_split(spec: MeshFabricSpec, group, size_flits: int, *, platform: Platform | None = None) -> float:
    """The share of the buffer the model gives the rows-first chunk of the hierarchical 2D
    all-reduce of ``size_flits`` per NPU on ``group`` (``sysmodel.collectives.mesh_2d_split``:
    it depends on the size through the stages' latencies); 0.5 for a group that is not a
    rectangle (the ring's two directions carry half each)."""
    platform = platform or mesh_platform(spec)
    net = build_network(platform, "mesh")
    rect = rectangle(net, group)
    if rect is None:
        return 0.5
    return mesh_2d_split(net, "all-reduce", *rect, size_flits * platform.switch_at("l1").flit_bytes)[0]


def mesh_io_platform(spec: MeshIoSpec, *, characterization=None) -> Platform:
    """:func:`mesh_platform` of ``spec.mesh`` with ``spec.controllers`` I/O controllers on the
    edge (the model places them as the RTL: ``hdl.contracts.mesh_io.edge_io_ports``), each link
    ``io_rate`` of the NPU's port (the RTL's cycle moves one flit through that port), and a
    reducing member's latency (``hdl.contracts.mesh_io.reduce_member_cycles`` of the mesh's
    dtype: fp16 adds its three adder levels) as the platform's reducer latency
    (``reduce_forward_latency_ns``): the io-store's reduce trees charge it per member on the
    deepest leaf's path (``sysmodel.collectives._mesh_io``). The NPUs' forwarding latency stays
    the mesh engines' (:func:`mesh_platform`), so an all-reduce or multicast on this platform
    (an iteration's, docs/fabric_iteration.md) is timed as on the mesh without controllers."""
    base = mesh_platform(spec.mesh, characterization=characterization)
    cycle_ns = base.switch_at("l1").cycle_s * 1e9
    a, b = spec.io_rate
    # an io-store member's latency is its reducer's (ReduceForwarder), not the fabric engines'
    return replace(base, name="rtl-mesh-io", io_controllers=spec.controllers,
                   io_gbps=base.npu_send_gbps * a / b,
                   reduce_forward_latency_ns=reduce_member_cycles(spec.mesh.dtype) * cycle_ns)


def mesh_io_model_cycles(spec: MeshIoSpec, stripe_flits: int, *, mode: str | None = None,
                         platform: Platform | None = None, op: str = "io-load") -> MeshEstimate:
    """The model's cycles for weight streaming (``io-load``) of ``stripe_flits`` per controller
    to every NPU of the mesh, with the model's fastest trees or those ``mode`` names
    (``tree-xy``, ``tree-yx``, ``tree-split``). ``op="io-store"``: the gradient reduce-out
    instead (the same trees reversed, every NPU's stripe reduced into the controllers);
    ``io-write`` / ``io-read``: a checkpoint spill, every NPU's own ``stripe_flits`` to / from
    every controller as unicasts (the model's ``unicast``; ``mode`` must be None)."""
    if op not in ("io-load", "io-store", "io-write", "io-read"):
        raise FredError(f"the mesh's I/O ops are io-load, io-store, io-write and io-read, got {op!r}")
    if op in ("io-write", "io-read") and mode is not None:
        raise FredError(f"{op} runs unicasts, not trees: got mode {mode!r}")
    platform = platform or mesh_io_platform(spec)
    timing = platform.switch_at("l1")
    size = stripe_flits * spec.controllers * timing.flit_bytes
    result = evaluate(platform, "mesh", [Collective(op, group=tuple(range(spec.mesh.npus)), size=size)],
                      algorithm=mode)
    return MeshEstimate(cycles=result.time_s / timing.cycle_s,
                        bandwidth_cycles=result.bandwidth_time_s / timing.cycle_s,
                        algorithm=",".join(result.algorithms),
                        busiest_link_flits=result.busiest_link_bytes / timing.flit_bytes)
