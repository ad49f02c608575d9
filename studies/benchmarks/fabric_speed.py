"""Simulation speed of the fabric RTL under Verilator (``fred bench fabric``, ``make
bench-fabric``; docs/fabric_rtl.md): fabric cycles per wall-clock second on a bandwidth-bound
case, plus the build time.

Each fabric is built once (cached in ``sim_build/``; the build time reported is the one measured
when it was built, from its ``build_seconds``), then the wafer-wide all-reduce of ``size`` flits
per NPU runs with every NPU sink always ready; ``cycles/s`` = the RTL's cycle count over the
wall-clock seconds of the timed window (``FabricRun.sim_s``: from start to the last poll that
saw every engine done). Run it under the shared lock on the project machine.
"""

from __future__ import annotations

import platform
import time
from datetime import datetime, timezone

from cocotb_tests.fabric.run import DEFAULT_SIMULATOR, build_fabric, build_options, run_fabric
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec, make_request

__all__ = ["measure", "measure_mesh", "measure_packet", "machine_load", "MESH_SIZE"]

#: Flits per NPU of the mesh's benchmark: its largest wafer all-reduce (the 2D all-reduce's
#: chunks fill the engines' 1,024-flit buffers at 4,000).
MESH_SIZE = 4000


def measure(fabrics=("fred-b", "fred-d"), size: int = 20000, *, cflags: str | None = None,
            verilator_args: tuple[str, ...] | None = None, pgo: bool | None = None,
            simulator: str = DEFAULT_SIMULATOR, command: str = "") -> dict:
    """Build (or reuse) and run each fabric of ``fabrics``; ``{"meta": ..., "rows": [...]}``, one
    row per fabric.

    ``size``: flits per NPU; ``cflags``: C++ optimisation of the model (None: the fabric's
    default, :func:`cocotb_tests.fabric.run.default_cflags`); ``verilator_args``: further
    Verilator options (None: the fabric build's); ``pgo``: False compiles without profile-guided
    optimization (None: the fabric's default); ``simulator``: ``lockstep`` or ``cocotb``;
    ``command``: how the run was started, recorded in ``meta``. A run with errors raises.
    """
    rows = []
    for name in fabrics:
        spec = fabric_spec(name)
        start = time.perf_counter()
        flags, use_pgo = build_options(spec, cflags, pgo)
        build_dir, _ = build_fabric(spec, cflags, verilator_args=verilator_args, pgo=use_pgo,
                                    simulator=simulator)
        elapsed = time.perf_counter() - start
        recorded = build_dir / "build_seconds"
        build_s = float(recorded.read_text()) if recorded.exists() else elapsed
        run = run_fabric(spec, make_request(spec, op="all-reduce", size_flits=size, group="wafer"),
                         cflags=cflags, verilator_args=verilator_args, pgo=use_pgo,
                         simulator=simulator)
        if run.errors:
            raise FredError(f"{name}: errors: {run.errors}")
        rows.append(dict(fabric=name, switch="circuit", simulator=simulator, cflags=flags, pgo=use_pgo,
                         size_flits=size, cycles=run.cycles, sim_s=run.sim_s,
                         cycles_per_s=run.cycles_per_s, build_s=round(build_s, 1),
                         verilog_and_cache_check_s=round(elapsed, 1), flits_checked=run.flits_checked,
                         part_wait_s=run.part_wait_s))
    meta = dict(date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                machine=platform.machine(), python=platform.python_version(), command=command,
                load_average=machine_load())
    return {"meta": meta, "rows": rows}


def machine_load() -> list[float]:
    """The machine's load averages over 1, 5 and 15 minutes (``os.getloadavg``): the lock-step
    simulator's two threads wait for each other every cycle, so its speed depends on both cores
    being free (docs/fabric_rtl.md, "Simulation speed"); a figure is quoted with its load."""
    import os
    return [round(x, 2) for x in os.getloadavg()]


def _one_model_row(fabric: str, switch: str, simulator: str, cflags: str, pgo: bool, size: int, run,
                   elapsed: float, flits_checked: int) -> dict:
    """A row as :func:`measure`'s of a mesh or packet fabric ``run`` (its ``cycles``, ``sim_s``,
    ``cycles_per_s``, ``build_dir``); the build's seconds as recorded when it was built
    (``build_seconds``), else ``elapsed``."""
    from pathlib import Path
    recorded = Path(run.build_dir) / "build_seconds"
    build_s = float(recorded.read_text()) if recorded.exists() else elapsed
    return dict(fabric=fabric, switch=switch, simulator=simulator, cflags=cflags, pgo=pgo,
                size_flits=size, cycles=run.cycles, sim_s=round(run.sim_s, 4),
                cycles_per_s=round(run.cycles_per_s, 1), build_s=round(build_s, 1),
                flits_checked=flits_checked, part_wait_s=list(getattr(run, "part_wait_s", [])))


def measure_mesh(size: int = MESH_SIZE, *, pgo: bool = True, cflags: str | None = None,
                 simulator: str = DEFAULT_SIMULATOR) -> dict:
    """The 5 x 4 mesh fabric (``cocotb_tests.fabric.mesh_run``): the wafer all-reduce of
    ``size`` flits per NPU in the model's algorithm and split
    (:func:`studies.mesh_case.build_mesh_case`), every flit checked; one row as :func:`measure`'s.
    ``pgo``: the profile-guided build (the mesh's own training workload); ``simulator``:
    ``lockstep`` (two halves of the mesh on two cores) or ``cocotb`` (one model)."""
    from cocotb_tests.fabric.mesh_run import CFLAGS, run_mesh_fabric
    from eda.fabric.build import fast_cflags
    from studies.mesh_case import build_mesh_case
    case = build_mesh_case(op="all-reduce", size=size, group="wafer")
    start = time.perf_counter()
    run = run_mesh_fabric(case.spec, case.groups, case.size_flits, algorithm=case.estimate.algorithm,
                          split=case.split, cflags=cflags, pgo=pgo, simulator=simulator)
    elapsed = time.perf_counter() - start - run.sim_s
    if run.errors:
        raise FredError(f"mesh: errors: {run.errors}")
    return _one_model_row(f"mesh {case.spec.rows}x{case.spec.cols}", "mesh", simulator,
                          fast_cflags(cflags, pgo, CFLAGS), pgo, size, run, elapsed, run.program.recv_total)


def measure_packet(name: str, size: int, *, pgo: bool = True, cflags: str | None = None,
                   simulator: str = "cocotb") -> dict:
    """The packet fabric of FRED variant ``name`` (``cocotb_tests.fabric.packet_fabric_sim``):
    the wafer all-reduce of ``size`` flits per NPU in the model's algorithm
    (:func:`studies.packet_fabric_case.build_packet_case`), every flit checked; one row as
    :func:`measure`'s. ``simulator``: ``cocotb`` (one model) or ``lockstep`` (the fabric cut at
    its uplinks, two parts on two cores)."""
    from cocotb_tests.fabric.packet_fabric_sim import PLAIN_CFLAGS, run_packet_fabric
    from eda.fabric.build import fast_cflags
    from studies.packet_fabric_case import build_packet_case
    case = build_packet_case(fabric=name, op="all-reduce", size=size, group="wafer")
    start = time.perf_counter()
    run = run_packet_fabric(case.spec, case.request, algorithm=case.estimate.algorithm, cflags=cflags,
                            pgo=pgo, simulator=simulator)
    elapsed = time.perf_counter() - start - run.sim_s
    if run.errors:
        raise FredError(f"{name} packet fabric: errors: {run.errors}")
    return _one_model_row(f"{name} packet", "packet", simulator, fast_cflags(cflags, pgo, PLAIN_CFLAGS),
                          pgo, size, run, elapsed, run.flits_checked)
