"""``fred characterize``: measure switch timings (Verilator) and cost (yosys/nextpnr) as data.

Writes ``data/characterization.json`` (read by the system model, ``sysmodel/switch_timing.py``)
and ``docs/characterization.md`` + ``docs/characterization.png``. Each measured point is cached
in ``build/characterize/`` as soon as it is done (``--fresh`` clears the cache; ``--report-only``
assembles the outputs from the cache without measuring anything).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

from fred.cli import print_json
from hdl.contracts.errors import FredError

HELP = "measure switch latency/throughput/phase-switch/config-load (Verilator) and cost (ECP5)"

ROOT = Path(__file__).resolve().parents[2]
ECP5_85F_LUTS = 83640   #: TRELLIS_COMB cells of an LFE5U-85F (nextpnr's utilisation report)


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma list of integers, got {text!r}") from None


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ports", type=_ints, default=(4, 8, 16), help="P values (default 4,8,16)")
    from studies.characterization.grid import CHIPLETS
    parser.add_argument("--chiplets", type=_ints, default=CHIPLETS,
                        help="sizes P of the wafer's chiplets, measured as Fred_3(P) fp16 on top of the "
                             "grid and always synthesized (default "
                             + ",".join(str(p) for p in CHIPLETS)
                             + ": the paper's Fred_3(12) and Fred_3(10); '' for none)")
    parser.add_argument("--middle", type=_ints, default=(2, 3), help="m values (default 2,3)")
    from studies.characterization.grid import DTYPES
    parser.add_argument("--dtypes", type=_names, default=DTYPES,
                        help=f"element types (default {','.join(DTYPES)})")
    parser.add_argument("--length", type=int, default=128, help="flits per packet (default 128)")
    parser.add_argument("--backpressure", type=float, default=0.3,
                        help="probability an output holds ready low per cycle in the backpressure runs")
    parser.add_argument("--cost", choices=("none", "synth", "pnr"), default="pnr",
                        help="cost: none, yosys only, or yosys + nextpnr (default pnr)")
    parser.add_argument("--cost-max-ports", type=int, default=8,
                        help="synthesize Fred_m(P) flat only up to this P (microswitches and chiplets "
                             "always; with --synthesis auto larger ones are synthesized hierarchically)")
    from studies.characterization.cost import SYNTHESIS_MODES
    parser.add_argument("--synthesis", choices=SYNTHESIS_MODES, default="auto",
                        help="how Fred_m(P) is synthesized: flat (what place and route needs), "
                             "hierarchical (synth_ecp5 -noflatten: each module once, totals over the "
                             "hierarchy; minutes instead of ~40 min for a chiplet), auto (flat up to "
                             "--cost-max-ports, hierarchical above; default) or both (the agreement)")
    parser.add_argument("--merge", action="store_true",
                        help="add this run's records to the file at --output (kept; a record measured "
                             "again is replaced) instead of writing only the cache's; every record "
                             "names the run that measured it (docs/characterization.md)")
    parser.add_argument("--packet-switch", action="store_true",
                        help="measure only the packet switch's preemption figures (Amaranth simulator, "
                             "studies/characterization/preemption.py) and write them as the "
                             "'packet_switch' block of the file at --output, which must exist; the "
                             "rest of the file is kept")
    parser.add_argument("--pnr-max-ports", type=int, default=4,
                        help="place and route Fred_m(P) only up to this P (default 4: nextpnr on "
                             "Fred_m(8) takes hours on a 2-core machine, and Fred_m(16) fp16 x 4 "
                             "lanes does not fit an LFE5U-85F)")
    parser.add_argument("--pnr-seeds", type=_ints, default=(1,),
                        help="nextpnr placement seeds per design; Fmax is the median seed's "
                             "(default 1: one seed)")
    parser.add_argument("--pnr-timeout", type=float, default=None,
                        help="give up place and route of one design after this many seconds "
                             "(recorded as not measured; default: no limit)")
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1,
                        help="points measured at once, each in its own process (default: CPU count)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="measure the points on the Dask distributed cluster whose scheduler is at "
                             "ADDRESS (workers need this package and its Verilator; README: 'Distributed "
                             "runs'); results are cached here as they arrive")
    parser.add_argument("--cache", type=Path, default=None, help="point cache (default build/characterize)")
    parser.add_argument("--fresh", action="store_true", help="clear the cache first (make characterize)")
    parser.add_argument("--report-only", action="store_true",
                        help="measure nothing; assemble the outputs from the cached points")
    parser.add_argument("--output", type=Path, default=ROOT / "data" / "characterization.json")
    parser.add_argument("--report", type=Path, default=ROOT / "docs" / "characterization.md")
    parser.add_argument("--keep-going", action="store_true",
                        help="record a failing point as not measured and continue (default: stop)")


def _command_line() -> str:
    return "fred characterize " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if sys.argv[1:2] == ["characterize"] \
        else "fred characterize"


def _measure_point(ports, middle, dtype, length, backpressure):
    from studies.characterization.grid import point_name
    from studies.characterization.timing import measure_point
    log = lambda *a: print(*a, file=sys.stderr, flush=True)
    return point_name(ports, middle, dtype), measure_point(ports, middle, dtype, length=length,
                                                             backpressure=backpressure, log=log)


def _measure_cost(design, cache, pnr, pnr_timeout, seeds=(1,)):
    from studies.characterization.cost import measure_cost
    log = lambda *a: print(*a, file=sys.stderr, flush=True)
    return design["name"], measure_cost(design, folder=cache / "costwork" / design["name"], pnr=pnr,
                                        pnr_timeout=pnr_timeout, seeds=seeds, log=log)


def _seeded(seed, function, *arguments):
    """``function(*arguments)`` with ``FRED_SEED`` set first: a Dask worker does not inherit
    this process's environment, and every point must share the run's seed."""
    os.environ["FRED_SEED"] = str(seed)
    return function(*arguments)


def _run_tasks(tasks, jobs: int, log, *, scheduler: str | None = None, seed: int | None = None):
    """Yield ``(index, (key, record) or the exception)`` for each task as it finishes.

    With ``jobs`` > 1 each task runs in a worker process (the cocotb runner edits ``os.environ``
    while it builds, so threads would race); with ``scheduler`` on that Dask cluster. The
    caller caches each result as soon as it is yielded, so an interrupted run keeps every
    finished point.
    """
    if scheduler:
        from fred.parallel import dask_calls
        started = time.time()
        calls = [(_seeded, (seed, function, *arguments)) for (_, _, _, function, arguments) in tasks]
        for finished, (index, (status, value)) in enumerate(dask_calls(scheduler, calls), 1):
            outcome = value if status == "ok" else FredError(value)
            log(f"{tasks[index][0]}: {'done' if status == 'ok' else 'FAILED'} ({finished}/{len(tasks)}, "
                f"{time.time() - started:.0f} s into the run, on {scheduler})")
            yield index, outcome
        return
    if jobs == 1 or len(tasks) <= 1:
        for index, (name, _, _, function, arguments) in enumerate(tasks):
            started = time.time()
            try:
                outcome = function(*arguments)
            except Exception as exc:
                outcome = exc
            log(f"{name}: {time.time() - started:.0f} s")
            yield index, outcome
        return
    from concurrent.futures import ProcessPoolExecutor, as_completed
    started = time.time()
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(tasks)))
    try:
        futures = {pool.submit(function, *arguments): index
                   for index, (_, _, _, function, arguments) in enumerate(tasks)}
        for finished, future in enumerate(as_completed(futures), 1):
            try:
                outcome = future.result()
            except Exception as exc:
                outcome = exc
            state = "FAILED" if isinstance(outcome, Exception) else "done"
            log(f"{tasks[futures[future]][0]}: {state} ({finished}/{len(tasks)}, "
                f"{time.time() - started:.0f} s into the run)")
            yield futures[future], outcome
    finally:
        # reached early when the caller stops at a failure: drop the points not started yet
        # (the running ones finish in their workers) instead of measuring all of them first
        pool.shutdown(wait=True, cancel_futures=True)


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


def _run_packet_switch(args) -> int:
    """``--packet-switch``: the preemption figures into the ``packet_switch`` block."""
    import json

    import amaranth

    from studies.characterization.preemption import measure_preemption
    from studies.characterization.provenance import run_record
    from hdl.contracts.characterization import parse_characterization
    if not args.output.is_file():
        raise FredError(f"--packet-switch adds to {args.output}, which does not exist (run fred characterize first)")
    document = json.loads(args.output.read_text())
    started = time.time()
    block = measure_preemption()
    block["generated_by"] = dict(run_record(_command_line(), tools={"amaranth": amaranth.__version__},
                                            seed=block["point"]["seed"], jobs=1),
                                 seconds=round(time.time() - started, 1),
                                 simulator="amaranth (the packet switch RTL, cycle-accurate)")
    document["packet_switch"] = block
    parse_characterization(document, source=str(args.output))   # the reader must accept it
    from studies.characterization.report import write_json
    write_json(document, args.output)
    if args.json:
        print_json({"output": str(args.output), "packet_switch": block})
    else:
        print(f"wrote the packet_switch block of {args.output}:")
        for key, value in block.items():
            if key not in ("generated_by",):
                print(f"  {key}: {value}")
    return 0


def run(args) -> int:
    if args.packet_switch:
        return _run_packet_switch(args)
    from studies.characterization.cost import cost_designs
    from studies.characterization.grid import DEFAULT_CACHE, load_cached, point_name, save_cached, timing_grid
    from studies.characterization.merge import (merge_grid, merge_not_measured, merge_records,
                                                 previous_records)
    from studies.characterization.provenance import run_record
    from studies.characterization.report import build_document, composed_cost, write_json, write_report

    if args.length < 2:
        raise FredError(f"--length must be >= 2 flits, got {args.length}")
    if not 0.0 < args.backpressure < 1.0:
        raise FredError(f"--backpressure must be in (0, 1), got {args.backpressure}")
    if args.jobs < 1:
        raise FredError(f"--jobs must be >= 1, got {args.jobs}")
    if not args.pnr_seeds:
        raise FredError("--pnr-seeds needs at least one seed")
    if args.merge and args.fresh:
        raise FredError("--merge adds to the file at --output and --fresh starts from nothing: use one")
    previous = previous_records(args.output) if args.merge else None   # fail before measuring
    grid = timing_grid(args.ports, args.middle, args.dtypes, args.chiplets)
    chiplet_designs = {(p, 3) for p in args.chiplets}
    all_designs = cost_designs(args.ports, args.middle, args.chiplets, synthesis=args.synthesis,
                               flat_max_ports=args.cost_max_ports)

    def synthesized(design):   # flat Fred_m(P) up to --cost-max-ports; hierarchical ones and chiplets always
        return (design["kind"] != "switch" or design["synthesis"] == "hierarchical"
                or design["ports"] <= args.cost_max_ports
                or (design["ports"], design["middle"]) in chiplet_designs)
    cache = args.cache or DEFAULT_CACHE
    if args.fresh and cache.exists():
        shutil.rmtree(cache)
    started = time.time()
    log = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else \
        (lambda *a: print(*a, flush=True))
    not_measured = []
    tasks = []   # (name, not-measured entry on failure, cache kind, function, arguments)
    if not args.report_only:
        done = {point_name(p["ports"], p["middle"], p["dtype"]) for p in load_cached(cache, "timing")}
        designs = [d for d in all_designs if synthesized(d)]
        cost_done = {c["name"]: c for c in load_cached(cache, "cost")}
        # cost first, largest switch first: those are the longest single steps, so starting them
        # early shortens the whole run when several jobs share the work
        ordered = sorted(designs, key=lambda d: (d["kind"] != "switch", -d["ports"], -(d["middle"] or 0)))
        for design in ordered if args.cost != "none" else ():
            pnr = (args.cost == "pnr" and design["synthesis"] == "flat"
                   and (design["kind"] != "switch" or design["ports"] <= args.pnr_max_ports))
            cached = cost_done.get(design["name"])
            seeds = {str(s) for s in args.pnr_seeds}
            if cached is not None and (not pnr or (cached["fmax_mhz"] is not None and
                                                    seeds <= set(cached.get("fmax_seeds", {"1": None})))):
                continue   # cached, and placed with (at least) these seeds or place and route not asked for
            tasks.append((f"cost {design['name']}", None, "cost", _measure_cost,
                          (design, cache, pnr, args.pnr_timeout, tuple(args.pnr_seeds))))
        for ports, middle, dtype in grid:
            name = point_name(ports, middle, dtype)
            if name in done:
                continue
            failed = {"what": f"timing {name}", "reason": None,
                      "command": f"fred characterize --ports {ports} --middle {middle} --dtypes {dtype} --cost none"}
            tasks.append((name, failed, "timing", _measure_point,
                          (ports, middle, dtype, args.length, args.backpressure)))
    from cocotb_tests.lib.seeds import base_seed
    seed = base_seed()   # fixed here (FRED_SEED, else random) so that every worker shares it
    tools = _tool_versions(with_synthesis=any(kind == "cost" for _, _, kind, _, _ in tasks))
    # every record this run measures carries the run (a merged file holds records of several runs)
    this_run = run_record(_command_line(), tools=tools, seed=seed, jobs=args.jobs)
    log(f"characterize: {len(tasks)} points to measure, {args.jobs} at a time, FRED_SEED={seed}, "
        f"commit {this_run['commit']}")
    for index, outcome in _run_tasks(tasks, args.jobs, log, scheduler=args.scheduler, seed=seed):
        name, failed, kind, _, _ = tasks[index]
        if isinstance(outcome, BaseException):
            if not args.keep_going:
                raise outcome
            log(f"{name}: FAILED: {outcome}")
            if failed is not None:
                not_measured.append(dict(failed, reason=f"failed: {str(outcome).splitlines()[0]}"))
            continue
        key, record = outcome
        save_cached(cache, kind, key, dict(record, run=this_run))

    # every cached point goes into the outputs (a later run for one point adds to the rest)
    points = load_cached(cache, "timing")
    costs = load_cached(cache, "cost")
    have = {point_name(p["ports"], p["middle"], p["dtype"]) for p in points}
    for ports, middle, dtype in grid:
        name = point_name(ports, middle, dtype)
        if name not in have and not any(n["what"] == f"timing {name}" for n in not_measured):
            not_measured.append({"what": f"timing {name}", "reason": "not run (time budget of this run)",
                                 "command": f"fred characterize --ports {ports} --middle {middle} --dtypes {dtype} --cost none"})
    grid_doc = {"ports": list(args.ports), "middle": list(args.middle), "dtypes": list(args.dtypes),
                "chiplets": sorted(args.chiplets), "length": args.length, "backpressure": args.backpressure,
                "traffic": ["unicast", "multicast", "reduce", "all_reduce", "mix3d"]}
    if previous is not None:
        old_points, old_costs, old_grid, old_missing = previous
        points = merge_records(old_points, points)
        costs = merge_records(old_costs, costs)
        grid_doc = merge_grid(old_grid, grid_doc)
    costs = sorted(costs, key=lambda c: (c["kind"] == "switch", c["ports"], c["middle"] or 0, c["name"]))
    cost_have = {c["name"]: c for c in costs}
    for design in all_designs:
        c = cost_have.get(design["name"])
        cmd = (f"fred characterize --ports {design['ports']} --middle {design['middle']} --dtypes fp16 "
               f"--cost pnr --pnr-max-ports {design['ports']} --merge"
               if design["kind"] == "switch" else "fred characterize --ports 4 --dtypes fp16 --cost pnr --merge")
        if c is None:
            beyond = not synthesized(design)
            reason = (f"not synthesized: this run synthesized Fred_m(P) only up to P = "
                      f"{args.cost_max_ports} (--cost-max-ports)" if beyond else
                      "not synthesized in this run (--cost none, or it failed: see the log)")
            not_measured.append({"what": f"cost {design['name']}", "reason": reason, "command": cmd})
        elif c["fmax_mhz"] is None and design["synthesis"] == "flat":
            skipped = c.get("fmax_note", "place and route not run") == "place and route not run"
            reason = (f"place and route not run: this run placed Fred_m(P) only up to "
                      f"P = {args.pnr_max_ports} (--pnr-max-ports)" if skipped else c["fmax_note"])
            not_measured.append({"what": f"Fmax {design['name']}", "reason": reason, "command": cmd})
        if design["kind"] == "switch" and not_measured and not_measured[-1]["what"].endswith(design["name"]):
            estimate = composed_cost(cost_have, design["ports"], design["middle"])
            if estimate and estimate["lut_equivalent"] > ECP5_85F_LUTS:
                not_measured[-1]["reason"] += (
                    f"; composed estimate {estimate['lut_equivalent']} LUT eq. exceeds the "
                    f"{ECP5_85F_LUTS} LUT4 of the LFE5U-85F, so it cannot be placed on that device")
    for ports in args.chiplets:   # a chiplet's Fmax: placed if it fits the device, else composed
        name = f"fred_switch_P{ports}m3"
        flat, hier = cost_have.get(name), cost_have.get(name + "_hier")
        size = (flat or hier or {}).get("lut_equivalent")
        if (flat is None or flat["fmax_mhz"] is None) and size is not None and size > ECP5_85F_LUTS \
                and not any(n["what"] == f"Fmax {name}" for n in not_measured):
            not_measured.append({"what": f"Fmax {name}", "command": "none on this device",
                                 "reason": f"cannot be placed: {size} LUT eq. synthesized "
                                           f"({(flat or hier).get('synthesis', 'flat')}) exceed the {ECP5_85F_LUTS} "
                                           "LUT4 of the LFE5U-85F; composed from its parts instead "
                                           "(chiplet_cost, fmax_agreement)"})
    if previous is not None:
        not_measured = merge_not_measured(old_missing, not_measured, points, costs)
    if args.report_only:
        note = (" (assembles the points cached in build/characterize/ by earlier measuring runs; each "
                "point records its packet length and backpressure)")
    elif args.merge:
        shown = args.output.resolve()
        shown = shown.relative_to(ROOT) if shown.is_relative_to(ROOT) else shown   # no checkout path in the file
        note = f" (merged into the records already in {shown}; each record names the run that measured it)"
    else:
        note = ""
    measured_now = bool(tasks)
    document = build_document(
        points, costs, command=_command_line() + note, grid=grid_doc,
        not_measured=not_measured, tools=tools,
        seconds=round(time.time() - started, 1) if measured_now else None,
        jobs=args.jobs if measured_now else None, seed=seed if measured_now else None)
    if args.output.is_file():
        # the packet switch's figures are measured by --packet-switch alone: keep them
        import json
        try:
            kept = json.loads(args.output.read_text()).get("packet_switch")
        except (json.JSONDecodeError, AttributeError):
            kept = None
        if kept is not None:
            document["packet_switch"] = kept
    write_json(document, args.output)
    write_report(document, args.report, args.report.with_suffix(".png"))
    from sysmodel.switch_timing import load_switch_timing
    timing = load_switch_timing(args.output)   # the model must read what we wrote
    if args.json:
        print_json({"output": str(args.output), "report": str(args.report), "switch": document["switch"],
                    "points": len(points), "costs": len(costs), "not_measured": not_measured})
    else:
        print(f"wrote {args.output} ({len(points)} timing points, {len(costs)} cost records) and {args.report}")
        from fred.commands._model_options import switch_timing_text
        print("system model reads:")
        print(switch_timing_text(timing))
    return 0
