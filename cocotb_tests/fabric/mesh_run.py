"""Run a collective on the RTL mesh fabric and judge it (docs/mesh_rtl.md, "The mesh fabric").

:func:`run_mesh_fabric` builds ``fred_mesh_fabric`` for a :class:`MeshFabricSpec` (cached by
the runner), loads the program of :func:`hdl.compiler.mesh_program.mesh_program`, runs the
cocotb bench ``bench_mesh_fabric`` and checks every engine: everything sent and received,
no data error, no extra flit, no protocol error, done before the watchdog.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from cocotb_tests.runner import run_bench
from hdl.compiler.mesh_program import MESH_ALGORITHMS, MeshProgram, expected_hashes, mesh_program
from hdl.contracts.errors import FredError
from hdl.contracts.mesh import MeshFabricSpec

__all__ = ["MeshRun", "MESH_SIMULATORS", "build_mesh", "mesh_part_verilogs", "mesh_verilog", "mesh_training", "run_mesh_fabric", "judge_mesh"]

TOP = "fred_mesh_fabric"
#: The top's ports the bench touches (the only public signals of the build, as the FRED
#: fabric's: ``eda.fabric.build.build_top_public_only``).
PORTS = ("clk", "start", "prog_*", "rd_*", "all_done", "cycles")
#: C++ optimisation of the model (the runner's default -O0 builds fast and runs at about 500
#: fabric cycles/s; see docs/mesh_rtl.md for the measured speed).
CFLAGS = "-O1"


@dataclass
class MeshRun:
    cycles: int
    errors: list[str]
    sim_s: float
    program: MeshProgram
    build_dir: str = ""

    @property
    def cycles_per_s(self) -> float:
        return self.cycles / self.sim_s if self.sim_s > 0 else 0.0


_VERILOG: dict = {}


def mesh_verilog(spec: MeshFabricSpec) -> str:
    """The fabric's Verilog (generated once per spec and process: about a minute)."""
    if spec not in _VERILOG:
        from hdl.designs.mesh.mesh_fabric_top import MeshFabricTop
        from hdl.emit.verilog import to_verilog
        _VERILOG[spec] = to_verilog(MeshFabricTop(spec), name=TOP)
    return _VERILOG[spec]


def judge_mesh(program: MeshProgram, after: dict, stalled: bool, hashes=None) -> list[str]:
    """What went wrong; ``hashes``: an fp16 run's golden hash per engine (the engines hash what
    they receive instead of checking each flit)."""
    errors = []
    for unit, want in enumerate(hashes or []):
        got = after["engines"][unit]["hash"]
        if got != want:
            errors.append(f"engine {unit} (NPU {unit // 2}, chunk {unit % 2}): fp16 hash {got:#010x}, "
                          f"golden {want:#010x} (a flit's data or order differs)")
    if stalled:
        errors.append("the fabric did not finish before the watchdog (deadlock or loss)")
    if after["global"]["protocol_error"]:
        errors.append("a router or engine port broke the credit protocol (overflow)")
    for unit, (want, got) in enumerate(zip(program.engines, after["engines"])):
        where = f"engine {unit} (NPU {unit // 2}, chunk {unit % 2})"
        if got["sent"] != want["send_count"]:
            errors.append(f"{where}: sent {got['sent']} of {want['send_count']}")
        if got["received"] != want["recv_count"]:
            errors.append(f"{where}: received {got['received']} of {want['recv_count']}")
        if got["errors"] or got["extra"]:
            errors.append(f"{where}: {got['errors']} bad flit(s), {got['extra']} extra, first bad "
                          f"flit #{got['first_error']}")
    return errors


def run_mesh_fabric(spec: MeshFabricSpec, groups, size_flits: int, *, algorithm: str = "hierarchical-2d",
                    split: float = 0.5, seed: int = 0, sink_backpressure: float = 0.0,
                    watchdog_cycles: int | None = None, poll: int = 256, cflags: str | None = None,
                    pgo: bool = False, prebuilt=None, simulator: str = "cocotb") -> MeshRun:
    """Program, build (cached), run and judge; raises :class:`FredError` for a request the
    fabric cannot run before building anything. ``cflags``, ``pgo``, ``simulator``: the
    build's (:func:`build_mesh`); ``prebuilt``: run on this build folder of ``simulator`` (the
    training runs)."""
    from hdl.designs.mesh.mesh_fabric_top import PORT_REG_BASE
    program = mesh_program(spec, groups, size_flits, algorithm=algorithm, split=split, seed=seed,
                           sink_backpressure=sink_backpressure)
    if watchdog_cycles is None:
        watchdog_cycles = 200 * size_flits + 20_000
    params = {"writes": program.writes(spec, PORT_REG_BASE), "units": len(program.engines),
              "watchdog_cycles": watchdog_cycles, "poll": poll}
    if simulator not in MESH_SIMULATORS:
        raise FredError(f"unknown mesh simulator {simulator!r}; expected one of {', '.join(MESH_SIMULATORS)}")
    build_dir = Path(prebuilt) if prebuilt is not None else build_mesh(spec, cflags=cflags, pgo=pgo,
                                                                       simulator=simulator)
    name = f"mesh-{algorithm}-{size_flits}-{seed}"
    if simulator == "lockstep":
        from cocotb_tests.runner import run_folder
        from eda.fabric.lockstep import run_lockstep
        from hdl.designs.fabric.fabric_top import ENGINE_READ
        from hdl.designs.mesh.mesh_fabric_top import MESH_GLOBAL_READ
        m = run_lockstep(build_dir, {**params, "switch_count": 0, "npus": params["units"],
                                     "engine_read": ENGINE_READ, "switch_read": (),
                                     "global_read": MESH_GLOBAL_READ},
                         run_dir=run_folder(build_dir, name))
    else:
        result = run_bench(verilog=(mesh_verilog(spec), TOP), test_module="cocotb_tests.fabric.bench_mesh_fabric",
                           bench_params=params, prebuilt=build_dir, run_name=name)
        m = result.metrics
        if not m:
            raise FredError(f"the mesh fabric bench recorded nothing; log: {result.test_dir / 'sim.log'}")
    after = m["after"]
    hashes = expected_hashes(spec, program) if spec.dtype != "int32" else None
    return MeshRun(after["global"]["cycles"], judge_mesh(program, after, m["stalled"], hashes), m["sim_s"], program,
                   build_dir=str(build_dir))


#: The mesh's simulators (as the circuit fabric's, ``cocotb_tests.fabric.run.SIMULATORS``):
#: ``cocotb``, one Verilated model under the cocotb bench ``bench_mesh_fabric``; ``lockstep``,
#: the mesh cut between two columns (``hdl.contracts.mesh_partition``), each half Verilated,
#: run one per core in lock step (``eda.fabric.lockstep``; the same cycles and counters).
MESH_SIMULATORS = ("cocotb", "lockstep")


def mesh_part_verilogs(spec: MeshFabricSpec) -> tuple[str, str]:
    """Verilog of the lock-step simulator's two parts of the mesh of ``spec`` (memoised)."""
    key = ("parts", spec)
    if key not in _VERILOG:
        from eda.fabric.lockstep import PART_TOPS
        from hdl.contracts.mesh_partition import mesh_partition
        from hdl.designs.mesh.mesh_fabric_top import MeshFabricTop
        from hdl.emit.verilog import to_verilog
        partition = mesh_partition(spec)
        _VERILOG[key] = tuple(to_verilog(MeshFabricTop(spec, partition=partition, part=p), name=PART_TOPS[p])
                              for p in range(2))
    return _VERILOG[key]


def build_mesh(spec: MeshFabricSpec, *, cflags: str | None = None, pgo: bool = False,
               simulator: str = "cocotb") -> Path:
    """The build folder (cached) of the mesh of ``spec`` for ``simulator``
    (:data:`MESH_SIMULATORS`): only the top's ports public (``eda.fabric.build``) or the
    lock-step simulator's two parts (``eda.fabric.lockstep``). ``cflags``: the C++
    optimisation (None: :data:`CFLAGS`, or -O2 with ``pgo``); ``pgo``: profile-guided, trained
    by :func:`mesh_training` on the same simulator (the same cycles, machine code only;
    docs/fabric_rtl.md, "Simulation speed")."""
    from eda.fabric.build import build_trained, fast_cflags, training_options
    flags = fast_cflags(cflags, pgo, CFLAGS)
    workload = mesh_training(spec, simulator=simulator) if pgo else None
    if simulator == "lockstep":
        from eda.fabric.lockstep import build_lockstep
        return build_lockstep(mesh_part_verilogs(spec), cflags=flags,
                              **training_options("mesh lock-step", workload, pgo))
    return build_trained(mesh_verilog(spec), TOP, PORTS, cflags=flags, pgo=pgo, workload=workload)


#: The mesh's training workload of a profile-guided build (:func:`mesh_training`): each
#: algorithm of the mesh (``MESH_ALGORITHMS``: the 2D all-reduce, the ring all-reduce, the
#: chain multicast) across the whole mesh, of this many flits per NPU.
TRAINING_FLITS = 2000


def mesh_training(spec: MeshFabricSpec, *, simulator: str = "cocotb") -> dict:
    """``{name: run(build_dir)}`` (:func:`eda.fabric.build.build_trained`): every algorithm the
    mesh of ``spec`` runs (one ``mesh_program`` refuses is left out) over every NPU, of
    :data:`TRAINING_FLITS` flits, every flit checked (a run with errors raises and fails the
    build)."""
    wafer = [list(range(spec.npus))]
    workload = {}
    for algorithm in MESH_ALGORITHMS:
        try:
            mesh_program(spec, wafer, TRAINING_FLITS, algorithm=algorithm)
        except FredError:
            continue     # an algorithm this mesh does not run: not trained
        workload[f"{algorithm} x {TRAINING_FLITS}"] = functools.partial(_training_run, spec, algorithm,
                                                                        simulator=simulator)
    if not workload:
        raise FredError(f"mesh {spec.rows} x {spec.cols}: no training collective runs on it")
    return workload


def _training_run(spec: MeshFabricSpec, algorithm: str, build_dir, *, simulator: str) -> None:
    run = run_mesh_fabric(spec, [list(range(spec.npus))], TRAINING_FLITS, algorithm=algorithm,
                          prebuilt=build_dir, simulator=simulator)
    if run.errors:
        raise FredError(f"mesh: the training run ({algorithm}) failed: {'; '.join(run.errors[:3])}")
