"""``run_fabric``: run one :class:`~hdl.contracts.fabric.FabricRequest` on the fabric RTL under
Verilator and return what it measured (docs/fabric_rtl.md; the interface the ``fred fabric-sim`` command
calls).

Steps: :func:`hdl.compiler.fabric_program.fabric_program` validates the request and computes the
switch phases (routed by the configuration compiler) and engine programs (any error is raised
here, before anything is built); the Verilog of :class:`hdl.designs.fabric.FabricTop` for the spec is
generated (memoised per spec in this process) and built once per distinct Verilog (builds
are cached by content hash, so every request on one spec reuses one build: configurations and
programs are loaded through the top's ports); the simulator (:data:`SIMULATORS`: by default
the lock-step simulator ``eda.fabric.lockstep``, else the cocotb bench
``cocotb_tests.fabric.bench_fabric``) loads, starts and polls; the counters it reads are
judged here, the same way for both.

Timed window (``FabricRun.cycles``): counted in the RTL from the cycle after ``start`` to the
cycle every engine has sent everything and received and checked its last flit; every phase
select, including each switch's first, is inside it (the phase sequencers step the switches in
hardware).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricRequest, FabricSpec
from hdl.compiler.fabric_program import FabricProgram, default_phases, fabric_program
from hdl.contracts.npu_engine import engine_writes

__all__ = ["FabricRun", "configuration_words", "run_fabric", "run_program", "fabric_verilog", "build_fabric", "build_options",
           "default_cflags", "training_requests", "hardware_key", "judge_engine", "judge_engines", "judge_loads",
           "TRAINING_FLITS", "check_simulator", "SIMULATORS", "DEFAULT_SIMULATOR"]

TOP = "fred_fabric"
#: Verilator options of the fabric build (after the runner's): no hierarchical blocks
#: (``build_dut(hier_blocks=False)``) and the C++ compiled at -O2 with profile-guided
#: optimization (or -O1/-Os without) instead of the runner's -O0 (``cflags``, default
#: :func:`default_cflags`; ``pgo``, :func:`build_fabric`): a long fabric run's time is the
#: simulation itself, not cocotb's Python; the tests' short runs use -O0 (faster to build).
DEFAULT_CFLAGS = None
#: Switch ports in all above which the fabric's C++ is compiled at -Os instead of -O1 (builds
#: without profile-guided optimization).
OS_ABOVE_SWITCH_PORTS = 40


def default_cflags(spec: FabricSpec, *, pgo: bool = True) -> str:
    """C++ optimisation of the fabric model. With profile-guided optimization (``pgo``, the
    default of :func:`build_fabric`) -O2 for every fabric; without it -Os for a large fabric
    and -O1 for a small one.

    Measured 2026-11-23 (``make bench-fabric`` at 60,000 flits, under the lock, nothing else
    running). With PGO: Fred-B (30 switch ports: 6 x Fred_3(5)) -O2 110-112 k cycles/s, -O1
    103 k, -Os 83 k; Fred-D (60 switch ports: 5 x Fred_3(8) + 4 x Fred_3(5)) -O2 61-64 k, -Os
    41-42 k. Without PGO: Fred-D -Os 46-50 k vs -O1 40-45 k and -O2 38-39 k; Fred-B -O1
    101-105 k (before the engines' stages, 64-66 k after) vs -Os 92-95 k: the smaller code wins
    once the model outgrows the instruction caches; the threshold
    (:data:`OS_ABOVE_SWITCH_PORTS`) lies between the two measured fabrics."""
    if pgo:
        return "-O2"
    return "-Os" if sum(spec.switch_ports) > OS_ABOVE_SWITCH_PORTS else "-O1"


#: The simulators of the fabric RTL: ``cocotb`` (one Verilated model of the whole fabric,
#: driven by the cocotb bench ``bench_fabric.py``) and ``lockstep`` (the fabric cut in two
#: parts, each Verilated, run one per core in lock step by ``lockstep.cpp``; the same cycles
#: and counters).
SIMULATORS = ("cocotb", "lockstep")
DEFAULT_SIMULATOR = "lockstep"


def check_simulator(simulator) -> None:
    """FredError naming ``simulator`` unless it is one of :data:`SIMULATORS` (before any build)."""
    if simulator not in SIMULATORS:
        raise FredError(f"unknown fabric simulator {simulator!r}; expected one of {', '.join(SIMULATORS)}")


#: Further Verilator options of the fabric build (see ``docs/fabric_rtl.md``, simulation speed).
VERILATOR_ARGS: tuple[str, ...] = ()
#: The top's ports the bench touches (the only public signals of the build).
PORTS = ("clk", "start", "prog_*", "cfg_*", "rd_*", "all_done", "cycles")
_VERILOG: dict = {}


@dataclass
class FabricRun:
    """What one run measured. ``cycles``: the timed window (module docstring); ``flits_sent``
    / ``flits_received`` counted by the engines, ``flits_checked`` = received flits that were
    correct; ``errors``: empty = every flit arrived once, in order, bit-exact; ``phases``: per
    switch (``L1.0`` .. ``L2``) the configurations the request used; ``build_s`` (Verilog
    generation + Verilator build, ~0 when cached), ``sim_s`` (wall-clock seconds of the timed
    window's simulation), ``cycles_per_s`` = cycles / sim_s; ``simulator`` (:data:`SIMULATORS`);
    ``part_wait_s``: lock-step only, the seconds each part's thread spent waiting for the other
    (how well the partition balances the parts)."""

    fabric: str
    label: str
    op: str
    size_flits: int
    algorithm: str
    cycles: int
    flits_sent: int
    flits_received: int
    flits_checked: int
    errors: list[str]
    phases: dict[str, int]
    build_s: float
    sim_s: float
    cycles_per_s: float
    seed: int = 0
    sink_backpressure: float = 0.0
    expected_flits_sent: int = 0
    expected_flits_received: int = 0
    expected_flits_checked: int = 0
    build_dir: str = ""
    flows: dict = field(default_factory=dict)
    simulator: str = ""
    part_wait_s: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict:
        return asdict(self)


def hardware_key(spec: FabricSpec) -> tuple:
    """The fields of ``spec`` the RTL depends on, as a hashable key: not the name, nor
    ``in_switch`` (a property of the programs: Fred-A/B and Fred-C/D are the same hardware)."""
    return tuple(sorted((k, v) for k, v in spec.to_dict().items() if k not in ("name", "in_switch")))


def fabric_verilog(spec: FabricSpec) -> str:
    """Hierarchical Verilog of the fabric of ``spec`` (memoised per hardware in this process:
    Fred-C shares Fred-D's)."""
    key = hardware_key(spec)
    if key not in _VERILOG:
        from eda.toolchain import build_step
        from hdl.designs.fabric import FabricTop
        from hdl.emit.verilog import to_verilog
        # generation takes 10-40 s before any build (or cache look-up): announce it
        with build_step(f"fabric {spec.name}: generating the Verilog"):
            _VERILOG[key] = to_verilog(FabricTop(spec), name=TOP)
    return _VERILOG[key]


def build_options(spec: FabricSpec, cflags: str | None = None, pgo: bool | None = None) -> tuple[str, bool]:
    """(C++ flags, profile-guided or not) of a fabric build asked for with ``cflags`` and
    ``pgo`` (either None: the default): PGO unless ``cflags`` has -O0 (the tests' quick
    builds), ``cflags`` None -> :func:`default_cflags`."""
    if pgo is None:
        pgo = cflags is None or "-O0" not in cflags.split()
    return (default_cflags(spec, pgo=pgo) if cflags is None else cflags), pgo


def part_verilogs(spec: FabricSpec) -> tuple[str, str]:
    """Verilog of the two parts of the lock-step simulator (``hdl.contracts.fabric_partition``:
    the default partition of ``spec``), memoised per hardware in this process."""
    from hdl.contracts.fabric_partition import fabric_partition
    from eda.fabric.lockstep import PART_TOPS
    key = ("parts",) + hardware_key(spec)
    if key not in _VERILOG:
        from eda.toolchain import build_step
        from hdl.designs.fabric import FabricTop
        from hdl.emit.verilog import to_verilog
        partition = fabric_partition(spec, 2)
        # generation takes 10-40 s before any build (or cache look-up): announce it
        with build_step(f"fabric {spec.name}: generating the Verilog of the lock-step simulator's two parts"):
            _VERILOG[key] = tuple(to_verilog(FabricTop(spec, partition=partition, part=p), name=PART_TOPS[p])
                                  for p in range(2))
    return _VERILOG[key]


def build_fabric(spec: FabricSpec, cflags: str | None = DEFAULT_CFLAGS, sim_build=None,
                 verilator_args=None, *, pgo: bool | None = None,
                 simulator: str = DEFAULT_SIMULATOR) -> tuple[Path, float]:
    """(build folder, seconds spent) of the fabric of ``spec`` under Verilator for
    ``simulator``: ``lockstep``, the two parts' models and the driver
    (``eda.fabric.lockstep``); ``cocotb``, one flat model (no hierarchical blocks),
    only the top's ports public (``eda.fabric.build``). ``verilator_args`` (default
    :data:`VERILATOR_ARGS`) are further Verilator options.
    ``pgo``: compile with profile-guided optimization, trained by :func:`train_fabric`;
    ``cflags`` and ``pgo`` None: :func:`build_options`."""
    from eda.fabric.build import build_top_public_only
    check_simulator(simulator)
    cflags, pgo = build_options(spec, cflags, pgo)
    start = time.perf_counter()
    options = dict(
        cflags=cflags, verilator_args=VERILATOR_ARGS if verilator_args is None else tuple(verilator_args),
        sim_build=Path(sim_build) if sim_build is not None else None,
        train=(lambda built: train_fabric(spec, built, simulator=simulator)) if pgo else None,
        training=f"{TRAINING_OPS} x {TRAINING_FLITS} flits" if pgo else "")
    if simulator == "lockstep":
        from eda.fabric.lockstep import build_lockstep
        build_dir = build_lockstep(part_verilogs(spec), **options)
    else:
        build_dir = build_top_public_only(fabric_verilog(spec), TOP, PORTS, **options)
    return build_dir, time.perf_counter() - start


#: The profile-guided build's training workload (:func:`train_fabric`): each collective the
#: fabric runs, across the whole wafer, in its default algorithm, of :data:`TRAINING_FLITS`
#: flits. Generic on purpose: the same for every fabric and not the benchmark's own case
#: alone (``docs/fabric_rtl.md`` measures a Fig. 9 case that is not in it).
TRAINING_OPS = ("all-reduce", "reduce", "multicast")
TRAINING_FLITS = 2000


def training_requests(spec: FabricSpec) -> list[FabricRequest]:
    """The training workload's requests on ``spec``: each of :data:`TRAINING_OPS` across the
    whole wafer, :data:`TRAINING_FLITS` flits (the circuit and the packet fabric's builds)."""
    from hdl.contracts.fabric import make_request
    return [make_request(spec, op=op, size_flits=TRAINING_FLITS, group="wafer") for op in TRAINING_OPS]


def train_fabric(spec: FabricSpec, build_dir: Path, *, simulator: str = DEFAULT_SIMULATOR) -> None:
    """Run the training workload on the instrumented model in ``build_dir`` (every flit
    checked, as in any run: a training run that goes wrong fails the build)."""
    ran = []
    for request in training_requests(spec):
        op = request.op
        try:
            program = fabric_program(spec, request)
        except FredError:
            continue     # an op this fabric does not run (e.g. a dtype's limits): not trained
        run = run_program(spec, request, program, prebuilt=build_dir, simulator=simulator)
        if run.errors:
            raise FredError(f"fabric {spec.name}: the training run ({request.label}) failed: "
                            f"{'; '.join(run.errors[:3])}")
        ran.append(op)
    if not ran:
        raise FredError(f"fabric {spec.name}: no training collective runs on this fabric")


def configuration_words(program: FabricProgram, base: int = 0) -> list[list[int]]:
    """Every stored phase of ``program`` as the configuration port loads it: ``[switch, slot,
    last, word]`` per 32-bit word, phase k of a switch in slot ``base + k`` (``last`` marks
    a phase's final word)."""
    config = []
    for s, phases in enumerate(program.switches):
        for k, phase in enumerate(phases):
            words = phase.config.encode(32)
            config += [[s, base + k, int(i == len(words) - 1), word] for i, word in enumerate(words)]
    return config


def load_sequence(spec: FabricSpec, program: FabricProgram) -> dict:
    """What a simulator loads through the top's ports before ``start``, in order (the same for
    both simulators): ``config``, every configuration word as ``[switch, phase, last, word]``
    (every phase of every switch); ``writes``, every program write as ``[unit, register,
    value]`` (the sequencers, unit ``npus + s``, then the engines, unit = rank)."""
    from hdl.designs.fabric.phase_sequencer import sequencer_registers
    config = configuration_words(program)
    writes = []
    for s, phases in enumerate(program.switches):
        writes += [[spec.npus + s, reg, value] for reg, value in sequencer_registers(
            default_phases(), [(p.input_flits, p.port_flits, p.port_mask) for p in phases])]
    for rank, engine in enumerate(program.engines):
        writes += [[rank, reg, value] for reg, value in engine_writes(engine)]
    return {"config": config, "writes": writes}


def _checked(engine: dict, received: int) -> int:
    """Flits an engine that received ``received`` flits has checked (its stages in order)."""
    checked = 0
    for stage in engine["stages"]:
        got = min(received, stage["recv_count"])
        checked += max(0, got - stage["check_from"])
        received -= got
    return checked


def _default_watchdog(spec: FabricSpec, request: FabricRequest, program: FabricProgram) -> int:
    # generous: every phase of the busiest switch at the slowest link's rate, plus fixed
    # allowances for latency and phase selects; a healthy run never gets near it
    rate = spec.uplink_rate
    slowest = rate.denominator / rate.numerator
    serial = sum(program.phases) + 1
    return int(8 * request.size_flits * slowest * serial + 20_000)


def run_fabric(spec: FabricSpec, request: FabricRequest, *, algorithm: str | None = None,
               seed: int = 0, sink_backpressure: float = 0.0, watchdog_cycles: int | None = None,
               build_dir=None, cflags: str | None = DEFAULT_CFLAGS, verilator_args=None,
               pgo: bool | None = None, simulator: str = DEFAULT_SIMULATOR) -> FabricRun:
    """Run ``request`` on the fabric RTL of ``spec`` (module docstring). ``algorithm``: the
    one the system model chose (None: ``in-switch`` on Fred-B/D); ``seed`` varies the data and
    the sinks' LFSRs; ``sink_backpressure``: probability that an NPU's sink refuses a flit in a
    cycle; ``watchdog_cycles``: the run's cycle budget (default: generous, from the request);
    ``build_dir``: the root of Verilator builds (default ``sim_build/``); ``cflags``,
    ``verilator_args`` and ``pgo``: the build's (:func:`build_fabric`); ``simulator``: one of
    :data:`SIMULATORS` (default ``lockstep``, the fastest; both count the same cycles and check
    the same flits). Raises FredError for
    an invalid request (before building) and when the watchdog ends a stalled run (naming the
    engines that did not finish, with their counters, and each switch's phase)."""
    program = fabric_program(spec, request, algorithm=algorithm, seed=seed,
                             sink_backpressure=sink_backpressure)
    return run_program(spec, request, program, seed=seed, sink_backpressure=sink_backpressure,
                       watchdog_cycles=watchdog_cycles, build_dir=build_dir, cflags=cflags,
                       verilator_args=verilator_args, pgo=pgo, simulator=simulator)


def run_program(spec: FabricSpec, request: FabricRequest, program: FabricProgram, *, seed: int = 0,
                sink_backpressure: float = 0.0, watchdog_cycles: int | None = None,
                build_dir=None, cflags: str | None = DEFAULT_CFLAGS, verilator_args=None,
                pgo: bool | None = None, prebuilt: Path | None = None,
                simulator: str = DEFAULT_SIMULATOR) -> FabricRun:
    """:func:`run_fabric` with an explicit program (tests use it to load a deliberately wrong
    one and check that the watchdog names what stalled). ``prebuilt``: run on this build
    folder instead of building (the profile-guided build's training runs).

    Steps: build (:func:`build_fabric`, unless ``prebuilt``), simulate (:func:`_simulate`),
    judge the counters (:func:`judge_loads`, :func:`judge_engines`; a stalled run raises
    :func:`_stalled`'s error), then sum them up (:func:`_fabric_run`)."""
    if watchdog_cycles is None:
        watchdog_cycles = _default_watchdog(spec, request, program)
    if isinstance(watchdog_cycles, bool) or not isinstance(watchdog_cycles, int) or watchdog_cycles < 1:
        raise FredError(f"watchdog_cycles must be a positive integer, got {watchdog_cycles!r}")
    check_simulator(simulator)
    start = time.perf_counter()
    if prebuilt is None:
        built, _ = build_fabric(spec, cflags, build_dir, verilator_args, pgo=pgo, simulator=simulator)
    else:
        built = Path(prebuilt)
    build_s = time.perf_counter() - start
    metrics = _simulate(spec, request, program, built, seed=seed, watchdog_cycles=watchdog_cycles,
                        simulator=simulator)
    errors = judge_loads(program, metrics["before"])
    engine_errors, stuck, hash_bad = judge_engines(spec, program, metrics["after"]["engines"])
    errors += engine_errors
    if metrics["stalled"] or stuck:
        raise _stalled(spec, request, program, metrics, stuck, errors)
    return _fabric_run(spec, request, program, metrics, errors=errors, hash_bad=hash_bad,
                       build_s=build_s, built=built, seed=seed,
                       sink_backpressure=sink_backpressure, simulator=simulator)


def poll_cycles(size_flits: int) -> int:
    """Cycles between two polls of ``all_done`` for a request of ``size_flits`` flits per NPU:
    1/16 of the size, 64 to 1,024. The timed window (``sim_s``: from start to the poll that
    sees ``all_done``) overshoots the run by less than a poll, so cycles / ``sim_s`` is the
    simulator's rate to within about 6 % (a poll of 20,000 timed a 20,048-cycle run to cycle
    40,000 and halved it); a poll costs the cocotb bench one wake-up and the lock-step driver
    nothing (it checks every cycle)."""
    return int(min(1024, max(64, size_flits // 16)))


def _simulate(spec: FabricSpec, request: FabricRequest, program: FabricProgram, built: Path, *,
              seed: int, watchdog_cycles: int, simulator: str) -> dict:
    """Run ``program`` on the build in ``built`` under ``simulator``; returns the bench's
    metrics (``before`` / ``after`` with named registers, ``stalled``, ``elapsed_cycles``,
    ``sim_s``; lock-step also ``waited_s``). The run's folder is named after the fabric, the
    request and the seed; the cocotb bench polls ``all_done`` every :func:`poll_cycles` of the
    request's size (the lock-step driver checks it every cycle and ignores the poll)."""
    poll = poll_cycles(request.size_flits)
    params = {"npus": spec.npus, "switch_count": len(program.switches),
              **load_sequence(spec, program), "watchdog_cycles": watchdog_cycles, "poll": poll}
    name = f"{spec.name}-n{spec.npus}-{request.label}-{request.size_flits}-s{seed}"
    if simulator == "lockstep":
        from cocotb_tests.runner import run_folder
        from eda.fabric.lockstep import run_lockstep
        return run_lockstep(built, params, run_dir=run_folder(built, name))
    from cocotb_tests.runner import run_bench
    result = run_bench(test_module="cocotb_tests.fabric.bench_fabric",
                       verilog=(fabric_verilog(spec), TOP),
                       bench_params=params, run_name=name, prebuilt=built)
    return result.metrics


def judge_loads(program: FabricProgram, before: dict) -> list[str]:
    """One error per switch whose configurations were not all loaded before ``start``
    (``before``: the registers read then)."""
    errors = []
    for s, state in enumerate(before["switches"]):
        want = (1 << len(program.switches[s])) - 1
        if state["loaded"] & want != want:
            errors.append(f"switch {program.switch_name(s)}: configurations not loaded "
                          f"(loaded mask {state['loaded']:#x}, want {want:#x}, error code {state['error']})")
    return errors


def judge_engines(spec: FabricSpec, program: FabricProgram,
                   engines: list[dict]) -> tuple[list[str], list[str], set[int]]:
    """(errors, engines not finished, ranks whose received hash is wrong) from the engines'
    registers after the run (``engines``, per rank) against what they were programmed to do:
    per engine, bad flits or a short count, a send count other than programmed, a hash of the
    received data other than the golden model's."""
    errors: list[str] = []
    stuck = []
    hash_bad: set[int] = set()
    for rank, (regs, state) in enumerate(zip(program.engines, engines)):
        if not state["done"]:
            stuck.append(f"NPU {rank} (sent {state['sent']}/{regs['send_count']}, received "
                         f"{state['received']}/{regs['recv_count']})")
        lines, bad_hash = judge_engine(spec, program, rank, state)
        errors += lines
        if bad_hash:
            hash_bad.add(rank)
    return errors, stuck, hash_bad


def judge_engine(spec: FabricSpec, program: FabricProgram, rank: int, state: dict) -> tuple[list[str], bool]:
    """(errors, whether the received hash is wrong) of engine ``rank``'s registers ``state``
    against what ``program`` had it do (:func:`judge_engines`, one engine)."""
    regs = program.engines[rank]
    errors = _received_errors(program, rank, regs, state)
    if state["sent"] != regs["send_count"]:
        errors.append(f"NPU {rank}: sent {state['sent']} flits, programmed {regs['send_count']}")
    hash_bad = program.expected_hashes is not None and state["hash"] != program.expected_hashes[rank]
    if hash_bad:
        errors.append(f"NPU {rank}: the hash of its {state['received']} received {spec.dtype} "
                      f"flits is {state['hash']:#010x}, the golden model's (in the configured "
                      f"addition order) {program.expected_hashes[rank]:#010x}")
    return errors, hash_bad


def _received_errors(program: FabricProgram, rank: int, regs: dict, state: dict) -> list[str]:
    """The error of engine ``rank``'s received flits (``state``: its registers; ``regs``:
    its program): bad flits (with the first one and any beyond the expected count), else a
    received count other than programmed; none if all is well."""
    if state["errors"]:
        return [f"NPU {rank}: {state['errors']} bad flit(s) (first at flit "
                f"{state['first_error'] - 1}; {state['extra']} beyond the expected "
                f"{regs['recv_count']}) of {program.contributors[rank] or 'no sender'}"]
    if state["received"] != regs["recv_count"]:
        return [f"NPU {rank}: received {state['received']} flits, expected {regs['recv_count']}"]
    return []


def _stalled(spec: FabricSpec, request: FabricRequest, program: FabricProgram, metrics: dict,
             stuck: list[str], errors: list[str]) -> FredError:
    """The watchdog's error: the engines that did not finish (``stuck``), each switch's phase
    (from ``metrics["after"]``) and any other ``errors``."""
    phases = "; ".join(f"{program.switch_name(s)} phase {st['index']}/{len(program.switches[s])} "
                       f"({st['count']} input flits, busy {st['busy']}, error {st['error']})"
                       for s, st in enumerate(metrics["after"]["switches"]) if program.switches[s])
    return FredError(f"fabric {spec.name} {request.label} ({request.size_flits} flits) stalled: "
                     f"watchdog after {metrics['elapsed_cycles']} cycles; not finished: "
                     f"{', '.join(stuck) or 'none'}; switches: {phases}"
                     + (f"; also: {'; '.join(errors)}" if errors else ""))


def _fabric_run(spec: FabricSpec, request: FabricRequest, program: FabricProgram, metrics: dict, *,
                errors: list[str], hash_bad: set[int], build_s: float, built: Path, seed: int,
                sink_backpressure: float, simulator: str) -> FabricRun:
    """The :class:`FabricRun` of a run that finished: the counters of ``metrics["after"]``
    summed over the engines, ``errors`` as judged. Checked flits: per engine, those it checked
    (:func:`_checked`) less the wrong ones; none of an engine in ``hash_bad``."""
    after = metrics["after"]
    engines = after["engines"]
    cycles = after["global"]["cycles"]
    sent = sum(e["sent"] for e in engines)
    received = sum(e["received"] for e in engines)
    # an engine checks the received flits of each stage from its check_from on (the rings'
    # partial sums are not results); every checked flit that was wrong counted as an error
    checked = sum(_checked(regs, e["received"]) - (e["errors"] - e["extra"])
                  for rank, (e, regs) in enumerate(zip(engines, program.engines))
                  if rank not in hash_bad)
    sim_s = metrics["sim_s"]
    return FabricRun(
        fabric=spec.name, label=request.label, op=request.op, size_flits=request.size_flits,
        algorithm=program.algorithm, cycles=cycles, flits_sent=sent, flits_received=received,
        flits_checked=checked, errors=errors,
        phases={program.switch_name(s): n for s, n in enumerate(program.phases)},
        build_s=round(build_s, 3), sim_s=round(sim_s, 4),
        cycles_per_s=round(cycles / sim_s, 1) if sim_s > 0 else 0.0, seed=seed,
        sink_backpressure=sink_backpressure, expected_flits_sent=program.flits_sent,
        expected_flits_received=program.flits_received, expected_flits_checked=program.flits_to_check, build_dir=str(built),
        flows={program.switch_name(s): [[str(f) for f in ph.flows] for ph in phases]
               for s, phases in enumerate(program.switches)},
        simulator=simulator, part_wait_s=[round(w, 4) for w in metrics.get("waited_s", [])])
