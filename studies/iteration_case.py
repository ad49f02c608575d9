"""One training iteration on the circuit FRED fabric RTL and on the system model of the same fabric
(docs/fabric_iteration.md; ``fred fabric-iteration``).

Model side: the model's iteration of the workload, serialised (``overlap=False``) or
overlapped (compute under communication: every fabric's sequencers then run their overlapped
traces), with one collective at a time per NPU
(``one_collective``: the schedule the RTL's sequencers run, e.g. MP and DP together with the
DP all-reduce after the last MP all-reduce), divided by ``scale``,
with its communication timed on the RTL fabric's own platform
(:func:`sysmodel.fabric_model.fabric_platform`) and its compute from the workload platform
(:func:`sysmodel.iteration_export.export_iteration` with ``network=``), in cycles of that
platform's clock. RTL side: the same export's per-rank node lists, unchanged, as the NPUs'
traces (:func:`hdl.contracts.trace_program.npu_trace`), the collective's request compiled by
the fabric program compiler with the algorithm the model chooses for it
(:func:`sysmodel.fabric_model.model_cycles`), run by ``cocotb_tests.iteration.run``. The
studies layer is the first that sees both sides.

Figures per side: the iteration (the model's makespan; the RTL's cycle counter), compute
(the sum of the representative rank's compute nodes), communication per traffic class (busy:
the collective nodes' time; exposed: the part during which the rank does not compute -- in a
serialised iteration all of it; overlapped, the collective nodes' cycles outside the rank's
compute nodes).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec

__all__ = ["IO_CONTROLLERS", "IterationCase", "build_iteration_case", "run_iteration_case"]

#: I/O controllers of a fabric whose iteration streams weights or spills checkpoints: the
#: paper's 18 (the mesh's free edge ports on 5 x 4; FRED's 18 over the L1s, 4, 4, 4, 3, 3).
IO_CONTROLLERS = 18


@dataclass
class IterationCase:
    """The model's side (``model``: cycles of the iteration, of compute, per class busy and
    exposed), the RTL's inputs (``traces`` per rank, ``request``, ``program``: on the mesh the
    lists of every collective's, in order) and, once run,
    ``rtl`` (an ``IterationRun``) and its figures (``rtl_figures``, the model's keys)."""

    spec: object          # FabricSpec, or MeshFabricSpec for the mesh
    description: str
    scale: float
    model: dict
    traces: dict
    request: object
    program: object
    collective_model: dict = field(default_factory=dict)
    fabric: str = ""
    switch: str = "circuit"
    #: why the RTL cannot run this case yet (None: it can): e.g. I/O collectives without an
    #: iteration top that has the controllers; ``run_iteration_case`` refuses with it
    rtl_missing: str | None = None
    #: the overlapped iteration (compute under communication), else the serialised one
    overlap: bool = False
    rtl: object | None = None
    rtl_figures: dict = field(default_factory=dict)

    def ratios(self) -> dict:
        """RTL / model of the iteration and of each class's communication (busy)."""
        if self.rtl is None:
            return {}
        out = {"iteration": self.rtl_figures["iteration_cycles"] / self.model["iteration_cycles"]}
        for cls, cycles in self.model["comm_busy_cycles"].items():
            if cycles:
                out[f"comm_{cls}"] = self.rtl_figures["comm_busy_cycles"].get(cls, 0) / cycles
        return out

    def to_dict(self) -> dict:
        spec = self.spec.to_dict() if hasattr(self.spec, "to_dict") else {"name": self.fabric, **asdict(self.spec)}
        out = {"fabric": spec, "switch": self.switch, "description": self.description, "scale": self.scale,
               "overlap": self.overlap,
               "model": self.model, "collective": self.collective_model, "rtl_missing": self.rtl_missing,
               "request": ([r.to_dict() for r in self.request] if isinstance(self.request, list)
                           else self.request.to_dict() if self.request is not None else None),
               "nodes_per_rank": {r: len(t.words) for r, t in self.traces.items()}}
        if self.rtl is not None:
            rtl = self.rtl.to_dict()
            rtl.pop("node_times")
            out.update(rtl=rtl, rtl_figures=self.rtl_figures, ratio_rtl_over_model=self.ratios())
        return out


def build_iteration_case(*, fabric: str, workload, platform, strategy=None, samples_per_dp=None,
                         scale: float = 1000.0, overlap: bool = False, characterization=None,
                         switch: str = "circuit", **spec_overrides) -> IterationCase:
    """Validate and compute the model's side and the RTL's inputs; nothing is built. ``fabric``:
    a FRED variant of the circuit fabric (``fabric_spec``) or ``mesh`` (the 2D-mesh fabric,
    :class:`hdl.contracts.mesh.MeshFabricSpec`; ``spec_overrides`` go to the spec). Refuses, by
    name, what the RTL cannot run: pipeline stages
    (:mod:`hdl.contracts.trace_program`); an iteration that streams weights or spills
    checkpoints gets the fabric with the paper's 18 I/O controllers (:func:`_fabric`; the
    circuit FRED fabric has none: refused) and its I/O nodes as requests
    (:func:`_io_programs`), with ``rtl_missing`` saying why the RTL cannot run it yet; the model's side is the iteration with one
    collective at a time (module docstring). ``switch``: the FRED fabric's switches, ``circuit``
    (phase sequencers) or ``packet`` (``PacketFabricTop``: phases selected by the headers,
    endpoint algorithms routed online; the model's packet platform, as ``fred fabric-sim
    --switch packet``); refused for what the packet fabric's iteration does not run yet
    (phase orders longer than a switch's slots, in-switch and endpoint algorithms mixed)."""
    from hdl.contracts.placement import parse_strategy
    from hdl.contracts.trace_program import IoRequest, collective_requests, npu_trace
    from sysmodel.iteration_export import export_iteration
    from sysmodel.iteration_plan import plan_iteration
    if switch not in ("circuit", "packet") or (switch == "packet" and fabric == "mesh"):
        raise FredError(f"switch must be circuit or packet (a FRED fabric's), got {switch!r} on {fabric}")
    plan = plan_iteration(platform, workload, strategy, samples_per_dp=samples_per_dp)
    if plan.strategy.pp != 1:
        raise FredError(f"strategy {plan.strategy} has pipeline stages; the fabrics' trace "
                        f"run takes one stage (PP1): give --strategy MP<a>-DP<b>-PP1")
    io = plan.streaming or plan.memory.offload
    if io and fabric != "mesh" and switch != "packet":
        raise FredError(f"{workload.name} {'streams its weights' if plan.streaming else 'spills activation checkpoints'} "
                        f"through the I/O controllers; the circuit FRED fabric has none (use --switch packet)")
    spec, network, text = _fabric(fabric, characterization, spec_overrides, switch, io=io)
    timing = network.switch_at("l1")
    export = export_iteration(platform, "mesh" if fabric == "mesh" else spec.name, workload, strategy,
                              samples_per_dp=samples_per_dp, overlap=overlap, scale=scale, network=network,
                              one_collective=True)
    if parse_strategy(export.strategy).pp != 1:
        raise FredError(f"strategy {export.strategy} has pipeline stages; the fabrics' trace "
                        f"run takes one stage (PP1)")
    # the mesh's sequencers load a program per collective; on FRED the NPUs' and switches'
    # loaders (the switches' phases shared)
    traces = {r: npu_trace(r, nodes, cycle_s=timing.cycle_s, max_collectives=1 << 16, io=io, overlap=overlap)
              for r, nodes in export.ranks.items()}
    request = collective_requests(export.ranks, traces, flit_bytes=timing.flit_bytes,
                                  io_controllers=network.io_controllers)
    missing = None
    if any(isinstance(r, IoRequest) for r in request):
        program, collective, missing = _io_programs(spec, request, network, text, fabric)
    elif fabric == "mesh":
        program, collective = _mesh_programs(spec, request, network)
    else:
        program, collective = None, {}
        if request:
            program, collective = _fred_programs(spec, request, network, text)
        if switch == "packet":
            _check_packet(spec, program, request, traces)
    cycle = timing.cycle_s
    model = {"iteration_cycles": export.time_s / cycle,
             "compute_cycles": export.breakdown["compute"] / cycle,
             "comm_busy_cycles": {c: t / cycle for c, t in export.comm_busy.items() if t},
             "comm_exposed_cycles": {c: export.breakdown[c] / cycle for c in export.comm_busy
                                     if export.breakdown.get(c)},
             "tasks": export.tasks, "clock_mhz": timing.clock_mhz, "flit_bytes": timing.flit_bytes}
    return IterationCase(spec, export.description, scale, model, traces, request, program, collective,
                         fabric="mesh" if fabric == "mesh" else spec.name, switch=switch, rtl_missing=missing,
                         overlap=overlap)


def _check_packet(spec, programs, requests, traces) -> None:
    """FredError, before anything is built, naming what the packet fabric's iteration does not
    run (``cocotb_tests.iteration.packet_loading``; ``traces`` for each collective's runs, which
    the switches' phase orders count)."""
    if not programs:
        raise FredError("the iteration has no collective; the packet fabric's iteration runs its collectives")
    from cocotb_tests.iteration.packet_loading import (packet_iteration_format, packet_iteration_orders,
                                                       packet_loader_entries, packet_online)
    from cocotb_tests.iteration.run import collective_repeats
    packet = packet_iteration_format(spec, packet_online(programs))
    vcs = packet_iteration_orders(spec, programs, requests, packet, collective_repeats(traces, len(programs)))[0]
    packet_loader_entries(spec, programs, requests, packet, vcs)


def _fabric(fabric: str, characterization, spec_overrides, switch: str = "circuit", *, io: bool = False):
    """(spec, the model's platform of that RTL fabric, the characterization text or None).
    ``io``: the fabric with the paper's I/O controllers (:data:`IO_CONTROLLERS`): the mesh's on
    its edge (:class:`hdl.contracts.mesh_io.MeshIoSpec`, ``mesh_io_platform``; the spec is then
    the ``MeshIoSpec``), the packet FRED fabric's controller k on L1 k mod L1s
    (``FabricSpec.io_controllers``: its L1 switches grow by ``io_ports_per_l1`` ports)."""
    if fabric == "mesh":
        from hdl.contracts.mesh import MeshFabricSpec
        from sysmodel.mesh_rtl_model import mesh_io_platform, mesh_platform
        spec = MeshFabricSpec(**spec_overrides)
        if io:
            from hdl.contracts.mesh_io import MeshIoSpec
            spec = MeshIoSpec(mesh=spec, controllers=IO_CONTROLLERS)
            return spec, mesh_io_platform(spec, characterization=characterization), None
        return spec, mesh_platform(spec, characterization=characterization), None
    from sysmodel.fabric_model import fabric_platform
    if io:
        spec_overrides = {**spec_overrides, "io_controllers": IO_CONTROLLERS}
    spec = fabric_spec(fabric, **spec_overrides)
    network, text = fabric_platform(spec, characterization=characterization, switch=switch)
    return spec, network, text


def _io_programs(spec, requests, network, text, fabric: str):
    """An iteration with I/O collectives: (programs, summary, why the RTL cannot run it). The
    mesh: each all-reduce / multicast's engine program (:func:`_mesh_programs`), each io-load's
    and io-store's controller program (``hdl.compiler.mesh_io_program``, the trees the model
    picks; io-write's and io-read's spill program, unicasts), checked as the mesh's I/O cases
    check them; the model's cycles of each request. The mesh's I/O iteration top runs
    iterations of I/O nodes only (no all-reduce beside them); the packet Fred-A/C's
    (:class:`hdl.designs.iteration.PacketIoIterationTop`) iterations of io-load and io-store
    nodes on the wafer only, with each one's striped program
    (:func:`cocotb_tests.iteration.packet_io_loading.packet_io_programs`); otherwise the
    third item says what is not built (:func:`_packet_io_missing`)."""
    from hdl.contracts.trace_program import IoRequest
    from sysmodel.collectives import Collective, evaluate
    cycle, flit = network.switch_at("l1").cycle_s, network.switch_at("l1").flit_bytes
    made: dict = {}
    refused: dict = {}     # the RTL's refusal -> the first request it refused
    programs, algorithms, cycles = [], [], []
    for request in requests:
        if not isinstance(request, IoRequest):
            if fabric == "mesh":
                (program,), summary = _mesh_programs(spec.mesh, [request], network)
                made_cycles, algorithm = summary["model_cycles"], summary["algorithm"]
            else:
                program, summary = _fred_program(spec, request, network, text)
                made_cycles, algorithm = summary["model_cycles"], summary["algorithm"]
            programs.append(program)
            algorithms.append(algorithm)
            cycles.append(made_cycles)
            continue
        key = (request.op, request.groups, request.stripe_flits)
        if key not in made:
            result = evaluate(network, "mesh" if fabric == "mesh" else spec.name,
                              [Collective(request.op, g, request.size_flits * flit) for g in request.groups])
            algorithm, program = ",".join(result.algorithms), None
            if fabric == "mesh":
                try:
                    program = _mesh_io_program(spec, request, algorithm)
                except FredError as exc:      # what the RTL refuses; the model's side stands
                    refused.setdefault(str(exc).split(": ", 1)[-1] if "trace node" in str(exc) else str(exc),
                                       request.label)
            made[key] = (program, algorithm, result.time_s / cycle)
        program, algorithm, model_cycles = made[key]
        programs.append(program)
        algorithms.append(algorithm)
        cycles.append(model_cycles)
    ops = sorted({r.op for r in requests if isinstance(r, IoRequest)})
    runs = (fabric == "mesh" and not refused and set(ops) <= {"io-load", "io-store", "io-write", "io-read"}
            and all(isinstance(r, IoRequest) for r in requests))
    if runs:      # hdl.designs.iteration.mesh_io_iteration_top runs it
        return programs, _programs_summary(requests, algorithms, cycles), None
    if fabric != "mesh":
        from cocotb_tests.iteration.packet_io_loading import packet_io_programs
        try:      # hdl.designs.iteration.PacketIoIterationTop runs it: the striped programs
            stripes = packet_io_programs(spec, requests)
        except FredError:
            pass
        else:
            return stripes, _programs_summary(requests, algorithms, cycles), None
    if fabric == "mesh":
        what = ("the mesh's I/O iteration top runs io-load, io-store, io-write and io-read nodes only "
                "(no all-reduce beside them)")
    else:
        what = _packet_io_missing(spec, ops)
    missing = (f"the iteration streams I/O collectives ({', '.join(ops)}); {what}"
               + " (docs/fabric_iteration.md, \"Weight streaming\")"
               + "".join(f"; {label}: {why}" for why, label in list(refused.items())[:3])
               + (f" (and {len(refused) - 3} more refusals)" if len(refused) > 3 else ""))
    return programs, _programs_summary(requests, algorithms, cycles), missing


#: The packet FRED fabric's I/O ops as ``fred fabric-sim`` runs them (``hdl.contracts.fabric.IO_OPS``):
#: the trace's io-load is a broadcast from the controllers, io-store a reduce into them.
_PACKET_IO_OPS = {"io-load": "io-broadcast", "io-store": "io-reduce"}


def _packet_io_missing(spec, ops) -> str:
    """Why the packet FRED fabric ``spec`` (with its I/O controllers) cannot run an iteration
    with the I/O collectives ``ops`` yet: per op, the piece that is not built, named from what
    the compiler has (docs/fabric_rtl.md, "Striped I/O: every controller at once"). Every
    controller streams its stripe at once (the model's platform: ``spec.io_controllers``)."""
    from hdl.compiler.io_stripe_shared import fabric_shared_phases, fabric_shared_tables
    from hdl.compiler.io_stripe_trees import output_sharing, stripe_tree_flows
    parts = []
    for op in ops:
        if op in _PACKET_IO_OPS and spec.in_switch:
            try:
                switches = stripe_tree_flows(spec, _PACKET_IO_OPS[op])
            except FredError as exc:
                parts.append(f"{op}: {exc}")
                continue
            flows = max(len(shared) for shared in switches)
            if op == "io-load":
                most = max(max(output_sharing(shared).values()) for shared in switches)
                share = f"up to {most} of them sending to one switch output"
            else:
                inputs: dict = {}
                for s, shared in enumerate(switches):
                    for flow in shared:
                        for port in flow.flow.inputs:
                            inputs[s, port] = inputs.get((s, port), 0) + 1
                share = f"up to {max(inputs.values())} of them reducing from one switch input"
            try:        # the shared stored flows (PacketFabricTop(phases=, shared_flows=)), the slots from the trees
                phases = fabric_shared_phases(spec, _PACKET_IO_OPS[op])
                fabric_shared_tables(spec, _PACKET_IO_OPS[op], phases)
            except FredError as exc:
                served = f"the shared stored flows do not fit the switches' slots: {exc}"
            else:
                served = ("served as shared stored flows on the packet fabric "
                          "(cocotb_tests.fabric.shared_io_run), as one request only, not behind the "
                          "iteration's trace")
            parts.append(f"{op}: the {spec.io_controllers} controllers' stripe trees take up to {flows} "
                         f"distinct stored flows at a switch, {share}; {served}")
        elif op in _PACKET_IO_OPS:
            continue      # the striped chains behind the trace (PacketIoIterationTop)
        else:
            parts.append(f"{op}: the spills (every NPU's own stripe to or from each controller, online "
                         f"unicasts) are not built on the packet fabric")
    if spec.in_switch:
        top = (f"the packet {spec.name} fabric's I/O iteration top (its {spec.io_controllers} controllers run by "
               f"the trace, hdl.designs.iteration.PacketIoIterationTop) runs Fred-A/C")
    else:
        top = (f"the packet {spec.name} fabric's I/O iteration top runs io-load and io-store nodes on the "
               f"wafer only (the striped chains; no other collective beside them)")
    return top + "; " + "; ".join(parts) if parts else top


def _mesh_io_program(spec, request, algorithm: str):
    """The mesh's controller program of an io-load or io-store ``request`` on the model's trees
    (``algorithm``), or of an io-write / io-read (a checkpoint spill: every NPU's own stripe to
    or from each controller, ``io_spill_program``). Refused, by name, for a group other than the
    wafer (the mesh's I/O programs involve every NPU) or a stripe the NPUs' queues,
    partial-sum memories or the spill flit's index cannot hold."""
    from hdl.compiler.mesh_io_program import io_load_program, io_spill_program, io_store_program
    from studies.mesh_case import STORE_MAX_STRIPE
    if request.groups != (tuple(range(spec.mesh.npus)),):
        raise FredError(f"{request.label}: the mesh's I/O programs involve every NPU; the trace's groups "
                        f"{[len(g) for g in request.groups]} are not the wafer (use MP1)")
    if request.op in ("io-write", "io-read"):
        return io_spill_program(spec, request.stripe_flits, request.op)
    if request.op == "io-load":
        return io_load_program(spec, request.stripe_flits, algorithm)
    return io_store_program(spec, request.stripe_flits, algorithm, max_stripe=STORE_MAX_STRIPE)


def _fred_program(spec, request, network, text):
    """The circuit fabric's program of ``request`` with the model's algorithm for it."""
    from hdl.compiler.fabric_program import fabric_program
    from sysmodel.fabric_model import model_cycles
    estimate = model_cycles(spec, request, platform=(network, text))
    program = fabric_program(spec, request, algorithm=estimate.algorithm)
    return program, {"label": request.label, "size_flits": request.size_flits,
                     "algorithm": estimate.algorithm, "model_cycles": estimate.cycles}


def _fred_programs(spec, requests, network, text):
    """The circuit fabric's program of each request (in order) with the model's algorithm for
    it; refused, naming the switch, unless the switches hold the phases of every distinct
    algorithm side by side (``cocotb_tests.iteration.fred_loading.switch_slots``); the summary
    as :func:`_mesh_programs`'."""
    from cocotb_tests.iteration.fred_loading import switch_slots
    made: dict = {}
    programs = []
    for request in requests:
        key = (request.op, tuple((c.members, c.root) for c in request.collectives), request.size_flits)
        if key not in made:
            program, summary = _fred_program(spec, request, network, text)
            made[key] = (program, summary)
        programs.append(made[key])
    switch_slots(spec, [p for p, _ in programs])
    return [p for p, _ in programs], _programs_summary(requests, [s["algorithm"] for _, s in programs],
                                                      [s["model_cycles"] for _, s in programs])


def _programs_summary(requests, algorithms, cycles) -> dict:
    """How many collectives, the distinct (groups, flits, algorithm), the model's cycles of them all."""
    kinds = sorted({(f"{r.op} of {len(getattr(r, 'collectives', None) or r.groups)} group(s)", r.size_flits, a)
                    for r, a in zip(requests, algorithms)})
    return {"collectives": len(requests), "distinct": [list(k) for k in kinds],
            "label": f"{len(requests)} collective(s), {len(kinds)} distinct",
            "size_flits": sum(r.size_flits for r in requests),
            "algorithm": ",".join(sorted(set(algorithms))), "model_cycles": sum(cycles)}


def _mesh_programs(spec, requests, network):
    """The mesh's engine programs of each request (in order) with the model's algorithm (and,
    for the hierarchical 2D all-reduce, the model's split), as ``studies.mesh_case`` runs a
    collective; the summary: how many, the distinct (label, flits, algorithm), the model's
    cycles of them all."""
    from studies.mesh_case import model_algorithm_program
    made: dict = {}
    programs = []
    for request in requests:
        op = request.op
        if op not in ("all-reduce", "multicast"):
            raise FredError(f"the trace's collective is a {op}; the RTL mesh runs all-reduce and multicast")
        # a multicast group is its root then its destinations (mesh_program's chain)
        groups = [list(c.members) if op == "all-reduce" else [c.root, *c.members] for c in request.collectives]
        key = (op, tuple(map(tuple, groups)), request.size_flits)
        if key not in made:
            program, estimate, _ = model_algorithm_program(spec, groups, request.size_flits, platform=network,
                                                           op=op, label=request.label)
            made[key] = (program, estimate)
        programs.append(made[key])
    return [p for p, _ in programs], _programs_summary(requests, [e.algorithm for _, e in programs],
                                                      [e.cycles for _, e in programs])


def rtl_figures(case: IterationCase, node_times: dict, cycles: int) -> dict:
    """The RTL's figures from the nodes' start/end cycles: compute, per-class busy and exposed
    communication (a collective node's cycles outside the rank's compute nodes: in a
    serialised trace all of them) of the rank that finishes last (the lowest such rank; every
    rank of a one-stage iteration runs the same nodes), the spread of the trace's end over the
    ranks, and the iteration (the fabric's counter). The last rank, not rank 0: the model
    times a collective of several groups as one task ending when its last group ends; in the
    RTL a rank's collective node ends when its own group's does, and groups that take turns
    through a switch (e.g. DP groups of one NPU per L1 through one uplink) end apart -- the
    rank that ends last waited for every turn, as the model's task does, and its compute plus
    communication is the iteration. An overlapped trace's wait nodes count as neither."""
    ends = {r: max((end for _, end in t), default=0) for r, t in node_times.items()}
    rank = min(node_times, key=lambda r: (-ends[r], r))
    trace = case.traces[rank]
    computing = sorted((start, end) for (start, end), category in zip(node_times[rank], trace.categories)
                       if category == "compute")
    busy, exposed = {}, {}
    for (start, end), category in zip(node_times[rank], trace.categories):
        if category in ("compute", "wait"):
            continue
        busy[category] = busy.get(category, 0) + end - start
        hidden = sum(max(0, min(end, e) - max(start, s)) for s, e in computing)
        exposed[category] = exposed.get(category, 0) + end - start - hidden
    spread = [e for r, e in ends.items() if node_times[r]]
    return {"iteration_cycles": cycles, "compute_cycles": sum(e - s for s, e in computing),
            "comm_busy_cycles": busy, "comm_exposed_cycles": exposed,
            "last_node_end_min": min(spread, default=0), "last_node_end_max": max(spread, default=0),
            "representative_rank": rank}


def _store_memory(programs) -> int:
    """The reducers' partial-sum memory per tree for ``programs``' io-stores: the most flits
    of a tree, rounded up to a power of two (at least 8), so that iterations with similar
    stripes share a build."""
    most = max((max(p.per_tree) for p in programs if hasattr(p, "expected_hashes")), default=1)
    return max(8, 1 << (most - 1).bit_length())


def run_iteration_case(case: IterationCase, *, cflags: str | None = None, build_dir=None,
                       watchdog_cycles: int | None = None, simulator: str | None = None,
                       pgo: bool = False) -> IterationCase:
    """Run ``case`` on the RTL; wrong data or a stalled run is a :class:`FredError`.
    ``simulator``: ``lockstep`` (the default) or ``cocotb`` for every iteration top (circuit,
    packet, mesh: ``cocotb_tests.iteration``'s ``run_iteration``, ``run_packet_iteration``,
    ``run_mesh_iteration``; with I/O controllers, ``run_packet_io_iteration`` and
    ``run_mesh_io_iteration``). ``pgo``: a profile-guided build of the lock-step simulator
    (its own C++ flags, so not with ``cflags``), trained on this run the first time its top is
    built: the same cycles and checks, faster (docs/fabric_iteration.md, "Profile-guided
    iteration builds")."""
    try:
        from cocotb_tests.iteration.run import check_pgo, run_iteration
    except ModuleNotFoundError as exc:
        raise FredError(f"the fabric RTL harness (cocotb_tests.iteration) is not available: {exc}") from None
    if pgo:
        check_pgo(simulator, cflags)
    if case.rtl_missing:
        raise FredError(f"{case.fabric} iteration: {case.rtl_missing}; --model-only gives the model's side")
    if watchdog_cycles is None:
        watchdog_cycles = int(4 * case.model["iteration_cycles"] + 20_000)
    io = any(type(r).__name__ == "IoRequest" for r in case.request)
    options = ({"simulator": simulator} if simulator is not None else {}) | ({"pgo": True} if pgo else {})
    if case.fabric == "mesh" and io:
        from cocotb_tests.iteration.mesh_io_run import run_mesh_io_iteration
        run = run_mesh_io_iteration(case.spec, case.traces, case.request, case.program,
                                    watchdog_cycles=watchdog_cycles, max_stripe=_store_memory(case.program),
                                    cflags=cflags, build_dir=build_dir, **options)
    elif case.switch == "packet" and io:
        from cocotb_tests.iteration.packet_io_run import run_packet_io_iteration
        run = run_packet_io_iteration(case.spec, case.traces, case.program, watchdog_cycles=watchdog_cycles,
                                      cflags=cflags, build_dir=build_dir, **options)
    elif case.switch == "packet":
        from cocotb_tests.iteration.packet_run import run_packet_iteration
        run = run_packet_iteration(case.spec, case.traces, case.program, case.request,
                                   watchdog_cycles=watchdog_cycles, cflags=cflags, build_dir=build_dir, **options)
    else:
        if case.fabric == "mesh":
            from cocotb_tests.iteration.run import run_mesh_iteration as run_iteration
        run = run_iteration(case.spec, case.traces, case.program, watchdog_cycles=watchdog_cycles,
                            cflags=cflags, build_dir=build_dir, **options)
    if run.errors:
        raise FredError(f"{case.fabric} iteration: the RTL delivered wrong data "
                        f"({len(run.errors)} error(s)): {'; '.join(run.errors[:5])}")
    case.rtl = run
    case.rtl_figures = rtl_figures(case, run.node_times, run.cycles)
    return case
