"""``fred fabric-iteration``: one training iteration on the circuit FRED fabric RTL or the mesh RTL (the NPUs run
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
    parser.add_argument("--fabric", required=True, type=str.lower, choices=(*FABRICS, "mesh"),
                        help="a FRED variant of the circuit fabric (docs/fabric_rtl.md) or the "
                             "5 x 4 mesh fabric (docs/mesh_rtl.md)")
    parser.add_argument("--workload", required=True, metavar="NAME_OR_FILE",
                        help=f"a preset ({', '.join(WORKLOADS)}) or a workload file (.toml / .json)")
    parser.add_argument("--strategy", default=None,
                        help="MP<a>-DP<b>-PP1 (default: the workload's); one pipeline stage")
    parser.add_argument("--samples-per-dp", type=RANGES["samples_per_dp"], default=None,
                        help="minibatch per DP replica (default: the workload's)")
    parser.add_argument("--scale", type=RANGES["trace_scale"], default=1000.0, metavar="K",
                        help="divide every compute time and every collective's bytes by K "
                             "(default 1000)")
    parser.add_argument("--no-overlap", action="store_true",
                        help="the serialised iteration (required: the circuit fabric runs only it)")
    parser.add_argument("--model-only", action="store_true",
                        help="the model's side and the RTL's inputs only (no Verilator)")
    add_platform_arguments(parser)


def run(args) -> int:
    from hdl.contracts.placement import parse_strategy
    from studies.iteration_case import build_iteration_case, run_iteration_case
    from sysmodel.workload_file import get_workload
    case = build_iteration_case(
        fabric=args.fabric, workload=get_workload(args.workload), platform=model_platform(args),
        strategy=parse_strategy(args.strategy) if args.strategy else None,
        samples_per_dp=args.samples_per_dp, scale=args.scale, overlap=not args.no_overlap,
        characterization=args.characterization)
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
                       title=f"{case.fabric}: {case.description} (serialised)"))
    if case.collective_model:
        c = case.collective_model
        print(f"collective: {c['label']}, {c['size_flits']} flits per NPU, {c['algorithm']}")
    if case.rtl is not None:
        print(f"RTL: {case.rtl.cycles} cycles in {case.rtl.sim_s:.2f} s ({case.rtl.cycles_per_s:,.0f} "
              f"cycles/s), build {case.rtl.build_s:.1f} s; every flit checked")
    return 0

