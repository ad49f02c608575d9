"""Verilator build of the fabric top for cocotb, without ``--public-flat-rw``, optionally
compiled with profile-guided optimization.

cocotb's runner always verilates with ``--public-flat-rw``: every signal of the design stays a
public, separately stored variable, which stops Verilator from optimising the model (inlining
and eliminating intermediate signals). The fabric's harness only touches the top's ports, so
this build makes only the top module's signals public (a Verilator configuration file:
``public_flat_rw -module <top> -var <port>`` for each port the harness uses) and otherwise runs the same commands as cocotb's runner
(``cocotb_tools.runner.Verilator._build_command``): ``verilator -cc --exe --vpi`` with cocotb's
``verilator.cpp`` and VPI library, then ``make -f Vtop.mk``. The result is a normal cocotb build
folder that ``cocotb_tests.runner.run_bench(prebuilt=...)`` runs. Builds are cached by a hash of
the Verilog, the options, the Verilator version and the training's name, like
``cocotb_tests.runner.build_dut``.

Profile-guided optimization (``train``): the model is compiled with GCC's
``-fprofile-generate``, ``train(build_dir)`` runs it (the caller's training workload: it
writes one ``.gcda`` profile per object file), then every object is compiled again with
``-fprofile-use``. The model's behaviour is the same C++ either way (only the machine code's
layout, inlining and branch order change); what it buys is speed: a fabric model runs a few
hundred KB of straight-line code every cycle, and GCC lays the hot paths out from the
profile (``docs/fabric_rtl.md``, simulation speed, has the measurements).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from hdl.contracts.errors import FredError
from eda.toolchain import BUILD_ARGS, SIM_BUILD, build_lock, build_step, make_environment, setup_verilator

__all__ = ["build_top_public_only", "build_trained", "training_options", "fast_cflags", "PGO_CFLAGS", "PGO_GENERATE", "PGO_USE", "clean_objects"]

#: Extra C++ flags of the instrumented compile (the profile counters are updated by one
#: thread: the model is single-threaded, and atomic updates would slow the training run).
PGO_GENERATE = ("-fprofile-generate", "-fprofile-update=single")
#: Extra C++ flags of the final compile: functions the training never ran are still optimized
#: normally (``-fprofile-partial-training``), not for size; counters that do not add up exactly
#: are tolerated, and an object without a profile is not an error. Then the model's hot code
#: is kept small, because a fabric model runs all of it every cycle and is bound by fetching
#: it (about 750 KB per part of the packet Fred-D, from the 1 MB second-level cache):
#: ``-fno-tracer`` stops the tail duplication ``-fprofile-use`` turns on (it grew the hot code
#: by about a fifth), and no padding for alignment and no vectorisation take a few per cent
#: more. Together: the packet Fred-D lock-step parts' hot code 751 / 748 KB -> 595 / 606 KB,
#: about 10 % more cycles per second, the same cycles and counters (docs/fabric_rtl.md,
#: "Session s14").
PGO_USE = ("-fprofile-use", "-fprofile-partial-training", "-fprofile-correction", "-Wno-missing-profile",
           "-fno-tracer", "-falign-functions=1", "-falign-jumps=1", "-falign-loops=1",
           "-falign-labels=1", "-fno-tree-vectorize")
#: C++ optimisation of a profile-guided build: measured best on the circuit fabrics (-O2 against
#: -O1, -Os and -O3; docs/fabric_rtl.md, "Profile-guided optimization").
PGO_CFLAGS = "-O2"


def build_top_public_only(verilog: str, top: str, ports, *, cflags: str = "-Os",
                          verilator_args=(), sim_build: Path | None = None,
                          train=None, training: str = "", public_vars=()) -> Path:
    """Build ``verilog`` (top module ``top``) with only the signals of ``top`` named by
    ``ports`` (names or Verilator wildcards) public, and the variables named ``public_vars`` in
    any module (e.g. memories a harness fills through VPI, ``harness.deposit_memories``);
    ``verilator_args`` are added after the
    runner's options; returns the build folder (cached). ``train``: None, or a callable
    ``train(build_dir)`` that runs the instrumented model for profile-guided optimization
    (module docstring); ``training`` names that workload in the cache key (a different
    training is a different build)."""
    import cocotb_tools.config as config
    tool = setup_verilator()
    args = [*BUILD_ARGS, "-CFLAGS", cflags, *verilator_args]
    ports = list(ports)
    public_vars = list(public_vars)
    key_source = json.dumps([verilog, top, tool.version, args, "public", ports]
                            + (["pgo", list(PGO_GENERATE), list(PGO_USE), training] if train else [])
                            + (["public_vars", public_vars] if public_vars else []))
    key = hashlib.sha256(key_source.encode()).hexdigest()[:16]
    build_dir = Path(sim_build or SIM_BUILD) / f"{top}-fast-{key}"
    with build_lock(build_dir):
        if (build_dir / "build.ok").is_file() and (build_dir / top).is_file():
            print(f"build: {top}: cached model {build_dir}", file=sys.stderr, flush=True)
            return build_dir
        build_dir.mkdir(parents=True, exist_ok=True)
        source = build_dir / f"{top}.v"
        source.write_text(verilog)
        control = build_dir / "public_top.vlt"
        control.write_text("`verilator_config\n" + "".join(
            f'public_flat_rw -module "{top}" -var "{port}"\n' for port in ports) + "".join(
            f'public_flat_rw -module "*" -var "{var}"\n' for var in public_vars))
        verilator_cpp = config.share_dir / "lib" / "verilator" / "verilator.cpp"
        libs = config.libs_dir
        ldflags = f"-Wl,-rpath,{libs} -L{libs} -lcocotbvpi_verilator"
        verilate = [str(tool.executable), "-cc", "--exe", "-Mdir", str(build_dir), "--top-module", top,
                    "--vpi", "--prefix", "Vtop", "-o", top, "-LDFLAGS", ldflags,
                    *args, "--timescale", "1ns/1ps", str(control), str(verilator_cpp), str(source)]
        env = make_environment()
        user_cflags = user_cflags_of(args)

        def compile_(*extra_cflags, extra_ldflags=""):
            # the user flags of Vtop.mk (from -CFLAGS/-LDFLAGS) are replaced on make's command line,
            # so one verilation serves both compiles of a profile-guided build
            return ["make", "-j", str(os.cpu_count() or 1), "-C", str(build_dir), "-f", "Vtop.mk",
                    "VM_TRACE=0", f"VM_USER_CFLAGS={' '.join([*user_cflags, *extra_cflags])}",
                    f"VM_USER_LDLIBS={ldflags} {extra_ldflags}".strip()]

        start = time.perf_counter()
        with open(build_dir / "build.log", "w") as log:
            def run(cmd, what):
                log.flush()
                with build_step(f"{top}: {what} (log {build_dir / 'build.log'})"):
                    done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
                    if done.returncode:
                        raise FredError(f"fabric build failed ({cmd[0]} exit {done.returncode}); log "
                                        f"{build_dir / 'build.log'}")

            run(verilate, f"verilating {len(verilog) / 1e6:.1f} MB of Verilog")
            if train is None:
                run(compile_(), "compiling the C++ model")
            else:
                clean_objects(build_dir, top, profiles=True)
                run(compile_(*PGO_GENERATE, extra_ldflags=" ".join(PGO_GENERATE)),
                    "compiling the instrumented C++ model (profile-guided optimization)")
                log.write(f"\n# profile-guided optimization: training run ({training})\n")
                train_start = time.perf_counter()
                with build_step(f"{top}: profile training run ({training})"):
                    train(build_dir)
                profiles = list(build_dir.glob("*.gcda"))
                if not profiles:
                    raise FredError(f"fabric build: the training run ({training}) wrote no profile "
                                    f"(*.gcda) in {build_dir}")
                log.write(f"# training {time.perf_counter() - train_start:.1f} s, "
                          f"{len(profiles)} profiles\n")
                clean_objects(build_dir, top, profiles=False)
                run(compile_(*PGO_USE), "compiling the C++ model with the profile")
        (build_dir / "build_seconds").write_text(f"{time.perf_counter() - start:.1f}\n")
        (build_dir / "build.ok").write_text(key_source[:200] + "\n")
        return build_dir


def fast_cflags(cflags: str | None, pgo: bool, plain: str) -> str:
    """The C++ flags of a fabric build: ``cflags`` if given, else :data:`PGO_CFLAGS` with
    ``pgo`` and the runner's ``plain`` flags without."""
    if cflags is not None:
        return cflags
    return PGO_CFLAGS if pgo else plain


def build_trained(verilog: str, top: str, ports, *, cflags: str, pgo: bool, workload=None,
                  sim_build: Path | None = None) -> Path:
    """:func:`build_top_public_only` for a fabric runner: with ``pgo`` the build is
    profile-guided, trained by ``workload`` (``{name: run}``, each ``run(build_dir)`` runs one
    checked case of the runner on the instrumented model and raises if it goes wrong, which
    fails the build); the workload's names key the cache. Without ``pgo``, a plain build at
    ``cflags`` (``workload`` unused)."""
    return build_top_public_only(verilog, top, ports, cflags=cflags, sim_build=sim_build,
                                 **training_options(top, workload, pgo))


def training_options(what: str, workload, pgo: bool) -> dict:
    """``train`` and ``training`` of a build (:func:`build_top_public_only`,
    ``eda.fabric.lockstep.build_lockstep``) trained by ``workload`` (``{name: run(build_dir)}``,
    run in order) with ``pgo``; none without. ``what`` names the build in the error of a
    profile-guided build without a workload."""
    workload = dict(workload or {})
    if not pgo:
        return {"train": None, "training": ""}
    if not workload:
        raise FredError(f"{what}: a profile-guided build needs a training workload")

    def train(build_dir: Path) -> None:
        for run in workload.values():
            run(build_dir)
    return {"train": train, "training": ", ".join(workload)}


def user_cflags_of(verilator_args) -> list[str]:
    """A Verilated makefile's user C++ flags: every ``-CFLAGS`` value of the verilation, in
    order (replaced on make's command line, so one verilation serves both compiles of a
    profile-guided build)."""
    args = list(verilator_args)
    return [args[i + 1] for i, arg in enumerate(args) if arg == "-CFLAGS"]


def clean_objects(build_dir: Path, top: str, *, profiles: bool) -> None:
    """Remove the compiled objects, archives, precompiled headers and the simulator (so that
    make compiles everything again with new flags); with ``profiles`` the ``.gcda`` too."""
    patterns = ["*.o", "*.a", "*.gch"] + (["*.gcda"] if profiles else [])
    for pattern in patterns:
        for path in build_dir.glob(pattern):
            path.unlink()
    (build_dir / top).unlink(missing_ok=True)
