"""Verilator build of the fabric top for cocotb, without ``--public-flat-rw``.

cocotb's runner always verilates with ``--public-flat-rw``: every signal of the design stays a
public, separately stored variable, which stops Verilator from optimising the model (inlining
and eliminating intermediate signals). The fabric's harness only touches the top's ports, so
this build makes only the top module's signals public (a Verilator configuration file:
``public_flat_rw -module <top> -var <port>`` for each port the harness uses) and otherwise runs the same commands as cocotb's runner
(``cocotb_tools.runner.Verilator._build_command``): ``verilator -cc --exe --vpi`` with cocotb's
``verilator.cpp`` and VPI library, then ``make -f Vtop.mk``. The result is a normal cocotb build
folder that ``cocotb_tests.runner.run_bench(prebuilt=...)`` runs. Builds are cached by a hash of
the Verilog, the options and the Verilator version, like ``cocotb_tests.runner.build_dut``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

from hdl.base.errors import FredError
from cocotb_tests.runner import BUILD_ARGS, MAKE_VARIABLES, SIM_BUILD
from cocotb_tests.toolchain import setup_verilator

__all__ = ["build_top_public_only"]


def build_top_public_only(verilog: str, top: str, ports, *, cflags: str = "-Os",
                          verilator_args=(), sim_build: Path | None = None) -> Path:
    """Build ``verilog`` (top module ``top``) with only the signals of ``top`` named by
    ``ports`` (names or Verilator wildcards) public; ``verilator_args`` are added after the
    runner's options; returns the build folder (cached)."""
    import cocotb_tools.config as config
    tool = setup_verilator()
    args = [*BUILD_ARGS, "-CFLAGS", cflags, *verilator_args]
    ports = list(ports)
    key_source = json.dumps([verilog, top, tool.version, args, "public", ports])
    key = hashlib.sha256(key_source.encode()).hexdigest()[:16]
    build_dir = Path(sim_build or SIM_BUILD) / f"{top}-fast-{key}"
    if (build_dir / "build.ok").is_file() and (build_dir / top).is_file():
        return build_dir
    build_dir.mkdir(parents=True, exist_ok=True)
    source = build_dir / f"{top}.v"
    source.write_text(verilog)
    control = build_dir / "public_top.vlt"
    control.write_text("`verilator_config\n" + "".join(
        f'public_flat_rw -module "{top}" -var "{port}"\n' for port in ports))
    verilator_cpp = config.share_dir / "lib" / "verilator" / "verilator.cpp"
    libs = config.libs_dir
    verilate = [str(tool.executable), "-cc", "--exe", "-Mdir", str(build_dir), "--top-module", top,
                "--vpi", "--prefix", "Vtop", "-o", top,
                "-LDFLAGS", f"-Wl,-rpath,{libs} -L{libs} -lcocotbvpi_verilator",
                *args, "--timescale", "1ns/1ps", str(control), str(verilator_cpp), str(source)]
    env = dict(os.environ)
    env["MAKEFLAGS"] = f"{env.get('MAKEFLAGS', '')} {MAKE_VARIABLES}".strip()
    compile_ = ["make", "-j", str(os.cpu_count() or 1), "-C", str(build_dir), "-f", "Vtop.mk", "VM_TRACE=0"]
    import time
    start = time.perf_counter()
    with open(build_dir / "build.log", "w") as log:
        for cmd in (verilate, compile_):
            done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
            if done.returncode:
                raise FredError(f"fabric build failed ({cmd[0]} exit {done.returncode}); log "
                                f"{build_dir / 'build.log'}")
    (build_dir / "build_seconds").write_text(f"{time.perf_counter() - start:.1f}\n")
    (build_dir / "build.ok").write_text(key_source[:200] + "\n")
    return build_dir
