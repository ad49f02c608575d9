"""One training iteration on the circuit FRED fabric RTL and on the system model of the same fabric
(docs/fabric_iteration.md; ``fred fabric-iteration``).

Model side: the model's iteration of the workload, serialised (``overlap=False``) with one
collective at a time (``one_collective``: the schedule the RTL's sequencers run, e.g. MP
and DP together with the DP all-reduce after the last MP all-reduce), divided by ``scale``,
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
serialised iteration all of it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec

__all__ = ["IterationCase", "build_iteration_case", "run_iteration_case"]


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
               "model": self.model, "collective": self.collective_model,
               "request": ([r.to_dict() for r in self.request] if isinstance(self.request, list)
                           else self.request.to_dict() if self.request is not None else None),
               "nodes_per_rank": {r: len(t.words) for r, t in self.traces.items()}}
        if self.rtl is not None:
            rtl = self.rtl.to_dict()
            rtl.pop("node_times")
            out.update(rtl=rtl, rtl_figures=self.rtl_figures, ratio_rtl_over_model=self.ratios())
        return out


def _refuse_overlap(overlap: bool) -> None:
    if overlap:
        raise FredError("the fabrics' trace sequencers run the serialised iteration only (--no-overlap): "
                        "they run one node at a time; on the circuit FRED fabric, whose switches hold "
                        "one configuration at a time, overlapping collectives (or collectives under "
                        "compute) would also need the run-time overlap compiled into the "
                        "configurations (docs/fabric_iteration.md)")


def build_iteration_case(*, fabric: str, workload, platform, strategy=None, samples_per_dp=None,
                         scale: float = 1000.0, overlap: bool = False, characterization=None,
                         switch: str = "circuit", **spec_overrides) -> IterationCase:
    """Validate and compute the model's side and the RTL's inputs; nothing is built. ``fabric``:
    a FRED variant of the circuit fabric (``fabric_spec``) or ``mesh`` (the 2D-mesh fabric,
    :class:`hdl.contracts.mesh.MeshFabricSpec`; ``spec_overrides`` go to the spec). Refuses, by
    name, what the RTL cannot run: overlap, pipeline stages, weight streaming
    (:mod:`hdl.contracts.trace_program`); the model's side is the iteration with one
    collective at a time (module docstring). ``switch``: the FRED fabric's switches, ``circuit``
    (phase sequencers) or ``packet`` (``PacketFabricTop``: phases selected by the headers,
    endpoint algorithms routed online; the model's packet platform, as ``fred fabric-sim
    --switch packet``); refused for what the packet fabric's iteration does not run yet
    (hierarchical all-reduces, phase orders, in-switch and endpoint algorithms mixed)."""
    from hdl.contracts.placement import parse_strategy
    from hdl.contracts.trace_program import collective_requests, npu_trace
    from sysmodel.iteration_export import export_iteration
    _refuse_overlap(overlap)
    if switch not in ("circuit", "packet") or (switch == "packet" and fabric == "mesh"):
        raise FredError(f"switch must be circuit or packet (a FRED fabric's), got {switch!r} on {fabric}")
    spec, network, text = _fabric(fabric, characterization, spec_overrides, switch)
    timing = network.switch_at("l1")
    export = export_iteration(platform, "mesh" if fabric == "mesh" else spec.name, workload, strategy,
                              samples_per_dp=samples_per_dp, overlap=False, scale=scale, network=network,
                              one_collective=True)
    if parse_strategy(export.strategy).pp != 1:
        raise FredError(f"strategy {export.strategy} has pipeline stages; the fabrics' trace "
                        f"run takes one stage (PP1)")
    if fabric == "mesh":     # the mesh's sequencers load a program per collective
        traces = {r: npu_trace(r, nodes, cycle_s=timing.cycle_s, max_collectives=1 << 16)
                  for r, nodes in export.ranks.items()}
        request = collective_requests(export.ranks, traces, flit_bytes=timing.flit_bytes)
        program, collective = _mesh_programs(spec, request, network)
    else:   # several collectives: the NPUs' and switches' loaders (the switches' phases shared)
        traces = {r: npu_trace(r, nodes, cycle_s=timing.cycle_s, max_collectives=1 << 16)
                  for r, nodes in export.ranks.items()}
        request = collective_requests(export.ranks, traces, flit_bytes=timing.flit_bytes)
        program, collective = None, {}
        if request:
            program, collective = _fred_programs(spec, request, network, text)
        if switch == "packet":
            _check_packet(spec, program, request)
    cycle = timing.cycle_s
    model = {"iteration_cycles": export.time_s / cycle,
             "compute_cycles": export.breakdown["compute"] / cycle,
             "comm_busy_cycles": {c: t / cycle for c, t in export.comm_busy.items() if t},
             "comm_exposed_cycles": {c: export.breakdown[c] / cycle for c in export.comm_busy
                                     if export.breakdown.get(c)},
             "tasks": export.tasks, "clock_mhz": timing.clock_mhz, "flit_bytes": timing.flit_bytes}
    return IterationCase(spec, export.description, scale, model, traces, request, program, collective,
                         fabric="mesh" if fabric == "mesh" else spec.name, switch=switch)


def _check_packet(spec, programs, requests) -> None:
    """FredError, before anything is built, naming what the packet fabric's iteration does not
    run (``cocotb_tests.iteration.packet_loading``)."""
    if not programs:
        raise FredError("the iteration has no collective; the packet fabric's iteration runs its collectives")
    from cocotb_tests.iteration.packet_loading import (packet_iteration_format, packet_loader_entries,
                                                       packet_online)
    packet_loader_entries(spec, programs, requests, packet_iteration_format(spec, packet_online(programs)))


def _fabric(fabric: str, characterization, spec_overrides, switch: str = "circuit"):
    """(spec, the model's platform of that RTL fabric, the characterization text or None)."""
    if fabric == "mesh":
        from hdl.contracts.mesh import MeshFabricSpec
        from sysmodel.mesh_rtl_model import mesh_platform
        spec = MeshFabricSpec(**spec_overrides)
        return spec, mesh_platform(spec, characterization=characterization), None
    from sysmodel.fabric_model import fabric_platform
    spec = fabric_spec(fabric, **spec_overrides)
    network, text = fabric_platform(spec, characterization=characterization, switch=switch)
    return spec, network, text


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
    kinds = sorted({(f"{r.op} of {len(r.collectives)} group(s)", r.size_flits, a)
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
    """The RTL's figures from the nodes' start/end cycles: compute and per-class busy of the
    rank that finishes last (the lowest such rank; every rank of a one-stage iteration runs
    the same nodes), the spread of the trace's end over the ranks, and the iteration (the
    fabric's counter). The last rank, not rank 0: the model times a collective of several
    groups as one task ending when its last group ends; in the RTL a rank's collective node
    ends when its own group's does, and groups that take turns through a switch (e.g. DP
    groups of one NPU per L1 through one uplink) end apart -- the rank that ends last waited
    for every turn, as the model's task does, and its compute plus communication is the
    iteration."""
    ends = {r: (t[-1][1] if t else 0) for r, t in node_times.items()}
    rank = min(node_times, key=lambda r: (-ends[r], r))
    trace = case.traces[rank]
    compute, busy = 0, {}
    for (start, end), category in zip(node_times[rank], trace.categories):
        if category == "compute":
            compute += end - start
        else:
            busy[category] = busy.get(category, 0) + end - start
    ends = [t[-1][1] for t in node_times.values() if t]
    # serialised: the rank computes nothing while a collective runs, so all of it is exposed
    return {"iteration_cycles": cycles, "compute_cycles": compute, "comm_busy_cycles": busy,
            "comm_exposed_cycles": dict(busy), "last_node_end_min": min(ends, default=0),
            "last_node_end_max": max(ends, default=0), "representative_rank": rank}


def run_iteration_case(case: IterationCase, *, cflags: str | None = None, build_dir=None,
                       watchdog_cycles: int | None = None) -> IterationCase:
    """Run ``case`` on the RTL; wrong data or a stalled run is a :class:`FredError`."""
    try:
        from cocotb_tests.iteration.run import run_iteration
    except ModuleNotFoundError as exc:
        raise FredError(f"the fabric RTL harness (cocotb_tests.iteration) is not available: {exc}") from None
    if watchdog_cycles is None:
        watchdog_cycles = int(4 * case.model["iteration_cycles"] + 20_000)
    if case.switch == "packet":
        from cocotb_tests.iteration.packet_run import run_packet_iteration
        run = run_packet_iteration(case.spec, case.traces, case.program, case.request,
                                   watchdog_cycles=watchdog_cycles, cflags=cflags, build_dir=build_dir)
    else:
        if case.fabric == "mesh":
            from cocotb_tests.iteration.run import run_mesh_iteration as run_iteration
        run = run_iteration(case.spec, case.traces, case.program, watchdog_cycles=watchdog_cycles,
                            cflags=cflags, build_dir=build_dir)
    if run.errors:
        raise FredError(f"{case.fabric} iteration: the RTL delivered wrong data "
                        f"({len(run.errors)} error(s)): {'; '.join(run.errors[:5])}")
    case.rtl = run
    case.rtl_figures = rtl_figures(case, run.node_times, run.cycles)
    return case
