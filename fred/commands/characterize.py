"""``fred characterize``: measure switch timings (Verilator) and cost (yosys/nextpnr) as data.

Writes ``data/characterization.json`` (read by the system model, ``sysmodel/switch_timing.py``)
and ``docs/characterization.md`` + ``docs/characterization.png``. Each measured point is cached
in ``build/characterize/`` as soon as it is done (``--fresh`` clears the cache; ``--report-only``
assembles the outputs from the cache without measuring anything).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import time
from pathlib import Path

from fred.cli import print_json
from fred.errors import FredError

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
    parser.add_argument("--middle", type=_ints, default=(2, 3), help="m values (default 2,3)")
    parser.add_argument("--dtypes", type=_names, default=("fp16", "bf16", "fp32", "int32"),
                        help="element types (default fp16,bf16,fp32,int32)")
    parser.add_argument("--length", type=int, default=128, help="flits per packet (default 128)")
    parser.add_argument("--backpressure", type=float, default=0.3,
                        help="probability an output holds ready low per cycle in the backpressure runs")
    parser.add_argument("--cost", choices=("none", "synth", "pnr"), default="pnr",
                        help="cost: none, yosys only, or yosys + nextpnr (default pnr)")
    parser.add_argument("--cost-max-ports", type=int, default=16,
                        help="synthesize Fred_m(P) only up to this P (microswitches always)")
    parser.add_argument("--pnr-max-ports", type=int, default=8,
                        help="place and route Fred_m(P) only up to this P (default 8: Fred_m(16) "
                             "fp16 x 4 lanes does not fit an LFE5U-85F, see the report)")
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


def run(args) -> int:
    from hdl.characterize.cost import cost_designs, measure_cost, tool_versions
    from hdl.characterize.grid import DEFAULT_CACHE, load_cached, point_name, save_cached, timing_grid
    from hdl.characterize.report import build_document, composed_cost, write_json, write_report
    from hdl.characterize.timing import measure_point

    if args.length < 2:
        raise FredError(f"--length must be >= 2 flits, got {args.length}")
    if not 0.0 < args.backpressure < 1.0:
        raise FredError(f"--backpressure must be in (0, 1), got {args.backpressure}")
    grid = timing_grid(args.ports, args.middle, args.dtypes)
    cache = args.cache or DEFAULT_CACHE
    if args.fresh and cache.exists():
        shutil.rmtree(cache)
    started = time.time()
    log = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else \
        (lambda *a: print(*a, flush=True))
    not_measured = []
    done = {point_name(p["ports"], p["middle"], p["dtype"]) for p in load_cached(cache, "timing")}
    for ports, middle, dtype in grid:
        name = point_name(ports, middle, dtype)
        if name in done or args.report_only:
            continue
        try:
            point = measure_point(ports, middle, dtype, length=args.length,
                                  backpressure=args.backpressure, log=log)
        except Exception as exc:
            if not args.keep_going:
                raise
            log(f"{name}: FAILED: {exc}")
            not_measured.append({"what": f"timing {name}", "reason": f"failed: {str(exc).splitlines()[0]}",
                                 "command": f"fred characterize --ports {ports} --middle {middle} --dtypes {dtype} --cost none"})
            continue
        save_cached(cache, "timing", name, point)

    designs = [d for d in cost_designs(args.ports, args.middle)
               if d["kind"] != "switch" or d["ports"] <= args.cost_max_ports]
    cost_done = {c["name"]: c for c in load_cached(cache, "cost")}
    if args.cost != "none" and not args.report_only:
        for design in designs:
            pnr = args.cost == "pnr" and (design["kind"] != "switch" or design["ports"] <= args.pnr_max_ports)
            cached = cost_done.get(design["name"])
            if cached is not None and (cached["fmax_mhz"] is not None or not pnr):
                continue   # cached, and place and route was done or is not asked for
            try:
                record = measure_cost(design, folder=cache / "costwork" / design["name"], pnr=pnr, log=log)
            except Exception as exc:
                if not args.keep_going:
                    raise
                log(f"cost {design['name']}: FAILED: {exc}")
                continue
            save_cached(cache, "cost", design["name"], record)

    # every cached point goes into the outputs (a later run for one point adds to the rest)
    points = load_cached(cache, "timing")
    costs = sorted(load_cached(cache, "cost"), key=lambda c: (c["kind"] == "switch", c["ports"], c["middle"] or 0, c["name"]))
    have = {point_name(p["ports"], p["middle"], p["dtype"]) for p in points}
    for ports, middle, dtype in grid:
        name = point_name(ports, middle, dtype)
        if name not in have and not any(n["what"] == f"timing {name}" for n in not_measured):
            not_measured.append({"what": f"timing {name}", "reason": "not run (time budget of this run)",
                                 "command": f"fred characterize --ports {ports} --middle {middle} --dtypes {dtype} --cost none"})
    cost_have = {c["name"]: c for c in costs}
    for design in cost_designs(args.ports, args.middle):
        c = cost_have.get(design["name"])
        cmd = (f"fred characterize --ports {design['ports']} --middle {design['middle']} --dtypes fp16 "
               f"--cost pnr --pnr-max-ports {design['ports']}"
               if design["kind"] == "switch" else "fred characterize --ports 4 --dtypes fp16 --cost pnr")
        if c is None:
            not_measured.append({"what": f"cost {design['name']}",
                                 "reason": "not run in this run's time: yosys + nextpnr take about 4 min "
                                           "per fp16 x 4 adder on this shared 2-core machine",
                                 "command": cmd})
        elif c["fmax_mhz"] is None:
            not_measured.append({"what": f"Fmax {design['name']}",
                                 "reason": "place and route not run (time budget)", "command": cmd})
        if design["kind"] == "switch" and (c is None or c["fmax_mhz"] is None):
            estimate = composed_cost(cost_have, design["ports"], design["middle"])
            if estimate and estimate["lut_equivalent"] > ECP5_85F_LUTS:
                not_measured[-1]["reason"] += (
                    f"; composed estimate {estimate['lut_equivalent']} LUT eq. exceeds the "
                    f"{ECP5_85F_LUTS} LUT4 of the LFE5U-85F, so it cannot be placed on that device")
    try:
        from fred.toolchain import setup_verilator
        major, minor = setup_verilator().version
        tools = {"verilator": f"{major}.{minor:03d}"}
    except Exception as exc:  # the document still records why
        tools = {"verilator": f"unknown ({exc})"}
    import amaranth
    import cocotb
    tools.update({"amaranth": amaranth.__version__, "cocotb": cocotb.__version__})
    if costs:
        tools.update(tool_versions())
    document = build_document(
        points, costs, command=_command_line() + (
            " (assembles the points cached in build/characterize/ by earlier measuring runs; each "
            "point records its packet length and backpressure)" if args.report_only else ""),
        grid={"ports": list(args.ports), "middle": list(args.middle), "dtypes": list(args.dtypes),
              "length": args.length, "backpressure": args.backpressure,
              "traffic": ["unicast", "multicast", "reduce", "all_reduce", "mix3d"]},
        not_measured=not_measured, tools=tools,
        seconds=None if args.report_only else round(time.time() - started, 1))
    write_json(document, args.output)
    write_report(document, args.report, args.report.with_suffix(".png"))
    from sysmodel.switch_timing import load_switch_timing
    timing = load_switch_timing(args.output)   # the model must accept what we wrote
    if args.json:
        print_json({"output": str(args.output), "report": str(args.report), "switch": document["switch"],
                    "points": len(points), "costs": len(costs), "not_measured": not_measured})
    else:
        print(f"wrote {args.output} ({len(points)} timing points, {len(costs)} cost records) and {args.report}")
        print(f"system model reads: {timing}")
    return 0
