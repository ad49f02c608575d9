"""The packet fabric (:class:`hdl.designs.fabric.packet_fabric_top.PacketFabricTop`) in
Amaranth's simulator: load, start, run to ``all_done`` or a watchdog, read every counter.
For small fabrics in the default suite (docs/fabric_rtl.md, "Packet fabric"); the harness only
drives the top's ports, as the Verilator benches of the circuit fabric do."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from amaranth.sim import Simulator

from cocotb_tests.fabric.run import configuration_words
from hdl.compiler.fabric_program import fabric_program
from hdl.compiler.packet_fabric_program import (flow_port_entries, online_headers,
                                                packet_headers, phase_orders, runs_online,
                                                write_paces)
from hdl.contracts.errors import FredError
from hdl.contracts.npu_engine import engine_writes
from hdl.designs.fabric.fabric_top import GLOBAL_UNIT, POR_CYCLES
from hdl.designs.switch.control_unit import CUState
from hdl.designs.fabric.packet_fabric_top import (FLOW_PORT_REGS, ORDER_REGS, PACE_REG, PACKET_ENGINE_READ, PACKET_REGS,
                                                  PACKET_SWITCH_READ, PacketFabricTop)

__all__ = ["PacketFabricRun", "PacketBuild", "packet_build", "build_packet_fabric", "stream_configuration",
           "run_packet_fabric_amaranth", "run_packet_fabric", "judge", "packet_load_sequence", "flow_port_writes",
           "packet_training", "packet_part_verilogs", "PACKET_TOP", "PACKET_SIMULATORS", "PLAIN_CFLAGS"]


@dataclass
class PacketFabricRun:
    """One run's counters and verdict (``errors`` empty: every flit checked, nothing lost,
    duplicated, reordered or refused anywhere)."""

    cycles: int
    engines: list = field(default_factory=list)     # per rank: PACKET_ENGINE_READ values
    switches: list = field(default_factory=list)    # per switch: PACKET_SWITCH_READ values
    program: object = None
    errors: list = field(default_factory=list)      # what went wrong, one line each
    simulator: str = "amaranth"
    build_s: float = 0.0
    sim_s: float = 0.0
    build_dir: str = ""
    part_wait_s: list = field(default_factory=list)  # lock-step: seconds each part waited for the other

    @property
    def flits_checked(self) -> int:
        return sum(e["received"] for e in self.engines)

    @property
    def cycles_per_s(self) -> float:
        return self.cycles / self.sim_s if self.sim_s else 0.0

    def to_dict(self) -> dict:
        return {"switch": "packet", "cycles": self.cycles, "errors": self.errors,
                "flits_checked": self.flits_checked, "simulator": self.simulator,
                "build_s": self.build_s, "sim_s": self.sim_s, "cycles_per_s": self.cycles_per_s,
                "selects": [s["selects"] for s in self.switches],
                "preemptions": [s["preemptions"] for s in self.switches]}


def packet_load_sequence(spec, request, program, packet, vcs=None, delays=None) -> dict:
    """``config``: ``[switch, slot, last, word]`` for every stored phase; ``writes``: ``[unit,
    register, value]``, every engine's program and its packet header registers, then every
    switch's flow-port table (``FLOW_PORT_REGS``) and phase order (``ORDER_REGS``, length 0
    where a switch has at most one phase per VC). An endpoint algorithm
    (:func:`~hdl.compiler.packet_fabric_program.runs_online`) stores nothing in the switches:
    the engines' programs and their online headers only (``vcs``, ``delays`` per collective as
    for stored phases: each endpoint's unicasts on its class's VC)."""
    if runs_online(program) and not program.online_collectives:
        writes = []
        headers = online_headers(program, request, packet, vcs=vcs, delays=delays)
        for rank, (engine, header) in enumerate(zip(program.engines, headers)):
            writes += [[rank, reg, value] for reg, value in engine_writes(engine)]
            writes += [[rank, PACKET_REGS[name], header[name]] for name in PACKET_REGS]
        return {"config": [], "writes": writes + _pace_writes(spec, program, headers)}
    config = configuration_words(program)
    writes = []
    headers = packet_headers(program, request, packet, vcs=vcs, delays=delays)
    if program.online_collectives:
        # stored phases and online unicasts (concurrent classes): the online collectives'
        # endpoints name the default index; the fabric (built online) follows no phase order
        ranks = {r for c in program.online_collectives for r in request.collectives[c].ranks}
        online = online_headers(program, request, packet, vcs=vcs, delays=delays, ranks=ranks)
        headers = [online[r] if r in ranks else h for r, h in enumerate(headers)]
        ordered = [program.switch_name(s) for s, (_, entries) in
                   enumerate(phase_orders(program, request, packet, vcs=vcs)) if entries]
        if ordered:
            raise FredError(f"{', '.join(ordered)} would need a phase order (several stored "
                            f"phases of one VC); a fabric with online routing follows none")
    for rank, (engine, header) in enumerate(zip(program.engines, headers)):
        writes += [[rank, reg, value] for reg, value in engine_writes(engine)]
        writes += [[rank, PACKET_REGS[name], header[name]] for name in PACKET_REGS]
    if program.online_collectives:
        writes += _pace_writes(spec, program, headers, ranks)
    writes += flow_port_writes(spec, program)
    writes += order_writes(spec, phase_orders(program, request, packet, vcs=vcs))
    return {"config": config, "writes": writes}


def order_writes(spec, orders) -> list[list[int]]:
    """``[unit, register, value]`` writes of every switch's phase order (``ORDER_REGS``):
    ``orders`` per switch ``(vc, [(slot, last), ...])``
    (:func:`~hdl.compiler.packet_fabric_program.phase_orders`), each entry then the order's
    length and VC (length 0 where a switch has none)."""
    writes = []
    for s, (vc, entries) in enumerate(orders):
        unit = spec.endpoints + s
        for index, (k, last) in enumerate(entries):
            writes += [[unit, ORDER_REGS["last"], last],
                       [unit, ORDER_REGS["entry"], index << 8 | k]]
        writes.append([unit, ORDER_REGS["set"], vc << 8 | len(entries)])
    return writes


def _pace_writes(spec, program, headers, ranks=None) -> list[list[int]]:
    """``[npu, PACE_REG, writers]`` for every NPU of a fabric with I/O controllers (its write
    pacer, :func:`~hdl.compiler.packet_fabric_program.write_paces`; 0: not paced), none on a
    fabric without controllers (no pacer)."""
    if not spec.io_controllers:
        return []
    paces = write_paces(spec, program, headers, ranks)
    return [[rank, PACE_REG, pace] for rank, pace in sorted(paces.items())]


def flow_port_writes(spec, program, base: int = 0) -> list[list[int]]:
    """``[unit, register, value]`` writes of every switch's flow-port table
    (``FLOW_PORT_REGS``) for ``program``'s stored phases, phase k of a switch in slot ``base +
    k`` (:func:`~hdl.compiler.packet_fabric_program.flow_port_entries`)."""
    writes = []
    for s, entries in enumerate(flow_port_entries(program)):
        unit = spec.endpoints + s
        for k, n, partners, outputs in entries:
            writes += [[unit, FLOW_PORT_REGS["partners"], partners],
                       [unit, FLOW_PORT_REGS["outputs"], outputs],
                       [unit, FLOW_PORT_REGS["entry"], (base + k) << 8 | n]]
    return writes


async def stream_configuration(ctx, dut, config) -> None:
    """Stream ``[switch, slot, last, word]`` configuration words into a packet fabric top's
    ``cfg_*`` port in the Amaranth simulator, each held until ``cfg_ready`` (one word per
    accepted cycle, on ``dut.clk``'s edges), then drop ``cfg_valid``."""
    for switch, slot, last, word in config:
        ctx.set(dut.cfg_valid, 1)
        ctx.set(dut.cfg_switch, switch)
        ctx.set(dut.cfg_phase, slot)
        ctx.set(dut.cfg_last, last)
        ctx.set(dut.cfg_data, word)
        ready = ctx.get(dut.cfg_ready)
        await ctx.posedge(dut.clk)
        while not ready:
            ready = ctx.get(dut.cfg_ready)
            await ctx.posedge(dut.clk)
    ctx.set(dut.cfg_valid, 0)


def run_packet_fabric_amaranth(spec, request, *, seed=0, sink_backpressure=0.0,
                               watchdog_cycles=20_000, packet_flits=8, depth=None,
                               edit_load=None, vcs=None, delays=None,
                               algorithm=None, program=None, top=None,
                               each_cycle=None) -> PacketFabricRun:
    """Run ``request`` on the packet fabric of ``spec``; a run that is not done after
    ``watchdog_cycles`` raises :class:`FredError` naming the engines that did not finish.
    ``edit_load``: tests only, a function applied to the load sequence (a wrong program must
    be caught). ``vcs``: {collective index: VC} (concurrent traffic classes; default all DP);
    ``delays``: {collective index: cycles before its NPUs send}. ``algorithm``: as
    :func:`~hdl.compiler.fabric_program.fabric_program` (None: the fabric's default; endpoint
    algorithms run as online unicasts). ``program``: a program of ``request`` already built
    (concurrent traffic classes, :func:`hdl.compiler.concurrent_program.concurrent_program`;
    default: :func:`~hdl.compiler.fabric_program.fabric_program` of ``request``). Tests only:
    ``top(spec, packet_flits=, depth=, online=)`` makes the component run instead of
    :class:`PacketFabricTop` (the same ports; e.g. the two parts of a cut fabric joined), and
    ``each_cycle(ctx, dut)`` is awaited in every cycle of the run, before its clock edge."""
    program = program or fabric_program(spec, request, algorithm=algorithm, seed=seed,
                                        sink_backpressure=sink_backpressure, aligned_slots=True)
    # the load first: a request the packet fabric does not run fails before the top exists
    online = runs_online(program)
    load = packet_load_sequence(spec, request, program, _packet(spec, packet_flits, online),
                                vcs, delays)
    dut = (top or PacketFabricTop)(spec, packet_flits=packet_flits, depth=depth, online=online)
    if edit_load is not None:
        load = edit_load(load)
    out = {}

    async def ticks(ctx, n=1):
        # the clock edges of ``clk`` (ctx.tick() would raise during the top's own reset)
        for _ in range(n):
            await ctx.posedge(dut.clk)

    async def read(ctx, unit, reg):
        ctx.set(dut.rd_unit, unit)
        ctx.set(dut.rd_reg, reg)
        await ticks(ctx, 2)            # the read port is registered
        return ctx.get(dut.rd_data)

    async def bench(ctx):
        await ticks(ctx, POR_CYCLES + 2)
        await stream_configuration(ctx, dut, load["config"])
        for unit, reg, value in load["writes"]:
            ctx.set(dut.prog_we, 1)
            ctx.set(dut.prog_unit, unit)
            ctx.set(dut.prog_reg, reg)
            ctx.set(dut.prog_data, value)
            await ticks(ctx)
        ctx.set(dut.prog_we, 0)
        await ticks(ctx, 2)
        ctx.set(dut.start, 1)
        await ticks(ctx)
        ctx.set(dut.start, 0)
        for _ in range(watchdog_cycles // 16):
            for _ in range(16):
                if each_cycle is not None:
                    await each_cycle(ctx, dut)
                await ticks(ctx)
            if ctx.get(dut.all_done):
                break
        await ticks(ctx, 64)    # late (extra) flits surface before the counters are read
        out["done"] = ctx.get(dut.all_done)
        out["cycles"] = await read(ctx, GLOBAL_UNIT, 0)
        out["engines"] = [{n: await read(ctx, r, i) for i, n in enumerate(PACKET_ENGINE_READ)}
                          for r in range(spec.endpoints)]
        out["switches"] = [{n: await read(ctx, spec.endpoints + s, i)
                            for i, n in enumerate(PACKET_SWITCH_READ)}
                           for s in range(len(spec.switch_ports))]

    async def clock(ctx):
        # the top's clock is its ``clk`` port (it makes its own reset from it)
        while True:
            ctx.set(dut.clk, 1)
            await ctx.delay(5e-9)
            ctx.set(dut.clk, 0)
            await ctx.delay(5e-9)

    sim = Simulator(dut)
    sim.add_process(clock)       # a process is background: the run ends with the bench
    sim.add_testbench(bench)
    sim.run()
    return judge(spec, request, program, out["cycles"], out["engines"], out["switches"],
                 done=out["done"], watchdog_cycles=watchdog_cycles)


def judge(spec, request, program, cycles, engines, switches, *, done, watchdog_cycles) -> PacketFabricRun:
    """The run's verdict from its counters (either simulator): every engine sent and received
    its programmed flits with no check, sequence or link error, every switch's sticky flags
    clear; a run not ``done`` raises :class:`FredError` naming what went wrong."""
    run = PacketFabricRun(cycles=cycles, engines=engines, switches=switches, program=program)
    for rank, (e, prog) in enumerate(zip(run.engines, program.engines)):
        want_recv = sum(st["recv_count"] for st in prog["stages"])
        for name in ("errors", "extra", "seq_errors", "link_errors"):
            if e[name]:
                run.errors.append(f"{_endpoint_name(spec, rank)}: {name} = {e[name]}")
        if e["received"] != want_recv or e["sent"] != prog["send_count"]:
            run.errors.append(f"{_endpoint_name(spec, rank)}: sent {e['sent']} of {prog['send_count']}, received "
                              f"{e['received']} of {want_recv}")
        # fp16 engines hash what they receive instead of checking it: bit-exact against the
        # golden model in the configured tree order (hdl/compiler/fabric_golden.py)
        if program.expected_hashes is not None and e["hash"] != program.expected_hashes[rank]:
            run.errors.append(f"{_endpoint_name(spec, rank)}: the hash of its {e['received']} received "
                              f"{spec.dtype} flits is {e['hash']:#010x}, the golden model's (in the "
                              f"configured addition order) {program.expected_hashes[rank]:#010x}")
    for s, sw in enumerate(run.switches):
        if sw["flags"]:
            run.errors.append(f"{program.switch_name(s)}: flags {sw['flags']:#x} "
                              f"(bad_header, overflow, credit_error)")
    if not done:
        states = ", ".join(f"{program.switch_name(s)} {CUState(sw['state']).name} slot "
                           f"{sw['active_phase']} busy {sw['busy']} selects {sw['selects']} "
                           f"preemptions {sw['preemptions']}" for s, sw in enumerate(switches))
        raise FredError(f"packet fabric {spec.name}, {request.label}: not done after "
                        f"{watchdog_cycles} cycles; " + "; ".join(run.errors or ["no counter errors"])
                        + f"; switches: {states}")
    return run


def _endpoint_name(spec, rank: int) -> str:
    return f"NPU {rank}" if rank < spec.npus else f"I/O controller {rank - spec.npus}"


#: The packet fabric's Verilog top.
PACKET_TOP = "fred_packet_fabric"


#: C++ optimisation of a packet fabric build without profile-guided optimization.
PLAIN_CFLAGS = "-O1"


#: The packet fabric's Verilator simulators (as the circuit fabric's,
#: ``cocotb_tests.fabric.run.SIMULATORS``): ``cocotb``, one model under the cocotb bench;
#: ``lockstep``, the fabric cut in two at its uplinks (``PacketFabricTop(partition=, part=)``,
#: ``hdl.contracts.fabric_partition``), each part Verilated, run one per core in lock step
#: (``eda.fabric.lockstep``; the same cycles and counters).
PACKET_SIMULATORS = ("cocotb", "lockstep")


@dataclass(frozen=True)
class PacketBuild:
    """One Verilated model of the packet fabric: everything its Verilog and its compile depend
    on. A run's request, program, seed and backpressure are loaded through the top's ports,
    so every run with an equal :meth:`key` shares one model (the build folder is cached by the
    hash of the Verilog and the options, ``eda.fabric.build``). ``spec``: the fabric (its name
    and ``in_switch`` are not hardware: :func:`~cocotb_tests.fabric.run.hardware_key`);
    ``online``: the switches route online (endpoint algorithms) or follow stored phases;
    ``packet_flits``, ``depth``, ``yield_after``: :class:`PacketFabricTop`'s; ``simulator``:
    one of :data:`PACKET_SIMULATORS`; ``cflags``, ``pgo``: the C++ compile
    (:func:`run_packet_fabric`); ``algorithm``: the training workload's (``pgo`` only)."""

    spec: object
    online: bool
    packet_flits: int = 8
    depth: int | None = None
    yield_after: int | None = None
    simulator: str = "cocotb"
    cflags: str | None = None
    pgo: bool = False
    algorithm: str | None = None

    def key(self) -> tuple:
        """What makes two builds one: every field but the spec's name; with ``pgo`` also the
        training's algorithm and ``in_switch`` (its default algorithm), which choose the
        training workload's programs (:func:`packet_training`)."""
        from cocotb_tests.fabric.run import hardware_key
        from eda.fabric.build import fast_cflags
        return (hardware_key(self.spec), self.online, self.packet_flits, self.depth, self.yield_after,
                self.simulator, fast_cflags(self.cflags, self.pgo, PLAIN_CFLAGS), self.pgo,
                (self.algorithm, self.spec.in_switch) if self.pgo else None)

    def describe(self) -> str:
        """One line for a plan: the hardware, the routing and the compile."""
        from eda.fabric.build import fast_cflags
        spec = self.spec
        parts = [f"Fred_{spec.middle} switch ports {'/'.join(map(str, spec.switch_ports))}",
                 spec.dtype, f"{spec.io_controllers} I/O controller(s)",
                 "online" if self.online else "stored phases", self.simulator,
                 fast_cflags(self.cflags, self.pgo, PLAIN_CFLAGS) + (" PGO" if self.pgo else "")]
        return ", ".join(parts)


def packet_build(spec, request, *, program=None, algorithm=None, seed=0, sink_backpressure=0.0,
                 packet_flits=8, depth=None, cflags=None, pgo=False, simulator="cocotb",
                 yield_after=None):
    """``(build, program)`` of a :func:`run_packet_fabric` run with these arguments: the
    :class:`PacketBuild` it runs on and the program it loads (``program`` None:
    :func:`~hdl.compiler.fabric_program.fabric_program` of ``request``). Nothing is built, so
    a plan (``fred fabric-validate --plan``) names the builds a run will need."""
    program = program or fabric_program(spec, request, algorithm=algorithm, seed=seed,
                                        sink_backpressure=sink_backpressure, aligned_slots=True)
    build = PacketBuild(spec, runs_online(program), packet_flits, depth, yield_after, simulator,
                        cflags, pgo, algorithm)
    return build, program


def build_packet_fabric(build: PacketBuild) -> Path:
    """The Verilated model of ``build`` (built, or found in the cache): the one model of the
    ``cocotb`` simulator or the two parts of ``lockstep``, profile-guided with ``build.pgo``
    (trained by :func:`packet_training`). Safe to call from several threads at once
    (``fred fabric-validate --jobs``): each build folder is locked while it is made."""
    from eda.fabric.build import build_trained, fast_cflags, training_options
    from cocotb_tests.fabric.run import PORTS
    known = _BUILT.get(build.key())
    if known is not None and (known / "build.ok").is_file():
        # built in this process: the same sources give the same Verilog and folder, so the
        # tens of seconds of generating it again only to find the cached folder are skipped
        return known
    spec, online = build.spec, build.online
    workload = packet_training(spec, algorithm=build.algorithm, online=online,
                               packet_flits=build.packet_flits, depth=build.depth,
                               simulator=build.simulator) if build.pgo else None
    flags = fast_cflags(build.cflags, build.pgo, PLAIN_CFLAGS)
    if build.simulator == "lockstep":
        from eda.fabric.lockstep import build_lockstep
        built = build_lockstep(packet_part_verilogs(spec, build.packet_flits, build.depth, online),
                               cflags=flags, **training_options("packet lock-step", workload, build.pgo))
    else:
        built = build_trained(_packet_verilog(spec, build.packet_flits, build.depth, online, build.yield_after),
                              PACKET_TOP, PORTS, cflags=flags, pgo=build.pgo, workload=workload)
    _BUILT[build.key()] = built
    return built


#: ``PacketBuild.key() -> build folder`` of the models this process has built or found.
_BUILT: dict = {}


def run_packet_fabric(spec, request, *, seed=0, sink_backpressure=0.0, watchdog_cycles=None,
                      packet_flits=8, depth=None, cflags=None, algorithm=None,
                      program=None, vcs=None, delays=None, pgo=False,
                      prebuilt=None, simulator="cocotb", yield_after=None) -> PacketFabricRun:
    """:func:`run_packet_fabric_amaranth` under Verilator: one model of the whole packet fabric
    (only the top's ports public, ``eda.fabric.build``) run by the circuit fabric's cocotb
    bench (``cocotb_tests.fabric.bench_fabric``, with the packet fabric's read registers).
    ``watchdog_cycles`` None: generous, from the request. ``program``, ``vcs``, ``delays``: as
    :func:`run_packet_fabric_amaranth` (concurrent traffic classes). ``cflags``: the model's C++
    optimisation (None: :data:`PLAIN_CFLAGS`, or -O2 with ``pgo``); ``pgo``: a profile-guided
    build, trained by :func:`packet_training` (the same cycles, machine code only;
    docs/fabric_rtl.md, "Simulation speed"); ``prebuilt``: run on this build folder of
    ``simulator`` (the training runs); ``simulator``: one of :data:`PACKET_SIMULATORS` (both
    load, run and read the same registers, so :func:`judge` checks every flit either way).
    ``yield_after``: the switches' yield guard (:class:`PacketFabricTop`; None: the default;
    0: the hold rule, to compare; the one-model simulator only). The model is
    :func:`build_packet_fabric` of :func:`packet_build`'s build."""
    import time

    from cocotb_tests.runner import run_bench, run_folder
    if simulator not in PACKET_SIMULATORS:
        raise FredError(f"unknown packet fabric simulator {simulator!r}; expected one of "
                        f"{', '.join(PACKET_SIMULATORS)}")
    if yield_after is not None and (simulator != "cocotb" or pgo):
        raise FredError("yield_after is given to the plain one-model simulator only")
    build, program = packet_build(spec, request, program=program, algorithm=algorithm, seed=seed,
                                  sink_backpressure=sink_backpressure, packet_flits=packet_flits,
                                  depth=depth, cflags=cflags, pgo=pgo, simulator=simulator,
                                  yield_after=yield_after)
    online = build.online
    load = packet_load_sequence(spec, request, program, _packet(spec, packet_flits, online),
                                vcs, delays)
    if watchdog_cycles is None:
        # a cycle budget: an I/O op moves its flits at the controller's rate
        slowest = min(spec.io_rate, 1) if request.op.startswith("io-") else 1
        watchdog_cycles = int(8 * request.size_flits / slowest) + 20_000
    started = time.perf_counter()
    built = build_packet_fabric(build) if prebuilt is None else Path(prebuilt)
    build_s = time.perf_counter() - started
    from cocotb_tests.fabric.run import poll_cycles
    poll = poll_cycles(request.size_flits)
    params = {"npus": spec.endpoints, "switch_count": len(spec.switch_ports), **load,
              "watchdog_cycles": watchdog_cycles, "poll": poll,
              "engine_read": list(PACKET_ENGINE_READ), "switch_read": list(PACKET_SWITCH_READ)}
    name = f"packet-{spec.name}-n{spec.npus}-{request.label}-{request.size_flits}-s{seed}"
    if simulator == "lockstep":
        from eda.fabric.lockstep import run_lockstep
        metrics = run_lockstep(built, params, run_dir=run_folder(built, name))
    else:
        # the model is built: run_bench builds nothing from a prebuilt folder, it needs the
        # top's name only (not the Verilog, which would take tens of seconds to generate again)
        metrics = run_bench(test_module="cocotb_tests.fabric.bench_fabric", verilog=("", PACKET_TOP),
                            bench_params=params, run_name=name, prebuilt=built).metrics
    after = metrics["after"]
    run = judge(spec, request, program, after["global"]["cycles"], after["engines"],
                after["switches"], done=not metrics["stalled"] and after["global"]["all_done"],
                watchdog_cycles=watchdog_cycles)
    run.simulator, run.build_s, run.sim_s, run.build_dir = simulator, build_s, metrics["sim_s"], str(built)
    run.part_wait_s = list(metrics.get("waited_s", []))
    return run


def packet_training(spec, *, algorithm=None, online=False, packet_flits=8, depth=None,
                    simulator="cocotb") -> dict:
    """The profile-guided build's training workload on the packet fabric of ``spec``
    (``{name: run(build_dir)}``, for :func:`eda.fabric.build.build_trained`): the circuit
    fabric's (:func:`cocotb_tests.fabric.run.training_requests`: all-reduce, reduce and
    multicast across the wafer) with ``algorithm``, each request this fabric runs with the
    build's routing (``online`` or stored phases), every flit checked (a run with errors
    raises and fails the build), on ``simulator``'s build."""
    from cocotb_tests.fabric.run import training_requests
    workload = {}
    for request in training_requests(spec):
        try:
            program = fabric_program(spec, request, algorithm=algorithm, aligned_slots=True)
            if runs_online(program) != online:
                continue
            packet_load_sequence(spec, request, program, _packet(spec, packet_flits, online))
        except FredError:
            continue    # a request this fabric (or its routing) does not run: not trained
        workload[f"{request.label} x {request.size_flits}"] = functools.partial(
            _training_run, spec, request, algorithm=algorithm, packet_flits=packet_flits, depth=depth,
            simulator=simulator)
    if not workload:
        raise FredError(f"packet fabric {spec.name}: no training collective runs with algorithm "
                        f"{algorithm or 'default'}")
    return workload


def _training_run(spec, request, build_dir, *, algorithm, packet_flits, depth, simulator) -> None:
    run = run_packet_fabric(spec, request, algorithm=algorithm, packet_flits=packet_flits, depth=depth,
                            prebuilt=build_dir, simulator=simulator)
    if run.errors:
        raise FredError(f"packet fabric {spec.name}: the training run ({request.label}) failed: "
                        f"{'; '.join(run.errors[:3])}")


@functools.lru_cache(maxsize=4)
def _packet_verilog(spec, packet_flits, depth, online, yield_after=None) -> str:
    """The Verilog of the packet fabric top (the same for every request on one fabric: a
    validation run's cases share it; generating it takes tens of seconds on Fred-A..D)."""
    from hdl.emit.verilog import to_verilog
    dut = PacketFabricTop(spec, packet_flits=packet_flits, depth=depth, online=online,
                          yield_after=yield_after)
    return to_verilog(dut, name=PACKET_TOP)


@functools.lru_cache(maxsize=4)
def packet_part_verilogs(spec, packet_flits=8, depth=None, online=False) -> tuple[str, str]:
    """The Verilog of the lock-step simulator's two parts of the packet fabric of ``spec`` (tops
    ``eda.fabric.lockstep.PART_TOPS``; the circuit fabric's partition,
    ``hdl.contracts.fabric_partition.fabric_partition``)."""
    from eda.fabric.lockstep import PART_TOPS
    from hdl.contracts.fabric_partition import fabric_partition
    from hdl.emit.verilog import to_verilog
    partition = fabric_partition(spec)
    return tuple(to_verilog(PacketFabricTop(spec, packet_flits=packet_flits, depth=depth, online=online,
                                            partition=partition, part=p), name=PART_TOPS[p])
                 for p in range(2))


def _packet(spec, packet_flits, online):
    """The packet format of a :class:`PacketFabricTop` of ``spec`` with the default slots."""
    from hdl.compiler.fabric_program import default_phases
    from hdl.designs.fabric.packet_fabric_top import packet_format
    return packet_format(default_phases(), packet_flits,
                         dest_ports=max(spec.switch_ports) if online else 0)
