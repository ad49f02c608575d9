"""Run weight streaming (``io-load``) on the RTL mesh with I/O controllers and judge it
(docs/mesh_rtl.md, "I/O controllers on the mesh").

:func:`run_mesh_io` checks the request (:func:`hdl.compiler.mesh_io_program.io_load_program`)
before building anything, builds ``fred_mesh_io`` (Verilator, only the top's ports public,
cached), runs ``bench_mesh_io`` and checks: every controller sent its stripe, every NPU received
every stripe with no bad flit, no protocol error, done before the watchdog (a stall is an error
naming the NPUs short of their flits).
"""

from __future__ import annotations

from dataclasses import dataclass

from cocotb_tests.fabric.mesh_run import CFLAGS, PORTS
from cocotb_tests.runner import run_bench
from hdl.compiler.mesh_io_program import IoLoadProgram, io_load_program
from hdl.contracts.errors import FredError
from hdl.contracts.mesh_io import MeshIoSpec

__all__ = ["MeshIoRun", "run_mesh_io", "mesh_io_verilog"]

TOP = "fred_mesh_io"


@dataclass
class MeshIoRun:
    cycles: int
    errors: list[str]
    sim_s: float
    program: IoLoadProgram

    @property
    def cycles_per_s(self) -> float:
        return self.cycles / self.sim_s if self.sim_s > 0 else 0.0


_VERILOG: dict = {}


def mesh_io_verilog(spec: MeshIoSpec) -> str:
    """The top's Verilog (generated once per spec and process)."""
    if spec not in _VERILOG:
        from hdl.designs.mesh.mesh_io_top import MeshIoTop
        from hdl.emit.verilog import to_verilog
        _VERILOG[spec] = to_verilog(MeshIoTop(spec), name=TOP)
    return _VERILOG[spec]


def judge_io(program: IoLoadProgram, after: dict, stalled: bool) -> list[str]:
    """What went wrong in a run's counters (empty: every flit arrived once, in order, intact)."""
    errors = []
    if stalled:
        short = [r for r, n in enumerate(after["npus"]) if n["received"] != program.expect]
        errors.append(f"the fabric did not finish before the watchdog (stall): NPUs {short} short "
                      f"of their {program.expect} flits")
    if after["global"]["protocol_error"]:
        errors.append("a router, controller or forwarding queue broke the credit protocol (overflow)")
    for k, c in enumerate(after["controllers"]):
        if c["sent"] != program.stripe_flits:
            errors.append(f"controller {k}: sent {c['sent']} of {program.stripe_flits}")
    for rank, n in enumerate(after["npus"]):
        if n["received"] != program.expect or n["errors"]:
            errors.append(f"NPU {rank}: received {n['received']} of {program.expect}, {n['errors']} bad "
                          f"flit(s), first bad arrival #{n['first_error']}")
    return errors


def run_mesh_io(spec: MeshIoSpec, stripe_flits: int, mode: str = "tree-split", *, stall: float = 0.0,
                watchdog_cycles: int | None = None, poll: int = 256) -> MeshIoRun:
    """Check, build (cached), run and judge weight streaming of ``stripe_flits`` per controller;
    ``stall``: the probability every controller and NPU forwarder idles in a cycle."""
    program = io_load_program(spec, stripe_flits, mode)
    if not 0 <= stall < 1:
        raise FredError(f"stall must be a probability in [0, 1), got {stall!r}")
    if watchdog_cycles is None:
        a, b = spec.mesh.link_rate
        watchdog_cycles = int(4 * program.hottest * stripe_flits * b / a / (1 - stall)) + 20_000
    params = {"stripe": stripe_flits, "mode": program.mode_index, "stall": round(stall * 65536),
              "npus": spec.mesh.npus,
              "controllers": spec.controllers, "watchdog_cycles": watchdog_cycles, "poll": poll}
    from eda.fabric.build import build_top_public_only
    verilog = mesh_io_verilog(spec)
    build_dir = build_top_public_only(verilog, TOP, PORTS, cflags=CFLAGS)
    result = run_bench(verilog=(verilog, TOP), test_module="cocotb_tests.fabric.bench_mesh_io",
                       bench_params=params, prebuilt=build_dir, run_name=f"mesh-io-{mode}-{stripe_flits}")
    m = result.metrics
    if not m:
        raise FredError(f"the mesh I/O bench recorded nothing; log: {result.test_dir / 'sim.log'}")
    after = m["after"]
    return MeshIoRun(after["global"]["cycles"], judge_io(program, after, m["stalled"]), m["sim_s"], program)
