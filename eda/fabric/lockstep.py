"""The lock-step simulator of the fabric: two Verilated parts on two cores (docs/fabric_rtl.md).

:class:`hdl.contracts.fabric_partition.FabricPartition` cuts the fabric at uplinks into two parts;
each part is ``FabricTop(spec, partition=..., part=p)``, Verilated as its own model (the mesh:
:class:`hdl.contracts.mesh_partition.MeshPartition` between two columns,
``MeshFabricTop(spec, partition=..., part=p)``)
(``--prefix Vpart<p>``); ``lockstep.cpp`` runs both in lock step, one thread each, swapping the
cut links' signals between cycles (its header explains why that is exact). It does what the
cocotb bench ``bench_fabric.py`` does -- power-on, load the configurations and programs through
the top's ports, pulse ``start``, poll ``all_done``, read every counter -- without cocotb or
VPI, and writes the same metrics, so :func:`cocotb_tests.fabric.run.run_program` judges both
the same way.

Build: each part is verilated with the runner's options and compiled into a library by its
own ``Vpart<p>.mk``; the driver is compiled and linked against both. With ``train`` the build
is profile-guided like :mod:`eda.fabric.build`: instrumented objects, a training run,
then every object compiled again from the profiles. Builds are cached by a hash of both parts'
Verilog, the driver's source, the options and the Verilator version.
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
from eda.fabric.build import PGO_GENERATE, PGO_USE, clean_objects, user_cflags_of
from eda.toolchain import BUILD_ARGS, SIM_BUILD, build_lock, build_step, make_environment, setup_verilator

__all__ = ["DRIVER", "EXECUTABLE", "build_lockstep", "run_lockstep", "PART_TOPS"]

#: The driver's C++ source.
DRIVER = Path(__file__).with_name("lockstep.cpp")
#: The simulator's file name in its build folder.
EXECUTABLE = "fred_fabric_lockstep"
#: Verilog top module of each part.
PART_TOPS = ("fred_fabric_part0", "fred_fabric_part1")

# The driver's threads. A profile-guided build's counters are not atomic (PGO_GENERATE), which
# is fine here: each part's code runs on one thread; only the small shared runtime and driver
# code can lose a count, which blurs its profile and nothing else.
_CXX = ("-std=c++17", "-pthread")


def build_lockstep(verilogs, *, cflags: str = "-O2", verilator_args=(), sim_build: Path | None = None,
                   train=None, training: str = "") -> Path:
    """Build the lock-step simulator of the two parts' Verilog ``verilogs`` (tops
    :data:`PART_TOPS`); returns the build folder (cached), whose :data:`EXECUTABLE` runs a
    command file (``lockstep.cpp``). ``train``: None, or ``train(build_dir)`` running the
    instrumented simulator for profile-guided optimization (``training`` names it in the cache
    key)."""
    verilogs = list(verilogs)
    if len(verilogs) != 2:
        raise FredError(f"the lock-step simulator runs two parts, got {len(verilogs)}")
    tool = setup_verilator()
    args = [*BUILD_ARGS, "-CFLAGS", cflags, *verilator_args]
    key_source = json.dumps([verilogs, DRIVER.read_text(), tool.version, args, list(_CXX)]
                            + (["pgo", list(PGO_GENERATE), list(PGO_USE), training] if train else []))
    key = hashlib.sha256(key_source.encode()).hexdigest()[:16]
    build_dir = Path(sim_build or SIM_BUILD) / f"fred_fabric-lockstep-{key}"
    with build_lock(build_dir):
        if (build_dir / "build.ok").is_file() and (build_dir / EXECUTABLE).is_file():
            print(f"build: lock-step fabric: cached simulator {build_dir}", file=sys.stderr, flush=True)
            return build_dir
        build_dir.mkdir(parents=True, exist_ok=True)
        env = make_environment()
        user_cflags = user_cflags_of(args)
        part_dirs = [build_dir / f"part{p}" for p in range(2)]
        include = tool.root / "include"
        start = time.perf_counter()
        with open(build_dir / "build.log", "w") as log:
            def run(cmd, what):
                log.write("\n$ " + " ".join(map(str, cmd)) + "\n")
                log.flush()
                with build_step(f"lock-step fabric: {what} (log {build_dir / 'build.log'})"):
                    done = subprocess.run([str(c) for c in cmd], stdout=log, stderr=subprocess.STDOUT, env=env)
                    if done.returncode:
                        raise FredError(f"lock-step fabric build failed ({Path(str(cmd[0])).name} exit "
                                        f"{done.returncode}); log {build_dir / 'build.log'}")

            for p, (verilog, part_dir) in enumerate(zip(verilogs, part_dirs)):
                part_dir.mkdir(exist_ok=True)
                source = part_dir / f"{PART_TOPS[p]}.v"
                source.write_text(verilog)
                run([tool.executable, "-cc", "-Mdir", part_dir, "--top-module", PART_TOPS[p],
                     "--prefix", f"Vpart{p}", *args, str(source)],
                    f"verilating part {p} ({len(verilog) / 1e6:.1f} MB of Verilog)")

            def compile_(*extra):
                flags = " ".join([*user_cflags, *extra, *_CXX])
                for p, part_dir in enumerate(part_dirs):
                    run(["make", "-j", str(os.cpu_count() or 1), "-C", part_dir, "-f", f"Vpart{p}.mk",
                         "VM_TRACE=0", f"VM_USER_CFLAGS={flags}"], f"compiling part {p}'s C++ model")
                run(["g++", *flags.split(), "-I", include, "-I", include / "vltstd",
                     *(x for d in part_dirs for x in ("-I", d)), DRIVER,
                     part_dirs[0] / "libVpart0.a", part_dirs[1] / "libVpart1.a",
                     part_dirs[0] / "libverilated.a", "-o", build_dir / EXECUTABLE], "linking the simulator")

            def clean(profiles: bool):
                # objects and the simulator (and with ``profiles`` every .gcda), so that make and
                # g++ compile everything again with the new flags
                for p, part_dir in enumerate(part_dirs):
                    clean_objects(part_dir, f"Vpart{p}", profiles=profiles)
                if profiles:
                    for path in build_dir.glob("*.gcda"):   # the driver's
                        path.unlink()
                (build_dir / EXECUTABLE).unlink(missing_ok=True)

            if train is None:
                compile_()
            else:
                clean(profiles=True)
                compile_(*PGO_GENERATE)
                log.write(f"\n# profile-guided optimization: training run ({training})\n")
                train_start = time.perf_counter()
                with build_step(f"lock-step fabric: profile training run ({training})"):
                    train(build_dir)
                profiles = [*build_dir.rglob("*.gcda")]
                if not profiles:
                    raise FredError(f"lock-step fabric build: the training run ({training}) wrote no "
                                    f"profile (*.gcda) in {build_dir}")
                log.write(f"# training {time.perf_counter() - train_start:.1f} s, {len(profiles)} profiles\n")
                clean(profiles=False)
                compile_(*PGO_USE)
        (build_dir / "build_seconds").write_text(f"{time.perf_counter() - start:.1f}\n")
        (build_dir / "build.ok").write_text(key_source[:200] + "\n")
        return build_dir


def run_lockstep(build_dir: Path, params: dict, *, run_dir: Path | None = None) -> dict:
    """Run the bench parameters ``params`` (those of ``bench_fabric.py``: ``npus`` units with
    engine registers, ``switch_count`` switch units after them, ``config``, ``writes``,
    ``watchdog_cycles``, ``poll``, ``settle``; optionally the register names ``engine_read``,
    ``switch_read`` and ``global_read`` of another top with the same harness, default
    ``FabricTop``'s; an iteration top's ``nodes``, per rank the node count to read back, with
    ``trace_units`` / ``trace_read``, per rank the unit of its trace sequencer and the
    sequencer's read registers, default the rank and ``engine_read``: those of
    ``cocotb_tests.iteration.bench_iteration``; an I/O top's ``controller_units`` with their
    ``controller_read`` registers, as the bench's) on the lock-step simulator in ``build_dir``;
    returns the bench's metrics (``before`` / ``after`` with named registers, ``controllers``
    among them, ``node_times`` per rank, as the bench records them)."""
    from hdl.designs.fabric.fabric_top import ENGINE_READ, GLOBAL_READ, GLOBAL_UNIT, POR_CYCLES, SWITCH_READ
    engine_read = params.get("engine_read", ENGINE_READ)
    switch_read = params.get("switch_read", SWITCH_READ)
    global_read = params.get("global_read", GLOBAL_READ)
    lines = [f"npus {params['npus']}", f"switches {params['switch_count']}",
             f"watchdog {params['watchdog_cycles']}",
             f"poll {params['poll']}", f"settle {params.get('settle', 64)}", f"por {POR_CYCLES}",
             f"engine_regs {len(engine_read)}", f"switch_regs {len(switch_read)}",
             f"global_unit {GLOBAL_UNIT}", f"global_regs {len(global_read)}"]
    switch_units = list(params.get("switch_units", ()))
    if switch_units:     # consecutive from a base (a top with I/O controllers: after them)
        if switch_units != list(range(switch_units[0], switch_units[0] + params["switch_count"])):
            raise FredError(f"the lock-step simulator reads consecutive switch units, got {switch_units}")
        lines.append(f"switch_base {switch_units[0]}")
    lines += [f"cfg {s} {k} {last} {word}" for s, k, last, word in params.get("config", [])]
    lines += [f"prog {unit} {reg} {value}" for unit, reg, value in params["writes"]]
    if "nodes" in params:
        from hdl.contracts.trace_program import TRACE_READ_ADDR
        trace_read = list(params.get("trace_read", engine_read))
        units = params.get("trace_units", range(len(params["nodes"])))
        lines.append(f"trace_regs {TRACE_READ_ADDR} {trace_read.index('node_start')} {trace_read.index('node_end')}")
        lines += [f"nodes {unit} {count}" for unit, count in zip(units, params["nodes"], strict=True)]
    controller_read = params.get("controller_read", ())
    if params.get("controller_units"):
        lines.append(f"controller_regs {len(controller_read)}")
        lines += [f"controller {unit}" for unit in params["controller_units"]]
    run_dir = Path(run_dir) if run_dir is not None else Path(build_dir) / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    commands, result = run_dir / "commands.txt", run_dir / "result.json"
    commands.write_text("\n".join(lines) + "\n")
    result.unlink(missing_ok=True)
    done = subprocess.run([str(Path(build_dir) / EXECUTABLE), str(commands), str(result)],
                          capture_output=True, text=True, cwd=run_dir)
    if done.returncode or not result.is_file():
        raise FredError(f"lock-step fabric simulator failed (exit {done.returncode}): "
                        f"{(done.stderr or done.stdout).strip()[-500:]}")
    metrics = json.loads(result.read_text())

    def named(state):
        return {"engines": [dict(zip(engine_read, regs)) for regs in state["engines"]],
                "switches": [dict(zip(switch_read, regs)) for regs in state["switches"]],
                "global": dict(zip(global_read, state["global"])),
                "controllers": [dict(zip(controller_read, regs)) for regs in state["controllers"]]}
    metrics["before"], metrics["after"] = named(metrics["before"]), named(metrics["after"])
    return metrics
