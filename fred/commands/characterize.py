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
import sys
import time
from pathlib import Path

from fred.cli import print_json
from hdl.contracts.errors import FredError
from fred.commands._option_types import RANGES

HELP = "measure switch latency/throughput/phase-switch/config-load (Verilator) and cost (ECP5)"

ROOT = Path(__file__).resolve().parents[2]


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ports", type=RANGES["characterize_ports"], default=(4, 8, 16), help="P values (default 4,8,16)")
    from studies.characterization.grid import CHIPLETS
    parser.add_argument("--chiplets", type=RANGES["characterize_chiplets"], default=CHIPLETS,
                        help="sizes P of the wafer's chiplets, measured as Fred_3(P) fp16 on top of the "
                             "grid and always synthesized (default "
                             + ",".join(str(p) for p in CHIPLETS)
                             + ": the paper's Fred_3(12) and Fred_3(10); '' for none)")
    parser.add_argument("--middle", type=RANGES["middles"], default=(2, 3), help="m values (default 2,3)")
    from studies.characterization.grid import DTYPES
    parser.add_argument("--dtypes", type=_names, default=DTYPES,
                        help=f"element types (default {','.join(DTYPES)})")
    parser.add_argument("--length", type=RANGES["length"], default=128, help="flits per packet (default 128)")
    parser.add_argument("--backpressure", type=RANGES["probability"], default=0.3,
                        help="probability an output holds ready low per cycle in the backpressure runs")
    parser.add_argument("--cost", choices=("none", "synth", "pnr"), default="pnr",
                        help="cost: none, yosys only, or yosys + nextpnr (default pnr)")
    parser.add_argument("--cost-max-ports", type=RANGES["route_ports"], default=8,
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
                             "studies/characterization/preemption.py) on its reference point and "
                             "on every switch the RTL fabrics and the paper platform build "
                             "('preemption_points'), and write them as the 'packet_switch' block "
                             "of the file at --output, which must exist; the rest of the file is kept")
    parser.add_argument("--pnr-max-ports", type=RANGES["route_ports"], default=4,
                        help="place and route Fred_m(P) only up to this P (default 4: nextpnr on "
                             "Fred_m(8) takes hours on a 2-core machine, and Fred_m(16) fp16 x 4 "
                             "lanes does not fit an LFE5U-85F)")
    parser.add_argument("--pnr-seeds", type=RANGES["seeds"], default=(1,),
                        help="nextpnr placement seeds per design; Fmax is the median seed's "
                             "(default 1: one seed)")
    parser.add_argument("--pnr-timeout", type=RANGES["timeout_s"], default=None,
                        help="give up place and route of one design after this many seconds "
                             "(recorded as not measured; default: no limit)")
    parser.add_argument("--jobs", "-j", type=RANGES["jobs"], default=os.cpu_count() or 1,
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


def _run_packet_switch(args) -> int:
    """``--packet-switch``: the preemption figures into the ``packet_switch`` block."""
    from studies.characterization.pipeline import add_packet_switch
    block = add_packet_switch(args.output, _command_line())
    if args.json:
        print_json({"output": str(args.output), "packet_switch": block})
    else:
        print(f"wrote the packet_switch block of {args.output}:")
        for key, value in block.items():
            if key not in ("generated_by",):
                print(f"  {key}: {value}")
    return 0


def _options(args):
    from studies.characterization.pipeline import CharacterizeOptions
    fields = CharacterizeOptions.__dataclass_fields__
    return CharacterizeOptions(**{k: getattr(args, k) for k in fields if k != "command"},
                               command=_command_line())


def run(args) -> int:
    if args.packet_switch:
        return _run_packet_switch(args)
    from studies.characterization.pipeline import run_characterization
    from fred.commands._option_types import output_path   # before hours of work, not after
    output_path(args.output, "--output")
    output_path(args.report, "--report")
    log = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else \
        (lambda *a: print(*a, flush=True))

    def run_tasks(tasks, jobs, log, *, seed):
        return _run_tasks(tasks, jobs, log, scheduler=args.scheduler, seed=seed)
    result = run_characterization(_options(args), run_tasks=run_tasks, log=log)
    from sysmodel.switch_timing import load_switch_timing
    timing = load_switch_timing(result.output)   # the model must read what we wrote
    if args.json:
        print_json({"output": str(result.output), "report": str(result.report),
                    "switch": result.document["switch"], "points": result.points,
                    "costs": result.costs, "not_measured": result.not_measured})
    else:
        print(f"wrote {result.output} ({result.points} timing points, {result.costs} cost records) "
              f"and {result.report}")
        from fred.commands._model_options import switch_timing_text
        print("system model reads:")
        print(switch_timing_text(timing))
    return 0
