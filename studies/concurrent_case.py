"""Concurrent traffic classes on the packet fabric (``fred fabric-sim --concurrent``;
docs/fabric_rtl.md, "Concurrent traffic classes"): several requests at once, each on its VC,
on the RTL packet fabric and on the system model, side by side.

The model's side is the model's own mechanism for overlapping communication
(:class:`sysmodel.engine.Engine` with :func:`sysmodel.training.link_priority`: MP > PP > DP
strict priority on shared links and switches -- a switch serves one phase at a time
(:mod:`sysmodel.switch_phases`) -- each preemption costing the measured drains of the
switches where it happens (:mod:`sysmodel.preemption`); docs/sysmodel.md, "Simplifications"), each class one transfer
task with its link loads from :func:`sysmodel.collectives.evaluate` and the switches where
it stores a phase, started after its delay.
The RTL side runs every class in one packet-fabric run
(:func:`hdl.compiler.concurrent_program.concurrent_program`) and reads each engine's
``done_cycle``; a class completes when its last endpoint is done. Each class also runs alone
on both sides, so its latency with and without the others is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hdl.contracts.errors import FredError

__all__ = ["SCENARIOS", "IO_SCENARIOS", "scenario_classes", "ConcurrentCase", "build_concurrent_case",
           "model_collectives", "model_concurrent", "concurrent_runs", "run_concurrent_case"]

#: The scenarios ``fred fabric-sim --concurrent`` runs, and what each is.
SCENARIOS = {
    "mp-under-dp": "a DP all-reduce (load size) from cycle 0 and an MP all-reduce (size) from "
                   "cycle DELAY, sharing the DP group's uplinks and L2 plane",
    "mp-dp-pp": "an MP all-reduce (size), a DP all-reduce (load size) and a PP multicast (size) "
                "started together",
    "dp-under-io": "an I/O controller's weight stream (io-broadcast of the load size, at the "
                   "controller's rate, to NPU 1 of every L1 but the first) from cycle 0 and a DP "
                   "all-reduce (size) from cycle DELAY, on the DP VC both, sharing every L1",
    "dp-under-write": "an NPU's write into an I/O controller (the load size, NPU 0 -> "
                      "controller 0, both on L1 0: an online unicast sunk at the controller's "
                      "rate, an activation-checkpoint offload) from cycle 0 and a DP all-reduce "
                      "(size, in the switches) from cycle DELAY, on the DP VC both, sharing L1 0 "
                      "(the switch, no link)",
    "dp-under-far-write": "as dp-under-write, the writer NPU 1 of L1 1: its write crosses L1 1, "
                          "the L2 and L1 0; with one uplink per L1 (Fred-A/B) on the DP "
                          "all-reduce's links too (one FIFO per VC at each switch input), on "
                          "Fred-C/D on the controller's uplink and plane (0; DP's is 1)",
}

#: Scenarios with an I/O class: their fabric gets one I/O controller (endpoint ``npus``, on
#: L1 0; docs/fabric_rtl.md, "I/O controllers") unless the spec names its own.
IO_SCENARIOS = ("dp-under-io", "dp-under-write", "dp-under-far-write")


def _io_class(spec, load_size: int):
    """The weight stream of ``dp-under-io``: controller 0 (endpoint ``npus``) broadcasts
    ``load_size`` flits to NPU 1 of L1 1 .. L1 ``l1_count - 1`` (disjoint from the DP group of
    :func:`_groups`, crossing the same L1s). Its VC is DP's (``TrafficClass`` kind ``io``):
    FRED has four VCs, MP, DP, PP and control (shared spec FRED.md section 2), none for I/O,
    and the model puts I/O streams on DP's level (docs/sysmodel.md, "Simplifications")."""
    from hdl.compiler.concurrent_program import TrafficClass
    from hdl.contracts.fabric import FabricCollective, FabricRequest
    if spec.io_controllers < 1:
        raise FredError(f"scenario dp-under-io needs an I/O controller; {spec.name} has none "
                        f"(io_controllers)")
    k = spec.npus_per_l1
    members = tuple(j * k + 1 for j in range(1, spec.l1_count))
    return TrafficClass("io", "io", FabricRequest(
        "io-broadcast", (FabricCollective("io-broadcast", members, spec.npus),), load_size,
        f"I/O weight stream {spec.npus} -> {list(members)}"))


def _write_class(spec, load_size: int, far: bool):
    """The write of ``dp-under-write`` (``far``: ``dp-under-far-write``): NPU 0 (``far``: NPU 1
    of L1 1, rank ``npus_per_l1 + 1``, whose packets take the controller's uplink,
    :func:`~hdl.compiler.packet_fabric_program.online_output`; either outside the DP group of
    :func:`_groups`) writes
    ``load_size`` flits into controller 0 (endpoint ``npus``, on L1 0): a one-member
    ``io-reduce`` run as the chain, i.e. that NPU's unicast, routed
    online (``hdl.compiler.fabric_program.ALGORITHMS``), the model's ``io-write`` (every member
    writes its own bytes, :func:`model_collectives`). The controller sinks it at its rate
    (``spec.io_rate``), so its packets wait for room at every switch on the way: the
    Transformer-1T checkpoint offload of docs/sysmodel.md ("One phase active at a time per
    switch"). On DP's VC (kind ``io``), as every I/O stream."""
    from hdl.compiler.concurrent_program import TrafficClass
    from hdl.contracts.fabric import FabricCollective, FabricRequest
    if spec.io_controllers < 1:
        raise FredError(f"scenario dp-under-write needs an I/O controller; {spec.name} has none "
                        f"(io_controllers)")
    writer = spec.npus_per_l1 + 1 if far else 0
    return TrafficClass("write", "io", FabricRequest(
        "io-reduce", (FabricCollective("io-reduce", (writer,), spec.npus),), load_size,
        f"write {writer} -> I/O controller {spec.npus}"), algorithm="chain")


def _groups(spec):
    """(DP all-reduce group, MP all-reduce group, (PP root, PP destinations)) on disjoint NPUs:
    DP = NPU 1 of L1 0 and NPU 0 of every other L1; MP = NPU 1 of L1 1 and L1 2; PP = NPU 2 of
    L1 0 to NPU 2 of L1 1 and L1 2 (only with 3 or more NPUs per L1). The DP and MP groups' lowest NPUs have local index 1, so
    both use the same uplink port of each L1 and the same L2 plane
    (:func:`hdl.compiler.fabric_program._uplink_of`): the classes share links."""
    k = spec.npus_per_l1
    if spec.l1_count < 3 or k < 2:
        raise FredError(f"the concurrent scenarios need >= 3 L1s of >= 2 NPUs; {spec.name} has "
                        f"{spec.l1_count} of {k}")
    dp = (1, *(j * k for j in range(1, spec.l1_count)))
    mp = (k + 1, 2 * k + 1)
    pp = (2, (k + 2, 2 * k + 2)) if k >= 3 else None
    return dp, mp, pp


def scenario_classes(spec, scenario: str, *, size: int, load_size: int, delay: int = 0):
    """The :class:`~hdl.compiler.concurrent_program.TrafficClass` es of ``scenario``
    (:data:`SCENARIOS`) on ``spec``: ``size`` flits for the MP (and PP) class, ``load_size``
    for the DP load, ``delay`` cycles before the MP class starts (``mp-under-dp``); in
    ``dp-under-io`` ``size`` flits for the DP all-reduce (from ``delay``) and ``load_size``
    for the I/O stream (from cycle 0)."""
    from hdl.compiler.concurrent_program import TrafficClass
    from hdl.contracts.fabric import FabricCollective, FabricRequest
    if scenario not in SCENARIOS:
        raise FredError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    for name, value in (("size", size), ("load size", load_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise FredError(f"{name} must be a positive whole number of flits, got {value!r}")
    dp, mp, pp = _groups(spec)

    def request(op, coll, flits, label):
        return FabricRequest(op, (coll,), flits, label)
    dp_class = TrafficClass("dp", "dp", request("all-reduce", FabricCollective("all-reduce", dp),
                                                load_size, f"DP all-reduce of {list(dp)}"))
    if scenario == "dp-under-io":
        # the DP all-reduce first: its phase comes first in the switches' phase order on the
        # DP VC (hdl/compiler/packet_fabric_program.py, phase_orders), so the continuous
        # stream does not hold it back for its whole length
        return [TrafficClass("dp", "dp", request("all-reduce", FabricCollective("all-reduce", dp),
                                                 size, f"DP all-reduce of {list(dp)}"), delay=delay),
                _io_class(spec, load_size)]
    if scenario in ("dp-under-write", "dp-under-far-write"):
        return [TrafficClass("dp", "dp", request("all-reduce", FabricCollective("all-reduce", dp),
                                                 size, f"DP all-reduce of {list(dp)}"), delay=delay),
                _write_class(spec, load_size, far=scenario == "dp-under-far-write")]
    if scenario == "mp-under-dp":
        return [dp_class, TrafficClass("mp", "mp", request(
            "all-reduce", FabricCollective("all-reduce", mp), size, f"MP all-reduce of {list(mp)}"),
            delay=delay)]
    if delay:
        raise FredError(f"scenario {scenario} starts every class together; --delay applies to "
                        f"mp-under-dp, dp-under-io and the dp-under-*write scenarios")
    if spec.npus_per_l1 < 3:
        raise FredError(f"scenario {scenario} needs >= 3 NPUs per L1 (its PP multicast uses NPU 2 "
                        f"of three L1s); {spec.name} has {spec.npus_per_l1}")
    root, dsts = pp
    return [TrafficClass("mp", "mp", request("all-reduce", FabricCollective("all-reduce", mp),
                                             size, f"MP all-reduce of {list(mp)}")),
            dp_class,
            TrafficClass("pp", "pp", request("multicast", FabricCollective("multicast", dsts, root),
                                             size, f"PP multicast {root} -> {list(dsts)}"))]


@dataclass
class ConcurrentCase:
    """A concurrent run: ``spec``, ``scenario``, ``classes``; ``model`` (per class: ``cycles``
    = completion from the run's start, ``latency`` = completion - delay, ``alone`` = its
    latency alone, ``fair`` = its latency with every class at one level, links and switches
    shared max-min fairly), ``rtl`` (per class the same from the RTL runs, once run), ``rtl_runs``."""

    spec: object
    scenario: str
    classes: list
    model: list
    platform_toml: str = ""
    rtl: list | None = None
    rtl_runs: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = {"fabric": self.spec.to_dict(), "scenario": self.scenario,
               "scenario_text": SCENARIOS[self.scenario], "options": self.options,
               "requests": []}
        for c, cls in enumerate(self.classes):
            row = {"class": cls.name, "kind": cls.kind, "delay_cycles": cls.delay,
                   "request": cls.request.to_dict(), "model": self.model[c]}
            if self.rtl is not None:
                row["rtl"] = self.rtl[c]
                row["ratio_rtl_over_model"] = {k: self.rtl[c][k] / self.model[c][k]
                                               for k in ("cycles", "latency", "alone")}
            out["requests"].append(row)
        if self.rtl_runs:
            out["rtl_runs"] = self.rtl_runs
        out["model_platform_toml"] = self.platform_toml
        return out


def model_concurrent(spec, classes, platform) -> list[dict]:
    """Per class the model's ``cycles``, ``latency``, ``alone``, ``fair`` (see
    :class:`ConcurrentCase`) on ``platform`` (a :func:`sysmodel.fabric_model.fabric_platform`
    result of ``spec`` with packet switches)."""
    from sysmodel.collectives import evaluate
    from sysmodel.comm_timing import CommTime
    from sysmodel.collectives import build_network
    from sysmodel.switch_phases import collective_links, hold_offsets
    from sysmodel.engine import Engine
    from sysmodel.training import link_priority
    plat, _ = platform
    timing = plat.switch_at("l1")
    cycle_s = timing.cycle_s
    times = [evaluate(plat, spec.name, model_collectives(cls, timing.flit_bytes, spec))
             for cls in classes]
    # each class's transfer holds the switches where it stores a phase (one phase at a time)
    links = [collective_links(plat, spec.name, r) for r in times]

    def run(engine_args):
        eng = Engine(**engine_args)
        ids = []
        for cls, r, (loads, bw) in zip(classes, times, links):
            deps = ()
            if cls.delay:
                deps = (eng.add(f"{cls.name} wait", f"{cls.name}/wait", cls.delay * cycle_s),)
            ids.append(eng.add(cls.name, f"{cls.name}/comm", CommTime(r.time_s, loads, bw),
                               deps=deps, category=cls.kind))
        tasks = eng.run().tasks
        return [tasks[i].end / cycle_s for i in ids]
    # each switch held from its head's arrival until its last packet has left (docs/sysmodel.md,
    # "A switch held per switch")
    priority = run({**link_priority(plat, spec.name),
                    "hold": hold_offsets(plat, build_network(plat, spec.name))})
    fair = run({})
    return [{"cycles": end, "latency": end - cls.delay, "alone": r.time_s / cycle_s,
             "fair": f - cls.delay, "algorithm": r.algorithms[0]}
            for cls, r, end, f in zip(classes, times, priority, fair)]


def model_collectives(cls, flit_bytes: int, spec) -> list:
    """The model's collectives of traffic class ``cls``
    (:func:`sysmodel.fabric_model.request_collectives` on fabric ``spec``), but an ``io-reduce`` the class runs as
    an endpoint algorithm (a one-member chain on Fred-B/D: the NPU's unicast into its
    controller) is the model's ``io-write`` (every member writes its own bytes, online unicasts
    storing no phase); a several-member chain has no model counterpart here (FredError)."""
    from sysmodel.collectives import Collective
    from sysmodel.fabric_model import request_collectives
    if cls.request.op != "io-reduce" or cls.algorithm in (None, "in-switch"):
        return request_collectives(cls.request, flit_bytes, spec.npus,
                                   io_controllers=spec.io_controllers)
    out = []
    for coll in cls.request.collectives:
        if len(coll.members) != 1:
            raise FredError(f"traffic class {cls.name}: an io-reduce run as the {cls.algorithm} "
                            f"is modelled as one NPU's write (io-write); {list(coll.members)} "
                            f"has {len(coll.members)} members")
        out.append(Collective("io-write", group=coll.members,
                              size=cls.request.size_flits * flit_bytes))
    return out


def build_concurrent_case(*, fabric: str, scenario: str, size: int, load_size: int | None = None,
                          delay: int = 0, characterization=None, **spec_overrides) -> ConcurrentCase:
    """Validate the scenario on ``fabric`` and compute the model's side; nothing is built.
    ``load_size`` None: ``size``. Errors (a fabric the classes do not fit, an endpoint
    algorithm, an unmeasured switch) are :class:`FredError` s raised before anything is
    built."""
    from hdl.compiler.concurrent_program import concurrent_program
    from hdl.contracts.fabric import fabric_spec
    from sysmodel.fabric_model import fabric_platform
    if scenario in IO_SCENARIOS:
        spec_overrides.setdefault("io_controllers", 1)
    spec = fabric_spec(fabric, **spec_overrides)
    classes = scenario_classes(spec, scenario, size=size,
                               load_size=size if load_size is None else load_size, delay=delay)
    concurrent_program(spec, classes)     # refusals before the model or any build
    platform = fabric_platform(spec, characterization=characterization, switch="packet")
    return ConcurrentCase(spec, scenario, classes, model_concurrent(spec, classes, platform),
                          platform_toml=platform[1])


def _class_ends(run, collective_class, request, n_classes) -> list[int]:
    """Per class, the cycle its last endpoint was done (``done_cycle``) in ``run``."""
    ends = [0] * n_classes
    for index, coll in enumerate(request.collectives):
        c = collective_class[index]
        ends[c] = max([ends[c]] + [run.engines[r]["done_cycle"] for r in coll.ranks])
    return ends


def concurrent_runs(case: ConcurrentCase, *, seed: int = 0, sink_backpressure: float = 0.0,
                    watchdog_cycles: int | None = None) -> tuple[list, list]:
    """``(runs, collective_class)`` of ``case`` on the packet fabric: ``runs`` is ``(request,
    keywords)`` of each runner call, the classes together first (their program, VCs and
    delays), then each class alone; ``collective_class``: the together request's class of
    each collective. Nothing is built (``fred fabric-validate --plan`` names the runs'
    builds from it)."""
    from hdl.compiler.concurrent_program import concurrent_program
    spec, classes = case.spec, case.classes
    # a cycle budget: an I/O stream moves its flits at the controller's rate
    total = sum(cls.request.size_flits / (min(spec.io_rate, 1) if cls.kind == "io" else 1)
                + cls.delay for cls in classes)
    watchdog = watchdog_cycles or int(8 * total) + 20_000
    program, request, vcs, delays, collective_class = concurrent_program(
        spec, classes, seed=seed, sink_backpressure=sink_backpressure)
    common = dict(seed=seed, sink_backpressure=sink_backpressure, watchdog_cycles=watchdog)
    runs = [(request, dict(program=program, vcs=vcs, delays=delays, **common))]
    runs += [(cls.request, dict(algorithm=cls.algorithm, **common)) for cls in classes]
    return runs, collective_class


def run_concurrent_case(case: ConcurrentCase, *, seed: int = 0, sink_backpressure: float = 0.0,
                        watchdog_cycles: int | None = None, runner=None) -> ConcurrentCase:
    """``case`` with its RTL side: the classes together, then each alone, on the packet
    fabric (``runner``: :func:`cocotb_tests.fabric.packet_fabric_sim.run_packet_fabric`, i.e.
    Verilator, by default; the Amaranth runner for small fabrics in tests), the runs of
    :func:`concurrent_runs`. Wrong data anywhere is a :class:`FredError`."""
    if runner is None:
        from cocotb_tests.fabric.packet_fabric_sim import run_packet_fabric as runner
    spec, classes = case.spec, case.classes
    runs, collective_class = concurrent_runs(case, seed=seed, sink_backpressure=sink_backpressure,
                                             watchdog_cycles=watchdog_cycles)
    done = []
    for request, keywords in runs:
        run = runner(spec, request, **keywords)
        _check(spec, request, run)
        done.append(run)
    together, alone = done[0], done[1:]
    ends = _class_ends(together, collective_class, runs[0][0], len(classes))
    case.rtl = [{"cycles": end, "latency": end - cls.delay, "alone": run.cycles,
                 "flits_checked": sum(together.engines[r]["received"]
                                      for coll in cls.request.collectives for r in coll.ranks)}
                for cls, end, run in zip(classes, ends, alone)]
    case.rtl_runs = {"together": together.to_dict(),
                     "alone": {cls.name: run.to_dict() for cls, run in zip(classes, alone)}}
    case.options = {"seed": seed, "sink_backpressure": sink_backpressure, "switch": "packet",
                    "simulator": together.simulator}
    return case


def _check(spec, request, run) -> None:
    if run.errors:
        raise FredError(f"{spec.name} {request.label} on the packet fabric: {len(run.errors)} "
                        f"error(s): {'; '.join(run.errors[:5])}")
