"""``fred fabric-iteration``: one training iteration on the FRED fabric RTL (circuit or packet switches) or the mesh RTL (the NPUs run
the model's exported trace) and on the system model of the same fabric, side by side
(docs/fabric_iteration.md)."""

from __future__ import annotations

import argparse

from fred.cli import print_json
from fred.commands._model_options import add_platform_arguments, model_platform
from fred.commands._option_types import RANGES
from fred.table import format_table

HELP = "run a serialised training iteration on the FRED or mesh fabric RTL and on the model"


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
                        help="the serialised iteration (required: the fabrics' trace sequencers run only it)")
    parser.add_argument("--model-only", action="store_true",
                        help="the model's side and the RTL's inputs only (no Verilator)")
    parser.add_argument("--table", action="store_true",
                        help="instead of one case: every case of the iteration table "
                             "(studies.iteration_table.ITERATION_CASES; at --scale and --samples-per-dp unless the case "
                             "names its own) on its mesh and circuit FRED fabrics, and again on its packet "
                             "FRED fabrics where their iteration runs it (its own section; the refused "
                             "ones named), written into --output (make fabric-iteration)")
    parser.add_argument("--output", default="docs/fabric_validation.md",
                        help="with --table: the Markdown file whose fabric-iteration block is "
                             "replaced (default docs/fabric_validation.md)")
    add_platform_arguments(parser)


def run(args) -> int:
    from hdl.contracts.errors import FredError
    from hdl.contracts.placement import parse_strategy
    from studies.iteration_case import build_iteration_case, run_iteration_case
    from sysmodel.workload_file import get_workload
    if args.table:
        return _table(args)
    if args.fabric is None or args.workload is None:
        raise FredError("give --fabric and --workload (or --table for the iteration table)")
    case = build_iteration_case(
        fabric=args.fabric, workload=get_workload(args.workload), platform=model_platform(args),
        strategy=parse_strategy(args.strategy) if args.strategy else None,
        samples_per_dp=args.samples_per_dp, scale=args.scale, overlap=not args.no_overlap,
        characterization=args.characterization, switch=args.switch)
    if not args.model_only:
        run_iteration_case(case)
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
                             f"{case.description} (serialised, one collective at a time)"))
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
              f"cycles/s), build {case.rtl.build_s:.1f} s; every flit checked")
        if case.rtl.load_stall:
            print(f"program loads: collective nodes waited {max(case.rtl.load_stall.values())} cycles "
                  f"in all for their programs (the most of any NPU)")
    return 0



def _table(args) -> int:
    """Every case of the iteration table, model and RTL, on the mesh and circuit FRED fabrics
    and again on each case's packet FRED fabrics where their iteration runs the case (the cases
    it refuses before any build, ``rtl_missing`` included, are named in the block),
    and the block in ``args.output``."""
    from pathlib import Path

    from hdl.contracts.errors import FredError
    from hdl.contracts.placement import parse_strategy
    from studies.iteration_case import build_iteration_case, run_iteration_case
    from studies.iteration_table import iteration_row, table_cases, write_iteration_table
    from studies.report import check_writable
    from sysmodel.workload_file import get_workload
    if (not args.no_overlap or args.model_only or args.fabric or args.workload or args.strategy
            or args.switch != "circuit"):
        raise FredError("--table runs the table's own cases: give --no-overlap, and no --fabric, "
                        "--workload, --strategy, --switch or --model-only")
    output = Path(args.output)
    check_writable(output)
    def build(workload, strategy, fabric, scale, samples, switch):
        return build_iteration_case(fabric=fabric, workload=get_workload(workload), platform=model_platform(args),
                                    strategy=parse_strategy(strategy), samples_per_dp=samples or args.samples_per_dp,
                                    scale=scale or args.scale, characterization=args.characterization, switch=switch)

    # every case is validated and modelled before the first build; the circuit fabric runs
    # every case (an error is the command's), the packet fabric's refusals are rows of the block
    cases, refused = table_cases(build, args.scale)
    rows, failed = [], []
    for case in cases:
        try:
            run_iteration_case(case)
        except FredError as exc:     # a stalled or wrong run is a row of the block, not the end
            failed.append({"workload": f"{case.description.split(' 1f1b')[0]}, K = {case.scale:g}",
                           "fabric": case.fabric, "switch": case.switch, "error": str(exc)})
            if not args.json:
                print(f"{failed[-1]['workload']} on {case.fabric}: FAILED: {exc}", flush=True)
            continue
        rows.append(iteration_row(case))
        if not args.json:
            r = rows[-1]
            print(f"{r['workload']} on {r['fabric']}{' (packet)' if r['switch'] == 'packet' else ''}: "
                  f"model {r['model_iteration']:.1f}, RTL "
                  f"{r['rtl_iteration']} cycles ({r['iteration_ratio']:.4f})", flush=True)
    command = f"fred fabric-iteration --table --no-overlap --scale {args.scale:g}"
    write_iteration_table(rows, output, command, failed=failed, refused=refused)
    if args.json:
        print_json({"rows": rows, "failed": failed, "refused": refused, "output": str(output)})
    else:
        print(f"wrote {output}" + (f"; {len(failed)} case(s) failed" if failed else ""))
    return 1 if failed else 0
