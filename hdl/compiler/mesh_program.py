"""Engine programs of a collective on the RTL mesh fabric (docs/mesh_rtl.md, "The mesh fabric").

The algorithms are the system model's for the mesh (``sysmodel/collectives.py``), taken from the
same plans (:mod:`hdl.compiler.algorithms`):

* ``hierarchical-2d`` (an all-reduce of a group that fills a rectangle, e.g. the wafer): two
  chunks at once, chunk 0 (VC 0, X-Y) rows first (reduce-scatter in each row, all-reduce in
  each column, all-gather in each row), chunk 1 (VC 1, Y-X) columns first; ``split`` of the
  buffer goes to chunk 0 (the model chooses the split that balances the links);
* ``ring`` (any other group): a ring all-reduce in snake order run both ways at once, half
  the buffer clockwise on VC 0 (X-Y), half counter-clockwise on VC 1 (Y-X: each reverse hop
  takes the links of its forward hop, the other way);
* ``chain`` (a multicast: each group's first rank is the root, the rest its destinations):
  the model's pipelined chain of unicasts from the root through the destinations in snake
  order, the whole buffer on chunk 0 (VC 0, X-Y, the model's route); chunk 1 idles;

each member's engine for a chunk runs one engine stage per plan stage
(:func:`hdl.compiler.fabric_program.ring_engine_stages`, the FRED fabric's ring stages), its
engine port addresses every stage's flits to the ring successor of that stage.

Pure Python; the RTL is ``hdl/designs/mesh/mesh_fabric_top.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.compiler import algorithms
from hdl.compiler.fabric_golden import endpoint_streams, stream_hash
from hdl.compiler.fabric_program import chain_engine_stages, finish_engines, ring_engine_stages
from hdl.contracts.errors import FredError
from hdl.contracts.mesh import MESH_VCS, PORT_REGS, MeshFabricSpec
from hdl.contracts.npu_engine import ENGINE_STAGES, engine_writes, mix, rank_weights

__all__ = ["MESH_ALGORITHMS", "check_size_flits", "MeshProgram", "mesh_program", "snake_order", "rectangle_rows",
           "expected_hashes"]

MESH_ALGORITHMS = ("hierarchical-2d", "ring", "chain")


@dataclass
class MeshProgram:
    """``engines[unit]``: the engine dict (``fabric_program``'s format) of engine unit
    ``rank * 2 + chunk`` plus ``dest`` (per stage, the ring successor's rank);
    ``algorithm``; ``sizes``: flits of each chunk per NPU."""

    algorithm: str
    engines: list[dict]
    sizes: tuple[int, int]

    @property
    def recv_total(self) -> int:
        return sum(e["recv_count"] for e in self.engines)

    def writes(self, spec: MeshFabricSpec, port_reg_base: int) -> list[tuple[int, int, int]]:
        """(unit, register, value): every engine's registers, then its port's (destination
        coordinates, flits sent and received per stage)."""
        out = []
        for unit, e in enumerate(self.engines):
            out += [(unit, reg, value) for reg, value in engine_writes(e)]
            regs = {}
            for s in range(ENGINE_STAGES):
                stage = e["stages"][s] if s < len(e["stages"]) else None
                x, y = spec.position(e["dest"][s]) if stage and e["dest"][s] is not None else (0, 0)
                regs[f"dest{s}"] = x | y << 8
                regs[f"send{s}"] = stage["send_count"] if stage else 0
                regs[f"recv{s}"] = stage["recv_count"] if stage else 0
            out += [(unit, port_reg_base + i, regs[name]) for i, name in enumerate(PORT_REGS)]
        return out


def snake_order(spec: MeshFabricSpec, members) -> list[int]:
    """``members`` in boustrophedon order (``sysmodel.mesh.MeshNetwork.snake_index``)."""
    def index(rank):
        r, c = divmod(rank, spec.cols)
        return r * spec.cols + (c if r % 2 == 0 else spec.cols - 1 - c)
    return sorted(members, key=index)


def rectangle_rows(spec: MeshFabricSpec, members) -> list[list[int]] | None:
    """The members row by row when they fill a rectangle of at least 2 x 2, else None."""
    pos = [divmod(r, spec.cols) for r in members]
    rows, cols = sorted({r for r, _ in pos}), sorted({c for _, c in pos})
    if (len(rows) < 2 or len(cols) < 2 or len(rows) * len(cols) != len(set(members))
            or rows != list(range(rows[0], rows[-1] + 1)) or cols != list(range(cols[0], cols[-1] + 1))):
        return None
    return [[r * spec.cols + c for c in cols] for r in rows]


def _plans(spec: MeshFabricSpec, group, algorithm: str):
    if algorithm == "hierarchical-2d":
        rows = rectangle_rows(spec, group)
        if rows is None:
            raise FredError(f"the hierarchical 2D all-reduce needs a group that fills a rectangle of "
                            f"at least 2 x 2 NPUs; group {sorted(group)} does not (use the ring)")
        return algorithms.mesh_2d("all-reduce", rows)
    if algorithm == "chain":
        return algorithms.chain("multicast", group[0], snake_order(spec, group[1:])), None
    order = snake_order(spec, group)
    return algorithms.ring("all-reduce", order), algorithms.ring("all-reduce", order[::-1])


def _successors(plan) -> list[dict[int, int]]:
    """Per stage, each member's successor (whom its engine port addresses)."""
    out = []
    for stage in plan.stages:
        if isinstance(stage, algorithms.Chain):
            out.append(dict(stage.hops()))
            continue
        nxt = {}
        for ring in stage.rings:
            for i, r in enumerate(ring.order):
                nxt[r] = ring.order[(i + 1) % ring.n]
        out.append(nxt)
    return out


def check_size_flits(size_flits) -> None:
    """A request's size: a positive whole number of flits per NPU."""
    if isinstance(size_flits, bool) or not isinstance(size_flits, int) or size_flits < 1:
        raise FredError(f"size must be a positive number of flits, got {size_flits!r}")


def _check_request(spec, groups, size_flits, algorithm, split, sink_backpressure) -> None:
    """FredError naming the first thing ``mesh_program`` cannot run."""
    check_size_flits(size_flits)
    if algorithm not in MESH_ALGORITHMS:
        raise FredError(f"unknown mesh algorithm {algorithm!r}; expected one of {', '.join(MESH_ALGORITHMS)}")
    if not 0 < split < 1:
        raise FredError(f"split must be in (0, 1), got {split!r}")
    if not 0 <= sink_backpressure < 1:
        raise FredError(f"sink_backpressure must be a probability in [0, 1), got {sink_backpressure!r}")
    seen: set[int] = set()
    for group in groups:
        bad = [r for r in group if not 0 <= r < spec.npus]
        if bad or len(group) < 2:
            raise FredError(f"group {list(group)} does not fit the {spec.rows} x {spec.cols} mesh "
                            f"(ranks 0..{spec.npus - 1}, at least 2 members)")
        if seen & set(group):
            raise FredError(f"groups overlap at ranks {sorted(seen & set(group))}")
        seen |= set(group)


def _check_memories(spec: MeshFabricSpec, engines) -> None:
    """Every later stage fits the NPU's ejection FIFO, every forwarded chunk the engine's buffer, and
    no stage without flits to send comes before one with (the engine port counts stages)."""
    for unit, e in enumerate(engines):
        for s, stage in enumerate(e["stages"]):
            # a later stage's flits can arrive while the engine still receives the one before,
            # and wait in their FIFO (at most the stage's flits); the first stage's are read as
            # they come (an overflow would be flagged as protocol_error, never lost silently)
            if s > 0 and stage["recv_count"] > spec.eject_depth:
                raise FredError(f"engine {unit} (NPU {unit // MESH_VCS}, chunk {unit % MESH_VCS}) "
                                f"receives {stage['recv_count']} flits in stage {s}; an NPU holds "
                                f"{spec.eject_depth} per stage (MeshFabricSpec.eject_depth)")
            if stage["chunk"] != 0xFFFFFFFF and stage["fwd_count"] and stage["chunk"] > spec.engine_buffer:
                raise FredError(f"engine {unit} forwards chunks of {stage['chunk']} flits in stage {s}; "
                                f"an engine holds {spec.engine_buffer} (MeshFabricSpec.engine_buffer)")
            later = [st["send_count"] for st in e["stages"][s + 1:]]
            if stage["send_count"] == 0 and any(later):
                raise FredError(f"engine {unit}: stage {s} sends nothing before a stage that sends")


def mesh_program(spec: MeshFabricSpec, groups, size_flits: int, *, algorithm: str = "hierarchical-2d",
                 split: float = 0.5, seed: int = 0, sink_backpressure: float = 0.0) -> MeshProgram:
    """The engine programs of an all-reduce of ``size_flits`` per NPU on each of ``groups``
    (disjoint lists of ranks; all at once). Raises :class:`FredError` before anything is built
    for a size < 1, a group that does not fit the mesh, overlapping groups, an algorithm that
    does not apply, a split outside (0, 1), or a stage whose flits would not fit an NPU's
    ``eject_depth``."""
    _check_request(spec, groups, size_flits, algorithm, split, sink_backpressure)
    plans = [_plans(spec, group, algorithm) for group in groups]
    # chunk 0 in whole multiples of its finest piece (the rings pad to it; the model of the RTL
    # mesh pads the same way: its platform's mesh_flit_bytes), chunk 1 the rest
    sizes = (size_flits, 0) if algorithm == "chain" else \
        algorithms.two_chunk_flits(size_flits, split, plans[0][0].pieces)
    threshold = round(sink_backpressure * 65536)
    engines = []
    for unit in range(spec.npus * MESH_VCS):
        w, h = rank_weights(unit, seed)
        engines.append(dict(ws=w, hs=h, backpressure=threshold, seed=(mix(unit, seed + 3) & 0xFFFF) or 1,
                            stages=[], dest=[None] * ENGINE_STAGES))
    contributors = [() for _ in engines]
    for group, pair in zip(groups, plans):
        for chunk, plan in enumerate(pair):
            if plan is None:
                continue
            units = {r: r * MESH_VCS + chunk for r in group}
            view = {r: engines[u] for r, u in units.items()}
            if algorithm == "chain":
                chain_engine_stages(plan, sizes[chunk], view, {})
            else:
                ring_engine_stages(plan, sizes[chunk], list(group), view, {})
            for s, nxt in enumerate(_successors(plan)):
                for r, d in nxt.items():
                    view[r]["dest"][s] = d
            for r, u in units.items():
                contributors[u] = tuple(group)
    finish_engines(spec.dtype, engines)
    _check_memories(spec, engines)
    return MeshProgram(algorithm, engines, sizes)


def expected_hashes(spec: MeshFabricSpec, program: MeshProgram) -> list[int]:
    """Per engine unit, the hash an fp16 engine must end with: the golden model of its chunk's
    ring, chain or three-stage 2D all-reduce (:func:`hdl.compiler.fabric_golden.endpoint_streams`:
    fp16 sums depend on the order of the additions, which the engines' ring orders fix; a later
    stage's own data is regenerated from the weights of what the NPU holds, so the 2D run
    checks every flit and addition in the configured order, not the fp16 sum of the NPUs' data)."""
    out = [0] * len(program.engines)
    for chunk in range(MESH_VCS):
        units = [r * MESH_VCS + chunk for r in range(spec.npus)]
        streams = endpoint_streams(spec.dtype, spec.engine_lanes, [program.engines[u] for u in units])
        for u, stream in zip(units, streams):
            out[u] = stream_hash(stream)
    return out
