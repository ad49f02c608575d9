"""One all-reduce on the RTL mesh fabric and on the system model of the same mesh
(``fred fabric-sim --fabric mesh``; docs/mesh_rtl.md, "The mesh fabric").

The request is validated, the model (``sysmodel.mesh_rtl_model``) chooses the algorithm
(hierarchical 2D for a rectangle, the two-way snake ring otherwise) and, for the 2D algorithm,
the split of the buffer between its two chunks; the RTL runs the same algorithm and split.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hdl.contracts.errors import FredError
from hdl.contracts.mesh import MeshFabricSpec
from hdl.contracts.mesh_io import IO_MODES, MeshIoSpec
from hdl.contracts.placement import parse_strategy

__all__ = ["MeshCase", "mesh_groups", "build_mesh_case", "model_algorithm_program", "run_mesh_case", "MESH_OPS",
           "MESH_IO_OPS"]

#: What the mesh fabric runs so far (docs/mesh_rtl.md says what is missing). ``io-load``: the
#: model's weight streaming from the edge I/O controllers (``fred_mesh_io``); ``io-store``: its
#: gradient reduce-out into them (``fred_mesh_io_store``); ``io-write`` / ``io-read``: an
#: activation checkpoint spilled out to them and read back, every NPU's own stripe to and from
#: each controller as unicasts (``fred_mesh_io_spill``).
MESH_OPS = ("all-reduce", "multicast", "io-load", "io-store", "io-write", "io-read")
#: The mesh's I/O ops (``studies.mesh_case._build_io_case``).
MESH_IO_OPS = ("io-load", "io-store", "io-write", "io-read")
#: Flits per tree an NPU's partial-sum memory holds in the io-store top (a build parameter: the
#: wafer's 4014-flit case puts 223 on a tree).
STORE_MAX_STRIPE = 256


@dataclass
class MeshCase:
    spec: MeshFabricSpec
    groups: list[list[int]]
    size_flits: int
    label: str
    estimate: object                  # sysmodel.mesh_rtl_model.MeshEstimate
    split: float
    rtl: object | None = None         # cocotb_tests.fabric.mesh_run.MeshRun (mesh_io_run.MeshIoRun)
    io: MeshIoSpec | None = None      # the I/O controllers of an io-load
    mode: str | None = None           # an io-load's trees (hdl.contracts.mesh_io.IO_MODES)
    io_op: str = "io-load"            # or io-store (the same trees, reversed and reducing), io-write, io-read

    @property
    def ratio(self) -> float | None:
        return None if self.rtl is None else self.rtl.cycles / self.estimate.cycles

    def to_dict(self) -> dict:
        out = {"fabric": "mesh", "rows": self.spec.rows, "cols": self.spec.cols,
               "link_rate": list(self.spec.link_rate), "link_latency": self.spec.link_latency,
               "request": self.label, "size_flits": self.size_flits, "groups": self.groups,
               "model": dict(self.estimate.__dict__), "split": self.split, "dtype": self.spec.dtype}
        if self.io is not None:
            out.update(op=self.io_op, controllers=self.io.controllers, io_rate=list(self.io.io_rate),
                       stripe_flits=self.size_flits // self.io.controllers, trees=self.mode)
        if self.rtl is not None:
            out["rtl"] = {"cycles": self.rtl.cycles, "sim_s": self.rtl.sim_s,
                          "cycles_per_s": self.rtl.cycles_per_s}
            out["ratio_rtl_over_model"] = self.ratio
        return out


def mesh_groups(spec: MeshFabricSpec, *, group: str | None, strategy: str | None,
                dim: str | None, op: str = "all-reduce") -> tuple[list[list[int]], str]:
    """The groups of ``--group wafer`` or ``--strategy S --dim D`` on the mesh, and a label. A
    multicast's group lists its root first: the lowest rank of a group, or along PP the
    stage-boundary transfers (MP rank 0 of a stage to the next stage's MP group, as the FRED
    fabric's requests, ``hdl.contracts.fabric``)."""
    if (group is None) == (strategy is None):
        raise FredError("name exactly one of a group (--group wafer) or a strategy and dimension "
                        "(--strategy MP2-DP5-PP2 --dim mp)")
    if group is not None:
        if group != "wafer":
            raise FredError(f"--group takes 'wafer' (every NPU), got {group!r}")
        return [list(range(spec.npus))], "wafer"
    if dim is None:
        raise FredError("--strategy needs --dim (mp, dp or pp)")
    plan = parse_strategy(strategy)
    if plan.mp * plan.dp * plan.pp != spec.npus:
        raise FredError(f"strategy {strategy} places {plan.mp * plan.dp * plan.pp} NPUs; the mesh has "
                        f"{spec.npus}")
    if (dim == "pp") != (op == "multicast"):
        raise FredError(f"the mesh runs the PP dimension's stage-boundary multicast and all-reduce "
                        f"along MP or DP; got {op} along {dim}")
    if dim == "pp":
        return ([[root, *sorted(dsts)] for stage in range(plan.pp - 1)
                 for root, dsts in plan.stage_transfers(stage)], f"{strategy} {dim}")
    return [list(g) for g in plan.groups(dim)], f"{strategy} {dim}"


def build_mesh_case(*, op: str, size: int, group=None, strategy=None, dim=None,
                    spec: MeshFabricSpec | None = None, characterization=None,
                    algorithm: str | None = None, io: MeshIoSpec | None = None,
                    dtype: str = "int32") -> MeshCase:
    """Validate and compute the model's side; nothing is built. ``algorithm``: an io-load's
    trees (default the model's fastest); the other ops run the model's own algorithm.
    ``dtype``: the engines' elements (``hdl.contracts.mesh.MESH_DTYPES``; fp16: rings, chains
    and the 2D all-reduce, bit-exact against the golden model's order; io-load, a broadcast,
    moves and checks its 32-bit words bit for bit whatever they encode and adds nothing, so
    its fp16 case runs the one I/O top; io-store in fp16 builds its fp16 reducers, each sum in
    the golden model's fixed order)."""
    from sysmodel.mesh_rtl_model import mesh_platform
    from hdl.compiler.mesh_program import check_size_flits
    if op not in MESH_OPS:
        raise FredError(f"the RTL mesh fabric runs {', '.join(MESH_OPS)}; {op} is not built yet "
                        f"(docs/mesh_rtl.md, 'What is missing')")
    check_size_flits(size)
    if op in MESH_IO_OPS:
        mesh = spec or MeshFabricSpec(dtype=dtype)      # an unknown dtype: the mesh's error
        if op != "io-store":    # a broadcast's or a spill's words are the same bits in int32 and fp16: one top
            mesh = replace(mesh, dtype="int32")
        case = _build_io_case(size=size, group=group, strategy=strategy, io=io or MeshIoSpec(mesh=mesh),
                              characterization=characterization, mode=algorithm, op=op)
        case.spec = replace(case.spec, dtype=dtype)
        return case
    if algorithm is not None:
        raise FredError(f"the RTL mesh runs the model's own algorithm for {op}: drop --algorithm")
    spec = spec or MeshFabricSpec(dtype=dtype)
    groups, label = mesh_groups(spec, group=group, strategy=strategy, dim=dim, op=op)
    platform = mesh_platform(spec, characterization=characterization)
    _, estimate, split = model_algorithm_program(spec, groups, size, platform=platform, op=op,
                                                 label=label)   # the program: fails early
    return MeshCase(spec, groups, size, label, estimate, split)


def model_algorithm_program(spec: MeshFabricSpec, groups, size: int, *, platform, op: str, label: str):
    """``(program, estimate, split)``: the model's estimate of ``op`` of ``size`` flits per NPU
    on ``groups`` (on ``platform``, the model's platform of the RTL mesh) and the RTL mesh's
    program running the model's algorithm, with the model's split for the hierarchical 2D
    all-reduce (0.5 otherwise); refuses, naming ``label``, an algorithm the RTL mesh does not
    run."""
    from sysmodel.mesh_rtl_model import mesh_model_cycles, mesh_split
    from hdl.compiler.mesh_program import mesh_program
    estimate = mesh_model_cycles(spec, groups, size, platform=platform, op=op)
    if estimate.algorithm not in ("hierarchical-2d", "ring", "chain"):
        raise FredError(f"the model runs {label} with {estimate.algorithm}; the RTL mesh runs "
                        f"hierarchical-2d, ring or chain, one per request")
    split = mesh_split(spec, groups[0], size, platform=platform) if estimate.algorithm == "hierarchical-2d" else 0.5
    return mesh_program(spec, groups, size, algorithm=estimate.algorithm, split=split), estimate, split


def _build_io_case(*, size: int, group, strategy, io: MeshIoSpec, characterization, mode,
                   op: str = "io-load") -> MeshCase:
    """Weight streaming to every NPU (``io-load``), or every NPU's gradients reduced out to the
    controllers (``io-store``), or every NPU's checkpoint written out to them (``io-write``) or
    read back (``io-read``): ``size`` flits per NPU, in whole stripes (``ceil(size /
    controllers)`` flits per controller; the case's size is what every NPU then receives or
    sends)."""
    from sysmodel.mesh_rtl_model import mesh_io_model_cycles, mesh_io_platform
    from hdl.compiler.mesh_io_program import io_load_program, io_spill_program, io_store_program
    if strategy is not None or group != "wafer":
        raise FredError(f"{op} on the mesh involves every NPU: use --group wafer")
    if op in ("io-write", "io-read"):
        if mode is not None:
            raise FredError(f"{op} on the mesh runs unicasts (every NPU's own stripe to or from each "
                            f"controller), not trees: drop --algorithm {mode}")
        stripe = -(-size // io.controllers)
        io_spill_program(io, stripe, op)                                          # fails early
        estimate = mesh_io_model_cycles(io, stripe, op=op,
                                        platform=mesh_io_platform(io, characterization=characterization))
        return MeshCase(io.mesh, [list(range(io.mesh.npus))], stripe * io.controllers, "wafer", estimate,
                        0.5, io=io, mode=None, io_op=op)
    if mode is not None and mode not in IO_MODES:
        raise FredError(f"{op} on the mesh runs the trees {', '.join(IO_MODES)}; got {mode!r}")
    stripe = -(-size // io.controllers)
    platform = mesh_io_platform(io, characterization=characterization)
    estimate = mesh_io_model_cycles(io, stripe, mode=mode, platform=platform, op=op)
    if op == "io-store":                                                          # fails early
        io_store_program(io, stripe, estimate.algorithm, max_stripe=STORE_MAX_STRIPE)
    else:
        io_load_program(io, stripe, estimate.algorithm)
    return MeshCase(io.mesh, [list(range(io.mesh.npus))], stripe * io.controllers, "wafer", estimate,
                    0.5, io=io, mode=estimate.algorithm, io_op=op)


def run_mesh_case(case: MeshCase, *, seed: int = 0, sink_backpressure: float = 0.0,
                  watchdog_cycles: int | None = None, pgo: bool = False,
                  simulator: str = "cocotb") -> MeshCase:
    """Build and run the RTL; raise :class:`FredError` naming what went wrong if any engine
    (an io-load: any NPU or controller) did not receive or send exactly what it should.
    ``pgo`` and ``simulator``: the collectives' build and simulator
    (``cocotb_tests.fabric.mesh_run.build_mesh``; the I/O tops have neither yet)."""
    if case.io is not None:
        # the NPUs take every I/O flit at once (their memory): the backpressure is random idle
        # of every controller and NPU forwarder (a spill's: every sender and controller sink) instead
        from cocotb_tests.fabric.mesh_io_run import run_mesh_io, run_mesh_io_spill, run_mesh_io_store
        stripe = case.size_flits // case.io.controllers
        if case.io_op in ("io-write", "io-read"):
            run = run_mesh_io_spill(case.io, stripe, case.io_op, stall=sink_backpressure,
                                    watchdog_cycles=watchdog_cycles)
        elif case.io_op == "io-store":
            run = run_mesh_io_store(case.io, stripe, case.mode, max_stripe=STORE_MAX_STRIPE,
                                    stall=sink_backpressure, watchdog_cycles=watchdog_cycles)
        else:
            run = run_mesh_io(case.io, stripe, case.mode, stall=sink_backpressure,
                              watchdog_cycles=watchdog_cycles)
        if run.errors:
            raise FredError(f"the RTL mesh failed {case.io_op} {case.label}: " + "; ".join(run.errors[:8]))
        case.rtl = run
        return case
    from cocotb_tests.fabric.mesh_run import run_mesh_fabric
    run = run_mesh_fabric(case.spec, case.groups, case.size_flits, algorithm=case.estimate.algorithm,
                          split=case.split, seed=seed, sink_backpressure=sink_backpressure,
                          watchdog_cycles=watchdog_cycles, pgo=pgo, simulator=simulator)
    if run.errors:
        raise FredError(f"the RTL mesh failed {case.label}: " + "; ".join(run.errors[:8]))
    case.rtl = run
    return case
