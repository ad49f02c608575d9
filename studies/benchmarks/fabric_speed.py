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

__all__ = ["measure"]


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
        rows.append(dict(fabric=name, simulator=simulator, cflags=flags, pgo=use_pgo,
                         size_flits=size, cycles=run.cycles, sim_s=run.sim_s,
                         cycles_per_s=run.cycles_per_s, build_s=round(build_s, 1),
                         verilog_and_cache_check_s=round(elapsed, 1), flits_checked=run.flits_checked,
                         part_wait_s=run.part_wait_s))
    meta = dict(date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                machine=platform.machine(), python=platform.python_version(), command=command)
    return {"meta": meta, "rows": rows}
