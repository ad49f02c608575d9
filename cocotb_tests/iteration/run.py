"""``run_iteration``: the NPUs' iteration traces run on the circuit FRED fabric RTL under Verilator
(docs/fabric_iteration.md); ``run_mesh_iteration``: the same on the 2D-mesh fabric RTL.

Steps: the fabric's Verilog with a :class:`hdl.designs.iteration.TraceNpu` at every NPU port
(memoised per hardware and node-memory depth), built once per distinct Verilog (cached by
content hash, only the top's ports public: ``eda.fabric.build``; no profile-guided build), the
bench ``cocotb_tests.iteration.bench_iteration`` loading the switch configurations and
programs of the collective's request (``cocotb_tests.fabric.run.load_sequence``) and every
NPU's trace (:func:`hdl.contracts.trace_program.trace_writes`), starting once and reading the
counters; the engines' counters are judged as a fabric run's are (every flit arrived once, in
order, bit-exact).

Timed window (``IterationRun.cycles``): the fabric's cycle counter, from the cycle after
``start`` to the cycle every NPU's trace is done; the node times count from the same cycle.
``all_done`` is polled by the fabric runners' rule (``cocotb_tests.fabric.run.poll_cycles``)
applied to the run's watchdog budget: every 1,024 cycles for any budget above 16,384 (every
case the studies run), so the wall-clock window (``sim_s``) overshoots the run by less than
1,024 cycles (was up to 20,000: a 1/64 of the watchdog).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricSpec
from hdl.contracts.trace_program import LOADER_READ, REPEAT_MASK, NpuTrace, loader_writes, trace_writes
from cocotb_tests.fabric.run import (DEFAULT_SIMULATOR, PORTS, TOP, check_simulator, judge_engines, hardware_key,
                                     judge_loads, default_cflags, load_sequence, poll_cycles)

__all__ = ["IterationRun", "run_iteration", "build_iteration", "simulate_iteration", "iteration_verilog",
           "iteration_part_verilogs", "traces_overlap",
           "node_depth", "run_mesh_iteration", "mesh_iteration_verilog", "mesh_iteration_part_verilogs",
           "mesh_loader_entries", "bench_metrics", "run_error_lines", "check_finished", "iteration_run",
           "check_pgo", "lockstep_params_of", "PGO_TRAINING"]

_VERILOG: dict = {}
#: The mesh's trace and program memories per NPU (at least): the iteration table's cases
#: (studies.iteration_table) have at most 329 nodes and 414 loader entries per NPU
#: (transformer-17b MP4-DP5).
MESH_NODES, MESH_ENTRIES = 512, 512
#: The same on the circuit FRED fabric with several collectives per NPU (engine and switch
#: loaders): at most 329 nodes, 560 loader entries (a switch of transformer-17b MP4-DP5 takes
#: one program per run of its 168 collectives' runs).
FRED_NODES, FRED_ENTRIES = 512, 1024


@dataclass
class IterationRun:
    """What one RTL run of an iteration measured: ``cycles`` (the timed window), per rank the
    ``node_times`` ([start, end] cycles per node, file order), ``errors`` (empty: every flit
    of the collective arrived once, in order, bit-exact, and every trace finished), the
    engines' ``flits_sent`` / ``flits_received``, ``build_s``, ``sim_s`` (wall-clock of the
    timed window), ``cycles_per_s``, ``depth`` (node memory per NPU), ``build_dir``, ``load_stall`` (the mesh:
    per rank, cycles its collective nodes waited for their program), ``simulator`` (``cocotb``:
    one model under the cocotb bench; ``lockstep``: the fabric cut in two parts run on two
    cores, ``eda/fabric/lockstep.cpp``)."""

    fabric: str
    cycles: int
    node_times: dict
    errors: list
    flits_sent: int
    flits_received: int
    build_s: float
    sim_s: float
    cycles_per_s: float
    depth: int
    build_dir: str = ""
    load_stall: dict | None = None
    simulator: str = "cocotb"

    def to_dict(self) -> dict:
        return asdict(self)


def node_depth(traces: dict) -> int:
    """Node memory per NPU: the longest trace rounded up to a power of two (at least 16), so
    that traces of similar length share a build."""
    longest = max((len(t.words) for t in traces.values()), default=1)
    return max(16, 1 << (longest - 1).bit_length())


def build_iteration(simulator: str, *, parts, whole, top: str, ports, cflags: str, sim_build=None,
                    public_vars=(), training: dict | None = None) -> Path:
    """The build folder (cached) of an iteration top for ``simulator``: ``lockstep``, the two
    parts' Verilog ``parts()`` built by ``eda.fabric.lockstep.build_lockstep``; ``cocotb``, the
    one model's Verilog ``whole()`` (top module ``top``, only ``ports`` public, and the
    variables ``public_vars``: memories the bench writes through VPI) by
    ``eda.fabric.build.build_top_public_only``. ``parts`` and ``whole`` are called only for the
    simulator that needs them (generating a fabric's Verilog takes seconds to minutes).

    ``training``: None, or the lock-step driver's parameters of a run
    (:func:`lockstep_params_of`) -- a profile-guided build (``eda.fabric.build.PGO_CFLAGS``,
    lock-step only): the instrumented simulator runs them once, then is compiled again from
    the profile. The cache keys the build by its Verilog and flags, not by the training run, so
    every case on the same top reuses the first one's profile: the profile moves machine code
    only, never a cycle (docs/fabric_iteration.md, "Profile-guided iteration builds")."""
    if simulator == "lockstep":
        from eda.fabric.lockstep import build_lockstep
        if training is None:
            return build_lockstep(parts(), cflags=cflags, sim_build=sim_build)
        from cocotb_tests.runner import run_folder
        from eda.fabric.build import PGO_CFLAGS
        from eda.fabric.lockstep import run_lockstep

        def train(build_dir):
            run_lockstep(build_dir, training, run_dir=run_folder(build_dir, "pgo-training"))
        return build_lockstep(parts(), cflags=PGO_CFLAGS, sim_build=sim_build, train=train,
                              training=PGO_TRAINING)
    if training is not None:
        check_pgo(simulator)
    from eda.fabric.build import build_top_public_only
    return build_top_public_only(whole(), top, ports, cflags=cflags, sim_build=sim_build, public_vars=public_vars)


def check_pgo(simulator: str | None, cflags: str | None = None) -> None:
    """Refuse a profile-guided iteration build (:func:`build_iteration`'s ``training``) where it
    cannot be: under cocotb (it is a lock-step build), or with other C++ flags ``cflags`` (it
    compiles at its own)."""
    if simulator == "cocotb":
        raise FredError("a profile-guided iteration build runs on the lock-step simulator, not under cocotb")
    if cflags is not None:
        raise FredError(f"a profile-guided iteration build compiles at its own flags; got cflags {cflags!r} too")


#: The name of every profile-guided iteration build's training in its cache key: one name, so
#: that the cases of one top share one build (:func:`build_iteration`).
PGO_TRAINING = "an iteration run on this top"


def lockstep_params_of(params: dict, lockstep_params: dict | None = None) -> dict:
    """The lock-step driver's parameters of a run: the bench's ``params`` with
    ``lockstep_params`` over them (the register lists a top reads differently there)."""
    return {**params, **(lockstep_params or {})}


def simulate_iteration(simulator: str, built, params: dict, *, name: str, top: str, testcase: str,
                       what: str, lockstep_params: dict | None = None) -> dict:
    """The metrics of one run of the bench parameters ``params`` on the build ``built``
    (:func:`build_iteration`'s) under ``simulator``: the lock-step driver
    (``eda.fabric.lockstep.run_lockstep``, with ``lockstep_params`` over ``params``: the
    register lists a top reads differently there) or the cocotb bench
    ``bench_iteration.py``'s ``testcase`` on the one model (top module ``top``); the run's
    folder is named ``name``; ``what`` names the run in the error of a bench that recorded
    nothing."""
    from cocotb_tests.runner import run_bench, run_folder
    if simulator == "lockstep":
        from eda.fabric.lockstep import run_lockstep
        return run_lockstep(built, lockstep_params_of(params, lockstep_params), run_dir=run_folder(built, name))
    # a prebuilt model: run_bench needs the top's name only, not its Verilog
    result = run_bench(test_module="cocotb_tests.iteration.bench_iteration", verilog=("", top),
                       bench_params=params, run_name=name, prebuilt=built, testcase=testcase)
    return bench_metrics(result, what)


def iteration_verilog(spec: FabricSpec, depth: int, programs: int | None = None, overlap: bool = False) -> str:
    """Verilog of the fabric of ``spec`` with trace NPUs of ``depth`` nodes (memoised); with
    ``programs``, loaders of that many entries at every NPU and switch (several collectives);
    ``overlap``: sequencers that run compute under collectives."""
    key = (depth, programs, overlap) + hardware_key(spec)
    if key not in _VERILOG:
        from hdl.designs.iteration import iteration_fabric_top
        from hdl.emit.verilog import to_verilog
        _VERILOG[key] = to_verilog(iteration_fabric_top(spec, depth=depth, programs=programs,
                                                        switch_programs=programs, overlap=overlap), name=TOP)
    return _VERILOG[key]


def iteration_part_verilogs(spec: FabricSpec, depth: int, programs: int | None = None,
                            overlap: bool = False) -> tuple[str, str]:
    """Verilog of the two parts of :func:`iteration_verilog`'s fabric for the lock-step
    simulator (``eda.fabric.lockstep``; the default partition of ``spec``,
    ``hdl.contracts.fabric_partition``), memoised as :func:`iteration_verilog`."""
    key = ("parts", depth, programs, overlap) + hardware_key(spec)
    if key not in _VERILOG:
        from eda.fabric.lockstep import PART_TOPS
        from eda.toolchain import build_step
        from hdl.contracts.fabric_partition import fabric_partition
        from hdl.designs.iteration import iteration_fabric_top
        from hdl.emit.verilog import to_verilog
        partition = fabric_partition(spec, 2)
        with build_step(f"iteration {spec.name}: generating the Verilog of the lock-step simulator's two parts"):
            _VERILOG[key] = tuple(
                to_verilog(iteration_fabric_top(spec, depth=depth, programs=programs, switch_programs=programs,
                                                overlap=overlap, partition=partition, part=p), name=PART_TOPS[p])
                for p in range(2))
    return _VERILOG[key]


def traces_overlap(traces: dict) -> bool:
    """Whether ``traces`` are overlapped (:func:`hdl.contracts.trace_program.npu_trace`'s
    ``overlap``): the build's sequencers must then be; a mix is an error."""
    kinds = {t.overlap for t in traces.values()}
    if len(kinds) > 1:
        raise FredError("the NPUs' traces mix overlapped and serialised ones; one build runs one kind")
    return kinds == {True}


def collective_repeats(traces: dict, count: int) -> list[int]:
    """The runs of each of the traces' ``count`` collectives (the node word's repeat bits; the
    k-th collective node is the same node at every NPU that has it)."""
    runs = [1] * count
    for trace in traces.values():
        for k, node_id in enumerate(trace.collectives[:count]):
            runs[k] = (trace.words[trace.node_ids.index(node_id)] & REPEAT_MASK) or 1
    return runs


def iteration_load(spec: FabricSpec, program, traces: dict, depth: int, room: int | None = None) -> dict:
    """The load sequence: the request's (configurations, sequencer and engine programs; an
    NPU outside the request gets an empty engine program), then every NPU's trace. Several
    collectives (``program`` a list of each one's program, ``room`` loader entries): the
    switches' configurations (every algorithm's phases side by side in their slots, loaded
    once), then every switch's and NPU's loader entries (:mod:`cocotb_tests.iteration.fred_loading`)."""
    if isinstance(program, list):
        from cocotb_tests.iteration.fred_loading import fred_configuration, fred_loader_entries
        ranks, switches = fred_loader_entries(spec, program, collective_repeats(traces, len(program)))
        load = {"config": fred_configuration(spec, program), "writes": []}
        for unit, entries in [(spec.npus + s, e) for s, e in switches.items()] + list(ranks.items()):
            load["writes"] += [[unit, reg, value] for reg, value in loader_writes(entries, 1, room)]
    else:
        load = load_sequence(spec, program) if program is not None else {"config": [], "writes": []}
    for rank in range(spec.npus):
        trace = traces.get(rank)
        if trace is not None:
            load["writes"] += [[rank, reg, value] for reg, value in trace_writes(trace, depth)]
    return load


def run_iteration(spec: FabricSpec, traces: dict[int, NpuTrace], program, *, watchdog_cycles: int,
                  cflags: str | None = None, build_dir=None, simulator: str = DEFAULT_SIMULATOR,
                  pgo: bool = False) -> IterationRun:
    """Run every rank's trace (``traces``; a rank without one finishes at once) on the circuit
    fabric of ``spec``, the switches and engines loaded with ``program`` (the
    :class:`hdl.compiler.fabric_program.FabricProgram` of the traces' collective, or None);
    ``watchdog_cycles``: the run's budget (a stalled run raises, naming what did not finish);
    ``cflags``: the C++ optimisation (default: ``default_cflags(spec, pgo=False)``);
    ``simulator``: one of ``cocotb_tests.fabric.run.SIMULATORS``, default ``lockstep`` (the
    fabric cut at its uplinks, run on two cores by ``eda/fabric/lockstep.cpp``; ``cocotb``: one
    model under the bench ``bench_iteration.py``): both load and read back through the same
    ports and count the same cycles and node times. ``pgo``: a profile-guided lock-step build
    (:func:`build_iteration`'s ``training``, this run's parameters), the same cycles faster."""
    from hdl.designs.iteration import TraceNpu
    check_simulator(simulator)
    several = isinstance(program, list)
    overlap = traces_overlap(traces)
    depth, room = node_depth(traces), None
    names = list(TraceNpu.read_names)
    if several:     # one build for the table's cases (FRED_NODES, FRED_ENTRIES: at least)
        from cocotb_tests.iteration.fred_loading import fred_loader_entries
        depth = max(FRED_NODES, depth)
        longest = max(len(e) for entries in fred_loader_entries(spec, program, collective_repeats(traces, len(program)))
                      for e in entries.values())
        room = max(FRED_ENTRIES, 1 << (longest - 1).bit_length())
        names += list(LOADER_READ)
    params = {"npus": spec.npus, "switch_count": len(spec.switch_ports),
              **iteration_load(spec, program, traces, depth, room), "watchdog_cycles": watchdog_cycles,
              "poll": poll_cycles(watchdog_cycles),
              "nodes": [len(traces[r].words) if r in traces else 0 for r in range(spec.npus)],
              "engine_read": names}
    start = time.perf_counter()
    built = build_iteration(simulator, parts=lambda: iteration_part_verilogs(spec, depth, room, overlap),
                            whole=lambda: iteration_verilog(spec, depth, room, overlap), top=TOP, ports=PORTS,
                            cflags=cflags or default_cflags(spec, pgo=False),
                            sim_build=Path(build_dir) if build_dir is not None else None,
                            training=lockstep_params_of(params) if pgo else None)
    build_s = time.perf_counter() - start
    name = (f"iteration-{spec.name}-n{spec.npus}-d{depth}" + (f"-p{room}" if several else "")
            + ("-overlap" if overlap else ""))
    metrics = simulate_iteration(simulator, built, params, name=name, top=TOP, testcase="run_iteration",
                                 what=f"fabric {spec.name} iteration")
    after = metrics["after"]
    last = program[-1] if several else program
    errors = judge_loads(program[0] if several else program, metrics["before"]) if program is not None else []
    stuck = [f"NPU {r} (node {e['nodes_done']}/{len(traces[r].words)})"
             for r, e in enumerate(after["engines"]) if r in traces and not e["done"]]
    if program is not None:   # the last collective's counters; every run's bad and extra flits
        engine_errors, _, _ = judge_engines(spec, last, after["engines"])
        errors += engine_errors
    if several:
        errors += run_error_lines(after["engines"])
    check_finished(f"fabric {spec.name}", metrics, stuck, errors)
    run = iteration_run(spec.name, traces, metrics, errors, build_s, depth, built)
    run.simulator = simulator
    if several:
        run.load_stall = {r: e["load_stall"] for r, e in enumerate(after["engines"]) if r in traces}
    return run


def mesh_iteration_verilog(spec, depth: int, programs: int, overlap: bool = False) -> str:
    """Verilog of the mesh fabric of ``spec`` with loading trace sequencers of ``depth`` nodes and
    ``programs`` program entries (memoised); ``overlap``: compute under collectives."""
    key = ("mesh", depth, programs, overlap, spec)
    if key not in _VERILOG:
        from hdl.designs.iteration import iteration_mesh_top
        from hdl.emit.verilog import to_verilog
        from cocotb_tests.fabric.mesh_run import TOP as MESH_TOP
        _VERILOG[key] = to_verilog(iteration_mesh_top(spec, depth=depth, programs=programs, overlap=overlap),
                                   name=MESH_TOP)
    return _VERILOG[key]


def mesh_iteration_part_verilogs(spec, depth: int, programs: int, overlap: bool = False) -> tuple[str, str]:
    """Verilog of the two parts of :func:`mesh_iteration_verilog`'s mesh for the lock-step
    simulator (the mesh cut between two columns, ``hdl.contracts.mesh_partition``), memoised."""
    key = ("mesh-parts", depth, programs, overlap, spec)
    if key not in _VERILOG:
        from eda.fabric.lockstep import PART_TOPS
        from eda.toolchain import build_step
        from hdl.contracts.mesh_partition import mesh_partition
        from hdl.designs.iteration import iteration_mesh_top
        from hdl.emit.verilog import to_verilog
        partition = mesh_partition(spec)
        with build_step("mesh iteration: generating the Verilog of the lock-step simulator's two parts"):
            _VERILOG[key] = tuple(
                to_verilog(iteration_mesh_top(spec, depth=depth, programs=programs, overlap=overlap,
                                              partition=partition, part=p), name=PART_TOPS[p])
                for p in range(2))
    return _VERILOG[key]


def mesh_loader_entries(spec, programs: list) -> dict[int, list]:
    """Per rank, its program loader's entries (:func:`hdl.contracts.trace_program.loader_entries`)
    for ``programs`` (the :class:`hdl.compiler.mesh_program.MeshProgram` of each collective, in
    order): lane c gets the writes of the rank's chunk-c engine and engine port; the engine's
    ``stages`` register is deferred."""
    from hdl.contracts.mesh import MESH_VCS
    from hdl.contracts.npu_engine import ENGINE_REGS
    from hdl.contracts.trace_program import loader_entries
    from hdl.designs.mesh.mesh_fabric_top import PORT_REG_BASE
    per_unit = []
    for program in programs:
        writes: dict = {}
        for unit, reg, value in program.writes(spec, PORT_REG_BASE):
            writes.setdefault(unit, []).append((reg, value))
        per_unit.append(writes)
    stages = frozenset({ENGINE_REGS.index("stages")})
    return {rank: loader_entries([{c: w.get(rank * MESH_VCS + c, []) for c in range(MESH_VCS)} for w in per_unit],
                                 MESH_VCS, deferred=stages)
            for rank in range(spec.npus)}


def run_mesh_iteration(spec, traces: dict[int, NpuTrace], programs: list, *, watchdog_cycles: int,
                       cflags: str | None = None, build_dir=None, simulator: str = DEFAULT_SIMULATOR,
                       pgo: bool = False) -> IterationRun:
    """:func:`run_iteration` on the 2D-mesh fabric of ``spec`` (a
    :class:`hdl.contracts.mesh.MeshFabricSpec`): ``programs``, the
    :class:`hdl.compiler.mesh_program.MeshProgram` of each of the traces' collectives in order,
    go into every NPU's program loader (:func:`mesh_loader_entries`); judged: no engine saw a
    bad or extra flit in any run (the sequencers' ``run_errors``), the last collective's
    counters as ``cocotb_tests.fabric.mesh_run`` judges a collective's run, no protocol error.
    ``cflags`` default: the mesh fabric's (``mesh_run.CFLAGS``); ``simulator``: as
    :func:`run_iteration`'s (``lockstep``, the default: the mesh cut between two columns, its
    collective barrier split across the cut; ``cocotb``: one model); ``pgo`` as
    :func:`run_iteration`'s."""
    from cocotb_tests.fabric.mesh_run import CFLAGS, PORTS as MESH_PORTS, TOP as MESH_TOP, judge_mesh
    from hdl.designs.fabric.fabric_top import ENGINE_READ
    from hdl.designs.mesh.mesh_fabric_top import MESH_GLOBAL_READ
    from hdl.contracts.mesh import MESH_VCS
    from hdl.designs.iteration import LoadingTraceSequencer
    from hdl.designs.mesh.mesh_fabric_top import engine_unit, sequencer_unit
    check_simulator(simulator)
    # one build for every case of the iteration table (studies.iteration_table): at least
    # MESH_NODES nodes and MESH_ENTRIES program entries per NPU
    depth = max(MESH_NODES, node_depth(traces))
    overlap = traces_overlap(traces)
    entries = mesh_loader_entries(spec, programs)
    room = max(MESH_ENTRIES, 1 << (max(len(e) for e in entries.values()) - 1).bit_length())
    writes = []
    for rank in range(spec.npus):
        unit = sequencer_unit(spec, rank)
        trace = traces.get(rank)
        writes += [[unit, reg, value] for reg, value in loader_writes(entries[rank], MESH_VCS, room)]
        if trace is not None:
            writes += [[unit, reg, value] for reg, value in trace_writes(trace, depth)]
    params = {"writes": writes, "units": engine_unit(spec.npus, 0), "watchdog_cycles": watchdog_cycles,
              "poll": poll_cycles(watchdog_cycles),
              "nodes": [len(traces[r].words) if r in traces else 0 for r in range(spec.npus)],
              "trace_units": [sequencer_unit(spec, r) for r in range(spec.npus)],
              "trace_read": list(LoadingTraceSequencer.read_names)}
    name = f"mesh-iteration-{spec.rows}x{spec.cols}-d{depth}-p{room}" + ("-overlap" if overlap else "")
    # the lock-step driver reads the engines at units 0.. and, as its "switches", the sequencers
    # after them (sequencer_unit(spec, r) = engine_unit(spec.npus, 0) + r)
    lockstep = {"npus": params["units"], "switch_count": spec.npus, "engine_read": ENGINE_READ,
                "switch_read": params["trace_read"], "global_read": MESH_GLOBAL_READ}
    start = time.perf_counter()
    built = build_iteration(simulator, parts=lambda: mesh_iteration_part_verilogs(spec, depth, room, overlap),
                            whole=lambda: mesh_iteration_verilog(spec, depth, room, overlap), top=MESH_TOP,
                            ports=MESH_PORTS, cflags=cflags or CFLAGS,
                            sim_build=Path(build_dir) if build_dir is not None else None,
                            training=lockstep_params_of(params, lockstep) if pgo else None)
    build_s = time.perf_counter() - start
    metrics = simulate_iteration(simulator, built, params, name=name, top=MESH_TOP, testcase="run_mesh_iteration",
                                 what="mesh iteration", lockstep_params=lockstep)
    if simulator == "lockstep":
        state = metrics["after"]
        metrics["after"] = {"engines": state["engines"], "global": state["global"], "sequencers": state["switches"]}
    after = metrics["after"]
    stuck = [f"NPU {r} (node {s['nodes_done']}/{len(traces[r].words)})"
             for r, s in enumerate(after["sequencers"]) if r in traces and s["nodes_done"] != len(traces[r].words)]
    errors = judge_mesh(programs[-1], after, False) if programs else []
    errors += run_error_lines(after["sequencers"])
    check_finished(f"mesh {spec.rows} x {spec.cols}", metrics, stuck, errors)
    run = iteration_run("mesh", traces, metrics, errors, build_s, depth, built)
    run.simulator = simulator
    run.load_stall = {r: s["load_stall"] for r, s in enumerate(after["sequencers"]) if r in traces}
    return run


def bench_metrics(result, what: str) -> dict:
    """The metrics an iteration bench run (``result``, ``cocotb_tests.runner.run_bench``'s)
    recorded; FredError naming ``what`` and the run's log when it recorded nothing."""
    if not result.metrics:
        raise FredError(f"the {what} bench recorded nothing; log: {result.test_dir / 'sim.log'}")
    return result.metrics


def run_error_lines(units) -> list[str]:
    """One error per NPU whose engine (or sequencer: ``units``, per rank, its read registers)
    counted bad or extra flits over its collectives' runs (``run_errors``)."""
    return [f"NPU {r}: {u['run_errors']} bad or extra flit(s) over its collectives' runs"
            for r, u in enumerate(units) if u["run_errors"]]


def check_finished(label: str, metrics: dict, stuck: list[str], errors: list[str], *, shown: int | None = 5) -> None:
    """FredError, naming ``label``, the watchdog's cycle, what did not finish (``stuck``) and
    the first ``shown`` ``errors`` (None: all; their number when some are left out), when the
    run stalled or a trace did not finish."""
    if metrics["stalled"] or stuck:
        listed = errors if shown is None else errors[:shown]
        more = f" (the first {len(listed)} of {len(errors)})" if len(listed) < len(errors) else ""
        raise FredError(f"{label}: the iteration stalled (watchdog after "
                        f"{metrics['elapsed_cycles']} cycles); not finished: {', '.join(stuck) or 'none'}"
                        + (f"; also{more}: {'; '.join(listed)}" if errors else ""))


def iteration_run(fabric: str, traces: dict, metrics: dict, errors: list, build_s: float, depth: int,
                   built) -> IterationRun:
    """The :class:`IterationRun` of a judged bench run (its recorded ``metrics``)."""
    after = metrics["after"]
    cycles = after["global"]["cycles"]
    sim_s = metrics["sim_s"]
    return IterationRun(
        fabric=fabric, cycles=cycles,
        node_times={r: metrics["node_times"][r] for r in sorted(traces)}, errors=errors,
        flits_sent=sum(e["sent"] for e in after["engines"]),
        flits_received=sum(e["received"] for e in after["engines"]),
        build_s=round(build_s, 3), sim_s=round(sim_s, 4),
        cycles_per_s=round(cycles / sim_s, 1) if sim_s > 0 else 0.0, depth=depth,
        build_dir=str(built))
