"""The ``fred characterize`` run as named steps: plan the points, measure them, assemble and
write ``data/characterization.json`` and its report.

:func:`run_characterization` takes the run's options (:class:`CharacterizeOptions`) and a task
runner (the command line's: in process, in a pool of processes or on a Dask cluster); each
measured point is cached as soon as it is done, and every cached point goes into the outputs,
so an interrupted run resumes and ``report_only`` assembles the cache without measuring.
Points and cost records that were not measured are listed with the reason and the command that
measures them, never filled in.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from hdl.contracts.errors import FredError

__all__ = ["CharacterizeOptions", "CharacterizeResult", "Task", "run_characterization",
           "add_packet_switch", "ECP5_85F_LUTS", "ROOT"]

ROOT = Path(__file__).resolve().parents[2]
ECP5_85F_LUTS = 83640   #: TRELLIS_COMB cells of an LFE5U-85F (nextpnr's utilisation report)


@dataclass(frozen=True)
class CharacterizeOptions:
    """The options of one run (``fred characterize --help`` describes each); ``command`` is
    the command line the outputs record."""

    ports: tuple
    chiplets: tuple
    middle: tuple
    dtypes: tuple
    length: int
    backpressure: float
    cost: str
    cost_max_ports: int
    synthesis: str
    merge: bool
    pnr_max_ports: int
    pnr_seeds: tuple
    pnr_timeout: float | None
    jobs: int
    cache: Path | None
    fresh: bool
    report_only: bool
    output: Path
    report: Path
    keep_going: bool
    command: str


class Task(NamedTuple):
    """One point to measure: ``function(*arguments)`` returns ``(cache key, record)``; a
    failure is recorded as ``failed`` (None: no not-measured entry of its own). A tuple, so
    that a task runner unpacks it without importing this module."""

    name: str
    failed: dict | None
    kind: str            # the cache kind: "timing" or "cost"
    function: object
    arguments: tuple


@dataclass(frozen=True)
class CharacterizeResult:
    """What a run wrote: the document (``output``), its report, and what it holds."""

    output: Path
    report: Path
    document: dict
    points: int
    costs: int
    not_measured: list


# -- the points (top-level functions: worker processes and Dask workers import them) ----------
def measure_timing(ports, middle, dtype, length, backpressure):
    from studies.characterization.grid import point_name
    from studies.characterization.timing import measure_point
    log = lambda *a: print(*a, file=sys.stderr, flush=True)
    return point_name(ports, middle, dtype), measure_point(ports, middle, dtype, length=length,
                                                             backpressure=backpressure, log=log)


def measure_design_cost(design, cache, pnr, pnr_timeout, seeds=(1,)):
    from studies.characterization.cost import measure_cost
    log = lambda *a: print(*a, file=sys.stderr, flush=True)
    return design["name"], measure_cost(design, folder=cache / "costwork" / design["name"], pnr=pnr,
                                        pnr_timeout=pnr_timeout, seeds=seeds, log=log)


# -- the run ------------------------------------------------------------------------------------
def check_options(opts: CharacterizeOptions) -> None:
    """Bad options, each one line naming the option, before anything runs."""
    if opts.length < 2:
        raise FredError(f"--length must be >= 2 flits, got {opts.length}")
    if not 0.0 < opts.backpressure < 1.0:
        raise FredError(f"--backpressure must be in (0, 1), got {opts.backpressure}")
    if opts.jobs < 1:
        raise FredError(f"--jobs must be >= 1, got {opts.jobs}")
    if not opts.pnr_seeds:
        raise FredError("--pnr-seeds needs at least one seed")
    if opts.merge and opts.fresh:
        raise FredError("--merge adds to the file at --output and --fresh starts from nothing: use one")


def run_characterization(opts: CharacterizeOptions, *, run_tasks, log) -> CharacterizeResult:
    """Measure what the cache lacks, then write the document and its report.

    ``run_tasks(tasks, jobs, log, seed=...)`` yields ``(index, (key, record) or the exception)``
    per :class:`Task` as each finishes; ``log(*parts)`` prints progress."""
    from cocotb_tests.lib.seeds import base_seed
    from studies.characterization.cost import cost_designs
    from studies.characterization.grid import DEFAULT_CACHE, timing_grid
    from studies.characterization.merge import previous_records
    from studies.characterization.provenance import run_record
    from studies.report import check_writable
    check_options(opts)
    previous = previous_records(opts.output) if opts.merge else None   # fail before measuring
    check_writable(opts.output)
    check_writable(opts.report)
    grid = timing_grid(opts.ports, opts.middle, opts.dtypes, opts.chiplets)
    all_designs = cost_designs(opts.ports, opts.middle, opts.chiplets, synthesis=opts.synthesis,
                               flat_max_ports=opts.cost_max_ports)
    cache = opts.cache or DEFAULT_CACHE
    if opts.fresh and cache.exists():
        shutil.rmtree(cache)
    started = time.time()
    tasks = [] if opts.report_only else _cost_tasks(opts, all_designs, cache) + _timing_tasks(grid, opts, cache)
    seed = base_seed()   # fixed here (FRED_SEED, else random) so that every worker shares it
    tools = _tool_versions(with_synthesis=any(t.kind == "cost" for t in tasks))
    # every record this run measures carries the run (a merged file holds records of several runs)
    this_run = run_record(opts.command, tools=tools, seed=seed, jobs=opts.jobs)
    log(f"characterize: {len(tasks)} points to measure, {opts.jobs} at a time, FRED_SEED={seed}, "
        f"commit {this_run['commit']}")
    not_measured = _measure(tasks, opts, cache, this_run, seed, run_tasks, log)
    document = _assemble(opts, grid, all_designs, cache, previous, not_measured, tools,
                         seconds=round(time.time() - started, 1) if tasks else None,
                         jobs=opts.jobs if tasks else None, seed=seed if tasks else None)
    return _write(opts, document)


def _synthesized(design: dict, opts: CharacterizeOptions) -> bool:
    """Flat Fred_m(P) up to --cost-max-ports; hierarchical ones and chiplets always."""
    return (design["kind"] != "switch" or design["synthesis"] == "hierarchical"
            or design["ports"] <= opts.cost_max_ports
            or (design["ports"], design["middle"]) in {(p, 3) for p in opts.chiplets})


def _cost_tasks(opts: CharacterizeOptions, all_designs: list, cache: Path) -> list[Task]:
    """The cost records to measure: not cached, or cached without place and route (or with
    fewer seeds) when it is asked for. Largest switch first: those are the longest single
    steps, so starting them early shortens the whole run when several jobs share the work."""
    from studies.characterization.grid import load_cached
    if opts.cost == "none":
        return []
    cost_done = {c["name"]: c for c in load_cached(cache, "cost")}
    designs = [d for d in all_designs if _synthesized(d, opts)]
    ordered = sorted(designs, key=lambda d: (d["kind"] != "switch", -d["ports"], -(d["middle"] or 0)))
    seeds = {str(s) for s in opts.pnr_seeds}
    tasks = []
    for design in ordered:
        pnr = (opts.cost == "pnr" and design["synthesis"] == "flat"
               and (design["kind"] != "switch" or design["ports"] <= opts.pnr_max_ports))
        cached = cost_done.get(design["name"])
        if cached is not None and (not pnr or (cached["fmax_mhz"] is not None and
                                                seeds <= set(cached.get("fmax_seeds", {"1": None})))):
            continue   # cached, and placed with (at least) these seeds or place and route not asked for
        tasks.append(Task(f"cost {design['name']}", None, "cost", measure_design_cost,
                          (design, cache, pnr, opts.pnr_timeout, tuple(opts.pnr_seeds))))
    return tasks


def _timing_command(ports, middle, dtype) -> str:
    return f"fred characterize --ports {ports} --middle {middle} --dtypes {dtype} --cost none"


def _timing_tasks(grid, opts: CharacterizeOptions, cache: Path) -> list[Task]:
    """The timing points of the grid that are not cached."""
    from studies.characterization.grid import load_cached, point_name
    done = {point_name(p["ports"], p["middle"], p["dtype"]) for p in load_cached(cache, "timing")}
    tasks = []
    for ports, middle, dtype in grid:
        name = point_name(ports, middle, dtype)
        if name not in done:
            failed = {"what": f"timing {name}", "reason": None, "command": _timing_command(ports, middle, dtype)}
            tasks.append(Task(name, failed, "timing", measure_timing,
                              (ports, middle, dtype, opts.length, opts.backpressure)))
    return tasks


def _measure(tasks: list[Task], opts, cache: Path, this_run: dict, seed: int, run_tasks, log) -> list[dict]:
    """Run ``tasks``, caching each result with this run as it arrives; a failure stops the run
    unless ``keep_going`` (then it is listed). Returns the not-measured entries of failures."""
    from studies.characterization.grid import save_cached
    not_measured = []
    for index, outcome in run_tasks(tasks, opts.jobs, log, seed=seed):
        task = tasks[index]
        if isinstance(outcome, BaseException):
            if not opts.keep_going:
                raise outcome
            log(f"{task.name}: FAILED: {outcome}")
            if task.failed is not None:
                not_measured.append(dict(task.failed, reason=f"failed: {str(outcome).splitlines()[0]}"))
            continue
        key, record = outcome
        save_cached(cache, task.kind, key, dict(record, run=this_run))
    return not_measured


def _assemble(opts, grid, all_designs, cache: Path, previous, not_measured: list, tools: dict, *,
              seconds, jobs, seed) -> dict:
    """The document from every cached point (a later run for one point adds to the rest),
    merged with ``previous`` (``--merge``), with everything not measured listed."""
    from studies.characterization.grid import load_cached
    from studies.characterization.merge import merge_grid, merge_not_measured, merge_records
    from studies.characterization.report import build_document
    points = load_cached(cache, "timing")
    costs = load_cached(cache, "cost")
    not_measured = not_measured + _unmeasured_timing(grid, points, not_measured)
    grid_doc = {"ports": list(opts.ports), "middle": list(opts.middle), "dtypes": list(opts.dtypes),
                "chiplets": sorted(opts.chiplets), "length": opts.length, "backpressure": opts.backpressure,
                "traffic": ["unicast", "multicast", "reduce", "all_reduce", "mix3d"]}
    if previous is not None:
        old_points, old_costs, old_grid, old_missing = previous
        points = merge_records(old_points, points)
        costs = merge_records(old_costs, costs)
        grid_doc = merge_grid(old_grid, grid_doc)
    costs = sorted(costs, key=lambda c: (c["kind"] == "switch", c["ports"], c["middle"] or 0, c["name"]))
    cost_have = {c["name"]: c for c in costs}
    not_measured += _unmeasured_costs(opts, all_designs, cost_have, not_measured)
    not_measured += _unplaceable_chiplets(opts, cost_have, not_measured)
    if previous is not None:
        not_measured = merge_not_measured(old_missing, not_measured, points, costs)
    document = build_document(points, costs, command=opts.command + _command_note(opts), grid=grid_doc,
                              not_measured=not_measured, tools=tools, seconds=seconds, jobs=jobs, seed=seed)
    kept = _packet_switch_block(opts.output)
    if kept is not None:   # the packet switch's figures are measured by --packet-switch alone
        document["packet_switch"] = kept
    return document


def _unmeasured_timing(grid, points: list[dict], not_measured: list[dict]) -> list[dict]:
    from studies.characterization.grid import point_name
    have = {point_name(p["ports"], p["middle"], p["dtype"]) for p in points}
    listed = {n["what"] for n in not_measured}
    return [{"what": f"timing {point_name(*g)}", "reason": "not run (time budget of this run)",
             "command": _timing_command(*g)}
            for g in grid if point_name(*g) not in have and f"timing {point_name(*g)}" not in listed]


def _unmeasured_costs(opts, all_designs: list, cost_have: dict, earlier: list[dict]) -> list[dict]:
    """A design without a cost record, or a flat one without an Fmax, with the reason (and,
    for a switch, whether its composed size could fit the device at all)."""
    out = []
    for design in all_designs:
        entry = _unmeasured_cost(opts, design, cost_have.get(design["name"]))
        if entry is None:
            continue
        if design["kind"] == "switch":
            _note_device_limit(entry, cost_have, design)
        out.append(entry)
    return out


def _unmeasured_cost(opts, design: dict, c: dict | None) -> dict | None:
    cmd = (f"fred characterize --ports {design['ports']} --middle {design['middle']} --dtypes fp16 "
           f"--cost pnr --pnr-max-ports {design['ports']} --merge"
           if design["kind"] == "switch" else "fred characterize --ports 4 --dtypes fp16 --cost pnr --merge")
    if c is None:
        reason = (f"not synthesized: this run synthesized Fred_m(P) only up to P = "
                  f"{opts.cost_max_ports} (--cost-max-ports)" if not _synthesized(design, opts) else
                  "not synthesized in this run (--cost none, or it failed: see the log)")
        return {"what": f"cost {design['name']}", "reason": reason, "command": cmd}
    if c["fmax_mhz"] is None and design["synthesis"] == "flat":
        skipped = c.get("fmax_note", "place and route not run") == "place and route not run"
        reason = (f"place and route not run: this run placed Fred_m(P) only up to "
                  f"P = {opts.pnr_max_ports} (--pnr-max-ports)" if skipped else c["fmax_note"])
        return {"what": f"Fmax {design['name']}", "reason": reason, "command": cmd}
    return None


def _note_device_limit(entry: dict, cost_have: dict, design: dict) -> None:
    from studies.characterization.report import composed_cost
    estimate = composed_cost(cost_have, design["ports"], design["middle"])
    if estimate and estimate["lut_equivalent"] > ECP5_85F_LUTS:
        entry["reason"] += (f"; composed estimate {estimate['lut_equivalent']} LUT eq. exceeds the "
                            f"{ECP5_85F_LUTS} LUT4 of the LFE5U-85F, so it cannot be placed on that device")


def _unplaceable_chiplets(opts, cost_have: dict, not_measured: list[dict]) -> list[dict]:
    """A chiplet's Fmax: placed if it fits the device, else composed (and said so here)."""
    out = []
    for ports in opts.chiplets:
        name = f"fred_switch_P{ports}m3"
        flat, hier = cost_have.get(name), cost_have.get(name + "_hier")
        size = (flat or hier or {}).get("lut_equivalent")
        if (flat is None or flat["fmax_mhz"] is None) and size is not None and size > ECP5_85F_LUTS \
                and not any(n["what"] == f"Fmax {name}" for n in not_measured + out):
            out.append({"what": f"Fmax {name}", "command": "none on this device",
                        "reason": f"cannot be placed: {size} LUT eq. synthesized "
                                  f"({(flat or hier).get('synthesis', 'flat')}) exceed the {ECP5_85F_LUTS} "
                                  "LUT4 of the LFE5U-85F; composed from its parts instead "
                                  "(chiplet_cost, fmax_agreement)"})
    return out


def _command_note(opts: CharacterizeOptions) -> str:
    if opts.report_only:
        return (" (assembles the points cached in build/characterize/ by earlier measuring runs; each "
                "point records its packet length and backpressure)")
    if opts.merge:
        shown = opts.output.resolve()
        shown = shown.relative_to(ROOT) if shown.is_relative_to(ROOT) else shown   # no checkout path in the file
        return f" (merged into the records already in {shown}; each record names the run that measured it)"
    return ""


def _packet_switch_block(output: Path) -> dict | None:
    if not output.is_file():
        return None
    try:
        return json.loads(output.read_text()).get("packet_switch")
    except (json.JSONDecodeError, AttributeError):
        return None


def _write(opts: CharacterizeOptions, document: dict) -> CharacterizeResult:
    from studies.characterization.report import write_json, write_report
    write_json(document, opts.output)
    write_report(document, opts.report, opts.report.with_suffix(".png"))
    return CharacterizeResult(output=opts.output, report=opts.report, document=document,
                              points=len(document["measurements"]), costs=len(document["cost"]),
                              not_measured=document["not_measured"])


def _tool_versions(with_synthesis: bool) -> dict:
    """Versions of the tools a run uses (yosys/nextpnr only when it synthesizes)."""
    try:
        from eda.toolchain import setup_verilator
        major, minor = setup_verilator().version
        tools = {"verilator": f"{major}.{minor:03d}"}
    except Exception as exc:  # the document still records why
        tools = {"verilator": f"unknown ({exc})"}
    import amaranth
    import cocotb
    tools.update({"amaranth": amaranth.__version__, "cocotb": cocotb.__version__})
    if with_synthesis:
        from studies.characterization.cost import tool_versions
        tools.update(tool_versions())
    return tools


#: The designs ``fred characterize --packet-switch`` also measures the preemption on
#: (``packet_switch.preemption_points``): every switch the RTL fabrics build (Fred_3(5) and
#: Fred_3(8) int32 and fp16 at L1 and in the L2 planes, Fred_3(6) and Fred_3(9) int32 at the L1s
#: with an I/O controller) and the paper platform's chiplets (Fred_3(12), Fred_3(10) fp16), so
#: the model charges each switch on a path its own drain (docs/sysmodel.md, "Preemption").
PREEMPTION_POINTS = tuple({"ports": p, "middle": 3, "dtype": d}
                          for p, d in ((5, "int32"), (6, "int32"), (8, "int32"), (9, "int32"),
                                       (5, "fp16"), (8, "fp16"), (10, "fp16"), (12, "fp16")))


def add_packet_switch(output: Path, command: str, points=PREEMPTION_POINTS) -> dict:
    """Measure the packet switch's preemption figures and write them as the ``packet_switch``
    block of the characterization at ``output`` (which must exist; the rest is kept): the
    reference point's figures (:func:`measure_preemption`'s default design) with its online
    routing figures, and the preemption figures of every design in ``points``
    (``preemption_points``, keyed by :func:`~hdl.contracts.characterization.point_name`)."""
    import amaranth

    from hdl.contracts.characterization import parse_characterization
    from studies.characterization.preemption import measure_preemption
    from studies.characterization.provenance import run_record
    from studies.characterization.report import write_json
    if not output.is_file():
        raise FredError(f"--packet-switch adds to {output}, which does not exist (run fred characterize first)")
    document = json.loads(output.read_text())
    started = time.time()
    block = measure_preemption()
    # the online routing's select and path set-up, at the same switch point
    from studies.characterization.online_select import measure_online_select
    point = block["point"]
    block.update(measure_online_select(ports=point["ports"], middle=point["middle"],
                                       dtype=point["dtype"]))
    from hdl.contracts.characterization import point_name
    block["preemption_points"] = {}
    for design in points:
        figures = measure_preemption(**design)
        block["preemption_points"][point_name(**design)] = dict(figures, point=dict(figures["point"]))
    block["generated_by"] = dict(run_record(command, tools={"amaranth": amaranth.__version__},
                                            seed=block["point"]["seed"], jobs=1),
                                 seconds=round(time.time() - started, 1),
                                 simulator="amaranth (the packet switch RTL, cycle-accurate)")
    document["packet_switch"] = block
    parse_characterization(document, source=str(output))   # the reader must accept it
    write_json(document, output)
    return block
