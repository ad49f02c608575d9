"""``fred fabric-iteration``: one training iteration on the FRED fabric RTL (circuit or packet switches) or the mesh RTL (the NPUs run
the model's exported trace) and on the system model of the same fabric, side by side
(docs/fabric_iteration.md)."""

from __future__ import annotations

import argparse

from fred.cli import print_json
from fred.commands._model_options import add_platform_arguments, model_platform
from fred.commands._option_types import RANGES
from fred.table import format_table

HELP = "run a training iteration (overlapped or serialised) on the FRED or mesh fabric RTL and on the model"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from hdl.contracts.fabric import FABRICS
    from sysmodel.workloads import WORKLOADS
    parser.add_argument("--fabric", type=str.lower, choices=(*FABRICS, "mesh"),
                        help="a FRED variant of the circuit fabric (docs/fabric_rtl.md) or the "
                             "5 x 4 mesh fabric (docs/mesh_rtl.md)")
    parser.add_argument("--switch", choices=("circuit", "packet"), default="circuit",
                        help="the FRED fabric's switches: circuit (phase sequencers; the default, "
                             "as in fred fabric-sim: every iteration case runs on it) or packet "
                             "(the paper's switch, PacketFabricTop: phases selected by the packet "
                             "headers, endpoint algorithms routed online, the hierarchical "
                             "all-reduce with a barrier per stage, phase orders loaded once "
                             "for the whole iteration)")
    parser.add_argument("--workload", metavar="NAME_OR_FILE",
                        help=f"a preset ({', '.join(WORKLOADS)}) or a workload file (.toml / .json)")
    parser.add_argument("--strategy", default=None,
                        help="MP<a>-DP<b>-PP1 (default: the workload's); one pipeline stage")
    parser.add_argument("--samples-per-dp", type=RANGES["samples_per_dp"], default=None,
                        help="minibatch per DP replica (default: the workload's)")
    parser.add_argument("--scale", type=RANGES["trace_scale"], default=1000.0, metavar="K",
                        help="divide every compute time and every collective's bytes by K "
                             "(default 1000)")
    parser.add_argument("--no-overlap", action="store_true",
                        help="the serialised iteration (the table's; default: overlapped, compute under "
                             "communication, one collective at a time per NPU)")
    parser.add_argument("--simulator", choices=("lockstep", "cocotb"), default=None,
                        help="the RTL simulator: lockstep (the default: the FRED fabric cut at its uplinks, "
                             "the mesh between two columns, two Verilated parts on two cores) or cocotb (one "
                             "model); the same cycles and node times")
    parser.add_argument("--pgo", action="store_true",
                        help="a profile-guided build of the lock-step simulator (GCC -fprofile-use, "
                             "trained on this run the first time its top is built, cached per top): "
                             "the same cycles and checks, about twice the cycles/s, a build several "
                             "minutes longer; with --table every row (its stored row is the "
                             "profile-guided one)")
    parser.add_argument("--model-only", action="store_true",
                        help="the model's side and the RTL's inputs only (no Verilator)")
    parser.add_argument("--table", action="store_true",
                        help="instead of one case: every case of the iteration table "
                             "(studies.iteration_table.ITERATION_CASES; at --scale and --samples-per-dp unless the case "
                             "names its own) on its mesh and circuit FRED fabrics, and again on its packet "
                             "FRED fabrics where their iteration runs it (its own section; the refused "
                             "ones named), written into --output (make fabric-iteration)")
    parser.add_argument("--only", action="append", metavar="TERM[,TERM...]",
                        help="with --table or --list-cases: only the cases these terms select "
                             "(repeatable): KEY=VALUE with KEY workload, strategy, scale, fabric or "
                             "switch, or a bare value (resnet-152, MP4-DP5, 1000, fred-b, packet); values "
                             "of one key are alternatives, different keys must all hold "
                             "(studies/iteration_select.py)")
    parser.add_argument("--list-cases", action="store_true",
                        help="list the iteration table's cases (those --only selects) with the model's "
                             "iteration cycles and whether the row store holds their row; no RTL run")
    parser.add_argument("--rows", default=None, metavar="FILE",
                        help="with --table or --list-cases: the store of finished rows (JSON lines; "
                             "default results/fabric-iteration-rows.jsonl): each row is appended as "
                             "soon as it is done, and a row whose fingerprint (code, tools, traces, "
                             "programs, platform) matches is taken from it instead of run again")
    parser.add_argument("--output", default="docs/fabric_validation.md",
                        help="with --table: the Markdown file whose fabric-iteration block is "
                             "replaced (default docs/fabric_validation.md)")
    add_platform_arguments(parser)


def run(args) -> int:
    from hdl.contracts.errors import FredError
    from hdl.contracts.placement import parse_strategy
    from studies.iteration_case import build_iteration_case, run_iteration_case
    from sysmodel.workload_file import get_workload
    if args.table or args.list_cases:
        return _table(args)
    if args.only or args.rows:
        raise FredError("--only and --rows go with --table or --list-cases")
    if args.pgo and args.model_only:
        raise FredError("--pgo builds the RTL's simulator; --model-only runs no RTL")
    if args.fabric is None or args.workload is None:
        raise FredError("give --fabric and --workload (or --table for the iteration table)")
    case = build_iteration_case(
        fabric=args.fabric, workload=get_workload(args.workload), platform=model_platform(args),
        strategy=parse_strategy(args.strategy) if args.strategy else None,
        samples_per_dp=args.samples_per_dp, scale=args.scale, overlap=not args.no_overlap,
        characterization=args.characterization, switch=args.switch)
    if not args.model_only:
        run_iteration_case(case, simulator=args.simulator, pgo=args.pgo)
    if args.json:
        print_json(case.to_dict())
        return 0
    model, rtl = case.model, case.rtl_figures
    ratios = case.ratios()

    def row(label, model_value, rtl_value, ratio_key=None):
        ratio = ratios.get(ratio_key)
        return [label, f"{model_value:.1f}", "-" if rtl_value is None else str(rtl_value),
                "" if ratio is None else f"{ratio:.3f}"]

    rows = [row("iteration", model["iteration_cycles"], rtl.get("iteration_cycles"), "iteration"),
            row("compute", model["compute_cycles"], rtl.get("compute_cycles"))]
    for cls in sorted(model["comm_busy_cycles"]):
        rows.append(row(f"{cls} communication", model["comm_busy_cycles"][cls],
                        rtl.get("comm_busy_cycles", {}).get(cls), f"comm_{cls}"))
        rows.append(row(f"{cls} exposed", model["comm_exposed_cycles"].get(cls, 0),
                        rtl.get("comm_exposed_cycles", {}).get(cls)))
    print(format_table(["cycles", "model", "RTL", "RTL/model"], rows,
                       title=f"{case.fabric}{' (packet switches)' if case.switch == 'packet' else ''}: "
                             f"{case.description} ({'overlapped: compute under communication' if case.overlap else 'serialised'}, "
                             f"one collective at a time)"))
    if case.collective_model:
        c = case.collective_model
        if "collectives" in c:
            print(f"collectives: {c['label']} ({c['size_flits']} flits per NPU in all), {c['algorithm']}")
        else:
            print(f"collective: {c['label']}, {c['size_flits']} flits per NPU, {c['algorithm']}")
    if case.rtl_missing:
        print(f"RTL: not runnable yet: {case.rtl_missing}")
    if case.rtl is not None:
        print(f"RTL: {case.rtl.cycles} cycles in {case.rtl.sim_s:.2f} s ({case.rtl.cycles_per_s:,.0f} "
              f"cycles/s, {case.rtl.simulator} simulator), build {case.rtl.build_s:.1f} s; every flit checked")
        if case.rtl.load_stall:
            print(f"program loads: collective nodes waited {max(case.rtl.load_stall.values())} cycles "
                  f"in all for their programs (the most of any NPU)")
    return 0



def _table(args) -> int:
    """``--table`` and ``--list-cases``: the iteration table's cases (``--only``'s), model and
    RTL, on the mesh and circuit FRED fabrics and again on each case's packet FRED fabrics where
    their iteration runs the case; rows from the store (``--rows``) where their fingerprint
    matches, every new row stored as soon as it is done (studies/iteration_table_run.py); the
    block in ``args.output`` from all of them."""
    from pathlib import Path

    from hdl.contracts.errors import FredError
    from hdl.contracts.placement import parse_strategy
    from studies import iteration_case, iteration_table
    from studies.iteration_rows import DEFAULT_ROWS, RowStore
    from studies.iteration_select import select_units, table_units
    from studies.iteration_table_run import list_cases, run_table
    from studies.report import check_writable
    from sysmodel.workload_file import get_workload
    if (not args.no_overlap or args.model_only or args.fabric or args.workload or args.strategy
            or args.switch != "circuit" or args.simulator or (args.table and args.list_cases)):
        raise FredError("--table and --list-cases take the table's own cases: give --no-overlap, one of "
                        "them, and no --fabric, --workload, --strategy, --switch, --simulator or --model-only "
                        "(each row runs on its fabric's default simulator; --pgo builds every one profile-guided)")
    units = table_units(iteration_table.ITERATION_CASES, args.scale)
    chosen = select_units(units, args.only)
    store = RowStore(args.rows or DEFAULT_ROWS)
    platform = model_platform(args)

    def build(unit):
        return iteration_case.build_iteration_case(
            fabric=unit.fabric, workload=get_workload(unit.workload), platform=platform,
            strategy=parse_strategy(unit.strategy), samples_per_dp=unit.samples or args.samples_per_dp,
            scale=unit.scale, characterization=args.characterization, switch=unit.switch)

    files = (args.platform, args.characterization)
    if args.list_cases:
        return _list(list_cases(chosen, build, store, platform_files=files, pgo=args.pgo), args)
    output = Path(args.output)
    check_writable(output)
    # every case is validated, modelled and fingerprinted before the first build; the circuit
    # fabric runs every case (an error is the command's), the packet fabric's refusals are
    # lines of the block
    result = run_table(units, chosen, build, lambda case: iteration_case.run_iteration_case(case, pgo=args.pgo),
                       store, platform_files=files, pgo=args.pgo, report=(lambda line: None) if args.json else
                       (lambda line: print(line, flush=True)))
    command = (f"fred fabric-iteration --table --no-overlap --scale {args.scale:g}"
               + "".join(f" --only {t}" for t in args.only or ()) + (f" --rows {args.rows}" if args.rows else "")
               + (" --pgo" if args.pgo else ""))
    iteration_table.write_iteration_table(result.rows, output, command, failed=result.failed,
                                          refused=result.refused, missing=result.missing)
    if args.json:
        print_json({"rows": result.rows, "failed": result.failed, "refused": result.refused,
                    "missing": result.missing, "output": str(output), "store": str(store.path)})
    else:
        print(f"wrote {output}: {result.ran} row(s) run, {result.reused} from {store.path}"
              + (f"; {len(result.failed)} case(s) failed" if result.failed else "")
              + (f"; {len(result.missing)} case(s) without a row" if result.missing else ""))
    return 1 if result.failed else 0


def _list(cases, args) -> int:
    """Print ``--list-cases``' cases (studies.iteration_table_run.list_cases)."""
    if args.json:
        print_json(cases)
        return 0
    rows = [[c["case"], "-" if c["model_cycles"] is None else f"{c['model_cycles']:,.0f}",
             "-" if c["collectives"] is None else str(c["collectives"]),
             f"refused: {_short(c['refused'])}" if c["refused"] else (f"stored {c['stored']}" if c["stored"] else "to run")]
            for c in cases]
    print(format_table(["case", "model cycles", "collectives / NPU", "row"], rows,
                       title=f"{len(cases)} case(s) of the iteration table"))
    return 0


def _short(text: str, most: int = 90) -> str:
    """``text`` cut to ``most`` characters for a table cell (``--json`` gives it whole)."""
    return text if len(text) <= most else text[:most].rstrip() + "... (--json: in full)"
